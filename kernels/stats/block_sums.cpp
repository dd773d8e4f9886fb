#include "kernels/stats/block_sums.hpp"

#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

void sums_of_block(const float* x, uint64_t count, double& sum, double& sq) {
  double s = 0.0, q = 0.0;
  for (uint64_t i = 0; i < count; ++i) {
    const double v = x[i];
    s += v;
    q += v * v;
  }
  sum = s;
  sq = q;
}

#if defined(CCSIM_HAND_AVX2)
// r[j] = entries 8t .. 8t + 7 of row j in, r[t] = entry t of rows 0 .. 7 out: an 8x8 transpose.
__attribute__((target("avx2"))) void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
  }
}

// Eight whole blocks at a time: eight entries of each block are loaded and transposed, so that
// each register holds one entry of every block, then widened to double and added to each lane's
// own running sums in entry order (the product is exact, so no rounding differs from the loop's).
// Returns the blocks done; the block size must be a multiple of 8.
__attribute__((target("avx2"))) uint64_t sums_avx2(const float* x, uint64_t whole, uint64_t block, double* sum,
                                                   double* sq) {
  if (block % 8 != 0) return 0;
  uint64_t b = 0;
  for (; b + 8 <= whole; b += 8) {
    const float* base = x + b * block;
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    for (uint64_t i = 0; i < block; i += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(base + static_cast<uint64_t>(j) * block + i);
      transpose8(r);
      for (int t = 0; t < 8; ++t) {
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(r[t]));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(r[t], 1));
        s0 = _mm256_add_pd(s0, lo);
        s1 = _mm256_add_pd(s1, hi);
        q0 = _mm256_add_pd(q0, _mm256_mul_pd(lo, lo));
        q1 = _mm256_add_pd(q1, _mm256_mul_pd(hi, hi));
      }
    }
    _mm256_storeu_pd(sum + b, s0);
    _mm256_storeu_pd(sum + b + 4, s1);
    _mm256_storeu_pd(sq + b, q0);
    _mm256_storeu_pd(sq + b + 4, q1);
  }
  return b;
}
#endif

}  // namespace

void block_sums(const float* x, uint64_t n, uint64_t block, double* sum, double* sq) {
  CCSIM_CHECK(block >= 1, "block sums need a positive block size");
  const uint64_t blocks = (n + block - 1) / block, whole = n / block;
  uint64_t b = 0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2()) b = sums_avx2(x, whole, block, sum, sq);
#endif
  for (; b < blocks; ++b) sums_of_block(x + b * block, (b + 1) * block <= n ? block : n - b * block, sum[b], sq[b]);
}

}  // namespace ccsim::kern
