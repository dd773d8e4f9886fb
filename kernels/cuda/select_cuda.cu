// CUDA kernels for OmniReduce's chunk selection (kernels/cuda/select_cuda.hpp). Bit identity with
// plan_local rests on the norm being summed in the CPU's order (one thread per chunk, element by
// element, each square exact in double, no FMA: __dadd_rn / __dmul_rn) and on the selection order
// being a strict total order (key descending, index ascending), which a stable descending sort of
// (key, index) pairs realizes exactly.
#include "kernels/cuda/select_cuda.hpp"

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda_common.cuh"

namespace ccsim::kern {
namespace {

using cuda_detail::ceil_div;
using cuda_detail::grid_for;
using cuda_detail::launch_status;
using cuda_detail::null_pointer;

// --- chunk norms ---------------------------------------------------------------------------------

// A CTA of kCta threads owns kCta consecutive chunks, one thread each. Step by step, the CTA
// stages the next `w` = min(chunk, kNormSlice) elements of each of its chunks in a tile (flat
// order: element e of chunk r at t = r * w + e, so a chunk of at most kNormSlice elements is read
// as one contiguous run, a longer one as rows of 32 consecutive floats), then every thread adds
// its row's squares in element order. Every loop with a barrier runs the same trip count on every
// thread of the CTA.
constexpr uint32_t kNormSlice = 32;

// Where a chunk's key goes: the double itself (omnireduce_chunk_norms_cuda) ...
struct StoreNorm {
  double* norms;
  __device__ void operator()(uint64_t c, double key) const { norms[c] = key; }
};

// The 64-bit pattern whose unsigned order is the selection order of double keys: -0 as +0, NaN as
// +inf, then the usual sign-magnitude flip. Non-negative keys map to bits | 2^63.
__device__ __forceinline__ uint64_t order_bits(double key) {
  constexpr uint64_t kTop = uint64_t{1} << 63;
  if (key != key) return 0x7FF0000000000000ull | kTop;  // NaN ranks as +inf
  if (key == 0.0) return kTop;                         // -0 ties with +0
  const auto u = static_cast<uint64_t>(__double_as_longlong(key));
  return (u >> 63) != 0 ? ~u : u | kTop;
}

// ... or the sort's input pair (order bits, index) for omnireduce_select_cuda.
struct StorePair {
  uint64_t* keys;
  uint32_t* index;
  __device__ void operator()(uint64_t c, double key) const {
    keys[c] = order_bits(key);
    index[c] = static_cast<uint32_t>(c);
  }
};

template <int kCta, class Store>
__global__ void __launch_bounds__(kCta)
    chunk_norm_kernel(const float* __restrict__ x, uint64_t count, uint64_t chunk, uint64_t n_chunks, Store store) {
  __shared__ float tile[kCta][kNormSlice + 1];  // +1: the row-wise reads are bank-conflict free
  const uint32_t w = chunk < kNormSlice ? static_cast<uint32_t>(chunk) : kNormSlice;
  for (uint64_t c0 = static_cast<uint64_t>(blockIdx.x) * kCta; c0 < n_chunks;
       c0 += static_cast<uint64_t>(gridDim.x) * kCta) {
    const uint64_t c = c0 + threadIdx.x;
    const uint64_t len = c >= n_chunks ? 0 : count - c * chunk < chunk ? count - c * chunk : chunk;
    const uint64_t longest = count - c0 * chunk < chunk ? count - c0 * chunk : chunk;  // same for the CTA
    double sum = 0.0;
    for (uint64_t s0 = 0; s0 < longest; s0 += w) {
      for (uint32_t t = threadIdx.x; t < kCta * w; t += kCta) {
        const uint32_t r = t / w, e = t % w;
        const uint64_t cr = c0 + r, i = cr * chunk + s0 + e;
        if (cr < n_chunks && s0 + e < chunk && i < count) tile[r][e] = x[i];
      }
      __syncthreads();
      const uint64_t m = len <= s0 ? 0 : len - s0 < w ? len - s0 : w;
      for (uint32_t e = 0; e < m; ++e) {
        const double v = tile[threadIdx.x][e];
        sum = __dadd_rn(sum, __dmul_rn(v, v));
      }
      __syncthreads();
    }
    if (c < n_chunks) store(c, sum != sum ? __longlong_as_double(0x7FF0000000000000ll) : sum);
  }
}

// Few chunks (long ones): CTAs of one warp spread them over more SMs.
template <class Store>
void launch_norms(const float* d_x, uint64_t count, uint64_t chunk, uint64_t n_chunks, Store store,
                  CudaStream stream) {
  constexpr int kSmall = 32, kLarge = 128;
  if (n_chunks < uint64_t{kLarge} * 512) {
    chunk_norm_kernel<kSmall><<<grid_for(n_chunks, kSmall), kSmall, 0, stream>>>(d_x, count, chunk, n_chunks, store);
  } else {
    chunk_norm_kernel<kLarge><<<grid_for(n_chunks, kLarge), kLarge, 0, stream>>>(d_x, count, chunk, n_chunks, store);
  }
}

// --- selection -----------------------------------------------------------------------------------

constexpr int kThreads = cuda_detail::kThreads;

__global__ void __launch_bounds__(kThreads)
    order_keys_kernel(const double* __restrict__ keys, uint64_t n, uint64_t* __restrict__ bits,
                      uint32_t* __restrict__ index) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t c = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n; c += stride) {
    bits[c] = order_bits(keys[c]);
    index[c] = static_cast<uint32_t>(c);
  }
}

// Sets bit index[j] % 64 of word index[j] / 64 for j < k (the bitmap is zeroed first).
__global__ void __launch_bounds__(kThreads)
    set_bits_kernel(const uint32_t* __restrict__ index, uint64_t k, uint64_t* __restrict__ bitmap) {
  static_assert(sizeof(uint64_t) == sizeof(unsigned long long), "bitmap words are 64-bit");
  auto* words = reinterpret_cast<unsigned long long*>(bitmap);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < k; j += stride) {
    const uint32_t c = index[j];
    atomicOr(words + c / 64, 1ull << (c % 64));
  }
}

// Every chunk chosen: all bits below n set, the rest zero.
__global__ void __launch_bounds__(kThreads) all_bits_kernel(uint64_t n, uint64_t* __restrict__ bitmap) {
  const uint64_t words = topk_bitmap_words(n);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t w = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    const uint64_t valid = n - 64 * w;
    bitmap[w] = valid >= 64 ? ~uint64_t{0} : (uint64_t{1} << valid) - 1;
  }
}

// The workspace: ping-pong buffers of order bits and indices, then CUB's scratch.
struct Workspace {
  uint64_t* keys[2] = {nullptr, nullptr};
  uint32_t* index[2] = {nullptr, nullptr};
  void* cub = nullptr;
  size_t cub_bytes = 0;
  size_t total = 0;
};

constexpr size_t kAlign = 256;
size_t align_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

// Lays the workspace out for n keys (querying CUB); with `base` null only the sizes are set.
Status plan_workspace(void* base, uint64_t n, Workspace& ws) {
  cub::DoubleBuffer<uint64_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<uint32_t> values(nullptr, nullptr);
  CCSIM_RETURN_IF_ERROR(cuda_status(
      cub::DeviceRadixSort::SortPairsDescending(nullptr, ws.cub_bytes, keys, values, static_cast<int>(n)),
      "cub::DeviceRadixSort temp-storage query"));
  const size_t key_bytes = align_up(n * sizeof(uint64_t)), index_bytes = align_up(n * sizeof(uint32_t));
  // kAlign - 1 bytes of slack: the buffer may start anywhere; the layout starts at its first
  // 256-byte boundary.
  ws.total = 2 * key_bytes + 2 * index_bytes + align_up(ws.cub_bytes) + kAlign - 1;
  if (base == nullptr) return ok_status();
  auto* p = static_cast<uint8_t*>(base) + (kAlign - reinterpret_cast<uintptr_t>(base) % kAlign) % kAlign;
  ws.keys[0] = reinterpret_cast<uint64_t*>(p);
  ws.keys[1] = reinterpret_cast<uint64_t*>(p + key_bytes);
  ws.index[0] = reinterpret_cast<uint32_t*>(p + 2 * key_bytes);
  ws.index[1] = reinterpret_cast<uint32_t*>(p + 2 * key_bytes + index_bytes);
  ws.cub = p + 2 * key_bytes + 2 * index_bytes;
  return ok_status();
}

Status check_select(uint64_t n, uint64_t k, const char* op) {
  if (n > kTopkCudaMaxKeys) {
    return invalid_argument(std::string(op) + ": " + std::to_string(n) + " keys, more than " +
                            std::to_string(kTopkCudaMaxKeys));
  }
  if (k > n) return invalid_argument(std::string(op) + ": k = " + std::to_string(k) + " > " + std::to_string(n));
  return ok_status();
}

// The bitmap from the workspace's pairs (keys[0], index[0], filled by the caller's kernel), or
// directly for k == 0 and k == n.
Status select_into_bitmap(Workspace& ws, uint64_t n, uint64_t k, uint64_t* d_bitmap, CudaStream stream,
                          const char* op) {
  if (k == n) {
    all_bits_kernel<<<grid_for(topk_bitmap_words(n), kThreads), kThreads, 0, stream>>>(n, d_bitmap);
    return launch_status(op);
  }
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(d_bitmap, 0, topk_bitmap_words(n) * sizeof(uint64_t), stream),
                                    std::string(op) + ": clearing the bitmap"));
  if (k == 0) return ok_status();
  cub::DoubleBuffer<uint64_t> keys(ws.keys[0], ws.keys[1]);
  cub::DoubleBuffer<uint32_t> values(ws.index[0], ws.index[1]);
  // Stable: equal keys keep their index order, so the first k pairs are the selection order's.
  CCSIM_RETURN_IF_ERROR(cuda_status(cub::DeviceRadixSort::SortPairsDescending(ws.cub, ws.cub_bytes, keys, values,
                                                                              static_cast<int>(n), 0, 64, stream),
                                    std::string(op) + ": cub::DeviceRadixSort"));
  set_bits_kernel<<<grid_for(k, kThreads), kThreads, 0, stream>>>(values.Current(), k, d_bitmap);
  return launch_status(op);
}

// The workspace size for n keys, or the laid-out workspace; at least one byte, so that a buffer of
// the reported size is never null.
Status workspace_for(void* d_temp_storage, size_t& temp_storage_bytes, uint64_t n, Workspace& ws, bool& query,
                     const char* op) {
  CCSIM_RETURN_IF_ERROR(plan_workspace(d_temp_storage, n, ws));
  query = d_temp_storage == nullptr;
  if (query) {
    temp_storage_bytes = ws.total > 0 ? ws.total : 1;
    return ok_status();
  }
  if (temp_storage_bytes < ws.total) {
    return invalid_argument(std::string(op) + ": workspace of " + std::to_string(temp_storage_bytes) +
                            " bytes, needs " + std::to_string(ws.total));
  }
  return ok_status();
}

// No keys: a one-byte workspace (never null once allocated), nothing to do.
Status empty_selection(void* d_temp_storage, size_t& temp_storage_bytes) {
  if (d_temp_storage == nullptr) temp_storage_bytes = 1;
  return ok_status();
}

}  // namespace

Status omnireduce_chunk_norms_cuda(const float* d_x, uint64_t count, uint64_t chunk, double* d_norms,
                                   CudaStream stream) {
  constexpr const char* kName = "omnireduce_chunk_norms_cuda";
  if (chunk < 1) return invalid_argument(std::string(kName) + ": chunk must be >= 1");
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_norms == nullptr) return null_pointer(kName);
  launch_norms(d_x, count, chunk, ceil_div(count, chunk), StoreNorm{d_norms}, stream);
  return launch_status(kName);
}

Status topk_bitmap_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const double* d_keys, uint64_t n, uint64_t k,
                        uint64_t* d_bitmap, CudaStream stream) {
  constexpr const char* kName = "topk_bitmap_cuda";
  CCSIM_RETURN_IF_ERROR(check_select(n, k, kName));
  if (n == 0) return empty_selection(d_temp_storage, temp_storage_bytes);
  if (d_temp_storage != nullptr && (d_keys == nullptr || d_bitmap == nullptr)) return null_pointer(kName);
  Workspace ws;
  bool query = false;
  CCSIM_RETURN_IF_ERROR(workspace_for(d_temp_storage, temp_storage_bytes, n, ws, query, kName));
  if (query) return ok_status();
  if (k > 0 && k < n) {
    order_keys_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(d_keys, n, ws.keys[0], ws.index[0]);
    CCSIM_RETURN_IF_ERROR(launch_status(kName));
  }
  return select_into_bitmap(ws, n, k, d_bitmap, stream, kName);
}

Status omnireduce_select_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x, uint64_t count,
                              uint64_t chunk, uint64_t k, uint64_t* d_bitmap, CudaStream stream) {
  constexpr const char* kName = "omnireduce_select_cuda";
  if (chunk < 1) return invalid_argument(std::string(kName) + ": chunk must be >= 1");
  const uint64_t n = ceil_div(count, chunk);
  CCSIM_RETURN_IF_ERROR(check_select(n, k, kName));
  if (n == 0) return empty_selection(d_temp_storage, temp_storage_bytes);
  if (d_temp_storage != nullptr && (d_x == nullptr || d_bitmap == nullptr)) return null_pointer(kName);
  Workspace ws;
  bool query = false;
  CCSIM_RETURN_IF_ERROR(workspace_for(d_temp_storage, temp_storage_bytes, n, ws, query, kName));
  if (query) return ok_status();
  if (k > 0 && k < n) {
    launch_norms(d_x, count, chunk, n, StorePair{ws.keys[0], ws.index[0]}, stream);
    CCSIM_RETURN_IF_ERROR(launch_status(kName));
  }
  return select_into_bitmap(ws, n, k, d_bitmap, stream, kName);
}

}  // namespace ccsim::kern
