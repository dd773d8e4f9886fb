#pragma once
/// \file
/// Block-wise symmetric int8 quantization with one fp32 scale per block.
///
/// Wire layout of a chunk of `count` elements with block size `block`:
///   [ceil(count/block) fp32 block maxima | count int8 codes]
/// Element i of block b is coded q = round(x / max_b * 127) in [-127, 127] and decoded
/// (q / 127) * max_b. With stochastic rounding the code rounds up with probability equal to the
/// fractional part, drawn from Philox at the element's global index, so the decode is unbiased.
/// Using the block maximum (not max/127) as the stored scale keeps denormal blocks finite.

#include <cmath>
#include <cstdint>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// How a real value is rounded to a code.
enum class Rounding : uint8_t {
  kNearest,     ///< round half to even (deterministic, biased)
  kStochastic,  ///< up with probability equal to the fractional part (unbiased)
};

/// Bytes of one encoded chunk.
constexpr uint64_t block_int8_bytes(uint64_t count, uint32_t block) {
  return count + 4 * ((count + block - 1) / block);
}

/// Code of `x` in a block whose maximum magnitude is `maxabs`; `u` in [0, 1) drives stochastic
/// rounding. A zero (or non-positive) maximum codes everything as 0.
CCSIM_HD int8_t int8_quantize(float x, float maxabs, Rounding rounding, float u) {
  if (!(maxabs > 0.0f)) return 0;
  const float v = (x / maxabs) * 127.0f;
  float q;
  if (rounding == Rounding::kStochastic) {
    const float lo = floorf(v);
    q = (u < v - lo) ? lo + 1.0f : lo;
  } else {
    q = rintf(v);
  }
  q = fminf(fmaxf(q, -127.0f), 127.0f);
  return static_cast<int8_t>(q);
}

/// Value of code `q` in a block with maximum magnitude `maxabs`.
CCSIM_HD float int8_dequantize(int8_t q, float maxabs) { return (static_cast<float>(q) / 127.0f) * maxabs; }

/// Encodes `count` elements; element i draws its random number at global index `index_base + i`
/// of stream `key`. `out` must hold block_int8_bytes(count, block) bytes.
void block_int8_encode(const float* x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                       uint64_t index_base, uint8_t* out);
/// Decodes a chunk into `out` (overwrites).
void block_int8_decode(const uint8_t* in, uint64_t count, uint32_t block, float* out);
/// Decodes a chunk and adds it to `acc` in fp32.
void block_int8_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t block, float* acc);
/// The fused intermediate hop in one pass per block: block_int8_decode_accumulate(in, ..., acc)
/// then block_int8_encode(acc, ..., out), each block decoded, summed and re-encoded while it is in
/// cache. The same bytes and sums as the two calls. `out` must not alias `in`.
void block_int8_decode_accumulate_encode(const uint8_t* in, uint64_t count, uint32_t block, float* acc,
                                         Rounding rounding, const RngKey& key, uint64_t index_base, uint8_t* out);

}  // namespace ccsim::kern
