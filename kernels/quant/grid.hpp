#pragma once
/// \file
/// Rounding of a value onto a sorted grid of levels (e.g. DynamiQ's non-uniform magnitudes
/// f(ε, r) on [0, 1]), returning the level's index: stochastic (unbiased) and nearest.
///
/// The grid is `count` fp32 levels sorted ascending without repeats. A value v with
/// levels[i] <= v < levels[i+1] rounds to i or i + 1; values below levels[0] round to 0 and values
/// at or above levels[count-1] to count - 1 (clamped, hence biased outside the grid's span); NaN
/// rounds to 0. Lookups are a binary search, so a CUDA kernel can keep the levels in shared or
/// constant memory and call the same functions.
///
/// Thread safety: every function is pure.

#include <cmath>
#include <cstdint>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// Index of the largest level <= v (0 when v < levels[0] or v is NaN).
/// REQUIRES: count >= 1; levels sorted strictly ascending.
CCSIM_HD uint32_t grid_floor_index(const float* levels, uint32_t count, float v) {
  if (!(v >= levels[0])) return 0;
  uint32_t lo = 0, hi = count - 1;
  if (v >= levels[hi]) return hi;
  // Invariant: levels[lo] <= v < levels[hi].
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (levels[mid] <= v) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// Stochastic rounding: with levels[i] <= v < levels[i+1], returns i + 1 iff
/// u < (v - levels[i]) / (levels[i+1] - levels[i]), so E[levels[result]] = v for u uniform on
/// [0, 1) and v inside [levels[0], levels[count-1]]. Values on the grid return their own index
/// whatever `u`.
/// REQUIRES: as grid_floor_index(); u in [0, 1).
CCSIM_HD uint32_t grid_round_stochastic(const float* levels, uint32_t count, float v, float u) {
  const uint32_t i = grid_floor_index(levels, count, v);
  if (i + 1 >= count || !(v > levels[i])) return i;
  const float p = (v - levels[i]) / (levels[i + 1] - levels[i]);
  return u < p ? i + 1 : i;
}

/// Nearest rounding: the index of the closer of the two neighbouring levels; an exact tie goes to
/// the lower level.
/// REQUIRES: as grid_floor_index().
CCSIM_HD uint32_t grid_round_nearest(const float* levels, uint32_t count, float v) {
  const uint32_t i = grid_floor_index(levels, count, v);
  if (i + 1 >= count || !(v > levels[i])) return i;
  return (levels[i + 1] - v) < (v - levels[i]) ? i + 1 : i;
}

/// Fills out[0, count) with the geometric grid on [0, 1] of DynamiQ §3:
///   out[r] = f(ε, r) = ((1 + 2ε²)^r - 1) / ((1 + 2ε²)^(count-1) - 1),  r = 0 .. count-1
/// (count = 2^(b-1) for b-bit codes with a separate sign bit), evaluated in double as
/// expm1(r·L) / expm1((count-1)·L) with L = log1p(2ε²) to avoid cancellation for small ε, then
/// rounded to fp32; out[0] = 0 and out[count-1] = 1 exactly. ε = 0 (or so small that L == 0)
/// gives the uniform grid r / (count - 1), the limit as ε -> 0. Host only.
/// REQUIRES: count >= 2; eps >= 0.
inline void geometric_grid_levels(double eps, uint32_t count, float* out) {
  const double log_base = std::log1p(2.0 * eps * eps);
  const double top = static_cast<double>(count - 1);
  const double denom = std::expm1(top * log_base);
  for (uint32_t r = 0; r < count; ++r) {
    const double rr = static_cast<double>(r);
    out[r] = denom > 0.0 ? static_cast<float>(std::expm1(rr * log_base) / denom) : static_cast<float>(rr / top);
  }
  out[count - 1] = 1.0f;
}

}  // namespace ccsim::kern
