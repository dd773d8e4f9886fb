// Timing of collective schedules against closed forms, and the streaming interpreter against a
// replay of the materialized schedule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "sim/schedule_runner.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {
namespace {

using topo::CollectiveOp;

// Uncompressed fp32 on the wire, kernels free.
void bind_fp32(topo::Schedule& s, topo::OpId first, topo::OpId end) {
  for (topo::OpId id = first; id < end; ++id) {
    topo::Op& op = s.mutable_op(id);
    op.bytes = op.kind == topo::OpKind::kTransfer ? 4 * s.op_elements(op) : 0;
  }
}

struct TimedRun {
  ScheduleTiming timing;
  FlowNetworkCounters counters;
  double max_link_load = 0;
};

TimedRun stream(const topo::Topology& t, const std::string& op, const std::string& algorithm, uint64_t elements,
           topo::CollectiveOptions options = {}, bool record = false, KernelCostModel costs = {},
           ScheduleBinder binder = bind_fp32) {
  const auto info = topo::find_collective(op, algorithm);
  CCSIM_CHECK(info.ok(), "{}", info.status().message());
  const Status st = (*info)->check(t.num_ranks(), elements, options);
  CCSIM_CHECK(st.ok(), "{}", st.message());
  auto gen = (*info)->make(t.num_ranks(), elements, options);
  Engine engine;
  FlowNetwork network(engine, link_specs(t));
  RunnerOptions ro;
  ro.record_ops = record;
  ScheduleRunner runner(engine, network, t, *gen, std::move(binder), costs, ro);
  runner.start();
  engine.run();
  CCSIM_CHECK(runner.done(), "{} did not finish", algorithm);
  return TimedRun{runner.timing(), network.counters(), network.max_link_load()};
}

topo::Topology direct_ring(uint32_t n, double bw, double latency) {
  topo::ClusterSpec spec;
  spec.topology = "ring";
  spec.nodes = n;
  spec.nic_Bps = bw;
  spec.link_latency_s = latency;
  auto t = topo::build_topology(spec);
  CCSIM_CHECK(t.ok(), "{}", t.status().message());
  return std::move(*t);
}

// Ring all-reduce on a star: 2(n-1) steps, each alpha (two link latencies) + (S/n)/B.
TEST(CollectiveTiming, RingAllReduceMatchesClosedFormUpTo1024Ranks) {
  const double bw = 12.5e9, link_lat = 1e-6;
  for (uint32_t n : {2u, 3u, 4u, 5u, 7u, 8u, 16u, 33u, 64u, 100u, 128u, 255u, 256u, 512u, 1024u}) {
    const uint64_t elements = 256ull * n;  // divisible by n: every step moves S/n
    const TimedRun r = stream(topo::make_star(n, bw, link_lat), "allreduce", "ring", elements);
    const double S = 4.0 * static_cast<double>(elements);
    const double want = 2.0 * (n - 1) * (2 * link_lat + S / (n * bw));
    SCOPED_TRACE(fmt::format("n={}", n));
    EXPECT_NEAR(r.timing.duration().seconds(), want, 1e-3 * want);
    EXPECT_NEAR(r.timing.duration().seconds(), want, 1e-10);  // in fact exact to the picosecond scale
    EXPECT_EQ(r.timing.transfers, 2ull * n * (n - 1));
    // Memory follows the flows in flight: a few steps of n ops each, never the whole schedule.
    EXPECT_LE(r.timing.peak_window_ops, 16ull * n);
    EXPECT_LE(r.counters.peak_active_flows, n);
  }
}

// Recursive halving + doubling on a star: log2 n steps each way, step k moves S/2^(k+1):
// 2 log2(n) alpha + 2 (n-1)/n S/B.
TEST(CollectiveTiming, ButterflyMatchesHalvingDoublingFormula) {
  const double bw = 10e9, link_lat = 2e-6;
  for (uint32_t n : {2u, 4u, 8u, 16u, 64u, 256u}) {
    const uint64_t elements = 1024ull * n;
    const TimedRun r = stream(topo::make_star(n, bw, link_lat), "allreduce", "butterfly", elements);
    const double S = 4.0 * static_cast<double>(elements), alpha = 2 * link_lat;
    const double want = 2 * std::log2(n) * alpha + 2.0 * (n - 1) / n * S / bw;
    SCOPED_TRACE(fmt::format("n={}", n));
    EXPECT_NEAR(r.timing.duration().seconds(), want, 1e-10);
    EXPECT_LE(r.max_link_load, 1 + 1e-9);
  }
}

// EQuARX §III.C on a bidirectional ring of N devices with per-direction bandwidth B (latency 0):
// the reduce-scatter's bandwidth bound is (N-1)D/(2NB) for the full loop run in both directions and
// D/(2B) for the semi-loop; an all-reduce (RS + AG) takes twice as long. A one-direction ring
// needs (N-1)D/(NB).
TEST(CollectiveTiming, EquarxFullLoopAndSemiLoopMatchTheirBandwidthBounds) {
  const double B = 50e9;
  for (uint32_t n : {4u, 6u, 8u, 16u}) {
    const uint64_t elements = 2ull * 1024 * n;  // every shard splits evenly in halves
    const double D = 4.0 * static_cast<double>(elements);
    const topo::Topology t = direct_ring(n, B, 0);
    SCOPED_TRACE(fmt::format("N={}", n));
    const double full = (n - 1) * D / (2.0 * n * B), semi = D / (2 * B), uni = (n - 1) * D / (n * B);
    EXPECT_NEAR(stream(t, "reduce_scatter", "ring_bidir", elements).timing.duration().seconds(), full, 1e-12);
    EXPECT_NEAR(stream(t, "reduce_scatter", "semi_loop", elements).timing.duration().seconds(), semi, 1e-12);
    EXPECT_NEAR(stream(t, "reduce_scatter", "ring", elements).timing.duration().seconds(), uni, 1e-12);
    EXPECT_NEAR(stream(t, "allreduce", "ring_bidir", elements).timing.duration().seconds(), 2 * full, 1e-12);
    EXPECT_NEAR(stream(t, "allreduce", "semi_loop", elements).timing.duration().seconds(), 2 * semi, 1e-12);
  }
}

// The streaming interpreter (steps generated on demand, dropped when finished) must time every
// op exactly as a replay of the fully materialized schedule, for every registered algorithm, also
// with kernel costs (same kernel order on every stream).
TEST(CollectiveTiming, StreamingEqualsMaterializedReplayForEveryAlgorithm) {
  KernelCostModel costs;
  costs.memory_Bps = 1e12;
  costs.launch = Duration::from_seconds(3e-6);
  auto binder = [](topo::Schedule& s, topo::OpId first, topo::OpId end) {
    for (topo::OpId id = first; id < end; ++id) {
      topo::Op& op = s.mutable_op(id);
      op.bytes = (op.kind == topo::OpKind::kTransfer ? 2 : 8) * s.op_elements(op);
    }
  };
  int compared = 0;
  for (const auto& info : topo::known_collectives()) {
    for (uint32_t n : {4u, 8u}) {
      topo::CollectiveOptions options;
      options.gpus_per_node = 2;
      options.segments = 2;
      options.root = 1;
      const uint64_t elements = 96ull * n;
      if (!info.check(n, elements, options).ok()) continue;
      SCOPED_TRACE(fmt::format("{}/{} n={}", topo::collective_op_name(info.operation), info.algorithm, n));
      const topo::Topology t = topo::make_star(n, 1e9, 1e-6);
      const TimedRun streamed = stream(t, std::string(topo::collective_op_name(info.operation)), info.algorithm, elements,
                                  options, true, costs, binder);
      topo::Schedule whole = info.build(n, elements, options);
      binder(whole, 0, whole.id_end());
      const ScheduleTiming replay = simulate_schedule(t, whole, costs);
      ASSERT_EQ(streamed.timing.ops, whole.ops().size());
      EXPECT_EQ(streamed.timing.end, replay.end);
      EXPECT_EQ(streamed.timing.op_start, replay.op_start);
      EXPECT_EQ(streamed.timing.op_end, replay.op_end);
      EXPECT_EQ(streamed.timing.kernel_busy, replay.kernel_busy);
      ++compared;
    }
  }
  EXPECT_GE(compared, 20);
}

// Two-level reduce-scatter on N nodes x G GPUs (no latency): phase A sends (G-1)/G of the tensor
// D over each GPU's fabric link (D(G-1)/(G Bi)), phase B (N-1)/N of the GPU's piece range R_j = D/G
// over its NIC (D(N-1)/(N G Bn)). Unsegmented the phases add; with S = N segments each node sends
// its phase-A segments starting with the piece its first phase-B destination needs, so the NICs are
// busy from the end of the first segment on and only A/S is left exposed.
TEST(CollectiveTiming, TwoLevelReduceScatterOverlapsItsPhasesWithSegments) {
  const double Bn = 25e9, Bi = 300e9;
  for (uint32_t nodes : {2u, 4u, 8u}) {
    const uint32_t G = 4, n = nodes * G;
    topo::ClusterSpec spec;
    spec.nodes = nodes;
    spec.gpus_per_node = G;
    spec.nic_Bps = Bn;
    spec.link_latency_s = 0;
    spec.intra_Bps = Bi;
    const auto t = topo::build_topology(spec);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const uint64_t elements = 1024ull * n * nodes;  // pieces and segments split evenly
    const double D = 4.0 * static_cast<double>(elements);
    const double A = D * (G - 1) / (G * Bi), B = D * (nodes - 1) / (nodes * G * Bn);
    SCOPED_TRACE(fmt::format("N={} G={}", nodes, G));
    topo::CollectiveOptions o;
    o.gpus_per_node = G;
    EXPECT_NEAR(stream(*t, "reduce_scatter", "two_level", elements, o).timing.duration().seconds(), A + B, 1e-12);
    o.segments = nodes;
    // Exact up to the picosecond rounding of the event times.
    EXPECT_NEAR(stream(*t, "reduce_scatter", "two_level", elements, o).timing.duration().seconds(), A / nodes + B,
                1e-10);
  }
}

TEST(CollectiveTiming, RepeatedRunsAreIdentical) {
  topo::ClusterSpec spec;
  spec.topology = "fat_tree";
  spec.k = 4;
  spec.nodes = 16;
  const auto t = topo::build_topology(spec);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const TimedRun a = stream(*t, "allreduce", "ring", 1 << 16, {}, true);
  const TimedRun b = stream(*t, "allreduce", "ring", 1 << 16, {}, true);
  EXPECT_EQ(a.timing.op_end, b.timing.op_end);
  // ECMP collisions on the fat-tree can only slow the ring down against the contention-free bound.
  const double S = 4.0 * (1 << 16), n = 16;
  EXPECT_GE(a.timing.duration().seconds(), 2 * (n - 1) * S / (n * spec.nic_Bps));
}

}  // namespace
}  // namespace ccsim::sim
