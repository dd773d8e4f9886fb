#pragma once
/// \file
/// Low-rank power iteration (PowerSGD, Vogels et al. 2019, Alg. 1; the engine of EDGC): the
/// dense products of one step, column orthonormalization and Philox standard normals for the
/// initial factor; double-precision references and error bounds of the products. CPU reference
/// built on Eigen; the CUDA versions are in kernels/cuda/lowrank_cuda.hpp.
///
/// One step on a rows x cols matrix M with a cols x rank factor Q:
///   P = M Q;  P^ = orthonormalize(P);  Q' = M^T P^;  M ≈ P^ Q'^T.
/// A distributed step all-reduces P between the first two, and Q' before the reconstruction.
///
/// Layout: every matrix is dense and row-major (M[i][j] at m[i * cols + j]; P[i][k] at
/// p[i * rank + k]; Q[j][k] at q[j * rank + k]). Products run in fp32 with the bits of Eigen's
/// GEMM, whose summation order depends only on the shapes and the build: the cache sizes Eigen
/// blocks by are fixed rather than read from the CPU (hence the same bits on every machine with one
/// build, not bitwise equal to a GPU's). Where the build and the machine allow, they run through
/// kernels/linalg/skinny_product.hpp, which adds the same products in the same orders without
/// Eigen's packing. Orthonormalization accumulates in double.
///
/// Thread safety: functions write only to their outputs and run serially (the first product also
/// sets Eigen's process-wide cache sizes, once); callers parallelize over independent matrices
/// (layers), which keeps results independent of the thread count.

#include <cstdint>
#include <vector>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// p = M q: (rows x cols) times (cols x rank) into rows x rank.
/// REQUIRES: p does not overlap m or q.
void lowrank_project(const float* m, uint64_t rows, uint64_t cols, const float* q, uint32_t rank, float* p);

/// q = M^T p: (cols x rows) times (rows x rank) into cols x rank.
/// REQUIRES: q does not overlap m or p.
void lowrank_project_transposed(const float* m, uint64_t rows, uint64_t cols, const float* p, uint32_t rank, float* q);

/// p = (x + e) q: lowrank_project of M = x + e, each entry of M one fp32 addition (x's first),
/// without storing M. REQUIRES: p does not overlap x, e or q.
void lowrank_project_sum(const float* x, const float* e, uint64_t rows, uint64_t cols, const float* q, uint32_t rank,
                         float* p);

/// e = x + e (each entry one fp32 addition, x's first), then q = e^T p: lowrank_project_transposed
/// of M = x + e formed in place. REQUIRES: q does not overlap x, e or p.
void lowrank_add_project_transposed(const float* x, float* e, uint64_t rows, uint64_t cols, const float* p,
                                    uint32_t rank, float* q);

/// out = p q^T (rows x cols), the rank-`rank` reconstruction.
/// REQUIRES: out does not overlap p or q.
void lowrank_expand(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t rank, float* out);

/// inout -= p q^T (rows x cols): the error-feedback residual M - P^ Q^T computed in place.
/// REQUIRES: inout does not overlap p or q.
void lowrank_subtract(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t rank, float* inout);

/// Orthonormalizes the `rank` columns of the rows x rank matrix p in place, in column order, by
/// modified Gram-Schmidt with one reorthogonalization pass, accumulated in double. A column
/// whose remainder after projection is zero (or not finite) becomes zero, so a rank-deficient P
/// yields orthonormal columns followed by zero ones, never NaN.
/// @post the non-zero columns are orthonormal to ~1e-7 (fp32 storage); span is preserved.
void orthonormalize_columns(float* p, uint64_t rows, uint32_t rank);

// ---- References and error bounds of the products ------------------------------------------------
// Any fp32 evaluation of a sum of k products s = Σ a_i b_i (the subtraction's c counting as one
// more term), in any order and with or without fused multiply-adds, lies within
// γ_k Σ|a_i||b_i| + k·2^-126 of s (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
// ed., Eq. 3.5; the second term covers underflow), γ_k = k u / (1 − k u), u = 2^-24. Two
// evaluations in different orders (Eigen here, cuBLAS on a GPU) thus differ by at most twice that.

/// γ_k of fp32: k u / (1 − k u), u = 2^-24. REQUIRES: k u < 1.
double fp32_gamma(uint64_t k);

/// The bound above on |fl(s) − s| for a k-term sum whose terms' magnitudes sum to `magnitude`.
double fp32_sum_error_bound(double magnitude, uint64_t k);

/// The products in double from the fp32 operands, by plain loops (exact up to double rounding,
/// far below fp32's): with `absolute`, over the operands' absolute values instead, giving the
/// Σ|a_i||b_i| the bound scales with. Layouts as above; the second operand of the expand may be
/// any double matrix (a bound to carry through |P| w^T, say).
std::vector<double> lowrank_project_f64(const float* m, uint64_t rows, uint64_t cols, const float* q, uint32_t rank,
                                        bool absolute);
std::vector<double> lowrank_project_transposed_f64(const float* m, uint64_t rows, uint64_t cols, const float* p,
                                                   uint32_t rank, bool absolute);
std::vector<double> lowrank_expand_f64(const float* p, const double* w, uint64_t rows, uint64_t cols, uint32_t rank,
                                       bool absolute);

/// A standard normal variate for element `index` of stream `key`: Box-Muller on the Philox
/// uniforms u1 = uniform_at(key, 2 index), u2 = uniform_at(key, 2 index + 1):
/// sqrt(-2 ln(1 - u1)) cos(2 pi u2), evaluated in double and rounded to fp32 (finite: 1 - u1 > 0).
/// REQUIRES: index < 2^41.
float standard_normal_at(const RngKey& key, uint64_t index);

}  // namespace ccsim::kern
