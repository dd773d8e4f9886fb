#pragma once
/// \file
/// Branch-free forms of minifloat_encode_rne(), minifloat_encode_stochastic() and
/// minifloat_decode() (kernels/quant/minifloat.hpp) for one format fixed at compile time, written
/// with 32-bit integer lanes, selects and no calls, so that a CPU row looping over them
/// vectorizes. Host only (the CUDA kernels call the element functions themselves).
///
/// Contract: for every fp32 bit pattern x (NaN payloads, signed zeros, fp32 subnormals, infinities
/// included) and every u, minifloat_encode_lane<F, false>(x, u) == minifloat_encode_rne(x, F) and
/// minifloat_encode_lane<F, true>(x, u) == minifloat_encode_stochastic(x, F, u); for every code c
/// below 2^F.bits(), the bits of minifloat_decode_lane<F>(c) equal those of minifloat_decode(c, F).
///
/// Why the encoder is the same function: the scalar reference treats an fp32 subnormal as
/// sig = |x| bits with lsb exponent -149, which is the normal formula with the exponent field read
/// as 1 and no hidden bit; its target exponent is then emin (every format here has emin > -126).
/// The quotient shift sh = te - man - lsb_exp is at least 23 - man > 0; once sh >= 24 the quotient
/// is 0 and the remainder is the whole significand (< 2^24), so clamping the shift to 31 changes
/// neither, and the nearest-rounding half point 2^(sh - 1) >= 2^23 only decides at sh = 24. The
/// stochastic fraction rem * 2^-sh is computed with the unclamped sh (at most 149), exactly as the
/// reference does. A finite input beyond the largest binade gives a magnitude above the largest
/// finite code, which the final clamp turns into that code, as the reference's early return does.
/// Decoding never multiplies an fp32 subnormal: subnormal codes are mf * 2^(emin - man), a normal
/// fp32 product, as in the reference.

#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// minifloat_encode_rne(x, kFp8E4M3) in fewer lane operations than the general form below:
///  - |x| >= 2^-6 (a normal code): the fp32 pattern rounded to 3 mantissa bits, ties to even (add
///    0x7FFFF and the kept lsb; a carry moves into the exponent), its exponent rebiased from 127 to
///    7 (subtract 120 << 3), and saturated at 0x7E (448), which also covers |x| >= 2^9;
///  - |x| < 2^-6 (a subnormal code, quantum 2^-9): k = |x| * 2^9 (exact) rounded to an integer,
///    ties to even, by adding 2^23 and reading the low bits; the code is k, and k = 8 is the
///    smallest normal's code, as the reference's carry gives (fp32 subnormals give 0);
///  - ±inf and NaN: S.1111.111, the format's NaN, with x's sign.
[[gnu::always_inline]] inline uint32_t e4m3_encode_nearest_lane(float x) {
  const uint32_t ux = float_to_bits(x);
  const uint32_t a = ux & 0x7FFFFFFFu;
  const uint32_t rounded = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
  const uint32_t normal = rounded - (120u << 3) < 0x7Eu ? rounded - (120u << 3) : 0x7Eu;
  const uint32_t sub = float_to_bits(bits_to_float(a) * 512.0f + 8388608.0f) - 0x4B000000u;
  uint32_t mag = a < 0x3C800000u ? sub : normal;
  mag = a >= 0x7F800000u ? 0x7Fu : mag;
  return ((ux >> 31) << 7) | mag;
}

/// minifloat_encode_{rne,stochastic}(x, F[, u]) without calls or branches (see the file comment).
template <MinifloatFormat F, bool kStochastic>
[[gnu::always_inline]] inline uint32_t minifloat_encode_lane(float x, float u) {
  if constexpr (!kStochastic && F.exp_bits == 4 && F.man_bits == 3 && F.bias == 7 &&
                F.specials == MinifloatSpecials::kNanOnly) {
    return e4m3_encode_nearest_lane(x);
  }
  constexpr int32_t man = F.man_bits;
  constexpr int32_t emin_biased = F.emin() + 127;  // target binade floor, as an fp32 exponent field
  constexpr uint32_t max_code = F.max_finite_code();
  const uint32_t ux = float_to_bits(x);
  const uint32_t a = ux & 0x7FFFFFFFu;
  const uint32_t sign = (ux >> 31) << (F.exp_bits + F.man_bits);
  const int32_t e32 = static_cast<int32_t>(a >> 23);
  const int32_t e_field = e32 > 0 ? e32 : 1;
  const uint32_t sig = (a & 0x7FFFFFu) | (e32 > 0 ? 0x800000u : 0u);
  const int32_t te_biased = e_field > emin_biased ? e_field : emin_biased;
  const int32_t sh = te_biased - e_field + (23 - man);  // in [23 - man, 149]
  const int32_t shc = sh < 31 ? sh : 31;
  const uint32_t k = sig >> shc;
  const uint32_t rem = sig & ((1u << shc) - 1u);
  uint32_t up;
  if constexpr (kStochastic) {
    // 2^-sh from its bits: normal for sh <= 126, subnormal above (sh <= 149).
    const uint32_t p_normal = static_cast<uint32_t>(127 - (sh < 126 ? sh : 126)) << 23;
    const uint32_t p_sub = 1u << ((149 - sh) & 31);
    const float frac = static_cast<float>(static_cast<int32_t>(rem)) * bits_to_float(sh <= 126 ? p_normal : p_sub);
    up = u < frac ? 1u : 0u;
  } else {
    const uint32_t half = 1u << (shc - 1);
    up = (rem > half || (rem == half && (k & 1u) != 0u)) ? 1u : 0u;
  }
  uint32_t mag = (static_cast<uint32_t>(te_biased - 127 + F.bias - 1) << man) + k + up;
  mag = mag < max_code ? mag : max_code;
  uint32_t code = sign | mag;
  const bool nan = a > 0x7F800000u;
  const bool special = a >= 0x7F800000u;
  if constexpr (F.specials == MinifloatSpecials::kIeee) {
    const uint32_t payload = nan ? (1u << (man - 1)) : 0u;
    code = special ? (sign | F.exponent_mask() | payload) : code;
  } else if constexpr (F.specials == MinifloatSpecials::kNanOnly) {
    code = special ? (sign | F.magnitude_mask()) : code;
  } else {
    code = nan ? max_code : code;  // ±inf already saturated to ±max above
  }
  return code;
}

/// minifloat_decode(code, F) without calls or branches, for code < 2^F.bits().
template <MinifloatFormat F>
[[gnu::always_inline]] inline float minifloat_decode_lane(uint32_t code) {
  constexpr uint32_t man = F.man_bits;
  const uint32_t sign = (code & F.sign_mask()) != 0u ? 0x80000000u : 0u;
  const uint32_t mag = code & F.magnitude_mask();
  const uint32_t mf = mag & ((1u << man) - 1u);
  const uint32_t normal = (mag << (23 - man)) + (static_cast<uint32_t>(127 - F.bias) << 23);
  constexpr float kSubnormalUnit = MinifloatFormat::pow2(F.emin() - F.man_bits);
  const float sub_value = static_cast<float>(static_cast<int32_t>(mf)) * kSubnormalUnit;
  uint32_t bits = (mag >> man) == 0u ? float_to_bits(sub_value) : normal;
  if constexpr (F.specials == MinifloatSpecials::kIeee) {
    const bool top = (mag >> man) == (1u << F.exp_bits) - 1u;
    bits = top ? (mf != 0u ? 0x7FC00000u : 0x7F800000u) : bits;
  } else if constexpr (F.specials == MinifloatSpecials::kNanOnly) {
    bits = mag == F.magnitude_mask() ? 0x7FC00000u : bits;
  }
  return bits_to_float(sign | bits);
}

/// acc + v with the accumulator as the first operand, NaN payloads included: a NaN accumulator
/// propagates, quieted, even when v is NaN too (x86-64 returns the first operand's NaN). A compiled
/// a + v may take its operands in either order (a vectorized one folds the accumulator's load into
/// the second), which decides only which NaN a NaN + NaN sum carries; this select fixes that
/// choice. Every other result is the IEEE sum.
[[gnu::always_inline]] inline float accumulate_lane(float acc, float v) {
  const float sum = acc + v;
  return acc != acc ? bits_to_float(float_to_bits(acc) | 0x00400000u) : sum;
}

}  // namespace ccsim::kern
