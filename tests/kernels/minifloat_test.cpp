#include "kernels/quant/minifloat.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/philox.hpp"
#include "kernels/quant/bf16_quant.hpp"

namespace ccsim::kern {
namespace {

struct Named {
  const char* name;
  MinifloatFormat f;
};
const Named kFormats[] = {{"fp16", kFp16},    {"e4m3", kFp8E4M3}, {"e5m2", kFp8E5M2},
                          {"e3m2", kFp6E3M2}, {"e2m3", kFp6E2M3}, {"e2m1", kFp4E2M1}};

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t num_codes(const MinifloatFormat& f) { return 1u << f.bits(); }

// The positive finite magnitudes of a format with their codes, ascending: the brute-force oracle.
struct Magnitudes {
  std::vector<double> value;
  std::vector<uint32_t> code;
};
Magnitudes positive_finite(const MinifloatFormat& f) {
  Magnitudes m;
  for (uint32_t c = 0; c < f.sign_mask(); ++c) {
    const float v = minifloat_decode(c, f);
    if (!std::isfinite(v)) continue;
    m.value.push_back(v);
    m.code.push_back(c);
  }
  for (size_t i = 1; i < m.value.size(); ++i) EXPECT_LT(m.value[i - 1], m.value[i]) << "codes not monotone";
  return m;
}

// Round to nearest, ties to the even code, saturating at the largest finite value: computed from
// the sorted table, exactly, in double (every fp32 and every format value is a double).
uint32_t brute_force_rne(const Magnitudes& m, const MinifloatFormat& f, float x) {
  const double a = std::fabs(static_cast<double>(x));
  const uint32_t sign = std::signbit(x) ? f.sign_mask() : 0u;
  if (a >= m.value.back()) return sign | m.code.back();
  const size_t hi = static_cast<size_t>(std::upper_bound(m.value.begin(), m.value.end(), a) - m.value.begin());
  const size_t lo = hi - 1;
  const double dlo = a - m.value[lo], dhi = m.value[hi] - a;
  uint32_t c;
  if (dlo < dhi)
    c = m.code[lo];
  else if (dhi < dlo)
    c = m.code[hi];
  else
    c = (m.code[lo] & 1u) == 0 ? m.code[lo] : m.code[hi];
  return sign | c;
}

TEST(Minifloat, DescriptorsMatchOcpTables) {
  // OCP MX v1.0 element tables (emax, max normal, min normal, min subnormal) and IEEE binary16.
  struct Row {
    MinifloatFormat f;
    uint32_t bits;
    int emax;
    float max, min_normal, min_subnormal;
  };
  const Row rows[] = {
      {kFp16, 16, 15, 65504.0f, 0x1p-14f, 0x1p-24f},   {kFp8E4M3, 8, 8, 448.0f, 0x1p-6f, 0x1p-9f},
      {kFp8E5M2, 8, 15, 57344.0f, 0x1p-14f, 0x1p-16f}, {kFp6E3M2, 6, 4, 28.0f, 0x1p-2f, 0x1p-4f},
      {kFp6E2M3, 6, 2, 7.5f, 1.0f, 0x1p-3f},           {kFp4E2M1, 4, 2, 6.0f, 1.0f, 0.5f},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(fmt::format("E{}M{}", r.f.exp_bits, r.f.man_bits));
    EXPECT_EQ(r.f.bits(), r.bits);
    EXPECT_EQ(r.f.emax(), r.emax);
    EXPECT_EQ(r.f.max_finite(), r.max);
    EXPECT_EQ(r.f.min_normal(), r.min_normal);
    EXPECT_EQ(r.f.min_subnormal(), r.min_subnormal);
    EXPECT_EQ(minifloat_decode(r.f.max_finite_code(), r.f), r.max);
    EXPECT_EQ(minifloat_decode(1u << r.f.man_bits, r.f), r.min_normal);
    EXPECT_EQ(minifloat_decode(1u, r.f), r.min_subnormal);
  }
}

// Full value tables of the OCP MX v1.0 FP4 and FP6 element formats (positive half; the sign bit
// negates).
TEST(Minifloat, E2M1FullValueTable) {
  const float want[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(minifloat_decode(c, kFp4E2M1), want[c]) << c;
    EXPECT_EQ(minifloat_decode(c | 8u, kFp4E2M1), -want[c]) << c;
  }
  EXPECT_TRUE(std::signbit(minifloat_decode(8u, kFp4E2M1)));  // 1000 is -0
}

TEST(Minifloat, E3M2FullValueTable) {
  // One row per exponent field (row 0: subnormals).
  // clang-format off
  const float want[32] = {0.0f,  0.0625f, 0.125f, 0.1875f,
                          0.25f, 0.3125f, 0.375f, 0.4375f,
                          0.5f,  0.625f,  0.75f,  0.875f,
                          1.0f,  1.25f,   1.5f,   1.75f,
                          2.0f,  2.5f,    3.0f,   3.5f,
                          4.0f,  5.0f,    6.0f,   7.0f,
                          8.0f,  10.0f,   12.0f,  14.0f,
                          16.0f, 20.0f,   24.0f,  28.0f};
  // clang-format on
  for (uint32_t c = 0; c < 32; ++c) {
    EXPECT_EQ(minifloat_decode(c, kFp6E3M2), want[c]) << c;
    EXPECT_EQ(minifloat_decode(c | 32u, kFp6E3M2), -want[c]) << c;
  }
}

TEST(Minifloat, E2M3FullValueTable) {
  // One row per exponent field (row 0: subnormals).
  // clang-format off
  const float want[32] = {0.0f, 0.125f, 0.25f, 0.375f, 0.5f, 0.625f, 0.75f, 0.875f,
                          1.0f, 1.125f, 1.25f, 1.375f, 1.5f, 1.625f, 1.75f, 1.875f,
                          2.0f, 2.25f,  2.5f,  2.75f,  3.0f, 3.25f,  3.5f,  3.75f,
                          4.0f, 4.5f,   5.0f,  5.5f,   6.0f, 6.5f,   7.0f,  7.5f};
  // clang-format on
  for (uint32_t c = 0; c < 32; ++c) {
    EXPECT_EQ(minifloat_decode(c, kFp6E2M3), want[c]) << c;
    EXPECT_EQ(minifloat_decode(c | 32u, kFp6E2M3), -want[c]) << c;
  }
}

TEST(Minifloat, Fp8AndFp16SpotValues) {
  // E4M3: 1.0 = 0.0111.000, max 0.1111.110 = 448, NaN only at S.1111.111 (no infinities).
  EXPECT_EQ(minifloat_decode(0x38, kFp8E4M3), 1.0f);
  EXPECT_EQ(minifloat_decode(0x7E, kFp8E4M3), 448.0f);
  EXPECT_EQ(minifloat_decode(0xFE, kFp8E4M3), -448.0f);
  EXPECT_EQ(minifloat_decode(0x78, kFp8E4M3), 256.0f);  // 0.1111.000 is a normal number
  EXPECT_EQ(minifloat_decode(0x08, kFp8E4M3), 0x1p-6f);
  EXPECT_EQ(minifloat_decode(0x07, kFp8E4M3), 7 * 0x1p-9f);  // largest subnormal
  EXPECT_EQ(minifloat_decode(0x01, kFp8E4M3), 0x1p-9f);
  EXPECT_TRUE(std::isnan(minifloat_decode(0x7F, kFp8E4M3)));
  EXPECT_TRUE(std::isnan(minifloat_decode(0xFF, kFp8E4M3)));
  int nans = 0;
  for (uint32_t c = 0; c < 256; ++c) nans += std::isnan(minifloat_decode(c, kFp8E4M3));
  EXPECT_EQ(nans, 2);
  // E5M2: IEEE-like.
  EXPECT_EQ(minifloat_decode(0x3C, kFp8E5M2), 1.0f);
  EXPECT_EQ(minifloat_decode(0x7B, kFp8E5M2), 57344.0f);
  EXPECT_EQ(minifloat_decode(0x04, kFp8E5M2), 0x1p-14f);
  EXPECT_EQ(minifloat_decode(0x01, kFp8E5M2), 0x1p-16f);
  EXPECT_EQ(minifloat_decode(0x7C, kFp8E5M2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(minifloat_decode(0xFC, kFp8E5M2), -std::numeric_limits<float>::infinity());
  for (uint32_t c : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}) EXPECT_TRUE(std::isnan(minifloat_decode(c, kFp8E5M2)));
  // FP16.
  EXPECT_EQ(minifloat_decode(0x3C00, kFp16), 1.0f);
  EXPECT_EQ(minifloat_decode(0xC000, kFp16), -2.0f);
  EXPECT_EQ(minifloat_decode(0x7BFF, kFp16), 65504.0f);
  EXPECT_EQ(minifloat_decode(0x0400, kFp16), 0x1p-14f);
  EXPECT_EQ(minifloat_decode(0x0001, kFp16), 0x1p-24f);
  EXPECT_EQ(minifloat_decode(0x3555, kFp16), 0x1.554p-2f);  // fp16 nearest 1/3
  EXPECT_EQ(minifloat_encode_rne(1.0f / 3.0f, kFp16), 0x3555u);
  EXPECT_EQ(minifloat_decode(0x7C00, kFp16), std::numeric_limits<float>::infinity());
  // Bits above the format width are ignored.
  EXPECT_EQ(minifloat_decode(0xF0u | 0x7u, kFp4E2M1), 6.0f);
}

TEST(Minifloat, EveryCodeRoundTrips) {
  for (const auto& [name, f] : kFormats) {
    SCOPED_TRACE(name);
    for (uint32_t c = 0; c < num_codes(f); ++c) {
      const float v = minifloat_decode(c, f);
      if (f.is_nan(c)) {
        ASSERT_TRUE(std::isnan(v)) << c;
        ASSERT_TRUE(f.is_nan(minifloat_encode_rne(v, f))) << c;
        continue;
      }
      ASSERT_EQ(minifloat_encode_rne(v, f), c) << "code " << c << " value " << v;
      // A representable value encodes exactly whatever the random number.
      for (float u : {0.0f, 0.5f, 0x1.fffffep-1f}) ASSERT_EQ(minifloat_encode_stochastic(v, f, u), c) << c;
    }
  }
}

TEST(Minifloat, NearestMatchesBruteForce) {
  const RngKey key{11, 0, 0, 0};
  for (const auto& [name, f] : kFormats) {
    SCOPED_TRACE(name);
    const Magnitudes m = positive_finite(f);
    std::vector<float> xs;
    // Random fp32 values spanning from far below the smallest subnormal to beyond the maximum.
    const int lo_exp = f.emin() - f.man_bits - 4, hi_exp = f.emax() + 3;
    for (uint64_t i = 0; i < 200000; ++i) {
      const float mant = 1.0f + uniform_at(key, 2 * i);
      const int e =
          lo_exp + static_cast<int>(random_bits_at(key, 2 * i + 1) % static_cast<uint32_t>(hi_exp - lo_exp + 1));
      xs.push_back(std::ldexp((i & 1) != 0 ? -mant : mant, e));
    }
    // Every midpoint between neighbours (exact ties), and its two fp32 neighbours.
    for (size_t i = 0; i + 1 < m.value.size(); ++i) {
      const float mid = static_cast<float>((m.value[i] + m.value[i + 1]) / 2);
      xs.insert(xs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid});
    }
    // fp32 subnormals and extremes.
    xs.insert(xs.end(), {from_bits(1), from_bits(0x007FFFFF), 3e38f, -3e38f, 0.0f, -0.0f});
    for (float x : xs) ASSERT_EQ(minifloat_encode_rne(x, f), brute_force_rne(m, f, x)) << "x=" << x;
  }
}

TEST(Minifloat, NearestTiesGoToEven) {
  // E2M1: 0.25 lies between 0 (code 0) and 0.5 (code 1): even is 0. 0.75: 0.5 (1) vs 1 (2) -> 1.
  EXPECT_EQ(minifloat_encode_rne(0.25f, kFp4E2M1), 0u);
  EXPECT_EQ(minifloat_encode_rne(0.75f, kFp4E2M1), 2u);
  EXPECT_EQ(minifloat_encode_rne(1.25f, kFp4E2M1), 2u);  // 1 (2) vs 1.5 (3)
  EXPECT_EQ(minifloat_encode_rne(1.75f, kFp4E2M1), 4u);  // 1.5 (3) vs 2 (4)
  EXPECT_EQ(minifloat_encode_rne(2.5f, kFp4E2M1), 4u);   // 2 (4) vs 3 (5)
  EXPECT_EQ(minifloat_encode_rne(3.5f, kFp4E2M1), 6u);   // 3 (5) vs 4 (6)
  EXPECT_EQ(minifloat_encode_rne(5.0f, kFp4E2M1), 6u);   // 4 (6) vs 6 (7)
  EXPECT_EQ(minifloat_encode_rne(-5.0f, kFp4E2M1), 0xEu);
  EXPECT_EQ(minifloat_encode_rne(-0.25f, kFp4E2M1), 0x8u);  // rounds to -0
  // FP16 around 1 (ulp 2^-10) and in the subnormal range (ulp 2^-24).
  EXPECT_EQ(minifloat_encode_rne(1.0f + 0x1p-11f, kFp16), 0x3C00u);
  EXPECT_EQ(minifloat_encode_rne(1.0f + 3 * 0x1p-11f, kFp16), 0x3C02u);
  EXPECT_EQ(minifloat_encode_rne(0x1p-25f, kFp16), 0x0000u);
  EXPECT_EQ(minifloat_encode_rne(3 * 0x1p-25f, kFp16), 0x0002u);
  EXPECT_EQ(minifloat_encode_rne(std::nextafter(0x1p-25f, 1.0f), kFp16), 0x0001u);
  // E4M3: the subnormal/normal boundary, 15/2 * 2^-9 lies between 0x07 and 0x08 (even).
  EXPECT_EQ(minifloat_encode_rne(7.5f * 0x1p-9f, kFp8E4M3), 0x08u);
  EXPECT_EQ(minifloat_encode_rne(6.5f * 0x1p-9f, kFp8E4M3), 0x06u);
}

TEST(Minifloat, SaturatesAndHandlesSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [name, f] : kFormats) {
    SCOPED_TRACE(name);
    const uint32_t max = f.max_finite_code(), neg = f.sign_mask();
    for (float x : {std::nextafter(f.max_finite(), inf), f.max_finite() * 1.9f, 1e30f, 3.4e38f}) {
      EXPECT_EQ(minifloat_encode_rne(x, f), max) << x;
      EXPECT_EQ(minifloat_encode_rne(-x, f), neg | max) << x;
      for (float u : {0.0f, 0.999f}) {
        EXPECT_EQ(minifloat_encode_stochastic(x, f, u), max) << x;
        EXPECT_EQ(minifloat_encode_stochastic(-x, f, u), neg | max) << x;
      }
    }
    // Zeros keep their sign; tiny values round to a signed zero (or stochastically to min sub).
    EXPECT_EQ(minifloat_encode_rne(0.0f, f), 0u);
    EXPECT_EQ(minifloat_encode_rne(-0.0f, f), neg);
    EXPECT_EQ(minifloat_encode_rne(-1e-30f, f), neg);
    EXPECT_EQ(minifloat_encode_stochastic(f.min_subnormal() / 4, f, 0.2f), 1u);
    EXPECT_EQ(minifloat_encode_stochastic(f.min_subnormal() / 4, f, 0.3f), 0u);
    // No finite input produces a non-finite code.
    for (float x : {3e38f, -3e38f, 65504.0f, 65520.0f, 70000.0f}) {
      EXPECT_TRUE(std::isfinite(minifloat_decode(minifloat_encode_rne(x, f), f))) << x;
      EXPECT_TRUE(std::isfinite(minifloat_decode(minifloat_encode_stochastic(x, f, 0.0f), f))) << x;
    }
  }
  // FP16 65520 = 65504 + half an ulp would be inf under IEEE overflow rules: saturated here.
  EXPECT_EQ(minifloat_encode_rne(65520.0f, kFp16), 0x7BFFu);
  EXPECT_EQ(minifloat_encode_rne(464.0f, kFp8E4M3), 0x7Eu);  // a tie beyond max
  // Infinities stay infinite in the IEEE formats, become NaN in E4M3, saturate in FP6/FP4.
  EXPECT_EQ(minifloat_encode_rne(inf, kFp16), 0x7C00u);
  EXPECT_EQ(minifloat_encode_rne(-inf, kFp16), 0xFC00u);
  EXPECT_EQ(minifloat_encode_rne(inf, kFp8E5M2), 0x7Cu);
  EXPECT_EQ(minifloat_encode_stochastic(-inf, kFp8E5M2, 0.5f), 0xFCu);
  EXPECT_EQ(minifloat_encode_rne(inf, kFp8E4M3), 0x7Fu);
  EXPECT_EQ(minifloat_encode_rne(-inf, kFp8E4M3), 0xFFu);
  EXPECT_EQ(minifloat_encode_rne(inf, kFp6E3M2), 0x1Fu);
  EXPECT_EQ(minifloat_encode_rne(-inf, kFp6E2M3), 0x3Fu);
  EXPECT_EQ(minifloat_encode_rne(-inf, kFp4E2M1), 0xFu);
  // NaN: quiet NaN with its sign where the format has NaN, +max where it has none (as CUDA).
  EXPECT_EQ(minifloat_encode_rne(nan, kFp16), 0x7E00u);
  EXPECT_EQ(minifloat_encode_rne(-nan, kFp16), 0xFE00u);
  EXPECT_EQ(minifloat_encode_rne(from_bits(0x7F800001u), kFp16), 0x7E00u);  // signalling NaN
  EXPECT_EQ(minifloat_encode_rne(nan, kFp8E5M2), 0x7Eu);
  EXPECT_EQ(minifloat_encode_rne(nan, kFp8E4M3), 0x7Fu);
  EXPECT_EQ(minifloat_encode_stochastic(-nan, kFp8E4M3, 0.5f), 0xFFu);
  EXPECT_EQ(minifloat_encode_rne(nan, kFp6E3M2), 0x1Fu);
  EXPECT_EQ(minifloat_encode_rne(-nan, kFp6E2M3), 0x1Fu);
  EXPECT_EQ(minifloat_encode_rne(nan, kFp4E2M1), 0x7u);
}

TEST(Minifloat, StochasticThresholdIsTheFractionalPosition) {
  // x = lo + p (hi - lo): up iff u < p.
  struct Case {
    MinifloatFormat f;
    float x;
    float p;
    uint32_t lo_code, hi_code;
  };
  const Case cases[] = {
      {kFp4E2M1, 2.5f, 0.5f, 4, 5},       {kFp4E2M1, 5.5f, 0.75f, 6, 7},
      {kFp4E2M1, 0.3f, 0.6f, 0, 1},       {kFp4E2M1, -0.125f, 0.25f, 8, 9},
      {kFp6E3M2, 0.1f, 0.6f, 1, 2},       {kFp8E4M3, 300.0f, 0.375f, 0x79, 0x7A},
      {kFp8E5M2, 0x1.8p-16f, 0.5f, 1, 2}, {kFp16, 1.0f + 0x1p-12f, 0.25f, 0x3C00, 0x3C01},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("E{}M{} x={}", c.f.exp_bits, c.f.man_bits, c.x));
    // Check the case itself: x really sits at fraction p between the two codes.
    const double lo = std::fabs(minifloat_decode(c.lo_code, c.f)), hi = std::fabs(minifloat_decode(c.hi_code, c.f));
    ASSERT_NEAR((std::fabs(c.x) - lo) / (hi - lo), c.p, 1e-6);
    EXPECT_EQ(minifloat_encode_stochastic(c.x, c.f, 0.0f), c.hi_code);
    EXPECT_EQ(minifloat_encode_stochastic(c.x, c.f, std::nextafter(c.p, 0.0f) - 1e-6f), c.hi_code);
    EXPECT_EQ(minifloat_encode_stochastic(c.x, c.f, c.p + 1e-6f), c.lo_code);
    EXPECT_EQ(minifloat_encode_stochastic(c.x, c.f, 0x1.fffffep-1f), c.lo_code);
    EXPECT_EQ(minifloat_encode(c.x, c.f, Rounding::kStochastic, 0.0f), c.hi_code);
    EXPECT_EQ(minifloat_encode(c.x, c.f, Rounding::kNearest, 0.0f), minifloat_encode_rne(c.x, c.f));
  }
}

TEST(Minifloat, StochasticRoundingIsUnbiased) {
  const int draws = 20000;
  for (const auto& [name, f] : kFormats) {
    SCOPED_TRACE(name);
    const Magnitudes m = positive_finite(f);
    // Points inside the range: subnormal, normal, near the top, both signs, odd fractions.
    std::vector<float> xs = {
        f.min_subnormal() * 0.3f, f.min_subnormal() * 2.7f, f.min_normal() * 1.37f,  f.max_finite() * 0.71f,
        f.max_finite() * 0.999f,  -f.min_normal() * 3.1f,   -f.max_finite() * 0.11f, 1.0f / 3.0f};
    for (size_t k = 0; k < xs.size(); ++k) {
      const float x = xs[k];
      const double a = std::fabs(static_cast<double>(x));
      const size_t hi = static_cast<size_t>(std::upper_bound(m.value.begin(), m.value.end(), a) - m.value.begin());
      const double lo_v = m.value[hi - 1], hi_v = m.value[hi], p = (a - lo_v) / (hi_v - lo_v);
      const RngKey key{static_cast<uint64_t>(k), 0, 0, 5};
      double sum = 0;
      for (int t = 0; t < draws; ++t) {
        const float y =
            minifloat_decode(minifloat_encode_stochastic(x, f, uniform_at(key, static_cast<uint64_t>(t))), f);
        ASSERT_TRUE(std::fabs(y) == lo_v || std::fabs(y) == hi_v) << "x=" << x << " y=" << y;
        ASSERT_EQ(std::signbit(y), std::signbit(x));
        sum += y;
      }
      // Bernoulli(p) between the neighbours: sd of the mean is (hi-lo) sqrt(p(1-p)/draws); allow
      // 5 sigma plus the 2^-24 resolution of u.
      const double sigma = (hi_v - lo_v) * std::sqrt(p * (1 - p) / draws);
      EXPECT_NEAR(sum / draws, x, 5 * sigma + (hi_v - lo_v) * 0x1p-23) << "x=" << x << " p=" << p;
    }
  }
}

TEST(Minifloat, E8M0ScaleFollowsOcpRule) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(0), 0x1p-127f);
  EXPECT_EQ(e8m0_to_float(254), 0x1p127f);
  EXPECT_EQ(e8m0_to_float(120), 0x1p-7f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(kE8M0Nan)));
  EXPECT_EQ(floor_log2(1.0f), 0);
  EXPECT_EQ(floor_log2(0.75f), -1);
  EXPECT_EQ(floor_log2(-448.0f), 8);
  EXPECT_EQ(floor_log2(from_bits(1)), -149);
  EXPECT_EQ(floor_log2(from_bits(0x00400000)), -127);
  EXPECT_EQ(floor_log2(3.4e38f), 127);
  // shared_exp = floor(log2(amax)) - emax_elem.
  EXPECT_EQ(e8m0_scale_for_amax(448.0f, kFp8E4M3), 127);    // 2^(8-8)
  EXPECT_EQ(e8m0_scale_for_amax(1.0f, kFp8E4M3), 127 - 8);  // 2^-8
  EXPECT_EQ(e8m0_scale_for_amax(6.0f, kFp4E2M1), 127);      // 2^(2-2)
  EXPECT_EQ(e8m0_scale_for_amax(7.9f, kFp4E2M1), 127);      // 7.9 saturates to 6 when encoded
  EXPECT_EQ(e8m0_scale_for_amax(8.0f, kFp4E2M1), 128);
  EXPECT_EQ(e8m0_scale_for_amax(-1000.0f, kFp6E3M2), 127 + 9 - 4);
  EXPECT_EQ(e8m0_scale_for_amax(0.0f, kFp8E5M2), 0);
  EXPECT_EQ(e8m0_scale_for_amax(1e-38f, kFp8E5M2), 0);  // clamped at 2^-127
  EXPECT_EQ(e8m0_scale_for_amax(std::numeric_limits<float>::infinity(), kFp8E4M3), kE8M0Nan);
  EXPECT_EQ(e8m0_scale_for_amax(std::numeric_limits<float>::quiet_NaN(), kFp8E4M3), kE8M0Nan);
  // Property: amax / X in [2^emax, 2^(emax+1)) whenever the exponent is not clamped.
  const RngKey key{3, 0, 0, 0};
  for (const auto& [name, f] : kFormats) {
    for (uint64_t i = 0; i < 2000; ++i) {
      const float amax =
          std::ldexp(1.0f + uniform_at(key, i), static_cast<int>(random_bits_at(key, i + 7777) % 200) - 100);
      const float ratio = amax / e8m0_to_float(e8m0_scale_for_amax(amax, f));
      ASSERT_GE(ratio, std::ldexp(1.0f, f.emax())) << name << " amax=" << amax;
      ASSERT_LT(ratio, std::ldexp(1.0f, f.emax() + 1)) << name << " amax=" << amax;
    }
  }
}

TEST(Minifloat, Bf16ScaleIsSmallestNonSaturating) {
  const RngKey key{4, 0, 0, 0};
  for (const auto& [name, f] : kFormats) {
    for (uint64_t i = 0; i < 5000; ++i) {
      const float amax =
          std::ldexp(1.0f + uniform_at(key, i), static_cast<int>(random_bits_at(key, i + 99999) % 240) - 120);
      const uint16_t s = bf16_scale_for_amax(amax, f);
      const float sv = bf16_to_float(s);
      ASSERT_GT(sv, 0.0f);
      ASSERT_LE(amax / sv, f.max_finite()) << name << " amax=" << amax;
      ASSERT_GT(amax / bf16_to_float(static_cast<uint16_t>(s - 1)), f.max_finite()) << name << " amax=" << amax;
    }
  }
  EXPECT_EQ(bf16_scale_for_amax(448.0f, kFp8E4M3), 0x3F80u);  // exactly 1.0
  EXPECT_EQ(bf16_scale_for_amax(-12.0f, kFp4E2M1), 0x4000u);  // 2.0
  EXPECT_EQ(bf16_scale_for_amax(0.0f, kFp4E2M1), 0x3F80u);
  EXPECT_EQ(bf16_scale_for_amax(std::numeric_limits<float>::quiet_NaN(), kFp4E2M1), 0x7FC0u);
  EXPECT_GT(bf16_to_float(bf16_scale_for_amax(from_bits(1), kFp8E4M3)), 0.0f);  // fp32 subnormal block max
}

TEST(Minifloat, MxBlockRoundTripErrorIsBounded) {
  // An MXFP4 block of 32 with an E8M0 scale: every element other than the saturated ones is within
  // half a quantum (of its binade, or of the subnormal range) of its value.
  const RngKey key{8, 0, 0, 2};
  std::vector<float> x(32);
  for (int trial = 0; trial < 200; ++trial) {
    float amax = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = std::ldexp(uniform_at(key, trial * 64 + i) - 0.5f, trial % 40 - 20);
      amax = std::max(amax, std::fabs(x[i]));
    }
    const float scale = e8m0_to_float(e8m0_scale_for_amax(amax, kFp4E2M1));
    for (float v : x) {
      const float y = minifloat_decode(minifloat_encode_rne(v / scale, kFp4E2M1), kFp4E2M1) * scale;
      const float a = std::fabs(v / scale);
      if (a > 6.0f) {
        ASSERT_EQ(std::fabs(y), 6.0f * scale);
        continue;
      }
      const float quantum = a < 1.0f ? 0.5f : std::ldexp(0.5f, floor_log2(a));
      ASSERT_LE(std::fabs(y - v), quantum / 2 * scale) << v;
    }
  }
}

}  // namespace
}  // namespace ccsim::kern
