// Plans from inputs given a piece at a time (Compressor::plan_pieces, algo::plan_in_pieces, the
// training runs' shared draws): the same statistics, bit for bit, as plan_local() on whole tensors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "algorithms/bucket_codecs.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/parallel.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {
namespace {

using testing::make;

constexpr uint64_t kSeed = 17;

// Bits of every statistic, so that equal means bit for bit (a NaN included).
std::vector<uint64_t> bits_of(const PlanStats& s) {
  std::vector<uint64_t> out;
  for (double v : s.sum) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  for (float v : s.max) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  out.insert(out.end(), s.bits.begin(), s.bits.end());
  return out;
}

PlanStats zeroed(const Compressor& c, uint64_t elements) {
  const PlanFormat f = c.plan_format(elements, 4);
  return PlanStats{std::vector<double>(f.sum_entries), std::vector<float>(f.max_entries),
                   std::vector<uint64_t>(f.bit_words)};
}

// Rank `rank`'s statistics from pieces of random lengths (multiples of the alignment; the last one
// the rest); nullopt when finish() declines.
std::optional<PlanStats> by_pieces(const Compressor& c, std::span<const float> x, uint32_t rank, uint32_t seed) {
  const kern::RngKey key{kSeed, 0, rank, kPlanStream};
  auto pieces = c.plan_pieces(x.size(), rank, key);
  EXPECT_NE(pieces, nullptr);
  const uint64_t align = c.plan_piece_alignment(x.size());
  std::mt19937 gen(seed);
  std::uniform_int_distribution<uint64_t> units(1, 3);
  for (uint64_t at = 0; at < x.size();) {
    const uint64_t n = std::min<uint64_t>(x.size() - at, units(gen) * align);
    pieces->add(x.subspan(at, n), at);
    at += n;
  }
  PlanStats out = zeroed(c, x.size());
  if (!pieces->finish(out)) return std::nullopt;
  return out;
}

PlanStats whole(const Compressor& c, std::span<const float> x, uint32_t rank) {
  PlanStats out = zeroed(c, x.size());
  c.plan_local(x, rank, kern::RngKey{kSeed, 0, rank, kPlanStream}, out);
  return out;
}

std::vector<float> synthetic(uint64_t n, uint32_t worker, double decades = 3.0) {
  traces::SyntheticGradientSpec spec;
  spec.elements = n;
  spec.scale_decades = decades;
  std::vector<float> x(n);
  const std::span<float> view(x);
  traces::generate_synthetic_gradients(spec, 5, std::span<const std::span<float>>(&view, 1), worker);
  return x;
}

struct Scheme {
  const char* name;
  nlohmann::json params;
};

std::vector<Scheme> schemes() {
  return {{"dynamiq", nlohmann::json::object()},
          {"dynamiq", {{"super_group", 64}}},
          {"mxfp8", nlohmann::json::object()},
          {"mxfp4", nlohmann::json::object()},
          {"thc", nlohmann::json::object()},
          {"thc", {{"rotation_block", 4096}}},
          {"thc", {{"rotation_block", 1 << 21}}},
          {"omnireduce", {{"chunk", 256}}},
          {"omnireduce", {{"chunk", 1024}, {"send", "own"}}}};
}

// Every scheme that plans in pieces gets what plan_local() gets, on tensors of several chunks of
// THC's rotation (2^20 entries) with a partial last block and layers whose scales span decades, so
// that THC's chunks are rotated in frames other than the rank's.
TEST(PlanPieces, EqualPlanLocalBitForBit) {
  for (const uint64_t n : {uint64_t{4'500'001}, uint64_t{(1 << 20) * 3}, uint64_t{70'000}, uint64_t{5}}) {
    const std::vector<float> x = synthetic(n, 2);
    for (const Scheme& s : schemes()) {
      SCOPED_TRACE(fmt::format("{} {} n={}", s.name, s.params.dump(), n));
      auto c = make(s.name, s.params);
      const auto pieced = by_pieces(*c, x, 1, 7);
      ASSERT_TRUE(pieced.has_value());
      EXPECT_EQ(bits_of(*pieced), bits_of(whole(*c, x, 1)));
    }
  }
}

// MX's layer scaling plans on whole tensors only; so does every scheme without a metadata phase.
TEST(PlanPieces, OnlyWherePiecesGiveTheSameStatistics) {
  EXPECT_EQ(make("mxfp8", {{"global_scaling", "layer"}})->plan_pieces(1000, 0, {}), nullptr);
  EXPECT_EQ(make("int8")->plan_pieces(1000, 0, {}), nullptr);
  EXPECT_NE(make("mxfp8")->plan_pieces(1000, 0, {}), nullptr);
}

// THC's chunks: a zero chunk, a NaN or an infinity in a later chunk (the first NaN's bits, as
// plan_local() reports them), an all-zero tensor; and the decline where an entry would scale
// below fp32's normal range in the rank's frame (the whole tensor then gives the statistics).
TEST(PlanPieces, ThcChunksAtTheEdges) {
  const uint64_t n = 3 * (1 << 20) + 100;
  auto c = make("thc");
  std::vector<float> x = synthetic(n, 0);
  std::fill(x.begin() + (1 << 20), x.begin() + (2 << 20), 0.0f);  // the second chunk all zero
  for (const float bad : {0.0f, std::numeric_limits<float>::infinity(), std::nanf("7"), -std::nanf("9")}) {
    SCOPED_TRACE(bad);
    std::vector<float> y = x;
    if (bad != 0.0f) {  // NaN too
      y[(2 << 20) + 5] = bad;
      y[(2 << 20) + 9] = std::nanf("3");  // a later NaN: the first one counts
    }
    const auto pieced = by_pieces(*c, y, 0, 3);
    ASSERT_TRUE(pieced.has_value());
    EXPECT_EQ(bits_of(*pieced), bits_of(whole(*c, y, 0)));
  }
  const std::vector<float> zero(n, 0.0f);
  ASSERT_TRUE(by_pieces(*c, zero, 0, 3).has_value());
  EXPECT_EQ(bits_of(*by_pieces(*c, zero, 0, 3)), bits_of(whole(*c, zero, 0)));
  std::vector<float> tiny = x;
  tiny[10] = 1e3f;
  tiny[(2 << 20) + 11] = 1e-38f;  // 1e-38 / 2^9 is below 2^-126
  EXPECT_FALSE(by_pieces(*c, tiny, 0, 3).has_value());
  tiny[(2 << 20) + 11] = 1e-30f;  // still normal in the rank's frame
  const auto pieced = by_pieces(*c, tiny, 0, 3);
  ASSERT_TRUE(pieced.has_value());
  EXPECT_EQ(bits_of(*pieced), bits_of(whole(*c, tiny, 0)));
}

// Any even range of the generator is what the whole tensor holds there.
TEST(SyntheticGradients, AnyRangeEqualsTheWhole) {
  traces::SyntheticGradientSpec spec;
  spec.elements = 100'003;
  spec.envelope_correlation = 0.5;
  spec.envelope_span = 100;
  std::vector<std::vector<float>> all(3, std::vector<float>(spec.elements));
  std::vector<std::span<float>> v(all.begin(), all.end());
  traces::generate_synthetic_gradients(spec, 9, v);
  for (const auto& [first, count] : {std::pair<uint64_t, uint64_t>{0, 100'003}, {2, 16'384}, {16'384, 50'001},
                                     {99'990, 13}, {40'000, 2}}) {
    SCOPED_TRACE(fmt::format("[{}, +{})", first, count));
    std::vector<std::vector<float>> part(2, std::vector<float>(count));
    std::vector<std::span<float>> pv(part.begin(), part.end());
    traces::generate_synthetic_range(spec, 9, first, pv, 1);  // workers 1 and 2
    for (uint32_t w = 0; w < 2; ++w)
      EXPECT_TRUE(std::equal(part[w].begin(), part[w].end(), all[w + 1].begin() + static_cast<ptrdiff_t>(first)));
  }
}

// plan_in_pieces() makes the plans plan_round() makes: the same wire bytes, decisions and encoded
// messages, with statistics shared by DynamiQ's budgets and by MX's formats; a declined THC rank
// leaves THC's accumulator null, and the others planned.
TEST(PlanInPieces, EqualsPlanRound) {
  const uint64_t n = 2 * (1 << 20) + 4097;
  const uint32_t ranks = 3;
  traces::SyntheticGradientSpec spec;
  spec.elements = n;
  std::vector<std::vector<float>> data(ranks, std::vector<float>(n));
  std::vector<std::span<float>> dv(data.begin(), data.end());
  traces::generate_synthetic_gradients(spec, 4, dv);
  const std::vector<Scheme> list = {{"dynamiq", {{"budget", 5}}}, {"dynamiq", {{"budget", 3}}},
                                    {"mxfp8", nlohmann::json::object()}, {"mxfp6", nlohmann::json::object()},
                                    {"thc", nlohmann::json::object()}, {"omnireduce", nlohmann::json::object()},
                                    {"int8", nlohmann::json::object()}};
  const int saved = kern::worker_threads();
  for (const bool decline : {false, true}) {
    SCOPED_TRACE(decline);
    if (decline) data[2][n - 3] = 1e-39f;  // subnormal: THC's rank 2 declines
    // Three ranks on three threads take whole ranks; on two (unbalanced) or five (too few) every
    // kernel takes the threads.
    for (const int threads : {3, 2, 5}) {
      SCOPED_TRACE(threads);
      kern::set_worker_threads(threads);
      std::vector<std::unique_ptr<Compressor>> a, b;
      std::vector<Compressor*> bp;
      for (const Scheme& s : list) {
        a.push_back(make(s.name, s.params));
        b.push_back(make(s.name, s.params));
        bp.push_back(b.back().get());
      }
      uint64_t pieces = 0;
      const PieceSource source = [&](uint64_t offset, std::span<const std::span<float>> views) {
        ++pieces;
        for (uint32_t r = 0; r < ranks; ++r)
          std::copy_n(data[r].begin() + static_cast<ptrdiff_t>(offset), views[r].size(), views[r].begin());
      };
      auto accs = plan_in_pieces(bp, n, ranks, {kSeed, 0}, source, 2, 1 << 16);
      EXPECT_EQ(pieces, 3u);  // THC's 2^20 alignment sets the pieces
      const std::vector<std::span<const float>> ins(data.begin(), data.end());
      for (size_t k = 0; k < list.size(); ++k) {
        SCOPED_TRACE(list[k].name);
        const bool expect = std::string(list[k].name) != "int8" && !(decline && std::string(list[k].name) == "thc");
        ASSERT_EQ(accs[k] != nullptr, expect);
        if (!expect) continue;
        ASSERT_TRUE(plan_round(*a[k], ins, {kSeed, 0}).ok());
        ASSERT_TRUE(accs[k]->commit().ok());
        const uint64_t m = a[k]->reduced_elements(n);
        ASSERT_EQ(m, b[k]->reduced_elements(n));
        const TensorSpec all{0, m};
        ASSERT_EQ(a[k]->wire_bytes(all, {1, ranks}), b[k]->wire_bytes(all, {1, ranks}));
        const auto da = a[k]->plan_decisions(), db = b[k]->plan_decisions();
        ASSERT_EQ(da.size(), db.size());
        for (size_t d = 0; d < da.size(); ++d) EXPECT_EQ(da[d].detail, db[d].detail);
        std::vector<float> x(m);
        a[k]->prepare(data[1], x, 1, ranks, {kSeed, 0, 1, kPrepareStream});
        std::vector<uint8_t> ea(a[k]->wire_bytes(all, {1, ranks})), eb(ea.size());
        a[k]->encode(x, all, {1, ranks}, {kSeed, 0, 1, 7}, ea);
        b[k]->encode(x, all, {1, ranks}, {kSeed, 0, 1, 7}, eb);
        EXPECT_TRUE(ea == eb);
      }
    }
    kern::set_worker_threads(saved);
  }
}

// A training run's codecs planned from shared draws a piece at a time are those planned from whole
// draws: the same bytes and decisions, and the same result of a round on the same gradients.
TEST(BucketCodecs, PlansFromPiecesAsFromWholeDraws) {
  auto found = topo::find_collective("allreduce", "ring");
  ASSERT_TRUE(found.ok());
  const topo::CollectiveInfo& ring = **found;
  const std::vector<BucketShape> buckets = {{(1 << 21) + 4097, {}}, {40'000, {}}, {2048, {}}};
  const std::vector<BucketCodecs::Config> configs = {{"dynamiq", {{"budget", 5}}, &ring, 4, {}, 0},
                                                     {"mxfp8", nlohmann::json::object(), &ring, 4, {}, 0},
                                                     {"mxfp4", nlohmann::json::object(), &ring, 4, {}, 0},
                                                     {"thc", nlohmann::json::object(), &ring, 4, {}, 0},
                                                     {"omnireduce", nlohmann::json::object(), &ring, 4, {}, 0},
                                                     {"dynamiq", {{"budget", 3}}, &ring, 4, {}, 0}};
  SyntheticGradients pieced(traces::SyntheticGradientSpec{}, 5), whole_draws = pieced;
  pieced.set_piece_elements(1 << 16);
  whole_draws.set_piece_elements(0);
  const std::vector<std::vector<BucketShape>> shapes(configs.size(), buckets);
  auto a = BucketCodecs::make_all(configs, shapes, pieced);
  auto b = BucketCodecs::make_all(configs, shapes, whole_draws);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t k = 0; k < configs.size(); ++k) {
    SCOPED_TRACE(configs[k].scheme);
    std::vector<PlanDecision> da, db;
    for (uint32_t bucket = 0; bucket < buckets.size(); ++bucket) {
      auto x = (*a)[k].round(0, bucket, da);
      auto y = (*b)[k].round(0, bucket, db);
      ASSERT_TRUE(x.ok() && y.ok());
      EXPECT_EQ((*x)->tensor_wire_bytes(), (*y)->tensor_wire_bytes());
      EXPECT_EQ((*x)->plan_bytes(), (*y)->plan_bytes());
      ASSERT_EQ(da.size(), db.size());
      for (size_t d = 0; d < da.size(); ++d) EXPECT_EQ(da[d].detail, db[d].detail);
      RankTensors gx = whole_draws.draw(buckets[bucket].elements, 4, 77), gy = gx;
      std::vector<std::span<float>> vx(gx.begin(), gx.end()), vy(gy.begin(), gy.end());
      ASSERT_TRUE((*x)->run(vx, {kSeed, 0}).ok());
      ASSERT_TRUE((*y)->run(vy, {kSeed, 0}).ok());
      for (uint32_t r = 0; r < 4; ++r)
        EXPECT_EQ(std::memcmp(gx[r].data(), gy[r].data(), 4 * gx[r].size()), 0) << "bucket " << bucket << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace ccsim::algo
