#pragma once
/// \file
/// TFP, Truncation of Floating-Point numbers (AQGB, Fang et al., §4.4 and Eq. 5): an element is
/// sent as the first k bits of its IEEE bit pattern in a base format (sign, every exponent bit,
/// the top k - 1 - E mantissa bits), optionally with random rounding between the truncated value
/// and the value one unit up at bit k.
///
/// Base formats and the widths allowed with them (at least one mantissa bit is kept, so a NaN
/// keeps its quiet bit and the value grid is a floating-point grid, not a coarser exponent grid):
///
///   | base     | W  | E | k range | grid of k bits (E exponent, k-1-E mantissa bits, same bias) |
///   |----------|----|---|---------|--------------------------------------------------------------|
///   | fp32     | 32 | 8 | 10..32  | k = 16 is BF16 by truncation; k = 32 is lossless             |
///   | fp16     | 16 | 5 |  7..16  | the top k bits of IEEE binary16                              |
///   | fp8e4m3  |  8 | 4 |  6..8   | the top k bits of OCP E4M3                                   |
///   | fp8e5m2  |  8 | 5 |  7..8   | the top k bits of OCP E5M2                                   |
///
/// The code of an element is the k-bit pattern itself (sign in bit k-1); it decodes as the base
/// pattern code << (W - k), exactly. Codes are monotone in magnitude, so the pattern one unit up
/// at bit k is the next larger magnitude of the k-bit grid: T̄(x, k) of the paper.
///
/// Encoding (identical on host and device; integer arithmetic decides every rounding):
///   - Truncation (random rounding off), the paper's plain TFP: base fp32 keeps the top k bits of
///     x's own pattern (rounds toward zero). Other bases first convert x to the base format with
///     round-to-nearest-even, saturating (minifloat_encode_rne(), as the paper's "convert to
///     FP16/FP8 first"), then keep the top k bits of that code.
///   - Random rounding (Eq. 5): with T <= |x| < T̄ the neighbouring magnitudes of the k-bit grid,
///     the magnitude rounds up to T̄ iff u < (|x| - T) / (T̄ - T), so E[decode] = x. Eq. 5 keeps T
///     iff rand() <= 1 - frac, the same probability; the form `u < frac` matches
///     minifloat_encode_stochastic(). For bases other than fp32, x is rounded stochastically
///     straight onto the k-bit grid of the base (a minifloat format with E exponent and k-1-E
///     mantissa bits), which is the paper's "convert, then truncate with random rounding" without
///     the bias a nearest conversion to the base would add first.
///   - Saturation: a finite x never encodes as inf or NaN. Random rounding does not round up past
///     the largest finite k-bit value (so E[decode] = x holds for |x| up to that value), and the
///     minifloat bases saturate as minifloat.hpp describes.
///   - ±inf stays ±inf and NaN stays NaN, except in fp8e4m3 below 8 bits, which has no special
///     codes (NaN and inf saturate to the largest magnitude there).
///
/// Worked example (AQGB Fig. 7): x = 3.6, fp32, k = 12. 3.6f = 0x40666666; the 12-bit code is
/// 0x406, i.e. T = 0x40600000 = 3.5 and T̄ = 0x40700000 = 3.75; random rounding gives 3.5 with
/// probability 0.6 and 3.75 with probability 0.4.
///
/// Wire layout of a chunk of `count` elements: the k-bit codes packed as a little-endian bit
/// stream (code i in stream bits [i*k, i*k + k), least significant bit first, stream bit b in bit
/// b % 8 of byte b / 8, zero padding), ceil(count * k / 8) bytes; no metadata. This is the
/// kernels/pack/bitpack.hpp order extended to codes of up to 32 bits.
///
/// Thread safety: element functions are pure; array functions write only their output and their
/// results do not depend on the thread count.

#include <cstdint>

#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// The format whose bit pattern TFP truncates.
enum class TfpBase : uint8_t { kFloat32, kFloat16, kFloat8E4M3, kFloat8E5M2 };

/// A TFP element format: `bits` leading bits of the `base` pattern.
struct TfpFormat {
  TfpBase base = TfpBase::kFloat32;
  uint32_t bits = 16;  ///< k

  /// Width W of the base pattern.
  CCSIM_HD constexpr uint32_t base_bits() const {
    return base == TfpBase::kFloat32 ? 32u : base == TfpBase::kFloat16 ? 16u : 8u;
  }
  /// Exponent bits E of the base.
  CCSIM_HD constexpr uint32_t exponent_bits() const {
    return base == TfpBase::kFloat32 ? 8u : base == TfpBase::kFloat8E4M3 ? 4u : 5u;
  }
  /// Smallest allowed k: sign, E exponent bits and one mantissa bit.
  CCSIM_HD constexpr uint32_t min_bits() const { return exponent_bits() + 2u; }
  /// True when min_bits() <= bits <= base_bits().
  CCSIM_HD constexpr bool valid() const { return bits >= min_bits() && bits <= base_bits(); }
  /// Bits dropped from the base pattern, W - k.
  CCSIM_HD constexpr uint32_t dropped_bits() const { return base_bits() - bits; }
  /// The minifloat descriptor of the base (unused for fp32).
  CCSIM_HD constexpr MinifloatFormat base_format() const {
    return minifloat_format(base == TfpBase::kFloat16      ? MinifloatKind::kFp16
                            : base == TfpBase::kFloat8E4M3 ? MinifloatKind::kFp8E4M3
                                                           : MinifloatKind::kFp8E5M2);
  }
  /// The k-bit grid of a minifloat base as a minifloat format: same exponent field and bias,
  /// k - 1 - E mantissa bits. E4M3 below 8 bits loses its only NaN code and has no specials.
  CCSIM_HD constexpr MinifloatFormat grid_format() const {
    MinifloatFormat g = base_format();
    g.man_bits = static_cast<uint8_t>(bits - 1u - g.exp_bits);
    if (g.specials == MinifloatSpecials::kNanOnly && bits < base_bits()) g.specials = MinifloatSpecials::kFinite;
    return g;
  }
};

/// Bytes of `count` packed codes of `bits` bits (1 <= bits <= 32): ceil(count * bits / 8).
CCSIM_HD constexpr uint64_t tfp_bytes(uint64_t count, uint32_t bits) { return (count * bits + 7) / 8; }

/// The k-bit code of `x` (see the file comment); `u` in [0, 1) is used only when `random_rounding`.
/// REQUIRES: f.valid().
CCSIM_HD uint32_t tfp_encode_element(float x, const TfpFormat& f, bool random_rounding, float u) {
  const uint32_t drop = f.dropped_bits();
  if (f.base != TfpBase::kFloat32) {
    if (random_rounding) return minifloat_encode_stochastic(x, f.grid_format(), u);
    return static_cast<uint32_t>(minifloat_encode_rne(x, f.base_format())) >> drop;
  }
  const uint32_t ux = float_to_bits(x);
  if (drop == 0) return ux;
  const uint32_t code = ux >> drop;
  if (!random_rounding || (ux & 0x7FFFFFFFu) >= 0x7F800000u) return code;  // inf/NaN: plain truncation
  // |x| - T is the dropped remainder times the unit of the lowest dropped bit, and T̄ - T is one
  // unit at bit k, also across a binade boundary; so frac = rem / 2^drop, exact (rem < 2^22).
  const uint32_t rem = ux & ((1u << drop) - 1u);
  const float frac = static_cast<float>(rem) * exact_pow2(-static_cast<int>(drop));
  if (!(u < frac)) return code;
  // The magnitude is below the all-ones exponent, so +1 never reaches the sign bit.
  const uint32_t up = code + 1u;
  if (((up << drop) & 0x7FFFFFFFu) >= 0x7F800000u) return code;  // T̄ = inf: saturate at T
  return up;
}

/// Value of a k-bit code (exact): the base pattern code << (W - k).
/// REQUIRES: f.valid(); bits of `code` above k are zero.
CCSIM_HD float tfp_decode_element(uint32_t code, const TfpFormat& f) {
  if (f.base == TfpBase::kFloat32) return bits_to_float(code << f.dropped_bits());
  return minifloat_decode(code << f.dropped_bits(), f.base_format());
}

/// Encodes x[0, count) into `out` (tfp_bytes(count, f.bits) bytes, fully overwritten). Element i
/// draws uniform_at(key, index_base + i) when `random_rounding`.
/// REQUIRES (checked): f.valid().
void tfp_encode(const float* x, uint64_t count, const TfpFormat& f, bool random_rounding, const RngKey& key,
                uint64_t index_base, uint8_t* out);
/// out[i] = value of code i.
void tfp_decode(const uint8_t* in, uint64_t count, const TfpFormat& f, float* out);
/// acc[i] += value of code i, in fp32.
void tfp_decode_accumulate(const uint8_t* in, uint64_t count, const TfpFormat& f, float* acc);
/// The fused hop: tfp_decode_accumulate(in, ..., acc), then tfp_encode(acc, ..., out), a tile at a
/// time while it is in cache; same sums and bytes.
void tfp_decode_accumulate_encode(const uint8_t* in, uint64_t count, const TfpFormat& f, float* acc,
                                  bool random_rounding, const RngKey& key, uint64_t index_base, uint8_t* out);

}  // namespace ccsim::kern
