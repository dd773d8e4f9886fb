#pragma once
/// \file
/// BF16 element conversions (host and device) and the CPU kernels that encode an fp32 chunk to
/// BF16, decode it, and decode-accumulate it into an fp32 buffer.

#include <cstdint>
#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {

/// fp32 -> bf16 with round-to-nearest-even; NaN stays a (quiet) NaN, ±inf stays ±inf.
CCSIM_HD uint16_t float_to_bf16_rne(float x) {
  uint32_t u = float_to_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// float_to_bf16_rne(), except that a finite x whose rounding overflows to ±inf gives ±the largest
/// finite BF16 (0x7F7F with x's sign).
CCSIM_HD uint16_t float_to_bf16_saturating(float x) {
  const uint16_t h = float_to_bf16_rne(x);
  const bool finite = (float_to_bits(x) & 0x7FFFFFFFu) < 0x7F800000u;
  return (h & 0x7FFFu) == 0x7F80u && finite ? static_cast<uint16_t>((h & 0x8000u) | 0x7F7Fu) : h;
}

/// bf16 -> fp32 (exact).
CCSIM_HD float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

/// Writes `count` bf16 values (little-endian uint16) of `x` to `out`.
void bf16_encode(const float* x, uint64_t count, uint16_t* out);
/// out[i] = float_to_bf16_saturating(x[i]) for i < count, one thread (a vectorized row).
void bf16_encode_saturating_row(const float* x, uint64_t count, uint16_t* out);
/// out[i] = float(in[i]).
void bf16_decode(const uint16_t* in, uint64_t count, float* out);
/// acc[i] += float(in[i]), the sum in fp32.
void bf16_decode_accumulate(const uint16_t* in, uint64_t count, float* acc);

}  // namespace ccsim::kern
