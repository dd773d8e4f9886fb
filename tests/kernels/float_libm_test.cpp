#include "kernels/math/float_libm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"
#include "kernels/philox_batch.hpp"

namespace ccsim::kern {
namespace {

constexpr float kTwoPi = 6.2831853071795864769f;  // the synthetic generator's
constexpr uint32_t kGeneratorArgs = uint32_t{1} << 24;

// The generator's Box–Muller arguments for the 24-bit uniform k·2^-24: 1 - u for the log, 2πu for
// the angle (traces/synthetic_gradients.cpp).
float log_arg(uint32_t k) { return 1.0f - u32_to_unit_float(k << 8); }
float angle_arg(uint32_t k) { return kTwoPi * u32_to_unit_float(k << 8); }

// Same bits, or both NaN.
bool same(float a, float b) { return float_to_bits(a) == float_to_bits(b) || (a != a && b != b); }

// Arguments of every kind: random bit patterns (zeros, subnormals, negatives, infinities, NaN
// among them), values near 1, and angles of both signs below and above the reduction's limits.
std::vector<float> mixed_log_args(uint32_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(), 0x1p-126f, 0x1.fffffep127f, 0x1.fffffep-1f,
                          0x1.000002p+0f};
  while (x.size() < count) {
    const uint32_t bits = static_cast<uint32_t>(gen());
    x.push_back(gen() % 4 == 0 ? 1.0f + static_cast<float>(static_cast<int32_t>(bits >> 8) - (1 << 23)) * 0x1p-26f
                               : bits_to_float(bits));
  }
  return x;
}

std::vector<float> mixed_angles(uint32_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> near(-130.0f, 130.0f);
  std::vector<float> x = {0.0f, -0.0f, 0x1p-13f, -0x1p-12f, 0x1p-130f, 0.785f, -0.7854f, 2.3561945f, 119.99f,
                          120.0f, -120.0f, 1e6f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  while (x.size() < count) x.push_back(gen() % 8 == 0 ? bits_to_float(static_cast<uint32_t>(gen())) : near(gen));
  return x;
}

TEST(FloatLibm, RowsEqualTheScalarFunctionsOnEveryGeneratorArgument) {
  if (!libm_rows_vectorized()) GTEST_SKIP() << "no AVX2 + FMA here: the rows run the scalar functions";
  constexpr uint32_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), y(kChunk), a(kChunk), s(kChunk), c(kChunk);
  uint64_t log_diffs = 0, sincos_diffs = 0;
  for (uint32_t k0 = 0; k0 < kGeneratorArgs; k0 += kChunk) {
    for (uint32_t j = 0; j < kChunk; ++j) {
      x[j] = log_arg(k0 + j);
      a[j] = angle_arg(k0 + j);
    }
    libm_logf_row(x.data(), y.data(), kChunk);
    libm_sincosf_row(a.data(), s.data(), c.data(), kChunk);
    for (uint32_t j = 0; j < kChunk; ++j) {
      log_diffs += !same(y[j], libm_logf(x[j]));
      float s1, c1;
      libm_sincosf(a[j], &s1, &c1);
      sincos_diffs += !same(s[j], s1) || !same(c[j], c1);
    }
  }
  EXPECT_EQ(log_diffs, 0u);
  EXPECT_EQ(sincos_diffs, 0u);
}

TEST(FloatLibm, RowsEqualTheScalarFunctionsOnMixedArguments) {
  // Every length up to 40 at every offset into the arrays, so that special lanes fall at every
  // position of an eight- or four-lane block and the tails run; the log also in place.
  const std::vector<float> lx = mixed_log_args(1 << 14, 3), ax = mixed_angles(1 << 14, 4);
  for (uint64_t len = 0; len <= 40; ++len) {
    for (uint64_t off = 0; off + len <= lx.size(); off += 41 + len) {
      const auto first = lx.begin() + static_cast<int64_t>(off);
      std::vector<float> y(len), inplace(first, first + static_cast<int64_t>(len));
      std::vector<float> s(len), c(len);
      libm_logf_row(lx.data() + off, y.data(), len);
      libm_logf_row(inplace.data(), inplace.data(), len);
      libm_sincosf_row(ax.data() + off, s.data(), c.data(), len);
      for (uint64_t j = 0; j < len; ++j) {
        const float want = libm_logf(lx[off + j]);
        ASSERT_TRUE(same(y[j], want)) << "log of " << lx[off + j] << " at " << j << " of " << len;
        ASSERT_TRUE(same(inplace[j], want)) << "in place, log of " << lx[off + j];
        float s1, c1;
        libm_sincosf(ax[off + j], &s1, &c1);
        ASSERT_TRUE(same(s[j], s1) && same(c[j], c1)) << "sincos of " << ax[off + j] << " at " << j << " of " << len;
      }
    }
  }
}

TEST(FloatLibm, ValuesAreTheFunctionsToWithinAnUlp) {
  // Independent of any C library's rounding: against double-precision log, sin and cos.
  const std::vector<float> lx = mixed_log_args(1 << 16, 5), ax = mixed_angles(1 << 16, 6);
  for (float x : lx) {
    if (!(x > 0.0f) || !std::isfinite(x)) continue;
    const double want = std::log(static_cast<double>(x));
    EXPECT_LE(std::abs(static_cast<double>(libm_logf(x)) - want),
              std::nextafter(std::abs(static_cast<float>(want)), INFINITY) - std::abs(static_cast<float>(want)))
        << x;
  }
  for (float x : ax) {
    if (!(std::abs(x) < 120.0f)) continue;
    float s, c;
    libm_sincosf(x, &s, &c);
    const double ws = std::sin(static_cast<double>(x)), wc = std::cos(static_cast<double>(x));
    // A relative ulp, and an absolute 2^-40 where the result is near a zero of the function (the
    // reduction's π/2 is a double).
    EXPECT_LE(std::abs(s - ws), 0x1p-23 * std::abs(ws) + 0x1p-40) << x;
    EXPECT_LE(std::abs(c - wc), 0x1p-23 * std::abs(wc) + 0x1p-40) << x;
  }
}

// glibc 2.28 and later compute logf and sincosf with these tables and polynomials, and select
// their FMA build on machines with AVX2 and FMA: there the C library's results are these.
bool c_library_fuses() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 28)) && defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

TEST(FloatLibm, EqualsTheCLibraryWhereItFusesMultiplyAdds) {
  if (!c_library_fuses()) GTEST_SKIP() << "the C library here is not glibc >= 2.28 on an AVX2 + FMA x86-64 machine";
  uint64_t log_diffs = 0, sincos_diffs = 0;
  for (uint32_t k = 0; k < kGeneratorArgs; ++k) {
    const float x = log_arg(k), a = angle_arg(k);
    log_diffs += !same(libm_logf(x), ::logf(x));
    float s0, c0, s1, c1;
    libm_sincosf(a, &s0, &c0);
    ::sincosf(a, &s1, &c1);
    sincos_diffs += !same(s0, s1) || !same(c0, c1);
  }
  EXPECT_EQ(log_diffs, 0u) << "of the generator's 2^24 log arguments";
  EXPECT_EQ(sincos_diffs, 0u) << "of the generator's 2^24 angles";
  for (float x : mixed_log_args(1 << 20, 7)) EXPECT_TRUE(same(libm_logf(x), ::logf(x))) << x;
  for (float x : mixed_angles(1 << 20, 8)) {
    float s0, c0, s1, c1;
    libm_sincosf(x, &s0, &c0);
    ::sincosf(x, &s1, &c1);
    ASSERT_TRUE(same(s0, s1) && same(c0, c1)) << x;
  }
}

}  // namespace
}  // namespace ccsim::kern
