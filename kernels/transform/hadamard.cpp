#include "kernels/transform/hadamard.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/float_bits.hpp"
#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

constexpr uint64_t kGrain = 1 << 16;
// Blocks up to this size are transformed by one thread each (their stages run in cache). Larger
// ones run the first log2(kSerialBlock) stages per sub-block, then the later stages in passes of
// up to kTileStages stages each: a pass copies tiles of 2^g rows (the entries the pass's stages
// combine) by kTileCols neighbouring entries into a local buffer, runs the stages there and writes
// the tile back. Every butterfly sees the same operands as in fwht_unnormalized(), so the result
// is the same bit for bit whatever the thread count.
constexpr uint64_t kSerialBlock = 1 << 14;
constexpr uint32_t kTileStages = 8;
constexpr uint64_t kTileCols = 32;  // a row's signs are eight whole Philox blocks

void check_shape(uint64_t count, uint64_t block) {
  CCSIM_CHECK(is_power_of_two(block), "Hadamard block {} is not a power of two", block);
  CCSIM_CHECK(count % block == 0, "Hadamard: {} elements is not a multiple of the block {}", count, block);
}

// The D of the randomized transform over x[i0, i1), x[0] having global index `index_base`, or
// nothing without a key. The sign flip is an exclusive or on the sign bit, exactly -x where the
// Philox bit is set, without a branch on random bits.
struct Signs {
  const RngKey* key = nullptr;
  uint64_t index_base = 0;

  void apply(float* x, uint64_t i0, uint64_t i1) const {
    if (key == nullptr) return;
    uint32_t bits[kUniformTile];
    for (uint64_t t = i0; t < i1; t += kUniformTile) {
      const uint64_t n = std::min(kUniformTile, i1 - t);
      random_bits_fill(*key, index_base + t, n, bits);
      for (uint64_t j = 0; j < n; ++j)  // the bit of hadamard_sign_at()
        x[t + j] = bits_to_float(float_to_bits(x[t + j]) ^ (bits[j] & 0x80000000u));
    }
  }
};

#if defined(CCSIM_HAND_AVX2)
// The butterfly (a, b) -> (a + b, a - b), `a` the lower entry and the first operand.
__attribute__((target("avx2"))) inline void butterfly(__m256& a, __m256& b) {
  const __m256 s = _mm256_add_ps(a, b);
  b = _mm256_sub_ps(a, b);
  a = s;
}

// Stages h, 2h, ..., 2^(S-1) h of x[0, n) (h >= 8, n a multiple of 2^S h) with the 2^S entries
// each such group of stages combines (j + k h, k < 2^S) held in registers, eight neighbouring
// groups at a time: every stage sees the operands it would see run alone, so the same bits, with
// one load and one store per entry for S stages instead of S.
template <int S>
__attribute__((target("avx2"))) void stages_avx2(float* x, uint64_t n, uint64_t h) {
  constexpr int kRows = 1 << S;
  for (uint64_t i = 0; i < n; i += kRows * h)
    for (uint64_t j = i; j < i + h; j += 8) {
      __m256 v[kRows];
#pragma GCC unroll 8
      for (int k = 0; k < kRows; ++k) v[k] = _mm256_loadu_ps(x + j + k * h);
#pragma GCC unroll 8
      for (int s = 1; s < kRows; s <<= 1)
#pragma GCC unroll 8
        for (int k = 0; k < kRows; ++k)
          if ((k & s) == 0) butterfly(v[k], v[k + s]);
#pragma GCC unroll 8
      for (int k = 0; k < kRows; ++k) _mm256_storeu_ps(x + j + k * h, v[k]);
    }
}

// Stages h, 2h, ..., end / 2 of x[0, n) (h >= 8, end a power of two dividing n): the odd one or
// two first, then three at a time.
__attribute__((target("avx2"))) void strided_stages_avx2(float* x, uint64_t n, uint64_t h, uint64_t end) {
  const int stages = std::countr_zero(end) - std::countr_zero(h);
  if (stages % 3 == 1) {
    stages_avx2<1>(x, n, h);
    h <<= 1;
  } else if (stages % 3 == 2) {
    stages_avx2<2>(x, n, h);
    h <<= 2;
  }
  for (; h < end; h <<= 3) stages_avx2<3>(x, n, h);
}

// fwht_unnormalized() of x[0, n), n = 2^m >= 8, eight entries to a register: stages h = 1, 2, 4
// inside each register (each lane's partner by a permute; the lower lane of a pair takes a + b,
// the upper a - b, `a` the lower entry and the first operand, as in fwht_unnormalized()), then
// every stage h >= 8 across registers (strided_stages_avx2). The same butterflies on the same
// operands, so the same bits.
__attribute__((target("avx2"))) void fwht_avx2(float* x, uint64_t n) {
  for (uint64_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 p = _mm256_permute_ps(v, 0xB1);  // lanes 1, 0, 3, 2
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
    p = _mm256_permute_ps(v, 0x4E);  // lanes 2, 3, 0, 1
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
    p = _mm256_permute2f128_ps(v, v, 0x01);  // the halves swapped
    v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0);
    _mm256_storeu_ps(x + i, v);
  }
  if (n > 8) strided_stages_avx2(x, n, 8, n);
}

// tile_stages() with AVX2: the stages between rows h = 1 .. rows / 2 are stages kTileCols ..
// rows / 2 * kTileCols of the tile read as one array.
__attribute__((target("avx2"))) void tile_stages_avx2(float* buf, uint64_t rows) {
  if (rows > 1) strided_stages_avx2(buf, rows * kTileCols, kTileCols, rows * kTileCols);
}
#endif

// fwht_unnormalized() on the host: by AVX2 where hand_avx2() says so.
void fwht_host(float* x, uint64_t n) {
#if defined(CCSIM_HAND_AVX2)
  if (n >= 8 && hand_avx2()) return fwht_avx2(x, n);
#endif
  fwht_unnormalized(x, n);
}

// The butterflies of a tile of `rows` rows of kTileCols entries: stages h = 1 .. rows / 2 between
// rows j and j + h, column by column.
void tile_stages(float* buf, uint64_t rows, bool avx2) {
#if defined(CCSIM_HAND_AVX2)
  if (avx2) return tile_stages_avx2(buf, rows);
#endif
  (void)avx2;
  for (uint64_t h = 1; h < rows; h <<= 1) {
    for (uint64_t j0 = 0; j0 < rows; j0 += 2 * h) {
      for (uint64_t j = j0; j < j0 + h; ++j) {
        float* lo = buf + j * kTileCols;
        float* hi = lo + h * kTileCols;
        for (uint64_t c = 0; c < kTileCols; ++c) {
          const float p = lo[c], q = hi[c];
          lo[c] = p + q;
          hi[c] = p - q;
        }
      }
    }
  }
}

#if defined(CCSIM_HAND_AVX2)
// quiet_scaled_row() eight entries at a time: a NaN lane replaced by the canonical NaN, then the
// same product.
__attribute__((target("avx2"))) void quiet_scaled_row_avx2(const float* in, float* out, float scale) {
  const __m256 s = _mm256_set1_ps(scale), quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  for (uint64_t c = 0; c < kTileCols; c += 8) {
    const __m256 v = _mm256_loadu_ps(in + c);
    _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_blendv_ps(v, quiet, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)), s));
  }
}
#endif

// out[c] = hadamard_quiet(in[c]) * scale for a row of a tile.
void quiet_scaled_row(const float* in, float* out, float scale, bool avx2) {
#if defined(CCSIM_HAND_AVX2)
  if (avx2) return quiet_scaled_row_avx2(in, out, scale);
#endif
  (void)avx2;
  for (uint64_t c = 0; c < kTileCols; ++c) out[c] = hadamard_quiet(in[c]) * scale;
}

// Stages h = 2^a, ..., 2^(a+g-1) of every block of x[0, count), in tiles; the last pass also
// scales by `scale` and then applies `after` (the inverse's signs).
void tiled_pass(float* x, uint64_t count, uint32_t a, uint32_t g, bool last, float scale, const Signs& after) {
  const uint64_t rows = uint64_t{1} << g, stride = uint64_t{1} << a;
  const uint64_t tiles_per_row = stride / kTileCols;
  const uint64_t units = count / (rows * kTileCols);
  const bool avx2 = hand_avx2();
  parallel_for(units, std::max<uint64_t>(1, kGrain / (rows * kTileCols)), [=, &after](uint64_t u0, uint64_t u1) {
    std::vector<float> tile(rows * kTileCols);
    float* buf = tile.data();
    for (uint64_t u = u0; u < u1; ++u) {
      const uint64_t base = (u / tiles_per_row) * rows * stride + (u % tiles_per_row) * kTileCols;
      for (uint64_t r = 0; r < rows; ++r) std::memcpy(buf + r * kTileCols, x + base + r * stride, 4 * kTileCols);
      tile_stages(buf, rows, avx2);
      for (uint64_t r = 0; r < rows; ++r) {
        float* out = x + base + r * stride;
        const float* in = buf + r * kTileCols;
        if (!last) {
          std::memcpy(out, in, 4 * kTileCols);
          continue;
        }
        quiet_scaled_row(in, out, scale, avx2);
        after.apply(x, base + r * stride, base + r * stride + kTileCols);
      }
    }
  });
}

// x <- H_block x per block, with `before` applied to x first and `after` to the result (the
// randomized transform's D on one side).
void transform_blocks(float* x, uint64_t count, uint64_t block, const Signs& before, const Signs& after) {
  if (count == 0) return;
  const float scale = hadamard_scale(block);
  if (block <= kSerialBlock) {
    const uint64_t grain = std::max<uint64_t>(1, kGrain / block);
    parallel_for(count / block, grain, [=, &before, &after](uint64_t b0, uint64_t b1) {
      for (uint64_t b = b0; b < b1; ++b) {
        float* v = x + b * block;
        before.apply(x, b * block, (b + 1) * block);
        fwht_host(v, block);
        for (uint64_t i = 0; i < block; ++i) v[i] = hadamard_quiet(v[i]) * scale;
        after.apply(x, b * block, (b + 1) * block);
      }
    });
    return;
  }
  parallel_for(count / kSerialBlock, 1, [=, &before](uint64_t s0, uint64_t s1) {
    for (uint64_t s = s0; s < s1; ++s) {
      before.apply(x, s * kSerialBlock, (s + 1) * kSerialBlock);
      fwht_host(x + s * kSerialBlock, kSerialBlock);
    }
  });
  const auto first = static_cast<uint32_t>(std::countr_zero(kSerialBlock)),
             end = static_cast<uint32_t>(std::countr_zero(block));
  for (uint32_t a = first; a < end; a += kTileStages) {
    const uint32_t g = std::min(kTileStages, end - a);
    tiled_pass(x, count, a, g, a + g == end, scale, after);
  }
}

}  // namespace

void hadamard_transform(float* x, uint64_t count, uint64_t block) {
  check_shape(count, block);
  transform_blocks(x, count, block, Signs{}, Signs{});
}

void randomized_hadamard_transform(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base) {
  check_shape(count, block);
  transform_blocks(x, count, block, Signs{&key, index_base}, Signs{});
}

void randomized_hadamard_inverse(float* x, uint64_t count, uint64_t block, const RngKey& key, uint64_t index_base) {
  check_shape(count, block);
  transform_blocks(x, count, block, Signs{}, Signs{&key, index_base});
}

}  // namespace ccsim::kern
