// Collectives run a piece of the tensor at a time (algo::run_in_pieces): the same per-rank errors,
// bit for bit, as run_numerics() then operation_errors() on whole tensors, for every scheme that
// declares its coding local to pieces, on every algorithm of every operation whose chunks never mix.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/parallel.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

using testing::make;
using testing::normal_vector;

constexpr uint64_t kSeed = 23;

// Every rank's input, and a source that copies pieces of them.
struct Inputs {
  std::vector<std::vector<float>> ranks;

  Inputs(uint32_t count, uint64_t elements) {
    for (uint32_t r = 0; r < count; ++r) {
      std::vector<float> x = normal_vector(elements, 100 + r, 0.01f);
      for (uint64_t i = 0; i < elements; i += 1 + i % 7919) x[i] *= 300.0f;  // a few large entries
      ranks.push_back(std::move(x));
    }
  }
  PieceSource source() const {
    return [this](uint64_t first, std::span<const std::span<float>> views) {
      for (size_t r = 0; r < views.size(); ++r)
        std::copy_n(ranks[r].begin() + static_cast<ptrdiff_t>(first), views[r].size(), views[r].begin());
    };
  }
};

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// One scheme's all-reduce on whole tensors, as the collective run path runs it.
struct WholeRun {
  std::vector<ErrorStats> errors;
  NumericsStats stats;
};

WholeRun run_whole(const CompressedCollective& lowering, const Inputs& in) {
  std::vector<std::vector<float>> work = in.ranks;
  std::vector<std::span<float>> views(work.begin(), work.end());
  auto round = lowering.run(views, {kSeed, 0});
  EXPECT_TRUE(round.ok()) << round.status().message();
  const std::vector<std::span<const float>> ins(in.ranks.begin(), in.ranks.end());
  const std::vector<std::span<const float>> outs(work.begin(), work.end());
  return {operation_errors(round->schedule, ins, outs), round->stats};
}

struct Case {
  std::string scheme;
  nlohmann::json params;
};

// Every registered scheme that codes in pieces, by its defaults, and other formats of some.
std::vector<Case> piece_cases() {
  std::vector<Case> out;
  for (const std::string& name : CompressorRegistry::global().names()) {
    auto c = make(name.c_str());
    if (c != nullptr && c->codes_in_pieces()) out.push_back({name, nlohmann::json::object()});
  }
  out.push_back({"int8", {{"block", 64}, {"rounding", "nearest"}}});
  out.push_back({"int8", {{"block", 8}}});
  out.push_back({"qsgd", {{"bucket", 1 << 20}}});  // pieces of a bucket, larger than the tensor
  out.push_back({"qsgd", {{"bits", 4}, {"bucket", 128}}});
  return out;
}

class EveryOperation : public ::testing::TestWithParam<topo::CollectiveOp> {};

TEST_P(EveryOperation, EveryPieceSchemeAndAlgorithmGivesTheWholeRunsErrorsBitForBit) {
  const uint64_t n = 3 * (uint64_t{1} << 16) + 1000;  // error pieces and a partial last one
  int compared = 0;
  for (const Case& k : piece_cases()) {
    for (const topo::CollectiveInfo& info : topo::known_collectives()) {
      if (info.operation != GetParam()) continue;
      for (uint32_t ranks : {3u, 4u}) {
        auto comp = make(k.scheme.c_str(), k.params);
        ASSERT_NE(comp, nullptr);
        if (!CompressedCollective::check(*comp, info, ranks, n, {}).ok()) continue;
        SCOPED_TRACE(fmt::format("{} {} on {} ranks, {} {}", k.scheme, k.params.dump(), ranks,
                                 topo::collective_op_name(info.operation), info.algorithm));
        CompressedCollective lowering(*comp, info, ranks, n, {});
        const Inputs in(ranks, n);
        const std::vector<std::span<const float>> ins(in.ranks.begin(), in.ranks.end());
        ASSERT_TRUE(lowering.plan(ins, {kSeed, 0}).ok());
        const topo::Schedule schedule = lowering.bound_schedule();
        if (!runs_in_pieces(schedule, *comp, {})) {
          ADD_FAILURE() << "a scheme that codes in pieces cannot run its collective in pieces";
          continue;
        }
        const WholeRun whole = run_whole(lowering, in);
        for (uint64_t piece : {uint64_t{1} << 16, uint64_t{1} << 17}) {
          const PieceRound round{&schedule, comp.get()};
          auto got = run_in_pieces({&round, 1}, in.source(), piece, {kSeed, 0});
          ASSERT_TRUE(got.ok()) << got.status().message();
          ASSERT_EQ(got->front().errors.size(), ranks);
          for (uint32_t r = 0; r < ranks; ++r) {
            EXPECT_EQ(bits(got->front().errors[r].sq_error), bits(whole.errors[r].sq_error)) << "rank " << r;
            EXPECT_EQ(bits(got->front().errors[r].sq_norm), bits(whole.errors[r].sq_norm)) << "rank " << r;
          }
          EXPECT_EQ(got->front().stats.wire_bytes, whole.stats.wire_bytes);
          EXPECT_EQ(got->front().stats.kernels_run, whole.stats.kernels_run);
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, 40);
}

INSTANTIATE_TEST_SUITE_P(RunInPieces, EveryOperation,
                         ::testing::Values(topo::CollectiveOp::kAllReduce, topo::CollectiveOp::kReduceScatter,
                                           topo::CollectiveOp::kAllGather, topo::CollectiveOp::kBroadcast),
                         [](const ::testing::TestParamInfo<topo::CollectiveOp>& info) {
                           return std::string(topo::collective_op_name(info.param));
                         });

// Several rounds on one draw, on any thread count: each the run it would be alone.
TEST(RunInPieces, RoundsSharingPiecesAreIndependentOfEachOtherAndOfTheThreadCount) {
  const uint64_t n = 5 * (uint64_t{1} << 16) + 3;
  const uint32_t ranks = 8;
  const Inputs in(ranks, n);
  auto ring = topo::find_collective("allreduce", "ring");
  ASSERT_TRUE(ring.ok());
  auto bf16 = make("bf16");
  auto int8 = make("int8");
  CompressedCollective a(*bf16, **ring, ranks, n, {}), b(*int8, **ring, ranks, n, {});
  ASSERT_TRUE(a.fix().ok() && b.fix().ok());
  const topo::Schedule sa = a.bound_schedule(), sb = b.bound_schedule();
  const WholeRun wa = run_whole(a, in), wb = run_whole(b, in);
  const PieceRound rounds[] = {{&sa, bf16.get()}, {&sb, int8.get()}};
  const int before = kern::worker_threads();
  for (int threads : {1, 2, 3}) {
    kern::set_worker_threads(threads);
    auto got = run_in_pieces(rounds, in.source(), 1 << 16, {kSeed, 0});
    ASSERT_TRUE(got.ok());
    for (uint32_t r = 0; r < ranks; ++r) {
      EXPECT_EQ(bits((*got)[0].errors[r].sq_error), bits(wa.errors[r].sq_error)) << threads << " threads";
      EXPECT_EQ(bits((*got)[1].errors[r].sq_error), bits(wb.errors[r].sq_error)) << threads << " threads";
      EXPECT_EQ(bits((*got)[1].errors[r].sq_norm), bits(wb.errors[r].sq_norm)) << threads << " threads";
    }
  }
  kern::set_worker_threads(before);
  EXPECT_GT(wb.errors[0].sq_error, wa.errors[0].sq_error);  // int8 loses more than bf16 here
}

TEST(RunInPieces, OnlyCollectivesWhoseChunksNeverMixBySchemesThatCodeInPieces) {
  const uint64_t n = 1 << 16;
  auto comp = make("int8");
  for (const topo::CollectiveInfo& info : topo::known_collectives()) {
    if (!CompressedCollective::check(*comp, info, 4, n, {}).ok()) continue;
    CompressedCollective l(*comp, info, 4, n, {});
    ASSERT_TRUE(l.fix().ok());
    const bool never_mix = info.operation != topo::CollectiveOp::kAllToAll;
    EXPECT_EQ(runs_in_pieces(l.bound_schedule(), *comp, {}), never_mix) << info.algorithm;
    if (never_mix) {
      EXPECT_FALSE(runs_in_pieces(l.bound_schedule(), *comp, {kSeed, 0, true}));  // hop errors
    }
  }
  // Reduce-scatters whose shards differ (bf16's even split, int8's on its blocks) run apart.
  auto scatter = topo::find_collective("reduce_scatter", "ring");
  ASSERT_TRUE(scatter.ok());
  const uint64_t odd = 3 * n + 5;
  auto bf16 = make("bf16");
  CompressedCollective by_entry(*bf16, **scatter, 4, odd, {}), by_block(*comp, **scatter, 4, odd, {}),
      again(*bf16, **scatter, 4, odd, {});
  ASSERT_TRUE(by_entry.fix().ok() && by_block.fix().ok() && again.fix().ok());
  EXPECT_FALSE(pieces_together(by_entry.bound_schedule(), by_block.bound_schedule()));
  EXPECT_TRUE(pieces_together(by_entry.bound_schedule(), again.bound_schedule()));
  auto ring = topo::find_collective("allreduce", "ring");
  ASSERT_TRUE(ring.ok());
  CompressedCollective reduce_entry(*bf16, **ring, 4, odd, {}), reduce_block(*comp, **ring, 4, odd, {});
  ASSERT_TRUE(reduce_entry.fix().ok() && reduce_block.fix().ok());
  EXPECT_TRUE(pieces_together(reduce_entry.bound_schedule(), reduce_block.bound_schedule()));  // one region
  for (const char* name : {"dynamiq", "thc", "omnireduce", "powersgd"}) {
    auto c = make(name);
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->codes_in_pieces()) << name;
  }
}

TEST(RunInPieces, NonFiniteErrorsAreExplainedAsOnWholeTensors) {
  const uint64_t n = 3 * (uint64_t{1} << 16);
  Inputs in(2, n);
  const std::vector<ErrorStats> bad = {{std::numeric_limits<double>::infinity(), 1.0}, {0.0, 1.0}};
  const std::vector<std::span<const float>> ins(in.ranks.begin(), in.ranks.end());
  // The sum leaves the fp32 range in the second piece.
  in.ranks[0][70000] = in.ranks[1][70000] = 3e38f;
  const Status whole = check_errors_finite(ins, bad, "int8");
  const Status pieces = check_errors_finite(in.source(), n, 2, 1, 1 << 16, bad, "int8");
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(pieces.message(), whole.message());
  EXPECT_NE(whole.message().find("index 70000"), std::string::npos) << whole.message();
  // In range, but near it: the scheme overflowed, with the largest |x| of every piece.
  in.ranks[1][70000] = -3e38f;
  in.ranks[0][150000] = -3.2e38f;
  const Status near = check_errors_finite(ins, bad, "int8");
  EXPECT_EQ(check_errors_finite(in.source(), n, 2, 1, 1 << 16, bad, "int8").message(), near.message());
  EXPECT_NE(near.message().find("3.2e+38"), std::string::npos) << near.message();
  EXPECT_TRUE(check_errors_finite(in.source(), n, 2, 1, 1 << 16, {}, "int8").ok());
}

}  // namespace
}  // namespace ccsim::algo
