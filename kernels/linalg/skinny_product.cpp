#include "kernels/linalg/skinny_product.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"

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

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

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

// bt[k * 8 + l] = src[l * ld + k] (+ add[l * ld + k], when given) for k < d: eight rows of M as a
// panel of eight columns. Each row's next floats are prefetched while they last (`left` of them
// from src on, the rest of the row, which the next block of terms reads).
constexpr uint64_t kPanelAhead = 128;  // floats of each row prefetched ahead of the eight transposed

void transpose_panel(const float* src, const float* add, uint64_t ld, uint64_t d, uint64_t left, float* bt) {
  const I8 lo{0, 8, 1, 9, 4, 12, 5, 13}, hi{2, 10, 3, 11, 6, 14, 7, 15};
  const I8 even{0, 1, 8, 9, 4, 5, 12, 13}, odd{2, 3, 10, 11, 6, 7, 14, 15};
  const I8 low{0, 1, 2, 3, 8, 9, 10, 11}, high{4, 5, 6, 7, 12, 13, 14, 15};
  uint64_t k = 0;
  for (; k + 8 <= d; k += 8) {
    V8 x[8], t[8], u[8];
    const bool ahead = k + kPanelAhead < left;
    for (int l = 0; l < 8; ++l) x[l] = load<V8>(src + l * ld + k);
    if (ahead)
      for (int l = 0; l < 8; ++l) __builtin_prefetch(src + l * ld + k + kPanelAhead);
    if (add)
      for (int l = 0; l < 8; ++l) {
        x[l] = x[l] + load<V8>(add + l * ld + k);
        if (ahead) __builtin_prefetch(add + l * ld + k + kPanelAhead);
      }
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
    for (int l = 0; l < 8; ++l) bt[k * 8 + l] = add ? src[l * ld + k] + add[l * ld + k] : src[l * ld + k];
}

// One block's sums of G rows split S ways over `w` columns whose terms are rows of M (b[k * ld + j]),
// a row of M at a time; acc holds G * S * w floats. Added to t[g * tstride + j].
constexpr uint64_t kAhead = 8;  // rows of M prefetched ahead of the one summed

template <int G, int S>
void stream_sums(const float* a, uint32_t r, const float* __restrict b, uint64_t ld, uint64_t d, uint64_t w,
                 float* __restrict acc, float* __restrict t, uint64_t tstride) {
  std::fill(acc, acc + G * S * w, 0.0f);
  const uint64_t split_end = S == 1 ? 0 : S == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
  uint64_t k = 0;
  // Rows of M a tile apart in memory defeat the hardware's prefetching: ask for a row ahead.
  auto prefetch = [&](uint64_t kk) {
    if (kk + kAhead < d)
      for (uint64_t j = 0; j < w; j += 16) __builtin_prefetch(b + (kk + kAhead) * ld + j);
  };
  for (; k < split_end; ++k) {
    prefetch(k);
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
    prefetch(k);
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

// Which columns Eigen packs: those before the last multiple of four of each column block (nc);
// the rest are summed in order. Runs of packed columns may span column blocks: the blocks change no
// order otherwise.
struct ColumnRuns {
  std::vector<std::pair<uint64_t, uint64_t>> packed;  // [begin, end)
  std::vector<uint64_t> in_order;
};
ColumnRuns column_runs(uint64_t n, uint64_t nc) {
  ColumnRuns runs;
  for (uint64_t j2 = 0; j2 < n; j2 += nc) {
    const uint64_t ncols = std::min(nc, n - j2), end4 = j2 + ncols / 4 * 4;
    if (end4 > j2) {
      if (!runs.packed.empty() && runs.packed.back().second == j2) runs.packed.back().second = end4;
      else runs.packed.emplace_back(j2, end4);
    }
    for (uint64_t j = end4; j < j2 + ncols; ++j) runs.in_order.push_back(j);
  }
  return runs;
}

// Transposed B (P = M Q): column j's terms are row j of M (+ add). Eight rows of M at a time go
// through every block of terms in order, so that each row is read from start to end.
void transposed_sums(const float* a, uint32_t r, const float* m, const float* add, uint64_t depth, uint64_t n,
                     uint64_t kc, const ColumnRuns& cols, const std::vector<RowRun>& runs, const RowRun& whole, float* t) {
  std::vector<float> panel(std::min(kc, depth) * 8);
  // Column j's terms [k2, k2 + d) at stride 1, summed into `buf` when there is an addition.
  auto column = [&](uint64_t j, uint64_t k2, uint64_t d) {
    const float* x = m + j * depth + k2;
    if (!add) return x;
    const float* e = add + j * depth + k2;
    for (uint64_t k = 0; k < d; ++k) panel[k] = x[k] + e[k];
    return static_cast<const float*>(panel.data());
  };
  auto in_order = [&](uint64_t j, const std::vector<RowRun>& rs) {
    for (uint64_t k2 = 0; k2 < depth; k2 += kc) {
      const uint64_t d = std::min(kc, depth - k2);
      const float* b = column(j, k2, d);
      for (const RowRun& run : rs) rows_sums<float>(run.split, run.count, a + k2 * r + run.i, r, b, 1, d, t + run.i * n + j, n);
    }
  };
  for (const auto& [j0, j1] : cols.packed) {
    uint64_t j = j0;
    for (; j + 8 <= j1; j += 8)
      for (uint64_t k2 = 0; k2 < depth; k2 += kc) {
        const uint64_t d = std::min(kc, depth - k2), at = j * depth + k2;
        transpose_panel(m + at, add ? add + at : nullptr, depth, d, depth - k2, panel.data());
        for (const RowRun& run : runs)
          rows_sums<V8>(run.split, run.count, a + k2 * r + run.i, r, panel.data(), 8, d, t + run.i * n + j, n);
      }
    for (; j < j1; ++j) in_order(j, runs);
  }
  for (uint64_t j : cols.in_order) in_order(j, {whole});
}

// B as stored (M^T P): column j's terms are column j of M (+ add). A block of terms at a time, its
// rows of M streamed into sums of up to kTile columns held in the first-level cache. With `add`,
// the block's rows of m + add are formed in sum_out first (once: in the first row block).
void streamed_sums(const float* a, uint32_t r, const float* m, const float* add, float* sum_out, uint64_t depth,
                   uint64_t n, uint64_t kc, bool first_rows, const ColumnRuns& cols, const std::vector<RowRun>& runs,
                   const RowRun& whole, float* t) {
  constexpr uint64_t kTile = 512;
  std::vector<float> scratch(4 * 4 * kTile);
  for (uint64_t k2 = 0; k2 < depth; k2 += kc) {
    const uint64_t d = std::min(kc, depth - k2);
    const float* rows = m + k2 * n;
    if (add) {
      float* dst = sum_out + k2 * n;
      if (first_rows)
        for (uint64_t e = 0; e < d * n; ++e) dst[e] = m[k2 * n + e] + add[k2 * n + e];
      rows = dst;
    }
    const float* ak = a + k2 * r;
    for (const auto& [j0, j1] : cols.packed) {
      uint64_t j = j0;
      for (uint64_t w; (w = std::min(kTile, (j1 - j) / 8 * 8)) > 0; j += w)
        for (const RowRun& run : runs) {
          float* tr = t + run.i * n + j;
          if (run.split == 1) stream_group<1>(run.count, ak + run.i, r, rows + j, n, d, w, scratch.data(), tr, n);
          else if (run.split == 2) stream_group<2>(run.count, ak + run.i, r, rows + j, n, d, w, scratch.data(), tr, n);
          else stream_group<4>(run.count, ak + run.i, r, rows + j, n, d, w, scratch.data(), tr, n);
        }
      for (; j < j1; ++j)
        for (const RowRun& run : runs)
          rows_sums<float>(run.split, run.count, ak + run.i, r, rows + j, n, d, t + run.i * n + j, n);
    }
    for (uint64_t j : cols.in_order)
      rows_sums<float>(1, whole.count, ak + whole.i, r, rows + j, n, d, t + whole.i * n + j, n);
  }
}

// The product (header comment) into t[i * n + j], which holds zeros; B = m + add when add is given,
// and then, not transposed, sum_out (which may be m or add) receives that sum.
void blocked_sums(const float* a, uint32_t r, const float* m, const float* add, float* sum_out, uint64_t depth,
                  uint64_t n, bool b_transposed, const Blocking& bl, float* t) {
  const ColumnRuns cols = column_runs(n, bl.nc);
  for (uint64_t i2 = 0; i2 < r; i2 += bl.mc) {
    const uint64_t rows = std::min(bl.mc, r - i2);
    const std::vector<RowRun> runs = row_runs(i2, rows);
    const RowRun whole{i2, rows, 1};
    if (b_transposed) transposed_sums(a, r, m, add, depth, n, bl.kc, cols, runs, whole, t);
    else streamed_sums(a, r, m, add, sum_out, depth, n, bl.kc, i2 == 0, cols, runs, whole, t);
  }
}

// One entry of P Q^T's block of d terms: Σ_k q[k] p[k] split `split` ways (row_split).
inline float outer_entry(int split, const float* p, const float* q, uint64_t d) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const uint64_t ways = static_cast<uint64_t>(split);
  const uint64_t split_end = split == 1 ? 0 : split == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
  uint64_t k = 0;
  for (; k < split_end; ++k) part[k % ways] = part[k % ways] + q[k] * p[k];
  float sum = split == 1 ? part[0] : split == 2 ? part[0] + part[1] : (part[0] + part[1]) + (part[2] + part[3]);
  for (; k < d; ++k) sum = sum + q[k] * p[k];
  return sum;
}

// Rows [i, i + G) of out = alpha P Q^T + (first ? 0 : out), for the block of terms [k2, k2 + d),
// with Eigen's orders: entry j is summed in order unless its row is packed (the first `packed`
// rows) and j is in the last eight rows of its row block of Q (mc), where row_split applies.
// qt[k * cols + j] = Q[j][k]; p and out point at row i.
template <int G>
void outer_rows(const float* p, const float* q, const float* qt, uint64_t cols, uint32_t r, uint64_t k2, uint64_t d,
                uint64_t mc, uint64_t packed, float alpha, bool first, float* out) {
  for (uint64_t jb = 0; jb < cols; jb += mc) {
    const uint64_t rows = std::min(mc, cols - jb), vec_end = jb + rows / 8 * 8;
    for (uint64_t j = jb; j < vec_end; j += 8) {
      V8 acc[G];
      for (int l = 0; l < G; ++l) acc[l] = V8{};
      for (uint64_t k = 0; k < d; ++k) {
        const V8 qv = load<V8>(qt + (k2 + k) * cols + j);
        for (int l = 0; l < G; ++l) acc[l] = acc[l] + qv * p[l * r + k2 + k];
      }
      for (int l = 0; l < G; ++l) {
        float* o = out + l * cols + j;
        store<V8>(o, acc[l] * alpha + (first ? V8{} : load<V8>(o)));
      }
    }
    for (uint64_t l = 0; l < G; ++l)
      for (uint64_t j = vec_end; j < jb + rows; ++j) {
        const int split = l < packed ? row_split(j - jb, rows) : 1;
        const float acc = outer_entry(split, p + l * r + k2, q + j * r + k2, d);
        float& o = out[l * cols + j];
        o = acc * alpha + (first ? 0.0f : o);
      }
  }
}

#if defined(__x86_64__)
#pragma GCC pop_options
#endif

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

bool skinny_product_available() { return kEigenAsReplicated && hand_avx2(); }

bool skinny_product(const float* a, uint32_t r, const float* m, uint64_t depth, uint64_t n, bool b_transposed,
                    float* c, const float* add, float* sum_out) {
  // Eigen's other evaluations: GEMV for a single row or column of the result, the coefficient-based
  // product below its threshold (rhs rows + result rows + result columns < 20), nothing when empty.
  CCSIM_CHECK(b_transposed ? sum_out == nullptr : (add == nullptr) == (sum_out == nullptr),
              "skinny_product: a sum is stored exactly when B is not transposed and has an addition");
  if (r <= 1 || n <= 1 || depth == 0 || depth + n + r < 20 || !skinny_product_available()) return false;
  const Blocking bl = eigen_blocking(r, depth, n);
  std::vector<float> t(static_cast<size_t>(r) * n, 0.0f);
  blocked_sums(a, r, m, add, sum_out, depth, n, b_transposed, bl, t.data());
  for (uint64_t j = 0; j < n; ++j)
    for (uint32_t i = 0; i < r; ++i) c[j * r + i] = t[i * n + j];
  return true;
}

bool skinny_outer(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t r, bool subtract, float* out) {
  // Eigen's other evaluations (as in skinny_product); its GEMM has Q's rows as its rows, P's as its
  // columns and the rank as its depth.
  if (r == 0 || rows <= 1 || cols <= 1 || r + rows + cols < 20 || !skinny_product_available()) return false;
  const Blocking bl = eigen_blocking(cols, r, rows);
  std::vector<float> qt(static_cast<size_t>(r) * cols);
  for (uint64_t j = 0; j < cols; ++j)
    for (uint32_t k = 0; k < r; ++k) qt[k * cols + j] = q[j * r + k];
  const float alpha = subtract ? -1.0f : 1.0f;
  for (uint64_t i2 = 0; i2 < rows; i2 += bl.nc) {
    const uint64_t block = std::min(bl.nc, rows - i2), packed_end = i2 + block / 4 * 4;
    for (uint64_t i = i2; i < i2 + block; i += 4) {
      const uint64_t g = std::min<uint64_t>(4, i2 + block - i), packed = packed_end > i ? packed_end - i : 0;
      for (uint64_t k2 = 0; k2 < r; k2 += bl.kc) {
        auto* rows_of = g == 4 ? outer_rows<4> : g == 3 ? outer_rows<3> : g == 2 ? outer_rows<2> : outer_rows<1>;
        rows_of(p + i * r, q, qt.data(), cols, r, k2, std::min<uint64_t>(bl.kc, r - k2), bl.mc, packed, alpha,
                !subtract && k2 == 0, out + i * cols);
      }
    }
  }
  return true;
}

}  // namespace ccsim::kern
