// CUDA kernels for the MX codec (kernels/quant/mx_quant.hpp). Bit identity with mx.cpp rests on:
//  - the element and scale functions being the CCSIM_HD ones (minifloat_encode/decode,
//    mx_scale_code, mx_scale_value, mx_amax_step), compiled with --fmad=false and IEEE division;
//  - the block maximum being exact and order-independent: mx_amax_step and the group combine both
//    return NaN as soon as one operand is NaN and the exact maximum otherwise, so a NaN or an
//    infinity anywhere in a block gives its NaN scale whatever the reduction order;
//  - the two fp32 operations outside those functions, x / scale (encode) and decode * scale,
//    returning the CPU's NaN (block_cuda_common.cuh), which E4M3/E5M2 codes keep the sign of;
//  - the layout: the scale of block b at byte scale_bytes * b, its codes packed from bit
//    begin * bits (a byte boundary), each packing unit's bytes written whole by one lane, zero
//    bits after a short last block.
// The overflow count is an integer sum (atomicAdd), independent of the order.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/block_cuda_common.cuh"

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

__device__ uint32_t mx_load_scale(const uint8_t* in, uint64_t b, const MxFormat& f) {
  if (f.scale == MxScaleKind::kE8M0) return in[b];
  return static_cast<uint32_t>(in[2 * b]) | static_cast<uint32_t>(in[2 * b + 1]) << 8;
}

__device__ void mx_store_scale(uint8_t* out, uint64_t b, uint32_t code, const MxFormat& f) {
  if (f.scale == MxScaleKind::kE8M0) {
    out[b] = static_cast<uint8_t>(code);
  } else {
    out[2 * b] = static_cast<uint8_t>(code);
    out[2 * b + 1] = static_cast<uint8_t>(code >> 8);
  }
}

// mx_dequantize() with the CPU's NaN (decoded value first, as mx.hpp writes the product).
__device__ float mx_dequantize_x86(uint32_t code, float scale, const MxFormat& f) {
  const float v = x86_mul(minifloat_decode(code, f.element_format()), scale);
  return (fabsf(v) == INFINITY && fabsf(scale) < INFINITY) ? copysignf(FLT_MAX, v) : v;
}

// mx_quantize() with the CPU's NaN for x / scale.
__device__ uint32_t mx_quantize_x86(float x, float scale, const MxFormat& f, float u) {
  return minifloat_encode(x86_div(x, scale), f.element_format(), f.rounding, u);
}

// Combines two partial block maxima as mx_amax_step does: NaN if either is NaN.
struct MxAmaxOp {
  __device__ float operator()(float a, float b) const { return (b > a || is_nan(b)) ? b : a; }
};

struct MxEncodeArgs {
  const float* x;      // encode: the chunk
  const uint8_t* in;   // fused: the incoming message
  float* acc;          // fused: the accumulator, read and then written
  uint64_t count;
  MxFormat f;
  const uint32_t* scale_codes;  // agreed scale code per block, or nullptr (chosen from the maximum)
  float range;                  // without scale_codes: an element counts if !(|v| <= range)
  RngKey key;
  uint64_t index_base;
  uint8_t* out;
  unsigned long long* overflows;  // nullptr: not counted
};

// Encode (kFused = false) or decode-accumulate-encode (kFused = true), one group of kGroup
// threads per block (see block_cuda_common.cuh for the layout). Pass 1 produces the block's
// values (x, or acc + decoded message, written back to acc) and their maximum; pass 2 codes them.
// A lane keeps its first kCacheSteps values in registers and re-reads later ones (its own writes).
template <int kGroup, bool kFused>
__global__ void __launch_bounds__(kThreads) mx_encode_kernel(const MxEncodeArgs a) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const MxFormat f = a.f;
  const MinifloatFormat fmt = f.element_format();
  const uint32_t bits = fmt.bits(), block = f.block, unit = unit_elements(block);
  const uint64_t blocks = ceil_div(a.count, block);
  const uint32_t steps = block_steps<kGroup>(a.count, block);
  const uint8_t* in_codes = kFused ? a.in + f.scale_bytes() * blocks : nullptr;
  uint8_t* codes = a.out + f.scale_bytes() * blocks;
  const uint32_t lane = threadIdx.x % kGroup;
  const bool stochastic = f.rounding == Rounding::kStochastic;
  const RngKey key = a.key;
  const float element_max = fmt.max_finite();
  unsigned long long outside = 0;
  for (uint64_t b0 = blockIdx.x * kGroupsPerCta; b0 < blocks; b0 += gridDim.x * kGroupsPerCta) {
    const uint64_t b = b0 + threadIdx.x / kGroup;
    const bool valid = b < blocks;
    const uint64_t begin = valid ? b * block : 0;
    const uint32_t n = valid ? block_length(a.count, begin, block) : 0;
    float in_scale = 0.0f;
    if (kFused && valid) in_scale = mx_scale_value(mx_load_scale(a.in, b, f), f);

    // Pass 1.
    const auto produce = [&](uint32_t t) {
      const uint32_t k = lane + t * kGroup;
      if (k >= n) return 0.0f;
      const uint64_t i = begin + k;
      if constexpr (kFused) {
        const float v = accumulate(a.acc[i], mx_dequantize_x86(bitpack_get(in_codes, i, bits), in_scale, f));
        a.acc[i] = v;
        return v;
      } else {
        return a.x[i];
      }
    };
    float cache[kCacheSteps] = {};
    float amax = 0.0f;
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) {
        cache[t] = produce(t);
        amax = mx_amax_step(amax, cache[t]);
      }
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) amax = mx_amax_step(amax, produce(t));

    uint32_t code = 0;
    if (a.scale_codes != nullptr) {
      if (valid) code = a.scale_codes[b];
    } else {
      amax = group_reduce<kGroup>(amax, MxAmaxOp{});
      if (valid) code = mx_scale_code(amax, f);
    }
    if (valid && lane == 0) mx_store_scale(a.out, b, code, f);
    const float scale = mx_scale_value(code, f);

    // Pass 2.
    const auto reread = [&](uint32_t t) {
      const uint32_t k = lane + t * kGroup;
      if (k >= n) return 0.0f;
      return kFused ? a.acc[begin + k] : a.x[begin + k];
    };
    const auto emit = [&](uint32_t t, float v) {
      const uint32_t k = lane + t * kGroup;
      uint32_t c = 0;
      if (k < n) {
        const uint64_t i = begin + k;
        const bool over =
            a.scale_codes != nullptr ? !(__fdiv_rn(fabsf(v), scale) <= element_max) : !(fabsf(v) <= a.range);
        outside += over ? 1u : 0u;
        c = mx_quantize_x86(v, scale, f, stochastic ? philox_uniform(key, a.index_base + i) : 0.0f);
      }
      const uint64_t word = gather_unit(c, unit, bits);
      if (k < n && k % unit == 0) store_unit(codes, begin + k, word, n - k, unit, bits);
    };
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) emit(t, cache[t]);
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) emit(t, reread(t));
  }
  if (a.overflows != nullptr && outside != 0) atomicAdd(a.overflows, outside);
}

// Decode (overwrite) or decode-accumulate: one group per block, each lane its elements.
template <int kGroup, bool kAccumulate>
__global__ void __launch_bounds__(kThreads)
    mx_decode_kernel(const uint8_t* __restrict__ in, uint64_t count, MxFormat f, float* __restrict__ out) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const uint32_t bits = f.element_bits(), block = f.block;
  const uint64_t blocks = ceil_div(count, block);
  const uint8_t* codes = in + f.scale_bytes() * blocks;
  const uint32_t lane = threadIdx.x % kGroup;
  for (uint64_t b = blockIdx.x * kGroupsPerCta + threadIdx.x / kGroup; b < blocks; b += gridDim.x * kGroupsPerCta) {
    const uint64_t begin = b * block;
    const uint32_t n = block_length(count, begin, block);
    const float scale = mx_scale_value(mx_load_scale(in, b, f), f);
    for (uint32_t k = lane; k < n; k += kGroup) {
      const uint64_t i = begin + k;
      const float v = mx_dequantize_x86(bitpack_get(codes, i, bits), scale, f);
      if constexpr (kAccumulate) {
        out[i] = accumulate(out[i], v);
      } else {
        out[i] = v;
      }
    }
  }
}

// Checks the arguments and launches the encoder; `need_scales`: d_scale_codes is required.
Status launch_mx_encode(const MxEncodeArgs& args, bool fused, bool need_scales, CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(mx_cuda_can_implement(args.count, args.f).with_context(name));
  if (args.count == 0) return ok_status();
  const bool missing_input = fused ? args.in == nullptr || args.acc == nullptr : args.x == nullptr;
  if (missing_input || args.out == nullptr || (need_scales && args.scale_codes == nullptr)) return null_pointer(name);
  const uint64_t blocks = ceil_div(args.count, args.f.block);
  dispatch_group(args.f.block, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    const unsigned grid = grid_for(blocks, kThreads / kGroup);
    if (fused) {
      mx_encode_kernel<kGroup, true><<<grid, kThreads, 0, stream>>>(args);
    } else {
      mx_encode_kernel<kGroup, false><<<grid, kThreads, 0, stream>>>(args);
    }
  });
  return launch_status(name);
}

template <bool kAccumulate>
Status launch_mx_decode(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_out, CudaStream stream,
                        const char* name) {
  CCSIM_RETURN_IF_ERROR(mx_cuda_can_implement(count, f).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return null_pointer(name);
  const uint64_t blocks = ceil_div(count, f.block);
  dispatch_group(f.block, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    mx_decode_kernel<kGroup, kAccumulate>
        <<<grid_for(blocks, kThreads / kGroup), kThreads, 0, stream>>>(d_in, count, f, d_out);
  });
  return launch_status(name);
}

}  // namespace

Status mx_cuda_can_implement(uint64_t /*count*/, const MxFormat& f) {
  const MinifloatKind e = f.element;
  if (e != MinifloatKind::kFp8E4M3 && e != MinifloatKind::kFp8E5M2 && e != MinifloatKind::kFp6E3M2 &&
      e != MinifloatKind::kFp6E2M3 && e != MinifloatKind::kFp4E2M1) {
    return invalid_argument("MX elements must be a format of at most 8 bits (E4M3, E5M2, E3M2, E2M3, E2M1)");
  }
  if (f.block < 1 || f.block > kBlockCudaMaxBlock) {
    return invalid_argument("MX block must be in [1, " + std::to_string(kBlockCudaMaxBlock) + "], got " +
                            std::to_string(f.block));
  }
  if (uint64_t{f.block} * f.element_bits() % 8 != 0) {
    return invalid_argument("MX block of " + std::to_string(f.block) + " " + std::to_string(f.element_bits()) +
                            "-bit elements is not whole bytes");
  }
  if (f.scale != MxScaleKind::kBf16 && f.scale != MxScaleKind::kE8M0) return invalid_argument("unknown MX scale kind");
  if (f.rounding != Rounding::kNearest && f.rounding != Rounding::kStochastic) {
    return invalid_argument("unknown rounding mode");
  }
  return ok_status();
}

Status mx_encode_cuda(const float* d_x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                      float range, uint8_t* d_out, uint64_t* d_overflows, CudaStream stream) {
  const MxEncodeArgs args{d_x,   nullptr,    nullptr, count, f, nullptr, range, key, index_base, d_out,
                          reinterpret_cast<unsigned long long*>(d_overflows)};
  return launch_mx_encode(args, false, false, stream, "mx_encode_cuda");
}

Status mx_encode_with_scales_cuda(const float* d_x, uint64_t count, const MxFormat& f, const uint32_t* d_scale_codes,
                                  const RngKey& key, uint64_t index_base, uint8_t* d_out, uint64_t* d_overflows,
                                  CudaStream stream) {
  const MxEncodeArgs args{d_x,   nullptr,    nullptr, count, f, d_scale_codes, 0.0f, key, index_base, d_out,
                          reinterpret_cast<unsigned long long*>(d_overflows)};
  return launch_mx_encode(args, false, true, stream, "mx_encode_with_scales_cuda");
}

Status mx_decode_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_out, CudaStream stream) {
  return launch_mx_decode<false>(d_in, count, f, d_out, stream, "mx_decode_cuda");
}

Status mx_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_acc,
                                 CudaStream stream) {
  return launch_mx_decode<true>(d_in, count, f, d_acc, stream, "mx_decode_accumulate_cuda");
}

Status mx_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_acc,
                                        const uint32_t* d_scale_codes, const RngKey& key, uint64_t index_base,
                                        float range, uint8_t* d_out, uint64_t* d_overflows, CudaStream stream) {
  const MxEncodeArgs args{nullptr, d_in,  d_acc, count, f, d_scale_codes, range, key, index_base, d_out,
                          reinterpret_cast<unsigned long long*>(d_overflows)};
  return launch_mx_encode(args, true, false, stream, "mx_decode_accumulate_encode_cuda");
}

}  // namespace ccsim::kern
