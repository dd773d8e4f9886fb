// CUDA kernels for the BF16 and block-int8 codecs. Bit-identity with the CPU references rests on
// three things: the shared CCSIM_HD element functions, IEEE division and no FMA contraction
// (nvcc's default -prec-div=true, plus --fmad=false on this target), and the block maximum being
// exact and order-independent (fmaxf and the CPU's std::max both skip NaNs and start from +0).
#include "kernels/cuda/quant_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/quant/bf16.hpp"

static_assert(std::is_same_v<ccsim::kern::CudaStream, cudaStream_t>, "CudaStream must be cudaStream_t");

namespace ccsim::kern {
namespace {

constexpr int kThreads = 256;        // threads per CTA for every kernel here
constexpr uint64_t kMaxGrid = 4096;  // grid-stride loops cover the rest

CCSIM_HD uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

unsigned grid_for(uint64_t work_items, uint64_t items_per_cta) {
  return static_cast<unsigned>(std::clamp<uint64_t>(ceil_div(work_items, items_per_cta), 1, kMaxGrid));
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

Status launch_status(const char* op) { return cuda_status(cudaGetLastError(), op); }

// --- BF16: elementwise, grid-stride, four elements per thread per step when aligned ----------

template <class T>
struct Vec4;
template <>
struct Vec4<float> {
  using type = float4;
};
template <>
struct Vec4<uint16_t> {
  using type = ushort4;
};

struct Bf16Encode {
  static constexpr bool kReadsOut = false;
  __device__ uint16_t operator()(float x, uint16_t) const { return float_to_bf16_rne(x); }
};
struct Bf16Decode {
  static constexpr bool kReadsOut = false;
  __device__ float operator()(uint16_t h, float) const { return bf16_to_float(h); }
};
struct Bf16DecodeAccumulate {
  static constexpr bool kReadsOut = true;
  __device__ float operator()(uint16_t h, float acc) const { return acc + bf16_to_float(h); }
};

// out[i] = op(in[i], out[i]). With kVec, `in` and `out` are aligned to their 4-element vectors.
template <bool kVec, class In, class Out, class Op>
__global__ void __launch_bounds__(kThreads)
    map_kernel(const In* __restrict__ in, uint64_t n, Out* __restrict__ out, Op op) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t head = 0;
  if constexpr (kVec) {
    using InV = typename Vec4<In>::type;
    using OutV = typename Vec4<Out>::type;
    const auto* in4 = reinterpret_cast<const InV*>(in);
    auto* out4 = reinterpret_cast<OutV*>(out);
    head = n / 4 * 4;
    for (uint64_t v = tid; v < n / 4; v += stride) {
      const InV a = in4[v];
      OutV o{};
      if constexpr (Op::kReadsOut) o = out4[v];
      o.x = op(a.x, o.x);
      o.y = op(a.y, o.y);
      o.z = op(a.z, o.z);
      o.w = op(a.w, o.w);
      out4[v] = o;
    }
  }
  for (uint64_t i = head + tid; i < n; i += stride) out[i] = op(in[i], Op::kReadsOut ? out[i] : Out{});
}

template <class In, class Out, class Op>
Status launch_map(const In* d_in, uint64_t count, Out* d_out, CudaStream stream, const char* name) {
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return invalid_argument(std::string(name) + ": null device pointer");
  if (aligned(d_in, 4 * sizeof(In)) && aligned(d_out, 4 * sizeof(Out))) {
    map_kernel<true><<<grid_for(count / 4 + count % 4, kThreads), kThreads, 0, stream>>>(d_in, count, d_out, Op{});
  } else {
    map_kernel<false><<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_in, count, d_out, Op{});
  }
  return launch_status(name);
}

// --- block int8 ----------------------------------------------------------------------------------

// Encode: a group of kGroup threads per quantization block (a sub-warp, a warp, or the whole CTA),
// groups striding over blocks. The loop trip count is uniform across the CTA, so full-mask
// shuffles and __syncthreads are safe; groups past the last block idle through it.
template <int kGroup>
__device__ float group_max(float m) {
  constexpr int kWidth = kGroup < 32 ? kGroup : 32;
  for (int off = kWidth / 2; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  if constexpr (kGroup > 32) {
    static_assert(kGroup == kThreads, "a group larger than a warp is the whole CTA");
    __shared__ float warp_max[kThreads / 32];
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    m = warp_max[0];
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    __syncthreads();  // warp_max is rewritten by the next block
  }
  return m;
}

template <int kGroup>
__global__ void __launch_bounds__(kThreads)
    block_int8_encode_kernel(const float* __restrict__ x, uint64_t count, uint32_t block, Rounding rounding, RngKey key,
                             uint64_t index_base, uint8_t* __restrict__ out) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const uint64_t blocks = ceil_div(count, block);
  auto* codes = reinterpret_cast<int8_t*>(out + 4 * blocks);
  const unsigned lane = threadIdx.x % kGroup;
  for (uint64_t b0 = blockIdx.x * kGroupsPerCta; b0 < blocks; b0 += gridDim.x * kGroupsPerCta) {
    const uint64_t b = b0 + threadIdx.x / kGroup;
    const bool valid = b < blocks;
    const uint64_t begin = valid ? b * block : 0;
    const uint64_t end = !valid ? 0 : count - begin < block ? count : begin + block;
    float m = 0.0f;
    for (uint64_t i = begin + lane; i < end; i += kGroup) m = fmaxf(m, fabsf(x[i]));
    m = group_max<kGroup>(m);
    if (!valid) continue;
    if (lane == 0) memcpy(out + 4 * b, &m, sizeof m);  // byte stores: `out` may be unaligned
    for (uint64_t i = begin + lane; i < end; i += kGroup) {
      const float u = rounding == Rounding::kStochastic ? uniform_at(key, index_base + i) : 0.0f;
      codes[i] = int8_quantize(x[i], m, rounding, u);
    }
  }
}

// Decode: elementwise, grid-stride; each element reads its block's scale (cached).
template <bool kAccumulate>
__global__ void __launch_bounds__(kThreads)
    block_int8_decode_kernel(const uint8_t* __restrict__ in, uint64_t count, uint32_t block, float* __restrict__ out) {
  const uint64_t blocks = ceil_div(count, block);
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  const bool scales_aligned = reinterpret_cast<uintptr_t>(in) % 4 == 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint64_t b = i / block;
    float m;
    if (scales_aligned) {
      m = reinterpret_cast<const float*>(in)[b];
    } else {
      memcpy(&m, in + 4 * b, sizeof m);
    }
    const float v = int8_dequantize(codes[i], m);
    if constexpr (kAccumulate) {
      out[i] += v;
    } else {
      out[i] = v;
    }
  }
}

// Threads per quantization block: the next power of two up to a warp; a warp up to 2048
// elements (64 per lane); the whole CTA above.
int encode_group_threads(uint32_t block) {
  if (block > 2048) return kThreads;
  int g = 1;
  while (g < 32 && static_cast<uint32_t>(g) < block) g *= 2;
  return g;
}

template <int kGroup>
void launch_encode(const float* d_x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                   uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  const unsigned grid = grid_for(ceil_div(count, block), kThreads / kGroup);
  block_int8_encode_kernel<kGroup><<<grid, kThreads, 0, stream>>>(d_x, count, block, rounding, key, index_base, d_out);
}

template <bool kAccumulate>
Status launch_decode(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_out, CudaStream stream,
                     const char* name) {
  CCSIM_RETURN_IF_ERROR(block_int8_cuda_can_implement(count, block).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return invalid_argument(std::string(name) + ": null device pointer");
  block_int8_decode_kernel<kAccumulate><<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_in, count, block, d_out);
  return launch_status(name);
}

}  // namespace

bool cuda_device_available() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // do not leave the error for the next launch check to report
    return false;
  }
  return n > 0;
}

Status cuda_status(int cuda_error, std::string_view context) {
  if (cuda_error == cudaSuccess) return ok_status();
  const auto e = static_cast<cudaError_t>(cuda_error);
  return internal_error(std::string(context) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

Status bf16_encode_cuda(const float* d_x, uint64_t count, uint16_t* d_out, CudaStream stream) {
  return launch_map<float, uint16_t, Bf16Encode>(d_x, count, d_out, stream, "bf16_encode_cuda");
}

Status bf16_decode_cuda(const uint16_t* d_in, uint64_t count, float* d_out, CudaStream stream) {
  return launch_map<uint16_t, float, Bf16Decode>(d_in, count, d_out, stream, "bf16_decode_cuda");
}

Status bf16_decode_accumulate_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, CudaStream stream) {
  return launch_map<uint16_t, float, Bf16DecodeAccumulate>(d_in, count, d_acc, stream, "bf16_decode_accumulate_cuda");
}

Status block_int8_cuda_can_implement(uint64_t /*count*/, uint32_t block) {
  if (block < 1 || block > kBlockInt8CudaMaxBlock) {
    return invalid_argument("block size must be in [1, " + std::to_string(kBlockInt8CudaMaxBlock) + "], got " +
                            std::to_string(block));
  }
  return ok_status();
}

Status block_int8_encode_cuda(const float* d_x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                              uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  constexpr const char* kName = "block_int8_encode_cuda";
  CCSIM_RETURN_IF_ERROR(block_int8_cuda_can_implement(count, block).with_context(kName));
  if (rounding != Rounding::kNearest && rounding != Rounding::kStochastic) {
    return invalid_argument(std::string(kName) + ": unknown rounding mode");
  }
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_out == nullptr) return invalid_argument(std::string(kName) + ": null device pointer");
  switch (encode_group_threads(block)) {
    case 1: launch_encode<1>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    case 2: launch_encode<2>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    case 4: launch_encode<4>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    case 8: launch_encode<8>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    case 16: launch_encode<16>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    case 32: launch_encode<32>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
    default: launch_encode<kThreads>(d_x, count, block, rounding, key, index_base, d_out, stream); break;
  }
  return launch_status(kName);
}

Status block_int8_decode_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_out, CudaStream stream) {
  return launch_decode<false>(d_in, count, block, d_out, stream, "block_int8_decode_cuda");
}

Status block_int8_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_acc,
                                         CudaStream stream) {
  return launch_decode<true>(d_in, count, block, d_acc, stream, "block_int8_decode_accumulate_cuda");
}

}  // namespace ccsim::kern
