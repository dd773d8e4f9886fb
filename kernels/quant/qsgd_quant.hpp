#pragma once
/// \file
/// QSGD (Alistarh et al., NeurIPS 2017), the baseline of AQGB: per bucket of `bucket` elements,
/// each |x_i| / ‖x‖₂ is rounded stochastically to one of s + 1 uniform levels {0, 1/s, ..., 1}
/// and sent with a separate sign bit; the bucket's L2 norm travels as fp32.
///
/// Levels: a `bits`-bit code is sign << (bits - 1) | level with level in [0, s],
/// s = 2^(bits-1) - 1 (bits = 4: s = 7; bits = 8: s = 127). The sign bit is x's sign bit (a level
/// of 0 decodes to a signed zero). This spends every magnitude code on a level; QSGD's Elias
/// coding of the levels is not modelled (fixed-width codes, as in its "bits" settings).
///
/// Element i of a bucket with norm N (N > 0):
///   v = (|x_i| / N) * s,  l = floor(v),  level = l + 1 with probability v - l (u < v - l), else l
///   decode: ±(level / s) * N
/// so E[decode] = x_i (up to fp32 rounding). A bucket with N == 0 codes every element as level 0.
///
/// The norm: N = sqrt(Σ x_i²) with the squares (exact) summed in double in element order, the
/// square root in double, then rounded *up* to fp32, so that N >= max |x_i| and v <= s. A norm
/// above the largest finite float (|x| near 3e38 in a bucket) is stored as FLT_MAX: levels then
/// clamp at s (biased, but finite). Denormal inputs keep a positive (denormal) norm. The CUDA
/// kernel must sum in the same order to match bit for bit.
///
/// Wire layout of a chunk of `count` elements:
///   [ceil(count / bucket) fp32 norms | count codes of `bits` bits, packed as kernels/pack/bitpack.hpp]
/// i.e. 4 * ceil(count / bucket) + ceil(count * bits / 8) bytes. Buckets start at the chunk's
/// element 0; the last one may be short.
///
/// Thread safety: element functions are pure; array functions write only their output and their
/// results do not depend on the thread count.

#include <cmath>
#include <cstdint>

#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/minifloat.hpp"

namespace ccsim::kern {

/// Bytes of one encoded chunk.
CCSIM_HD constexpr uint64_t qsgd_bytes(uint64_t count, uint32_t bucket, uint32_t bits) {
  return 4 * ((count + bucket - 1) / bucket) + packed_bytes(count, bits);
}

/// Number of nonzero levels s = 2^(bits-1) - 1.
CCSIM_HD constexpr uint32_t qsgd_levels(uint32_t bits) { return (1u << (bits - 1u)) - 1u; }

/// The fp32 norm sent for a bucket whose squares sum to `sum_squares`: sqrt rounded up to fp32,
/// saturating at FLT_MAX; 0 for an empty or all-zero bucket.
CCSIM_HD float qsgd_norm(double sum_squares) {
  if (!(sum_squares > 0.0)) return 0.0f;
  const double norm = sqrt(sum_squares);
  constexpr float kMax = 3.40282346638528859812e+38f;
  if (norm >= static_cast<double>(kMax)) return kMax;
  float f = static_cast<float>(norm);
  if (static_cast<double>(f) < norm) f = bits_to_float(float_to_bits(f) + 1u);  // next float up
  return f;
}

/// The `bits`-bit code of `x` in a bucket of norm `norm`; `u` in [0, 1) drives the rounding.
/// REQUIRES: 2 <= bits <= 8; norm >= |x| or norm == FLT_MAX (as qsgd_norm() guarantees).
CCSIM_HD uint32_t qsgd_quantize(float x, float norm, uint32_t bits, float u) {
  const uint32_t sign = (float_to_bits(x) >> 31) << (bits - 1u);
  if (!(norm > 0.0f)) return sign;
  const float s = static_cast<float>(qsgd_levels(bits));
  const float v = (fabsf(x) / norm) * s;
  const float lo = floorf(v);
  float level = u < v - lo ? lo + 1.0f : lo;
  level = fminf(fmaxf(level, 0.0f), s);  // only a saturated norm or NaN gets here out of range
  return sign | static_cast<uint32_t>(level);
}

/// Value of a code in a bucket of norm `norm`.
CCSIM_HD float qsgd_dequantize(uint32_t code, float norm, uint32_t bits) {
  const uint32_t s = qsgd_levels(bits);
  const float magnitude = (static_cast<float>(code & s) / static_cast<float>(s)) * norm;
  return ((code >> (bits - 1u)) & 1u) != 0u ? -magnitude : magnitude;
}

/// Encodes x[0, count) into `out` (qsgd_bytes() bytes, fully overwritten); element i draws
/// uniform_at(key, index_base + i).
/// REQUIRES (checked): bits in {2..8}; bucket >= 1 with bucket * bits a multiple of 8 (every
/// bucket starts on a byte).
void qsgd_encode(const float* x, uint64_t count, uint32_t bucket, uint32_t bits, const RngKey& key, uint64_t index_base,
                 uint8_t* out);
/// out[i] = decoded element i.
void qsgd_decode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* out);
/// acc[i] += decoded element i, in fp32.
void qsgd_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* acc);
/// The fused intermediate hop in one pass per bucket: qsgd_decode_accumulate(in, ..., acc) then
/// qsgd_encode(acc, ..., out), each bucket decoded, summed and re-encoded while it is in cache. The
/// same bytes and sums as the two calls. `out` must not alias `in` or `acc`.
void qsgd_decode_accumulate_encode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* acc,
                                   const RngKey& key, uint64_t index_base, uint8_t* out);

}  // namespace ccsim::kern
