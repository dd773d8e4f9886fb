#include "kernels/stats/error_sums.hpp"

#include <algorithm>

#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

void sum_plain(const float* const* in, uint32_t count, uint64_t begin, uint64_t end, float* exact) {
  for (uint64_t i = begin; i < end; ++i) {
    double acc = 0.0;
    for (uint32_t r = 0; r < count; ++r) acc += in[r][i];
    exact[i] = static_cast<float>(acc);
  }
}

// One output's error chain continued over [begin, end) from `se`.
double error_chain(const float* exact, const float* got, uint64_t begin, uint64_t end, double se) {
  for (uint64_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(exact[i]) - static_cast<double>(got[i]);
    se += d * d;
  }
  return se;
}

double norm_chain(const float* exact, uint64_t begin, uint64_t end, double sn) {
  for (uint64_t i = begin; i < end; ++i) {
    const double x = exact[i];
    sn += x * x;
  }
  return sn;
}

// One output's error chain and the norm's over [0, n), side by side.
double error_and_norm(const float* exact, const float* got, uint64_t n, double& sn) {
  double se = 0.0, s = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = exact[i], d = x - static_cast<double>(got[i]);
    se += d * d;
    s += x * x;
  }
  sn = s;
  return se;
}

#if defined(CCSIM_HAND_AVX2)
// Entries [0, returned) in tiles: each input widened and added to the tile's running sums in input
// order, four entries to a register.
__attribute__((target("avx2"))) uint64_t sum_avx2(const float* const* in, uint32_t count, uint64_t n, float* exact) {
  constexpr uint64_t kTile = 1024;
  alignas(32) double acc[kTile];
  uint64_t i = 0;
  while (n - i >= 4) {
    const uint64_t len = std::min(kTile, (n - i) & ~uint64_t{3});
    for (uint64_t j = 0; j < len; j += 4) _mm256_store_pd(acc + j, _mm256_setzero_pd());
    for (uint32_t r = 0; r < count; ++r) {
      const float* x = in[r] + i;
      for (uint64_t j = 0; j < len; j += 4)
        _mm256_store_pd(acc + j, _mm256_add_pd(_mm256_load_pd(acc + j), _mm256_cvtps_pd(_mm_loadu_ps(x + j))));
    }
    for (uint64_t j = 0; j < len; j += 4) _mm_storeu_ps(exact + i + j, _mm256_cvtpd_ps(_mm256_load_pd(acc + j)));
    i += len;
  }
  return i;
}

// The error chains of outputs got[0, 4G) over entries [0, n4) (n4 a multiple of 4): four entries
// of four outputs transposed so that each register holds one entry of four outputs, one lane per
// output. With `sn`, the norm's chain runs beside them.
template <int G>
__attribute__((target("avx2"))) void error_lanes(const float* exact, const float* const* got, uint64_t n4, double* se,
                                                 double* sn) {
  __m256d acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_pd();
  double norm = 0.0;
  for (uint64_t i = 0; i < n4; i += 4) {
    __m128 r[G][4];
    for (int g = 0; g < G; ++g) {
      for (int k = 0; k < 4; ++k) r[g][k] = _mm_loadu_ps(got[4 * g + k] + i);
      _MM_TRANSPOSE4_PS(r[g][0], r[g][1], r[g][2], r[g][3]);
    }
    for (int t = 0; t < 4; ++t) {
      const double xd = exact[i + static_cast<uint64_t>(t)];
      if (sn != nullptr) norm += xd * xd;
      const __m256d x = _mm256_set1_pd(xd);
      for (int g = 0; g < G; ++g) {
        const __m256d d = _mm256_sub_pd(x, _mm256_cvtps_pd(r[g][t]));
        acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(d, d));
      }
    }
  }
  for (int g = 0; g < G; ++g) _mm256_storeu_pd(se + 4 * g, acc[g]);
  if (sn != nullptr) *sn = norm;
}
#endif

}  // namespace

void sum_to_float(const float* const* in, uint32_t count, uint64_t n, float* exact) {
  uint64_t i = 0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2()) i = sum_avx2(in, count, n, exact);
#endif
  sum_plain(in, count, i, n, exact);
}

void squared_errors(const float* exact, const float* const* got, uint32_t count, uint64_t n, double* se, double* sn) {
  uint32_t o = 0;
  uint64_t norm_from = 0;  // the norm's chain: done over [0, norm_from) into *sn
  *sn = 0.0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2()) {
    const uint64_t n4 = n & ~uint64_t{3};
    for (; o + 8 <= count; o += 8) error_lanes<2>(exact, got + o, n4, se + o, o == 0 ? sn : nullptr);
    for (; o + 4 <= count; o += 4) error_lanes<1>(exact, got + o, n4, se + o, o == 0 ? sn : nullptr);
    if (o > 0) norm_from = n4;
    for (uint32_t k = 0; k < o; ++k) se[k] = error_chain(exact, got[k], n4, n, se[k]);
  }
#endif
  if (o == 0 && count > 0) {  // no lanes ran: the first output's chain and the norm's together
    se[0] = error_and_norm(exact, got[0], n, *sn);
    o = 1;
  } else {
    *sn = norm_chain(exact, norm_from, n, *sn);
  }
  for (; o < count; ++o) se[o] = error_chain(exact, got[o], 0, n, 0.0);
}

}  // namespace ccsim::kern
