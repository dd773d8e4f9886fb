#pragma once
/// \file
/// The products of a low-rank step (kernels/linalg/power_iteration.hpp), computed without Eigen's
/// packing and with the bits of Eigen's GEMM: the two projections P = M Q and Q' = M^T P
/// (skinny_product) and the reconstruction P Q^T or the residual M − P Q^T (skinny_outer).
///
/// Both are C = A B with a skinny A: c[j * r + i] = Σ_k a[k * r + i] B(k, j) for i < r, j < n,
/// k < depth, where B(k, j) is m[k * n + j] (`b_transposed` false: P' = M^T P with k the rows of M)
/// or m[j * depth + k] (true: P = M Q with j the rows of M).
///
/// Eigen evaluates such a product (row-major result, baseline x86-64 build: four-float packets, no
/// fused multiply-add) as a zeroed result plus blocks of the depth, each block's sums started
/// from zero and added to the result. Within a block of d terms the order of one sum depends on
/// where its row i and column j fall in Eigen's register blocking (mr = 8, nr = 4, a peeling of
/// eight; GeneralBlockPanelKernel.h of Eigen 3.4):
///   - rows in the leading multiple of eight rows of a row block, and columns past the last
///     multiple of four columns of a column block: the terms in order;
///   - the next four rows: the terms at even and at odd places (up to the last multiple of eight)
///     summed apart, then added, then the remaining terms in order;
///   - the last rows (fewer than four): the terms at places 0, 1, 2 and 3 modulo four (up to the
///     last multiple of four) summed apart, added as (s0 + s1) + (s2 + s3), then the rest in order.
/// This kernel adds the same products in the same orders, eight columns at a time, so its results
/// equal Eigen's bit for bit (tests compare the two over shapes that reach every case).
///
/// The blocking comes from Eigen (`computeProductBlockingSizes`, with the cache sizes the caller
/// fixed: power_iteration.cpp's). Shapes Eigen evaluates some other way (a single row or column,
/// or the coefficient-based product of tiny shapes), machines without AVX2 (or with the portable
/// loops forced: kern::philox_batch_force_portable) and builds whose Eigen uses other packets or
/// fused multiply-adds are not taken: skinny_product() returns false and the caller uses Eigen.
///
/// Speed: P = M Q runs along eight rows of M at a time, a row's r sums spread over the lanes of a
/// vector (each lane one of Eigen's split sums, in its order), so that a step is a broadcast load, a
/// multiply and an add; M^T P streams M a row at a time into sums of up to 512 columns held in the
/// first-level cache, prefetching rows of M ahead. Neither packs M.

#include <cstdint>

namespace ccsim::kern {

/// c (n x r, row-major) = the product described in the file comment, blocked as Eigen blocks it.
/// With `add`, B is taken from m + add, each entry one fp32 addition (m's entry first); when not
/// `b_transposed`, that sum is also stored in `sum_out` (which may be m or add: M = x + e formed in
/// place). Returns false, writing nothing, where the file comment says it is not taken.
/// REQUIRES: c does not overlap a, m, add or sum_out; sum_out is given exactly when add is and B is
/// not transposed.
bool skinny_product(const float* a, uint32_t r, const float* m, uint64_t depth, uint64_t n, bool b_transposed,
                    float* c, const float* add = nullptr, float* sum_out = nullptr);

/// out = P Q^T (`subtract` false) or out -= P Q^T (true), P rows x r and Q cols x r row-major, out
/// rows x cols: the reconstruction and the error-feedback residual, with Eigen's bits (its GEMM
/// runs with Q's rows as its rows and the rank as its depth; the same cases apply). Returns false,
/// writing nothing, where skinny_product() would.
/// REQUIRES: out does not overlap p or q.
bool skinny_outer(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t r, bool subtract, float* out);

/// Whether skinny_product() and skinny_outer() run in this build on this machine.
bool skinny_product_available();

}  // namespace ccsim::kern
