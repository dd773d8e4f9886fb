#include "kernels/transform/hadamard.hpp"

#include <algorithm>

#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

constexpr uint64_t kGrain = 1 << 16;
// Blocks up to this size are transformed by one thread each. Larger ones run the first
// log2(kSerialBlock) stages per sub-block and the later stages one parallel pass per stage; every
// butterfly sees the same operands as in fwht_unnormalized(), so the result is the same.
constexpr uint64_t kSerialBlock = 1 << 14;

void check_shape(uint64_t count, uint64_t block) {
  CCSIM_CHECK(is_power_of_two(block), "Hadamard block {} is not a power of two", block);
  CCSIM_CHECK(count % block == 0, "Hadamard: {} elements is not a multiple of the block {}", count, block);
}

void transform_blocks(float* x, uint64_t count, uint64_t block) {
  if (count == 0) return;
  const float scale = hadamard_scale(block);
  if (block <= kSerialBlock) {
    const uint64_t grain = std::max<uint64_t>(1, kGrain / block);
    parallel_for(count / block, grain, [=](uint64_t b0, uint64_t b1) {
      for (uint64_t b = b0; b < b1; ++b) {
        float* v = x + b * block;
        fwht_unnormalized(v, block);
        for (uint64_t i = 0; i < block; ++i) v[i] *= scale;
      }
    });
    return;
  }
  for (uint64_t base = 0; base < count; base += block) {
    float* v = x + base;
    parallel_for(block / kSerialBlock, 1, [=](uint64_t s0, uint64_t s1) {
      for (uint64_t s = s0; s < s1; ++s) fwht_unnormalized(v + s * kSerialBlock, kSerialBlock);
    });
    for (uint64_t h = kSerialBlock; h < block; h <<= 1) {
      // Butterfly p pairs j = (p / h) * 2h + p % h with j + h.
      parallel_for(block / 2, kGrain, [=](uint64_t p0, uint64_t p1) {
        for (uint64_t p = p0; p < p1; ++p) {
          const uint64_t j = (p / h) * 2 * h + p % h;
          const float a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      });
    }
    parallel_for(block, kGrain, [=](uint64_t i0, uint64_t i1) {
      for (uint64_t i = i0; i < i1; ++i) v[i] *= scale;
    });
  }
}

void apply_signs(float* x, uint64_t count, const RngKey& key, uint64_t index_base) {
  parallel_for(count, kGrain, [=](uint64_t i0, uint64_t i1) {
    // Same bits as hadamard_sign_at(), one Philox block per four consecutive global indices.
    uint64_t cached = UINT64_MAX;
    U32x4 bits{};
    for (uint64_t i = i0; i < i1; ++i) {
      const uint64_t g = index_base + i;
      if ((g >> 2) != cached) {
        cached = g >> 2;
        bits = philox_block(key, cached);
      }
      if ((bits.v[g & 3u] >> 31) != 0u) x[i] = -x[i];
    }
  });
}

}  // namespace

void hadamard_transform(float* x, uint64_t count, uint64_t block) {
  check_shape(count, block);
  transform_blocks(x, count, block);
}

void randomized_hadamard_transform(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base) {
  check_shape(count, block);
  apply_signs(x, count, key, index_base);
  transform_blocks(x, count, block);
}

void randomized_hadamard_inverse(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base) {
  check_shape(count, block);
  transform_blocks(x, count, block);
  apply_signs(x, count, key, index_base);
}

}  // namespace ccsim::kern
