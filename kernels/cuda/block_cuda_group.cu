// CUDA kernels for group quantization (kernels/quant/group_quant.hpp: EQuARX int8/E4M3/E5M2 blocks,
// SDP4Bit int4/int8 groups with the optional 32-point Hadamard smoother). Bit identity with
// group_quant.cpp rests on:
//  - group_quantize / minifloat_encode / minifloat_decode being the CCSIM_HD functions, with the
//    fp32 operations around FP8 elements ((x / m) * F, (value / F) * m) returning the CPU's NaN
//    (block_cuda_common.cuh), and --fmad=false; integer codes do not depend on a NaN's sign;
//  - the group maximum, std::max(m, |v|) on the CPU, computed the same way (max_abs_step: a NaN is
//    skipped, signaling or not), exact and independent of the order;
//  - the Hadamard transform running the CPU's butterflies on the same operands, one 32-element
//    block per warp (warp_hadamard32), on exactly the blocks the CPU transforms: the complete
//    32-blocks of the chunk ([32j, 32j + 32) with 32j + 32 <= count) of a group that starts before
//    the last complete block's end, for encode only when the group's input maximum is at most
//    kGroupHadamardMaxInput (else the scale is stored negated and nothing is transformed); the
//    decoder inverts the blocks of groups whose stored scale has a clear sign bit;
//  - the layout: fp32 scale of group g at byte 4g, codes packed from bit begin * bits, each
//    packing unit's bytes written whole by one lane, zero bits after a short last group.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/block_cuda_common.cuh"

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

constexpr uint32_t kH = kGroupHadamardBlock;

// group_dequantize() with the CPU's NaN results.
__device__ float group_dequantize_x86(uint32_t code, float maxabs, const GroupQuantFormat& f) {
  if (f.element == GroupElement::kInt) {
    const uint32_t shift = 32u - f.bits;
    const int32_t q = static_cast<int32_t>(code << shift) >> shift;  // sign extension
    return x86_mul(__fdiv_rn(static_cast<float>(q), static_cast<float>(f.int_levels())), maxabs);
  }
  const MinifloatFormat fmt = f.fp8_format();
  return x86_mul(x86_div(minifloat_decode(code, fmt), fmt.max_finite()), maxabs);
}

// group_quantize() with the CPU's NaN for (x / maxabs) * F. Integer codes are the same for any
// NaN (rintf/floorf keep it, fmaxf then picks -levels), so they call group_quantize itself.
__device__ uint32_t group_quantize_x86(float x, float maxabs, const GroupQuantFormat& f, float u) {
  if (f.element == GroupElement::kInt) return group_quantize(x, maxabs, f, u);
  if (!(maxabs > 0.0f)) return 0;
  const MinifloatFormat fmt = f.fp8_format();
  return minifloat_encode(x86_mul(x86_div(x, maxabs), fmt.max_finite()), fmt, f.rounding, u);
}

// Whether the warp's current 32 elements (element k of a group at `begin`, lane k % 32) form a
// complete 32-block of the transformed prefix [0, transformed_end) of the chunk. Warp-uniform
// (groups of >= 32 threads: a warp holds 32 consecutive elements of one group).
__device__ bool complete_hadamard_block(uint64_t begin, uint32_t k, uint64_t transformed_end) {
  const uint64_t base = begin + k - threadIdx.x % 32;
  return base + kH <= transformed_end;
}

// Decode (overwrite) or decode-accumulate: one group of kGroup threads per quantization group.
template <int kGroup, bool kAccumulate>
__global__ void __launch_bounds__(kThreads)
    group_decode_kernel(const uint8_t* __restrict__ in, uint64_t count, GroupQuantFormat f, float* __restrict__ out) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const uint64_t groups = ceil_div(count, f.group);
  const uint8_t* codes = in + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? count / kH * kH : 0;  // complete 32-blocks only
  const uint32_t steps = block_steps<kGroup>(count, f.group);
  const uint32_t lane = threadIdx.x % kGroup;
  for (uint64_t g0 = blockIdx.x * kGroupsPerCta; g0 < groups; g0 += gridDim.x * kGroupsPerCta) {
    const uint64_t g = g0 + threadIdx.x / kGroup;
    const bool valid = g < groups;
    const uint64_t begin = valid ? g * f.group : 0;
    const uint32_t n = valid ? block_length(count, begin, f.group) : 0;
    const float stored = valid ? load_f32(in + 4 * g) : 0.0f;
    // A negative scale flags a group sent untransformed (group_quant.hpp).
    const bool transformed = valid && (__float_as_uint(stored) >> 31) == 0;
    const float maxabs = fabsf(stored);
    for (uint32_t t = 0; t < steps; ++t) {
      const uint32_t k = lane + t * kGroup;
      const uint64_t i = begin + k;
      float v = k < n ? group_dequantize_x86(bitpack_get(codes, i, f.bits), maxabs, f) : 0.0f;
      if constexpr (kGroup >= 32) {
        if (transformed && complete_hadamard_block(begin, k, transformed_end)) v = warp_hadamard32(v);
      }
      if (k < n) {
        if constexpr (kAccumulate) {
          out[i] = accumulate(out[i], v);
        } else {
          out[i] = v;
        }
      }
    }
  }
}

struct GroupEncodeArgs {
  const float* x;      // encode: the chunk
  const uint8_t* in;   // fused: the incoming message, in format in_f
  float* acc;          // fused: the accumulator, read and then written
  uint64_t count;
  GroupQuantFormat in_f;
  GroupQuantFormat f;  // the format encoded
  RngKey key;
  uint64_t index_base;
  uint8_t* out;
};

// Encode (kFused = false) or decode-accumulate-encode (kFused = true), one group of kGroup threads
// per quantization group. Pass 1 produces the values (x, or acc + decoded message, written back
// to acc) and their maximum; with the smoother, pass 2 transforms the complete 32-blocks and takes
// the maximum again; pass 3 codes. A lane keeps its first kCacheSteps values in registers and
// re-reads (and re-transforms) later ones.
template <int kGroup, bool kFused>
__global__ void __launch_bounds__(kThreads) group_encode_kernel(const GroupEncodeArgs a) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const GroupQuantFormat f = a.f, in_f = a.in_f;
  const uint32_t bits = f.bits, unit = unit_elements(f.group);
  const uint64_t groups = ceil_div(a.count, f.group);
  const uint32_t steps = block_steps<kGroup>(a.count, f.group);
  const uint8_t* in_codes = kFused ? a.in + 4 * groups : nullptr;
  uint8_t* codes = a.out + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? a.count / kH * kH : 0;
  const uint64_t in_transformed_end = kFused && in_f.hadamard ? a.count / kH * kH : 0;
  const uint32_t lane = threadIdx.x % kGroup;
  const bool stochastic = f.rounding == Rounding::kStochastic;
  const RngKey key = a.key;
  for (uint64_t g0 = blockIdx.x * kGroupsPerCta; g0 < groups; g0 += gridDim.x * kGroupsPerCta) {
    const uint64_t g = g0 + threadIdx.x / kGroup;
    const bool valid = g < groups;
    const uint64_t begin = valid ? g * f.group : 0;
    const uint32_t n = valid ? block_length(a.count, begin, f.group) : 0;
    bool in_transformed = false;
    float in_maxabs = 0.0f;
    if (kFused && valid) {
      const float stored = load_f32(a.in + 4 * g);
      in_transformed = (__float_as_uint(stored) >> 31) == 0;
      in_maxabs = fabsf(stored);
    }

    // Pass 1.
    const auto produce = [&](uint32_t t) {
      const uint32_t k = lane + t * kGroup;
      const uint64_t i = begin + k;
      if constexpr (kFused) {
        float d = k < n ? group_dequantize_x86(bitpack_get(in_codes, i, in_f.bits), in_maxabs, in_f) : 0.0f;
        if constexpr (kGroup >= 32) {
          if (in_transformed && complete_hadamard_block(begin, k, in_transformed_end)) d = warp_hadamard32(d);
        }
        if (k >= n) return 0.0f;
        const float v = accumulate(a.acc[i], d);
        a.acc[i] = v;
        return v;
      } else {
        return k < n ? a.x[i] : 0.0f;
      }
    };
    float cache[kCacheSteps] = {};
    float m = 0.0f;
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) {
        cache[t] = produce(t);
        m = max_abs_step(m, cache[t]);
      }
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) m = max_abs_step(m, produce(t));
    m = group_reduce<kGroup>(m, MaxOp{});

    // Pass 2: the smoother. `smooth` and `transform` are uniform over the group (a warp or the CTA).
    float maxabs = m, stored = m;
    bool transform = false;
    const auto reread = [&](uint32_t t) {
      const uint32_t k = lane + t * kGroup;
      if (k >= n) return 0.0f;
      return kFused ? a.acc[begin + k] : a.x[begin + k];
    };
    const auto smoothed = [&](uint32_t t, float v) {
      if (complete_hadamard_block(begin, lane + t * kGroup, transformed_end)) return warp_hadamard32(v);
      return v;
    };
    if constexpr (kGroup >= 32) {
      const bool smooth = f.hadamard && valid && begin < transformed_end;
      transform = smooth && m <= kGroupHadamardMaxInput;
      if (smooth && !transform) stored = -m;  // too large to transform without overflow: flagged
      if (transform) {
        float m2 = 0.0f;
#pragma unroll
        for (uint32_t t = 0; t < kCacheSteps; ++t) {
          if (t < steps) {
            cache[t] = smoothed(t, cache[t]);
            m2 = max_abs_step(m2, cache[t]);
          }
        }
        for (uint32_t t = kCacheSteps; t < steps; ++t) m2 = max_abs_step(m2, smoothed(t, reread(t)));
        maxabs = stored = group_reduce<kGroup>(m2, MaxOp{});
      }
    }
    if (valid && lane == 0) store_f32(a.out + 4 * g, stored);

    // Pass 3.
    const auto emit = [&](uint32_t t, float v) {
      const uint32_t k = lane + t * kGroup;
      uint32_t c = 0;
      if (k < n) {
        const float u = stochastic ? philox_uniform(key, a.index_base + begin + k) : 0.0f;
        c = group_quantize_x86(v, maxabs, f, u);
      }
      const uint64_t word = gather_unit(c, unit, bits);
      if (k < n && k % unit == 0) store_unit(codes, begin + k, word, n - k, unit, bits);
    };
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) emit(t, cache[t]);
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) {
      const float v = reread(t);
      emit(t, transform ? smoothed(t, v) : v);
    }
  }
}

bool known_rounding(Rounding r) { return r == Rounding::kNearest || r == Rounding::kStochastic; }

template <bool kAccumulate>
Status launch_group_decode(const uint8_t* d_in, uint64_t count, const GroupQuantFormat& f, float* d_out,
                           CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(group_quant_cuda_can_implement(count, f).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return null_pointer(name);
  const uint64_t groups = ceil_div(count, f.group);
  dispatch_group(f.group, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    group_decode_kernel<kGroup, kAccumulate>
        <<<grid_for(groups, kThreads / kGroup), kThreads, 0, stream>>>(d_in, count, f, d_out);
  });
  return launch_status(name);
}

Status launch_group_encode(const GroupEncodeArgs& args, bool fused, CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(group_quant_cuda_can_implement(args.count, args.f).with_context(name));
  if (fused) {
    CCSIM_RETURN_IF_ERROR(group_quant_cuda_can_implement(args.count, args.in_f).with_context(name));
    if (args.in_f.group != args.f.group) {
      return invalid_argument(std::string(name) + ": the incoming group " + std::to_string(args.in_f.group) +
                              " differs from the outgoing group " + std::to_string(args.f.group));
    }
  }
  if (args.count == 0) return ok_status();
  const bool missing_input = fused ? args.in == nullptr || args.acc == nullptr : args.x == nullptr;
  if (missing_input || args.out == nullptr) return null_pointer(name);
  const uint64_t groups = ceil_div(args.count, args.f.group);
  dispatch_group(args.f.group, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    const unsigned grid = grid_for(groups, kThreads / kGroup);
    if (fused) {
      group_encode_kernel<kGroup, true><<<grid, kThreads, 0, stream>>>(args);
    } else {
      group_encode_kernel<kGroup, false><<<grid, kThreads, 0, stream>>>(args);
    }
  });
  return launch_status(name);
}

}  // namespace

Status group_quant_cuda_can_implement(uint64_t /*count*/, const GroupQuantFormat& f) {
  if (f.element == GroupElement::kInt) {
    if (f.bits < 2 || f.bits > 8) {
      return invalid_argument("group quantizer: " + std::to_string(f.bits) + " integer bits not in [2, 8]");
    }
  } else if (f.element == GroupElement::kE4M3 || f.element == GroupElement::kE5M2) {
    if (f.bits != 8) {
      return invalid_argument("group quantizer: FP8 elements have 8 bits, not " + std::to_string(f.bits));
    }
  } else {
    return invalid_argument("group quantizer: unknown element type");
  }
  if (f.group < 1 || f.group > kBlockCudaMaxBlock) {
    return invalid_argument("group size must be in [1, " + std::to_string(kBlockCudaMaxBlock) + "], got " +
                            std::to_string(f.group));
  }
  if (uint64_t{f.group} * f.bits % 8 != 0) {
    return invalid_argument("group quantizer: group " + std::to_string(f.group) + " of " + std::to_string(f.bits) +
                            "-bit codes is not whole bytes");
  }
  if (f.hadamard && f.group % kH != 0) {
    return invalid_argument("group quantizer: Hadamard needs a group multiple of 32, got " + std::to_string(f.group));
  }
  if (!known_rounding(f.rounding)) return invalid_argument("unknown rounding mode");
  return ok_status();
}

Status group_quant_encode_cuda(const float* d_x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                               uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  const GroupEncodeArgs args{d_x, nullptr, nullptr, count, f, f, key, index_base, d_out};
  return launch_group_encode(args, false, stream, "group_quant_encode_cuda");
}

Status group_quant_decode_cuda(const uint8_t* d_in, uint64_t count, const GroupQuantFormat& f, float* d_out,
                               CudaStream stream) {
  return launch_group_decode<false>(d_in, count, f, d_out, stream, "group_quant_decode_cuda");
}

Status group_quant_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const GroupQuantFormat& f,
                                          float* d_acc, CudaStream stream) {
  return launch_group_decode<true>(d_in, count, f, d_acc, stream, "group_quant_decode_accumulate_cuda");
}

Status group_quant_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count,
                                                 const GroupQuantFormat& in_format, float* d_acc,
                                                 const GroupQuantFormat& out_format, const RngKey& key,
                                                 uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  const GroupEncodeArgs args{nullptr, d_in, d_acc, count, in_format, out_format, key, index_base, d_out};
  return launch_group_encode(args, true, stream, "group_quant_decode_accumulate_encode_cuda");
}

}  // namespace ccsim::kern
