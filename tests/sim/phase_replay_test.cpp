// Replaying repeated phases: the network's idle deltas and detached batches, the fingerprint of
// what the runner sees, and bucketed training runs replayed against the same runs simulated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "sim/phase_replay.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/training_job.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {
namespace {

// Three links of 1, 2 and 4 B/s; flows of integer sizes over one or two of them.
struct Flows {
  std::vector<std::vector<uint32_t>> routes = {{0}, {0, 1}, {1, 2}, {2}, {0, 2}};
  std::vector<double> sizes = {7, 3, 11, 5, 2};
  void start(FlowNetwork& net, int* done) const {
    for (size_t i = 0; i < routes.size(); ++i)
      net.start_flow(routes[i], sizes[i], Duration::from_ps(1000), [done] { ++*done; });
  }
};

std::vector<LinkSpec> three_links() { return {{1.0}, {2.0}, {4.0}}; }

void expect_same_stats(FlowNetwork& a, FlowNetwork& b) {
  const auto& x = a.link_stats();
  const auto& y = b.link_stats();
  ASSERT_EQ(x.size(), y.size());
  for (size_t l = 0; l < x.size(); ++l) {
    SCOPED_TRACE(fmt::format("link {}", l));
    EXPECT_EQ(std::memcmp(&x[l].bytes, &y[l].bytes, sizeof(double)), 0) << x[l].bytes << " vs " << y[l].bytes;
    EXPECT_EQ(std::memcmp(&x[l].busy_s, &y[l].busy_s, sizeof(double)), 0) << x[l].busy_s << " vs " << y[l].busy_s;
    EXPECT_EQ(x[l].max_flows, y[l].max_flows);
  }
  EXPECT_EQ(a.counters().flows_started, b.counters().flows_started);
  EXPECT_EQ(a.counters().solves, b.counters().solves);
  EXPECT_EQ(a.counters().rate_changes, b.counters().rate_changes);
  EXPECT_EQ(a.counters().peak_active_flows, b.counters().peak_active_flows);
  EXPECT_EQ(a.max_link_load(), b.max_link_load());
}

TEST(NetworkDelta, AddingARunsDeltaEqualsRunningItsFlowsAgain) {
  // Network a runs the flows at t = 0 and again at t = 100 s; network b runs them once and adds
  // their delta at t = 100 s. Every counter must be the same bits.
  const Flows flows;
  Engine ea, eb;
  FlowNetwork a(ea, three_links()), b(eb, three_links());
  int done_a = 0, done_b = 0;
  const SimTime again = SimTime::zero() + Duration::from_seconds(100);
  flows.start(a, &done_a);
  ea.schedule_at(again, [&] { flows.start(a, &done_a); });
  ea.run();
  const IdleMark mark = b.idle_mark();
  flows.start(b, &done_b);
  eb.run();
  const auto delta = b.delta_since(mark);
  ASSERT_TRUE(delta.has_value());
  EXPECT_EQ(delta->counters.flows_started, 5u);
  EXPECT_EQ(delta->links.size(), 3u);
  EXPECT_EQ(delta->links[0].bytes, 7.0 + 3 + 2);  // the sizes of the flows that crossed link 0
  eb.schedule_at(again, [&] {
    ASSERT_TRUE(b.can_add(*delta));
    b.add_delta(*delta);
  });
  eb.run();
  EXPECT_EQ(done_a, 10);
  EXPECT_EQ(done_b, 5);
  expect_same_stats(a, b);
  // Fractional sizes cannot be added again exactly: no delta.
  Engine ec;
  FlowNetwork c(ec, three_links());
  const IdleMark m = c.idle_mark();
  c.start_flow(std::vector<uint32_t>{0}, 2.5, Duration::zero(), [] {});
  ec.run();
  EXPECT_FALSE(c.delta_since(m).has_value());
}

TEST(NetworkDelta, DetachedBatchesFireAsNoOpsAndLaterFlowsGetTheirOwn) {
  // On a 1 B/s link, A (10 B) starts at 0 and is due at 10 s; B (2 B) arrives at 2 s: A is then due
  // at 18 s, B at 6 s; alone again A is due at 12 s. Batches at 10 and 18 s go stale. C (6 B),
  // started when A ends at 12 s, is due at 18 s: with the batches detached it gets its own batch
  // (one more event), otherwise it joins the stale one. It ends at 18 s either way.
  for (bool detach : {false, true}) {
    SCOPED_TRACE(detach ? "detached" : "attached");
    Engine e;
    FlowNetwork net(e, {{1.0}});
    const std::vector<uint32_t> route = {0};
    SimTime c_done;
    net.start_flow(route, 10, Duration::zero(), [&] {
      EXPECT_EQ(e.now(), SimTime::zero() + Duration::from_seconds(12));
      EXPECT_TRUE(net.idle());
      if (detach) {
        EXPECT_TRUE(net.detach_batches());
        EXPECT_TRUE(net.detach_batches());  // twice: nothing left to detach, still true
      }
      net.start_flow(route, 6, Duration::zero(), [&] { c_done = e.now(); });
      EXPECT_FALSE(net.detach_batches());  // a flow in flight
    });
    e.schedule_at(SimTime::zero() + Duration::from_seconds(2),
                  [&] { net.start_flow(route, 2, Duration::zero(), [] {}); });
    e.run();
    EXPECT_EQ(c_done, SimTime::zero() + Duration::from_seconds(18));
    // Events: the arrival at 2 s, batches at 6, 10 (stale), 12, 18 (stale, and C's when attached),
    // and C's own batch at 18 s when detached.
    EXPECT_EQ(e.events_processed(), detach ? 6u : 5u);
  }
}

// A ring all-reduce of `elements` on `ranks` with kernels costing their launch (1 us) and bytes.
struct RingPhase {
  uint32_t ranks = 4;
  uint64_t elements = 4096;
  uint32_t bytes_per_element = 4;
  std::unique_ptr<topo::ScheduleGenerator> make() const {
    return topo::make_ring(topo::CollectiveOp::kAllReduce, ranks, elements, {}, false);
  }
  ScheduleBinder binder() const {
    return [bpe = bytes_per_element](topo::Schedule& s, topo::OpId first, topo::OpId end) {
      for (topo::OpId id = first; id < end; ++id) {
        topo::Op& op = s.mutable_op(id);
        op.bytes = uint64_t{bpe} * s.op_elements(op);
      }
    };
  }
};

KernelCostModel roofline(double Bps) {
  KernelCostModel m;
  m.memory_Bps = Bps;
  m.launch = Duration::from_seconds(1e-6);
  return m;
}

PhaseDigest digest(const topo::Topology& t, const RingPhase& p, std::vector<topo::Rank> map, uint64_t salt,
                   const KernelCostModel& costs) {
  auto g = p.make();
  return fingerprint_schedule(*g, p.binder(), PhaseFingerprint(t, std::move(map), salt, costs));
}

topo::Topology fat_tree16() {
  topo::ClusterSpec spec;
  spec.topology = "fat_tree";
  spec.k = 4;
  spec.nodes = 16;
  auto t = topo::build_topology(spec);
  CCSIM_CHECK(t.ok(), "{}", t.status().message());
  return std::move(*t);
}

TEST(PhaseFingerprint, ChangesWithWhatTheRunnerSeesAndOnlyWithThat) {
  const topo::Topology star = topo::make_star(4, 1e9, 1e-6);
  const RingPhase p;
  const KernelCostModel costs = roofline(1e12);
  const PhaseDigest base = digest(star, p, {}, 0, costs);
  EXPECT_EQ(digest(star, p, {}, 0, costs), base);
  // A star has one route per pair: the ECMP salt changes nothing the runner sees.
  EXPECT_EQ(digest(star, p, {}, 12345, costs), base);
  RingPhase wider = p;
  wider.bytes_per_element = 2;  // every transfer's and kernel's bytes
  EXPECT_NE(digest(star, wider, {}, 0, costs), base);
  RingPhase longer = p;
  longer.elements = 4100;
  EXPECT_NE(digest(star, longer, {}, 0, costs), base);
  EXPECT_NE(digest(star, p, {}, 0, roofline(2e12)), base);            // kernel durations
  EXPECT_NE(digest(star, p, {}, 0, KernelCostModel{}), base);         // ideal: free kernels
  EXPECT_NE(digest(star, p, {1, 0, 2, 3}, 0, costs), base);          // other links
  EXPECT_NE(digest(topo::make_star(4, 1e9, 2e-6), p, {}, 0, costs), base);  // latencies
  // On a fat-tree the salt moves flows between equal-cost paths.
  const topo::Topology ft = fat_tree16();
  const std::vector<topo::Rank> spread = {0, 5, 10, 15};
  EXPECT_NE(digest(ft, p, spread, 1, costs), digest(ft, p, spread, 2, costs));
  // The runner's own steps, as it generates them, give the same digest.
  Engine engine;
  FlowNetwork net(engine, link_specs(star));
  auto g = p.make();
  PhaseFingerprint in_run(star, {}, 0, costs);
  RunnerOptions ro;
  ro.on_step = [&](const topo::Schedule& s, topo::OpId first, topo::OpId end) { in_run.step(s, first, end); };
  ScheduleRunner runner(engine, net, star, *g, p.binder(), costs, ro);
  runner.start();
  engine.run();
  ASSERT_TRUE(runner.done());
  EXPECT_EQ(in_run.digest(), base);
}

TEST(KernelPeriods, TouchingKernelsMergeAndEdgesComeInTimeOrder) {
  const SimTime t0 = SimTime::zero() + Duration::from_ps(100);
  KernelPeriods k(t0, 2);
  auto at = [&](int64_t ps) { return t0 + Duration::from_ps(ps); };
  k.on_kernel(1, true, at(0));
  k.on_kernel(0, true, at(5));
  k.on_kernel(1, false, at(10));
  k.on_kernel(1, true, at(10));   // touches: one period [0, 30)
  k.on_kernel(0, false, at(20));
  k.on_kernel(1, false, at(30));
  k.on_kernel(0, true, at(25));   // after a gap: a second period
  k.on_kernel(0, false, at(40));
  EXPECT_EQ(k.periods(), 3u);
  const std::vector<KernelEdge> e = k.edges();
  const std::vector<std::tuple<int64_t, uint32_t, bool>> want = {
      {0, 1, true}, {5, 0, true}, {20, 0, false}, {25, 0, true}, {30, 1, false}, {40, 0, false}};
  ASSERT_EQ(e.size(), want.size());
  for (size_t i = 0; i < e.size(); ++i)
    EXPECT_EQ(std::make_tuple(e[i].t_ps, e[i].rank, e[i].up), want[i]) << i;
}

// Ranks 0 and 2 each send a share of the bucket to rank 1 (a third and two thirds): the two flows
// share rank 1's downlink until the smaller one ends, so the larger one finishes before the time
// first computed for it, leaving a stale completion batch after the phase's end.
struct Incast {
  std::shared_ptr<topo::Schedule> schedule;
  explicit Incast(uint64_t elements)
      : schedule(std::make_shared<topo::Schedule>("incast", topo::CollectiveOp::kAllToAll, 4, elements)) {
    topo::Schedule& s = *schedule;
    const uint32_t a = s.add_chunk(0, elements / 3), b = s.add_chunk(elements / 3, elements - elements / 3);
    const topo::OpId ea = s.add_kernel(topo::KernelKind::kEncode, 0, a, {}, 1, {});
    const topo::OpId eb = s.add_kernel(topo::KernelKind::kEncode, 2, b, {}, 1, {});
    s.add_transfer(0, 1, s.message(ea), {ea});
    s.add_transfer(2, 1, s.message(eb), {eb});
  }
  std::unique_ptr<topo::ScheduleGenerator> make() const {
    // The generator refers to the schedule, which it keeps alive.
    struct Gen final : topo::ScheduleGenerator {
      std::shared_ptr<topo::Schedule> s;
      ScheduleReplay replay;
      explicit Gen(std::shared_ptr<topo::Schedule> sched) : s(std::move(sched)), replay(*s) {}
      topo::Schedule begin() override { return replay.begin(); }
      bool next_step(topo::Schedule& out) override { return replay.next_step(out); }
    };
    return std::make_unique<Gen>(schedule);
  }
};

TEST(PhaseMemo, GivesUpOnKindsWhoseFingerprintsKeepMissing) {
  PhaseMemo memo;
  const PhaseDigest d1{1, 2}, d2{3, 4};
  EXPECT_FALSE(memo.worth_checking(7));  // never ran: its first run is recorded as it goes
  memo.ran(7);
  for (int miss = 0; miss < 4; ++miss) {
    EXPECT_TRUE(memo.worth_checking(7)) << miss;
    EXPECT_EQ(memo.find(7, d1), nullptr);
  }
  EXPECT_FALSE(memo.worth_checking(7));
  EXPECT_TRUE(memo.given_up(7));
  // A kind that found a record once may miss eight times before it is given up.
  memo.ran(8);
  PhaseRecord r;
  r.digest = d2;
  r.duration = Duration::from_ps(5);
  memo.keep(r);
  const PhaseRecord* found = memo.find(8, d2);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->duration, Duration::from_ps(5));
  for (int miss = 0; miss < 8; ++miss) {
    EXPECT_TRUE(memo.worth_checking(8)) << miss;
    EXPECT_EQ(memo.find(8, d1), nullptr);
  }
  EXPECT_TRUE(memo.given_up(8));
  EXPECT_EQ(memo.hits(), 1u);
  EXPECT_EQ(memo.misses(), 12u);
  // Records beyond the memory budget are not kept.
  PhaseMemo small(sizeof(PhaseRecord) + 100 * sizeof(KernelEdge));
  PhaseRecord fits, big;
  fits.digest = d1;
  fits.edges.resize(100);
  big.digest = d2;
  big.edges.resize(101);
  small.keep(std::move(big));
  small.keep(std::move(fits));
  EXPECT_EQ(small.find(1, d2), nullptr);
  EXPECT_NE(small.find(1, d1), nullptr);
}

// A bucketed data-parallel run: layers of equal size (so buckets of equal size), ring all-reduces
// of their fp32 gradients with kernels charged by a roofline, random stragglers, on `topo`.
struct BucketRun {
  std::vector<BucketRecord> records;
  std::vector<RoundMetrics> rounds;
  std::vector<LinkStats> links;
  uint64_t flows_started = 0;
  SimTime clock;  // where the engine's clock stopped (stale completions fire after the job's end)
  uint64_t replayed = 0, misses = 0;
};

// `bytes_per_element(round, bucket)`: the wire format of each bucket's ring (fp32: 4).
// `before` may schedule events against the sync before the job starts.
BucketRun run_buckets(const topo::Topology& topo, bool replay, double interference,
                      const std::function<uint32_t(uint32_t, uint32_t)>& bytes_per_element,
                      const std::function<void(Engine&, const BucketCollectiveSync&)>& before = {}) {
  const uint32_t n = 4;
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  std::vector<TrainingLayer> layers;
  for (int i = 0; i < 6; ++i) layers.push_back({fmt::format("l{}", i), 250000, 2e-3, 4e-3});
  auto factory = [&](uint32_t round, uint32_t bucket, uint64_t params) {
    RingPhase rp;
    rp.ranks = n;
    rp.elements = params;
    rp.bytes_per_element = bytes_per_element(round, bucket);
    std::vector<SyncPhase> phases;
    for (const char* name : {"gradients", "weights"}) {
      SyncPhase p;
      p.name = name;
      p.generator = rp.make();
      p.make = [rp] { return rp.make(); };
      p.binder = rp.binder();
      phases.push_back(std::move(p));
    }
    SyncPhase incast;
    incast.name = "incast";
    const Incast in(params);
    incast.generator = in.make();
    incast.make = [in] { return in.make(); };
    incast.binder = rp.binder();
    phases.push_back(std::move(incast));
    return phases;
  };
  BucketCollectiveSync sync(make_buckets(layers, 2000000, 0, 4), factory, roofline(2e9), "ring", 3);
  if (replay) sync.replay_repeated_phases();
  StragglerSpec spread;
  spread.model = StragglerKind::kLognormal;
  spread.sigma = 0.3;
  const auto stragglers = StragglerModel::make(spread, 7);
  CCSIM_CHECK(stragglers.ok(), "{}", stragglers.status().message());
  TrainingOptions opt;
  opt.rounds = 5;
  opt.interference = interference;
  TrainingJob job(engine, net, topo, {0, 5, 10, 15}, layers, *stragglers, opt, sync);
  if (before) before(engine, sync);
  job.start();
  engine.run();
  CCSIM_CHECK(job.finished(), "the job did not finish");
  return {sync.records(), job.round_metrics(SimTime::infinite()), net.link_stats(), net.counters().flows_started,
          engine.now(), sync.replayed_phases(), sync.fingerprint_misses()};
}

void expect_same_run(const BucketRun& a, const BucketRun& b) {
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t i = 0; i < a.records.size(); ++i) {
    SCOPED_TRACE(fmt::format("bucket record {}", i));
    EXPECT_EQ(a.records[i].ready_s, b.records[i].ready_s);
    EXPECT_EQ(a.records[i].start_s, b.records[i].start_s);
    EXPECT_EQ(a.records[i].end_s, b.records[i].end_s);
    EXPECT_EQ(a.records[i].wire_bytes, b.records[i].wire_bytes);
    EXPECT_EQ(a.records[i].phase_end_s, b.records[i].phase_end_s);
  }
  ASSERT_EQ(a.rounds.size(), b.rounds.size());
  for (size_t i = 0; i < a.rounds.size(); ++i) {
    SCOPED_TRACE(fmt::format("round metrics {}", i));
    EXPECT_EQ(a.rounds[i].end_s, b.rounds[i].end_s);
    EXPECT_EQ(a.rounds[i].compute_s, b.rounds[i].compute_s);
    EXPECT_EQ(a.rounds[i].comm_s, b.rounds[i].comm_s);
    EXPECT_EQ(a.rounds[i].compression_s, b.rounds[i].compression_s);
    EXPECT_EQ(a.rounds[i].compression_overhead_s, b.rounds[i].compression_overhead_s);
    EXPECT_EQ(a.rounds[i].exposed_comm_s, b.rounds[i].exposed_comm_s);
  }
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].bytes, b.links[l].bytes) << l;
    EXPECT_EQ(a.links[l].busy_s, b.links[l].busy_s) << l;
    EXPECT_EQ(a.links[l].max_flows, b.links[l].max_flows) << l;
  }
  EXPECT_EQ(a.flows_started, b.flows_started);
  EXPECT_EQ(a.clock, b.clock);
}

TEST(PhaseReplay, ReplayedRunsLeaveEveryFigureAsSimulated) {
  auto fp32 = [](uint32_t, uint32_t) { return 4u; };
  const topo::Topology star = topo::make_star(16, 1e9, 2e-6);
  const BucketRun sim = run_buckets(star, false, 0, fp32);
  const BucketRun rep = run_buckets(star, true, 0, fp32);
  expect_same_run(sim, rep);
  // 6 layers of 1 MB in buckets of 2 MB: 3 buckets a round, 3 phases each, over 5 rounds. Each
  // kind (place, name, size) is simulated once; its second run is fingerprinted and replayed.
  EXPECT_EQ(sim.replayed, 0u);
  EXPECT_EQ(rep.replayed, 3u * 3 * 5 - 3);
  EXPECT_EQ(rep.misses, 0u);
  EXPECT_GT(sim.rounds.front().compression_s, 0);
  // On a fat-tree every bucket's salt routes its flows differently: a record per bucket. Rounds 1
  // to 4 are replayed (36 phases), and in round 0 the weights phases of buckets 1 and 2, which
  // repeat their gradients phases (the same ring, salt and routes).
  const topo::Topology ft = fat_tree16();
  const BucketRun ft_sim = run_buckets(ft, false, 0, fp32);
  const BucketRun ft_rep = run_buckets(ft, true, 0, fp32);
  expect_same_run(ft_sim, ft_rep);
  EXPECT_EQ(ft_rep.replayed, 3u * 3 * 4 + 2);
  EXPECT_EQ(ft_rep.misses, 4u);
}

TEST(PhaseReplay, PhasesThatChangeAreSimulatedAndKernelsThatSlowComputeStopReplay) {
  // The wire format changes every round for bucket 1 and never for the others.
  auto varying = [](uint32_t round, uint32_t bucket) { return bucket == 1 ? 1 + round % 4 : 4u; };
  const topo::Topology star = topo::make_star(16, 1e9, 2e-6);
  const BucketRun sim = run_buckets(star, false, 0, varying);
  const BucketRun rep = run_buckets(star, true, 0, varying);
  expect_same_run(sim, rep);
  EXPECT_GT(rep.replayed, 0u);
  EXPECT_GT(rep.misses, 0u);
  // Interference: kernels slow compute, the order of their events with compute's matters.
  auto fp32 = [](uint32_t, uint32_t) { return 4u; };
  const BucketRun slow_sim = run_buckets(star, false, 0.5, fp32);
  const BucketRun slow_rep = run_buckets(star, true, 0.5, fp32);
  expect_same_run(slow_sim, slow_rep);
  EXPECT_EQ(slow_rep.replayed, 0u);
}

TEST(PhaseReplay, APhaseEndsAfterEveryEventOfItsLastInstant) {
  // With replay, a phase ends once the other events of its last instant are done, even those
  // scheduled in that instant, so that a simulated phase (whose last event has its own place among
  // them) and a replayed one end alike. At each phase's end a spy event starts a chain of three
  // zero-length events; the last one must still see the phase running.
  auto fp32 = [](uint32_t, uint32_t) { return 4u; };
  const topo::Topology star = topo::make_star(16, 1e9, 2e-6);
  const BucketRun first = run_buckets(star, true, 0, fp32);
  std::vector<SimTime> ends;
  for (const BucketRecord& r : first.records)
    for (double s : r.phase_end_s) ends.push_back(SimTime::zero() + Duration::from_seconds(s));
  ASSERT_EQ(ends.size(), 45u);
  ASSERT_TRUE(std::is_sorted(ends.begin(), ends.end()));
  ASSERT_EQ(std::adjacent_find(ends.begin(), ends.end()), ends.end());
  size_t checked = 0;
  const BucketRun spied = run_buckets(star, true, 0, fp32, [&](Engine& e, const BucketCollectiveSync& sync) {
    for (size_t i = 0; i < ends.size(); ++i)
      e.schedule_at(ends[i], [&e, &sync, &checked, i] {
        e.schedule_in(Duration::zero(), [&e, &sync, &checked, i] {
          e.schedule_in(Duration::zero(), [&sync, &checked, i] {
            size_t ended = 0;
            for (const BucketRecord& r : sync.records()) ended += r.phase_end_s.size();
            EXPECT_EQ(ended, i) << "phase " << i;
            ++checked;
          });
        });
      });
  });
  EXPECT_EQ(checked, ends.size());
  expect_same_run(first, spied);
  EXPECT_EQ(spied.replayed, first.replayed);
}

}  // namespace
}  // namespace ccsim::sim
