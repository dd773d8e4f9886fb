#include "kernels/linalg/skinny_product.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace ccsim::kern {
namespace {

// Eigen's blocking of the product: the ColMajor GEMM it runs for a row-major result has the
// skinny side as its rows (gemm_blocking_space with Transpose, GeneralMatrixMatrix.h).
struct Blocking {
  uint64_t kc, mc, nc;
};
Blocking eigen_blocking(uint64_t r, uint64_t depth, uint64_t n) {
  Eigen::Index kc = static_cast<Eigen::Index>(depth), mc = static_cast<Eigen::Index>(r),
               nc = static_cast<Eigen::Index>(n);
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, Eigen::Index{1});
  return {static_cast<uint64_t>(kc), std::min<uint64_t>(r, static_cast<uint64_t>(mc)),
          std::min<uint64_t>(n, static_cast<uint64_t>(nc))};
}

// Where the terms of row i's sums are split (the file comment of the header): 1 (in order),
// 2 (even and odd places) or 4 (places modulo four).
int row_split(uint64_t local_row, uint64_t block_rows) {
  const uint64_t two_packets = block_rows / 8 * 8;
  const uint64_t one_packet = two_packets + (block_rows - two_packets) / 4 * 4;
  return local_row < two_packets ? 1 : local_row < one_packet ? 2 : 4;
}

#pragma GCC push_options
#pragma GCC target("avx2")

typedef float V8 __attribute__((vector_size(32)));
typedef int I8 __attribute__((vector_size(32)));

template <class V>
inline __attribute__((always_inline)) V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline __attribute__((always_inline)) void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// One block's sums of G rows split S ways, for the columns of one panel (V: eight columns, or
// float: one). a[k * r + g] is row g's k-th term, b[k * stride] the panel's k-th row; the sums are
// added to t[g * tstride]. The same operations, in the same order, as Eigen's kernels.
template <class V, int G, int S>
inline __attribute__((always_inline)) void block_sums(const float* a, uint32_t r, const float* b, uint64_t stride,
                                                      uint64_t d, float* t, uint64_t tstride) {
  V acc[G][S];
  for (int g = 0; g < G; ++g)
    for (int s = 0; s < S; ++s) acc[g][s] = V{};
  const uint64_t split_end = S == 1 ? 0 : S == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
  uint64_t k = 0;
  for (; k < split_end; k += S)
    for (int s = 0; s < S; ++s) {
      const V bv = load<V>(b + (k + s) * stride);
      for (int g = 0; g < G; ++g) acc[g][s] = acc[g][s] + a[(k + s) * r + g] * bv;
    }
  V sum[G];
  for (int g = 0; g < G; ++g) {
    if constexpr (S == 1) sum[g] = acc[g][0];
    if constexpr (S == 2) sum[g] = acc[g][0] + acc[g][1];
    if constexpr (S == 4) sum[g] = (acc[g][0] + acc[g][1]) + (acc[g][2] + acc[g][3]);
  }
  for (; k < d; ++k) {
    const V bv = load<V>(b + k * stride);
    for (int g = 0; g < G; ++g) sum[g] = sum[g] + a[k * r + g] * bv;
  }
  for (int g = 0; g < G; ++g) store<V>(t + g * tstride, sum[g] + load<V>(t + g * tstride));
}

template <class V, int S>
inline __attribute__((always_inline)) void group_sums(uint64_t g, const float* a, uint32_t r, const float* b,
                                                      uint64_t stride, uint64_t d, float* t, uint64_t tstride) {
  switch (g) {
    case 1: block_sums<V, 1, S>(a, r, b, stride, d, t, tstride); break;
    case 2: block_sums<V, 2, S>(a, r, b, stride, d, t, tstride); break;
    case 3: block_sums<V, 3, S>(a, r, b, stride, d, t, tstride); break;
    default: block_sums<V, 4, S>(a, r, b, stride, d, t, tstride); break;
  }
}

// `rows` rows of one split, four at a time, for one panel of columns.
template <class V>
void rows_sums(int split, uint64_t rows, const float* a, uint32_t r, const float* b, uint64_t stride, uint64_t d,
               float* t, uint64_t tstride) {
  while (rows > 0) {
    const uint64_t g = std::min<uint64_t>(rows, 4);
    if (split == 1) group_sums<V, 1>(g, a, r, b, stride, d, t, tstride);
    else if (split == 2) group_sums<V, 2>(g, a, r, b, stride, d, t, tstride);
    else group_sums<V, 4>(g, a, r, b, stride, d, t, tstride);
    rows -= g;
    a += g;
    t += g * tstride;
  }
}

// bt[k * 8 + l] = src[l * ld + k] for k < d: eight rows of M as a panel of eight columns.
void transpose_panel(const float* src, uint64_t ld, uint64_t d, float* bt) {
  const I8 lo{0, 8, 1, 9, 4, 12, 5, 13}, hi{2, 10, 3, 11, 6, 14, 7, 15};
  const I8 even{0, 1, 8, 9, 4, 5, 12, 13}, odd{2, 3, 10, 11, 6, 7, 14, 15};
  const I8 low{0, 1, 2, 3, 8, 9, 10, 11}, high{4, 5, 6, 7, 12, 13, 14, 15};
  uint64_t k = 0;
  for (; k + 8 <= d; k += 8) {
    V8 x[8], t[8], u[8];
    for (int l = 0; l < 8; ++l) x[l] = load<V8>(src + l * ld + k);
    for (int p = 0; p < 4; ++p) {
      t[2 * p] = __builtin_shuffle(x[2 * p], x[2 * p + 1], lo);
      t[2 * p + 1] = __builtin_shuffle(x[2 * p], x[2 * p + 1], hi);
    }
    for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
      u[4 * h + 0] = __builtin_shuffle(t[4 * h], t[4 * h + 2], even);
      u[4 * h + 1] = __builtin_shuffle(t[4 * h], t[4 * h + 2], odd);
      u[4 * h + 2] = __builtin_shuffle(t[4 * h + 1], t[4 * h + 3], even);
      u[4 * h + 3] = __builtin_shuffle(t[4 * h + 1], t[4 * h + 3], odd);
    }
    for (int q = 0; q < 4; ++q) {  // u[q] holds places q and q + 4 of rows 0-3, u[q + 4] of rows 4-7
      store<V8>(bt + (k + q) * 8, __builtin_shuffle(u[q], u[q + 4], low));
      store<V8>(bt + (k + q + 4) * 8, __builtin_shuffle(u[q], u[q + 4], high));
    }
  }
  for (; k < d; ++k)
    for (int l = 0; l < 8; ++l) bt[k * 8 + l] = src[l * ld + k];
}

// One block's sums of G rows split S ways over `w` columns whose terms are rows of M (b[k * ld + j]),
// a row of M at a time; acc holds G * S * w floats. Added to t[g * tstride + j].
template <int G, int S>
void stream_sums(const float* a, uint32_t r, const float* __restrict b, uint64_t ld, uint64_t d, uint64_t w,
                 float* __restrict acc, float* __restrict t, uint64_t tstride) {
  std::fill(acc, acc + G * S * w, 0.0f);
  const uint64_t split_end = S == 1 ? 0 : S == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
  uint64_t k = 0;
  for (; k < split_end; ++k) {
    const float* __restrict row = b + k * ld;
    float* __restrict part = acc + (k % S) * w;  // acc[(g * S + s) * w + j]
    float c[G];
    for (int g = 0; g < G; ++g) c[g] = a[k * r + g];
    for (uint64_t j = 0; j < w; ++j)
      for (int g = 0; g < G; ++g) part[g * S * w + j] = part[g * S * w + j] + c[g] * row[j];
  }
  for (int g = 0; g < G; ++g) {
    float* __restrict p = acc + g * S * w;
    if constexpr (S == 2)
      for (uint64_t j = 0; j < w; ++j) p[j] = p[j] + p[w + j];
    if constexpr (S == 4)
      for (uint64_t j = 0; j < w; ++j) p[j] = (p[j] + p[w + j]) + (p[2 * w + j] + p[3 * w + j]);
  }
  for (; k < d; ++k) {
    const float* __restrict row = b + k * ld;
    float c[G];
    for (int g = 0; g < G; ++g) c[g] = a[k * r + g];
    for (uint64_t j = 0; j < w; ++j)
      for (int g = 0; g < G; ++g) acc[g * S * w + j] = acc[g * S * w + j] + c[g] * row[j];
  }
  for (int g = 0; g < G; ++g)
    for (uint64_t j = 0; j < w; ++j) t[g * tstride + j] = acc[g * S * w + j] + t[g * tstride + j];
}

template <int S>
void stream_group(uint64_t g, const float* a, uint32_t r, const float* b, uint64_t ld, uint64_t d, uint64_t w,
                  float* acc, float* t, uint64_t tstride) {
  switch (g) {
    case 1: stream_sums<1, S>(a, r, b, ld, d, w, acc, t, tstride); break;
    case 2: stream_sums<2, S>(a, r, b, ld, d, w, acc, t, tstride); break;
    case 3: stream_sums<3, S>(a, r, b, ld, d, w, acc, t, tstride); break;
    default: stream_sums<4, S>(a, r, b, ld, d, w, acc, t, tstride); break;
  }
}

// Rows [i, i + count) of a row block, whose sums split `split` ways where Eigen packs the columns.
struct RowRun {
  uint64_t i, count;
  int split;
};

// The block of rows [i2, i2 + rows) split as Eigen's kernel does (row_split), four at most a run.
std::vector<RowRun> row_runs(uint64_t i2, uint64_t rows) {
  std::vector<RowRun> runs;
  for (uint64_t i = 0; i < rows;) {
    const int split = row_split(i, rows);
    uint64_t e = i + 1;
    while (e < rows && e - i < 4 && row_split(e, rows) == split) ++e;
    runs.push_back({i2 + i, e - i, split});
    i = e;
  }
  return runs;
}

// Columns [j0, j1) of Eigen's four-column panels (all of them packed), for one block of terms.
void packed_columns(const float* a, uint32_t r, const float* m, uint64_t depth, uint64_t n, bool b_transposed,
                    uint64_t k2, uint64_t d, const std::vector<RowRun>& runs, uint64_t j0, uint64_t j1, float* t,
                    std::vector<float>& scratch) {
  constexpr uint64_t kTile = 256;
  uint64_t j = j0;
  if (b_transposed) {
    scratch.resize(d * 8);
    for (; j + 8 <= j1; j += 8) {
      transpose_panel(m + j * depth + k2, depth, d, scratch.data());
      for (const RowRun& run : runs)
        rows_sums<V8>(run.split, run.count, a + k2 * r + run.i, r, scratch.data(), 8, d, t + run.i * n + j, n);
    }
  } else {
    scratch.resize(4 * 4 * kTile);
    while (j + 8 <= j1) {
      const uint64_t w = std::min(kTile, (j1 - j) / 8 * 8);
      for (const RowRun& run : runs) {
        const float* ar = a + k2 * r + run.i;
        float* tr = t + run.i * n + j;
        const float* b = m + k2 * n + j;
        if (run.split == 1) stream_group<1>(run.count, ar, r, b, n, d, w, scratch.data(), tr, n);
        else if (run.split == 2) stream_group<2>(run.count, ar, r, b, n, d, w, scratch.data(), tr, n);
        else stream_group<4>(run.count, ar, r, b, n, d, w, scratch.data(), tr, n);
      }
      j += w;
    }
  }
  for (; j < j1; ++j) {
    const float* b = b_transposed ? m + j * depth + k2 : m + k2 * n + j;
    const uint64_t stride = b_transposed ? 1 : n;
    for (const RowRun& run : runs)
      rows_sums<float>(run.split, run.count, a + k2 * r + run.i, r, b, stride, d, t + run.i * n + j, n);
  }
}

// The product (header comment) into t[i * n + j], which holds zeros.
void blocked_sums(const float* a, uint32_t r, const float* m, uint64_t depth, uint64_t n, bool b_transposed,
                  const Blocking& bl, float* t) {
  // Columns past the last multiple of four of a column block are summed in order; the others are
  // packed. Runs of packed columns may span column blocks: the blocks change no order otherwise.
  std::vector<std::pair<uint64_t, uint64_t>> packed;  // [begin, end)
  std::vector<uint64_t> in_order;
  for (uint64_t j2 = 0; j2 < n; j2 += bl.nc) {
    const uint64_t ncols = std::min(bl.nc, n - j2), end4 = j2 + ncols / 4 * 4;
    if (end4 > j2) {
      if (!packed.empty() && packed.back().second == j2) packed.back().second = end4;
      else packed.emplace_back(j2, end4);
    }
    for (uint64_t j = end4; j < j2 + ncols; ++j) in_order.push_back(j);
  }
  std::vector<float> scratch;
  for (uint64_t i2 = 0; i2 < r; i2 += bl.mc) {
    const uint64_t rows = std::min(bl.mc, r - i2);
    const std::vector<RowRun> runs = row_runs(i2, rows);
    const std::vector<RowRun> whole{{i2, rows, 1}};
    for (uint64_t k2 = 0; k2 < depth; k2 += bl.kc) {
      const uint64_t d = std::min(bl.kc, depth - k2);
      for (const auto& [j0, j1] : packed) packed_columns(a, r, m, depth, n, b_transposed, k2, d, runs, j0, j1, t, scratch);
      for (uint64_t j : in_order) {
        const float* b = b_transposed ? m + j * depth + k2 : m + k2 * n + j;
        rows_sums<float>(1, rows, a + k2 * r + i2, r, b, b_transposed ? 1 : n, d, t + i2 * n + j, n);
      }
    }
  }
}

#pragma GCC pop_options

}  // namespace

// The orders replicated are those of Eigen's kernel built for four-float packets without fused
// multiply-adds (the baseline x86-64 target); a build for another target is left to Eigen.
using EigenTraits = Eigen::internal::gebp_traits<float, float>;
#ifdef EIGEN_VECTORIZE_FMA
constexpr bool kEigenFma = true;
#else
constexpr bool kEigenFma = false;
#endif
constexpr bool kEigenAsReplicated =
    EigenTraits::mr == 8 && EigenTraits::nr == 4 && EigenTraits::LhsProgress == 4 && !kEigenFma;

bool skinny_product_available() { return kEigenAsReplicated && __builtin_cpu_supports("avx2"); }

bool skinny_product(const float* a, uint32_t r, const float* m, uint64_t depth, uint64_t n, bool b_transposed,
                    float* c) {
  // Eigen's other evaluations: GEMV for a single row or column of the result, the coefficient-based
  // product below its threshold (rhs rows + result rows + result columns < 20), nothing when empty.
  if (r <= 1 || n <= 1 || depth == 0 || depth + n + r < 20 || !skinny_product_available()) return false;
  const Blocking bl = eigen_blocking(r, depth, n);
  std::vector<float> t(static_cast<size_t>(r) * n, 0.0f);
  blocked_sums(a, r, m, depth, n, b_transposed, bl, t.data());
  for (uint64_t j = 0; j < n; ++j)
    for (uint32_t i = 0; i < r; ++i) c[j * r + i] = t[i * n + j];
  return true;
}

}  // namespace ccsim::kern
