#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sim/schedule_runner.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {
namespace {

// Binds fp32 wire sizes (4 bytes per element) without the algorithms library.
void bind_fp32(topo::Schedule& s) {
  for (auto& op : s.mutable_ops())
    if (op.kind == topo::OpKind::kTransfer) op.bytes = 4 * s.op_elements(op);
}

// Ring all-reduce on a star: 2(n-1) steps, each alpha (two link latencies) + (S/n)/B.
TEST(RingTiming, MatchesClosedFormOnStar) {
  const double bw = 12.5e9, link_lat = 1e-6;
  for (uint32_t n : {2u, 3u, 4u, 7u, 8u, 16u, 33u, 64u, 128u}) {
    const uint64_t elements = 1024ull * 1024 * n;  // divisible by n: every step moves S/n
    const topo::Topology t = topo::make_star(n, bw, link_lat);
    topo::Schedule s = topo::make_allreduce_ring(n, elements, {});
    bind_fp32(s);
    const ScheduleTiming timing = simulate_schedule(t, s, KernelCostModel{});
    const double S = 4.0 * static_cast<double>(elements);
    const double want = 2.0 * (n - 1) * (2 * link_lat + S / (n * bw));
    SCOPED_TRACE(fmt::format("n={}", n));
    EXPECT_NEAR(timing.duration().seconds(), want, 1e-3 * want);
    EXPECT_NEAR(timing.duration().seconds(), want, 1e-9);  // in fact exact to the picosecond scale
  }
}

TEST(RingTiming, RooflineKernelCostAddsOnTheCriticalPath) {
  // With kernels costing c each, every one of the 2(n-1) steps waits for one kernel before its
  // send (encode or fused hop), so time grows by (2(n-1)) * c when all kernels cost the same.
  const uint32_t n = 4;
  const topo::Topology t = topo::make_star(n, 1e9, 0);
  topo::Schedule s = topo::make_allreduce_ring(n, 4000, {});
  bind_fp32(s);
  for (auto& op : s.mutable_ops())
    if (op.kind == topo::OpKind::kKernel) op.bytes = 1000;
  KernelCostModel costs;
  costs.memory_Bps = 1e9;  // 1000 B -> 1 us
  const double base = simulate_schedule(t, s, KernelCostModel{}).duration().seconds();
  const ScheduleTiming with = simulate_schedule(t, s, costs);
  // Critical path of a chunk: leaf encode, n-2 fused hops, the owner's decode-accumulate and
  // encode, then (transfers forward without waiting for kernels) the last receiver's decode:
  // n + 2 kernels of 1 us each.
  EXPECT_NEAR(with.duration().seconds() - base, (n + 2) * 1e-6, 1e-12);
  for (const Duration d : with.kernel_busy) EXPECT_GT(d.seconds(), 0);
}


// A measured profile whose curves equal the roofline (launch L, 1/B seconds per byte) times every
// op exactly as the roofline does; op kinds the profile lacks fall back to the roofline; a curve
// twice as slow doubles every kernel it covers and nothing else.
TEST(RingTiming, MeasuredKernelCurvesReplaceTheRooflineKindByKind) {
  const uint32_t n = 4;
  const topo::Topology t = topo::make_star(n, 1e9, 1e-6);
  topo::Schedule s = topo::make_allreduce_ring(n, 40000, {});
  bind_fp32(s);
  for (auto& op : s.mutable_ops())
    if (op.kind == topo::OpKind::kKernel) op.bytes = 12 * s.op_elements(op);
  KernelCostModel roofline;
  roofline.memory_Bps = 1e9;
  roofline.launch = Duration::from_seconds(2e-6);
  auto curve = [&](topo::KernelKind k, double slowdown) {
    kern::KernelCostCurve c;
    c.scheme = "test";
    c.op = std::string(topo::kernel_kind_name(k));
    c.launch_s = 2e-6 * slowdown;
    // Two sizes at the same rate, so interpolation cannot matter.
    for (uint64_t e : {1000u, 100000u})
      c.points.push_back({e, 12 * e, c.launch_s + slowdown * 12e-9 * static_cast<double>(e)});
    return c;
  };
  const topo::KernelKind kinds[] = {topo::KernelKind::kEncode, topo::KernelKind::kDecode,
                                    topo::KernelKind::kDecodeAccumulate, topo::KernelKind::kDecodeAccumulateEncode};
  auto same = std::make_shared<kern::DeviceCostProfile>();
  for (auto k : kinds) same->kernels.push_back(curve(k, 1.0));
  const KernelCostModel measured = KernelCostModel::from_profile(same, "same.json", "test", "{}", roofline);
  EXPECT_TRUE(measured.any_measured());
  EXPECT_NE(measured.describe().find("measured test kernels"), std::string::npos) << measured.describe();
  const ScheduleTiming a = simulate_schedule(t, s, roofline);
  const ScheduleTiming b = simulate_schedule(t, s, measured);
  ASSERT_EQ(a.op_end.size(), b.op_end.size());
  for (size_t i = 0; i < a.op_end.size(); ++i) EXPECT_EQ(a.op_end[i], b.op_end[i]) << "op " << i;

  // Only the encode kernels measured, twice as slow: encode busy time doubles, the rest is roofline.
  auto slow = std::make_shared<kern::DeviceCostProfile>();
  slow->kernels.push_back(curve(topo::KernelKind::kEncode, 2.0));
  const KernelCostModel partial = KernelCostModel::from_profile(slow, "slow.json", "test", "{}", roofline);
  EXPECT_NE(partial.describe().find("(encode); roofline"), std::string::npos) << partial.describe();
  Duration want = Duration::zero();
  for (const auto& op : s.ops()) {
    if (op.kind != topo::OpKind::kKernel || op.rank != 0) continue;
    const Duration r = roofline.cost(op.kernel, s.op_elements(op), op.bytes);
    want += op.kernel == topo::KernelKind::kEncode ? Duration::from_seconds_ceil(2 * (r.seconds())) : r;
    if (op.kernel == topo::KernelKind::kEncode) {
      EXPECT_GT(partial.cost(op.kernel, s.op_elements(op), op.bytes), r);
    }
  }
  const ScheduleTiming c = simulate_schedule(t, s, partial);
  EXPECT_NEAR(c.kernel_busy[0].seconds(), want.seconds(), 1e-8);  // ns rounding per kernel

  // A scheme the profile does not cover is charged by the roofline and says so.
  const KernelCostModel other = KernelCostModel::from_profile(same, "same.json", "thc", "{}", roofline);
  EXPECT_FALSE(other.any_measured());
  EXPECT_NE(other.describe().find("no kernels of 'thc' in the profile same.json"), std::string::npos)
      << other.describe();
  EXPECT_EQ(simulate_schedule(t, s, other).end, a.end);
}

}  // namespace
}  // namespace ccsim::sim
