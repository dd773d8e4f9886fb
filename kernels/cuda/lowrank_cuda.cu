// CUDA versions of kernels/linalg/power_iteration.hpp (lowrank_cuda.hpp): the four products through
// cuBLAS, modified Gram-Schmidt as one CTA that reproduces the CPU's double arithmetic step by step,
// and Box-Muller normals with correctly rounded log and cos (cr_math.cuh).
//
// Row-major to cuBLAS. A row-major r x c matrix is, read column-major, its c x r transpose with
// leading dimension c. So with M (rows x cols), P (rows x rank) and Q (cols x rank) row-major:
//   P = M Q      <=>  P^T (rank x rows)  = Q^T (rank x cols) M^T (cols x rows)  : gemm(N, N)
//   Q = M^T P    <=>  Q^T (rank x cols)  = P^T (rank x rows) M (rows x cols)    : gemm(N, T), M^T read as stored
//   O = P Q^T    <=>  O^T (cols x rows)  = Q (cols x rank) P^T (rank x rows)    : gemm(T, N)
// where every operand is passed as stored (its column-major reading is the transpose noted).
#include "kernels/cuda/lowrank_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/cuda/cr_math.cuh"

static_assert(std::is_same_v<ccsim::kern::CublasHandle, cublasHandle_t>, "CublasHandle must be cublasHandle_t");

namespace ccsim::kern {
namespace {

using cuda_detail::grid_for;
using cuda_detail::kThreads;
using cuda_detail::launch_status;
using cuda_detail::null_pointer;

// --- cuBLAS, loaded on first use ------------------------------------------------------------------
// Linking cuBLAS would load it (and cuBLASLt, whose initializers touch about 200 MB) at the start of
// every process, whether or not it runs a low-rank kernel on a GPU; it is opened here instead, the
// first time a handle is made. The pointers' types come from cublas_v2.h, so a call through them is
// checked as a direct call would be.

// cublasGemmEx with a cublasComputeType_t (the header also has an inline overload taking a
// cudaDataType); the cast in the unevaluated decltype fails to compile unless it names a declared one.
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(std::is_same_v<GemmEx, decltype(static_cast<GemmEx>(&cublasGemmEx))>);

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasGetStream_v2) get_stream = nullptr;
  GemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be loaded; empty when loaded
};

template <typename F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr && error.empty()) error = std::string("symbol ") + name + " not found in " + CCSIM_CUBLAS_SONAME;
  return fn != nullptr;
}

CublasApi load_cublas() {
  CublasApi api;
  void* lib = dlopen(CCSIM_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen(CCSIM_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    api.error = std::string("cuBLAS could not be loaded (") + CCSIM_CUBLAS_SONAME + ", " + CCSIM_CUBLAS_PATH +
                "): " + (why != nullptr ? why : "unknown error");
    return api;
  }
  // Kept open for the life of the process, as a linked library would be.
  bool ok = resolve(lib, "cublasCreate_v2", api.create, api.error);
  ok = resolve(lib, "cublasDestroy_v2", api.destroy, api.error) && ok;
  ok = resolve(lib, "cublasSetStream_v2", api.set_stream, api.error) && ok;
  ok = resolve(lib, "cublasGetStream_v2", api.get_stream, api.error) && ok;
  ok = resolve(lib, "cublasGemmEx", api.gemm_ex, api.error) && ok;
  ok = resolve(lib, "cublasGetStatusName", api.status_name, api.error) && ok;
  ok = resolve(lib, "cublasGetStatusString", api.status_string, api.error) && ok;
  if (!ok) api.create = nullptr;  // a handle is never made, so no other pointer is ever called
  return api;
}

const CublasApi& cublas_api() {
  static const CublasApi api = load_cublas();
  return api;
}

// --- GEMM ----------------------------------------------------------------------------------------

bool fits_int(uint64_t v) { return v <= kLowrankCudaMaxDim; }

// C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C in fp32 without TF32 (see the header).
// With k == 0 the product is empty: C = beta C, done here (beta is 0 or 1).
Status gemm(CublasHandle handle, cublasOperation_t ta, cublasOperation_t tb, uint64_t m, uint64_t n, uint64_t k,
            float alpha, const float* a, uint64_t lda, const float* b, uint64_t ldb, float beta, float* c,
            uint64_t ldc, const char* op) {
  if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc)) {
    return invalid_argument(std::string(op) + ": a dimension exceeds cuBLAS's 32-bit range");
  }
  if (m == 0 || n == 0) return ok_status();
  if (c == nullptr || (k > 0 && (a == nullptr || b == nullptr))) return null_pointer(op);
  if (k == 0) {
    if (beta != 0.0f) return ok_status();  // C = 1 * C
    cudaStream_t stream = nullptr;
    CCSIM_RETURN_IF_ERROR(cublas_status(cublas_api().get_stream(handle, &stream), op));
    // C is m x n with ldc == m here (every caller's C is dense).
    return cuda_status(cudaMemsetAsync(c, 0, m * n * sizeof(float), stream), op);
  }
  return cublas_status(
      cublas_api().gemm_ex(handle, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, a,
                           CUDA_R_32F, static_cast<int>(lda), b, CUDA_R_32F, static_cast<int>(ldb), &beta, c,
                           CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
      op);
}

// --- Gram-Schmidt --------------------------------------------------------------------------------

constexpr int kOrthoThreads = 512;

// orthonormalize_columns on one CTA. v is the column-major double copy (column k at v + k * rows),
// as on the CPU. Thread 0 computes every dot product and squared norm serially in row order and
// broadcasts it; all threads then update the column's elements. Every statement is the CPU's
// operation on the same operands (products rounded before the sum or difference: the CPU is built
// with -ffp-contract=off).
__global__ void __launch_bounds__(kOrthoThreads)
    orthonormalize_kernel(float* __restrict__ p, uint64_t rows, uint32_t rank, double* __restrict__ v) {
  __shared__ double broadcast;
  const uint64_t n = rows * rank;
  for (uint64_t e = threadIdx.x; e < n; e += kOrthoThreads) v[(e % rank) * rows + e / rank] = p[e];
  __syncthreads();
  for (uint32_t k = 0; k < rank; ++k) {
    double* col = v + k * rows;
    for (int pass = 0; pass < 2; ++pass) {
      for (uint32_t j = 0; j < k; ++j) {
        const double* prev = v + j * rows;
        if (threadIdx.x == 0) {
          double dot = 0;
          for (uint64_t i = 0; i < rows; ++i) dot = __dadd_rn(dot, __dmul_rn(prev[i], col[i]));
          broadcast = dot;
        }
        __syncthreads();
        const double dot = broadcast;
        for (uint64_t i = threadIdx.x; i < rows; i += kOrthoThreads) {
          col[i] = __dsub_rn(col[i], __dmul_rn(dot, prev[i]));
        }
        __syncthreads();  // col is complete, and `broadcast` read by all, before thread 0 goes on
      }
    }
    if (threadIdx.x == 0) {
      double norm2 = 0;
      for (uint64_t i = 0; i < rows; ++i) norm2 = __dadd_rn(norm2, __dmul_rn(col[i], col[i]));
      const double norm = __dsqrt_rn(norm2);
      broadcast = norm > 0 && isfinite(norm) ? __ddiv_rn(1.0, norm) : 0.0;
    }
    __syncthreads();
    const double scale = broadcast;
    for (uint64_t i = threadIdx.x; i < rows; i += kOrthoThreads) col[i] = scale > 0 ? __dmul_rn(col[i], scale) : 0.0;
    __syncthreads();
  }
  for (uint64_t e = threadIdx.x; e < n; e += kOrthoThreads) p[e] = __double2float_rn(v[(e % rank) * rows + e / rank]);
}

// --- normals -------------------------------------------------------------------------------------

constexpr uint64_t kNormalMaxIndex = uint64_t{1} << 41;
constexpr double kTwoPi = 0x1.921fb54442d18p+2;  // 2.0 * std::numbers::pi, the CPU's folded constant

// standard_normal_at(key, index): u1, u2 are words 2 index % 4 and the next of one Philox block;
// then the CPU's expression, operation by operation.
__device__ __forceinline__ float normal_at(const RngKey& key, uint64_t index) {
  const U32x4 r = philox_block(key, index >> 1);  // indices 2 index and 2 index + 1 share block index / 2
  const bool odd = (index & 1u) != 0;
  const double u1 = u32_to_unit_float(odd ? r.v[2] : r.v[0]);
  const double u2 = u32_to_unit_float(odd ? r.v[3] : r.v[1]);
  const double radius = __dsqrt_rn(__dmul_rn(-2.0, cr::log_cr(__dsub_rn(1.0, u1))));
  return __double2float_rn(__dmul_rn(radius, cr::cos_cr(__dmul_rn(kTwoPi, u2))));
}

__global__ void __launch_bounds__(kThreads)
    normal_kernel(RngKey key, uint64_t index_base, uint64_t count, float* __restrict__ out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = normal_at(key, index_base + i);
}

// Element e of the cols x (rank - first) block, in storage order: row j = e / width, column
// first + e % width.
__global__ void __launch_bounds__(kThreads)
    init_q_kernel(RngKey key, uint64_t index_base, uint64_t cols, uint32_t rank, uint32_t first,
                  float* __restrict__ q) {
  const uint32_t width = rank - first;
  const uint64_t n = cols * width;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const uint64_t j = e / width, k = first + e % width;
    q[j * rank + k] = normal_at(key, index_base + k * cols + j);
  }
}

}  // namespace

Status cublas_status(int status, const char* context) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  const auto s = static_cast<cublasStatus_t>(status);
  const CublasApi& api = cublas_api();
  if (api.status_name == nullptr || api.status_string == nullptr)
    return internal_error(std::string(context) + ": cuBLAS status " + std::to_string(status));
  return internal_error(std::string(context) + ": " + api.status_name(s) + ": " + api.status_string(s));
}

Result<CublasHandle> cublas_create() {
  const CublasApi& api = cublas_api();
  if (api.create == nullptr) return internal_error("cublasCreate: " + api.error);
  cublasHandle_t handle = nullptr;
  CCSIM_RETURN_IF_ERROR(cublas_status(api.create(&handle), "cublasCreate"));
  return handle;
}

void cublas_destroy(CublasHandle handle) {
  if (handle != nullptr) cublas_api().destroy(handle);
}

Status cublas_set_stream(CublasHandle handle, CudaStream stream) {
  return cublas_status(cublas_api().set_stream(handle, static_cast<cudaStream_t>(stream)), "cublasSetStream");
}

Status lowrank_project_cuda(CublasHandle handle, const float* d_m, uint64_t rows, uint64_t cols, const float* d_q,
                            uint32_t rank, float* d_p) {
  // P^T (rank x rows) = Q^T (rank x cols, ld rank) * M^T (cols x rows, ld cols).
  return gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, rank, rows, cols, 1.0f, d_q, rank, d_m, cols, 0.0f, d_p, rank,
              "lowrank_project_cuda");
}

Status lowrank_project_transposed_cuda(CublasHandle handle, const float* d_m, uint64_t rows, uint64_t cols,
                                       const float* d_p, uint32_t rank, float* d_q) {
  // Q^T (rank x cols) = P^T (rank x rows, ld rank) * op(M^T as stored: cols x rows, ld cols) = ... * M.
  return gemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, rank, cols, rows, 1.0f, d_p, rank, d_m, cols, 0.0f, d_q, rank,
              "lowrank_project_transposed_cuda");
}

Status lowrank_expand_cuda(CublasHandle handle, const float* d_p, const float* d_q, uint64_t rows, uint64_t cols,
                           uint32_t rank, float* d_out) {
  // O^T (cols x rows) = op(Q^T as stored: rank x cols, ld rank) = Q, times P^T (rank x rows, ld rank).
  return gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, rank, 1.0f, d_q, rank, d_p, rank, 0.0f, d_out, cols,
              "lowrank_expand_cuda");
}

Status lowrank_subtract_cuda(CublasHandle handle, const float* d_p, const float* d_q, uint64_t rows, uint64_t cols,
                             uint32_t rank, float* d_inout) {
  return gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, rank, -1.0f, d_q, rank, d_p, rank, 1.0f, d_inout, cols,
              "lowrank_subtract_cuda");
}

Status orthonormalize_columns_cuda(void* d_temp_storage, size_t& temp_storage_bytes, float* d_p, uint64_t rows,
                                   uint32_t rank, CudaStream stream) {
  constexpr const char* kName = "orthonormalize_columns_cuda";
  if (rank != 0 && rows > (UINT64_MAX - alignof(double)) / sizeof(double) / rank) {
    return invalid_argument(std::string(kName) + ": rows * rank overflows");
  }
  // The double copy, plus the slack to align a workspace that starts anywhere to a double.
  const uint64_t copy_bytes = rows * rank * sizeof(double);
  const uint64_t bytes = copy_bytes > 0 ? copy_bytes + alignof(double) - 1 : 1;
  if (d_temp_storage == nullptr) {
    temp_storage_bytes = bytes;
    return ok_status();
  }
  if (temp_storage_bytes < bytes) {
    return invalid_argument(std::string(kName) + ": workspace of " + std::to_string(temp_storage_bytes) +
                            " bytes, needs " + std::to_string(bytes));
  }
  if (copy_bytes == 0) return ok_status();
  if (d_p == nullptr) return null_pointer(kName);
  const uintptr_t base = reinterpret_cast<uintptr_t>(d_temp_storage);
  double* copy = reinterpret_cast<double*>((base + alignof(double) - 1) & ~uintptr_t{alignof(double) - 1});
  orthonormalize_kernel<<<1, kOrthoThreads, 0, stream>>>(d_p, rows, rank, copy);
  return launch_status(kName);
}

Status standard_normal_cuda(const RngKey& key, uint64_t index_base, uint64_t count, float* d_out, CudaStream stream) {
  constexpr const char* kName = "standard_normal_cuda";
  if (index_base > kNormalMaxIndex || count > kNormalMaxIndex - index_base) {
    return invalid_argument(std::string(kName) + ": indices past 2^41");
  }
  if (count == 0) return ok_status();
  if (d_out == nullptr) return null_pointer(kName);
  normal_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(key, index_base, count, d_out);
  return launch_status(kName);
}

Status lowrank_init_q_cuda(const RngKey& key, uint64_t index_base, uint64_t cols, uint32_t rank, uint32_t first_column,
                           float* d_q, CudaStream stream) {
  constexpr const char* kName = "lowrank_init_q_cuda";
  if (first_column > rank) return invalid_argument(std::string(kName) + ": first_column > rank");
  if (cols != 0 && (rank > kNormalMaxIndex / cols || index_base > kNormalMaxIndex - rank * cols)) {
    return invalid_argument(std::string(kName) + ": indices past 2^41");
  }
  const uint64_t n = cols * (rank - first_column);
  if (n == 0) return ok_status();
  if (d_q == nullptr) return null_pointer(kName);
  init_q_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(key, index_base, cols, rank, first_column, d_q);
  return launch_status(kName);
}

}  // namespace ccsim::kern
