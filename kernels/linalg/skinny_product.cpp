#include "kernels/linalg/skinny_product.hpp"

#include <Eigen/Core>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"
#include "sim/base/uninit_vector.hpp"

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

// One block's sums of G rows split S ways, for one column. a[k * r + g] is row g's k-th term,
// b[k * stride] the column's k-th term; the sums are added to t[g * tstride]. The same operations,
// in the same order, as Eigen's kernels.
template <int G, int S>
inline __attribute__((always_inline)) void block_sums(const float* a, uint32_t r, const float* b, uint64_t stride,
                                                      uint64_t d, float* t, uint64_t tstride) {
  float acc[G][S];
  for (int g = 0; g < G; ++g)
    for (int s = 0; s < S; ++s) acc[g][s] = 0.0f;
  const uint64_t split_end = S == 1 ? 0 : S == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
  uint64_t k = 0;
  for (; k < split_end; k += S)
    for (int s = 0; s < S; ++s) {
      const float bv = b[(k + s) * stride];
      for (int g = 0; g < G; ++g) acc[g][s] = acc[g][s] + a[(k + s) * r + g] * bv;
    }
  float sum[G];
  for (int g = 0; g < G; ++g) {
    if constexpr (S == 1) sum[g] = acc[g][0];
    if constexpr (S == 2) sum[g] = acc[g][0] + acc[g][1];
    if constexpr (S == 4) sum[g] = (acc[g][0] + acc[g][1]) + (acc[g][2] + acc[g][3]);
  }
  for (; k < d; ++k) {
    const float bv = b[k * stride];
    for (int g = 0; g < G; ++g) sum[g] = sum[g] + a[k * r + g] * bv;
  }
  for (int g = 0; g < G; ++g) t[g * tstride] = sum[g] + t[g * tstride];
}

template <int S>
inline __attribute__((always_inline)) void group_sums(uint64_t g, const float* a, uint32_t r, const float* b,
                                                      uint64_t stride, uint64_t d, float* t, uint64_t tstride) {
  switch (g) {
    case 1: block_sums<1, S>(a, r, b, stride, d, t, tstride); break;
    case 2: block_sums<2, S>(a, r, b, stride, d, t, tstride); break;
    case 3: block_sums<3, S>(a, r, b, stride, d, t, tstride); break;
    default: block_sums<4, S>(a, r, b, stride, d, t, tstride); break;
  }
}

// `rows` rows of one split, four at a time, for one column.
void rows_sums(int split, uint64_t rows, const float* a, uint32_t r, const float* b, uint64_t stride, uint64_t d,
               float* t, uint64_t tstride) {
  while (rows > 0) {
    const uint64_t g = std::min<uint64_t>(rows, 4);
    if (split == 1) group_sums<1>(g, a, r, b, stride, d, t, tstride);
    else if (split == 2) group_sums<2>(g, a, r, b, stride, d, t, tstride);
    else group_sums<4>(g, a, r, b, stride, d, t, tstride);
    rows -= g;
    a += g;
    t += g * tstride;
  }
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

// Transposed B (P = M Q): column j's terms are row j of M (+ add), so the sums run along rows of M.
// The r sums of one row are spread over lanes: a vector of a lane plan holds up to 8 / S ranks
// whose sums split S ways (row_split), lane g S + s summing rank g's terms at places s modulo S,
// each lane in order. One step adds S terms of a row to all its lanes: the row's S floats repeated
// (a broadcast load) times the ranks' matching entries of A, laid out once per block of terms.
struct LanePlan {
  int split;
  std::vector<uint32_t> ranks;  // at most 8 / split
};

// The ranks of every row block of A (mc) grouped by their split, eight lanes a vector; all in order
// (split 1) for the columns Eigen does not pack.
std::vector<LanePlan> lane_plans(uint32_t r, uint64_t mc, bool packed) {
  std::vector<uint32_t> by_split[5];
  for (uint64_t i2 = 0; i2 < r; i2 += mc) {
    const uint64_t rows = std::min<uint64_t>(mc, r - i2);
    for (uint64_t i = 0; i < rows; ++i) by_split[packed ? row_split(i, rows) : 1].push_back(static_cast<uint32_t>(i2 + i));
  }
  std::vector<LanePlan> plans;
  for (int split : {1, 2, 4}) {
    const std::vector<uint32_t>& ranks = by_split[split];
    const size_t per = 8 / static_cast<size_t>(split);
    for (size_t g = 0; g < ranks.size(); g += per)
      plans.push_back({split, {ranks.begin() + static_cast<std::ptrdiff_t>(g),
                               ranks.begin() + static_cast<std::ptrdiff_t>(std::min(ranks.size(), g + per))}});
  }
  return plans;
}

// The places of a block of d terms that the split lanes sum (the rest are added in order after).
uint64_t split_end(int split, uint64_t d) {
  return split == 1 ? d : split == 2 ? (d & ~uint64_t{7}) : (d & ~uint64_t{3});
}

// A's entries for one plan and block [k2, k2 + d): qv[m * 8 + g S + s] = a[(k2 + m S + s) r + ranks[g]]
// (zero in unused lanes).
template <int S>
void plan_entries_split(const LanePlan& plan, const float* a, uint32_t r, uint64_t k2, uint64_t d, float* qv) {
  const uint64_t steps = split_end(S, d) / S;
  const size_t used = plan.ranks.size() * S;
  uint32_t rank[8 / S];
  std::copy(plan.ranks.begin(), plan.ranks.end(), rank);
  const float* row = a + k2 * r;
  for (uint64_t m = 0; m < steps; ++m, qv += 8, row += S * r) {
    for (size_t g = 0; g < plan.ranks.size(); ++g)
      for (int s = 0; s < S; ++s) qv[g * S + s] = row[s * r + rank[g]];
    for (size_t l = used; l < 8; ++l) qv[l] = 0.0f;
  }
}

void plan_entries(const LanePlan& plan, const float* a, uint32_t r, uint64_t k2, uint64_t d, float* qv) {
  if (plan.split == 1) plan_entries_split<1>(plan, a, r, k2, d, qv);
  else if (plan.split == 2) plan_entries_split<2>(plan, a, r, k2, d, qv);
  else plan_entries_split<4>(plan, a, r, k2, d, qv);
}

// Plan p's entries of A for every block of terms: block b at b * lane_block(kc, S) floats.
uint64_t lane_block(uint64_t kc, int split) { return (kc / static_cast<uint64_t>(split) + 1) * 8; }

// S consecutive floats repeated over eight lanes: one broadcast load.
template <int S>
inline __attribute__((always_inline)) V8 repeated(const float* p) {
  if constexpr (S == 1) {
    return reinterpret_cast<V8>(_mm256_broadcast_ss(p));
  } else if constexpr (S == 2) {
    typedef double D4 __attribute__((vector_size(32)));
    double v;  // the two floats' bits, read without a double's aliasing
    std::memcpy(&v, p, sizeof v);
    return reinterpret_cast<V8>(D4{v, v, v, v});
  } else {
    return reinterpret_cast<V8>(_mm256_broadcast_ps(reinterpret_cast<const __m128*>(p)));  // __m128 may alias
  }
}

// What the lanes' loop asks for ahead: nothing; the rows' own lines kRowAhead floats ahead (rows
// read where they are); or the next rows to stage, ahead_lines(S) lines of each of `next` a step,
// `lines` in all (as many as eight rows' staging needs: one line a step, two for S = 4).
enum class Ahead { kNone, kRows, kNext };
struct NextRows {
  const float* p[2] = {nullptr, nullptr};
  uint64_t lines = 0;
};
constexpr uint64_t kRowAhead = 64;
constexpr uint64_t ahead_lines(int split) { return split == 4 ? 2 : 1; }

// J rows' lanes over `steps` steps of S terms: out[j] lane g S + s = Σ_m row[j][m S + s] qv[m][g S + s],
// in order of m.
template <int S, int J, Ahead A>
void lane_steps(const float* const* row, const float* qv, uint64_t steps, NextRows next, V8* out) {
  V8 acc[J];
  for (int j = 0; j < J; ++j) acc[j] = V8{};
  for (uint64_t m = 0; m < steps; ++m) {
    const V8 q = load<V8>(qv + m * 8);
    if constexpr (A == Ahead::kRows)
      if ((m * S) % 16 == 0)
        for (int j = 0; j < J; ++j) __builtin_prefetch(row[j] + m * S + kRowAhead);
    if constexpr (A == Ahead::kNext)
      if (ahead_lines(S) * m < next.lines)
        for (const float* p : next.p)
          for (uint64_t l = 0; l < ahead_lines(S); ++l) __builtin_prefetch(p + 16 * (ahead_lines(S) * m + l), 0, 2);
    for (int j = 0; j < J; ++j) acc[j] = acc[j] + repeated<S>(row[j] + m * S) * q;
  }
  for (int j = 0; j < J; ++j) out[j] = acc[j];
}

template <int S, int J>
void lane_ahead(Ahead ahead, const float* const* row, const float* qv, uint64_t steps, const NextRows& next, V8* out) {
  if (ahead == Ahead::kRows) lane_steps<S, J, Ahead::kRows>(row, qv, steps, next, out);
  else if (ahead == Ahead::kNext) lane_steps<S, J, Ahead::kNext>(row, qv, steps, next, out);
  else lane_steps<S, J, Ahead::kNone>(row, qv, steps, next, out);
}

template <int J>
void lane_group(int split, Ahead ahead, const float* const* row, const float* qv, uint64_t steps,
                const NextRows& next, V8* out) {
  if (split == 1) lane_ahead<1, J>(ahead, row, qv, steps, next, out);
  else if (split == 2) lane_ahead<2, J>(ahead, row, qv, steps, next, out);
  else lane_ahead<4, J>(ahead, row, qv, steps, next, out);
}

// Each rank's sum from its lanes, as Eigen adds the split sums, then the block's remaining terms
// in order, then added to t[i * n + j].
void finish_lanes(const LanePlan& plan, const V8& acc, const float* a, uint32_t r, uint64_t k2, uint64_t d,
                  const float* row, uint64_t n, uint64_t j, float* t) {
  float l[8];
  store<V8>(l, acc);
  const int S = plan.split;
  for (size_t g = 0; g < plan.ranks.size(); ++g) {
    const float* x = l + g * static_cast<size_t>(S);
    float sum = S == 1 ? x[0] : S == 2 ? x[0] + x[1] : (x[0] + x[1]) + (x[2] + x[3]);
    const uint32_t i = plan.ranks[g];
    for (uint64_t k = split_end(S, d); k < d; ++k) sum = sum + a[(k2 + k) * r + i] * row[k];
    t[i * n + j] = sum + t[i * n + j];
  }
}

// Rows [j, j + J) of x + e, terms [k0, k0 + w), summed into buf (row jj at buf + jj w; x's entry
// first). Whole rows are one stretch of memory; a block of terms is read a line of each row at a time.
constexpr uint64_t kStageAhead = 128;  // floats of each row prefetched ahead when staging a block

template <int J>
void stage_sums(const float* x, const float* e, uint64_t depth, uint64_t j, uint64_t k0, uint64_t w, float* buf) {
  if (w == depth) {
    const float* xs = x + j * depth;
    const float* es = e + j * depth;
    for (uint64_t i = 0; i < J * depth; ++i) buf[i] = xs[i] + es[i];
    return;
  }
  const uint64_t whole = w / 16 * 16;
  for (uint64_t k = 0; k < whole; k += 16)
    for (int jj = 0; jj < J; ++jj) {
      const float* xs = x + (j + jj) * depth + k0 + k;
      const float* es = e + (j + jj) * depth + k0 + k;
      __builtin_prefetch(xs + kStageAhead);
      __builtin_prefetch(es + kStageAhead);
      for (int h = 0; h < 16; h += 8) store<V8>(buf + jj * w + k + h, load<V8>(xs + h) + load<V8>(es + h));
    }
  for (int jj = 0; jj < J; ++jj)
    for (uint64_t k = whole; k < w; ++k) {
      const uint64_t at = (j + jj) * depth + k0 + k;
      buf[jj * w + k] = x[at] + e[at];
    }
}

// Rows [j, j + J) of M (+ add) through every block of terms and every lane plan. M's rows are read
// where they are; M = m + add is summed into `buf` first: whole rows where eight fit in kStageFloats
// (the next J rows then asked for while the lanes compute), else a block of terms at a time.
constexpr uint64_t kStageFloats = uint64_t{1} << 16;

template <int J>
void row_group(const float* a, uint32_t r, const float* m, const float* add, uint64_t depth, uint64_t n, uint64_t kc,
               const std::vector<LanePlan>& plans, const std::vector<UninitVector<float>>& qv, uint64_t j, float* buf,
               float* t) {
  const bool direct = add == nullptr, whole = !direct && 8 * depth <= kStageFloats;
  NextRows next;
  if (whole) {
    stage_sums<J>(m, add, depth, j, 0, depth, buf);
    if (j + 2 * J <= n) next = {{m + (j + J) * depth, add + (j + J) * depth}, J * depth / 16};
  }
  const Ahead ahead = direct ? Ahead::kRows : whole ? Ahead::kNext : Ahead::kNone;
  for (uint64_t k2 = 0, b = 0; k2 < depth; k2 += kc, ++b) {
    const uint64_t d = std::min(kc, depth - k2);
    if (!whole && !direct) stage_sums<J>(m, add, depth, j, k2, d, buf);
    const float* row[J];
    for (int jj = 0; jj < J; ++jj)
      row[jj] = direct ? m + (j + jj) * depth + k2 : whole ? buf + jj * depth + k2 : buf + jj * d;
    for (size_t p = 0; p < plans.size(); ++p) {
      V8 acc[J];
      const int S = plans[p].split;
      const uint64_t steps = split_end(S, d) / static_cast<uint64_t>(S);
      // The first plan reads the rows from memory; the others find them in the first-level cache.
      lane_group<J>(S, p == 0 ? ahead : Ahead::kNone, row, qv[p].data() + b * lane_block(kc, S), steps, next, acc);
      if (p == 0 && ahead == Ahead::kNext) {  // the lines asked for move on with the steps
        for (const float*& q : next.p) q += 16 * ahead_lines(S) * steps;
        next.lines -= std::min(next.lines, ahead_lines(S) * steps);
      }
      for (int jj = 0; jj < J; ++jj) finish_lanes(plans[p], acc[jj], a, r, k2, d, row[jj], n, j + jj, t);
    }
  }
}

// transposed_sums' buffers, kept on the thread between calls (a layer's products run every round)
// unless they grew past kKeptFloats.
struct LaneScratch {
  std::vector<UninitVector<float>> packed, in_order;  // each plan's entries of A, a block after another
  UninitVector<float> rows;                           // the staged rows of x + e
};
constexpr uint64_t kKeptFloats = uint64_t{1} << 20;

uint64_t scratch_floats(const LaneScratch& s) {
  uint64_t n = s.rows.capacity();
  for (const auto* plans : {&s.packed, &s.in_order})
    for (const UninitVector<float>& v : *plans) n += v.capacity();
  return n;
}

void fill_entries(const std::vector<LanePlan>& plans, const float* a, uint32_t r, uint64_t depth, uint64_t kc,
                  std::vector<UninitVector<float>>& qv) {
  if (qv.size() < plans.size()) qv.resize(plans.size());
  for (size_t p = 0; p < plans.size(); ++p) {
    const uint64_t per = lane_block(kc, plans[p].split);
    qv[p].resize((depth + kc - 1) / kc * per);
    for (uint64_t k2 = 0, b = 0; k2 < depth; k2 += kc, ++b)
      plan_entries(plans[p], a, r, k2, std::min(kc, depth - k2), qv[p].data() + b * per);
  }
}

void transposed_sums(const float* a, uint32_t r, const float* m, const float* add, uint64_t depth, uint64_t n,
                     const Blocking& bl, const ColumnRuns& cols, float* t) {
  thread_local LaneScratch scratch;
  const std::vector<LanePlan> packed = cols.packed.empty() ? std::vector<LanePlan>{} : lane_plans(r, bl.mc, true);
  const std::vector<LanePlan> in_order = cols.in_order.empty() ? std::vector<LanePlan>{} : lane_plans(r, bl.mc, false);
  fill_entries(packed, a, r, depth, bl.kc, scratch.packed);
  fill_entries(in_order, a, r, depth, bl.kc, scratch.in_order);
  scratch.rows.resize(8 * (8 * depth <= kStageFloats ? depth : std::min(bl.kc, depth)));
  float* buf = scratch.rows.data();
  for (const auto& [j0, j1] : cols.packed) {
    uint64_t j = j0;
    // Eight rows at a time keep eight sums in flight; the last few rows go by fours, twos and ones.
    for (; j + 8 <= j1; j += 8) row_group<8>(a, r, m, add, depth, n, bl.kc, packed, scratch.packed, j, buf, t);
    for (; j + 4 <= j1; j += 4) row_group<4>(a, r, m, add, depth, n, bl.kc, packed, scratch.packed, j, buf, t);
    for (; j + 2 <= j1; j += 2) row_group<2>(a, r, m, add, depth, n, bl.kc, packed, scratch.packed, j, buf, t);
    for (; j < j1; ++j) row_group<1>(a, r, m, add, depth, n, bl.kc, packed, scratch.packed, j, buf, t);
  }
  for (uint64_t j : cols.in_order) row_group<1>(a, r, m, add, depth, n, bl.kc, in_order, scratch.in_order, j, buf, t);
  if (scratch_floats(scratch) > kKeptFloats) scratch = LaneScratch{};
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
          rows_sums(run.split, run.count, ak + run.i, r, rows + j, n, d, t + run.i * n + j, n);
    }
    for (uint64_t j : cols.in_order)
      rows_sums(1, whole.count, ak + whole.i, r, rows + j, n, d, t + whole.i * n + j, n);
  }
}

// The product (header comment) into t[i * n + j], which holds zeros; B = m + add when add is given,
// and then, not transposed, sum_out (which may be m or add) receives that sum.
void blocked_sums(const float* a, uint32_t r, const float* m, const float* add, float* sum_out, uint64_t depth,
                  uint64_t n, bool b_transposed, const Blocking& bl, float* t) {
  const ColumnRuns cols = column_runs(n, bl.nc);
  if (b_transposed) {
    transposed_sums(a, r, m, add, depth, n, bl, cols, t);
    return;
  }
  for (uint64_t i2 = 0; i2 < r; i2 += bl.mc) {
    const uint64_t rows = std::min(bl.mc, r - i2);
    const std::vector<RowRun> runs = row_runs(i2, rows);
    const RowRun whole{i2, rows, 1};
    streamed_sums(a, r, m, add, sum_out, depth, n, bl.kc, i2 == 0, cols, runs, whole, t);
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
  // Groups of up to four rows, Eigen's row blocks (nc) cut into fours; each row's entries depend on
  // that row of P alone, so the groups may run in any order.
  struct Group {
    uint64_t i, g, packed;
  };
  std::vector<Group> groups;
  for (uint64_t i2 = 0; i2 < rows; i2 += bl.nc) {
    const uint64_t block = std::min(bl.nc, rows - i2), packed_end = i2 + block / 4 * 4;
    for (uint64_t i = i2; i < i2 + block; i += 4)
      groups.push_back({i, std::min<uint64_t>(4, i2 + block - i), packed_end > i ? packed_end - i : 0});
  }
  auto run = [&](const Group& gr) {
    for (uint64_t k2 = 0; k2 < r; k2 += bl.kc) {
      auto* rows_of = gr.g == 4 ? outer_rows<4> : gr.g == 3 ? outer_rows<3> : gr.g == 2 ? outer_rows<2> : outer_rows<1>;
      rows_of(p + gr.i * r, q, qt.data(), cols, r, k2, std::min<uint64_t>(bl.kc, r - k2), bl.mc, gr.packed, alpha,
              !subtract && k2 == 0, out + gr.i * cols);
    }
  };
  // The residual's subtraction follows the pass that formed M front to back: last rows first, while
  // they are still in cache.
  if (subtract) std::for_each(groups.rbegin(), groups.rend(), run);
  else std::for_each(groups.begin(), groups.end(), run);
  return true;
}

}  // namespace ccsim::kern
