#include "kernels/stats/entropy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

bool is_finite(float v) { return std::isfinite(v); }

// Calls fn(v) for every finite entry of the sample, in index order. One Philox block serves four
// consecutive global indices; fraction >= 1 skips the draws (u < 1 always holds).
template <class Fn>
void for_each_sampled(const float* x, uint64_t count, float fraction, const RngKey& key, uint64_t index_base, Fn&& fn) {
  if (fraction >= 1.0f) {
    for (uint64_t i = 0; i < count; ++i)
      if (is_finite(x[i])) fn(x[i]);
    return;
  }
  for_each_uniform(key, index_base, 0, count, [&](uint64_t i, float u) {  // in_sample(key, index_base + i, fraction)
    if (u < fraction && is_finite(x[i])) fn(x[i]);
  });
}

double sampled_entropy(const float* x, uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                       uint64_t index_base) {
  CCSIM_CHECK(bins >= 1, "histogram needs at least one bin");
  CCSIM_CHECK(fraction >= 0.0f && fraction <= 1.0f, "sample fraction {} not in [0, 1]", fraction);
  if (fraction >= 1.0f) {  // every finite entry: the rows
    float lo, hi;
    finite_range(x, count, lo, hi);
    if (!(hi > lo)) return 0.0;
    std::vector<uint64_t> counts(bins);
    histogram(x, count, bins, lo, hi, counts.data());
    return entropy_bits(counts.data(), bins);
  }
  float lo = INFINITY, hi = -INFINITY;
  for_each_sampled(x, count, fraction, key, index_base, [&](float v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  });
  if (!(hi > lo)) return 0.0;  // empty sample or a single value
  std::vector<uint64_t> counts(bins, 0);
  for_each_sampled(x, count, fraction, key, index_base, [&](float v) { ++counts[histogram_bin(v, lo, hi, bins)]; });
  return entropy_bits(counts.data(), bins);
}

#if defined(CCSIM_HAND_AVX2)
// The finite entries' mask of eight floats: exponent bits not all set.
__attribute__((target("avx2"))) __m256 finite8(__m256 v) {
  const __m256i e = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7f800000));
  return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7f800000)),
                                              _mm256_set1_epi32(-1)));
}

// finite_range() over entries [0, returned), eight lanes each keeping its own min and max.
__attribute__((target("avx2"))) uint64_t range_avx2(const float* x, uint64_t count, float& lo, float& hi) {
  const __m256 pinf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
  __m256 mn = pinf, mx = ninf;
  uint64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i), ok = finite8(v);
    mn = _mm256_min_ps(_mm256_blendv_ps(pinf, v, ok), mn);
    mx = _mm256_max_ps(_mm256_blendv_ps(ninf, v, ok), mx);
  }
  alignas(32) float a[8], b[8];
  _mm256_store_ps(a, mn);
  _mm256_store_ps(b, mx);
  for (int l = 0; l < 8; ++l) {
    lo = std::min(lo, a[l]);
    hi = std::max(hi, b[l]);
  }
  return i;
}

// histogram_bin() of eight floats (finite, or made so by the caller) in double lanes, the
// definition's subtraction, division and product: t <= 0 (or NaN) to 0, then the clamp to
// bins - 1 before the truncation (which truncates t in [bins - 1, bins) to bins - 1 as well).
struct ExactBins {
  __m256d lo, range, bins, last, zero;
};
__attribute__((target("avx2"))) inline __m256i exact_bins8(__m256 v, const ExactBins& c) {
  __m128i b[2];
  for (int h = 0; h < 2; ++h) {
    const __m256d d = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(v) : _mm256_extractf128_ps(v, 1));
    const __m256d t = _mm256_mul_pd(_mm256_div_pd(_mm256_sub_pd(d, c.lo), c.range), c.bins);
    const __m256d pos = _mm256_blendv_pd(c.zero, t, _mm256_cmp_pd(t, c.zero, _CMP_GT_OQ));
    b[h] = _mm256_cvttpd_epi32(_mm256_min_pd(pos, c.last));
  }
  return _mm256_set_m128i(b[1], b[0]);
}

// The same bins without a division, in float lanes: t' = (x - lo) * (bins / (hi - lo)) has three
// roundings of 2^-24 where t has about two of 2^-53 (a subnormal x - lo adds at most 2^-150 times
// the scale, below 2^-30 for the scales used here), so |t' - t| < 2^-21 |t'| + 2^-30. Where the
// floors of t' minus and plus that slack agree, that is t's bin; a vector with a lane next to an
// edge, or whose float arithmetic overflowed (NaN slack), takes exact_bins8().
struct FloatBins {
  __m256 lo, scale, last, zero, eps, tiny, magnitude, half;
};
__attribute__((target("avx2"))) inline __m256i float_bins8(__m256 v, __m256 finite, const FloatBins& c,
                                                          const ExactBins& e) {
  // The spare bin's lanes (non-finite entries) at t' = 1/2, clear of every edge.
  const __m256 t = _mm256_blendv_ps(c.half, _mm256_mul_ps(_mm256_sub_ps(v, c.lo), c.scale), finite);
  const __m256 slack = _mm256_add_ps(_mm256_mul_ps(_mm256_and_ps(t, c.magnitude), c.eps), c.tiny);
  const __m256 below = _mm256_floor_ps(_mm256_sub_ps(t, slack)), above = _mm256_floor_ps(_mm256_add_ps(t, slack));
  if (_mm256_movemask_ps(_mm256_cmp_ps(below, above, _CMP_NEQ_UQ)) != 0) return exact_bins8(v, e);
  return _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(below, c.zero), c.last));
}

// histogram() over entries [0, returned), a tile at a time: the tile's bins eight at a time
// (non-finite entries to a spare bin past the last), then counted. Lane l of each eight counts into
// its own histogram (a run of equal bins then increments eight counters in turn, not one), summed
// at the end. The float lanes serve where the scale bins / (hi - lo) lies in [2^-100, 2^100].
__attribute__((target("avx2"))) uint64_t histogram_avx2(const float* x, uint64_t count, uint32_t bins, float lo,
                                                        float hi, uint64_t* counts, uint64_t& n) {
  constexpr uint64_t kTile = 512, kPiece = uint64_t{1} << 31;  // lane counts stay below 2^32
  // Lane histograms where the entries outnumber their bins; one shared histogram otherwise.
  const uint64_t stride = bins + 1, apart = count >= 16 * stride ? stride : 0;
  std::vector<uint32_t> lanes(7 * apart + stride);
  const double width = static_cast<double>(hi) - lo, scale = bins / width;
  const ExactBins e{_mm256_set1_pd(lo), _mm256_set1_pd(width), _mm256_set1_pd(bins), _mm256_set1_pd(bins - 1),
                    _mm256_setzero_pd()};
  const FloatBins f{_mm256_set1_ps(lo),        _mm256_set1_ps(static_cast<float>(scale)),
                    _mm256_set1_ps(static_cast<float>(bins - 1)), _mm256_setzero_ps(),
                    _mm256_set1_ps(0x1p-21f),  _mm256_set1_ps(0x1p-30f),
                    _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), _mm256_set1_ps(0.5f)};
  const bool by_float = scale >= 0x1p-100 && scale <= 0x1p100;
  const __m256i spare = _mm256_set1_epi32(static_cast<int32_t>(bins));
  alignas(32) int32_t bin[kTile];
  uint64_t i = 0;
  for (uint64_t piece = 0; piece < count; piece += kPiece) {
    const uint64_t end = std::min(count, piece + kPiece);
    while (i + 8 <= end) {
      const uint64_t m = std::min(kTile, (end - i) & ~uint64_t{7});
      for (uint64_t j = 0; j < m; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + i + j), finite = finite8(v);
        const __m256 w = _mm256_blendv_ps(f.lo, v, finite);  // no NaN or infinity in the lanes' arithmetic
        const __m256i b = by_float ? float_bins8(w, finite, f, e) : exact_bins8(w, e);
        _mm256_store_si256(reinterpret_cast<__m256i*>(bin + j), _mm256_blendv_epi8(spare, b, _mm256_castps_si256(finite)));
      }
      for (uint64_t j = 0; j < m; j += 8)
        for (uint64_t l = 0; l < 8; ++l) ++lanes[l * apart + static_cast<uint32_t>(bin[j + l])];
      i += m;
    }
    for (uint64_t at = 0; at < lanes.size(); at += stride)
      for (uint32_t k = 0; k < bins; ++k) {
        counts[k] += lanes[at + k];
        n += lanes[at + k];
      }
    std::fill(lanes.begin(), lanes.end(), 0u);
  }
  return i;
}

// Lane indices that move the lanes set in an 8-bit mask to the front, in order.
struct CompactTable {
  alignas(32) uint32_t lanes[256][8];
  CompactTable() {
    for (uint32_t m = 0; m < 256; ++m) {
      uint32_t k = 0;
      for (uint32_t l = 0; l < 8; ++l)
        if (m & (1u << l)) lanes[m][k++] = l;
      for (; k < 8; ++k) lanes[m][k] = 0;
    }
  }
};

// sample_finite() over one tile, eight entries at a time: kept where bits >> 8 < below (an integer
// compare, signed being safe below 2^31) and x is finite; the kept lanes permuted to the front and
// stored whole, the next store starting after them; each lane's minimum and maximum of its kept
// entries taken along into lo8 and hi8. Returns the entries done (a multiple of 8).
__attribute__((target("avx2,popcnt"))) uint64_t sample_avx2(const float* x, const uint32_t* bits, uint64_t count,
                                                             uint32_t below, float* out, uint64_t& kept, float* lo8,
                                                             float* hi8) {
  static const CompactTable table;
  const __m256i limit = _mm256_set1_epi32(static_cast<int32_t>(below));
  const __m256 pinf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
  __m256 mn = _mm256_loadu_ps(lo8), mx = _mm256_loadu_ps(hi8);
  uint64_t i = 0, k = kept;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i u = _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)), 8);
    const __m256 keep = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(limit, u)), finite8(v));
    const int mask = _mm256_movemask_ps(keep);
    const __m256i lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(table.lanes[mask]));
    _mm256_storeu_ps(out + k, _mm256_permutevar8x32_ps(v, lanes));
    k += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned>(mask)));
    mn = _mm256_min_ps(_mm256_blendv_ps(pinf, v, keep), mn);
    mx = _mm256_max_ps(_mm256_blendv_ps(ninf, v, keep), mx);
  }
  _mm256_storeu_ps(lo8, mn);
  _mm256_storeu_ps(hi8, mx);
  kept = k;
  return i;
}

// GCC 12 warns "may be used uninitialized" inside its own AVX-512 headers, whose intrinsics start
// from an undefined register (_mm512_undefined_*); the warning is about the header, not this code.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// sample_avx2() sixteen entries at a time in AVX-512 registers: the kept lanes compressed to the
// front by the instruction that does it, their minimum and maximum by masked operations.
__attribute__((target("avx2,avx512f,popcnt"))) uint64_t sample_avx512(const float* x, const uint32_t* bits,
                                                                       uint64_t count, uint32_t below, float* out,
                                                                       uint64_t& kept, float* lo16, float* hi16) {
  const __m512i limit = _mm512_set1_epi32(static_cast<int32_t>(below)), exponent = _mm512_set1_epi32(0x7f800000);
  __m512 mn = _mm512_loadu_ps(lo16), mx = _mm512_loadu_ps(hi16);
  uint64_t i = 0, k = kept;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512i u = _mm512_srli_epi32(_mm512_loadu_si512(bits + i), 8);
    const __mmask16 keep = _mm512_mask_cmpneq_epi32_mask(_mm512_cmplt_epi32_mask(u, limit),
                                                         _mm512_and_si512(_mm512_castps_si512(v), exponent), exponent);
    _mm512_storeu_ps(out + k, _mm512_maskz_compress_ps(keep, v));
    k += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned>(keep)));
    mn = _mm512_mask_min_ps(mn, keep, mn, v);
    mx = _mm512_mask_max_ps(mx, keep, mx, v);
  }
  _mm512_storeu_ps(lo16, mn);
  _mm512_storeu_ps(hi16, mx);
  kept = k;
  return i;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// max_abs()'s first loop as a row: the largest |x| bit pattern (NaN patterns lie above +inf's).
CCSIM_VECTOR_ROW uint32_t max_abs_bits_row(const float* x, uint64_t n) {
  uint32_t m = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = float_to_bits(x[i]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
  }
  return m;
}

// abs_extremes()' loop as a row: the largest |x| bit pattern in hi; in lo the smallest magnitude
// bits minus one, unsigned: a nonzero finite magnitude stays below +inf's pattern minus one, while
// a zero wraps to the top and a NaN lies above it (the minimum, capped there, plus one is the
// smallest nonzero |x|).
CCSIM_VECTOR_ROW void abs_extremes_row(const float* x, uint64_t n, uint32_t* hi_out, uint32_t* lo_out) {
  uint32_t hi = 0, lo = 0x7F7FFFFFu;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = float_to_bits(x[i]) & 0x7FFFFFFFu;
    hi = a > hi ? a : hi;
    lo = a - 1u < lo ? a - 1u : lo;
  }
  *hi_out = hi;
  *lo_out = lo;
}

template <class Fn>
void for_blocks(uint64_t count, uint64_t block, Fn&& fn) {
  CCSIM_CHECK(block >= 1, "block size must be positive");
  const uint64_t blocks = (count + block - 1) / block;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t b = b0; b < b1; ++b) fn(b, b * block, std::min(count, (b + 1) * block));
  });
}

}  // namespace

float host_max_abs(const float* x, uint64_t count) {
  const uint32_t m = max_abs_bits_row(x, count);
  return m <= 0x7F800000u ? bits_to_float(m) : max_abs(x, count);  // a NaN: max_abs() finds the first
}

void abs_extremes(const float* x, uint64_t count, float& most, float& least) {
  uint32_t hi = 0, lo = 0;
  abs_extremes_row(x, count, &hi, &lo);
  least = bits_to_float(lo + 1u);
  most = hi <= 0x7F800000u ? bits_to_float(hi) : max_abs(x, count);  // a NaN: max_abs() finds the first
}

double entropy_bits(const uint64_t* counts, uint32_t bins) {
  uint64_t total = 0;
  for (uint32_t b = 0; b < bins; ++b) total += counts[b];
  if (total == 0) return 0.0;
  double h = 0.0;
  for (uint32_t b = 0; b < bins; ++b) {
    if (counts[b] == 0) continue;
    const double p = static_cast<double>(counts[b]) / static_cast<double>(total);
    h -= p * std::log2(p);
  }
  return h;
}

void finite_range(const float* x, uint64_t count, float& lo, float& hi) {
  lo = INFINITY;
  hi = -INFINITY;
  uint64_t i = 0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2()) i = range_avx2(x, count, lo, hi);
#endif
  for (; i < count; ++i)
    if (is_finite(x[i])) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
}

uint64_t histogram(const float* x, uint64_t count, uint32_t bins, float lo, float hi, uint64_t* counts) {
  CCSIM_CHECK(bins >= 1, "histogram needs at least one bin");
  CCSIM_CHECK(hi > lo, "histogram range [{}, {}] is empty", lo, hi);
  std::fill(counts, counts + bins, uint64_t{0});
  uint64_t n = 0, i = 0;
#if defined(CCSIM_HAND_AVX2)
  if (hand_avx2()) i = histogram_avx2(x, count, bins, lo, hi, counts, n);
#endif
  for (; i < count; ++i) {
    if (!is_finite(x[i])) continue;
    ++counts[histogram_bin(x[i], lo, hi, bins)];
    ++n;
  }
  return n;
}

double histogram_entropy(const float* x, uint64_t count, uint32_t bins) {
  return sampled_entropy(x, count, bins, 1.0f, RngKey{}, 0);
}

double sampled_histogram_entropy(const float* x, uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                                 uint64_t index_base) {
  return sampled_entropy(x, count, bins, fraction, key, index_base);
}

uint64_t sample_finite(const RngKey& key, uint64_t index_base, const float* x, uint64_t count, float fraction,
                       float* out, float& lo, float& hi) {
  CCSIM_CHECK(fraction >= 0.0f && fraction <= 1.0f, "sample fraction {} not in [0, 1]", fraction);
  // uniform_at() < fraction, u = (bits >> 8) * 2^-24 exactly: bits >> 8 < fraction * 2^24, an
  // integer below ceil(fraction * 2^24) (at most 2^24).
  const auto below = static_cast<uint32_t>(std::ceil(static_cast<double>(fraction) * 0x1p24));
  uint32_t bits[kUniformTile];
  float lo16[16], hi16[16];  // the vector paths' lanes' own minimum and maximum
  std::fill_n(lo16, 16, lo);
  std::fill_n(hi16, 16, hi);
  uint64_t kept = 0;
  for (uint64_t t = 0; t < count; t += kUniformTile) {
    const uint64_t n = std::min(kUniformTile, count - t);
    // The next tile's entries on their way into the cache while this tile's draws are computed.
    for (uint64_t j = t + kUniformTile; j < std::min(count, t + 2 * kUniformTile); j += 16) __builtin_prefetch(x + j);
    random_bits_fill(key, index_base + t, n, bits);
    uint64_t j = 0;
#if defined(CCSIM_HAND_AVX2)
    if (hand_avx512())
      j = sample_avx512(x + t, bits, n, below, out, kept, lo16, hi16);
    else if (hand_avx2())
      j = sample_avx2(x + t, bits, n, below, out, kept, lo16, hi16);
#endif
    for (; j < n; ++j) {  // written at the sample's end, which advances past it only when kept
      const float v = x[t + j];
      out[kept] = v;
      if ((bits[j] >> 8) < below && is_finite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        ++kept;
      }
    }
  }
  for (int l = 0; l < 16; ++l) {
    lo = std::min(lo, lo16[l]);
    hi = std::max(hi, hi16[l]);
  }
  return kept;
}

void block_max_abs(const float* x, uint64_t count, uint64_t block, float* out) {
  // Small blocks (MX's 32) inline the scalar loop; larger ones take the row, whose dispatch then
  // costs nothing next to the block.
  if (block < 256) {
    for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) { out[b] = max_abs(x + begin, end - begin); });
    return;
  }
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) { out[b] = host_max_abs(x + begin, end - begin); });
}

float parallel_max_abs(const float* x, uint64_t count) {
  constexpr uint64_t kPiece = uint64_t{1} << 16;
  std::vector<float> partial((count + kPiece - 1) / kPiece);
  block_max_abs(x, count, kPiece, partial.data());
  return max_abs(partial.data(), partial.size());
}

void block_sum_squares(const float* x, uint64_t count, uint64_t block, double* out) {
  for_blocks(count, block,
             [&](uint64_t b, uint64_t begin, uint64_t end) { out[b] = sum_squares(x + begin, end - begin); });
}

}  // namespace ccsim::kern
