#include <fmt/format.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ccsim::sim
