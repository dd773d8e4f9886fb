#include "kernels/quant/dynamiq_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

// The constants of correlated_uniform_from_block() that depend on the rank count only.
struct Strata {
  uint32_t ranks, start, half, mask;  // start: the permuted rank (rank % ranks); half: Feistel half width
  float step, per_step;               // γ's truncation step, and 1 / step (both powers of two)
  Strata(uint32_t rank, uint32_t n) : ranks(n), start(rank % n) {
    uint32_t bits = 2, int_bits = 0;
    while ((uint64_t{1} << bits) < n) bits += 2;
    while ((1u << int_bits) < n) ++int_bits;
    half = bits / 2;
    mask = (1u << half) - 1u;
    step = exact_pow2(-(24 - static_cast<int>(int_bits)));
    per_step = exact_pow2(24 - static_cast<int>(int_bits));
  }
};

#if defined(CCSIM_HAND_AVX2)
// feistel_permute(start, ranks, keys) in N vectors of eight lanes with their own keys: every lane
// walks its cycle until it lands below `ranks`; a lane that has landed keeps its value. The N
// vectors' walks interleave, so that one vector's multiplies fill the others' latency, and all walk
// until the last lane has landed.
template <int N>
__attribute__((target("avx2"))) void feistel8(const Strata& s, const __m256i (&keys)[N][4], __m256i (&result)[N]) {
  const __m256i mask = _mm256_set1_epi32(static_cast<int>(s.mask)), n = _mm256_set1_epi32(static_cast<int>(s.ranks));
  const __m256i c1 = _mm256_set1_epi32(static_cast<int>(0x9E3779B1u)), c2 = _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu));
  const __m128i half = _mm_cvtsi32_si128(static_cast<int>(s.half));
  __m256i x[N], walking[N];
  for (int g = 0; g < N; ++g) {
    x[g] = _mm256_set1_epi32(static_cast<int>(s.start));
    result[g] = _mm256_setzero_si256();
    walking[g] = _mm256_set1_epi32(-1);
  }
  for (;;) {
    __m256i l[N], r[N];
    for (int g = 0; g < N; ++g) {
      l[g] = _mm256_srl_epi32(x[g], half);
      r[g] = _mm256_and_si256(x[g], mask);
    }
    for (int k = 0; k < 4; ++k)
      for (int g = 0; g < N; ++g) {
        __m256i h = _mm256_mullo_epi32(_mm256_xor_si256(r[g], keys[g][k]), c1);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
        h = _mm256_mullo_epi32(h, c2);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
        const __m256i nl = r[g];
        r[g] = _mm256_xor_si256(l[g], _mm256_and_si256(h, mask));
        l[g] = nl;
      }
    __m256i any = _mm256_setzero_si256();
    for (int g = 0; g < N; ++g) {
      x[g] = _mm256_or_si256(_mm256_sll_epi32(l[g], half), r[g]);
      const __m256i at_or_above = _mm256_cmpeq_epi32(_mm256_max_epu32(x[g], n), x[g]);  // x >= ranks (unsigned)
      result[g] = _mm256_blendv_epi8(result[g], x[g], _mm256_andnot_si256(at_or_above, walking[g]));
      walking[g] = _mm256_and_si256(walking[g], at_or_above);
      any = _mm256_or_si256(any, walking[g]);
    }
    if (_mm256_testz_si256(any, any)) return;
  }
}

// (uint64(w) * n) >> 32 in every lane.
__attribute__((target("avx2"))) __m256i mul_high(__m256i w, __m256i n) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(w, n), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(w, 32), n);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// u[i .. i + 8N) = correlated_uniform_from_block({w0[i], w1[i], w2[i], w3[i]}, u[i], rank, ranks).
template <int N>
__attribute__((target("avx2"))) void correlate8(const uint32_t* w0, const uint32_t* w1, const uint32_t* w2,
                                                const uint32_t* w3, const Strata& s, float* u) {
  const __m256i n = _mm256_set1_epi32(static_cast<int>(s.ranks));
  const __m256 step = _mm256_set1_ps(s.step), ranks = _mm256_set1_ps(static_cast<float>(s.ranks));
  __m256i keys[N][4], d[N], walked[N];
  for (int g = 0; g < N; ++g) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + 8 * g));
    d[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w3 + 8 * g));
    keys[g][0] = a;
    keys[g][1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + 8 * g));
    keys[g][2] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w2 + 8 * g));
    keys[g][3] = _mm256_xor_si256(a, d[g]);
  }
  feistel8<N>(s, keys, walked);
  for (int g = 0; g < N; ++g) {
    const __m256i sum = _mm256_add_epi32(walked[g], mul_high(d[g], n));  // both < ranks <= 2^31
    const __m256i pi = _mm256_min_epu32(sum, _mm256_sub_epi32(sum, n));  // sum mod ranks
    float* ug = u + 8 * g;
    const __m256 gm = _mm256_mul_ps(_mm256_floor_ps(_mm256_div_ps(_mm256_loadu_ps(ug), step)), step);
    _mm256_storeu_ps(ug, _mm256_div_ps(_mm256_add_ps(_mm256_cvtepi32_ps(pi), gm), ranks));
  }
}

// correlate8() over entries [0, returned), eight vectors at a time, then one (a multiple of 8).
__attribute__((target("avx2"))) uint64_t correlate_avx2(const uint32_t* w0, const uint32_t* w1, const uint32_t* w2,
                                                        const uint32_t* w3, uint64_t m, const Strata& s, float* u) {
  uint64_t i = 0;
  for (; i + 64 <= m; i += 64) correlate8<8>(w0 + i, w1 + i, w2 + i, w3 + i, s, u + i);
  for (; i + 8 <= m; i += 8) correlate8<1>(w0 + i, w1 + i, w2 + i, w3 + i, s, u + i);
  return i;
}

// GCC 12 warns "may be used uninitialized" inside its own AVX-512 headers (below, grid_round16).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The Feistel cycle walk in sixteen AVX-512 lanes a vector, compacted: every entry takes the walk's
// first step; the entries whose value is still at or above `ranks` (a fraction 1 - ranks / 4^half of
// them, half at eight ranks) are queued, with their index, round keys and value, and the queue takes
// steps until it is empty, keeping only the entries still walking. So each entry takes as many steps
// as its own walk needs, not as many as the longest walk among the lanes it shares registers with
// (about six, for 128 lanes at eight ranks).
struct WalkQueue {
  static constexpr int kArrays = 6;  // entry index, the four round keys, the walk's value
  static constexpr uint64_t kSlack = 64;  // a step's stores and masked loads stay inside the arrays
  // The arrays, passed by value: pointers the walk's stores cannot alias stay in registers.
  struct Arrays {
    uint32_t* a[kArrays];
  };
  std::vector<uint32_t> data;
  Arrays reserve(uint64_t m) {
    data.resize(kArrays * (m + kSlack));
    Arrays q;
    for (int j = 0; j < kArrays; ++j) q.a[j] = data.data() + j * (m + kSlack);
    return q;
  }
};

// feistel_permute()'s four rounds on the halves (l, r) of N vectors, interleaved so that one
// vector's multiplies fill the others' latency. A round keeps only the low `half` bits of its hash
// h ^ (h >> 13), bits below 16 of h when half <= 3; those bits of the second product depend only on
// the low 16 bits of its factors, so kNarrow (half <= 3) takes it in 16-bit lanes (the upper half
// of each 32-bit lane then holds another product, whose bits the shift and the mask never reach),
// at half a 32-bit multiply's cost.
template <int N, bool kNarrow>
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void
feistel_rounds(const Strata& s, const __m512i (&key)[4][N], __m512i (&l)[N], __m512i (&r)[N]) {
  const __m512i mask = _mm512_set1_epi32(static_cast<int>(s.mask));
  const __m512i c1 = _mm512_set1_epi32(static_cast<int>(0x9E3779B1u));
  const __m512i c2 = _mm512_set1_epi32(static_cast<int>(0x85EBCA6Bu));
  for (int k = 0; k < 4; ++k)
    for (int g = 0; g < N; ++g) {
      __m512i h = _mm512_mullo_epi32(_mm512_xor_si512(r[g], key[k][g]), c1);
      h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 15));
      h = kNarrow ? _mm512_mullo_epi16(h, c2) : _mm512_mullo_epi32(h, c2);
      h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
      const __m512i nl = r[g];
      r[g] = _mm512_xor_si512(l[g], _mm512_and_si512(h, mask));
      l[g] = nl;
    }
}

// One step of feistel_permute()'s walk (its do-loop body) in N vectors.
template <int N>
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void
walk_step(const Strata& s, const __m512i (&key)[4][N], __m512i (&x)[N]) {
  const __m512i mask = _mm512_set1_epi32(static_cast<int>(s.mask));
  const __m128i half = _mm_cvtsi32_si128(static_cast<int>(s.half));
  __m512i l[N], r[N];
  for (int g = 0; g < N; ++g) {
    l[g] = _mm512_srl_epi32(x[g], half);
    r[g] = _mm512_and_si512(x[g], mask);
  }
  if (s.half <= 3) feistel_rounds<N, true>(s, key, l, r);
  else feistel_rounds<N, false>(s, key, l, r);
  for (int g = 0; g < N; ++g) x[g] = _mm512_or_si512(_mm512_sll_epi32(l[g], half), r[g]);
}

// Appends the lanes `keep` of an entry's vectors (index, keys, value) at `count`; returns the new
// count. Whole-vector stores of the compressed lanes (a compressing store to memory is slow on some
// machines); the queue's slack takes what lies past the kept lanes.
__attribute__((target("avx2,avx512f"), always_inline)) inline uint64_t
enqueue(WalkQueue::Arrays q, uint64_t count, __mmask16 keep, const __m512i (&v)[WalkQueue::kArrays]) {
  for (int j = 0; j < WalkQueue::kArrays; ++j)
    _mm512_storeu_si512(q.a[j] + count, _mm512_maskz_compress_epi32(keep, v[j]));
  return count + static_cast<uint64_t>(__builtin_popcount(keep));
}

// The round keys of the N vectors at entry i (feistel_permute()'s keys from the permutation block:
// w0, w1, w2, w0 ^ w3) and the walk's start.
template <int N>
__attribute__((target("avx2,avx512f"), always_inline)) inline void
walk_start(const uint32_t* w0, const uint32_t* w1, const uint32_t* w2, const uint32_t* w3, uint64_t i, const Strata& s,
    __m512i (&key)[4][N], __m512i (&x)[N]) {
  for (int g = 0; g < N; ++g) {
    const uint64_t at = i + 16 * g;
    key[0][g] = _mm512_loadu_si512(w0 + at);
    key[1][g] = _mm512_loadu_si512(w1 + at);
    key[2][g] = _mm512_loadu_si512(w2 + at);
    key[3][g] = _mm512_xor_si512(key[0][g], _mm512_loadu_si512(w3 + at));
    x[g] = _mm512_set1_epi32(static_cast<int>(s.start));
  }
}

// The first step for the N vectors at entry i: the value of each entry that lands goes to walked[],
// the others to the queue (appended at `count`; returns the new count).
template <int N>
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline uint64_t
walk_first(const uint32_t* w0, const uint32_t* w1, const uint32_t* w2, const uint32_t* w3, uint64_t i, const Strata& s,
    WalkQueue::Arrays q, uint64_t count, uint32_t* walked) {
  const __m512i n = _mm512_set1_epi32(static_cast<int>(s.ranks));
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i key[4][N], x[N];
  walk_start<N>(w0, w1, w2, w3, i, s, key, x);
  walk_step<N>(s, key, x);
  for (int g = 0; g < N; ++g) {
    const uint64_t at = i + 16 * g;
    _mm512_storeu_si512(walked + at, x[g]);  // the queued lanes are overwritten when they land
    const __mmask16 walking = _mm512_cmpge_epu32_mask(x[g], n);
    if (walking == 0) continue;
    const __m512i v[WalkQueue::kArrays] = {_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(at)), iota),
                                           key[0][g], key[1][g], key[2][g], key[3][g], x[g]};
    count = enqueue(q, count, walking, v);
  }
  return count;
}

// One step for every queued entry, N vectors at a time: the entries that land write their value to
// walked[] (at their index), the others are queued again, in place (a group's stores land at or
// before the lanes it has already loaded). Returns the new count.
template <int N>
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline uint64_t
walk_queued(WalkQueue::Arrays q, uint64_t count, const Strata& s, uint32_t* walked) {
  const __m512i n = _mm512_set1_epi32(static_cast<int>(s.ranks));
  uint64_t out = 0;
  for (uint64_t j = 0; j < count; j += 16 * N) {
    __m512i v[N][WalkQueue::kArrays], key[4][N], x[N];
    __mmask16 valid[N];
    for (int g = 0; g < N; ++g) {
      const uint64_t at = j + 16 * g, left = at < count ? count - at : 0;
      valid[g] = left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1u);
      for (int a = 0; a < WalkQueue::kArrays; ++a) v[g][a] = _mm512_maskz_loadu_epi32(valid[g], q.a[a] + at);
      for (int k = 0; k < 4; ++k) key[k][g] = v[g][1 + k];
      x[g] = v[g][5];
    }
    walk_step<N>(s, key, x);
    for (int g = 0; g < N; ++g) {
      const __mmask16 walking = _mm512_mask_cmpge_epu32_mask(valid[g], x[g], n);
      _mm512_mask_i32scatter_epi32(walked, static_cast<__mmask16>(valid[g] & ~walking), v[g][0], x[g], 4);
      if (walking == 0) continue;
      v[g][5] = x[g];
      out = enqueue(q, out, walking, v[g]);
    }
  }
  return out;
}

// u[i .. i + 16) from the walk's values there: the rotation, then γ (correlated_uniform_from_block()).
__attribute__((target("avx2,avx512f"), always_inline)) inline void
correlate16(const uint32_t* w3, __m512i walked, uint64_t i, const Strata& s, float* u) {
  const __m512i n = _mm512_set1_epi32(static_cast<int>(s.ranks));
  const __m512 step = _mm512_set1_ps(s.step), ranks = _mm512_set1_ps(static_cast<float>(s.ranks));
  const __m512 per_step = _mm512_set1_ps(s.per_step);
  const __m512i d = _mm512_loadu_si512(w3 + i);
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(d, n), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(d, 32), n);
  const __m512i sum = _mm512_add_epi32(walked, _mm512_mask_blend_epi32(0xAAAA, even, odd));
  const __m512i pi = _mm512_min_epu32(sum, _mm512_sub_epi32(sum, n));  // sum mod ranks
  const __m512 q = _mm512_mul_ps(_mm512_loadu_ps(u + i), per_step);  // u / step exactly (a power of two)
  const __m512 gm = _mm512_mul_ps(_mm512_roundscale_ps(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), step);
  _mm512_storeu_ps(u + i, _mm512_div_ps(_mm512_add_ps(_mm512_cvtepi32_ps(pi), gm), ranks));
}

// correlate8<N>() for the N vectors at entry i, the walk in lock step: every lane steps until the
// last of them has landed, a landed lane keeping its value. Cheapest where every walk is short.
template <int N>
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void
correlate_lockstep(const uint32_t* w0, const uint32_t* w1, const uint32_t* w2, const uint32_t* w3, uint64_t i,
    const Strata& s, float* u) {
  const __m512i n = _mm512_set1_epi32(static_cast<int>(s.ranks));
  __m512i key[4][N], x[N], result[N];
  __mmask16 walking[N];
  walk_start<N>(w0, w1, w2, w3, i, s, key, x);
  for (int g = 0; g < N; ++g) {
    result[g] = _mm512_setzero_si512();
    walking[g] = 0xFFFF;
  }
  for (;;) {
    walk_step<N>(s, key, x);
    __mmask16 any = 0;
    for (int g = 0; g < N; ++g) {
      const __mmask16 at_or_above = _mm512_cmpge_epu32_mask(x[g], n);
      result[g] = _mm512_mask_mov_epi32(result[g], static_cast<__mmask16>(walking[g] & ~at_or_above), x[g]);
      walking[g] = static_cast<__mmask16>(walking[g] & at_or_above);
      any = static_cast<__mmask16>(any | walking[g]);
    }
    if (any == 0) break;
  }
  for (int g = 0; g < N; ++g) correlate16(w3, result[g], i + 16 * g, s, u);
}

// correlate8<8>() in sixteen AVX-512 lanes; returns the entries done (a multiple of 16). The walk in
// lock step where at most two values of the domain lie at or above `ranks` (every walk then ends
// within three steps: at two, three and four ranks, at every power of four and just below one),
// compacted (above) otherwise: at eight ranks a lock step of 128 lanes takes about six steps, the
// compacted walk about two an entry.
__attribute__((target("avx2,avx512f,avx512bw"))) uint64_t correlate_avx512(const uint32_t* w0, const uint32_t* w1,
                                                                  const uint32_t* w2, const uint32_t* w3, uint64_t m,
                                                                  const Strata& s, float* u) {
  const uint64_t full = m / 16 * 16;
  uint64_t i = 0;
  if ((uint64_t{1} << (2 * s.half)) - s.ranks <= 2) {
    constexpr int N = 8;
    for (; i + 16 * N <= full; i += 16 * N) correlate_lockstep<N>(w0, w1, w2, w3, i, s, u);
    for (; i < full; i += 16) correlate_lockstep<1>(w0, w1, w2, w3, i, s, u);
    return full;
  }
  thread_local WalkQueue queue;
  thread_local std::vector<uint32_t> walked;
  const WalkQueue::Arrays q = queue.reserve(full);
  walked.resize(full);
  uint64_t count = 0;
  uint32_t* const landed = walked.data();
  constexpr int N = 4;  // the first step's vectors at once: eight would spill their keys
  for (; i + 16 * N <= full; i += 16 * N) count = walk_first<N>(w0, w1, w2, w3, i, s, q, count, landed);
  for (; i < full; i += 16) count = walk_first<1>(w0, w1, w2, w3, i, s, q, count, landed);
  while (count > 0) count = walk_queued<4>(q, count, s, landed);
  for (i = 0; i < full; i += 16) correlate16(w3, _mm512_loadu_si512(landed + i), i, s, u);
  return full;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// std::fmax(best, a) for a best that is never NaN (the running maximum from 0), inline: a NaN `a`
// leaves it.
inline float max_skipping_nan(float best, float a) { return a > best ? a : best; }

#if defined(CCSIM_HAND_AVX2)
// The 32-bit lanes' low bytes, eight codes, stored at `out`.
__attribute__((target("avx2"))) void store_low_bytes(__m256i code, uint8_t* out) {
  const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i low_dwords = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(code, pick), low_dwords);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
}

// A grid of count = 2^k levels (k >= 1) in registers for eight-lane rounding. Up to 8 levels: all
// of them in `first`. More: every (count/16)-th level (16 "coarse" levels) in `first` and `second`,
// and each coarse level's successor in `next0`, `next1` (the last coarse level's: the top level);
// with 128 levels (8-bit codes) also the seven levels after each coarse one, transposed:
// fine[f - 1][k] = levels[8k + f].
struct GridLanes {
  const float* levels;
  uint32_t count, stride, shift;  // stride = count / 16 = 2^shift (count > 8)
  alignas(32) float coarse[16], next[16];
  alignas(32) float fine[7][16];
  __m256 first, second, next0, next1;

  // n = 0: no grid (1-bit codes, whose `levels` may be null); nothing is read.
  __attribute__((target("avx2"))) GridLanes(const float* lv, uint32_t n) : levels(lv), count(n), stride(n / 16) {
    shift = 0;
    while (stride > (1u << shift)) ++shift;
    for (uint32_t j = 0; j < 16; ++j) {
      coarse[j] = n <= 8 ? (j < n ? lv[j] : 0.0f) : lv[j * stride];
      next[j] = n <= 8 ? 0.0f : lv[j < 15 ? (j + 1) * stride : n - 1];
      for (uint32_t f = 1; f < 8; ++f) fine[f - 1][j] = n > 8 && stride == 8 ? lv[8 * j + f] : 0.0f;
    }
    first = _mm256_load_ps(coarse);
    second = _mm256_load_ps(coarse + 8);
    next0 = _mm256_load_ps(next);
    next1 = _mm256_load_ps(next + 8);
  }
};

// lanes[k] of a 16-lane table held in two registers, k < 16.
__attribute__((target("avx2"))) __m256 lookup16(__m256 lo8, __m256 hi8, __m256i k) {
  const __m256 above = _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(7)));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo8, k), _mm256_permutevar8x32_ps(hi8, k), above);
}

// Eight magnitude indices r of dynamiq_entry_code() at q >= 2: the grid's floor index of t (the
// largest i with levels[i] <= t; 0 below the grid or for NaN), one up where u falls below the
// rounding probability. The floor index counts the (coarse) levels at or below t; with more than 8
// levels it then counts the inner levels of the coarse interval (128 levels: from the transposed
// rows) or searches it branch-free with gathers (other sizes). The neighbours levels[i],
// levels[i + 1] come from the registers or the levels that step compared.
__attribute__((target("avx2"))) __m256i grid_round8(__m256 t, __m256 u, const GridLanes& g) {
  const uint32_t counted = g.count <= 8 ? g.count : 16;
  __m256i idx = _mm256_setzero_si256();
  for (uint32_t j = 1; j < counted; ++j)  // a compare mask is -1: subtracting it counts
    idx = _mm256_sub_epi32(idx, _mm256_castps_si256(_mm256_cmp_ps(_mm256_set1_ps(g.coarse[j]), t, _CMP_LE_OQ)));
  const __m256i top = _mm256_set1_epi32(static_cast<int>(g.count - 1));
  __m256 lo, hi;
  if (g.count <= 8) {
    lo = _mm256_permutevar8x32_ps(g.first, idx);
    hi = _mm256_permutevar8x32_ps(g.first, _mm256_min_epi32(_mm256_add_epi32(idx, _mm256_set1_epi32(1)), top));
  } else {
    lo = lookup16(g.first, g.second, idx);
    hi = lookup16(g.next0, g.next1, idx);
    const __m256i coarse = idx;
    idx = _mm256_sll_epi32(idx, _mm_cvtsi32_si128(static_cast<int>(g.shift)));
    // Within [idx, idx + stride): with 8 levels to a coarse interval, each of its seven inner
    // levels is permuted out of the transposed rows and counted where at or below t (the largest
    // such is levels[i], the smallest above is levels[i + 1]); otherwise a binary search, in which
    // a rejected candidate is above t and the last one rejected is the nearest above the index.
    for (uint32_t f = 1; g.stride == 8 && f < 8; ++f) {
      const __m256 at = lookup16(_mm256_load_ps(g.fine[f - 1]), _mm256_load_ps(g.fine[f - 1] + 8), coarse);
      const __m256 le = _mm256_cmp_ps(at, t, _CMP_LE_OQ);
      idx = _mm256_sub_epi32(idx, _mm256_castps_si256(le));
      lo = _mm256_blendv_ps(lo, at, le);
      hi = _mm256_min_ps(hi, _mm256_blendv_ps(at, hi, le));  // the smallest level above t
    }
    for (uint32_t step = g.stride == 8 ? 0 : g.stride / 2; step >= 1; step /= 2) {
      const __m256i cand = _mm256_add_epi32(idx, _mm256_set1_epi32(static_cast<int>(step)));
      const __m256 at = _mm256_i32gather_ps(g.levels, cand, 4);
      const __m256 le = _mm256_cmp_ps(at, t, _CMP_LE_OQ);
      idx = _mm256_blendv_epi8(idx, cand, _mm256_castps_si256(le));
      lo = _mm256_blendv_ps(lo, at, le);
      hi = _mm256_blendv_ps(at, hi, le);
    }
  }
  const __m256 p = _mm256_div_ps(_mm256_sub_ps(t, lo), _mm256_sub_ps(hi, lo));
  const __m256 up = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(t, lo, _CMP_GT_OQ), _mm256_cmp_ps(u, p, _CMP_LT_OQ)),
                                  _mm256_castsi256_ps(_mm256_cmpgt_epi32(top, idx)));
  return _mm256_sub_epi32(idx, _mm256_castps_si256(up));
}

// codes[i] = the code of x[i] in a group normalized by div[i] (0 where the group is not coded),
// eight entries at a time; returns the entries done (a multiple of 8).
__attribute__((target("avx2"))) uint64_t code_row_avx2(const float* x, const float* div, const float* u, uint64_t m,
                                                       uint32_t q, const float* levels, uint8_t* codes) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i sign_bit = _mm256_set1_epi32(q > 1 ? static_cast<int>(1u << (q - 1)) : 0);
  const GridLanes grid(levels, q > 1 ? 1u << (q - 1) : 0u);
  uint64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i), d = _mm256_loadu_ps(div + i), uu = _mm256_loadu_ps(u + i);
    const __m256 coded = _mm256_and_ps(_mm256_cmp_ps(d, zero, _CMP_GT_OQ), _mm256_cmp_ps(d, inf, _CMP_LT_OQ));
    __m256i code;
    if (q == 1) {  // min/max return their second operand on NaN, as fmin/fmax return the number
      const __m256 y = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, d), _mm256_set1_ps(-1.0f)), one);
      const __m256 p = _mm256_mul_ps(_mm256_add_ps(y, one), _mm256_set1_ps(0.5f));
      code = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cmp_ps(uu, p, _CMP_LT_OQ)), 31);
    } else {
      const __m256 t = _mm256_min_ps(_mm256_div_ps(_mm256_and_ps(v, magnitude), d), one);
      const __m256i r = grid_round8(t, uu, grid);
      const __m256i negative = _mm256_srai_epi32(_mm256_castps_si256(v), 31);
      const __m256i nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(r, _mm256_setzero_si256()), _mm256_set1_epi32(-1));
      code = _mm256_or_si256(r, _mm256_and_si256(_mm256_and_si256(negative, nonzero), sign_bit));
    }
    store_low_bytes(_mm256_and_si256(code, _mm256_castps_si256(coded)), codes + i);
  }
  return i;
}

// GCC 12 warns "may be used uninitialized" inside its own AVX-512 headers, whose intrinsics start
// from an undefined register (_mm512_undefined_*); the warning is about the header, not this code.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// grid_round8() and code_row_avx2() in sixteen AVX-512 lanes, with the same operations lane by
// lane: a 16-level table is one register (a permute, where AVX2 needs two and a blend), compares
// give masks, and the eight-code store is one narrowing move.
__attribute__((target("avx2,avx512f"))) __m512i grid_round16(__m512 t, __m512 u, const GridLanes& g) {
  const __m512i one = _mm512_set1_epi32(1);
  const uint32_t counted = g.count <= 8 ? g.count : 16;
  __m512i idx = _mm512_setzero_si512();
  for (uint32_t j = 1; j < counted; ++j)
    idx = _mm512_mask_add_epi32(idx, _mm512_cmp_ps_mask(_mm512_set1_ps(g.coarse[j]), t, _CMP_LE_OQ), idx, one);
  const __m512i top = _mm512_set1_epi32(static_cast<int>(g.count - 1));
  const __m512 coarse_levels = _mm512_loadu_ps(g.coarse);
  __m512 lo, hi;
  if (g.count <= 8) {
    lo = _mm512_permutexvar_ps(idx, coarse_levels);
    hi = _mm512_permutexvar_ps(_mm512_min_epi32(_mm512_add_epi32(idx, one), top), coarse_levels);
  } else {
    lo = _mm512_permutexvar_ps(idx, coarse_levels);
    hi = _mm512_permutexvar_ps(idx, _mm512_loadu_ps(g.next));
    const __m512i coarse = idx;
    idx = _mm512_sll_epi32(idx, _mm_cvtsi32_si128(static_cast<int>(g.shift)));
    for (uint32_t f = 1; g.stride == 8 && f < 8; ++f) {
      const __m512 at = _mm512_permutexvar_ps(coarse, _mm512_loadu_ps(g.fine[f - 1]));
      const __mmask16 le = _mm512_cmp_ps_mask(at, t, _CMP_LE_OQ);
      idx = _mm512_mask_add_epi32(idx, le, idx, one);
      lo = _mm512_mask_blend_ps(le, lo, at);
      hi = _mm512_min_ps(hi, _mm512_mask_blend_ps(le, at, hi));
    }
    for (uint32_t step = g.stride == 8 ? 0 : g.stride / 2; step >= 1; step /= 2) {
      const __m512i cand = _mm512_add_epi32(idx, _mm512_set1_epi32(static_cast<int>(step)));
      const __m512 at = _mm512_i32gather_ps(cand, g.levels, 4);
      const __mmask16 le = _mm512_cmp_ps_mask(at, t, _CMP_LE_OQ);
      idx = _mm512_mask_blend_epi32(le, idx, cand);
      lo = _mm512_mask_blend_ps(le, lo, at);
      hi = _mm512_mask_blend_ps(le, at, hi);
    }
  }
  const __m512 p = _mm512_div_ps(_mm512_sub_ps(t, lo), _mm512_sub_ps(hi, lo));
  const __mmask16 up = _mm512_cmp_ps_mask(t, lo, _CMP_GT_OQ) & _mm512_cmp_ps_mask(u, p, _CMP_LT_OQ) &
                       _mm512_cmpgt_epi32_mask(top, idx);
  return _mm512_mask_add_epi32(idx, up, idx, one);
}

// Unlike code_row_avx2(), the divisors come one a group (gdiv[g] for entries of group g, whose
// size is a multiple of 16).
__attribute__((target("avx2,avx512f"))) uint64_t code_row_avx512(const float* x, const float* gdiv, uint32_t group,
                                                                 const float* u, uint64_t m, uint32_t q,
                                                                 const float* levels, uint8_t* codes) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), zero_i = _mm512_setzero_si512();
  const __m512i sign_bit = _mm512_set1_epi32(q > 1 ? static_cast<int>(1u << (q - 1)) : 0);
  const GridLanes grid(levels, q > 1 ? 1u << (q - 1) : 0u);
  uint64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i), d = _mm512_set1_ps(gdiv[i / group]), uu = _mm512_loadu_ps(u + i);
    const __mmask16 coded = _mm512_cmp_ps_mask(d, zero, _CMP_GT_OQ) & _mm512_cmp_ps_mask(d, inf, _CMP_LT_OQ);
    __m512i code;
    if (q == 1) {  // min/max return their second operand on NaN, as fmin/fmax return the number
      const __m512 y = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, d), _mm512_set1_ps(-1.0f)), one);
      const __m512 p = _mm512_mul_ps(_mm512_add_ps(y, one), _mm512_set1_ps(0.5f));
      code = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(uu, p, _CMP_LT_OQ), _mm512_set1_epi32(1));
    } else {
      const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), magnitude));
      const __m512 t = _mm512_min_ps(_mm512_div_ps(a, d), one);
      const __m512i r = grid_round16(t, uu, grid);
      const __mmask16 negative_nonzero =
          _mm512_cmplt_epi32_mask(_mm512_castps_si512(v), zero_i) & _mm512_cmpneq_epi32_mask(r, zero_i);
      code = _mm512_mask_or_epi32(r, negative_nonzero, r, sign_bit);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(coded, code)));
  }
  return i;
}

// group_maxima_avx2() for groups of a multiple of 16: the lanes' maxima are never NaN and at least
// +0, so the reduction's order does not matter.
__attribute__((target("avx2,avx512f"))) uint64_t group_maxima_avx512(const float* x, uint64_t m, uint32_t group,
                                                                     float* gmax) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  uint64_t g = 0;
  for (; (g + 1) * group <= m; ++g) {
    __m512 acc = _mm512_setzero_ps();
    for (uint64_t i = g * group; i < (g + 1) * group; i += 16) {
      const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + i)), magnitude));
      acc = _mm512_max_ps(a, acc);  // NaN: keeps acc
    }
    gmax[g] = _mm512_reduce_max_ps(acc);
  }
  return g;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// gmax[g] = max |x| over each whole group of `group` entries (a multiple of 8), NaN skipped as
// fmax skips it; returns the groups done.
__attribute__((target("avx2"))) uint64_t group_maxima_avx2(const float* x, uint64_t m, uint32_t group, float* gmax) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  uint64_t g = 0;
  for (; (g + 1) * group <= m; ++g) {
    __m256 acc = _mm256_setzero_ps();
    for (uint64_t i = g * group; i < (g + 1) * group; i += 8)
      acc = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), magnitude), acc);  // NaN: keeps acc
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float best = 0.0f;
    for (const float a : lanes) best = max_skipping_nan(best, a);
    gmax[g] = best;
  }
  return g;
}

// dynamiq_group_code_from(gmax[g], sg_scale, u[g]) for eight groups at a time into r[g]; returns
// the groups done (a multiple of 8).
__attribute__((target("avx2"))) uint64_t group_codes_avx2(const float* gmax, const float* u, uint64_t groups,
                                                          float sg_scale, uint8_t* r) {
  if (!(sg_scale > 0.0f)) return 0;
  const __m256 sg = _mm256_set1_ps(sg_scale), full = _mm256_set1_ps(255.0f);
  uint64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    const __m256 t = _mm256_min_ps(_mm256_mul_ps(_mm256_div_ps(_mm256_loadu_ps(gmax + g), sg), full), full);
    const __m256 low = _mm256_floor_ps(t);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(low, full, _CMP_LT_OQ),
                                    _mm256_cmp_ps(_mm256_loadu_ps(u + g), _mm256_sub_ps(t, low), _CMP_LT_OQ));
    const __m256 code = _mm256_add_ps(low, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
    store_low_bytes(_mm256_cvttps_epi32(code), r + g);
  }
  return g;
}
#endif

// The scales and group codes of one super-group (dynamiq_encode_sg_with()'s, with the group-scale
// draws made at once); gmax[g] becomes group g's divisor (the exact group maximum under a
// hierarchical scale, the group's bf16 scale in a flat block).
void encode_scales(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key, uint64_t first_group,
                   uint8_t* out, std::vector<float>& gmax) {
  const uint64_t groups = (m + c.group - 1) / c.group;
  gmax.resize(groups);
  uint64_t g = 0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx512() && c.group % 16 == 0) g = group_maxima_avx512(x, m, c.group, gmax.data());
  else if (hand_avx2() && c.group % 8 == 0) g = group_maxima_avx2(x, m, c.group, gmax.data());
#endif
  for (; g < groups; ++g) {
    float best = 0.0f;
    for (uint64_t i = g * c.group; i < std::min(m, (g + 1) * c.group); ++i)
      best = max_skipping_nan(best, std::fabs(x[i]));
    gmax[g] = best;
  }
  if (c.hierarchical) {
    float amax = 0.0f;
    for (const float a : gmax) amax = max_skipping_nan(amax, a);
    const uint16_t h = bf16_ceil(amax);
    out[0] = static_cast<uint8_t>(h);
    out[1] = static_cast<uint8_t>(h >> 8);
    const float sg_scale = bf16_to_float(h);
    thread_local std::vector<float> gu;
    gu.resize(groups);
    uniform_fill(key, kDynamiqScaleIndexBase + first_group, groups, gu.data());
    g = 0;
#if defined(CCSIM_HAND_AVX2)
    if (hand_avx2()) g = group_codes_avx2(gmax.data(), gu.data(), groups, sg_scale, out + 2);
#endif
    for (; g < groups; ++g) out[2 + g] = dynamiq_group_code_from(gmax[g], sg_scale, gu[g]);
  } else {
    for (g = 0; g < groups; ++g) {  // the group's scale, which is also its divisor
      const uint16_t h = bf16_ceil(gmax[g]);
      out[2 * g] = static_cast<uint8_t>(h);
      out[2 * g + 1] = static_cast<uint8_t>(h >> 8);
      gmax[g] = bf16_to_float(h);
    }
  }
}

// div[i] = the divisor of entry i's group, for the rows that read one per entry.
void fill_divisors(const std::vector<float>& gdiv, uint32_t group, uint64_t m, std::vector<float>& div) {
  div.resize(m);
  for (uint64_t g = 0; g < gdiv.size(); ++g)
    std::fill(div.begin() + static_cast<int64_t>(g * group),
              div.begin() + static_cast<int64_t>(std::min(m, (g + 1) * group)), gdiv[g]);
}

// The value of every code of width q <= 8 at scale 1: ±Q[r], or ±1 at q = 1. Times a positive
// scale it is dynamiq_entry_value(code, scale, q, levels): (-a)·s == -(a·s) in IEEE arithmetic.
struct SignedLevels {
  uint32_t q = 0;
  float levels[128];  // the grid the table was built from (2^(q-1) magnitudes; compared by value)
  float value[256];

  bool built_from(const float* lv, uint32_t width) const {
    return q == width && (width == 1 || std::memcmp(levels, lv, sizeof(float) << (width - 1)) == 0);
  }
  void build(const float* lv, uint32_t width) {
    q = width;
    if (width > 1) std::memcpy(levels, lv, sizeof(float) << (width - 1));
    for (uint32_t code = 0; code < (1u << width); ++code) value[code] = dynamiq_entry_value(code, 1.0f, width, lv);
  }
};

// out[i] (+)= value[codes[i]] * scale[i], or 0 where the scale is not positive.
CCSIM_VECTOR_ROW void decode_row(const uint8_t* codes, const float* scale, uint64_t n, const float* value,
                                bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] = out[i] + (scale[i] > 0.0f ? value[codes[i]] * scale[i] : 0.0f);
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = scale[i] > 0.0f ? value[codes[i]] * scale[i] : 0.0f;
  }
}

#if defined(CCSIM_HAND_AVX2)
// The 32-bit word holding codes i .. i + 7 of width q <= 4 (i a multiple of 8), reading only
// their q bytes.
inline uint32_t eight_codes_word(const uint8_t* payload, uint64_t i, uint32_t q) {
  const uint8_t* p = payload + i * q / 8;
  switch (q) {
    case 1: return p[0];
    case 2: return p[0] | uint32_t{p[1]} << 8;
    default: {
      uint32_t w;
      std::memcpy(&w, p, 4);
      return w;
    }
  }
}

// Decodes the packed codes of a super-group whose groups are whole multiples of 8 entries, eight
// at a time straight from the payload: codes shifted out of one word (q <= 4) or widened from
// bytes (q = 8), their values from two registers (q <= 4: at most 16) or gathered from the table,
// times the group's scale (0 where it is not positive), as decode_row(); returns the entries done.
__attribute__((target("avx2"))) uint64_t decode_packed_avx2(const uint8_t* payload, const float* gscale,
                                                            uint32_t group, uint64_t m, const SignedLevels& table,
                                                            bool accumulate, float* out) {
  const uint32_t q = table.q;
  const __m256 first = _mm256_loadu_ps(table.value), second = _mm256_loadu_ps(table.value + 8);
  const __m256i shifts = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(static_cast<int>(q)));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>((1u << q) - 1u));
  uint64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256i code =
        q == 8 ? _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(payload + i)))
               : _mm256_and_si256(
                     _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(eight_codes_word(payload, i, q))), shifts),
                     mask);
    const __m256 value = q <= 4 ? lookup16(first, second, code) : _mm256_i32gather_ps(table.value, code, 4);
    const float scale = gscale[i / group];
    __m256 v = scale > 0.0f ? _mm256_mul_ps(value, _mm256_set1_ps(scale)) : _mm256_setzero_ps();
    if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  return i;
}

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (above)
#endif
// decode_packed_avx2() sixteen entries at a time, for groups of a multiple of 16: with q <= 4 the
// 16-entry table is one register and the lookup one permute.
__attribute__((target("avx2,avx512f"))) uint64_t decode_packed_avx512(const uint8_t* payload, const float* gscale,
                                                                      uint32_t group, uint64_t m,
                                                                      const SignedLevels& table, bool accumulate,
                                                                      float* out) {
  const uint32_t q = table.q;
  const __m512 values = _mm512_loadu_ps(table.value);
  const __m256i shifts = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(static_cast<int>(q)));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>((1u << q) - 1u));
  uint64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    __m512i code;
    if (q == 8) {
      code = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(payload + i)));
    } else {
      const __m256i lo = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(eight_codes_word(payload, i, q))), shifts), mask);
      const __m256i hi = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(eight_codes_word(payload, i + 8, q))), shifts), mask);
      code = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    const __m512 value = q <= 4 ? _mm512_permutexvar_ps(code, values) : _mm512_i32gather_ps(code, table.value, 4);
    const float scale = gscale[i / group];
    __m512 v = scale > 0.0f ? _mm512_mul_ps(value, _mm512_set1_ps(scale)) : _mm512_setzero_ps();
    if (accumulate) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
    _mm512_storeu_ps(out + i, v);
  }
  return i;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

void dynamiq_decode_sg_table(const uint8_t* in, uint64_t m, const DynamiqSgCoding& c, bool accumulate, float* out) {
  const uint32_t q = c.width;
  if (q > 8) return dynamiq_decode_sg(in, m, c, accumulate, out);
  thread_local SignedLevels table;
  if (!table.built_from(c.levels, q)) table.build(c.levels, q);
  const uint64_t groups = (m + c.group - 1) / c.group;
  const uint8_t* payload = in + dynamiq_meta_bytes(m, c.group, c.hierarchical);
  const float sg_scale = c.hierarchical ? dynamiq_sg_scale(in) : 0.0f;
  thread_local std::vector<float> gscale;
  gscale.resize(groups);
  for (uint64_t g = 0; g < groups; ++g) gscale[g] = dynamiq_group_scale(in, g, c.hierarchical, sg_scale);
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2() && c.group % 8 == 0 && (q == 1 || q == 2 || q == 4 || q == 8)) {  // eight codes fill whole bytes
    uint64_t i = hand_avx512() && c.group % 16 == 0
                     ? decode_packed_avx512(payload, gscale.data(), c.group, m, table, accumulate, out)
                     : decode_packed_avx2(payload, gscale.data(), c.group, m, table, accumulate, out);
    for (; i < m; ++i) {
      const float s = gscale[i / c.group];
      const float v = s > 0.0f ? table.value[bitpack_get(payload, i, q)] * s : 0.0f;
      out[i] = accumulate ? out[i] + v : v;
    }
    return;
  }
#endif
  thread_local std::vector<uint8_t> codes;
  thread_local std::vector<float> scale;
  codes.resize(m);
  scale.resize(m);
  for (uint64_t g = 0; g < groups; ++g)
    std::fill(scale.begin() + static_cast<int64_t>(g * c.group),
              scale.begin() + static_cast<int64_t>(std::min(m, (g + 1) * c.group)), gscale[g]);
  decode_row(unpack_code_tile(payload, m, q, codes.data()), scale.data(), m, table.value, accumulate, out);
}

void dynamiq_uniforms(const RngKey& key, const RngKey& shared, bool correlated, uint32_t rank, uint32_t ranks,
                      uint64_t first, uint64_t m, float* u) {
  uniform_fill(key, first, m, u);
  if (!correlated || ranks <= 1) return;
  thread_local std::vector<uint32_t> w;
  w.resize(4 * m);
  uint32_t *w0 = w.data(), *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m;
  // correlated_block(shared, first + i) for every i.
  philox_counter_words(first, shared.stream, shared.round, m, static_cast<uint32_t>(shared.seed),
                       static_cast<uint32_t>(shared.seed >> 32), w0, w1, w2, w3);
  uint64_t i = 0;
#if defined(CCSIM_HAND_AVX2)
  const Strata strata(rank, ranks);
  if (hand_avx512()) i = correlate_avx512(w0, w1, w2, w3, m, strata, u);
  if (hand_avx2()) i += correlate_avx2(w0 + i, w1 + i, w2 + i, w3 + i, m - i, strata, u + i);
#endif
  for (; i < m; ++i) u[i] = correlated_uniform_from_block(U32x4{{w0[i], w1[i], w2[i], w3[i]}}, u[i], rank, ranks);
}

void dynamiq_encode_sg_batched(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                               const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                               uint64_t first_group, uint8_t* out) {
  thread_local std::vector<float> u;
  u.resize(m);
  dynamiq_uniforms(key, shared, c.correlated, rank, ranks, first, m, u.data());
  dynamiq_encode_sg_drawn(x, m, c, key, first_group, u.data(), out);
}

void dynamiq_encode_sg_drawn(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                             uint64_t first_group, const float* u, uint8_t* out) {
  thread_local std::vector<float> gmax, div;
  thread_local std::vector<uint8_t> codes;
  if (c.width > 8) {  // 16-bit codes: the reference's loop over the drawn uniforms
    dynamiq_encode_sg_with(x, m, c, key, first_group, out, [&](uint64_t i) { return u[i]; });
    return;
  }
  encode_scales(x, m, c, key, first_group, out, gmax);  // gmax: each group's divisor
  codes.resize(m);
  uint64_t i = 0;
  // The AVX-512 row takes a group's divisor once for its sixteen-entry steps; the others one an entry.
  const bool by_group = hand_avx512() && c.group % 16 == 0;
  if (!by_group) fill_divisors(gmax, c.group, m, div);
#if defined(CCSIM_HAND_AVX2)
  if (by_group) i = code_row_avx512(x, gmax.data(), c.group, u, m, c.width, c.levels, codes.data());
  else if (hand_avx2()) i = code_row_avx2(x, div.data(), u, m, c.width, c.levels, codes.data());
#endif
  for (; i < m; ++i) {
    const float d = by_group ? gmax[i / c.group] : div[i];
    codes[i] = static_cast<uint8_t>(dynamiq_group_coded(d) ? dynamiq_entry_code(x[i], d, c.width, c.levels, u[i]) : 0u);
  }
  pack_code_tile(codes.data(), m, c.width, out + dynamiq_meta_bytes(m, c.group, c.hierarchical));
}

}  // namespace ccsim::kern
