#pragma once
// Internal to kernels/cuda/: correctly rounded double-precision log, log2 and cos for the kernels
// that must reproduce a CPU reference calling glibc's std::log, std::log2 and std::cos (Box-Muller
// normals, histogram entropy). CUDA's own log (1 ulp), log2 (1 ulp) and cos (2 ulp) often differ
// from glibc in the last bit; these evaluate in double-double arithmetic (about 100 correct bits)
// and round once, so they return the correctly rounded result except when the exact value lies
// within about 2^-100 (relative) of a rounding midpoint. glibc's functions are not guaranteed to be
// correctly rounded either (their documented bounds are a little above half an ulp), so the match
// with the CPU holds wherever glibc rounds correctly: see the kernels' headers for what was
// measured (these functions matched a quad-precision reference on every argument tried, the 2^24
// Box-Muller arguments of log and of cos among them). Written from the textbook formulas (atanh
// series for log, Taylor series with a three-part pi/2 reduction for cos); every constant is a
// rounding of a mathematical constant.
//
// Host and device: every function is CCSIM_HD, so host code can run the very same arithmetic. All
// operations go through add/sub/mul/div/fma below, which are single IEEE round-to-nearest
// operations on both sides (the _rn intrinsics on the device are never contracted into an FMA,
// whatever --fmad says); host callers must compile with -ffp-contract=off.
#include <cmath>
#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern::cr {

// --- single operations ---------------------------------------------------------------------------

CCSIM_HD double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
CCSIM_HD double sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
CCSIM_HD double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
CCSIM_HD double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
CCSIM_HD double fma_rn(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// --- double-double arithmetic: hi + lo with |lo| <= ulp(hi) / 2, so hi = RN(hi + lo) ------------

struct DD {
  double hi;
  double lo;
};

// a + b exactly, for any a, b (Knuth).
CCSIM_HD DD two_sum(double a, double b) {
  const double s = add(a, b), bb = sub(s, a);
  return {s, add(sub(a, sub(s, bb)), sub(b, bb))};
}
// a + b exactly. REQUIRES |a| >= |b| or a == 0 (Dekker).
CCSIM_HD DD fast_two_sum(double a, double b) {
  const double s = add(a, b);
  return {s, sub(b, sub(s, a))};
}
// a * b exactly (barring underflow).
CCSIM_HD DD two_prod(double a, double b) {
  const double p = mul(a, b);
  return {p, fma_rn(a, b, -p)};
}
CCSIM_HD DD dd_add(DD a, DD b) {
  DD s = two_sum(a.hi, b.hi);
  const DD t = two_sum(a.lo, b.lo);
  s.lo = add(s.lo, t.hi);
  s = fast_two_sum(s.hi, s.lo);
  s.lo = add(s.lo, t.lo);
  return fast_two_sum(s.hi, s.lo);
}
CCSIM_HD DD dd_neg(DD a) { return {-a.hi, -a.lo}; }
CCSIM_HD DD dd_sub(DD a, DD b) { return dd_add(a, dd_neg(b)); }
CCSIM_HD DD dd_mul(DD a, DD b) {
  DD p = two_prod(a.hi, b.hi);
  p.lo = add(p.lo, add(mul(a.hi, b.lo), mul(a.lo, b.hi)));
  return fast_two_sum(p.hi, p.lo);
}
CCSIM_HD DD dd_mul_d(DD a, double b) {
  DD p = two_prod(a.hi, b);
  p.lo = add(p.lo, mul(a.lo, b));
  return fast_two_sum(p.hi, p.lo);
}
CCSIM_HD DD dd_div_d(DD a, double b) {
  const double q1 = div(a.hi, b);
  const DD p = two_prod(q1, b);
  const double r = add(sub(sub(a.hi, p.hi), p.lo), a.lo);
  return fast_two_sum(q1, div(r, b));
}
CCSIM_HD DD dd_div(DD a, DD b) {
  const double q1 = div(a.hi, b.hi);
  const DD r = dd_sub(a, dd_mul_d(b, q1));
  const double q2 = div(r.hi, b.hi);
  const DD r2 = dd_sub(r, dd_mul_d(b, q2));
  const double q3 = div(r2.hi, b.hi);
  const DD q = fast_two_sum(q1, q2);
  return dd_add(q, DD{q3, 0.0});
}

// --- constants: roundings of mathematical constants, split into doubles ---------------------------

inline constexpr double kLn2Hi = 0x1.62e42fefa39efp-1, kLn2Lo = 0x1.abc9e3b39803fp-56;        // ln 2
inline constexpr double kInvLn2Hi = 0x1.71547652b82fep+0, kInvLn2Lo = 0x1.777d0ffda0d24p-56;  // 1 / ln 2
inline constexpr double kPio2A = 0x1.921fb54442d18p+0, kPio2B = 0x1.1a62633145c07p-54,         // pi / 2
    kPio2C = -0x1.f1976b7ed8fbcp-110;
inline constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;  // 2 / pi rounded (any nearby value works)
inline constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;      // reduction threshold (any nearby value works)

// --- log -----------------------------------------------------------------------------------------

// ln(m) for m in [sqrt(2)/2, sqrt(2)] as a double-double: 2 atanh(s), s = (m - 1) / (m + 1),
// |s| <= 0.1716, so z = s^2 <= 0.0295 and atanh(s) / s = sum_n z^n / (2n + 1). Terms n >= 10 are
// below 2^-50 of the sum and go in double; n <= 9 in double-double; the series stops at n = 20
// (remainder below 2^-110).
CCSIM_HD DD log_reduced(double m) {
  const double f = sub(m, 1.0);  // exact (Sterbenz)
  const DD s = dd_div(DD{f, 0.0}, two_sum(m, 1.0));
  const DD z = dd_mul(s, s);
  double tail = div(1.0, 41.0);
  for (int n = 19; n >= 10; --n) tail = add(div(1.0, static_cast<double>(2 * n + 1)), mul(z.hi, tail));
  DD acc{tail, 0.0};
  for (int n = 9; n >= 0; --n) acc = dd_add(dd_div_d(DD{1.0, 0.0}, static_cast<double>(2 * n + 1)), dd_mul(z, acc));
  const DD l = dd_mul(s, acc);
  return {mul(l.hi, 2.0), mul(l.lo, 2.0)};
}

// x = 2^e m with m in [sqrt(2)/2, sqrt(2)]. REQUIRES x positive, normal and finite.
CCSIM_HD void split_exponent(double x, int& e, double& m) {
  const uint64_t u = double_to_bits(x);
  e = static_cast<int>((u >> 52) & 0x7FF) - 1023;
  m = bits_to_double((u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > kSqrt2) {
    m = mul(m, 0.5);  // exact
    ++e;
  }
}

/// ln(x), correctly rounded but for the cases described in the file comment; +0 for x = 1.
/// REQUIRES x positive, normal and finite (the callers' arguments are in [2^-64, 1]).
CCSIM_HD double log_cr(double x) {
  if (x == 1.0) return 0.0;
  int e;
  double m;
  split_exponent(x, e, m);
  const DD r = dd_add(dd_mul_d(DD{kLn2Hi, kLn2Lo}, static_cast<double>(e)), log_reduced(m));
  return r.hi;  // hi = RN(hi + lo)
}

/// log2(x), correctly rounded but for the cases described in the file comment; exact for powers
/// of two. REQUIRES x positive, normal and finite.
CCSIM_HD double log2_cr(double x) {
  int e;
  double m;
  split_exponent(x, e, m);
  if (m == 1.0) return static_cast<double>(e);
  const DD r = dd_add(DD{static_cast<double>(e), 0.0}, dd_mul(log_reduced(m), DD{kInvLn2Hi, kInvLn2Lo}));
  return r.hi;
}

// --- cos -----------------------------------------------------------------------------------------

// cos(r) for |r| <= ~pi/4 from z = r^2: 1 - z/(1*2) (1 - z/(3*4) (1 - ...)), 15 factors (the
// first term left out, z^16 / 32!, is below 2^-110).
CCSIM_HD DD cos_series(DD z) {
  DD c{1.0, 0.0};
  for (int n = 15; n >= 1; --n)
    c = dd_sub(DD{1.0, 0.0}, dd_div_d(dd_mul(z, c), static_cast<double>((2 * n - 1) * (2 * n))));
  return c;
}
// sin(r) / r from z = r^2: 1 - z/(2*3) (1 - z/(4*5) (1 - ...)), 15 factors.
CCSIM_HD DD sin_series(DD z) {
  DD s{1.0, 0.0};
  for (int n = 15; n >= 1; --n)
    s = dd_sub(DD{1.0, 0.0}, dd_div_d(dd_mul(z, s), static_cast<double>((2 * n) * (2 * n + 1))));
  return s;
}

/// cos(a), correctly rounded but for the cases described in the file comment.
/// REQUIRES 0 <= a < 8 (the Box-Muller angle 2 pi u lies in [0, 2 pi)).
CCSIM_HD double cos_cr(double a) {
  const int k = static_cast<int>(rint(mul(a, kTwoOverPi)));  // quadrant, 0..5
  const double kd = static_cast<double>(k);
  // r = a - k pi/2 with pi/2 to ~160 bits: k * kPio2A and k * kPio2B exactly, k * kPio2C rounded.
  DD r = dd_sub(DD{a, 0.0}, two_prod(kd, kPio2A));
  r = dd_sub(r, two_prod(kd, kPio2B));
  r = dd_sub(r, DD{mul(kd, kPio2C), 0.0});
  const DD z = dd_mul(r, r);
  DD v;
  switch (k & 3) {
    case 0: v = cos_series(z); break;
    case 1: v = dd_neg(dd_mul(r, sin_series(z))); break;
    case 2: v = dd_neg(cos_series(z)); break;
    default: v = dd_mul(r, sin_series(z)); break;
  }
  return v.hi;
}

}  // namespace ccsim::kern::cr
