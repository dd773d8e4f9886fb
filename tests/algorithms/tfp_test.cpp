// TFP (AQGB §4.4): the paper's worked example, exact truncation bit patterns, the fp16/FP8 bases,
// saturation and parameter validation.

#include "kernels/quant/tfp_quant.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/float_bits.hpp"
#include "kernels/quant/fp16_quant.hpp"

namespace ccsim::algo {
namespace {

std::unique_ptr<Compressor> make_tfp(const nlohmann::json& params) {
  auto made = CompressorRegistry::global().create("tfp", params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

std::vector<float> decode_all(Compressor& c, const std::vector<float>& x, uint64_t seed, uint64_t offset = 0) {
  const TensorSpec spec{offset, x.size()};
  std::vector<uint8_t> msg(c.wire_bytes(spec, {1, 2}));
  c.encode(x, spec, {1, 2}, kern::RngKey{seed, 0, 0, 0}, msg);
  std::vector<float> d(x.size());
  c.decode(msg, spec, {1, 2}, d);
  return d;
}

TEST(Tfp, WorkedExampleRoundsThreePointSixToThreeAndAHalfWithProbabilityPointSix) {
  // AQGB Fig. 7: TFP(3.6, 12) is 3.5 w.p. 0.6 and 3.75 w.p. 0.4.
  auto comp = make_tfp({{"k", 12}, {"random_rounding", true}});
  const std::vector<float> x(10000, 3.6f);
  uint64_t low = 0, high = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (const float v : decode_all(*comp, x, seed)) {
      ASSERT_TRUE(v == 3.5f || v == 3.75f) << v;
      (v == 3.5f ? low : high) += 1;
    }
  }
  const double trials = static_cast<double>(low + high);
  const double p_high = (static_cast<double>(3.6f) - 3.5) / 0.25;  // 0.3999996: 3.6f is just below 3.6
  const double bound = 5 * std::sqrt(p_high * (1 - p_high) / trials);
  EXPECT_NEAR(static_cast<double>(high) / trials, p_high, bound);
  EXPECT_NEAR(static_cast<double>(low) / trials, 0.6, bound + 1e-6);
  // And -3.6 mirrors it.
  const std::vector<float> neg(10000, -3.6f);
  uint64_t neg_high = 0;
  for (const float v : decode_all(*comp, neg, 99)) {
    ASSERT_TRUE(v == -3.5f || v == -3.75f) << v;
    neg_high += v == -3.75f;
  }
  EXPECT_NEAR(static_cast<double>(neg_high) / 10000.0, p_high, 5 * std::sqrt(p_high * (1 - p_high) / 10000.0));
}

TEST(Tfp, TruncationCodesAreTheLeadingBitsPackedLsbFirst) {
  auto comp = make_tfp({{"k", 12}});
  // 3.6f = 0x40666666 -> code 0x406; -3.6f = 0xC0666666 -> 0xC06. Stream 0x406 | 0xC06 << 12.
  const std::vector<float> x = {3.6f, -3.6f};
  std::vector<uint8_t> msg(comp->wire_bytes({0, 2}, {1, 2}));
  ASSERT_EQ(msg.size(), 3u);
  comp->encode(x, {0, 2}, {1, 2}, kern::RngKey{}, msg);
  EXPECT_EQ(msg, (std::vector<uint8_t>{0x06, 0x64, 0xC0}));
  std::vector<float> d(2);
  comp->decode(msg, {0, 2}, {1, 2}, d);
  EXPECT_EQ(d[0], 3.5f);
  EXPECT_EQ(d[1], -3.5f);
  // An odd count: the last byte's padding bits are zero.
  std::vector<uint8_t> one(comp->wire_bytes({0, 1}, {1, 2}), 0xFF);
  ASSERT_EQ(one.size(), 2u);
  comp->encode(std::vector<float>{-3.6f}, {0, 1}, {1, 2}, kern::RngKey{}, one);
  EXPECT_EQ(one, (std::vector<uint8_t>{0x06, 0x0C}));
}

TEST(Tfp, TruncationKeepsExactlyTheTopKBitsOfTheFp32Pattern) {
  std::mt19937 gen(3);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(kern::bits_to_float(gen() & 0xFF7FFFFFu));  // finite patterns of every exponent
  x.insert(x.end(), {0.0f, -0.0f, 1e-45f, -1e-40f, std::numeric_limits<float>::max(), -3e38f, 1.0f, -65504.0f});
  for (const uint32_t k : {10u, 12u, 16u, 23u, 31u, 32u}) {
    SCOPED_TRACE(fmt::format("k={}", k));
    auto comp = make_tfp({{"k", k}});
    const uint32_t mask = k == 32 ? 0xFFFFFFFFu : ~((1u << (32 - k)) - 1u);
    const auto d = decode_all(*comp, x, 0, 5);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(kern::float_to_bits(d[i]), kern::float_to_bits(x[i]) & mask) << x[i];
  }
}

TEST(Tfp, RandomRoundingPicksTheTruncationOrOneUnitUp) {
  std::mt19937 gen(4);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(kern::bits_to_float(gen() & 0xFF7FFFFFu));
  for (const uint32_t k : {10u, 16u, 24u}) {
    SCOPED_TRACE(fmt::format("k={}", k));
    auto comp = make_tfp({{"k", k}, {"random_rounding", true}});
    const uint32_t drop = 32 - k, mask = ~((1u << drop) - 1u);
    const auto d = decode_all(*comp, x, 17);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t lo = kern::float_to_bits(x[i]) & mask, got = kern::float_to_bits(d[i]);
      ASSERT_TRUE(got == lo || got == lo + (1u << drop)) << x[i];
      if (kern::float_to_bits(x[i]) == lo) {
        ASSERT_EQ(got, lo) << "representable values never move";
      }
      ASSERT_TRUE(std::isfinite(d[i]));
    }
  }
}

TEST(Tfp, RandomRoundingSaturatesBelowInfinity) {
  auto comp = make_tfp({{"k", 16}, {"random_rounding", true}});
  const std::vector<float> x(4096, std::numeric_limits<float>::max());
  for (const float v : decode_all(*comp, x, 5)) ASSERT_EQ(kern::float_to_bits(v), 0x7F7F0000u);
}

TEST(Tfp, SmallerBasesConvertFirst) {
  // fp16: 3.6 -> 0x4333 (3.5996); k = 10 keeps 0x4333 >> 6 = 0x10C, i.e. 0x4300 = 3.5.
  EXPECT_EQ(kern::float_to_fp16_rne(3.6f), 0x4333);
  auto fp16 = make_tfp({{"k", 10}, {"base", "fp16"}});
  std::vector<uint8_t> msg(fp16->wire_bytes({0, 1}, {1, 2}));
  fp16->encode(std::vector<float>{3.6f}, {0, 1}, {1, 2}, kern::RngKey{}, msg);
  EXPECT_EQ(kern::bitpack_get_wide(msg.data(), 0, 10), 0x10Cu);
  EXPECT_EQ(decode_all(*fp16, {3.6f, -3.6f, 1e6f}, 0), (std::vector<float>{3.5f, -3.5f, 63488.0f}));  // saturates
  // E4M3: 3.6 -> 0x46 (3.5); k = 6 keeps 0x46 >> 2 = 0x11, i.e. 0x44 = 3.0.
  auto e4m3 = make_tfp({{"k", 6}, {"base", "fp8e4m3"}});
  EXPECT_EQ(decode_all(*e4m3, {3.6f, 1000.0f, -1e-9f}, 0), (std::vector<float>{3.0f, 384.0f, -0.0f}));
  // Random rounding goes straight onto the k-bit grid: with fp16 and k = 10 (4 mantissa bits)
  // 3.6 lies between 3.5 and 3.625 and rounds up with probability 0.8.
  auto fp16_rr = make_tfp({{"k", 10}, {"base", "fp16"}, {"random_rounding", true}});
  const std::vector<float> x(20000, 3.6f);
  uint64_t up = 0;
  for (const float v : decode_all(*fp16_rr, x, 8)) {
    ASSERT_TRUE(v == 3.5f || v == 3.625f) << v;
    up += v == 3.625f;
  }
  const double p = (static_cast<double>(3.6f) - 3.5) / 0.125;
  EXPECT_NEAR(static_cast<double>(up) / 20000.0, p, 5 * std::sqrt(p * (1 - p) / 20000.0));
}

TEST(Tfp, RejectsAWidthOutsideTheRangeOfItsBase) {
  for (const auto& [base, k] : std::vector<std::pair<const char*, int>>{
           {"fp32", 9}, {"fp16", 17}, {"fp16", 6}, {"fp8e4m3", 9}, {"fp8e5m2", 6}, {"fp8e5m2", 12}}) {
    SCOPED_TRACE(fmt::format("{} k={}", base, k));
    auto made = CompressorRegistry::global().create("tfp", {{"base", base}, {"k", k}});
    if (!made.ok()) continue;  // outside the table's own range [6, 32]
    const Status s = (*made)->can_implement({0, 100});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("expected k in ["), std::string::npos) << s.message();
  }
  for (const auto& [base, k] : std::vector<std::pair<const char*, int>>{
           {"fp32", 10}, {"fp32", 32}, {"fp16", 7}, {"fp16", 16}, {"fp8e4m3", 6}, {"fp8e4m3", 8}, {"fp8e5m2", 7}}) {
    auto made = CompressorRegistry::global().create("tfp", {{"base", base}, {"k", k}});
    ASSERT_TRUE(made.ok());
    EXPECT_TRUE((*made)->can_implement({0, 100}).ok()) << base << " k=" << k;
  }
}

TEST(Tfp, ElementCodecAgreesWithTheMinifloatGridForEveryCode) {
  // Every k-bit code of a minifloat base decodes to the base value of code << (W - k), and
  // encoding that value (nearest or stochastic) gives the code back.
  for (const auto& f :
       {kern::TfpFormat{kern::TfpBase::kFloat16, 9}, kern::TfpFormat{kern::TfpBase::kFloat8E4M3, 7},
        kern::TfpFormat{kern::TfpBase::kFloat8E5M2, 8}, kern::TfpFormat{kern::TfpBase::kFloat8E4M3, 8}}) {
    SCOPED_TRACE(fmt::format("base {} k={}", static_cast<int>(f.base), f.bits));
    for (uint32_t code = 0; code < (1u << f.bits); ++code) {
      const float v = kern::tfp_decode_element(code, f);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(v, kern::minifloat_decode(code << f.dropped_bits(), f.base_format()));
      const uint32_t back = kern::tfp_encode_element(v, f, true, 0.999f);
      EXPECT_EQ(kern::tfp_decode_element(back, f), v) << code;
    }
  }
}

}  // namespace
}  // namespace ccsim::algo
