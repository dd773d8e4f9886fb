// OmniReduce (DynamiQ App. C): the agreed union of local top-k chunks, wire sizes over the union,
// a ring all-reduce that sums the union in BF16 and zeroes the rest, send=own (each rank's own
// top-k only), the k update of eq. (1), the fused hop, thread-count independence and degenerate
// inputs.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "algorithms/numerics.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

// The sparse layout unless the test asks for another (most tests look at per-range messages).
std::unique_ptr<OmniReduceCompressor> make_omni(nlohmann::json params = nlohmann::json::object()) {
  if (!params.contains("layout")) params["layout"] = "sparse";
  auto made = CompressorRegistry::global().create("omnireduce", params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return nullptr;
  return std::unique_ptr<OmniReduceCompressor>(dynamic_cast<OmniReduceCompressor*>(made->release()));
}

// Rank inputs whose chunk magnitudes vary over three decades: chunk c of rank r is scaled by
// exp(N(0, 1.5)) drawn per (rank, chunk), plus a profile shared by all ranks with weight `shared`.
std::vector<std::vector<float>> chunky_inputs(uint32_t ranks, uint64_t n, uint64_t chunk, uint32_t seed,
                                              double shared = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  const uint64_t nc = (n + chunk - 1) / chunk;
  std::vector<double> profile(nc);
  for (auto& p : profile) p = dist(gen);
  std::vector<std::vector<float>> x(ranks, std::vector<float>(n));
  for (uint32_t r = 0; r < ranks; ++r) {
    std::vector<double> scale(nc);
    for (uint64_t c = 0; c < nc; ++c) scale[c] = std::exp(1.5 * (shared * profile[c] + (1 - shared) * dist(gen)));
    for (uint64_t i = 0; i < n; ++i) x[r][i] = static_cast<float>(scale[i / chunk] * dist(gen));
  }
  return x;
}

std::vector<std::span<const float>> const_views(const std::vector<std::vector<float>>& x) {
  return std::vector<std::span<const float>>(x.begin(), x.end());
}

Result<PlanReport> plan(OmniReduceCompressor& c, const std::vector<std::vector<float>>& x, uint32_t round = 0) {
  const auto v = const_views(x);
  return plan_round(c, v, {7, round});
}

// The test's own top-k: sort chunk indices by (squared norm descending, index ascending).
std::vector<bool> local_top_k(const std::vector<float>& x, uint64_t chunk, uint64_t k) {
  const uint64_t nc = (x.size() + chunk - 1) / chunk;
  std::vector<double> norm(nc, 0.0);
  for (uint64_t i = 0; i < x.size(); ++i) norm[i / chunk] += static_cast<double>(x[i]) * x[i];
  std::vector<uint64_t> idx(nc);
  std::iota(idx.begin(), idx.end(), uint64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](uint64_t a, uint64_t b) { return norm[a] > norm[b]; });
  std::vector<bool> chosen(nc, false);
  for (uint64_t j = 0; j < k; ++j) chosen[idx[j]] = true;
  return chosen;
}

uint64_t expected_k(double k, uint64_t nc) {
  return static_cast<uint64_t>(std::clamp<double>(std::round(k), 1.0, static_cast<double>(nc)));
}

TEST(OmniReduce, RegisteredWithItsParameterTable) {
  auto& reg = CompressorRegistry::global();
  const CompressorInfo* info = reg.find("omnireduce");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->params.find("chunk")->default_value, 256);
  EXPECT_EQ(info->params.find("bits")->default_value, 8);
  EXPECT_EQ(info->params.find("momentum")->default_value, 0.8);
  EXPECT_EQ(info->params.find("layout")->default_value, "compact");
  EXPECT_EQ(info->params.find("send")->default_value, "union");
  EXPECT_FALSE(reg.create("omnireduce", {{"layout", "dense"}}).ok());
  EXPECT_FALSE(reg.create("omnireduce", {{"send", "all"}}).ok());
  EXPECT_FALSE(reg.create("omnireduce", {{"chunk", 100}}).ok());  // not a power of two
  EXPECT_FALSE(reg.create("omnireduce", {{"bits", 17}}).ok());
  EXPECT_FALSE(reg.create("omnireduce", {{"momentum", 1.5}}).ok());
  auto c = make_omni();
  EXPECT_FALSE(c->sends_own());
  EXPECT_TRUE(make_omni({{"send", "own"}})->sends_own());
  EXPECT_FALSE(c->unbiased());
  EXPECT_EQ(c->determinism(), Determinism::kRunToRun);
  EXPECT_EQ(c->alignment(), 256u);
  // Without a committed metadata phase there is no union to send.
  EXPECT_FALSE(c->can_implement({0, 10}).ok());
}

TEST(OmniReduce, KnownSmallExample) {
  // chunk 4, 10 elements: chunks [0,4) [4,8) [8,10). bits 4: K = round(3 * 4 / 16) = 1 = k_0.
  // Rank 0's largest chunk is 0, rank 1's the partial chunk 2: U = {0, 2}, K'_0 = 2, so
  // k_1 = 0.8 * 1 + 0.2 * (1 / 2) * 1 = 0.9 (still one chunk per rank).
  auto c = make_omni({{"chunk", 4}, {"bits", 4}});
  std::vector<std::vector<float>> x = {{1.00390625f, 1.01171875f, -3.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.0f, 0.1f, 0.0f},
                                       {0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f, 2.0f, -1e30f}};
  EXPECT_EQ(c->target_chunks(3), 1u);
  EXPECT_EQ(c->k_for(3), 1.0);
  auto report = plan(*c, x);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ran);
  EXPECT_EQ(report->wire_bytes_per_rank, 8u);  // one bitmap word
  EXPECT_EQ(c->committed_k(), 1u);
  EXPECT_EQ(c->union_chunks(), 2u);
  EXPECT_TRUE(c->in_union(0));
  EXPECT_FALSE(c->in_union(1));
  EXPECT_TRUE(c->in_union(2));
  EXPECT_EQ(c->k_for(3), 0.8 * 1.0 + (1.0 - 0.8) * 0.5 * 1.0);
  EXPECT_EQ(c->local_k(3), 1u);
  ASSERT_TRUE(c->can_implement({0, 10}).ok());
  EXPECT_FALSE(c->can_implement({0, 11}).ok());
  // Wire: the six union elements in order, BF16 round to nearest even: 1 + 2^-8 ties down to 1,
  // 1 + 3 * 2^-8 ties up to 1 + 2^-6.
  const TensorSpec spec{0, 10};
  ASSERT_EQ(c->wire_bytes(spec, {1, 2}), 12u);
  std::vector<uint8_t> msg(12);
  c->encode(x[0], spec, {1, 2}, kern::RngKey{}, msg);
  std::vector<uint16_t> codes(6);
  std::memcpy(codes.data(), msg.data(), 12);
  EXPECT_EQ(codes, (std::vector<uint16_t>{0x3F80, 0x3F82, 0xC040, 0x0000, 0x3DCD, 0x0000}));
  std::vector<float> d(10, 9.0f);
  c->decode(msg, spec, {1, 2}, d);
  EXPECT_EQ(d, (std::vector<float>{1.0f, 1.015625f, -3.0f, 0.0f, 0, 0, 0, 0, kern::bf16_to_float(0x3DCD), 0.0f}));
  // A spec starting inside chunk 1 and ending inside chunk 2: elements 8 and 9 only.
  EXPECT_EQ(c->wire_bytes({6, 4}, {1, 2}), 4u);
  EXPECT_EQ(c->wire_bytes({1, 2}, {1, 2}), 4u);
  EXPECT_EQ(c->wire_bytes({4, 4}, {1, 2}), 0u);
  // prepare() zeroes what lies outside U.
  std::vector<float> p = x[1];
  c->prepare(p, p, 1, 2, kern::RngKey{});
  EXPECT_EQ(p, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 2.0f, -1e30f}));
}

TEST(OmniReduce, UnionIsTheOrOfIndependentlyComputedLocalTopK) {
  const uint32_t ranks = 4;
  const uint64_t chunk = 256, n = 256 * 90 + 100;  // 91 chunks, the last one partial
  auto x = chunky_inputs(ranks, n, chunk, 1);
  // Rank 3 is all zeros but for one chunk: every other norm ties at 0, so it takes the lowest indices.
  std::fill(x[3].begin(), x[3].end(), 0.0f);
  x[3][256 * 50 + 3] = 1.0f;
  auto c = make_omni({{"bits", 2}});
  auto report = plan(*c, x);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->wire_bytes_per_rank, 8u * 2);  // 91 chunks: two bitmap words
  const uint64_t nc = 91, k = 11;                  // k_0 = K = round(91 * 2 / 16) = round(11.375)
  EXPECT_EQ(c->target_chunks(nc), k);
  EXPECT_EQ(c->committed_k(), k);
  std::vector<bool> expected(nc, false);
  for (uint32_t r = 0; r < ranks; ++r) {
    const auto chosen = local_top_k(x[r], chunk, k);
    for (uint64_t j = 0; j < nc; ++j) expected[j] = expected[j] || chosen[j];
  }
  uint64_t count = 0;
  for (uint64_t j = 0; j < nc; ++j) {
    EXPECT_EQ(c->in_union(j), expected[j]) << "chunk " << j;
    count += expected[j];
  }
  EXPECT_EQ(c->union_chunks(), count);
  EXPECT_GT(count, k);  // independent ranks disagree
  for (uint64_t j = 0; j + 1 < k; ++j) EXPECT_TRUE(c->in_union(j)) << "rank 3's tied zero chunks";
}

TEST(OmniReduce, WireBytesAreTwiceTheUnionElementsOfEverySpec) {
  for (const uint64_t chunk : {1ull, 8ull, 64ull, 256ull, 1024ull}) {
    const uint64_t n = chunk * 37 + chunk / 2 + 1;  // a partial last chunk (a full one when chunk = 1)
    SCOPED_TRACE(fmt::format("chunk={} n={}", chunk, n));
    auto x = chunky_inputs(3, n, chunk, 2);
    for (uint64_t i = chunk * 37; i < n; ++i) x[1][i] = 1e6f;  // the partial chunk is in U
    auto c = make_omni({{"chunk", chunk}});
    ASSERT_TRUE(plan(*c, x).ok());
    ASSERT_TRUE(c->in_union(37));
    auto union_count = [&](uint64_t offset, uint64_t count) {
      uint64_t u = 0;
      for (uint64_t i = offset; i < offset + count; ++i) u += c->in_union(i / chunk);
      return u;
    };
    std::vector<TensorSpec> specs = {{0, n}, {0, 0}, {n - 1, 1}, {3, n / 3}, {n / 2, n - n / 2}};
    for (const auto& s : topo::split_even(n, 5, chunk)) specs.push_back({s.offset, s.count});
    uint64_t union_total = 0;
    for (uint64_t j = 0; j * chunk < n; ++j) union_total += c->in_union(j) ? std::min(chunk, n - j * chunk) : 0;
    EXPECT_EQ(c->wire_bytes({0, n}, {1, 3}), 2 * union_total);
    for (const TensorSpec& spec : specs) {
      SCOPED_TRACE(fmt::format("spec [{}, {})", spec.offset, spec.offset + spec.count));
      const uint64_t bytes = c->wire_bytes(spec, {2, 3});
      EXPECT_EQ(bytes, 2 * union_count(spec.offset, spec.count));
      EXPECT_EQ(bytes, c->wire_bytes(spec, {1, 3}));  // the same at every hop
      std::vector<uint8_t> a(bytes + 16, 0xAB), b(bytes + 16, 0x5C);
      std::span<const float> xs(x[0].data() + spec.offset, spec.count);
      c->encode(xs, spec, {1, 3}, kern::RngKey{}, std::span<uint8_t>(a.data(), bytes));
      c->encode(xs, spec, {1, 3}, kern::RngKey{}, std::span<uint8_t>(b.data(), bytes));
      for (uint64_t i = bytes; i < bytes + 16; ++i) ASSERT_EQ(a[i], 0xAB) << "encode wrote past the wire size";
      EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(bytes), b.begin()));
    }
  }
}

TEST(OmniReduce, RingAllReduceSumsTheUnionInBf16AndZeroesTheRest) {
  const uint32_t ranks = 5;
  const uint64_t chunk = 128, n = 128 * 60 + 77;
  const auto x = chunky_inputs(ranks, n, chunk, 3, 0.5);
  auto c = make_omni({{"chunk", chunk}, {"bits", 4}});
  ASSERT_TRUE(plan(*c, x).ok());
  topo::Schedule s = topo::make_allreduce_ring(ranks, n, {c->alignment()});
  bind_schedule(s, *c);
  uint64_t expected_wire = 0;
  for (const auto& op : s.ops())
    if (op.kind == topo::OpKind::kTransfer)
      expected_wire += 2 * c->union_elements({s.chunks()[op.chunk].offset, s.chunks()[op.chunk].count});
  auto out = x;
  std::vector<std::span<float>> v(out.begin(), out.end());
  auto stats = run_numerics(s, *c, v, {7, 0});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->wire_bytes, expected_wire);
  EXPECT_LT(expected_wire, 2 * n * 2 * (ranks - 1));  // less than a BF16 ring all-reduce
  // Every value is rounded to BF16 (relative error <= 2^-9) once per hop: ranks - 1 reduce-scatter
  // encodes of partial sums and the all-gather encode of the total, each bounded by sum_r |x_r|.
  uint64_t inside = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double exact = 0, magnitude = 0;
    for (uint32_t r = 0; r < ranks; ++r) {
      exact += x[r][i];
      magnitude += std::fabs(x[r][i]);
    }
    const bool in_u = c->in_union(i / chunk);
    inside += in_u;
    for (uint32_t r = 0; r < ranks; ++r) {
      if (!in_u) {
        ASSERT_EQ(out[r][i], 0.0f) << "element " << i << " outside U on rank " << r;
      } else {
        ASSERT_NEAR(out[r][i], exact, ranks * 0x1p-9 * magnitude * 1.01) << "element " << i << " rank " << r;
      }
      ASSERT_EQ(out[r][i], out[0][i]) << "ranks disagree at " << i;
    }
  }
  EXPECT_GT(inside, 0u);
  EXPECT_LT(inside, n);
}

TEST(OmniReduce, CompactLayoutAllReducesTheGatheredUnion) {
  const uint32_t ranks = 5;
  const uint64_t chunk = 128, n = 128 * 60 + 77;  // a partial last chunk, placed in U on rank 2
  auto x = chunky_inputs(ranks, n, chunk, 3, 0.5);
  for (uint64_t i = 128 * 60; i < n; ++i) x[2][i] = 1e3f;
  auto c = make_omni({{"chunk", chunk}, {"bits", 4}, {"layout", "compact"}});
  ASSERT_TRUE(c->compact());
  EXPECT_EQ(c->reduced_elements(n), n);  // no plan yet
  ASSERT_TRUE(plan(*c, x).ok());
  ASSERT_TRUE(c->in_union(60));
  const uint64_t reduced = c->reduced_elements(n);
  EXPECT_EQ(reduced, c->union_elements({0, n}));
  EXPECT_LT(reduced, n);
  EXPECT_EQ(c->reduced_elements(n + 1), n + 1);  // another tensor: not planned
  // prepare() gathers the union chunks in order; finish() scatters them back, zeros elsewhere.
  std::vector<float> gathered(reduced), back(n, 7.0f);
  c->prepare(x[0], gathered, 0, ranks, kern::RngKey{});
  std::vector<float> expected_gather, expected_back(n, 0.0f);
  for (uint64_t i = 0; i < n; ++i)
    if (c->in_union(i / chunk)) {
      expected_gather.push_back(x[0][i]);
      expected_back[i] = x[0][i];
    }
  EXPECT_EQ(gathered, expected_gather);
  c->finish(gathered, back, 0, ranks);
  EXPECT_EQ(back, expected_back);
  // Messages are dense BF16 of the gathered vector.
  EXPECT_EQ(c->wire_bytes({0, reduced}, {1, ranks}), 2 * reduced);
  EXPECT_TRUE(c->can_implement({0, reduced}).ok());
  EXPECT_FALSE(c->can_implement({0, reduced + 1}).ok());
  // The ring runs on the gathered vector: shards of equal size, sum over U, 0 elsewhere.
  topo::Schedule s = topo::make_allreduce_ring(ranks, reduced, {c->alignment()});
  bind_schedule(s, *c);
  uint64_t expected_wire = 0, largest = 0;
  for (const auto& op : s.ops())
    if (op.kind == topo::OpKind::kTransfer) {
      expected_wire += 2 * s.chunks()[op.chunk].count;
      largest = std::max(largest, 2 * s.chunks()[op.chunk].count);
    }
  EXPECT_LE(largest, 2 * (reduced / ranks + chunk));
  auto out = x;
  std::vector<std::span<float>> v(out.begin(), out.end());
  auto stats = run_numerics(s, *c, v, {7, 0});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->wire_bytes, expected_wire);
  EXPECT_EQ(expected_wire, 2 * reduced * 2 * (ranks - 1));
  for (uint64_t i = 0; i < n; ++i) {
    double exact = 0, magnitude = 0;
    for (uint32_t r = 0; r < ranks; ++r) {
      exact += x[r][i];
      magnitude += std::fabs(x[r][i]);
    }
    for (uint32_t r = 0; r < ranks; ++r) {
      if (!c->in_union(i / chunk)) {
        ASSERT_EQ(out[r][i], 0.0f) << "element " << i << " outside U on rank " << r;
      } else {
        ASSERT_NEAR(out[r][i], exact, ranks * 0x1p-9 * magnitude * 1.01) << "element " << i << " rank " << r;
      }
      ASSERT_EQ(out[r][i], out[0][i]) << "ranks disagree at " << i;
    }
  }
  // With every chunk in U the gathered vector is the tensor, and prepare/finish work in place.
  auto all = make_omni({{"chunk", chunk}, {"bits", 16}, {"layout", "compact"}});
  ASSERT_TRUE(plan(*all, x).ok());
  ASSERT_EQ(all->reduced_elements(n), n);
  auto y = x[1];
  all->prepare(y, y, 1, ranks, kern::RngKey{});
  all->finish(y, y, 1, ranks);
  EXPECT_EQ(y, x[1]);
}

// send=own: a rank contributes only its own top-k chunks; the union still fixes the wire. With
// small integers every BF16 hop is exact, so the all-reduce must equal, entry for entry, the sum of
// each rank's entries in the chunks of its own top-k (the test's own selection), on both layouts.
TEST(OmniReduce, SendOwnSumsEachRanksOwnTopKChunksOnly) {
  const uint32_t ranks = 4;
  const uint64_t chunk = 16, n = 16 * 50 + 9;  // 51 chunks, the last one partial
  // Integers in [-31, 31]: every partial sum of 4 ranks is an integer of magnitude <= 124, exact in BF16.
  std::vector<std::vector<float>> x = chunky_inputs(ranks, n, chunk, 11, 0.3);
  for (auto& xr : x)
    for (float& v : xr) v = std::clamp(std::round(v * 4.0f), -31.0f, 31.0f);
  for (const std::string layout : {"sparse", "compact"}) {
    SCOPED_TRACE(layout);
    auto own = make_omni({{"chunk", chunk}, {"bits", 4}, {"layout", layout}, {"send", "own"}});
    auto all = make_omni({{"chunk", chunk}, {"bits", 4}, {"layout", layout}});
    ASSERT_TRUE(plan(*own, x).ok());
    ASSERT_TRUE(plan(*all, x).ok());
    const uint64_t nc = 51, k = own->committed_k();
    EXPECT_EQ(k, 13u);  // K = round(51 * 4 / 16)
    EXPECT_TRUE(all->own_bitmap(0).empty());  // send=union keeps no per-rank bitmaps
    EXPECT_TRUE(own->own_bitmap(ranks).empty());
    std::vector<std::vector<bool>> mine(ranks);
    for (uint32_t r = 0; r < ranks; ++r) {
      mine[r] = local_top_k(x[r], chunk, k);
      const auto bitmap = own->own_bitmap(r);
      ASSERT_EQ(bitmap.size(), 1u);
      for (uint64_t j = 0; j < nc; ++j) {
        EXPECT_EQ(((bitmap[0] >> j) & 1u) != 0, mine[r][j]) << "rank " << r << " chunk " << j;
        if (mine[r][j]) {
          EXPECT_TRUE(own->in_union(j));
        }
      }
    }
    const uint64_t reduced = own->reduced_elements(n);
    ASSERT_EQ(reduced, all->reduced_elements(n));
    topo::Schedule s = topo::make_allreduce_ring(ranks, reduced, {chunk});
    topo::Schedule s_all = topo::make_allreduce_ring(ranks, reduced, {chunk});
    bind_schedule(s, *own);
    bind_schedule(s_all, *all);
    auto out = x, out_all = x;
    std::vector<std::span<float>> v(out.begin(), out.end()), v_all(out_all.begin(), out_all.end());
    auto stats = run_numerics(s, *own, v, {7, 0});
    auto stats_all = run_numerics(s_all, *all, v_all, {7, 0});
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    ASSERT_TRUE(stats_all.ok()) << stats_all.status().message();
    EXPECT_EQ(stats->wire_bytes, stats_all->wire_bytes);  // the same union on the wire
    uint64_t differ = 0;
    for (uint64_t i = 0; i < n; ++i) {
      float expected = 0.0f, expected_all = 0.0f;
      for (uint32_t r = 0; r < ranks; ++r) {
        if (mine[r][i / chunk]) expected += x[r][i];
        if (own->in_union(i / chunk)) expected_all += x[r][i];
      }
      differ += expected != expected_all;
      for (uint32_t r = 0; r < ranks; ++r) {
        ASSERT_EQ(out[r][i], expected) << "element " << i << " rank " << r;
        ASSERT_EQ(out_all[r][i], expected_all) << "element " << i << " rank " << r;
      }
    }
    EXPECT_GT(differ, 0u);  // the ranks' top-k sets differ, so the two readings do too
  }
  // prepare() needs the rank's plan_local of the committed round: a new commit without it leaves
  // that rank's bitmap stale.
  auto own = make_omni({{"chunk", chunk}, {"bits", 4}, {"send", "own"}});
  ASSERT_TRUE(plan(*own, x).ok());
  ASSERT_FALSE(own->own_bitmap(3).empty());
  ASSERT_TRUE(plan(*own, {x[0], x[1]}, 1).ok());
  EXPECT_FALSE(own->own_bitmap(1).empty());
  EXPECT_TRUE(own->own_bitmap(3).empty());
}

TEST(OmniReduce, KFollowsTheMomentumRule) {
  const uint32_t ranks = 4;
  const uint64_t chunk = 64, n = 64 * 500;
  auto c = make_omni({{"chunk", chunk}});
  const uint64_t nc = 500, target = 250;
  EXPECT_EQ(c->target_chunks(nc), target);
  // Strongly shared chunk profiles: the ranks mostly agree, so K'_0 is a little above K = k_0.
  const auto x0 = chunky_inputs(ranks, n, chunk, 4, 0.9);
  EXPECT_EQ(c->k_for(nc), 250.0);
  ASSERT_TRUE(plan(*c, x0, 0).ok());
  const double k0 = 250.0;
  EXPECT_EQ(c->committed_k(), 250u);
  const uint64_t u0 = c->union_chunks();
  EXPECT_GT(u0, target);
  EXPECT_LT(u0, 2 * target);
  const double k1 = 0.8 * k0 + (1.0 - 0.8) * (static_cast<double>(target) / static_cast<double>(u0)) * k0;
  EXPECT_EQ(c->k_for(nc), k1);
  EXPECT_LT(k1, k0);
  // Round 1 picks round(k1) chunks per rank, and the union again follows the test's own top-k.
  const auto x1 = chunky_inputs(ranks, n, chunk, 5, 0.9);
  ASSERT_TRUE(plan(*c, x1, 1).ok());
  const uint64_t k1_used = expected_k(k1, nc);
  EXPECT_EQ(c->committed_k(), k1_used);
  std::vector<bool> expected(nc, false);
  for (uint32_t r = 0; r < ranks; ++r) {
    const auto chosen = local_top_k(x1[r], chunk, k1_used);
    for (uint64_t j = 0; j < nc; ++j) expected[j] = expected[j] || chosen[j];
  }
  const uint64_t u1 = static_cast<uint64_t>(std::count(expected.begin(), expected.end(), true));
  EXPECT_EQ(c->union_chunks(), u1);
  EXPECT_EQ(c->k_for(nc), 0.8 * k1 + (1.0 - 0.8) * (static_cast<double>(target) / static_cast<double>(u1)) * k1);
  // A new tensor size restarts from k_0 = K.
  const auto small = chunky_inputs(ranks, 64 * 100, chunk, 6);
  EXPECT_EQ(c->k_for(100), 50.0);
  ASSERT_TRUE(plan(*c, small, 2).ok());
  EXPECT_EQ(c->committed_k(), 50u);
  // gamma = 1 never moves k.
  auto still = make_omni({{"chunk", chunk}, {"momentum", 1.0}});
  ASSERT_TRUE(plan(*still, x0).ok());
  EXPECT_EQ(still->k_for(nc), 250.0);
}

TEST(OmniReduce, FusedHopEqualsDecodeAccumulateThenEncode) {
  const uint64_t chunk = 32, n = 32 * 200 + 5;
  const auto x = chunky_inputs(3, n, chunk, 7);
  auto c = make_omni({{"chunk", chunk}});
  ASSERT_TRUE(plan(*c, x).ok());
  for (const TensorSpec spec : {TensorSpec{0, n}, TensorSpec{100, 3000}, TensorSpec{n - 40, 40}}) {
    SCOPED_TRACE(fmt::format("spec [{}, {})", spec.offset, spec.offset + spec.count));
    const HopContext in{1, 3}, out{2, 3};
    std::span<const float> x0(x[0].data() + spec.offset, spec.count);
    std::vector<uint8_t> msg(c->wire_bytes(spec, in));
    c->encode(x0, spec, in, kern::RngKey{1, 0, 0, 1}, msg);
    std::vector<float> acc_a(x[1].begin() + static_cast<std::ptrdiff_t>(spec.offset),
                             x[1].begin() + static_cast<std::ptrdiff_t>(spec.offset + spec.count));
    auto acc_b = acc_a;
    std::vector<uint8_t> out_a(c->wire_bytes(spec, out)), out_b(out_a.size());
    c->decode_accumulate_encode(msg, spec, in, acc_a, out, kern::RngKey{1, 0, 1, 2}, out_a);
    c->decode_accumulate(msg, spec, in, acc_b);
    c->encode(acc_b, spec, out, kern::RngKey{1, 0, 1, 2}, out_b);
    EXPECT_EQ(acc_a, acc_b);
    EXPECT_EQ(out_a, out_b);
    std::vector<float> d(spec.count, 5.0f), z(spec.count, 0.0f);
    c->decode(msg, spec, in, d);
    c->decode_accumulate(msg, spec, in, z);
    EXPECT_EQ(d, z);
  }
}

TEST(OmniReduce, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t chunk = 256, n = 300007;
  const auto x = chunky_inputs(3, n, chunk, 8);
  auto run = [&](int threads) {
    kern::set_worker_threads(threads);
    auto c = make_omni();
    EXPECT_TRUE(plan(*c, x).ok());
    std::vector<bool> u;
    for (uint64_t j = 0; j * chunk < n; ++j) u.push_back(c->in_union(j));
    const TensorSpec spec{12345, n - 12345};
    std::vector<uint8_t> msg(c->wire_bytes(spec, {1, 3}));
    c->encode(std::span<const float>(x[0]).subspan(spec.offset), spec, {1, 3}, kern::RngKey{}, msg);
    std::vector<float> d(spec.count);
    c->decode(msg, spec, {1, 3}, d);
    return std::make_tuple(u, msg, d);
  };
  const int saved = kern::worker_threads();
  const auto one = run(1), many = run(7);
  kern::set_worker_threads(saved);
  EXPECT_EQ(std::get<0>(one), std::get<0>(many));
  EXPECT_EQ(std::get<1>(one), std::get<1>(many));
  EXPECT_EQ(std::get<2>(one), std::get<2>(many));
}

TEST(OmniReduce, NeverNanOnZerosConstantsDenormalsOrHugeValues) {
  const uint64_t n = 1000, chunk = 64;
  const std::vector<testing::EdgeInput> inputs = testing::edge_inputs(n);
  for (const auto& in : inputs) {
    SCOPED_TRACE(in.what);
    auto c = make_omni({{"chunk", chunk}});
    ASSERT_TRUE(plan(*c, {in.x, in.x, in.x}).ok());
    EXPECT_GE(c->union_chunks(), 1u);
    const TensorSpec spec{0, n};
    std::vector<uint8_t> msg(c->wire_bytes(spec, {1, 3}));
    c->encode(in.x, spec, {1, 3}, kern::RngKey{}, msg);
    std::vector<float> d(n), z(n, 0.0f);
    c->decode(msg, spec, {1, 3}, d);
    c->decode_accumulate(msg, spec, {1, 3}, z);
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(d[i])) << "element " << i << " of " << in.x[i] << " decodes to " << d[i];
      ASSERT_TRUE(std::isfinite(z[i]));
      ASSERT_FALSE(d[i] * in.x[i] < 0.0f) << i;
      if (in.x[i] == 0.0f || !c->in_union(i / chunk)) {
        ASSERT_EQ(d[i], 0.0f) << i;
      }
    }
  }
  constexpr float kMax = std::numeric_limits<float>::max();
  // FLT_MAX would round to inf in BF16; it saturates at the largest finite BF16 instead.
  auto c = make_omni({{"chunk", 1}, {"bits", 16}});
  const std::vector<float> big = {kMax, -kMax, std::numeric_limits<float>::infinity()};
  ASSERT_TRUE(plan(*c, {big}).ok());
  std::vector<uint8_t> msg(c->wire_bytes({0, 3}, {1, 1}));
  ASSERT_EQ(msg.size(), 6u);
  c->encode(big, {0, 3}, {1, 1}, kern::RngKey{}, msg);
  std::vector<float> d(3);
  c->decode(msg, {0, 3}, {1, 1}, d);
  EXPECT_EQ(d[0], kern::bf16_to_float(0x7F7F));
  EXPECT_EQ(d[1], -kern::bf16_to_float(0x7F7F));
  EXPECT_TRUE(std::isinf(d[2]));  // inf passes through
}

}  // namespace
}  // namespace ccsim::algo
