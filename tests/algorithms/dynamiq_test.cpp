// DynamiQ: the bit allocation's thresholds and budget (§3.2, App. A), the wire format, unbiasedness
// of every rounding step, correlated rounding's stratification, and whole all-reduces.

#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/parallel.hpp"
#include "tests/algorithms/unbiased.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

std::unique_ptr<DynamiqCompressor> make(const nlohmann::json& params = nlohmann::json::object()) {
  auto made = CompressorRegistry::global().create("dynamiq", params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return std::unique_ptr<DynamiqCompressor>(static_cast<DynamiqCompressor*>(made->release()));
}

// Gradient-like data: super-group scales spread over several decades, heavy-tailed entries.
std::vector<float> spread_vector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::student_t_distribution<float> t(3.0f);
  std::uniform_real_distribution<float> decade(-4.0f, 0.0f);
  std::vector<float> x(n);
  float scale = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % 256 == 0) scale = std::pow(10.0f, decade(gen));
    x[i] = scale * t(gen);
  }
  return x;
}

Status plan_for(Compressor& c, const std::vector<std::vector<float>>& ranks, uint64_t seed = 1, uint32_t round = 0) {
  std::vector<std::span<const float>> ins(ranks.begin(), ranks.end());
  auto r = plan_round(c, ins, {seed, round});
  return r.ok() ? ok_status() : r.status();
}

// DynamiQ's plan_local() reads only the super-group size: schemes at several budgets planned on one
// draw share the statistics through a PlanStatsCache (one entry per super-group size), and each
// plans exactly as it does alone; a scheme with another super-group size computes its own.
TEST(Dynamiq, PlansSharingStatisticsEqualPlansAlone) {
  const std::vector<std::vector<float>> data = {spread_vector(256 * 96, 3), spread_vector(256 * 96, 4),
                                                spread_vector(256 * 96, 5)};
  const std::vector<std::span<const float>> ins(data.begin(), data.end());
  const std::vector<nlohmann::json> params = {{{"budget", 5}}, {{"budget", 3}}, {{"budget", 4}, {"super_group", 512}},
                                              {{"budget", 4}}};
  PlanStatsCache cache;
  const size_t entries_after[] = {1, 1, 2, 2};
  for (size_t k = 0; k < params.size(); ++k) {
    SCOPED_TRACE(params[k].dump());
    auto shared = make(params[k]), alone = make(params[k]);
    ASSERT_TRUE(plan_round(*shared, ins, {7, 2}, &cache).ok());
    ASSERT_TRUE(plan_round(*alone, ins, {7, 2}).ok());
    EXPECT_EQ(cache.size(), entries_after[k]);
    const TensorSpec whole{0, data[0].size()};
    EXPECT_EQ(shared->wire_bytes(whole, {1, 3}), alone->wire_bytes(whole, {1, 3}));
    const auto a = shared->plan_decisions(), b = alone->plan_decisions();
    ASSERT_EQ(a.size(), b.size());
    for (size_t d = 0; d < a.size(); ++d) {
      EXPECT_EQ(a[d].quantity, b[d].quantity);
      EXPECT_EQ(a[d].value, b[d].value) << a[d].quantity;
      EXPECT_EQ(a[d].detail, b[d].detail) << a[d].quantity;
    }
  }
  // Another round's key is another entry.
  auto next = make(params[0]);
  ASSERT_TRUE(plan_round(*next, ins, {7, 3}, &cache).ok());
  EXPECT_EQ(cache.size(), 3u);
}

TEST(Dynamiq, ThresholdsFollowThePerBitBenefitRatios) {
  auto c = make();
  const std::vector<std::vector<float>> data = {spread_vector(256 * 300, 1), spread_vector(256 * 300, 2)};
  ASSERT_TRUE(plan_for(*c, data).ok());
  ASSERT_EQ(c->log2_thresholds().size(), 2u);
  // T_{2,4} = 17/512 · T_{4,8}.
  EXPECT_NEAR(c->log2_thresholds()[0] - c->log2_thresholds()[1], std::log2(17.0 / 512.0), 1e-12);

  auto general = make({{"widths", "1-2-4-8-16"}, {"budget", 6.0}});
  ASSERT_TRUE(plan_for(*general, data).ok());
  const auto& T = general->log2_thresholds();
  ASSERT_EQ(T.size(), 4u);
  EXPECT_NEAR(T[0] - T[1], std::log2(5.0 / 32.0), 1e-12);            // T_{1,2} = 5/32 · T_{2,4}
  EXPECT_NEAR(T[1] - T[2], std::log2(17.0 / 512.0), 1e-12);          // T_{2,4} = 17/512 · T_{4,8}
  EXPECT_NEAR(T[2] - T[3], std::log2(257.0 / 131072.0), 1e-12);      // T_{4,8} = 257/2^17 · T_{8,16}
}

TEST(Dynamiq, WidthsMatchAppendixAFormulaAndMeetTheBudget) {
  for (double budget : {3.0, 4.0, 5.0, 6.0, 7.5}) {
    SCOPED_TRACE(budget);
    auto c = make({{"budget", budget}});
    const uint64_t d = 256 * 500 + 77;  // a partial last super-group
    const std::vector<std::vector<float>> data = {spread_vector(d, 3), spread_vector(d, 4), spread_vector(d, 5)};
    ASSERT_TRUE(plan_for(*c, data).ok());
    // App. A: z_j = 4 / log2(512/17) · log2 F_j + u, with u fixed by z = 4 at F = T_{2,4};
    // q_j = 2 if z_j < 4, 4 if 4 <= z_j < 8, 8 otherwise.
    const double kappa = 4.0 / std::log2(512.0 / 17.0);
    const double u = 4.0 - kappa * c->log2_thresholds()[0];
    for (uint64_t j = 0; j < c->super_groups(); ++j) {
      double F = 0;
      for (const auto& r : data)
        for (uint64_t i = j * 256; i < std::min<uint64_t>(d, (j + 1) * 256); ++i) F += static_cast<double>(r[i]) * r[i];
      const double z = kappa * std::log2(F) + u;
      const uint32_t q = z < 4 ? 2 : z < 8 ? 4 : 8;
      // Exactly at a threshold the two forms may round differently; the data never sits there.
      ASSERT_EQ(c->width_of(j), q) << "super-group " << j << " z=" << z;
    }
    // Budget: scales + payload + the metadata phase within budget · d, and tight (one more super-group
    // raised would overshoot, so the slack is below one super-group's largest step).
    const double used = static_cast<double>(c->tensor_bits()) + 64.0 * static_cast<double>(c->super_groups());
    EXPECT_LE(used, budget * static_cast<double>(d));
    EXPECT_GT(used, budget * static_cast<double>(d) - 256.0 * 6.0 - 64.0);
  }
}

TEST(Dynamiq, FixedWidthIsTheWidestWithinTheBudget) {
  // 5 bits, group 32 with bf16 scales: 0.5 + 0.25 bits of metadata leave 4.25, so 4 bits.
  auto c = make({{"variable", false}, {"hierarchical", false}, {"group", 32}});
  ASSERT_TRUE(plan_for(*c, {spread_vector(4096, 1), spread_vector(4096, 2)}).ok());
  for (uint64_t j = 0; j < c->super_groups(); ++j) EXPECT_EQ(c->width_of(j), 4u);
  EXPECT_EQ(c->tensor_bits(), 16u * (8 * 16 + 256 * 4));  // 16 super-groups: 8 bf16 scales + payload
}

TEST(Dynamiq, WireBytesAreTheSuperGroupBlocks) {
  auto c = make();
  const uint64_t d = 256 * 40 + 100;
  ASSERT_TRUE(plan_for(*c, {spread_vector(d, 7), spread_vector(d, 8)}).ok());
  uint64_t total = 0;
  for (const auto& chunk : topo::split_even(d, 3, c->alignment())) {
    const TensorSpec spec{chunk.offset, chunk.count};
    const uint64_t bytes = c->wire_bytes(spec, {1, 2});
    total += bytes;
    std::vector<float> x(chunk.count, 0.5f);
    std::vector<uint8_t> msg(bytes + 16, 0xEE);  // the encoder writes exactly `bytes`
    c->encode(x, spec, {1, 2}, kern::RngKey{1, 0, 0, 0}, std::span<uint8_t>(msg).first(bytes));
    for (size_t i = bytes; i < msg.size(); ++i) ASSERT_EQ(msg[i], 0xEE);
  }
  // Independently: per super-group, 2 (bf16 sf) + groups (uint8) + ceil(m·q/8), in any order.
  uint64_t expected = 0;
  for (uint64_t j = 0; j < c->super_groups(); ++j) {
    const uint64_t m = std::min<uint64_t>(256, d - j * 256);
    expected += 2 + (m + 15) / 16 + (m * c->width_of(j) + 7) / 8;
  }
  EXPECT_EQ(total, expected);
  EXPECT_FALSE(c->can_implement({100, 256}).ok());  // not on a super-group boundary
}

// The fused hop (each super-group decoded into its accumulator and re-encoded at once) against
// decode_accumulate then encode over the whole chunk: two implementations, bit for bit, with
// variable widths, a short last super-group, both roundings and 1 or 3 threads.
TEST(Dynamiq, FusedHopEqualsDecodeAccumulateThenEncode) {
  const int saved = kern::worker_threads();
  for (const bool correlated : {true, false}) {
    auto c = make({{"correlated", correlated}});
    const uint64_t d = 256 * 40 + 100;
    ASSERT_TRUE(plan_for(*c, {spread_vector(d, 17), spread_vector(d, 18), spread_vector(d, 19)}).ok());
    for (const int threads : {1, 3}) {
      kern::set_worker_threads(threads);
      for (const auto& chunk : topo::split_even(d, 3, c->alignment())) {
        SCOPED_TRACE(fmt::format("correlated {} threads {} chunk {}", correlated, threads, chunk.offset));
        const TensorSpec spec{chunk.offset, chunk.count};
        const HopContext in{1, 3}, out{2, 3};
        const std::vector<float> x = spread_vector(chunk.count, 21), y = spread_vector(chunk.count, 22);
        std::vector<uint8_t> msg(c->wire_bytes(spec, in));
        c->encode(x, spec, in, kern::RngKey{5, 2, 0, 1}, msg);
        std::vector<float> acc_a = y, acc_b = y;
        std::vector<uint8_t> out_a(c->wire_bytes(spec, out), 0x11), out_b(out_a.size(), 0x22);
        const kern::RngKey key{5, 2, 1, 2};
        c->decode_accumulate_encode(msg, spec, in, acc_a, out, key, out_a);
        c->decode_accumulate(msg, spec, in, acc_b);
        c->encode(acc_b, spec, out, key, out_b);
        ASSERT_EQ(acc_a, acc_b);
        ASSERT_EQ(out_a, out_b);
      }
    }
  }
  kern::set_worker_threads(saved);
}

// prepare() and finish() permute super-groups: in place (out aliasing the input) they equal the
// out-of-place result.
TEST(Dynamiq, PrepareAndFinishInPlaceEqualOutOfPlace) {
  auto c = make();
  const uint64_t d = 256 * 21 + 77;
  const std::vector<float> x = spread_vector(d, 31);
  ASSERT_TRUE(plan_for(*c, {x, spread_vector(d, 32)}).ok());
  std::vector<float> apart(d), in_place = x;
  c->prepare(x, apart, 0, 2, kern::RngKey{1, 0, 0, 0});
  c->prepare(in_place, in_place, 0, 2, kern::RngKey{1, 0, 0, 0});
  ASSERT_EQ(apart, in_place);
  ASSERT_NE(apart, x);  // the plan reorders and subtracts the means
  std::vector<float> back(d);
  c->finish(apart, back, 0, 2);
  c->finish(in_place, in_place, 0, 2);
  ASSERT_EQ(back, in_place);
}

TEST(Dynamiq, ShardCutsBalanceTheWireBytes) {
  // Width-sorted super-groups make equal-entry shards very unequal in bytes; the cuts make every
  // shard's bytes equal up to one super-group, and a ring over them sends the same total.
  auto c = make();
  const uint64_t d = 256 * 400 + 40;
  ASSERT_TRUE(plan_for(*c, {spread_vector(d, 11), spread_vector(d, 12), spread_vector(d, 13)}).ok());
  const uint32_t parts = 3;
  const std::vector<uint64_t> cuts = c->shard_cuts(d, parts);
  ASSERT_EQ(cuts.size(), parts + 1u);
  EXPECT_EQ(cuts.front(), 0u);
  EXPECT_EQ(cuts.back(), d);
  const uint64_t total = c->wire_bytes({0, d}, {1, parts});
  const uint64_t max_sg = 2 + 16 + 256;  // one super-group at 8 bits: sf + group scales + payload
  uint64_t even_spread = 0, cut_spread = 0, sum = 0;
  std::vector<uint64_t> cut_bytes;
  for (uint32_t k = 0; k < parts; ++k) {
    EXPECT_EQ(cuts[k + 1] % 256 == 0 || cuts[k + 1] == d, true);
    const uint64_t b = c->wire_bytes({cuts[k], cuts[k + 1] - cuts[k]}, {1, parts});
    EXPECT_GE(b + max_sg, total / parts);
    EXPECT_LE(b, total / parts + max_sg);
    sum += b;
    cut_bytes.push_back(b);
  }
  EXPECT_EQ(sum, total);
  std::vector<uint64_t> even_bytes;
  for (const auto& ch : topo::split_even(d, parts, c->alignment()))
    even_bytes.push_back(c->wire_bytes({ch.offset, ch.count}, {1, parts}));
  even_spread = *std::max_element(even_bytes.begin(), even_bytes.end()) -
                *std::min_element(even_bytes.begin(), even_bytes.end());
  cut_spread = *std::max_element(cut_bytes.begin(), cut_bytes.end()) -
               *std::min_element(cut_bytes.begin(), cut_bytes.end());
  EXPECT_GT(even_spread, 10 * cut_spread) << "the data should make the even split unbalanced";

  // A ring all-reduce over the cuts: its shards are the cuts, it sends 2(n-1) copies of every
  // shard's bytes, and every rank ends with a close estimate of the sum.
  topo::CollectiveOptions opt;
  set_shard_options(*c, topo::CollectiveOp::kAllReduce, d, parts, opt);
  EXPECT_EQ(opt.cuts, cuts);
  EXPECT_EQ(tensor_bytes(*c, d, parts, opt).tensor(), total);
  topo::Schedule sched = topo::make_allreduce_ring(parts, d, opt);
  bind_schedule(sched, *c);
  std::vector<std::vector<float>> in{spread_vector(d, 11), spread_vector(d, 12), spread_vector(d, 13)};
  std::vector<std::vector<float>> buf = in;
  std::vector<std::span<float>> views(buf.begin(), buf.end());
  auto stats = run_numerics(sched, *c, views, {1, 0});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->wire_bytes, 2u * (parts - 1) * total);
  std::vector<std::span<const float>> ins(in.begin(), in.end()), outs(buf.begin(), buf.end());
  EXPECT_LT(vnmse(operation_errors(sched, ins, outs)), 0.05);
}

TEST(Dynamiq, EveryRoundingIsUnbiased) {
  // One hop, fixed plan: entries' grid rounding and the hierarchical group-scale rounding.
  for (const bool correlated : {false, true}) {
    for (const bool hierarchical : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "correlated=" << correlated << " hierarchical=" << hierarchical);
      auto c = make({{"correlated", correlated}, {"hierarchical", hierarchical}, {"budget", 4.0}});
      const uint64_t d = 512;
      std::vector<float> x = spread_vector(d, 11);
      ASSERT_TRUE(plan_for(*c, {x, spread_vector(d, 12)}).ok());
      // Encode x in the collective's domain: what prepare() would hand over, reordered and centred.
      std::vector<float> y(d);
      c->prepare(x, y, 0, 2, kern::RngKey{});
      testing::UnbiasednessSampler sampler(std::vector<double>(y.begin(), y.end()));
      std::vector<uint8_t> msg(c->wire_bytes({0, d}, {1, 4}));
      std::vector<float> out(d);
      for (uint32_t t = 0; t < 4000; ++t) {
        c->encode(y, {0, d}, {1, 4}, kern::RngKey{t, 0, t % 4, 3}, msg);
        c->decode(msg, {0, d}, {1, 4}, out);
        sampler.add(out);
      }
      EXPECT_TRUE(sampler.unbiased());
    }
  }
}

TEST(Dynamiq, CorrelatedUniformsStratifyAcrossRanks) {
  for (const uint32_t n : {2u, 3u, 8u, 13u, 64u}) {
    const kern::RngKey shared{5, 1, kern::kSharedRank, 0};
    double mean = 0;
    for (uint64_t index = 0; index < 200; ++index) {
      std::vector<int> seen(n, 0);
      for (uint32_t r = 0; r < n; ++r) {
        const float u = kern::correlated_uniform(shared, kern::RngKey{5, 1, r, 9}, index, r, n);
        ASSERT_GE(u, 0.0f);
        ASSERT_LT(u, 1.0f);
        // u = fl((π + γ) / n) with π + γ exact and γ <= 1 - 2^-(24 - ceil(log2 n)); the division's
        // rounding (half an ulp of u < 1) moves u·n by at most n·2^-25, which is below that gap.
        ++seen[static_cast<uint32_t>(static_cast<double>(u) * n + n * 0x1.0p-25)];
        mean += u;
      }
      for (uint32_t k = 0; k < n; ++k) ASSERT_EQ(seen[k], 1) << "n=" << n << " index " << index << " stratum " << k;
    }
    EXPECT_NEAR(mean / (200.0 * n), 0.5, 0.03);
  }
}

TEST(Dynamiq, CorrelatedRoundingCancelsErrorsOfASum) {
  // n ranks each round the same value halfway between two levels; correlated draws make the sum
  // nearly exact, independent ones leave Var = n/4 (in level units).
  const uint32_t n = 8;
  const float levels[2] = {0.0f, 1.0f};
  double var_ind = 0, var_cor = 0;
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    const kern::RngKey shared{static_cast<uint64_t>(t), 0, kern::kSharedRank, 0};
    double s_ind = 0, s_cor = 0;
    for (uint32_t r = 0; r < n; ++r) {
      const kern::RngKey own{static_cast<uint64_t>(t), 0, r, 1};
      s_ind += levels[kern::grid_round_stochastic(levels, 2, 0.5f, kern::uniform_at(own, 0))];
      s_cor += levels[kern::grid_round_stochastic(levels, 2, 0.5f, kern::correlated_uniform(shared, own, 0, r, n))];
    }
    var_ind += (s_ind - 4.0) * (s_ind - 4.0);
    var_cor += (s_cor - 4.0) * (s_cor - 4.0);
  }
  EXPECT_NEAR(var_ind / trials, 2.0, 0.3);
  EXPECT_EQ(var_cor, 0.0);  // exactly four of eight ranks fall below 1/2
}

// A ring all-reduce through the whole round (plan, prepare, hops, finish).
std::vector<std::vector<float>> allreduce(DynamiqCompressor& c, const std::vector<std::vector<float>>& in,
                                          uint64_t seed, const char* algorithm = "ring") {
  EXPECT_TRUE(plan_for(c, in, seed).ok());
  auto info = topo::find_collective("allreduce", algorithm);
  topo::CollectiveOptions o;
  o.align = c.alignment();
  topo::Schedule s = (*info)->build(static_cast<uint32_t>(in.size()), in[0].size(), o);
  bind_schedule(s, c);
  auto out = in;
  std::vector<std::span<float>> v(out.begin(), out.end());
  auto stats = run_numerics(s, c, v, {seed, 0});
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  return out;
}

// Without correlated rounding every hop is an unbiased estimate of its input, so the whole
// all-reduce is unbiased. Correlated rounding keeps each single encoding unbiased, but along an
// aggregation chain a rank's stratum is conditioned on the earlier ranks' draws, which shaped the
// partial sum it rounds: the result is slightly biased, and this sample detects it.
TEST(Dynamiq, AllReduceIsUnbiasedOverSeedsWithoutCorrelatedRounding) {
  const uint64_t d = 256 * 3 + 40;
  const std::vector<std::vector<float>> in = {spread_vector(d, 21), spread_vector(d, 22), spread_vector(d, 23)};
  std::vector<double> exact(d, 0.0);
  for (const auto& r : in)
    for (uint64_t i = 0; i < d; ++i) exact[i] += r[i];
  testing::UnbiasednessSampler sampler(exact);
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    auto c = make({{"budget", 4.0}, {"correlated", false}});
    EXPECT_TRUE(c->unbiased());
    const auto out = allreduce(*c, in, seed);
    sampler.add(out[1]);
  }
  EXPECT_TRUE(sampler.unbiased());

  testing::UnbiasednessSampler correlated(exact);
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    auto c = make({{"budget", 4.0}});
    EXPECT_FALSE(c->unbiased());
    correlated.add(allreduce(*c, in, seed)[1]);
  }
  EXPECT_FALSE(correlated.unbiased());
}

TEST(Dynamiq, MeanSubtractionMakesConstantsExactAndNothingIsNaN) {
  const uint64_t d = 256 * 4;
  constexpr float kMax = std::numeric_limits<float>::max();
  struct Case {
    const char* what;
    std::vector<float> x;
    bool exact;
  };
  // Subnormal inputs keep little relative precision through bf16 scales and fp32 products: finite,
  // and better than sending nothing, is what holds there.
  std::vector<Case> cases = {{"zeros", std::vector<float>(d, 0.0f), true},
                             {"constant", std::vector<float>(d, 0.375f), true},
                             {"denormals", std::vector<float>(d), false},
                             {"huge", std::vector<float>(d), false}};
  for (uint64_t i = 0; i < d; ++i) {
    cases[2].x[i] = (i % 2 ? -1.0f : 1.0f) * std::numeric_limits<float>::denorm_min() * static_cast<float>(1 + i % 97);
    cases[3].x[i] = (i % 3 == 0 ? kMax : -1e37f) / 8.0f;
  }
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.what);
    auto c = make();
    const std::vector<std::vector<float>> in(4, cs.x);
    const auto out = allreduce(*c, in, 3);
    for (const auto& o : out)
      for (uint64_t i = 0; i < d; ++i) {
        ASSERT_TRUE(std::isfinite(o[i])) << i;
        if (cs.exact) {
          ASSERT_EQ(o[i], 4.0f * cs.x[i]) << i;
        }
      }
    std::vector<float> sum(d);
    for (uint64_t i = 0; i < d; ++i) sum[i] = 4.0f * cs.x[i];
    std::vector<ErrorStats> e;
    for (const auto& o : out) e.push_back(error_stats(sum, o));
    EXPECT_FALSE(std::isnan(vnmse(e)));
    EXPECT_LT(vnmse(e), std::string(cs.what) == "denormals" ? 1.0 : 0.05);
  }
}

TEST(Dynamiq, ButterflyLosesLessThanRingAndThreadsDoNotMatter) {
  const uint64_t d = 256 * 64;
  std::vector<std::vector<float>> in;
  for (uint32_t r = 0; r < 8; ++r) in.push_back(spread_vector(d, 40 + r));
  std::vector<float> exact(d, 0.0f);
  for (uint64_t i = 0; i < d; ++i) {
    double s = 0;
    for (const auto& r : in) s += r[i];
    exact[i] = static_cast<float>(s);
  }
  auto error = [&](const char* algorithm, uint64_t seed) {
    auto c = make();
    const auto out = allreduce(*c, in, seed, algorithm);
    std::vector<ErrorStats> e;
    for (const auto& o : out) e.push_back(error_stats(exact, o));
    return vnmse(e);
  };
  double ring = 0, butterfly = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    ring += error("ring", seed);
    butterfly += error("butterfly", seed);
  }
  EXPECT_LT(butterfly, ring);

  auto c1 = make(), c2 = make();
  const int saved = kern::worker_threads();
  kern::set_worker_threads(1);
  const auto a = allreduce(*c1, in, 9);
  kern::set_worker_threads(5);
  const auto b = allreduce(*c2, in, 9);
  kern::set_worker_threads(saved);
  EXPECT_EQ(a, b);
}

TEST(Dynamiq, RejectsBudgetsBelowItsMetadata) {
  auto made = CompressorRegistry::global().create("dynamiq", {{"budget", 2.5}});
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("/params/budget: 2.5 bits per entry leave"), std::string::npos)
      << made.status().message();
  made = CompressorRegistry::global().create("dynamiq", {{"group", 256}, {"super_group", 256}});
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("/params/super_group"), std::string::npos) << made.status().message();
}

}  // namespace
}  // namespace ccsim::algo
