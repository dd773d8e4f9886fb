#include "kernels/math/float_libm.hpp"

#include <cmath>

#include "kernels/float_bits.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

// --- logf: x = 2^k z with z in [0.7, 1.4) (its bits from kLogOff on), log x = k ln 2 + log c +
// log(1 + r), c the centre of z's subinterval (one of 16, indexed by z's leading mantissa bits),
// r = z·(1/c) - 1 in one fused step, and log(1 + r) ≈ r + A2 r² + A1 r³ + A0 r⁴.
constexpr uint32_t kLogOff = 0x3f330000;
constexpr double kLogInvC[16] = {
    0x1.661ec79f8f3bep+0, 0x1.571ed4aaf883dp+0, 0x1.49539f0f010b0p+0, 0x1.3c995b0b80385p+0,
    0x1.30d190c8864a5p+0, 0x1.25e227b0b8ea0p+0, 0x1.1bb4a4a1a343fp+0, 0x1.12358f08ae5bap+0,
    0x1.0953f419900a7p+0, 0x1.0000000000000p+0, 0x1.e608cfd9a47acp-1, 0x1.ca4b31f026aa0p-1,
    0x1.b2036576afce6p-1, 0x1.9c2d163a1aa2dp-1, 0x1.886e6037841edp-1, 0x1.767dcf5534862p-1};
constexpr double kLogC[16] = {
    -0x1.57bf7808caadep-2, -0x1.2bef0a7c06ddbp-2, -0x1.01eae7f513a67p-2, -0x1.b31d8a68224e9p-3,
    -0x1.6574f0ac07758p-3, -0x1.1aa2bc79c8100p-3, -0x1.a4e76ce8c0e5ep-4, -0x1.1973c5a611cccp-4,
    -0x1.252f438e10c1ep-5, 0x0.0p+0,              0x1.aa5aa5df25984p-5,  0x1.c5e53aa362eb4p-4,
    0x1.526e57720db08p-3,  0x1.bc2860d224770p-3,  0x1.1058bc8a07ee1p-2,  0x1.4043057b6ee09p-2};
constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kLogA0 = -0x1.00ea348b88334p-2, kLogA1 = 0x1.5575b0be00b6ap-2, kLogA2 = -0x1.ffffef20a4123p-2;

// --- sincosf: n = x·2/π rounded (through a fixed-point product, as the C library does), r = x - n·π/2
// in one fused step, then sine and cosine polynomials of r; the quadrant n picks the signs and
// whether the two results swap. Coefficient sets for n mod 4 in {0, 1} and {2, 3}.
struct SinCosPoly {
  double c0, c1, s1, c2, s2, c3, s3, c4;
};
constexpr SinCosPoly kSinCos[2] = {
    {1.0, -0x1.ffffffd0c621cp-2, -0x1.555545995a603p-3, 0x1.55553e1068f19p-5, 0x1.1107605230bc4p-7,
     -0x1.6c087e89a359dp-10, -0x1.994eb3774cf24p-13, 0x1.99343027bf8c3p-16},
    {-1.0, 0x1.ffffffd0c621cp-2, -0x1.555545995a603p-3, -0x1.55553e1068f19p-5, 0x1.1107605230bc4p-7,
     0x1.6c087e89a359dp-10, -0x1.994eb3774cf24p-13, -0x1.99343027bf8c3p-16}};
constexpr double kQuadrantSign[4] = {1.0, -1.0, -1.0, 1.0};
constexpr double kTwoOverPi24 = 0x1.45f306dc9c883p+23;  // 2/π · 2^24
constexpr double kHalfPi = 0x1.921fb54442d18p+0;
// Bits 20..30 of |x| (exponent and three mantissa bits): the ranges below compare these.
constexpr uint32_t kTopTiny = 0x398;     // |x| < 2^-12: sin x rounds to x, cos x to 1
constexpr uint32_t kTopQuarter = 0x3f4;  // |x| < π/4 (and a little below): no reduction
constexpr uint32_t kTopLarge = 0x42f;    // |x| >= 120: the C library's own reduction

uint32_t abstop12(float x) { return (float_to_bits(x) >> 20) & 0x7ffu; }

void sincos_poly(double x, double x2, const SinCosPoly& p, int n, float* sine, float* cosine) {
  const double x3 = x * x2, x4 = x2 * x2;
  const double x5 = x3 * x2, x6 = x4 * x2;
  const double c1 = std::fma(x2, p.c1, p.c0);
  const double s1 = std::fma(x2, p.s3, p.s2);
  const double c2 = std::fma(x2, p.c4, p.c3);
  const double s = std::fma(x3, p.s1, x);
  const double c = std::fma(x4, p.c2, c1);
  const auto sin_poly = static_cast<float>(std::fma(x5, s1, s));
  const auto cos_poly = static_cast<float>(std::fma(x6, c2, c));
  *sine = (n & 1) != 0 ? cos_poly : sin_poly;
  *cosine = (n & 1) != 0 ? sin_poly : cos_poly;
}

#if defined(CCSIM_HAND_AVX2)
bool have_fma() {
  static const bool fma = __builtin_cpu_supports("fma") != 0;
  return fma;
}

// Eight logs; false (nothing written) when a lane is outside the positive normal range.
__attribute__((target("avx2,fma"))) bool logf8(const float* x, float* y) {
  const __m256i ix = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  // ix - 0x00800000 >= 0x7f000000 unsigned: zero, subnormal, negative, infinite or NaN.
  const __m256i flip = _mm256_set1_epi32(INT32_MIN);
  const __m256i off = _mm256_xor_si256(_mm256_sub_epi32(ix, _mm256_set1_epi32(0x00800000)), flip);
  const __m256i special = _mm256_cmpgt_epi32(off, _mm256_xor_si256(_mm256_set1_epi32(0x7effffff), flip));
  if (!_mm256_testz_si256(special, special)) return false;
  const __m256i tmp = _mm256_sub_epi32(ix, _mm256_set1_epi32(static_cast<int>(kLogOff)));
  const __m256i idx = _mm256_and_si256(_mm256_srli_epi32(tmp, 19), _mm256_set1_epi32(15));
  const __m256i k = _mm256_srai_epi32(tmp, 23);
  const __m256i iz = _mm256_sub_epi32(ix, _mm256_and_si256(tmp, _mm256_set1_epi32(static_cast<int>(0xff800000u))));
  const __m256 zf = _mm256_castsi256_ps(iz);
  __m128 half[2];
  for (int h = 0; h < 2; ++h) {
    const __m128i ih = h == 0 ? _mm256_castsi256_si128(idx) : _mm256_extracti128_si256(idx, 1);
    const __m128i kh = h == 0 ? _mm256_castsi256_si128(k) : _mm256_extracti128_si256(k, 1);
    const __m256d z = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(zf) : _mm256_extractf128_ps(zf, 1));
    // Masked gathers with every lane set: the unmasked form leaves GCC 12 warning about its
    // undefined source register.
    const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
    const __m256d invc = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), kLogInvC, ih, all, 8);
    const __m256d logc = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), kLogC, ih, all, 8);
    const __m256d r = _mm256_fmadd_pd(z, invc, _mm256_set1_pd(-1.0));
    const __m256d y0 = _mm256_fmadd_pd(_mm256_cvtepi32_pd(kh), _mm256_set1_pd(kLn2), logc);
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d p = _mm256_fmadd_pd(r, _mm256_set1_pd(kLogA1), _mm256_set1_pd(kLogA2));
    p = _mm256_fmadd_pd(_mm256_set1_pd(kLogA0), r2, p);
    half[h] = _mm256_cvtpd_ps(_mm256_fmadd_pd(p, r2, _mm256_add_pd(y0, r)));
  }
  _mm256_storeu_ps(y, _mm256_set_m128(half[1], half[0]));
  return true;
}

// Four sines and cosines; false (nothing written) when a lane is tiny (|x| < 2^-12) or outside
// |x| < 120. One formula serves both of the C library's paths below 120: with n = 0 (|x| < π/4)
// the reduction x - 0·π/2 and the sign 1 leave x exact. The second coefficient set is the first
// with the cosine's coefficients negated, so its cosine is the first set's, negated (round to
// nearest is symmetric): the sign is applied to the result.
__attribute__((target("avx2,fma"))) bool sincosf4(const float* xp, float* sine, float* cosine) {
  const __m128i ix = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xp));
  const __m128i top = _mm_and_si128(_mm_srli_epi32(ix, 20), _mm_set1_epi32(0x7ff));
  const __m128i bad = _mm_or_si128(_mm_cmplt_epi32(top, _mm_set1_epi32(kTopTiny)),
                                   _mm_cmpgt_epi32(top, _mm_set1_epi32(kTopLarge - 1)));
  if (!_mm_testz_si128(bad, bad)) return false;
  const __m256d x = _mm256_cvtps_pd(_mm_castsi128_ps(ix));
  const __m128i t = _mm256_cvttpd_epi32(_mm256_mul_pd(x, _mm256_set1_pd(kTwoOverPi24)));
  const __m128i n = _mm_srai_epi32(_mm_add_epi32(t, _mm_set1_epi32(0x800000)), 24);
  const __m256d r = _mm256_fnmadd_pd(_mm256_cvtepi32_pd(n), _mm256_set1_pd(kHalfPi), x);
  // Sign bits in the doubles' top bit: quadrant sign (n mod 4 in {1, 2}), cosine sign (n & 2), swap (n & 1).
  const __m256i n64 = _mm256_cvtepi32_epi64(n);
  const __m256i odd = _mm256_slli_epi64(_mm256_and_si256(n64, _mm256_set1_epi64x(1)), 63);
  const __m256i second = _mm256_slli_epi64(_mm256_and_si256(n64, _mm256_set1_epi64x(2)), 62);
  const __m256i qsign = _mm256_xor_si256(_mm256_slli_epi64(n64, 63), second);
  const __m256d xs = _mm256_xor_pd(r, _mm256_castsi256_pd(qsign));
  const __m256d x2 = _mm256_mul_pd(r, r);
  const SinCosPoly& p = kSinCos[0];
  const __m256d x3 = _mm256_mul_pd(xs, x2), x4 = _mm256_mul_pd(x2, x2);
  const __m256d x5 = _mm256_mul_pd(x3, x2), x6 = _mm256_mul_pd(x4, x2);
  const __m256d c1 = _mm256_fmadd_pd(x2, _mm256_set1_pd(p.c1), _mm256_set1_pd(p.c0));
  const __m256d s1 = _mm256_fmadd_pd(x2, _mm256_set1_pd(p.s3), _mm256_set1_pd(p.s2));
  const __m256d c2 = _mm256_fmadd_pd(x2, _mm256_set1_pd(p.c4), _mm256_set1_pd(p.c3));
  const __m256d s = _mm256_fmadd_pd(x3, _mm256_set1_pd(p.s1), xs);
  const __m256d c = _mm256_fmadd_pd(x4, _mm256_set1_pd(p.c2), c1);
  const __m256d sin_poly = _mm256_fmadd_pd(x5, s1, s);
  const __m256d cos_poly = _mm256_xor_pd(_mm256_fmadd_pd(x6, c2, c), _mm256_castsi256_pd(second));
  const __m256d swap = _mm256_castsi256_pd(odd);
  _mm_storeu_ps(sine, _mm256_cvtpd_ps(_mm256_blendv_pd(sin_poly, cos_poly, swap)));
  _mm_storeu_ps(cosine, _mm256_cvtpd_ps(_mm256_blendv_pd(cos_poly, sin_poly, swap)));
  return true;
}
#endif

}  // namespace

float libm_logf(float x) {
  uint32_t ix = float_to_bits(x);
  if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u) {
    // Zero, subnormal, negative, infinite or NaN: only positive subnormals are computed here,
    // scaled into the normal range (the exponent corrected below through ix).
    if (ix == 0 || ix >= 0x7f800000u) return std::log(x);
    ix = float_to_bits(x * 0x1p23f) - (23u << 23);
  }
  const uint32_t tmp = ix - kLogOff;
  const uint32_t i = (tmp >> 19) & 15u;
  const int32_t k = static_cast<int32_t>(tmp) >> 23;
  const double z = bits_to_float(ix - (tmp & 0xff800000u));
  const double r = std::fma(z, kLogInvC[i], -1.0);
  const double y0 = std::fma(static_cast<double>(k), kLn2, kLogC[i]);
  const double r2 = r * r;
  double p = std::fma(r, kLogA1, kLogA2);
  p = std::fma(kLogA0, r2, p);
  return static_cast<float>(std::fma(p, r2, y0 + r));
}

void libm_sincosf(float y, float* sine, float* cosine) {
  const uint32_t top = abstop12(y);
  const double x = y;
  if (top < kTopQuarter) {
    if (top < kTopTiny) {
      *sine = y;
      *cosine = 1.0f;
      return;
    }
    sincos_poly(x, x * x, kSinCos[0], 0, sine, cosine);
    return;
  }
  if (top >= kTopLarge) {
    ::sincosf(y, sine, cosine);
    return;
  }
  const int n = (static_cast<int32_t>(x * kTwoOverPi24) + 0x800000) >> 24;
  const double r = std::fma(-static_cast<double>(n), kHalfPi, x);
  sincos_poly(r * kQuadrantSign[n & 3], r * r, kSinCos[(n & 2) != 0 ? 1 : 0], n, sine, cosine);
}

void libm_logf_row(const float* x, float* y, uint64_t n) {
  uint64_t i = 0;
#if defined(CCSIM_HAND_AVX2)
  if (libm_rows_vectorized())
    for (; i + 8 <= n; i += 8)
      if (!logf8(x + i, y + i))
        for (uint64_t j = i; j < i + 8; ++j) y[j] = libm_logf(x[j]);
#endif
  for (; i < n; ++i) y[i] = libm_logf(x[i]);
}

void libm_sincosf_row(const float* x, float* sine, float* cosine, uint64_t n) {
  uint64_t i = 0;
#if defined(CCSIM_HAND_AVX2)
  if (libm_rows_vectorized())
    for (; i + 4 <= n; i += 4)
      if (!sincosf4(x + i, sine + i, cosine + i))
        for (uint64_t j = i; j < i + 4; ++j) libm_sincosf(x[j], sine + j, cosine + j);
#endif
  for (; i < n; ++i) libm_sincosf(x[i], sine + i, cosine + i);
}

bool libm_rows_vectorized() {
#if defined(CCSIM_HAND_AVX2)
  return hand_avx2() && have_fma();
#else
  return false;
#endif
}

}  // namespace ccsim::kern
