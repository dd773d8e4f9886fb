#pragma once
/// \file
/// OCP Microscaling (MX v1.0) block quantization of fp32 chunks: MXFP8 (E4M3 elements), MXFP6
/// (E3M2) and MXFP4 (E2M1), blocks of `block` elements sharing one scale X, which is either a BF16
/// value (DynamiQ's MX baselines: the smallest BF16 with amax / X <= the element maximum, so no
/// element saturates) or the spec's E8M0 power of two (shared_exp = floor(log2 amax) - emax, so the
/// elements nearest amax may saturate, as the spec prescribes). Element and scale rules are those
/// of kernels/quant/minifloat.hpp.
///
/// Element i of a block with scale X is coded P_i = minifloat_encode(x_i / X) (round to nearest
/// even, or stochastic with u = uniform_at(key, index_base + i)) and decoded
/// minifloat_decode(P_i) * X. The product is exact unless it leaves the fp32 range: a finite code
/// whose product with a finite scale would exceed FLT_MAX (a block whose maximum is within a BF16
/// rounding of FLT_MAX) decodes to ±FLT_MAX instead of ±inf.
///
/// The block maximum propagates NaN: a block holding a NaN or an infinity gets the NaN scale
/// (BF16 0x7FC0 or E8M0 0xFF) and decodes to NaN throughout; a zero block gets scale 1.0 (BF16) or
/// 2^-127 (E8M0) and decodes to zeros with their signs.
///
/// Wire layout of a chunk of `count` elements (blocks start at the chunk's element 0; the last may
/// be short):
///   [ceil(count / block) scales: BF16 bits as 2 bytes little-endian, or 1 E8M0 byte |
///    count element codes of 8 / 6 / 4 bits packed as kernels/pack/bitpack.hpp]
/// i.e. scale_bytes * ceil(count / block) + ceil(count * element_bits / 8) bytes.
///
/// Thread safety: element functions are pure; array functions write only their outputs and their
/// results (overflow counts included) do not depend on the thread count.

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// The type of an MX block's shared scale.
enum class MxScaleKind : uint8_t {
  kBf16,  ///< BF16, the smallest value with amax / X <= element max (never saturates)
  kE8M0,  ///< OCP E8M0 power of two (the spec's choice; may saturate the block maximum)
};

/// The parameters of an MX quantizer.
struct MxFormat {
  MinifloatKind element = MinifloatKind::kFp8E4M3;  ///< E4M3 (MXFP8), E3M2 (MXFP6) or E2M1 (MXFP4)
  uint32_t block = 32;                              ///< elements per shared scale
  MxScaleKind scale = MxScaleKind::kBf16;
  Rounding rounding = Rounding::kNearest;  ///< nearest (ties to even, saturating) or stochastic

  /// The element format's descriptor.
  CCSIM_HD constexpr MinifloatFormat element_format() const { return minifloat_format(element); }
  /// Bits of one element code.
  CCSIM_HD constexpr uint32_t element_bits() const { return element_format().bits(); }
  /// Bytes of one block scale.
  CCSIM_HD constexpr uint32_t scale_bytes() const { return scale == MxScaleKind::kBf16 ? 2u : 1u; }
};

/// Bytes of one encoded chunk of `count` elements.
CCSIM_HD constexpr uint64_t mx_bytes(uint64_t count, const MxFormat& f) {
  return f.scale_bytes() * ((count + f.block - 1) / f.block) + packed_bytes(count, f.element_bits());
}

/// The scale code (BF16 bits or E8M0 byte) of a block whose largest magnitude is `amax`.
CCSIM_HD uint32_t mx_scale_code(float amax, const MxFormat& f) {
  return f.scale == MxScaleKind::kBf16 ? bf16_scale_for_amax(amax, f.element_format())
                                       : e8m0_scale_for_amax(amax, f.element_format());
}

/// The value of scale code `code` (exact).
CCSIM_HD float mx_scale_value(uint32_t code, const MxFormat& f) {
  return f.scale == MxScaleKind::kBf16 ? bf16_to_float(static_cast<uint16_t>(code))
                                       : e8m0_to_float(static_cast<uint8_t>(code));
}

/// The element code of `x` in a block of scale `scale`; `u` in [0, 1) is used by stochastic
/// rounding only.
CCSIM_HD uint32_t mx_quantize(float x, float scale, const MxFormat& f, float u) {
  return minifloat_encode(x / scale, f.element_format(), f.rounding, u);
}

/// The value of element code `code` in a block of scale `scale` (see the file comment for the
/// saturation at FLT_MAX).
CCSIM_HD float mx_dequantize(uint32_t code, float scale, const MxFormat& f) {
  const float v = minifloat_decode(code, f.element_format()) * scale;
  return (fabsf(v) == INFINITY && fabsf(scale) < INFINITY) ? copysignf(FLT_MAX, v) : v;
}

/// One step of a block-maximum reduction that propagates NaN: max(m, |x|), NaN if either is NaN.
CCSIM_HD float mx_amax_step(float m, float x) {
  const float a = fabsf(x);
  return (a > m || a != a) ? a : m;
}

/// Encodes x[0, count) into `out` (mx_bytes() bytes, fully overwritten). Returns how many inputs
/// x_i fail |x_i| <= range (NaN and, for a finite range, ±inf included): the saturation count a
/// caller's global scaling adapts to (pass the element maximum).
/// REQUIRES (checked): block >= 1 and block * element_bits a multiple of 8 (blocks start on a byte).
uint64_t mx_encode(const float* x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                   float range, uint8_t* out);
/// Encodes x[0, count) as mx_encode() does, but block b uses the given scale code scale_codes[b]
/// (agreed beforehand, e.g. by a metadata phase) instead of one chosen from its own maximum; the
/// codes are still written to the message. Returns how many elements saturated: |x_i| / scale
/// beyond the element maximum, or non-finite.
uint64_t mx_encode_with_scales(const float* x, uint64_t count, const MxFormat& f, const uint32_t* scale_codes,
                               const RngKey& key, uint64_t index_base, uint8_t* out);
/// out[i] = decoded element i (overwrites).
void mx_decode(const uint8_t* in, uint64_t count, const MxFormat& f, float* out);
/// acc[i] += decoded element i, in fp32 (a NaN acc[i] keeps its own NaN, quieted).
void mx_decode_accumulate(const uint8_t* in, uint64_t count, const MxFormat& f, float* acc);
/// The fused hop, a block group at a time: acc += the decode of `in` (as mx_decode_accumulate()),
/// then `out` = the encode of acc, with the scale codes `scale_codes` as mx_encode_with_scales()
/// or, when `scale_codes` is null, with each block's own scale and the count against `range` as
/// mx_encode(); returns that encoder's count. The same bits as the two calls one after the other.
/// REQUIRES: as mx_encode(); `out` does not overlap `acc`, and overlaps `in` only if equal to it.
uint64_t mx_decode_accumulate_encode(const uint8_t* in, uint64_t count, const MxFormat& f, float* acc,
                                     const uint32_t* scale_codes, const RngKey& key, uint64_t index_base, float range,
                                     uint8_t* out);

}  // namespace ccsim::kern
