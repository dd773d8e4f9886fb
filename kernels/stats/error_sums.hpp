#pragma once
/// \file
/// The sums behind an all-reduce's error figures: the exact sum of the ranks' inputs, and each
/// output's squared error against it, in double, with the plain loops' bits whatever the machine:
///   exact[i] = float(((0.0 + double(in[0][i])) + double(in[1][i])) + ...)
///   se[o] = Σ_i (double(exact[i]) - double(got[o][i]))²,   sn = Σ_i double(exact[i])²
/// each Σ accumulated in i order (a product, then a sum: never fused). On x86-64 with AVX2 the
/// sums over inputs run four entries to a register, and the error sums of four outputs run in the
/// lanes of one register, each lane one output's own sequential chain (4x4 tiles transposed).
/// As for the loops, which NaN a sum of two NaNs carries is not fixed.
///
/// Thread safety: pure apart from writes to the outputs; runs on the calling thread.

#include <cstdint>

namespace ccsim::kern {

/// exact[i] for i < n, from `count` input arrays (count may be 0: all +0).
void sum_to_float(const float* const* in, uint32_t count, uint64_t n, float* exact);

/// se[o] for o < count, and sn, over entries [0, n).
void squared_errors(const float* exact, const float* const* got, uint32_t count, uint64_t n, double* se, double* sn);

}  // namespace ccsim::kern
