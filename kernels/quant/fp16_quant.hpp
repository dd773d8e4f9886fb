#pragma once
/// \file
/// IEEE binary16 payloads: the CPU kernels that encode an fp32 chunk to FP16 (round to nearest
/// even, saturating: a finite input never becomes inf), decode it, decode-accumulate it into an
/// fp32 buffer, and the fused hop (decode-accumulate then encode in one pass). The element
/// conversions are minifloat_encode_rne() / minifloat_decode() with kFp16 (the CPU rows use their
/// branch-free forms, minifloat_lanes.hpp), so a CUDA kernel calling them produces the same bits.
///
/// Wire layout of `count` elements: count little-endian uint16 FP16 codes (2 * count bytes).
///
/// Thread safety: functions write only their output; results do not depend on the thread count.

#include <cstdint>

#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// FP16 code of `x`: round to nearest even; finite values beyond ±65504 saturate to ±65504,
/// ±inf and NaN stay non-finite (see minifloat.hpp).
CCSIM_HD uint16_t float_to_fp16_rne(float x) {
  return minifloat_encode_rne(x, minifloat_format(MinifloatKind::kFp16));  // kFp16 is host-only
}

/// Value of an FP16 code (exact).
CCSIM_HD float fp16_to_float(uint16_t h) { return minifloat_decode(h, minifloat_format(MinifloatKind::kFp16)); }

/// out[i] = float_to_fp16_rne(x[i]) for i < count.
void fp16_encode(const float* x, uint64_t count, uint16_t* out);
/// out[i] = fp16_to_float(in[i]).
void fp16_decode(const uint16_t* in, uint64_t count, float* out);
/// acc[i] += fp16_to_float(in[i]), the sum in fp32 (a NaN acc[i] keeps its own NaN, quieted).
void fp16_decode_accumulate(const uint16_t* in, uint64_t count, float* acc);
/// The fused hop in one pass: acc[i] += fp16_to_float(in[i]), then out[i] =
/// float_to_fp16_rne(acc[i]) (the same bits as fp16_decode_accumulate() then fp16_encode()).
/// REQUIRES: `out` overlaps neither `in` nor `acc`.
void fp16_decode_accumulate_encode(const uint16_t* in, uint64_t count, float* acc, uint16_t* out);

}  // namespace ccsim::kern
