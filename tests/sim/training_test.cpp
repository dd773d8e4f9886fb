// The worker model: overlap accounting on hand-computed timelines, stragglers, tenants, DDP
// buckets and the broadcast protocol.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>

#include "sim/training/broadcast_sync.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/tenants.hpp"
#include "sim/training/training_job.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {
namespace {

// A protocol with fixed communication times: layer l's gradient, once every worker has produced it,
// occupies one FIFO "stream" for delay[l] seconds (communication active on every worker), then
// its update arrives everywhere. Optionally runs a compression kernel on worker 0 at fixed times.
class FixedDelaySync final : public GradientSync {
 public:
  explicit FixedDelaySync(std::vector<double> delay) : delay_(std::move(delay)) {}
  void attach(TrainingJob& job) override { job_ = &job; }
  void gradient_ready(uint32_t round, uint32_t, uint32_t layer) override {
    if (++count_[{round, layer}] < job_->num_workers()) return;
    queue_.push_back({round, layer});
    pump();
  }
  std::string describe() const override { return "fixed delays"; }

 private:
  void pump() {
    if (busy_ || queue_.empty()) return;
    busy_ = true;
    const auto [round, layer] = queue_.front();
    queue_.erase(queue_.begin());
    for (uint32_t w = 0; w < job_->num_workers(); ++w) job_->comm_begin(w);
    job_->engine().schedule_in(Duration::from_seconds(delay_[layer]), [this, round, layer] {
      for (uint32_t w = 0; w < job_->num_workers(); ++w) job_->comm_end(w);
      busy_ = false;
      for (uint32_t w = 0; w < job_->num_workers(); ++w) job_->synced(round, w, layer);
      pump();
    });
  }
  std::vector<double> delay_;
  TrainingJob* job_ = nullptr;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> count_;
  std::vector<std::pair<uint32_t, uint32_t>> queue_;
  bool busy_ = false;
};

std::vector<TrainingLayer> two_layers() {
  return {{"l0", 1000, 1.0, 2.0}, {"l1", 1000, 1.0, 2.0}};
}

StragglerModel no_stragglers() { return *StragglerModel::make({}, 1); }

// What a finished run of the two-layer job left.
struct JobRun {
  bool finished = false;
  std::vector<RoundMetrics> rounds;
  std::vector<SimTime> done;
};

// Runs `rounds` rounds of two_layers() on `workers` ranks of a star (no latency) with `sync`;
// `before` may schedule events against the job before it starts.
JobRun run_two_layers(GradientSync& sync, uint32_t workers, uint32_t rounds, const StragglerModel& stragglers,
                      double interference = 0, const std::function<void(Engine&, TrainingJob&)>& before = {}) {
  const topo::Topology topo = topo::make_star(workers, 1e9, 0);
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  TrainingOptions opt;
  opt.rounds = rounds;
  opt.interference = interference;
  std::vector<topo::Rank> ranks(workers);
  for (uint32_t w = 0; w < workers; ++w) ranks[w] = w;
  TrainingJob job(engine, net, topo, ranks, two_layers(), stragglers, opt, sync);
  if (before) before(engine, job);
  job.start();
  engine.run();
  return {job.finished(), job.round_metrics(SimTime::infinite()), job.round_completion()};
}

TEST(TrainingJob, OverlapAccountingMatchesHandComputedTimeline) {
  // F0 [0,1] F1 [1,2] B1 [2,4] B0 [4,6]; layer 1 synchronizes [4,7], layer 0 [7,8] (FIFO);
  // round 1: F0 waits until 8: [8,9] F1 [9,10] B1 [10,12] B0 [12,14]; sync [12,15] and [15,16].
  FixedDelaySync sync({1.0, 3.0});
  const JobRun run = run_two_layers(sync, 2, 2, no_stragglers());
  ASSERT_TRUE(run.finished);
  ASSERT_EQ(run.rounds.size(), 4u);
  for (const RoundMetrics& m : run.rounds) {
    SCOPED_TRACE(fmt::format("round {} worker {}", m.round, m.worker));
    EXPECT_DOUBLE_EQ(m.start_s, m.round == 0 ? 0.0 : 8.0);
    EXPECT_DOUBLE_EQ(m.end_s, m.round == 0 ? 8.0 : 16.0);
    EXPECT_DOUBLE_EQ(m.compute_s, 6.0);
    EXPECT_DOUBLE_EQ(m.wait_s, 2.0);
    EXPECT_DOUBLE_EQ(m.comm_s, 4.0);      // [4,8) and [12,16)
    EXPECT_DOUBLE_EQ(m.overlap_s, 2.0);   // backward of layer 0 under layer 1's communication
    EXPECT_DOUBLE_EQ(m.row(), 1.0);
    EXPECT_DOUBLE_EQ(m.compression_overhead_s, 0.0);
    EXPECT_DOUBLE_EQ(m.exposed_comm_s, 2.0);
  }
  ASSERT_EQ(run.done.size(), 2u);
  EXPECT_DOUBLE_EQ(run.done[0].seconds(), 8.0);
  EXPECT_DOUBLE_EQ(run.done[1].seconds(), 16.0);
}

TEST(TrainingJob, NoWaitWhenCommunicationHidesBehindForward) {
  // Layer 1 needs 0.5 s, layer 0 (produced last, needed first) 0: round 1's F0 starts at once and
  // layer 1's update arrives at 6.5 < 7 when F1 would start. T_wait = 0, ROW infinite.
  FixedDelaySync sync({0.0, 0.5});
  const auto rounds = run_two_layers(sync, 1, 2, no_stragglers()).rounds;
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_DOUBLE_EQ(rounds[0].end_s, 6.0);
  EXPECT_DOUBLE_EQ(rounds[0].wait_s, 0.0);
  EXPECT_DOUBLE_EQ(rounds[0].overlap_s, 0.5);  // [4, 4.5] under B0
  EXPECT_TRUE(std::isinf(rounds[0].row()));
}

// A protocol that synchronizes instantly but runs one compression kernel on worker 0 for
// [t0, t1) of round 0.
class KernelSync final : public GradientSync {
 public:
  KernelSync(double t0, double t1) : t0_(t0), t1_(t1) {}
  void attach(TrainingJob& job) override {
    job_ = &job;
    job.engine().schedule_at(SimTime::zero() + Duration::from_seconds(t0_), [this] { job_->kernel_begin(0); });
    job.engine().schedule_at(SimTime::zero() + Duration::from_seconds(t1_), [this] { job_->kernel_end(0); });
  }
  void gradient_ready(uint32_t round, uint32_t w, uint32_t layer) override { job_->synced(round, w, layer); }
  std::string describe() const override { return "kernel"; }

 private:
  double t0_, t1_;
  TrainingJob* job_ = nullptr;
};

TEST(TrainingJob, InterferenceSlowsComputeWhileKernelsRun) {
  // B0 runs [4, 6] at full speed; a kernel on [4.5, 5.5) with interference 1 halves its speed
  // there: 0.5 s of work by 4.5, 0.5 more by 5.5, the last 1.0 ends at 6.5.
  KernelSync sync(4.5, 5.5);
  const auto rounds = run_two_layers(sync, 1, 1, no_stragglers(), 1.0).rounds;
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_NEAR(rounds[0].end_s, 6.5, 1e-12);
  EXPECT_NEAR(rounds[0].compute_s, 6.5, 1e-12);
  EXPECT_NEAR(rounds[0].compression_s, 1.0, 1e-12);
  EXPECT_NEAR(rounds[0].compression_overhead_s, 0.0, 1e-12);  // hidden under compute

  // Without interference the same kernel costs nothing: B0 ends at 6.
  KernelSync s2(4.5, 5.5);
  EXPECT_NEAR(run_two_layers(s2, 1, 1, no_stragglers(), 0.0).rounds.at(0).end_s, 6.0, 1e-12);
}

TEST(TrainingJob, CompressionOutsideComputeIsOverhead) {
  // A kernel on [6, 7) after the last backward, before the last update: overhead 1 s, not exposed
  // communication.
  FixedDelaySync sync({2.0, 0.0});  // layer 0's update arrives at 8
  const auto r0 = run_two_layers(sync, 1, 2, no_stragglers(), 0.0, [](Engine& engine, TrainingJob& job) {
                    engine.schedule_at(SimTime::zero() + Duration::from_seconds(6.0), [&job] { job.kernel_begin(0); });
                    engine.schedule_at(SimTime::zero() + Duration::from_seconds(7.0), [&job] { job.kernel_end(0); });
                  }).rounds.at(0);
  EXPECT_DOUBLE_EQ(r0.end_s, 8.0);
  EXPECT_DOUBLE_EQ(r0.wait_s, 2.0);
  EXPECT_DOUBLE_EQ(r0.compression_overhead_s, 1.0);
  EXPECT_DOUBLE_EQ(r0.exposed_comm_s, 1.0);
  EXPECT_DOUBLE_EQ(r0.compute_s + r0.exposed_comm_s + r0.compression_overhead_s, r0.duration());
}

TEST(TrainingJob, PersistentStragglerSlowsTheWholeSynchronousRound) {
  // Four workers; worker 2 computes 2x slower. Every worker's round lasts the straggler's compute
  // plus the tail; the others wait for it.
  StragglerSpec spec;
  spec.model = StragglerKind::kPersistent;
  spec.slow_workers = {2};
  spec.slow_factor = 2.0;
  const StragglerModel slow = *StragglerModel::make(spec, 1);
  for (bool with_straggler : {false, true}) {
    FixedDelaySync sync({0.25, 0.25});
    const StragglerModel none = no_stragglers();
    for (const RoundMetrics& m : run_two_layers(sync, 4, 3, with_straggler ? slow : none).rounds) {
      if (m.round == 2) continue;  // the last round ends at its own sync
      SCOPED_TRACE(fmt::format("straggler {} round {} worker {}", with_straggler, m.round, m.worker));
      // Round: F0 F1 B1 B0 of the slowest worker, then layer 0's sync (queued after layer 1's).
      const double slowest = with_straggler ? 12.0 : 6.0;
      EXPECT_NEAR(m.duration(), slowest + 0.25, 1e-9);
      EXPECT_NEAR(m.compute_s, (with_straggler && m.worker == 2) ? 12.0 : 6.0, 1e-9);
      EXPECT_NEAR(m.wait_s, m.duration() - m.compute_s, 1e-9);
    }
  }
}

TEST(Stragglers, UniformLognormalAndEmpiricalHaveTheirMeansAndAreRepeatable) {
  StragglerSpec u;
  u.model = StragglerKind::kUniform;
  StragglerSpec ln;
  ln.model = StragglerKind::kLognormal;
  ln.sigma = 0.3;
  StragglerSpec em;
  em.model = StragglerKind::kEmpirical;
  em.cdf.values = {1.0, 2.0, 4.0};
  em.cdf.probs = {0.0, 0.5, 1.0};  // mean 0.5·1.5 + 0.5·3 = 2.25
  EXPECT_DOUBLE_EQ(em.cdf.mean(), 2.25);
  EXPECT_DOUBLE_EQ(em.cdf.quantile(0.25), 1.5);
  EXPECT_DOUBLE_EQ(em.cdf.quantile(0.75), 3.0);
  const int n = 200000;
  for (const StragglerSpec& spec : {u, ln, em}) {
    const StragglerModel m = *StragglerModel::make(spec, 42);
    const StragglerModel again = *StragglerModel::make(spec, 42);
    const StragglerModel other = *StragglerModel::make(spec, 43);
    double sum = 0, sq = 0, lo = 1e9, hi = 0;
    int differ = 0;
    for (int i = 0; i < n; ++i) {
      const double f = m.factor(static_cast<uint32_t>(i / 16), static_cast<uint32_t>(i % 16));
      ASSERT_EQ(f, again.factor(static_cast<uint32_t>(i / 16), static_cast<uint32_t>(i % 16)));
      differ += f != other.factor(static_cast<uint32_t>(i / 16), static_cast<uint32_t>(i % 16));
      sum += f;
      sq += f * f;
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    SCOPED_TRACE(std::string(enum_name<StragglerKind>(kStragglerKinds, spec.model)));
    EXPECT_GT(differ, n * 0.99);
    // 5 standard errors.
    EXPECT_NEAR(mean, 1.0, 5 * std::sqrt(var / n));
    if (spec.model == StragglerKind::kUniform) {
      EXPECT_NEAR(var, 0.2 * 0.2 / 12, 0.02 * 0.2 * 0.2 / 12);
      EXPECT_GE(lo, 0.9);
      EXPECT_LE(hi, 1.1);
    } else if (spec.model == StragglerKind::kLognormal) {
      EXPECT_NEAR(var, std::exp(0.09) - 1, 0.03 * (std::exp(0.09) - 1));
    } else {
      EXPECT_GE(lo, 1.0 / 2.25);
      EXPECT_LE(hi, 4.0 / 2.25);
    }
  }
}

TEST(Stragglers, ShippedAqgbCdfHasThePapersRangeAndMean) {
  const auto cdf = EmpiricalCdf::load(std::filesystem::path(CCSIM_SOURCE_DIR) / "traces/stragglers/aqgb-fig8.json");
  ASSERT_TRUE(cdf.ok()) << cdf.status().message();
  EXPECT_DOUBLE_EQ(cdf->values.front(), 1.33);
  EXPECT_DOUBLE_EQ(cdf->values.back(), 2.67);
  EXPECT_NEAR(cdf->mean(), 1.5, 0.0015);  // AQGB §5.2.5: range [1.33, 2.67] s, mean 1.5 s
}

TEST(Stragglers, CdfFileErrorsNameTheFileAndPath) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ccsim_cdf_{}", ::testing::UnitTest::GetInstance()->random_seed());
  std::filesystem::create_directories(dir);
  const auto f = dir / "bad.json";
  std::ofstream(f) << R"({"format": "ccsim-straggler-cdf", "version": 1, "points": [[1.0, 0.0], [0.5, 1.0]]})";
  const auto r = EmpiricalCdf::load(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(f.string()), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("/points/1/0"), std::string::npos) << r.status().message();
  std::ofstream(f) << R"({"format": "ccsim-straggler-cdf", "version": 1, "points": [[1.0, 0.0], [2.0, 0.9]]})";
  const auto r2 = EmpiricalCdf::load(f);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("/points/1/1"), std::string::npos) << r2.status().message();
  std::filesystem::remove_all(dir);
}

// Ring all-reduce of the bucket's fp32 gradient, kernels free.
BucketPhaseFactory ring_factory(uint32_t n) {
  return [n](uint32_t, uint32_t, uint64_t params) {
    std::vector<SyncPhase> phases;
    SyncPhase p;
    p.name = "ring";
    p.generator = topo::make_ring(topo::CollectiveOp::kAllReduce, n, params, {}, false);
    p.binder = [](topo::Schedule& s, topo::OpId first, topo::OpId end) {
      for (topo::OpId id = first; id < end; ++id) {
        topo::Op& op = s.mutable_op(id);
        op.bytes = op.kind == topo::OpKind::kTransfer ? 4 * s.op_elements(op) : 0;
      }
    };
    phases.push_back(std::move(p));
    return phases;
  };
}

TEST(BucketSync, DdpBucketsPackLayersInBackwardOrder) {
  std::vector<TrainingLayer> layers;
  for (uint64_t p : {10u, 0u, 30u, 5u, 20u, 40u}) layers.push_back({"l", p, 0.1, 0.2});
  // 4 bytes per param, buckets closed at >= 100 B: [5] = 160 B, [4, 3] = 100 B, [2] = 120 B, and
  // the rest [1, 0] = 40 B.
  const auto b = make_buckets(layers, 100, 0, 4);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].layers, (std::vector<uint32_t>{5}));
  EXPECT_EQ(b[1].layers, (std::vector<uint32_t>{4, 3}));
  EXPECT_EQ(b[2].layers, (std::vector<uint32_t>{2}));
  EXPECT_EQ(b[3].layers, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(b[3].params, 10u);
  // A small first bucket (PyTorch DDP's first_bucket_bytes).
  const auto f = make_buckets(layers, 1000, 50, 4);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].layers, (std::vector<uint32_t>{5}));
  EXPECT_EQ(f[1].params, 65u);
}

TEST(BucketSync, RingBucketTakesTheRingTimeAndTenantsTakeTheirMaxMinShare) {
  // 4 workers on a star (B per direction, no latency), one layer of P params → one bucket; the
  // ring all-reduce takes 2(n−1)/n · 4P / B. A tenant flow on each ring hop i → i+1 capped at B
  // halves the job's rate on every link (max-min: two flows share B, neither cap binds); a tenant
  // capped at B/4 gets B/4 and leaves 3B/4.
  const double B = 1e9;
  const uint32_t n = 4;
  const uint64_t P = 1000000;
  const topo::Topology topo = topo::make_star(n, B, 0);
  const double ring = 2.0 * (n - 1) / n * 4.0 * P / B;
  std::vector<TrainingLayer> layers = {{"only", P, 1.0, 1.0}};
  for (double tenant_rate : {0.0, B, B / 4}) {
    Engine engine;
    FlowNetwork net(engine, link_specs(topo));
    std::vector<TenantSpec> tenants;
    if (tenant_rate > 0)
      for (uint32_t i = 0; i < n; ++i) {
        TenantSpec t;
        t.kind = TenantKind::kConstant;
        t.src = i;
        t.dst = (i + 1) % n;
        t.rate_Bps = tenant_rate;
        t.period_s = 1e-3;
        tenants.push_back(t);
      }
    auto traffic = TenantTraffic::make(engine, net, topo, tenants, 7);
    ASSERT_TRUE(traffic.ok()) << traffic.status().message();
    BucketCollectiveSync sync(make_buckets(layers, 25u << 20, 0, 4), ring_factory(n), KernelCostModel{}, "ring");
    const StragglerModel none = no_stragglers();
    TrainingOptions opt;
    opt.rounds = 1;
    TrainingJob job(engine, net, topo, {0, 1, 2, 3}, layers, none, opt, sync);
    job.on_finished([&] { (*traffic)->stop(); });
    (*traffic)->start();
    job.start();
    engine.run();
    ASSERT_EQ(sync.records().size(), 1u);
    const BucketRecord& r = sync.records()[0];
    EXPECT_DOUBLE_EQ(r.ready_s, 2.0);
    const double want = tenant_rate == 0 ? ring : tenant_rate == B ? 2 * ring : ring * 4.0 / 3.0;
    SCOPED_TRACE(fmt::format("tenant rate {}", tenant_rate));
    EXPECT_NEAR(r.end_s - r.start_s, want, 1e-9 * want);
    if (tenant_rate > 0) {
      for (const TenantStats& s : (*traffic)->stats()) EXPECT_GT(s.iterations, 0u);
    }
  }
}

TEST(Tenants, RingAllReduceLoopsRunUntilStoppedAndShareLinks) {
  // Two ring tenants over the same 4 ranks, each 4 MB: alone one all-reduce takes
  // 2·3/4·4 MB / B; two at once share every link, so each takes twice as long.
  const double B = 1e9;
  const topo::Topology topo = topo::make_star(4, B, 0);
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  TenantSpec t;
  t.kind = TenantKind::kRingAllReduce;
  t.count = 2;
  t.bytes = 4000000;
  auto traffic = TenantTraffic::make(engine, net, topo, {t}, 3);
  ASSERT_TRUE(traffic.ok()) << traffic.status().message();
  (*traffic)->start();
  const double one = 2.0 * 3 / 4 * 4e6 / B;
  engine.schedule_at(SimTime::zero() + Duration::from_seconds(10 * 2 * one + one / 2), [&] { (*traffic)->stop(); });
  engine.run();
  ASSERT_EQ((*traffic)->stats().size(), 2u);
  for (const TenantStats& s : (*traffic)->stats()) {
    EXPECT_EQ(s.iterations, 11u);  // the 11th was in flight when stopped
    EXPECT_DOUBLE_EQ(s.bytes, 11 * 2.0 * 3 * 1e6 * 4);
  }
  EXPECT_NEAR(engine.now().seconds(), 11 * 2 * one, 1e-9);
}

TEST(Tenants, InvalidSpecsAreRejectedWithTheirPath) {
  const topo::Topology topo = topo::make_star(4, 1e9, 0);
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  TenantSpec t;
  t.kind = TenantKind::kConstant;
  t.src = 0;
  t.dst = 9;
  t.rate_Bps = 1;
  auto r = TenantTraffic::make(engine, net, topo, {t}, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().pointer(), "/0/dst") << r.status().message();
  // Every problem of every spec at once, each at its own pointer.
  TenantSpec ring;
  ring.ranks = {0, 7};
  ring.bytes = 4;
  ring.count = 0;
  t.rate_Bps = 0;
  const std::vector<Diagnostic> bad = TenantTraffic::problems(topo, std::vector<TenantSpec>{t, ring});
  std::vector<std::string> paths;
  for (const Diagnostic& d : bad) paths.push_back(d.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/0/dst", "/0/rate", "/1/ranks/1", "/1/size", "/1/count"}));
  TenantSpec whole;  // a ring over every rank
  whole.bytes = 1 << 20;
  EXPECT_TRUE(TenantTraffic::problems(topo, std::vector<TenantSpec>{whole}).empty());
}

TEST(BroadcastSync, FixedBroadcastTakesTheFanOutTime) {
  // m workers on a star, one block of P params at 32 bits: each sender's uplink carries (m−1)·4P
  // bytes and each receiver's downlink the same, so with everyone sending at once the broadcast
  // ends (m−1)·4P / B after the gradients exist (segments one at a time, no latency).
  const double B = 1e9;
  const uint32_t m = 4;
  const uint64_t P = 1u << 20;
  const topo::Topology topo = topo::make_star(m, B, 0);
  std::vector<TrainingLayer> layers = {{"only", P, 1.0, 1.0}};
  for (double bits : {32.0, 4.0}) {
    Engine engine;
    FlowNetwork net(engine, link_specs(topo));
    BroadcastOptions bo;
    bo.segment_params = P / 4;
    const FixedBroadcastBits control("fp32", bits);
    BroadcastSync sync(bo, control);
    const StragglerModel none = no_stragglers();
    TrainingOptions opt;
    opt.rounds = 1;
    TrainingJob job(engine, net, topo, {0, 1, 2, 3}, layers, none, opt, sync);
    job.start();
    engine.run();
    const auto done = job.round_completion();
    ASSERT_EQ(done.size(), 1u);
    const double want = 2.0 + (m - 1) * bits / 8 * P / B;
    EXPECT_NEAR(done[0].seconds(), want, 1e-9) << bits;
    EXPECT_EQ(sync.round_stats().at(0).stage1_bytes, m * static_cast<uint64_t>(bits / 8 * P));
  }
}

// A fixed broadcast on m workers of a star whose kernels cost the roofline (launch L, memory rate
// M): one block of P params, `segments` segments of s = P / segments.
struct BroadcastWithKernels {
  static constexpr double B = 1e9, M = 1e11, L = 5e-6;
  static constexpr uint32_t m = 4;
  static constexpr uint64_t P = 1u << 20;
  std::vector<double> done;            // round completions
  std::vector<RoundMetrics> metrics;   // round 0, per worker
  explicit BroadcastWithKernels(uint32_t segments, double bits = 32) {
    const topo::Topology topo = topo::make_star(m, B, 0);
    Engine engine;
    FlowNetwork net(engine, link_specs(topo));
    BroadcastOptions bo;
    bo.segment_params = P / segments;
    bo.costs.memory_Bps = M;
    bo.costs.launch = Duration::from_seconds(L);
    const FixedBroadcastBits control("fp32", bits);
    BroadcastSync sync(bo, control);
    const StragglerModel none = no_stragglers();
    TrainingOptions opt;
    opt.rounds = 1;
    TrainingJob job(engine, net, topo, {0, 1, 2, 3}, {{"only", P, 1.0, 1.0}}, none, opt, sync);
    job.start();
    engine.run();
    for (const SimTime t : job.round_completion()) done.push_back(t.seconds());
    metrics = job.round_metrics(engine.now());
  }
  // One segment's encode (4 B per entry in, the wire out) and decode-accumulate (the wire in, 4 B
  // per entry read and written).
  static double encode_s(double s, double bits) { return L + (4 + bits / 8) * s / M; }
  static double decode_s(double s, double bits) { return L + (8 + bits / 8) * s / M; }
};

TEST(BroadcastSync, ReceiversDecodeEveryIncomingCopyOnTheirStream) {
  // One segment: every worker encodes (in parallel), the m(m−1) flows share the star and end
  // together after (m−1)·4P / B, then every worker decodes its m − 1 copies one after another on
  // its stream. The update arrives when the last decode ends; the stream was busy for one encode
  // and m − 1 decodes, all after the compute (the whole busy time is overhead).
  using K = BroadcastWithKernels;
  for (const double bits : {32.0, 4.0}) {
    const K run(1, bits);
    const double enc = K::encode_s(K::P, bits), dec = K::decode_s(K::P, bits);
    const double net = (K::m - 1) * bits / 8 * K::P / K::B;
    ASSERT_EQ(run.done.size(), 1u);
    EXPECT_NEAR(run.done[0], 2.0 + enc + net + (K::m - 1) * dec, 1e-8) << bits;
    ASSERT_EQ(run.metrics.size(), K::m);
    for (const RoundMetrics& r : run.metrics) {
      EXPECT_NEAR(r.compression_s, enc + (K::m - 1) * dec, 1e-8) << bits << " worker " << r.worker;
      EXPECT_NEAR(r.compression_overhead_s, r.compression_s, 1e-8);
      EXPECT_NEAR(r.compute_s + r.exposed_comm_s + r.compression_overhead_s, r.duration(), 1e-8);
    }
  }
}

TEST(BroadcastSync, KernelStreamRunsOneKernelAtATime) {
  // Four segments: each worker's stream runs 4 encodes and 4(m−1) decodes, never two at once, so
  // its busy time is exactly their sum; the update cannot arrive before the last segment's encode,
  // transfer and m − 1 decodes have run after the previous segments' transfers.
  using K = BroadcastWithKernels;
  const double s = K::P / 4;
  const K run(4);
  const double enc = K::encode_s(s, 32), dec = K::decode_s(s, 32);
  const double net = (K::m - 1) * 4.0 * s / K::B;
  ASSERT_EQ(run.done.size(), 1u);
  ASSERT_EQ(run.metrics.size(), K::m);
  for (const RoundMetrics& r : run.metrics) EXPECT_NEAR(r.compression_s, 4 * (enc + (K::m - 1) * dec), 1e-8);
  EXPECT_GE(run.done[0], 2.0 + 4 * (enc + net) + (K::m - 1) * dec - 1e-8);
  // The segments' transfers overlap the previous segments' decodes: well under a serial schedule.
  EXPECT_LT(run.done[0], 2.0 + 4 * (enc + net + (K::m - 1) * dec) - 1e-6);
  // Free kernels: the fan-out time alone.
  EXPECT_GT(run.done[0], 2.0 + 4 * net + 1e-6);
}

}  // namespace
}  // namespace ccsim::sim
