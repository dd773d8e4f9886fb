#pragma once
/// \file
/// Many Philox4x32-10 blocks at once, for the CPU kernels' hot loops. The bits are exactly those of
/// random_bits_at() / uniform_at() in philox.hpp (tests compare the two over every alignment), so a
/// CPU kernel drawing through these functions still matches the CUDA kernel that calls
/// uniform_at() per element.
///
/// On x86-64 with AVX2 (checked at run time) eight blocks run in the lanes of 256-bit registers,
/// two such groups' rounds interleaved, with the round keys broadcast once per call; where the
/// machine also has AVX-512 F and VL, the same rounds in fewer operations (masked shuffles split
/// each product, three-input logic folds the exclusive ors) on sixteen lanes of 512-bit registers,
/// four groups at a time (consecutive blocks take their first two rounds' products of the words
/// common to the batch once, in scalars); elsewhere, a plain loop over philox_block(). Pure
/// functions of their arguments: thread-safe.

#include <cstdint>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// out[j] = random_bits_at(key, index + j) for j in [0, count).
void random_bits_fill(const RngKey& key, uint64_t index, uint64_t count, uint32_t* out);

/// out[j] = uniform_at(key, index + j) for j in [0, count).
void uniform_fill(const RngKey& key, uint64_t index, uint64_t count, float* out);

/// Philox4x32-10 of `count` arbitrary counters held word-wise, in place: for every l < count,
/// (w0[l], w1[l], w2[l], w3[l]) becomes philox4x32<10>({w0[l], w1[l], w2[l], w3[l]}, key0, key1).
void philox_words(uint32_t* w0, uint32_t* w1, uint32_t* w2, uint32_t* w3, uint64_t count, uint32_t key0,
                  uint32_t key1);

/// philox_words() of the consecutive counters (index + l, (index + l) >> 32, w2, w3), l in [0, count),
/// into w0_out..w3_out: DynamiQ's permutation blocks. Where the machine has AVX-512VL, runs of
/// counters whose low words do not wrap take rounds 0 and 1's products of the common words once.
void philox_counter_words(uint64_t index, uint32_t w2, uint32_t w3, uint64_t count, uint32_t key0, uint32_t key1,
                          uint32_t* w0_out, uint32_t* w1_out, uint32_t* w2_out, uint32_t* w3_out);

/// The implementation random_bits_fill() runs on this machine: "avx512vl", "avx2" or "portable".
const char* philox_batch_isa();

/// Forces the portable loop (tests use it to compare the two implementations); returns the
/// previous setting. It switches every hand-written AVX2 path in kernels/ (hand_avx2()).
bool philox_batch_force_portable(bool force);

/// Forces the AVX2 rounds where the machine has AVX-512VL (tests compare the two), and the AVX2
/// form of every other hand-written AVX-512 path (hand_avx512()); returns the previous setting.
bool philox_batch_force_avx2(bool force);

/// Whether kernels/' hand-written AVX2 paths run: the machine has AVX2 and the portable loops are
/// not forced.
bool hand_avx2();

/// Whether kernels/' hand-written AVX-512 paths run: the machine has AVX-512 F, VL and BW and neither
/// the portable loops nor the AVX2 ones are forced (philox_batch_force_avx2 switches them too).
bool hand_avx512();

/// Elements per tile in the CPU kernels' draw-then-use loops: small enough for L1, a multiple of
/// the 32 elements one AVX2 batch produces.
inline constexpr uint64_t kUniformTile = 512;

}  // namespace ccsim::kern

namespace ccsim::kern {

/// Calls fn(i, uniform_at(key, index_base + i)) for i = begin, begin + 1, ..., end - 1 in order,
/// drawing the uniforms a tile at a time with uniform_fill(). The host-side replacement of a
/// UniformStream loop: same numbers, a fraction of the Philox cost.
template <class Fn>
void for_each_uniform(const RngKey& key, uint64_t index_base, uint64_t begin, uint64_t end, Fn&& fn) {
  float u[kUniformTile];
  for (uint64_t t = begin; t < end; t += kUniformTile) {
    const uint64_t n = end - t < kUniformTile ? end - t : kUniformTile;
    uniform_fill(key, index_base + t, n, u);
    for (uint64_t j = 0; j < n; ++j) fn(t + j, u[j]);
  }
}

}  // namespace ccsim::kern
