#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/block_int8_quant.hpp"

namespace ccsim::kern {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_rne(1.0f), 0x3F80u);
  EXPECT_EQ(float_to_bf16_rne(from_bits(0x3F808000u)), 0x3F80u);  // tie, 0x3F80 even: down
  EXPECT_EQ(float_to_bf16_rne(from_bits(0x3F818000u)), 0x3F82u);  // tie, 0x3F81 odd: up
  EXPECT_EQ(float_to_bf16_rne(from_bits(0x3F808001u)), 0x3F81u);  // above the tie: up
  EXPECT_EQ(float_to_bf16_rne(from_bits(0x3F807FFFu)), 0x3F80u);  // below the tie: down
  EXPECT_EQ(float_to_bf16_rne(-2.0f), 0xC000u);
  EXPECT_EQ(float_to_bf16_rne(std::numeric_limits<float>::infinity()), 0x7F80u);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16_rne(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16_rne(from_bits(0x7F800001u)))));  // signalling NaN stays NaN
  EXPECT_EQ(bf16_to_float(0x3F80u), 1.0f);
}

// Saturation: exact values at the overflow edge, then the vectorized row against the element
// function on every sign and exponent with mantissas around the rounding boundaries, NaN payloads
// and infinities, at lengths around the vector widths.
TEST(Bf16, SaturatingRowEqualsTheElementFunction) {
  EXPECT_EQ(float_to_bf16_saturating(from_bits(0x7F7FFFFFu)), 0x7F7Fu);   // would round to inf
  EXPECT_EQ(float_to_bf16_saturating(from_bits(0xFF7F8000u)), 0xFF7Fu);   // tie, odd: up to -inf, saturated
  EXPECT_EQ(float_to_bf16_saturating(from_bits(0x7F7F7FFFu)), 0x7F7Fu);   // below the tie: no overflow
  EXPECT_EQ(float_to_bf16_saturating(-std::numeric_limits<float>::infinity()), 0xFF80u);
  EXPECT_EQ(float_to_bf16_saturating(from_bits(0xFF800001u)), 0xFFC0u);   // NaN: quieted, sign kept
  std::vector<uint32_t> bits;
  for (uint32_t e = 0; e < 256; ++e)
    for (const uint32_t m : {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u, 0x7F7FFFu, 0x7FFFFFu, 0x400000u})
      for (const uint32_t s : {0u, 0x80000000u}) bits.push_back(s | e << 23 | m);
  for (const uint64_t n : {bits.size(), uint64_t{1}, uint64_t{15}, uint64_t{17}, uint64_t{33}}) {
    std::vector<float> x(n);
    for (uint64_t i = 0; i < n; ++i) x[i] = from_bits(bits[(i * 7919) % bits.size()]);
    std::vector<uint16_t> got(n + 1, 0xABCDu);
    bf16_encode_saturating_row(x.data(), n, got.data());
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t want = float_to_bf16_saturating(x[i]);
      ASSERT_EQ(got[i], want) << fmt::format("n {} entry {} bits {:#010x}", n, i, bits[(i * 7919) % bits.size()]);
      const uint16_t rne = float_to_bf16_rne(x[i]);
      const bool overflowed = std::isfinite(x[i]) && (rne & 0x7FFFu) == 0x7F80u;
      ASSERT_EQ(want, overflowed ? static_cast<uint16_t>((rne & 0x8000u) | 0x7F7Fu) : rne);
    }
    ASSERT_EQ(got[n], 0xABCDu);  // nothing past the end
  }
}

TEST(Bf16, RelativeErrorBoundedByHalfUlp) {
  std::vector<float> x(10000), y(x.size());
  std::vector<uint16_t> enc(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(1.0f + static_cast<float>(i) / 10000.0f, static_cast<int>(i % 60) - 30);
  bf16_encode(x.data(), x.size(), enc.data());
  bf16_decode(enc.data(), enc.size(), y.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
}

TEST(BlockInt8, WireSizeIsPayloadPlusOneScalePerBlock) {
  EXPECT_EQ(block_int8_bytes(1000, 256), 1000u + 4u * 4u);
  EXPECT_EQ(block_int8_bytes(1024, 256), 1024u + 4u * 4u);
  EXPECT_EQ(block_int8_bytes(1, 64), 5u);
  EXPECT_EQ(block_int8_bytes(0, 64), 0u);
}

std::vector<float> roundtrip(const std::vector<float>& x, uint32_t block, Rounding r, RngKey key, uint64_t base = 0) {
  std::vector<uint8_t> enc(block_int8_bytes(x.size(), block));
  block_int8_encode(x.data(), x.size(), block, r, key, base, enc.data());
  std::vector<float> y(x.size());
  block_int8_decode(enc.data(), x.size(), block, y.data());
  return y;
}

TEST(BlockInt8, NearestRoundingExactValues) {
  // Block max 127 makes the grid the integers: codes equal round-half-even of x.
  const std::vector<float> x = {127.0f, -127.0f, 0.0f, 1.5f, 2.5f, -3.4f, 100.49f, 64.0f};
  const std::vector<float> want = {127.0f, -127.0f, 0.0f, 2.0f, 2.0f, -3.0f, 100.0f, 64.0f};
  EXPECT_EQ(roundtrip(x, 8, Rounding::kNearest, {}), want);
}

TEST(BlockInt8, StochasticRoundingIsUnbiased) {
  const uint32_t block = 32;
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * std::pow(10.0f, static_cast<float>(i % 4) - 2);
  const int trials = 4000;
  std::vector<double> mean(x.size(), 0.0);
  for (int t = 0; t < trials; ++t) {
    const auto y = roundtrip(x, block, Rounding::kStochastic, RngKey{static_cast<uint64_t>(t), 0, 0, 1});
    for (size_t i = 0; i < x.size(); ++i) mean[i] += y[i] / trials;
  }
  for (size_t b = 0; b < x.size() / block; ++b) {
    float maxabs = 0;
    for (size_t i = b * block; i < (b + 1) * block; ++i) maxabs = std::max(maxabs, std::fabs(x[i]));
    const double step = maxabs / 127.0, sigma = step / 2 / std::sqrt(static_cast<double>(trials));
    for (size_t i = b * block; i < (b + 1) * block; ++i)
      ASSERT_NEAR(mean[i], x[i], 6 * sigma + 1e-7 * std::fabs(x[i])) << "element " << i;
  }
  // And the nearest mode is biased on the same data (the test above can fail).
  const auto y = roundtrip(x, block, Rounding::kNearest, {});
  double max_bias = 0;
  for (size_t i = 0; i < x.size(); ++i) max_bias = std::max(max_bias, static_cast<double>(std::fabs(y[i] - x[i]) / std::fabs(x[i] + 1e-30f)));
  EXPECT_GT(max_bias, 1e-3);
}

TEST(BlockInt8, EdgeInputsStayFinite) {
  const float denorm = 1e-40f, huge = 3e38f;
  const std::vector<std::vector<float>> cases = {
      std::vector<float>(64, 0.0f),
      std::vector<float>(64, 5.0f),
      {denorm, -denorm, denorm / 2, 0.0f, denorm, denorm, denorm, denorm},
      {huge, -huge, huge / 3, 1.0f, -1.0f, 0.0f, huge, huge},
  };
  for (const auto& x : cases) {
    for (Rounding r : {Rounding::kNearest, Rounding::kStochastic}) {
      const auto y = roundtrip(x, 8, r, RngKey{1, 2, 3, 4});
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << "x=" << x[i];
        ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) + std::numeric_limits<float>::denorm_min() + 3e38f / 127) << x[i];
      }
    }
  }
  // Zeros decode to exact zeros; a constant block decodes exactly (its value is the block max).
  EXPECT_EQ(roundtrip(cases[0], 8, Rounding::kStochastic, {}), cases[0]);
  EXPECT_EQ(roundtrip(cases[1], 8, Rounding::kStochastic, {}), cases[1]);
}

TEST(BlockInt8, DecodeAccumulateAddsTheDecodedValues) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<uint8_t> enc(block_int8_bytes(x.size(), 64));
  block_int8_encode(x.data(), x.size(), 64, Rounding::kStochastic, RngKey{9, 0, 0, 0}, 0, enc.data());
  std::vector<float> dec(x.size()), acc(x.size(), 0.5f);
  block_int8_decode(enc.data(), x.size(), 64, dec.data());
  block_int8_decode_accumulate(enc.data(), x.size(), 64, acc.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(acc[i], 0.5f + dec[i]);
}

TEST(BlockInt8, ResultsIndependentOfThreadCount) {
  std::vector<float> x(1 << 20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  std::vector<std::vector<uint8_t>> enc;
  for (int threads : {1, 2, 5}) {
    set_worker_threads(threads);
    enc.emplace_back(block_int8_bytes(x.size(), 256));
    block_int8_encode(x.data(), x.size(), 256, Rounding::kStochastic, RngKey{3, 1, 2, 7}, 12345, enc.back().data());
  }
  set_worker_threads(2);
  EXPECT_EQ(enc[0], enc[1]);
  EXPECT_EQ(enc[0], enc[2]);
}

TEST(BlockInt8, RandomnessKeyedByGlobalIndex) {
  // Encoding a chunk at offset 1000 equals the matching slice of encoding a larger tensor,
  // because each element draws at its global index.
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i) * 0.1f);
  const RngKey key{5, 0, 0, 3};
  const auto whole = roundtrip(x, 64, Rounding::kStochastic, key, 0);
  std::vector<float> part(x.begin() + 1024, x.begin() + 2048);
  const auto slice = roundtrip(part, 64, Rounding::kStochastic, key, 1024);
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(slice[i], whole[1024 + i]) << i;
}

}  // namespace
}  // namespace ccsim::kern
