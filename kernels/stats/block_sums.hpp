#pragma once
/// \file
/// Per-block sums of fp32 entries in double: sum[b] = Σ x[i] and sq[b] = Σ x[i]² over block b's
/// entries, each accumulated in entry order exactly as the plain loop
///   for i in block: sum += double(x[i]); sq += double(x[i]) * double(x[i]);
/// does, so the results are that loop's bits whatever the machine (only which NaN a sum of two
/// NaNs carries is not fixed, as it is not for the loop, whose operand order the compiler picks).
/// On x86-64 with AVX2, blocks of a multiple of 8 entries run eight at a time in the lanes of double
/// registers (8x8 tiles transposed), each lane one block's own sequential chain; other block sizes
/// and the last blocks (fewer than eight, or a short last block) run the plain loop.
///
/// Thread safety: pure apart from writes to the outputs; runs on the calling thread.

#include <cstdint>

namespace ccsim::kern {

/// Sums of blocks [0, ceil(n / block)) of x[0, n) (the last block may be short) into sum[] and sq[].
/// REQUIRES: block >= 1.
void block_sums(const float* x, uint64_t n, uint64_t block, double* sum, double* sq);

}  // namespace ccsim::kern
