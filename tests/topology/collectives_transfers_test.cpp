// Transfer counts of every registered collective (CollectiveInfo::transfers) against the schedules
// themselves: the closed form must equal the transfer ops of info.build(...) for every shape the
// algorithm accepts. The two are independent computations (a formula vs. the generator's ops), so
// a generator change that adds or drops transfers fails here until its formula follows.
//
// Grid: ranks 2..40, 64, 96, 128, 256; elements {1, ranks − 1, 1000, 2^20, 8·ranks} (the last gives
// equal all-to-all blocks for every rank count; 1 and ranks − 1 leave shards empty); segments
// {1, 2, 3}; gpus_per_node {1, 2, 4, 8} dividing ranks; root {0, ranks − 1} for broadcasts; with
// 1000 elements also shard cuts that put the whole tensor in the last shard. Above 40 ranks only
// 8·ranks elements and gpus_per_node 1 and 8 run (the counts never depend on elements, and the
// smaller rank counts cover every element count and node size), which keeps the test near 10 s in
// a Release build: the large schedules dominate its time.
#include "topology/collectives/collectives.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ccsim::topo {
namespace {

/// Rank counts up to this one run every element count and node size.
constexpr uint32_t kFullGridRanks = 40;

/// One shape of the grid.
struct Shape {
  uint32_t ranks = 0;
  uint64_t elements = 0;
  CollectiveOptions options;
};

std::string describe(const CollectiveInfo& info, const Shape& s) {
  return fmt::format("{}/{} ranks={} elements={} segments={} gpus_per_node={} root={} cuts={}",
                     collective_op_name(info.operation), info.algorithm, s.ranks, s.elements, s.options.segments,
                     s.options.gpus_per_node, s.options.root, s.options.cuts.empty() ? "even" : "skewed");
}

std::vector<uint32_t> rank_counts() {
  std::vector<uint32_t> v;
  for (uint32_t n = 2; n <= kFullGridRanks; ++n) v.push_back(n);
  for (uint32_t n : {64u, 96u, 128u, 256u}) v.push_back(n);
  return v;
}

std::vector<uint64_t> element_counts(uint32_t ranks) {
  std::vector<uint64_t> v = {uint64_t{8} * ranks};
  if (ranks <= kFullGridRanks) v.insert(v.end(), {1, ranks - 1u, 1000, uint64_t{1} << 20});
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// Shard cuts of `elements` over `ranks` shards that leave all but the last shard empty.
std::vector<uint64_t> skewed_cuts(uint32_t ranks, uint64_t elements) {
  std::vector<uint64_t> cuts(ranks + 1, 0);
  cuts.back() = elements;
  return cuts;
}

/// Every shape of the grid for `info` (roots vary only for broadcasts), accepted by check or not.
std::vector<Shape> grid(const CollectiveInfo& info) {
  std::vector<Shape> shapes;
  const bool broadcast = info.operation == CollectiveOp::kBroadcast;
  for (uint32_t n : rank_counts())
    for (uint64_t elements : element_counts(n))
      for (bool skewed : {false, true}) {
        if (skewed && elements != 1000) continue;
        for (uint32_t segments : {1u, 2u, 3u})
          for (uint32_t gpus : {1u, 2u, 4u, 8u}) {
            if (n % gpus != 0 || (n > kFullGridRanks && gpus != 1 && gpus != 8)) continue;
            for (uint32_t root : {0u, n - 1}) {
              if (root != 0 && !broadcast) continue;
              Shape s{n, elements, CollectiveOptions{}};
              s.options.segments = segments;
              s.options.gpus_per_node = gpus;
              s.options.root = root;
              if (skewed) s.options.cuts = skewed_cuts(n, elements);
              shapes.push_back(std::move(s));
            }
          }
      }
  return shapes;
}

class CollectiveTransfers : public ::testing::TestWithParam<size_t> {};

TEST_P(CollectiveTransfers, ClosedFormMatchesBuiltSchedule) {
  const CollectiveInfo& info = known_collectives()[GetParam()];
  ASSERT_TRUE(info.transfers) << collective_op_name(info.operation) << "/" << info.algorithm << " has no transfers";
  int ran = 0, failures = 0;
  for (const Shape& s : grid(info)) {
    if (!info.check(s.ranks, s.elements, s.options).ok()) continue;
    SCOPED_TRACE(describe(info, s));
    ++ran;
    const uint64_t counted = info.transfers(s.ranks, s.elements, s.options);
    const uint64_t built = info.build(s.ranks, s.elements, s.options).num_transfers();
    EXPECT_EQ(counted, built);
    if (counted != built && ++failures >= 5) return;  // one broken formula fails every shape
  }
  EXPECT_GT(ran, 0) << "every shape was rejected";
  RecordProperty("shapes_run", ran);
}

// What `ccsim list` says of an algorithm's hops is what its schedule does: the description speaks
// of fused decode-accumulate-encode hops exactly when the built schedule (8 ranks) has one.
TEST_P(CollectiveTransfers, DescriptionNamesFusedHopsExactlyWhenTheScheduleHasThem) {
  const CollectiveInfo& info = known_collectives()[GetParam()];
  CollectiveOptions options;
  options.gpus_per_node = 2;
  if (!info.check(8, 1 << 12, options).ok()) GTEST_SKIP() << "no 8-rank schedule";
  const Schedule schedule = info.build(8, 1 << 12, options);
  const bool fused = std::any_of(schedule.ops().begin(), schedule.ops().end(), [](const Op& op) {
    return op.kind == OpKind::kKernel && op.kernel == KernelKind::kDecodeAccumulateEncode;
  });
  EXPECT_EQ(info.description.find("fused decode-accumulate-encode") != std::string::npos, fused) << info.description;
}

// At the documented limit (2^20 ranks, 2^16 segments) the count is exact: every algorithm's
// transfers are per segment, so it is 2^16 times the one-segment count, which cannot hold if a
// product wrapped. Far beyond it the count saturates instead of wrapping, so it never drops.
TEST_P(CollectiveTransfers, ExactAtTheLimitAndSaturatingBeyond) {
  const CollectiveInfo& info = known_collectives()[GetParam()];
  ASSERT_TRUE(info.transfers);
  constexpr uint32_t kRanks = 1u << 20, kSegments = 1u << 16;
  CollectiveOptions o;
  o.gpus_per_node = 8;
  o.root = kRanks - 1;
  const uint64_t elements = uint64_t{8} * kRanks;
  ASSERT_TRUE(info.check(kRanks, elements, o).ok()) << info.check(kRanks, elements, o).message();
  const uint64_t one = info.transfers(kRanks, elements, o);
  ASSERT_LE(one, std::numeric_limits<uint64_t>::max() / kSegments);
  o.segments = kSegments;
  const uint64_t at_limit = info.transfers(kRanks, elements, o);
  EXPECT_EQ(at_limit, one * kSegments);

  constexpr uint32_t kHugeRanks = 1u << 31;
  o.segments = std::numeric_limits<uint32_t>::max();
  const uint64_t huge_elements = uint64_t{8} * kHugeRanks;
  ASSERT_TRUE(info.check(kHugeRanks, huge_elements, o).ok());
  EXPECT_GE(info.transfers(kHugeRanks, huge_elements, o), at_limit);
}

INSTANTIATE_TEST_SUITE_P(AllRegistered, CollectiveTransfers, ::testing::Range<size_t>(0, known_collectives().size()),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           const CollectiveInfo& c = known_collectives()[p.param];
                           return fmt::format("{}_{}", collective_op_name(c.operation), c.algorithm);
                         });

// A ring all-reduce far past the limit reads as the largest count, not as a small wrapped one.
TEST(CollectiveTransfersSaturation, RingAllReduceSaturates) {
  const auto ring = find_collective("allreduce", "ring_bidir");
  ASSERT_TRUE(ring.ok()) << ring.status().message();
  CollectiveOptions o;
  o.segments = std::numeric_limits<uint32_t>::max();
  const uint32_t ranks = std::numeric_limits<uint32_t>::max();
  ASSERT_TRUE(ring.value()->check(ranks, 1u << 20, o).ok());
  EXPECT_EQ(ring.value()->transfers(ranks, 1u << 20, o), std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace ccsim::topo
