#pragma once
/// \file
/// Fast Walsh–Hadamard transforms: orthonormal, in place, over independent power-of-two blocks,
/// optionally randomized with Philox signs (THC's randomized Hadamard transform; SDP4Bit's TLq-HS
/// uses plain blocks of 32).
///
/// H_n is the Sylvester matrix scaled by 1/sqrt(n): H_n[i][j] = (-1)^popcount(i & j) / sqrt(n).
/// It is symmetric and orthogonal, so H_n is its own inverse (H·H = I) and it is linear
/// (Σ_i H g_i = H Σ_i g_i): up to rounding, the transform commutes with summation.
///
/// Rounding is defined so that a CUDA version can match this reference bit for bit: the
/// unnormalized butterflies run in stages h = 1, 2, 4, ..., n/2, each pair (j, j + h) becoming
/// (a + b, a - b) with a = x[j], b = x[j + h]; then every element is multiplied once by
/// hadamard_scale(n), the fp32 value nearest 1/sqrt(n).
///
/// The randomized transform is x -> H·D·x with D = diag(±1): element i of the whole array
/// (global index index_base + i) is negated iff bit 31 of random_bits_at(key, index_base + i) is
/// set. Workers that share `key` share D, as THC requires. Its inverse is x -> D·H·x.
///
/// Thread safety: functions modify only `x`; the array functions are parallel and their results
/// do not depend on the thread count.

#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {

/// True when n is a power of two (n >= 1).
CCSIM_HD constexpr bool is_power_of_two(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

/// The orthonormal scale of H_n: the fp32 value nearest 1/sqrt(n), computed exactly as
/// 2^-(log2 n)/2 or 2^-(log2 n - 1)/2 · fl(1/sqrt 2).
/// REQUIRES: n a power of two, n <= 2^62.
CCSIM_HD constexpr float hadamard_scale(uint64_t n) {
  int log2n = 0;
  while ((uint64_t{1} << log2n) < n) ++log2n;
  float s = (log2n & 1) != 0 ? 0.707106781186547524f : 1.0f;
  for (int i = 0; i < log2n / 2; ++i) s *= 0.5f;
  return s;
}

/// In-place unnormalized transform of x[0, n) (the butterfly stages only, no scaling): the
/// per-thread building block of host and device kernels.
/// REQUIRES: n a power of two.
CCSIM_HD void fwht_unnormalized(float* x, uint64_t n) {
  for (uint64_t h = 1; h < n; h <<= 1) {
    for (uint64_t i = 0; i < n; i += 2 * h) {
      for (uint64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

/// The transforms' NaN: every NaN the butterflies produce becomes the canonical quiet NaN
/// 0x7FC00000 before the scaling. A NaN's payload after the butterflies depends on which operand
/// of a + b the compiler put first when both are NaN (x86-64 keeps the first), which differs
/// between loops and compilers; the canonical NaN makes the result one function of the input, the
/// same on the CPU and the GPU (kernels/cuda/thc_cuda.hpp).
CCSIM_HD float hadamard_quiet(float v) { return v != v ? bits_to_float(0x7FC00000u) : v; }

/// The Philox sign of global element `index` in the randomized transform: -1.0f or +1.0f.
CCSIM_HD float hadamard_sign_at(const RngKey& key, uint64_t index) {
  return (random_bits_at(key, index) >> 31) != 0u ? -1.0f : 1.0f;
}

/// Passes over memory of a tiled transform of blocks of `block` entries (a power of two), as the
/// CUDA kernels run it (kernels/cuda/thc_cuda.hpp): the first pass does the stages inside an
/// 8192-entry tile, every further pass up to 8 higher stages. 1 pass for blocks up to 2^13, 2 up
/// to 2^21, 3 above: the memory traffic a roofline charges a rotation, 8 bytes per entry and pass.
constexpr uint32_t hadamard_tiled_passes(uint64_t block) {
  uint32_t log2_block = 0;
  while ((uint64_t{1} << log2_block) < block) ++log2_block;
  return log2_block <= 13 ? 1 : log2_block <= 21 ? 2 : 3;
}

/// x[b*block, (b+1)*block) <- H_block · x[b*block, (b+1)*block) for every block b, in place.
/// block == count transforms the whole array.
/// REQUIRES (checked): block a power of two, count a multiple of block.
void hadamard_transform(float* x, uint64_t count, uint64_t block);

/// Randomized transform, in place: each block of x becomes H_block · D · x (see the file comment
/// for D). `index_base` is the global index of x[0], so a chunk of a larger tensor draws the same
/// signs as the tensor would.
/// REQUIRES: as hadamard_transform().
void randomized_hadamard_transform(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base);

/// Inverse of randomized_hadamard_transform() with the same arguments: x <- D · H_block · x.
/// REQUIRES: as hadamard_transform().
void randomized_hadamard_inverse(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base);

}  // namespace ccsim::kern
