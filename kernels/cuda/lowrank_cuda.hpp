#pragma once
/// \file
/// CUDA versions of the PowerSGD power-iteration kernels of kernels/linalg/power_iteration.hpp
/// (the engine of algorithms/lowrank/: PowerSGD and EDGC), behind a host API that needs neither a
/// CUDA nor a cuBLAS header. Layouts are the CPU's: every matrix dense and row-major.
///
/// Products (lowrank_project / _transposed / _expand / _subtract): cuBLAS single-precision GEMM.
/// They are NOT bit-identical to the CPU: Eigen and cuBLAS add the k = inner-dimension products in
/// different orders (and cuBLAS may use FMA), so results differ in the last bits. What holds is the
/// standard bound for a sum of n = k products in fp32 (n = k + 1 terms for _subtract, the old
/// value counting as one), each side within gamma_n = n u / (1 - n u), u = 2^-24, of the exact
/// value relative to Σ|a_i||b_i| (plus |c| for _subtract), so elementwise
///   |gpu - cpu| <= 2 gamma_n (Σ_i |a_i| |b_i| + |c|)  (+ an absolute 2 n 2^-126 for underflow),
/// which the tests check, computed in double. TF32 is never used: the GEMMs run through
/// cublasGemmEx with compute type CUBLAS_COMPUTE_32F_PEDANTIC (fp32 inputs, products and sums: the
/// precision of cublasSgemm under CUBLAS_PEDANTIC_MATH), whatever math mode the caller set on the
/// handle, which these functions leave untouched. cuBLAS documents bit-wise reproducible results
/// from run to run for one toolkit version on GPUs of the same architecture and SM count (its notes
/// on results reproducibility list the exceptions); cuBLAS works in the handle's workspace.
///
/// orthonormalize_columns_cuda: bit-identical to orthonormalize_columns on identical input. The
/// CPU's modified Gram-Schmidt runs on a column-major double copy; every dot product and norm is a
/// serial double sum in row order, every update an elementwise double operation. The kernel keeps
/// the same double copy (the workspace), computes each dot product and norm on one thread in row
/// order and the updates in parallel (each element's update is one IEEE operation, independent of
/// the others), with IEEE sqrt and division and no FMA. One CTA per matrix: the serial sums
/// (2 k + 1 of them for column k, each `rows` dependent additions) set the time, about
/// rows * rank^2 additions in all; PowerSGD's ranks are small. The one difference is the payload
/// of a NaN (a NaN or inf in P): the GPU produces the canonical NaN, the CPU an operand's.
///
/// standard_normal_cuda / lowrank_init_q_cuda: standard_normal_at() on the device: the same
/// Philox uniforms and the same Box-Muller operations in double, rounded to fp32. The CPU calls
/// glibc's std::log and std::cos, which cannot run on the device and are not correctly rounded;
/// the kernels use correctly rounded log and cos (kernels/cuda/cr_math.cuh). Every possible
/// argument was checked on a host with glibc 2.36 (x86-64 with FMA) against a quad-precision
/// reference: the correctly rounded functions matched it on all of them, while glibc's double
/// differs by one ulp on 13640 of the 2^24 possible log(1 - u1) (0.08%) and 22900 of the 2^24
/// possible cos(2 pi u2) (0.14%). The fp32 result differs only if such a one-ulp difference moves
/// the double product across an fp32 rounding boundary, probability about 2^-29 per differing
/// argument: an estimated 4e-12 per variate. None of 2 * 10^7 indices differed in a host run of
/// the kernel's code; effectively never, but not provably never. The tests compare exactly and
/// report any mismatch.
///
/// Conventions (as quant_cuda.hpp): device pointers (prefix `d_`), a Status, never allocate, never
/// synchronize. The GEMMs take the caller's cuBLAS handle and run on the stream set on it
/// (cublasSetStream); the kernels take a stream. orthonormalize_columns_cuda takes a workspace the
/// CUB way (d_temp_storage == nullptr: only store the bytes needed in temp_storage_bytes; any byte
/// alignment: the kernel aligns its double copy inside, the 7 bytes of slack counted). Sizes of
/// zero are no-ops, except that an empty inner dimension writes zeros, as the CPU does.
///
/// Thread safety: no state; a cuBLAS handle must not be used by two host threads at once.

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "sim/base/status.hpp"

/// cuBLAS's handle type (cublasHandle_t is `cublasContext*`), declared here so this header does
/// not need cublas_v2.h.
struct cublasContext;

namespace ccsim::kern {

/// A cuBLAS handle; the same type as cublasHandle_t.
using CublasHandle = ::cublasContext*;

/// A new cuBLAS handle (cublasCreate), for callers without the cuBLAS header; release it with
/// cublas_destroy(). kInternal naming cuBLAS's status if it cannot be made (no device, for one).
Result<CublasHandle> cublas_create();
/// cublasDestroy; a null handle is a no-op.
void cublas_destroy(CublasHandle handle);
/// cublasSetStream: the stream the handle's GEMMs run on from now on.
Status cublas_set_stream(CublasHandle handle, CudaStream stream);

/// Largest rows, cols (and rows * rank, cols * rank) the GEMMs accept: cuBLAS's 32-bit int sizes.
inline constexpr uint64_t kLowrankCudaMaxDim = 2147483647;

/// Converts a cuBLAS status code to a Status: OK for CUBLAS_STATUS_SUCCESS, otherwise kInternal
/// with "`context`: <name>: <description>". `status` is a cublasStatus_t passed as int.
Status cublas_status(int status, const char* context);

/// d_p = M Q: (rows x cols) times (cols x rank) into rows x rank (lowrank_project).
/// REQUIRES: d_p does not overlap d_m or d_q.
Status lowrank_project_cuda(CublasHandle handle, const float* d_m, uint64_t rows, uint64_t cols, const float* d_q,
                            uint32_t rank, float* d_p);

/// d_q = M^T P: (cols x rows) times (rows x rank) into cols x rank (lowrank_project_transposed).
/// REQUIRES: d_q does not overlap d_m or d_p.
Status lowrank_project_transposed_cuda(CublasHandle handle, const float* d_m, uint64_t rows, uint64_t cols,
                                       const float* d_p, uint32_t rank, float* d_q);

/// d_out = P Q^T (rows x cols) (lowrank_expand).
/// REQUIRES: d_out does not overlap d_p or d_q.
Status lowrank_expand_cuda(CublasHandle handle, const float* d_p, const float* d_q, uint64_t rows, uint64_t cols,
                           uint32_t rank, float* d_out);

/// d_inout -= P Q^T (rows x cols) (lowrank_subtract).
/// REQUIRES: d_inout does not overlap d_p or d_q.
Status lowrank_subtract_cuda(CublasHandle handle, const float* d_p, const float* d_q, uint64_t rows, uint64_t cols,
                             uint32_t rank, float* d_inout);

/// orthonormalize_columns() of the rows x rank matrix d_p, in place, bit-identical to the CPU
/// (see the file comment). Workspace: rows * rank doubles.
/// kInvalidArgument if rows * rank overflows or a pointer is missing (when rows * rank > 0).
Status orthonormalize_columns_cuda(void* d_temp_storage, size_t& temp_storage_bytes, float* d_p, uint64_t rows,
                                   uint32_t rank, CudaStream stream = nullptr);

/// d_out[i] = standard_normal_at(key, index_base + i) for i < count.
/// kInvalidArgument unless index_base + count <= 2^41 (standard_normal_at's index range).
Status standard_normal_cuda(const RngKey& key, uint64_t index_base, uint64_t count, float* d_out,
                            CudaStream stream = nullptr);

/// The random columns of PowerSGD's Q (LowRankCompressor::ensure_q): for first_column <= k < rank
/// and j < cols, d_q[j * rank + k] = standard_normal_at(key, index_base + k * cols + j), index_base
/// being the layer's offset in the gradient; columns below first_column (kept by a warm start) are
/// left untouched. kInvalidArgument unless first_column <= rank and index_base + rank * cols <= 2^41.
Status lowrank_init_q_cuda(const RngKey& key, uint64_t index_base, uint64_t cols, uint32_t rank, uint32_t first_column,
                           float* d_q, CudaStream stream = nullptr);

}  // namespace ccsim::kern
