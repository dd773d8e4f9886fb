#pragma once
/// \file
/// THC's homomorphic lattice (Li et al., NSDI'24, "Uniform THC", as adapted in DynamiQ §5): every
/// rank maps each (rotated) value v in [-M, M] to an integer code on one shared uniform lattice of
/// L + 1 points, L = 2^q - 1,
///   c = stochastic_round((v + M) * (L / (2M))) in [0, L]      (E[c] = (v + M) * L / (2M)),
/// so codes of different ranks add as plain integers; a sum S of n ranks' codes decodes to
///   S * (2M / L) - n * M,
/// an unbiased estimate of the sum of the n values. The aggregation fields are unsigned integers of
/// `bits` = 8, 12 or 16 bits, packed as a little-endian bit stream (the bit order of
/// kernels/pack/bitpack.hpp: field i occupies stream bits [i*bits, i*bits + bits), least
/// significant bit first; bits = 8 is one byte per field, 16 a little-endian uint16, 12 two fields
/// per three bytes). Decoding is exact: every field is an integer below 2^16, exact in fp32.
///
/// Rounding of the lattice map is decided in fp32 with IEEE operations in a fixed order (host and
/// device identical); the code is clamped to [0, L], which matters only when fp32 rounding of
/// (v + M) * (L / 2M) lands a hair above L for v = M.
///
/// Thread safety: element functions are pure; array functions write only their outputs and their
/// results do not depend on the thread count.

#include <cmath>
#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {

/// A committed THC lattice as prepare() and finish() of algorithms/thc/thc.hpp apply it: the round
/// works on x 2^-k, where the lattice half-width is m = M' in [1, 2), with step = fl(2m / L),
/// inv_step = fl(L / 2m) and levels = L = 2^q - 1. kZero (every rank's tensor is zero) and
/// kNonFinite (a gradient was not finite) carry no lattice: prepare() gives zeros, finish() zeros
/// or NaNs. The CUDA kernels (kernels/cuda/thc_cuda.hpp) take the CPU compressor's plan as this.
struct ThcLattice {
  enum class Kind : uint8_t { kZero, kNonFinite, kValid };
  Kind kind = Kind::kZero;
  int k = 0;
  float m = 0.0f;
  float step = 0.0f;
  float inv_step = 0.0f;
  uint32_t levels = 0;
};

/// Bytes of `count` aggregation fields of `bits` bits: ceil(count * bits / 8).
CCSIM_HD constexpr uint64_t thc_bytes(uint64_t count, uint32_t bits) { return (count * bits + 7) / 8; }

/// The lattice code of `v` with lattice half-width `m` > 0, `inv_step` = fl(L / (2m)) and
/// `levels` = L; `u` in [0, 1) is the stochastic rounding draw.
CCSIM_HD uint32_t thc_lattice_code(float v, float m, float inv_step, uint32_t levels, float u) {
  const float t = (v + m) * inv_step;
  const float lo = floorf(t);
  const float c = (u < t - lo) ? lo + 1.0f : lo;
  const float top = static_cast<float>(levels);
  return static_cast<uint32_t>(c < 0.0f ? 0.0f : (c > top ? top : c));
}

/// v[i] = thc_lattice_code(v[i], m, inv_step, levels, uniform_at(key, index_base + i)) as a float,
/// for i < count, in place: a tile of draws at a time, the codes as a vectorized row, in parallel.
/// REQUIRES: every v[i] finite (a NaN has no lattice code).
void thc_lattice_codes(float* v, uint64_t count, float m, float inv_step, uint32_t levels, const RngKey& key,
                       uint64_t index_base);

/// The value of a sum `sum` of `ranks` codes, with `step` = fl(2m / L): sum * step - ranks * m.
CCSIM_HD float thc_lattice_value(float sum, float m, float step, uint32_t ranks) {
  return sum * step - static_cast<float>(ranks) * m;
}

/// x * 2^e for |e| <= 250, as two exact power-of-two products (x * 2^(e/2)) * 2^(e - e/2): exact
/// unless the result (or, for a result below 2^-126 times the scale, the intermediate) leaves
/// the normal fp32 range. THC's prepare() and finish() move whole tensors between the gradients'
/// range and a frame where the lattice half-width is in [1, 2).
CCSIM_HD float thc_scale_pow2(float x, int e) {
  const int e1 = e / 2;
  return (x * exact_pow2(e1)) * exact_pow2(e - e1);
}

/// Field `index` of a packed stream of `bits`-bit fields.
CCSIM_HD uint32_t thc_field_get(const uint8_t* packed, uint64_t index, uint32_t bits) {
  return bitpack_get_wide(packed, index, bits);
}

/// Packs the integer-valued x[0, count) into `out` (thc_bytes() bytes, fully overwritten).
/// REQUIRES (checked, a failure aborts: a value that does not fit would wrap silently): bits is 8,
/// 12 or 16; every x_i is an integer in [0, 2^bits - 1].
void thc_pack(const float* x, uint64_t count, uint32_t bits, uint8_t* out);
/// out[i] = field i as a float (overwrites).
void thc_unpack(const uint8_t* in, uint64_t count, uint32_t bits, float* out);
/// acc[i] += field i, in fp32 (exact while the sums stay below 2^24).
void thc_unpack_accumulate(const uint8_t* in, uint64_t count, uint32_t bits, float* acc);
/// thc_unpack_accumulate(in, count, in_bits, acc) then thc_pack(acc, count, out_bits, out), in one
/// pass over tiles of whole bytes (THC's fused hop). REQUIRES: as theirs.
void thc_unpack_accumulate_pack(const uint8_t* in, uint64_t count, uint32_t in_bits, float* acc, uint32_t out_bits,
                                uint8_t* out);

}  // namespace ccsim::kern
