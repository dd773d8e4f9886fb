// ParallelGroups: Megatron's rank formula for every dimension order, groups that partition the
// world, TP placement on nodes, and input errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "sim/base/check.hpp"
#include "topology/parallel_groups.hpp"

namespace ccsim::topo {
namespace {

constexpr std::array<Dim, 3> kDims{Dim::kTensor, Dim::kPipeline, Dim::kData};

ParallelGroups must_make(const ParallelLayout& layout, uint32_t world) {
  Result<ParallelGroups> r = ParallelGroups::make(layout, world);
  EXPECT_TRUE(r.ok()) << r.status().message();
  CCSIM_CHECK(r.ok(), "{}", r.status().message());
  return std::move(r).value();
}

uint32_t index_in(const ParallelCoord& c, const std::string& dim) {
  return dim == "tp" ? c.tp : dim == "dp" ? c.dp : c.pp;
}
uint32_t degree_in(const ParallelLayout& l, const std::string& dim) {
  return dim == "tp" ? l.tp : dim == "dp" ? l.dp : l.pp;
}

TEST(ParallelGroups, DefaultOrderIsMegatrons) {
  const ParallelLayout layout{.tp = 2, .pp = 3, .dp = 4};
  const ParallelGroups g = must_make(layout, 24);
  EXPECT_EQ(g.order(), (std::array<Dim, 3>{Dim::kTensor, Dim::kData, Dim::kPipeline}));
  for (uint32_t pp = 0; pp < 3; ++pp) {
    for (uint32_t dp = 0; dp < 4; ++dp) {
      for (uint32_t tp = 0; tp < 2; ++tp) {
        const Rank r = tp + 2 * (dp + 4 * pp);
        EXPECT_EQ(g.rank_at({.tp = tp, .dp = dp, .pp = pp}), r);
        EXPECT_EQ(g.coord(r), (ParallelCoord{.tp = tp, .dp = dp, .pp = pp})) << r;
      }
    }
  }
  EXPECT_EQ(g.group(Dim::kTensor, 5), (std::vector<Rank>{4, 5}));
  EXPECT_EQ(g.group(Dim::kData, 5), (std::vector<Rank>{1, 3, 5, 7}));
  EXPECT_EQ(g.group(Dim::kPipeline, 5), (std::vector<Rank>{5, 13, 21}));
  EXPECT_EQ(g.stride(Dim::kTensor), 1u);
  EXPECT_EQ(g.stride(Dim::kData), 2u);
  EXPECT_EQ(g.stride(Dim::kPipeline), 8u);
}

// For every permutation: rank = i0 + n0 * (i1 + n1 * i2) with dimensions named fastest first.
TEST(ParallelGroups, EveryOrderFollowsTheFormula) {
  std::array<std::string, 3> names{"dp", "pp", "tp"};  // sorted: next_permutation visits all 6
  int orders = 0;
  do {
    const std::string order = names[0] + "-" + names[1] + "-" + names[2];
    SCOPED_TRACE(order);
    const ParallelLayout layout{.tp = 2, .pp = 5, .dp = 3, .order = order};
    const ParallelGroups g = must_make(layout, 30);
    for (Rank r = 0; r < 30; ++r) {
      const ParallelCoord c = g.coord(r);
      const uint32_t n0 = degree_in(layout, names[0]), n1 = degree_in(layout, names[1]);
      EXPECT_EQ(index_in(c, names[0]) + n0 * (index_in(c, names[1]) + n1 * index_in(c, names[2])), r);
      EXPECT_EQ(g.rank_at(c), r);
      EXPECT_LT(c.tp, 2u);
      EXPECT_LT(c.pp, 5u);
      EXPECT_LT(c.dp, 3u);
    }
    ++orders;
  } while (std::next_permutation(names.begin(), names.end()));
  EXPECT_EQ(orders, 6);
}

TEST(ParallelGroups, GroupsPartitionTheWorld) {
  for (const char* order : {"tp-dp-pp", "pp-tp-dp", "dp-pp-tp"}) {
    const ParallelLayout layout{.tp = 4, .pp = 2, .dp = 3, .order = order};
    const ParallelGroups g = must_make(layout, 24);
    for (Dim d : kDims) {
      SCOPED_TRACE(fmt::format("{} {}", order, dim_name(d)));
      const auto groups = g.groups(d);
      ASSERT_EQ(groups.size(), g.num_groups(d));
      EXPECT_EQ(groups.size() * g.size(d), 24u);
      std::vector<int> seen(24, 0);
      Rank previous_first = 0;
      for (size_t i = 0; i < groups.size(); ++i) {
        const auto& members = groups[i];
        ASSERT_EQ(members.size(), g.size(d));
        if (i > 0) {
          EXPECT_GT(members.front(), previous_first);  // ordered by lowest rank
        }
        previous_first = members.front();
        for (uint32_t j = 0; j < members.size(); ++j) {
          const Rank r = members[j];
          ++seen[r];
          EXPECT_EQ(g.index(d, r), j);  // ordered by the index along d
          EXPECT_EQ(g.group(d, r), members);
          // Members differ from the first only along d.
          for (Dim other : kDims) {
            if (other != d) {
              EXPECT_EQ(g.index(other, r), g.index(other, members.front()));
            }
          }
        }
      }
      for (Rank r = 0; r < 24; ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
    }
  }
}

TEST(ParallelGroups, TensorGroupsStayOnANodeWhenTpDividesGpusPerNode) {
  for (uint32_t tp : {1u, 2u, 4u, 8u}) {
    const ParallelGroups g = must_make({.tp = tp, .pp = 2, .dp = 64 / tp}, 128);
    for (const auto& group : g.groups(Dim::kTensor)) EXPECT_TRUE(intra_node(group, 8)) << "tp=" << tp;
    // Data-parallel groups cross nodes whenever tp leaves room for fewer than dp replicas per node.
    if (tp * g.size(Dim::kData) > 8) {
      for (const auto& group : g.groups(Dim::kData)) EXPECT_FALSE(intra_node(group, 8)) << "tp=" << tp;
    }
  }
  // tp = 3 does not divide 4: some TP group straddles two nodes.
  const ParallelGroups odd = must_make({.tp = 3, .pp = 1, .dp = 4}, 12);
  EXPECT_FALSE(intra_node(odd.group(Dim::kTensor, 3), 4));  // {3, 4, 5}
  // With TP slowest-varying, TP groups are strided across nodes.
  const ParallelGroups strided = must_make({.tp = 4, .pp = 1, .dp = 4, .order = "dp-pp-tp"}, 16);
  EXPECT_EQ(strided.group(Dim::kTensor, 0), (std::vector<Rank>{0, 4, 8, 12}));
  EXPECT_FALSE(intra_node(strided.group(Dim::kTensor, 0), 4));
}

TEST(ParallelGroups, IntraNodeHelper) {
  EXPECT_TRUE(intra_node({0, 1, 2, 3}, 4));
  EXPECT_TRUE(intra_node({7, 5}, 4));
  EXPECT_FALSE(intra_node({3, 4}, 4));
  EXPECT_TRUE(intra_node({9}, 1));
  EXPECT_FALSE(intra_node({0, 1}, 1));
  EXPECT_TRUE(intra_node({}, 8));
}

TEST(ParallelGroups, SingleRankAndDefaultLayout) {
  const ParallelGroups g = must_make({}, 1);
  for (Dim d : kDims) {
    EXPECT_EQ(g.group(d, 0), (std::vector<Rank>{0}));
    EXPECT_EQ(g.groups(d).size(), 1u);
  }
  EXPECT_EQ(g.layout().order, "tp-dp-pp");
}

struct BadLayout {
  std::string name;
  ParallelLayout layout;
  uint32_t world = 1;
  std::string message_start;
};

void PrintTo(const BadLayout& b, std::ostream* os) { *os << b.name; }

std::vector<BadLayout> bad_layouts() {
  const std::string order_error = "order: expected a permutation of tp, dp, pp separated by '-'";
  std::vector<BadLayout> v;
  const auto add = [&](std::string name, uint32_t tp, uint32_t pp, uint32_t dp, std::string order, uint32_t world,
                       std::string start) {
    BadLayout b;
    b.name = std::move(name);
    b.layout.tp = tp;
    b.layout.pp = pp;
    b.layout.dp = dp;
    b.layout.order = std::move(order);
    b.world = world;
    b.message_start = std::move(start);
    v.push_back(std::move(b));
  };
  add("ProductTooSmall", 2, 2, 2, "tp-dp-pp", 16, "tp * dp * pp: expected the world size (16), got 2 * 2 * 2 = 8");
  add("ProductTooLarge", 8, 1, 4, "tp-dp-pp", 16, "tp * dp * pp: expected the world size (16)");
  add("ZeroTp", 0, 1, 1, "tp-dp-pp", 1, "tp: expected a degree >= 1, got 0");
  add("ZeroPp", 1, 0, 1, "tp-dp-pp", 1, "pp: expected a degree >= 1, got 0");
  add("ZeroDp", 1, 1, 0, "tp-dp-pp", 1, "dp: expected a degree >= 1, got 0");
  add("TwoNames", 1, 1, 1, "tp-dp", 1, order_error + ", fastest first (e.g. \"tp-dp-pp\"), got \"tp-dp\"");
  add("Repeated", 1, 1, 1, "tp-tp-pp", 1, order_error);
  add("FourNames", 1, 1, 1, "tp-dp-pp-tp", 1, order_error);
  add("UpperCase", 1, 1, 1, "TP-dp-pp", 1, order_error);
  add("Underscores", 1, 1, 1, "tp_dp_pp", 1, order_error);
  add("TrailingDash", 1, 1, 1, "tp-dp-pp-", 1, order_error);
  add("Empty", 1, 1, 1, "", 1, order_error);
  return v;
}

class InvalidLayout : public testing::TestWithParam<BadLayout> {};

TEST_P(InvalidLayout, FailsNamingTheField) {
  const BadLayout& bad = GetParam();
  const Result<ParallelGroups> r = ParallelGroups::make(bad.layout, bad.world);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind(bad.message_start, 0), 0u) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(ParallelGroups, InvalidLayout, testing::ValuesIn(bad_layouts()),
                         [](const testing::TestParamInfo<BadLayout>& param) { return param.param.name; });

TEST(ParallelGroups, ReportsEveryErrorAtOnce) {
  const Result<ParallelGroups> r = ParallelGroups::make({.tp = 2, .pp = 2, .dp = 2, .order = "x"}, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tp * dp * pp:"), std::string::npos);
  EXPECT_NE(r.status().message().find("; order:"), std::string::npos) << r.status().message();
}

// dp 0 fills the world with replicas; a tp * pp that does not divide it is an error naming both.
TEST(ParallelGroups, MakeFillingDerivesDp) {
  auto g = ParallelGroups::make_filling({.tp = 2, .pp = 3, .dp = 0}, 24);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->layout().dp, 4u);
  EXPECT_EQ(g->groups(Dim::kData).size(), 6u);
  auto explicit_dp = ParallelGroups::make_filling({.tp = 2, .pp = 3, .dp = 2}, 24);
  ASSERT_FALSE(explicit_dp.ok());  // an explicit dp is kept, and checked
  EXPECT_NE(explicit_dp.status().message().find("tp * dp * pp"), std::string::npos);
  auto bad = ParallelGroups::make_filling({.tp = 5, .pp = 1, .dp = 0}, 24);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("world size (24)"), std::string::npos) << bad.status().message();
}

// Hierarchical algorithms see G members per node only when the group is G consecutive members on
// each of its nodes, every block on a node of its own.
TEST(ParallelGroups, GroupGpusPerNode) {
  const Topology t("star", 16, 4);  // ranks 4n .. 4n+3 on node n
  EXPECT_EQ(group_gpus_per_node({0, 1, 2, 3, 4, 5, 6, 7}, t), 4u);
  EXPECT_EQ(group_gpus_per_node({0, 1, 4, 5, 8, 9}, t), 2u);
  EXPECT_EQ(group_gpus_per_node({0, 4, 8, 12}, t), 1u);
  EXPECT_EQ(group_gpus_per_node({0, 1, 2, 4, 5}, t), 1u);     // blocks of unequal size
  EXPECT_EQ(group_gpus_per_node({0, 1, 4, 2, 3, 5}, t), 1u);  // node 0 twice
  EXPECT_EQ(group_gpus_per_node({0, 1, 2, 3}, t), 4u);
}

}  // namespace
}  // namespace ccsim::topo
