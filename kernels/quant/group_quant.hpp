#pragma once
/// \file
/// Group-wise (block-wise) symmetric quantization with one fp32 scale per group: the element
/// quantizer of EQuARX (int8, FP8 E4M3, FP8 E5M2; block 64) and of SDP4Bit / ZeRO++ (int4 or
/// int8, group 128 for gradients and 2048 for weights, optionally with SDP4Bit's 32x32 Hadamard
/// smoother).
///
/// Scale: the group's largest magnitude m = max |x_i| (SDP4Bit §2.2's s), sent as fp32 (negated
/// only for the Hadamard fallback described below). Sending m rather than m / levels keeps
/// denormal groups finite (as block_int8.hpp does).
///
/// Elements of a group with maximum m > 0:
///   - int, `bits` b in [2, 8], L = 2^(b-1) - 1 levels each side (b = 4: L = 7; b = 8: L = 127):
///       v = (x / m) * L, q = round(v) clamped to [-L, L], sent as b-bit two's complement;
///       decode (q / L) * m. This is SDP4Bit's x_int = round(x / s * (2^(k-1) - 1)); with b = 8 it
///       is int8_quantize() of block_int8.hpp bit for bit.
///   - FP8 (E4M3 or E5M2, b = 8): v = (x / m) * F with F the format's largest finite value
///       (448 or 57344), q = minifloat code of v; decode (value(q) / F) * m. Symmetric, as EQuARX's
///       FP8 modes: the block maximum maps onto the format's maximum.
///   A group with m == 0 (or a NaN maximum) codes every element as 0.
/// Rounding: nearest (ties to even; rintf or minifloat_encode_rne) or stochastic (up with
/// probability equal to the fractional position between the two neighbouring codes, drawn as
/// uniform_at(key, index_base + i)), which makes the decode unbiased.
///
/// Hadamard smoother (SDP4Bit TLq-HS): with `hadamard`, every complete block of 32 elements of the
/// chunk (elements [32j, 32j + 32)) is replaced by H_32 · block (orthonormal, as
/// kernels/transform/hadamard.hpp: butterflies, then one multiply by hadamard_scale(32)) before the
/// group maxima and codes are computed; the decoder dequantizes a block and applies H_32 again
/// (H·H = I up to rounding), before writing or accumulating. The group must be a multiple of 32,
/// so blocks never straddle groups. The last count % 32 elements of a chunk (an incomplete block)
/// are quantized untransformed: the wire never carries padding. A group whose largest input
/// magnitude exceeds kGroupHadamardMaxInput = 2^116 (≈ 8.3e34; beyond it the unnormalized
/// butterflies of the encoder or decoder could overflow to inf) is quantized untransformed and
/// flagged by storing its scale negated (a group maximum is otherwise never negative); decoders
/// then skip the inverse transform. Gradients never come near that bound.
///
/// Wire layout of a chunk of `count` elements:
///   [ceil(count / group) fp32 group maxima | count codes of `bits` bits packed as
///    kernels/pack/bitpack.hpp (8-bit codes are plain bytes)]
/// i.e. 4 * ceil(count / group) + ceil(count * bits / 8) bytes. Groups start at the chunk's
/// element 0; the last may be short.
///
/// Thread safety: element functions are pure; array functions write only their output and their
/// results do not depend on the thread count.

#include <cmath>
#include <cstdint>

#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// What a group's elements are coded as.
enum class GroupElement : uint8_t {
  kInt,   ///< symmetric integers with 2^(bits-1) - 1 levels each side
  kE4M3,  ///< OCP FP8 E4M3 codes (bits == 8)
  kE5M2,  ///< OCP FP8 E5M2 codes (bits == 8)
};

/// Size of the Hadamard smoother's blocks.
inline constexpr uint32_t kGroupHadamardBlock = 32;

/// Largest group input magnitude the Hadamard smoother transforms (2^116): the butterflies then
/// stay below 32 · √32 · 2^116 < FLT_MAX in the encoder and the decoder.
inline constexpr float kGroupHadamardMaxInput = 0x1p116f;

/// The parameters of a group quantizer.
struct GroupQuantFormat {
  GroupElement element = GroupElement::kInt;
  uint32_t bits = 8;    ///< code width: 2..8 for kInt, 8 for FP8
  uint32_t group = 64;  ///< elements per fp32 scale
  Rounding rounding = Rounding::kNearest;
  bool hadamard = false;  ///< 32-point Hadamard smoother (group a multiple of 32)

  /// Integer levels each side, 2^(bits-1) - 1 (kInt only).
  CCSIM_HD constexpr uint32_t int_levels() const { return (1u << (bits - 1u)) - 1u; }
  /// The minifloat format of FP8 elements (unused for kInt).
  CCSIM_HD constexpr MinifloatFormat fp8_format() const {
    return minifloat_format(element == GroupElement::kE5M2 ? MinifloatKind::kFp8E5M2 : MinifloatKind::kFp8E4M3);
  }
};

/// Bytes of one encoded chunk.
CCSIM_HD constexpr uint64_t group_quant_bytes(uint64_t count, const GroupQuantFormat& f) {
  return 4 * ((count + f.group - 1) / f.group) + packed_bytes(count, f.bits);
}

/// The `f.bits`-bit code of `x` in a group with maximum magnitude `maxabs`; `u` in [0, 1) is used
/// by stochastic rounding only.
CCSIM_HD uint32_t group_quantize(float x, float maxabs, const GroupQuantFormat& f, float u) {
  if (!(maxabs > 0.0f)) return 0;
  if (f.element == GroupElement::kInt) {
    const float levels = static_cast<float>(f.int_levels());
    const float v = (x / maxabs) * levels;
    float q;
    if (f.rounding == Rounding::kStochastic) {
      const float lo = floorf(v);
      q = (u < v - lo) ? lo + 1.0f : lo;
    } else {
      q = rintf(v);
    }
    q = fminf(fmaxf(q, -levels), levels);
    return static_cast<uint32_t>(static_cast<int32_t>(q)) & ((1u << f.bits) - 1u);
  }
  const MinifloatFormat fmt = f.fp8_format();
  return minifloat_encode((x / maxabs) * fmt.max_finite(), fmt, f.rounding, u);
}

/// Value of `code` in a group with maximum magnitude `maxabs`.
CCSIM_HD float group_dequantize(uint32_t code, float maxabs, const GroupQuantFormat& f) {
  if (f.element == GroupElement::kInt) {
    const uint32_t shift = 32u - f.bits;
    const int32_t q = static_cast<int32_t>(code << shift) >> shift;  // sign extension
    return (static_cast<float>(q) / static_cast<float>(f.int_levels())) * maxabs;
  }
  const MinifloatFormat fmt = f.fp8_format();
  return (minifloat_decode(code, fmt) / fmt.max_finite()) * maxabs;
}

/// Encodes x[0, count) into `out` (group_quant_bytes() bytes, fully overwritten).
/// REQUIRES (checked): kInt with 2 <= bits <= 8, or FP8 with bits == 8; group * bits a multiple of
/// 8 (groups start on a byte); with `hadamard`, group a multiple of 32.
void group_quant_encode(const float* x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                        uint64_t index_base, uint8_t* out);
/// out[i] = decoded element i (overwrites).
void group_quant_decode(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* out);
/// acc[i] += decoded element i, in fp32.
void group_quant_decode_accumulate(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* acc);
/// The fused intermediate hop: group_quant_decode_accumulate(in, count, in_format, acc) then
/// group_quant_encode(acc, count, out_format, key, index_base, out), each group decoded, summed and
/// re-encoded while it is in cache when the two formats share the group size. The same bytes and
/// sums as the two calls. `out` must not alias `in` or `acc`.
void group_quant_decode_accumulate_encode(const uint8_t* in, uint64_t count, const GroupQuantFormat& in_format,
                                          float* acc, const GroupQuantFormat& out_format, const RngKey& key,
                                          uint64_t index_base, uint8_t* out);

}  // namespace ccsim::kern
