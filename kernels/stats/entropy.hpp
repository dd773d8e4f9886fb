#pragma once
/// \file
/// Gradient statistics: histogram (Shannon) entropy, as EDGC's gradient data sampler (GDS)
/// estimates it on a sampled fraction β of the entries, and per-block max|x| and sum of squares
/// (MX / DynamiQ scales, DynamiQ's super-group norms F_ij).
///
/// Histogram: `bins` equal-width bins over [lo, hi]; x goes to bin floor((x - lo) / (hi - lo) ·
/// bins), evaluated in double and clamped to [0, bins - 1], so x == hi lands in the last bin.
/// Entropy: H = -Σ_b p_b log2 p_b over non-empty bins, p_b = count_b / Σ count, in bits (at most
/// log2(bins), reached when every bin holds the same count).
///
/// Sampling: entry i (global index index_base + i) belongs to the sample iff
/// uniform_at(key, index_base + i) < fraction, an independent Bernoulli(β) draw per entry keyed
/// by its global index, so the sample is reproducible, independent of threads and chunking, and
/// about β·count entries long (not exactly).
///
/// Non-finite entries (NaN, ±inf) are skipped by the histogram functions; max_abs() propagates
/// NaN.
///
/// Thread safety: functions write only to their outputs. The histogram functions run serially;
/// the block helpers run in parallel with thread-count independent results.

#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {

/// Bin of x in `bins` equal-width bins over [lo, hi] (see the file comment).
/// REQUIRES: bins >= 1; hi > lo; x finite.
CCSIM_HD uint32_t histogram_bin(float x, float lo, float hi, uint32_t bins) {
  const double t = (static_cast<double>(x) - lo) / (static_cast<double>(hi) - lo) * bins;
  if (!(t > 0.0)) return 0;
  return t >= static_cast<double>(bins) ? bins - 1 : static_cast<uint32_t>(t);
}

/// Whether global element `index` belongs to a sample of fraction `fraction` drawn from `key`.
CCSIM_HD bool in_sample(const RngKey& key, uint64_t index, float fraction) { return uniform_at(key, index) < fraction; }

/// Largest |x[i]| of x[0, count); if any entry is NaN, the first NaN (its bits as stored); +0 for
/// count == 0.
CCSIM_HD float max_abs(const float* x, uint64_t count) {
  // The largest |x| bit pattern, without a branch or an early exit (so the loop vectorizes): for
  // non-NaN floats it orders as |x| does, and NaN patterns lie above +inf's.
  uint32_t m = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t a = float_to_bits(x[i]) & 0x7FFFFFFFu;
    m = a > m ? a : m;
  }
  if (m <= 0x7F800000u) return bits_to_float(m);
  for (uint64_t i = 0; i < count; ++i)  // a NaN: the first one, as stored
    if (x[i] != x[i]) return x[i];
  return bits_to_float(m);  // unreachable
}


/// Σ x[i]² of x[0, count), accumulated serially (index order) in double; each square is exact in
/// double.
CCSIM_HD double sum_squares(const float* x, uint64_t count) {
  double s = 0.0;
  for (uint64_t i = 0; i < count; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

/// Shannon entropy in bits of a histogram: -Σ p log2 p over the non-empty bins; 0 when empty.
double entropy_bits(const uint64_t* counts, uint32_t bins);

/// The smallest and largest finite entries of x[0, count) into lo and hi (+inf and -inf when none
/// is finite). Where both zeros occur at an end of the range, which one is returned is not fixed:
/// no bin and no width depends on it (x - (+0) == x - (-0) for every x but a zero, whose bin is 0).
void finite_range(const float* x, uint64_t count, float& lo, float& hi);

/// Counts the finite entries of x[0, count) into `bins` bins over [lo, hi] (`counts` holds `bins`
/// entries and is overwritten); entries below lo or above hi go to the first or last bin.
/// Returns the number of entries counted.
/// REQUIRES (checked): bins >= 1; hi > lo.
uint64_t histogram(const float* x, uint64_t count, uint32_t bins, float lo, float hi, uint64_t* counts);

/// Entropy in bits of the histogram of the finite entries of x[0, count) with `bins` bins over
/// [min, max] of those entries. 0 when fewer than two distinct finite values exist.
/// REQUIRES (checked): bins >= 1.
double histogram_entropy(const float* x, uint64_t count, uint32_t bins);

/// histogram_entropy() of the sampled entries only (EDGC GDS: fraction β = 0.25): the bins span
/// [min, max] of the sampled finite entries. fraction == 1 samples every entry (and equals
/// histogram_entropy()); fraction == 0 samples none (entropy 0).
/// REQUIRES (checked): bins >= 1; 0 <= fraction <= 1.
double sampled_histogram_entropy(const float* x, uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                                 uint64_t index_base);

/// The entries a sample keeps and their range, in one pass: writes to `out`, in index
/// order, every finite x[i] of x[0, count) with in_sample(key, index_base + i, fraction), returns
/// how many, and takes lo down and hi up to the smallest and largest of them (finite_range() of the
/// kept entries when lo and hi come in as +inf and -inf; which zero, as there, is not fixed). `out`
/// holds `count` entries and may be written past the returned count (never past `count`).
/// REQUIRES (checked): 0 <= fraction <= 1.
uint64_t sample_finite(const RngKey& key, uint64_t index_base, const float* x, uint64_t count, float fraction,
                       float* out, float& lo, float& hi);

/// max_abs() on the host, the same result by a row the compiler vectorizes.
float host_max_abs(const float* x, uint64_t count);

/// max_abs() of x[0, count) into `most`, and into `least` the smallest nonzero |x[i]| of its
/// non-NaN entries (+inf when there is none), in one pass (a row the compiler vectorizes).
void abs_extremes(const float* x, uint64_t count, float& most, float& least);

/// out[b] = max_abs() of block b = x[b*block, min(count, (b+1)*block)), for the ceil(count/block)
/// blocks (the last may be short).
/// REQUIRES (checked): block >= 1.
void block_max_abs(const float* x, uint64_t count, uint64_t block, float* out);

/// max_abs() of x[0, count), computed in parallel over fixed pieces (max is exact, so the result
/// does not depend on the thread count).
float parallel_max_abs(const float* x, uint64_t count);

/// out[b] = sum_squares() of block b (blocks as in block_max_abs()).
/// REQUIRES (checked): block >= 1.
void block_sum_squares(const float* x, uint64_t count, uint64_t block, double* out);

}  // namespace ccsim::kern
