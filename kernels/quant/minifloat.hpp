#pragma once
/// \file
/// Small IEEE-like floating-point formats ("minifloats") and the OCP Microscaling (MX) shared
/// scales: a constexpr format descriptor, exact encode/decode of an fp32 value to a format's bit
/// code with round-to-nearest-even or stochastic rounding, and the per-block scale choice.
///
/// Formats (code layout `sign | exponent | mantissa`, sign in the top bit of `bits()`):
///
///   | format   | E | M | bias | specials          | max finite | min normal | min subnormal |
///   |----------|---|---|------|-------------------|------------|------------|---------------|
///   | FP16     | 5 |10 |  15  | IEEE inf/NaN      | 65504      | 2^-14      | 2^-24         |
///   | FP8 E4M3 | 4 | 3 |   7  | NaN = S.1111.111  | 448        | 2^-6       | 2^-9          |
///   | FP8 E5M2 | 5 | 2 |  15  | IEEE inf/NaN      | 57344      | 2^-14      | 2^-16         |
///   | FP6 E3M2 | 3 | 2 |   3  | none              | 28         | 2^-2       | 2^-4          |
///   | FP6 E2M3 | 2 | 3 |   1  | none              | 7.5        | 1          | 2^-3          |
///   | FP4 E2M1 | 2 | 1 |   1  | none              | 6          | 1          | 0.5           |
///
/// E4M3, E5M2, E3M2, E2M3 and E2M1 are the element formats of the OCP Microscaling Formats (MX)
/// specification v1.0 (E4M3 as in FP8-LM / OCP 8-bit FP). Every value of every format is exactly
/// representable in fp32, so decoding is exact.
///
/// Encoding rules, identical for every format and for host and device code:
///   - Rounding is decided on the exact fp32 value with integer arithmetic, so it is correct for
///     subnormal results and for fp32 subnormal inputs, and bit-identical on CPU and GPU.
///   - Round to nearest, ties to the code with an even last bit (IEEE roundTiesToEven).
///   - Stochastic: with lo <= |x| <= hi the two neighbouring representable magnitudes, the
///     magnitude rounds up to hi iff u < (|x| - lo) / (hi - lo), so E[decode] = x for u uniform
///     on [0, 1) and |x| <= max finite. (With u of 24-bit resolution, as from Philox, the
///     probability is that fraction rounded up to a multiple of 2^-24.)
///   - Saturation: a finite input whose rounded magnitude exceeds the largest finite value
///     encodes as ±max finite; a finite input never produces inf or NaN. Signed zeros keep their
///     sign, and so do results that round to zero.
///   - Non-finite inputs stay non-finite where the format can say so: ±inf encodes as ±inf in
///     IEEE formats (FP16, E5M2) and as NaN (S.1111.111, sign kept) in E4M3; NaN encodes as a
///     quiet NaN (FP16 0x7E00, E5M2 0x7E, sign kept) or as S.1111.111 in E4M3. The FP6/FP4
///     formats have no special values: ±inf saturates to ±max and NaN encodes as +max, as in
///     CUDA's __nv_cvt_float_to_fp6/fp4. In MX use, the block scale carries the NaN instead:
///     e8m0_scale_for_amax() returns the NaN scale 0xFF for a NaN or infinite block maximum.
///     (PTX `cvt.satfinite` differs for FP8 inputs of ±inf, which it maps to ±max: a CUDA kernel
///     matching this reference calls these functions rather than the hardware conversion.)
///
/// MX use (OCP MX v1.0): a block of 32 elements shares a scale X; element i is coded
/// P_i = minifloat_encode(V_i / X) and decoded minifloat_decode(P_i) * X. X is an E8M0 power of
/// two chosen by e8m0_scale_for_amax() (shared_exp = floor(log2(amax)) - emax_elem, so elements
/// near amax may saturate, as the spec prescribes), or a BF16 value chosen by
/// bf16_scale_for_amax() (the smallest BF16 with amax / X <= max finite, never saturating).
///
/// Thread safety: every function is pure.

#include <cstdint>
#include <cstring>

#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/block_int8_quant.hpp"

namespace ccsim::kern {

/// Which codes of a format are reserved for special values.
enum class MinifloatSpecials : uint8_t {
  kIeee,     ///< all-ones exponent: mantissa 0 is ±inf, any other mantissa is NaN (FP16, E5M2)
  kNanOnly,  ///< only S.1..1.1..1 (all magnitude bits set) is NaN; no infinities (OCP E4M3)
  kFinite,   ///< every code is a finite number (OCP E3M2, E2M3, E2M1)
};

/// Describes a binary floating-point format of 1 + exp_bits + man_bits bits (at most 16).
/// Value of a code with exponent field e and mantissa field m:
///   e == 0: (-1)^s * m * 2^(1 - bias - man_bits)              (subnormal, includes ±0)
///   e  > 0: (-1)^s * (2^man_bits + m) * 2^(e - bias - man_bits) (normal)
/// except the codes `specials` reserves.
/// REQUIRES: 1 <= exp_bits, 1 <= man_bits <= 10, exp_bits + man_bits <= 15, 0 <= bias <= 126, and
/// emax() <= 127 (the encoder's exactness argument relies on these; all formats below satisfy them).
struct MinifloatFormat {
  uint8_t exp_bits = 0;
  uint8_t man_bits = 0;
  int16_t bias = 0;
  MinifloatSpecials specials = MinifloatSpecials::kFinite;

  /// Total bits of a code, sign included.
  CCSIM_HD constexpr uint32_t bits() const { return 1u + exp_bits + man_bits; }
  /// The sign bit of a code.
  CCSIM_HD constexpr uint32_t sign_mask() const { return 1u << (exp_bits + man_bits); }
  /// All magnitude (exponent and mantissa) bits of a code.
  CCSIM_HD constexpr uint32_t magnitude_mask() const { return sign_mask() - 1u; }
  /// The all-ones exponent field, shifted into place.
  CCSIM_HD constexpr uint32_t exponent_mask() const { return ((1u << exp_bits) - 1u) << man_bits; }
  /// Magnitude code of the largest finite value.
  CCSIM_HD constexpr uint32_t max_finite_code() const {
    return specials == MinifloatSpecials::kIeee      ? exponent_mask() - 1u
           : specials == MinifloatSpecials::kNanOnly ? magnitude_mask() - 1u
                                                     : magnitude_mask();
  }
  /// Unbiased exponent of the smallest normal value (1 - bias).
  CCSIM_HD constexpr int emin() const { return 1 - bias; }
  /// Unbiased exponent of the largest finite value ("emax" of the OCP MX element tables).
  CCSIM_HD constexpr int emax() const { return static_cast<int>(max_finite_code() >> man_bits) - bias; }
  /// Largest finite value.
  CCSIM_HD constexpr float max_finite() const {
    const uint32_t m = max_finite_code() & ((1u << man_bits) - 1u);
    return static_cast<float>((1u << man_bits) + m) * pow2(emax() - man_bits);
  }
  /// Smallest positive normal value, 2^emin.
  CCSIM_HD constexpr float min_normal() const { return pow2(emin()); }
  /// Smallest positive subnormal value, 2^(emin - man_bits).
  CCSIM_HD constexpr float min_subnormal() const { return pow2(emin() - man_bits); }
  /// True when `code` (bits above bits() ignored) is a NaN of this format.
  CCSIM_HD constexpr bool is_nan(uint32_t code) const {
    const uint32_t mag = code & magnitude_mask();
    if (specials == MinifloatSpecials::kIeee) return mag > exponent_mask();
    return specials == MinifloatSpecials::kNanOnly && mag == magnitude_mask();
  }
  /// True when `code` is ±inf (only kIeee formats have infinities).
  CCSIM_HD constexpr bool is_inf(uint32_t code) const {
    return specials == MinifloatSpecials::kIeee && (code & magnitude_mask()) == exponent_mask();
  }

  /// 2^e for |e| < 126, exact (constexpr; used only on the descriptor's constants).
  CCSIM_HD static constexpr float pow2(int e) {
    float v = 1.0f;
    for (; e > 0; --e) v *= 2.0f;
    for (; e < 0; ++e) v *= 0.5f;
    return v;
  }
};

/// The formats ccsim implements, for code (e.g. CUDA kernels) that selects one by value.
enum class MinifloatKind : uint8_t { kFp16, kFp8E4M3, kFp8E5M2, kFp6E3M2, kFp6E2M3, kFp4E2M1 };

/// Descriptor of a format kind. Usable in device code, where the namespace-scope constants
/// below (host variables of class type) are not.
CCSIM_HD constexpr MinifloatFormat minifloat_format(MinifloatKind kind) {
  switch (kind) {
    case MinifloatKind::kFp16: return {5, 10, 15, MinifloatSpecials::kIeee};
    case MinifloatKind::kFp8E4M3: return {4, 3, 7, MinifloatSpecials::kNanOnly};
    case MinifloatKind::kFp8E5M2: return {5, 2, 15, MinifloatSpecials::kIeee};
    case MinifloatKind::kFp6E3M2: return {3, 2, 3, MinifloatSpecials::kFinite};
    case MinifloatKind::kFp6E2M3: return {2, 3, 1, MinifloatSpecials::kFinite};
    case MinifloatKind::kFp4E2M1: return {2, 1, 1, MinifloatSpecials::kFinite};
  }
  return {};
}

/// IEEE binary16.
inline constexpr MinifloatFormat kFp16 = minifloat_format(MinifloatKind::kFp16);
/// OCP FP8 E4M3 (MXFP8, FP8-LM): no infinities, NaN = S.1111.111, max 448.
inline constexpr MinifloatFormat kFp8E4M3 = minifloat_format(MinifloatKind::kFp8E4M3);
/// OCP FP8 E5M2: IEEE-like with ±inf and NaN, max 57344.
inline constexpr MinifloatFormat kFp8E5M2 = minifloat_format(MinifloatKind::kFp8E5M2);
/// OCP FP6 E3M2 (MXFP6): no special values, max 28.
inline constexpr MinifloatFormat kFp6E3M2 = minifloat_format(MinifloatKind::kFp6E3M2);
/// OCP FP6 E2M3 (MXFP6): no special values, max 7.5.
inline constexpr MinifloatFormat kFp6E2M3 = minifloat_format(MinifloatKind::kFp6E2M3);
/// OCP FP4 E2M1 (MXFP4): no special values, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline constexpr MinifloatFormat kFp4E2M1 = minifloat_format(MinifloatKind::kFp4E2M1);

static_assert(kFp16.max_finite() == 65504.0f && kFp16.emax() == 15);
static_assert(kFp8E4M3.max_finite() == 448.0f && kFp8E4M3.emax() == 8);
static_assert(kFp8E5M2.max_finite() == 57344.0f && kFp8E5M2.emax() == 15);
static_assert(kFp6E3M2.max_finite() == 28.0f && kFp6E3M2.emax() == 4);
static_assert(kFp6E2M3.max_finite() == 7.5f && kFp6E2M3.emax() == 2);
static_assert(kFp4E2M1.max_finite() == 6.0f && kFp4E2M1.emax() == 2);

namespace detail {

/// Code of `x` in `f`; `stochastic` selects the rounding (`u` is ignored for nearest).
CCSIM_HD uint16_t minifloat_encode_impl(float x, const MinifloatFormat& f, bool stochastic, float u) {
  const uint32_t ux = float_to_bits(x);
  const uint32_t a = ux & 0x7FFFFFFFu;
  const uint32_t sign = (ux >> 31) != 0u ? f.sign_mask() : 0u;
  const uint32_t man = f.man_bits;
  if (a > 0x7F800000u) {  // NaN
    if (f.specials == MinifloatSpecials::kIeee)
      return static_cast<uint16_t>(sign | f.exponent_mask() | (1u << (man - 1)));
    if (f.specials == MinifloatSpecials::kNanOnly) return static_cast<uint16_t>(sign | f.magnitude_mask());
    return static_cast<uint16_t>(f.max_finite_code());
  }
  if (a == 0x7F800000u) {  // ±inf
    if (f.specials == MinifloatSpecials::kIeee) return static_cast<uint16_t>(sign | f.exponent_mask());
    if (f.specials == MinifloatSpecials::kNanOnly) return static_cast<uint16_t>(sign | f.magnitude_mask());
    return static_cast<uint16_t>(sign | f.max_finite_code());
  }
  // |x| = sig * 2^lsb_exp exactly; te is the exponent of the target binade (the subnormal range
  // shares the exponent emin), so the target quantum is 2^(te - man).
  const uint32_t e32 = a >> 23;
  uint64_t sig;
  int lsb_exp, te;
  if (e32 == 0) {  // fp32 subnormal (or zero): far below emin of any format here
    sig = a;
    lsb_exp = -149;
    te = f.emin();
  } else {
    sig = (a & 0x7FFFFFu) | 0x800000u;
    lsb_exp = static_cast<int>(e32) - 150;
    const int e = static_cast<int>(e32) - 127;
    if (e > f.emax()) return static_cast<uint16_t>(sign | f.max_finite_code());  // >= 2^(emax+1)
    te = e > f.emin() ? e : f.emin();
  }
  // Quotient and remainder of |x| by the quantum; sh > 0 for every valid format.
  const int sh = te - static_cast<int>(man) - lsb_exp;
  const uint64_t k = sh >= 64 ? 0u : sig >> sh;
  const uint64_t rem = sh >= 64 ? sig : sig & ((uint64_t{1} << sh) - 1u);
  bool up;
  if (stochastic) {
    // rem < 2^24 and 0 < sh <= 149, so rem * 2^-sh is exact in fp32.
    const float frac = static_cast<float>(rem) * exact_pow2(-sh);
    up = u < frac;
  } else {
    const uint64_t half = sh >= 64 ? ~uint64_t{0} : uint64_t{1} << (sh - 1);
    up = rem > half || (rem == half && (k & 1u) != 0u);
  }
  // Codes are monotone in magnitude: a mantissa carry moves into the exponent field naturally.
  uint32_t mag = (static_cast<uint32_t>(te + f.bias - 1) << man) + static_cast<uint32_t>(k) + (up ? 1u : 0u);
  if (mag > f.max_finite_code()) mag = f.max_finite_code();
  return static_cast<uint16_t>(sign | mag);
}

}  // namespace detail

/// Code of `x` in format `f`, rounded to nearest, ties to even, saturating (see the file comment
/// for zeros, infinities and NaN).
CCSIM_HD uint16_t minifloat_encode_rne(float x, const MinifloatFormat& f) {
  return detail::minifloat_encode_impl(x, f, false, 0.0f);
}

/// Code of `x` in format `f`, rounded stochastically: the magnitude rounds up to the next
/// representable value iff `u` < the fractional position of |x| between its two neighbours.
/// `u` in [0, 1) should be uniform (e.g. uniform_at()); then E[decode] = x for |x| <= max finite.
/// Values already representable encode exactly whatever `u`.
CCSIM_HD uint16_t minifloat_encode_stochastic(float x, const MinifloatFormat& f, float u) {
  return detail::minifloat_encode_impl(x, f, true, u);
}

/// Code of `x` with the given rounding; `u` is used only by Rounding::kStochastic.
CCSIM_HD uint16_t minifloat_encode(float x, const MinifloatFormat& f, Rounding rounding, float u) {
  return detail::minifloat_encode_impl(x, f, rounding == Rounding::kStochastic, u);
}

/// Value of `code` in format `f` (exact); bits above f.bits() are ignored. NaN codes decode to a
/// quiet fp32 NaN with the code's sign, infinities to ±inf, -0 to -0.0f.
CCSIM_HD float minifloat_decode(uint32_t code, const MinifloatFormat& f) {
  const uint32_t sign = (code & f.sign_mask()) != 0u ? 0x80000000u : 0u;
  const uint32_t mag = code & f.magnitude_mask();
  if (f.is_nan(mag)) return bits_to_float(sign | 0x7FC00000u);
  if (f.is_inf(mag)) return bits_to_float(sign | 0x7F800000u);
  const uint32_t ef = mag >> f.man_bits, mf = mag & ((1u << f.man_bits) - 1u);
  if (ef == 0) {
    // mf * 2^(emin - man) is exact (the factor is a normal fp32 power of two).
    const float v = static_cast<float>(mf) * exact_pow2(f.emin() - f.man_bits);
    return bits_to_float(sign | float_to_bits(v));
  }
  const uint32_t e32 = static_cast<uint32_t>(static_cast<int>(ef) - f.bias + 127);
  return bits_to_float(sign | (e32 << 23) | (mf << (23 - f.man_bits)));
}

// --- OCP MX shared scales ------------------------------------------------------------------------

/// The E8M0 NaN code.
inline constexpr uint8_t kE8M0Nan = 0xFF;

/// Value of an OCP E8M0 scale code: 2^(code - 127) (2^-127 is an fp32 subnormal, exact);
/// kE8M0Nan decodes to NaN. E8M0 has no sign and no zero.
CCSIM_HD float e8m0_to_float(uint8_t code) {
  if (code == kE8M0Nan) return bits_to_float(0x7FC00000u);
  return exact_pow2(static_cast<int>(code) - 127);
}

/// floor(log2(|x|)) for finite nonzero x, exact (fp32 subnormals included: -149..127).
CCSIM_HD int floor_log2(float x) {
  const uint32_t a = float_to_bits(x) & 0x7FFFFFFFu;
  if ((a >> 23) != 0u) return static_cast<int>(a >> 23) - 127;
  // Subnormal: scaling by 2^24 is exact and lands in the normal range.
  const uint32_t b = float_to_bits(bits_to_float(a) * 16777216.0f);
  return static_cast<int>(b >> 23) - 127 - 24;
}

/// The E8M0 scale code of a block whose largest magnitude is `amax`, per the OCP MX v1.0
/// conversion: shared_exp = floor(log2(amax)) - elem.emax(), clamped below at -127 (and NaN
/// above 127, unreachable from fp32). amax == 0 (an all-zero block) gives 2^-127, the smallest
/// scale; a NaN or infinite amax gives kE8M0Nan. The sign of `amax` is ignored.
/// @post for finite amax > 0 without clamping, amax / scale lies in [2^emax, 2^(emax+1)): values
///       above elem.max_finite() saturate when encoded, as the spec prescribes.
CCSIM_HD uint8_t e8m0_scale_for_amax(float amax, const MinifloatFormat& elem) {
  const uint32_t a = float_to_bits(amax) & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return kE8M0Nan;
  if (a == 0u) return 0;
  int shared_exp = floor_log2(amax) - elem.emax();
  if (shared_exp < -127) shared_exp = -127;
  if (shared_exp > 127) return kE8M0Nan;
  return static_cast<uint8_t>(shared_exp + 127);
}

/// A BF16 block scale (DynamiQ's choice for MX baselines): the smallest positive BF16 value X
/// such that fl(amax / X) <= elem.max_finite(), so no element of the block saturates. Returns
/// BF16 bits (decode with bf16_to_float()). amax == 0 gives 1.0 (every element codes as zero);
/// a NaN or infinite amax gives the BF16 quiet NaN 0x7FC0. The sign of `amax` is ignored.
CCSIM_HD uint16_t bf16_scale_for_amax(float amax, const MinifloatFormat& elem) {
  const uint32_t abits = float_to_bits(amax) & 0x7FFFFFFFu;
  if (abits >= 0x7F800000u) return 0x7FC0u;  // NaN or inf
  if (abits == 0u) return 0x3F80u;
  const float a = bits_to_float(abits);
  const float max = elem.max_finite();
  // Round amax / max up to BF16, then step up while rounding of either division lets the ratio
  // exceed max (at most a step or two; the quotient stays far below the BF16 maximum).
  uint32_t q = float_to_bits(a / max);
  if ((q & 0xFFFFu) != 0u) q = (q & 0xFFFF0000u) + 0x10000u;
  while (a / bits_to_float(q) > max) q += 0x10000u;
  // Then step down while a smaller BF16 still keeps the ratio within range.
  while (q > 0x10000u && a / bits_to_float(q - 0x10000u) <= max) q -= 0x10000u;
  return static_cast<uint16_t>(q >> 16);
}

}  // namespace ccsim::kern
