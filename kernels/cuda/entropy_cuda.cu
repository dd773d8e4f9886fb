// CUDA kernels for the histogram entropy of kernels/stats/entropy.hpp (entropy_cuda.hpp). Four
// launches per entropy: init (range to {+inf, -inf}, counts to zero), range (min/max of the
// sampled finite entries), counts, and the one-CTA entropy. Exactness: min/max and integer counts
// do not depend on the order of the atomics; the bins come from the CPU's histogram_bin; the
// entropy is summed in bin order by one thread, with a correctly rounded log2 (cr_math.cuh).
#include "kernels/cuda/entropy_cuda.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/cuda/cr_math.cuh"
#include "kernels/stats/entropy.hpp"

namespace ccsim::kern {
namespace {

using cuda_detail::ceil_div;
using cuda_detail::grid_for;
using cuda_detail::kFullMask;
using cuda_detail::kThreads;
using cuda_detail::launch_status;
using cuda_detail::null_pointer;

constexpr int kEntropyThreads = 1024;  // the one CTA of the entropy kernel
constexpr size_t kCountsOffset = 256;  // workspace: range {lo, hi} at 0, counts from here

__device__ __forceinline__ bool finite(float v) { return (__float_as_uint(v) & 0x7F800000u) != 0x7F800000u; }

// Calls fn(v) for every sampled finite entry v of x[0, count), element i being global index
// index_base + i. Threads stride over Philox blocks ("quads" of four global indices): one draw
// serves the quad's entries, which are the four consecutive floats the thread loads. Without
// kSample (fraction >= 1) every entry is taken and nothing is drawn, as on the CPU.
template <bool kSample, class Fn>
__device__ __forceinline__ void for_each_sampled(const float* __restrict__ x, uint64_t count, uint64_t index_base,
                                                 float fraction, const RngKey& key, Fn&& fn) {
  const uint64_t end = index_base + count;
  const uint64_t q_end = ceil_div(end, 4);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t q = index_base / 4 + static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < q_end;
       q += stride) {
    U32x4 r{};
    if constexpr (kSample) r = philox_block(key, q);
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
      const uint64_t g = 4 * q + j;
      if (g < index_base || g >= end) continue;
      if constexpr (kSample) {
        if (!(u32_to_unit_float(r.v[j]) < fraction)) continue;
      }
      const float v = x[g - index_base];
      if (finite(v)) fn(v);
    }
  }
}

// Floats in the order -inf < ... < -0 < +0 < ... < +inf as unsigned integers.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v);
  return (u >> 31) != 0 ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float from_order_key(uint32_t k) {
  return __uint_as_float((k >> 31) != 0 ? k & 0x7FFFFFFFu : ~k);
}

// *addr = min(*addr, v) and max, in the order above, for non-NaN floats: non-negative patterns
// order as signed integers, negative ones in reverse as unsigned integers.
__device__ __forceinline__ void atomic_min_float(float* addr, float v) {
  if ((__float_as_uint(v) >> 31) == 0) {
    atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v));
  } else {
    atomicMax(reinterpret_cast<unsigned*>(addr), __float_as_uint(v));
  }
}
__device__ __forceinline__ void atomic_max_float(float* addr, float v) {
  if ((__float_as_uint(v) >> 31) == 0) {
    atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
  } else {
    atomicMin(reinterpret_cast<unsigned*>(addr), __float_as_uint(v));
  }
}

// range = {+inf, -inf}, counts = 0.
__global__ void __launch_bounds__(kThreads) init_kernel(float* __restrict__ range, uint64_t* __restrict__ counts,
                                                        uint32_t bins) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid == 0) {
    range[0] = __uint_as_float(0x7F800000u);
    range[1] = __uint_as_float(0xFF800000u);
  }
  for (uint32_t b = tid; b < bins; b += gridDim.x * blockDim.x) counts[b] = 0;
}

// The minimum and maximum of the sampled finite entries into range[0], range[1]: per thread, then
// per warp (shuffles), then one pair of atomics per warp.
template <bool kSample>
__global__ void __launch_bounds__(kThreads)
    range_kernel(const float* __restrict__ x, uint64_t count, uint64_t index_base, float fraction, RngKey key,
                 float* __restrict__ range) {
  uint32_t lo = 0xFFFFFFFFu, hi = 0;  // order keys; no finite value has either
  for_each_sampled<kSample>(x, count, index_base, fraction, key, [&](float v) {
    const uint32_t k = order_key(v);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  });
  for (int off = 16; off > 0; off /= 2) {
    const uint32_t l = __shfl_xor_sync(kFullMask, lo, off), h = __shfl_xor_sync(kFullMask, hi, off);
    lo = l < lo ? l : lo;
    hi = h > hi ? h : hi;
  }
  if (threadIdx.x % 32 == 0 && hi != 0) {
    atomic_min_float(range, from_order_key(lo));
    atomic_max_float(range + 1, from_order_key(hi));
  }
}

// Counts into `counts` (global, 64-bit) the sampled finite entries in `bins` bins over [lo, hi];
// lo and hi come from `d_range` when it is set (the range kernel's result), else from the
// arguments. Nothing is counted unless hi > lo. With kShared the CTA counts in dynamic shared
// memory (bins 32-bit counters: a CTA sees at most 2^42 / gridDim.x entries, far below 2^32 when
// the grid is full, see grid_for) and adds its non-zero counters to the global ones at the end.
// When `total` is set, adds the number of entries counted to it.
template <bool kSample, bool kShared>
__global__ void __launch_bounds__(kThreads)
    count_kernel(const float* __restrict__ x, uint64_t count, uint64_t index_base, float fraction, RngKey key,
                 uint32_t bins, float lo, float hi, const float* __restrict__ d_range, uint64_t* __restrict__ counts,
                 uint64_t* __restrict__ total) {
  extern __shared__ uint32_t cta_counts[];
  if (d_range != nullptr) {
    lo = d_range[0];
    hi = d_range[1];
  }
  if (!(hi > lo)) return;  // the same for every thread of the grid
  if constexpr (kShared) {
    for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x) cta_counts[b] = 0;
    __syncthreads();
  }
  uint64_t counted = 0;
  for_each_sampled<kSample>(x, count, index_base, fraction, key, [&](float v) {
    const uint32_t b = histogram_bin(v, lo, hi, bins);
    if constexpr (kShared) {
      atomicAdd(cta_counts + b, 1u);
    } else {
      atomicAdd(reinterpret_cast<unsigned long long*>(counts + b), 1ull);
    }
    ++counted;
  });
  if constexpr (kShared) {
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x) {
      if (cta_counts[b] != 0) atomicAdd(reinterpret_cast<unsigned long long*>(counts + b), cta_counts[b]);
    }
  }
  if (total != nullptr) {
    for (int off = 16; off > 0; off /= 2) counted += __shfl_xor_sync(kFullMask, counted, off);
    if (threadIdx.x % 32 == 0 && counted != 0) atomicAdd(reinterpret_cast<unsigned long long*>(total), counted);
  }
}

// entropy_bits() of counts[0, bins) into *out, one CTA of kEntropyThreads. The total is an exact
// integer sum (any order). Then, a tile of kEntropyThreads bins at a time, every thread computes
// its bin's term p log2 p (p = count / total, as the CPU: both converted to double, IEEE division,
// product rounded) and thread 0 subtracts the tile's terms from h in bin order, skipping empty
// bins, exactly as entropy_bits' loop.
__global__ void __launch_bounds__(kEntropyThreads)
    entropy_kernel(const uint64_t* __restrict__ counts, uint32_t bins, double* __restrict__ out) {
  __shared__ double term[kEntropyThreads];
  __shared__ bool used[kEntropyThreads];
  __shared__ uint64_t warp_total[kEntropyThreads / 32];
  uint64_t total = 0;
  for (uint32_t b = threadIdx.x; b < bins; b += kEntropyThreads) total += counts[b];
  for (int off = 16; off > 0; off /= 2) total += __shfl_xor_sync(kFullMask, total, off);
  if (threadIdx.x % 32 == 0) warp_total[threadIdx.x / 32] = total;
  __syncthreads();
  total = 0;
  for (int w = 0; w < kEntropyThreads / 32; ++w) total += warp_total[w];
  if (total == 0) {
    if (threadIdx.x == 0) *out = 0.0;
    return;  // the same for every thread
  }
  const double t = __ull2double_rn(total);
  double h = 0.0;
  for (uint32_t b0 = 0; b0 < bins; b0 += kEntropyThreads) {
    const uint32_t b = b0 + threadIdx.x;
    const uint64_t c = b < bins ? counts[b] : 0;
    used[threadIdx.x] = c != 0;
    if (c != 0) {
      const double p = __ddiv_rn(__ull2double_rn(c), t);
      term[threadIdx.x] = __dmul_rn(p, cr::log2_cr(p));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint32_t n = bins - b0 < kEntropyThreads ? bins - b0 : kEntropyThreads;
      for (uint32_t j = 0; j < n; ++j) {
        if (used[j]) h = __dsub_rn(h, term[j]);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = h;
}

template <bool kSample>
Status launch_counts(const float* d_x, uint64_t count, uint64_t index_base, float fraction, const RngKey& key,
                     uint32_t bins, float lo, float hi, const float* d_range, uint64_t* d_counts, uint64_t* d_total,
                     CudaStream stream, const char* op) {
  const unsigned grid = grid_for(ceil_div(index_base % 4 + count, 4), 4 * kThreads);
  if (bins <= kEntropyCudaSharedBins) {
    count_kernel<kSample, true><<<grid, kThreads, bins * sizeof(uint32_t), stream>>>(
        d_x, count, index_base, fraction, key, bins, lo, hi, d_range, d_counts, d_total);
  } else {
    count_kernel<kSample, false><<<grid, kThreads, 0, stream>>>(d_x, count, index_base, fraction, key, bins, lo, hi,
                                                                 d_range, d_counts, d_total);
  }
  return launch_status(op);
}

size_t workspace_bytes(uint32_t bins) { return kCountsOffset + static_cast<size_t>(bins) * sizeof(uint64_t); }

}  // namespace

EntropyCudaScratch entropy_cuda_scratch(const void* d_temp_storage) {
  const auto* p = static_cast<const uint8_t*>(d_temp_storage);
  return {reinterpret_cast<const float*>(p), reinterpret_cast<const uint64_t*>(p + kCountsOffset)};
}

Status histogram_cuda(const float* d_x, uint64_t count, uint32_t bins, float lo, float hi, uint64_t* d_counts,
                      uint64_t* d_total, CudaStream stream) {
  constexpr const char* kName = "histogram_cuda";
  if (bins < 1) return invalid_argument(std::string(kName) + ": needs at least one bin");
  if (!(hi > lo)) {
    return invalid_argument(std::string(kName) + ": range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "] is empty");
  }
  if (count > kEntropyCudaMaxEntries) return invalid_argument(std::string(kName) + ": too many entries");
  if ((count > 0 && d_x == nullptr) || d_counts == nullptr) return null_pointer(kName);
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(d_counts, 0, bins * sizeof(uint64_t), stream), kName));
  if (d_total != nullptr) {
    CCSIM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(d_total, 0, sizeof(uint64_t), stream), kName));
  }
  if (count == 0) return ok_status();
  return launch_counts<false>(d_x, count, 0, 1.0f, RngKey{}, bins, lo, hi, nullptr, d_counts, d_total, stream, kName);
}

Status entropy_bits_cuda(const uint64_t* d_counts, uint32_t bins, double* d_entropy, CudaStream stream) {
  constexpr const char* kName = "entropy_bits_cuda";
  if (bins < 1) return invalid_argument(std::string(kName) + ": needs at least one bin");
  if (d_counts == nullptr || d_entropy == nullptr) return null_pointer(kName);
  entropy_kernel<<<1, kEntropyThreads, 0, stream>>>(d_counts, bins, d_entropy);
  return launch_status(kName);
}

Status sampled_histogram_entropy_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x,
                                      uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                                      uint64_t index_base, double* d_entropy, CudaStream stream) {
  constexpr const char* kName = "sampled_histogram_entropy_cuda";
  if (bins < 1) return invalid_argument(std::string(kName) + ": needs at least one bin");
  if (!(fraction >= 0.0f && fraction <= 1.0f)) {
    return invalid_argument(std::string(kName) + ": sample fraction " + std::to_string(fraction) + " not in [0, 1]");
  }
  if (index_base > kEntropyCudaMaxEntries || count > kEntropyCudaMaxEntries - index_base) {
    return invalid_argument(std::string(kName) + ": entries past the Philox index range");
  }
  if (d_temp_storage == nullptr) {
    temp_storage_bytes = workspace_bytes(bins);
    return ok_status();
  }
  if (temp_storage_bytes < workspace_bytes(bins)) {
    return invalid_argument(std::string(kName) + ": workspace of " + std::to_string(temp_storage_bytes) +
                            " bytes, needs " + std::to_string(workspace_bytes(bins)));
  }
  if ((count > 0 && d_x == nullptr) || d_entropy == nullptr) return null_pointer(kName);
  auto* range = static_cast<float*>(d_temp_storage);
  auto* counts = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(d_temp_storage) + kCountsOffset);
  init_kernel<<<grid_for(bins, kThreads), kThreads, 0, stream>>>(range, counts, bins);
  CCSIM_RETURN_IF_ERROR(launch_status(kName));
  if (count > 0) {
    const bool sample = fraction < 1.0f;
    const unsigned grid = grid_for(ceil_div(index_base % 4 + count, 4), 4 * kThreads);
    if (sample) {
      range_kernel<true><<<grid, kThreads, 0, stream>>>(d_x, count, index_base, fraction, key, range);
    } else {
      range_kernel<false><<<grid, kThreads, 0, stream>>>(d_x, count, index_base, fraction, key, range);
    }
    CCSIM_RETURN_IF_ERROR(launch_status(kName));
    CCSIM_RETURN_IF_ERROR(sample ? launch_counts<true>(d_x, count, index_base, fraction, key, bins, 0.0f, 0.0f, range,
                                                       counts, nullptr, stream, kName)
                                 : launch_counts<false>(d_x, count, index_base, fraction, key, bins, 0.0f, 0.0f,
                                                        range, counts, nullptr, stream, kName));
  }
  return entropy_bits_cuda(counts, bins, d_entropy, stream);
}

Status histogram_entropy_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x, uint64_t count,
                              uint32_t bins, double* d_entropy, CudaStream stream) {
  return sampled_histogram_entropy_cuda(d_temp_storage, temp_storage_bytes, d_x, count, bins, 1.0f, RngKey{}, 0,
                                        d_entropy, stream);
}

}  // namespace ccsim::kern
