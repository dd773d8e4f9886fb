// CUDA kernels for TFP (kernels/quant/tfp_quant.hpp), QSGD (qsgd.hpp) and FP16 (fp16.hpp). Bit identity
// with the CPU references rests on:
//  - the CCSIM_HD element functions (tfp_encode_element / tfp_decode_element, qsgd_norm /
//    qsgd_quantize, minifloat_encode_rne / minifloat_decode), compiled with --fmad=false;
//  - QSGD's bucket norm summed in the CPU's order: the squares (exact in double) are added one
//    element after another, in element order, into a double that every lane of the bucket's group
//    holds (the group passes each lane's square around with shuffles), then qsgd_norm as on the
//    CPU (IEEE double sqrt and conversion);
//  - the layouts: TFP's bit stream written by groups of 8 codes (k whole bytes, starting on a byte)
//    exactly as tfp_encode writes a piece; QSGD's fp32 norms then packed codes as in the block
//    kernels; FP16 codes as uint16;
//  - decoded values added to acc as the CPU's `acc[i] += v`, with its NaN (block_cuda_common.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/quant/fp16_quant.hpp"
#include "kernels/quant/qsgd_quant.hpp"

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

// FP16 codes for the elementwise 16-bit kernels (block_cuda_common.cuh).
struct Fp16Codec {
  __device__ static uint16_t encode(float x) { return float_to_fp16_rne(x); }
  __device__ static float decode(uint16_t h) { return fp16_to_float(h); }
};

// --- TFP -----------------------------------------------------------------------------------------

// Encode (kFused = false: x) or decode-accumulate-encode (kFused = true: acc += decode(in), then
// encode acc): one thread per group of 8 codes, which fill exactly k bytes starting on a byte.
template <bool kFused>
__global__ void __launch_bounds__(kThreads)
    tfp_encode_kernel(const float* __restrict__ x, const uint8_t* __restrict__ in, float* __restrict__ acc,
                      uint64_t count, TfpFormat f, bool random_rounding, RngKey key, uint64_t index_base,
                      uint8_t* __restrict__ out) {
  const uint32_t k = f.bits;
  const uint64_t units = ceil_div(count, 8);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t u = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const uint64_t begin = 8 * u, end = count - begin < 8 ? count : begin + 8;
    uint8_t* p = out + u * k;
    uint64_t word = 0;  // pending stream bits, at most 7 + 32
    uint32_t pending = 0;
    for (uint64_t i = begin; i < end; ++i) {
      float v;
      if constexpr (kFused) {
        v = accumulate(acc[i], tfp_decode_element(bitpack_get_wide(in, i, k), f));
        acc[i] = v;
      } else {
        v = x[i];
      }
      const float r = random_rounding ? philox_uniform(key, index_base + i) : 0.0f;
      word |= static_cast<uint64_t>(tfp_encode_element(v, f, random_rounding, r)) << pending;
      pending += k;
      for (; pending >= 8; pending -= 8, word >>= 8) *p++ = static_cast<uint8_t>(word);
    }
    if (pending > 0) *p = static_cast<uint8_t>(word);  // the last byte of the chunk, zero padded
  }
}

template <bool kAccumulate>
__global__ void __launch_bounds__(kThreads)
    tfp_decode_kernel(const uint8_t* __restrict__ in, uint64_t count, TfpFormat f, float* __restrict__ out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float v = tfp_decode_element(bitpack_get_wide(in, i, f.bits), f);
    if constexpr (kAccumulate) {
      out[i] = accumulate(out[i], v);
    } else {
      out[i] = v;
    }
  }
}

template <bool kAccumulate>
Status launch_tfp_decode(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_out, CudaStream stream,
                         const char* name) {
  CCSIM_RETURN_IF_ERROR(tfp_cuda_can_implement(count, f).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return null_pointer(name);
  tfp_decode_kernel<kAccumulate><<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_in, count, f, d_out);
  return launch_status(name);
}

// --- QSGD ----------------------------------------------------------------------------------------

// qsgd_dequantize() with the CPU's NaN; the sign is flipped as a bit (x86 xorps), as PTX neg.f32
// leaves a NaN's bits unspecified.
__device__ float qsgd_dequantize_x86(uint32_t code, float norm, uint32_t bits) {
  const uint32_t s = qsgd_levels(bits);
  const float magnitude = x86_mul(__fdiv_rn(static_cast<float>(code & s), static_cast<float>(s)), norm);
  const uint32_t sign = ((code >> (bits - 1u)) & 1u) << 31;
  return __uint_as_float(__float_as_uint(magnitude) ^ sign);
}

struct QsgdArgs {
  const float* x;     // encode: the chunk
  const uint8_t* in;  // fused: the incoming message
  float* acc;         // fused: the accumulator, read and then written
  uint64_t count;
  uint32_t bucket;
  uint32_t bits;
  RngKey key;
  uint64_t index_base;
  uint8_t* out;
};

// Encode (kFused = false) or decode-accumulate-encode (kFused = true): one group of kGroup <= 32
// lanes per bucket (see block_cuda_common.cuh). Pass 1 produces the values and the norm, pass 2
// codes them.
template <int kGroup, bool kFused>
__global__ void __launch_bounds__(kThreads) qsgd_encode_kernel(const QsgdArgs a) {
  static_assert(kGroup <= 32, "the ordered norm sum shuffles within a warp");
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const uint32_t bucket = a.bucket, bits = a.bits, unit = unit_elements(bucket);
  const uint64_t buckets = ceil_div(a.count, bucket);
  const uint32_t steps = block_steps<kGroup>(a.count, bucket);
  const uint8_t* in_codes = kFused ? a.in + 4 * buckets : nullptr;
  uint8_t* codes = a.out + 4 * buckets;
  const uint32_t lane = threadIdx.x % kGroup;
  const RngKey key = a.key;
  for (uint64_t b0 = blockIdx.x * kGroupsPerCta; b0 < buckets; b0 += gridDim.x * kGroupsPerCta) {
    const uint64_t b = b0 + threadIdx.x / kGroup;
    const bool valid = b < buckets;
    const uint64_t begin = valid ? b * bucket : 0;
    const uint32_t n = valid ? block_length(a.count, begin, bucket) : 0;
    const float in_norm = kFused && valid ? load_f32(a.in + 4 * b) : 0.0f;

    // Pass 1.
    const auto produce = [&](uint32_t t) {
      const uint32_t k = lane + t * kGroup;
      if (k >= n) return 0.0f;
      const uint64_t i = begin + k;
      if constexpr (kFused) {
        const float v = accumulate(a.acc[i], qsgd_dequantize_x86(bitpack_get(in_codes, i, bits), in_norm, bits));
        a.acc[i] = v;
        return v;
      } else {
        return a.x[i];
      }
    };
    double sum_squares = 0.0;  // the same on every lane of the group
    const auto add_squares = [&](uint32_t t, float v) {
      const double square = __dmul_rn(static_cast<double>(v), static_cast<double>(v));  // exact
      for (int j = 0; j < kGroup; ++j) {
        const double s = __shfl_sync(kFullMask, square, j, kGroup);
        if (t * kGroup + j < n) sum_squares = __dadd_rn(sum_squares, s);
      }
    };
    float cache[kCacheSteps] = {};
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) {
        cache[t] = produce(t);
        add_squares(t, cache[t]);
      }
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) add_squares(t, produce(t));
    const float norm = qsgd_norm(sum_squares);
    if (valid && lane == 0) store_f32(a.out + 4 * b, norm);

    // Pass 2.
    const auto emit = [&](uint32_t t, float v) {
      const uint32_t k = lane + t * kGroup;
      const uint32_t c = k < n ? qsgd_quantize(v, norm, bits, philox_uniform(key, a.index_base + begin + k)) : 0u;
      const uint64_t word = gather_unit(c, unit, bits);
      if (k < n && k % unit == 0) store_unit(codes, begin + k, word, n - k, unit, bits);
    };
#pragma unroll
    for (uint32_t t = 0; t < kCacheSteps; ++t) {
      if (t < steps) emit(t, cache[t]);
    }
    for (uint32_t t = kCacheSteps; t < steps; ++t) {
      const uint32_t k = lane + t * kGroup;
      emit(t, k < n ? (kFused ? a.acc[begin + k] : a.x[begin + k]) : 0.0f);
    }
  }
}

template <int kGroup, bool kAccumulate>
__global__ void __launch_bounds__(kThreads) qsgd_decode_kernel(const uint8_t* __restrict__ in, uint64_t count,
                                                               uint32_t bucket, uint32_t bits,
                                                               float* __restrict__ out) {
  constexpr uint64_t kGroupsPerCta = kThreads / kGroup;
  const uint64_t buckets = ceil_div(count, bucket);
  const uint8_t* codes = in + 4 * buckets;
  const uint32_t lane = threadIdx.x % kGroup;
  for (uint64_t b = blockIdx.x * kGroupsPerCta + threadIdx.x / kGroup; b < buckets; b += gridDim.x * kGroupsPerCta) {
    const uint64_t begin = b * bucket;
    const uint32_t n = block_length(count, begin, bucket);
    const float norm = load_f32(in + 4 * b);
    for (uint32_t k = lane; k < n; k += kGroup) {
      const uint64_t i = begin + k;
      const float v = qsgd_dequantize_x86(bitpack_get(codes, i, bits), norm, bits);
      if constexpr (kAccumulate) {
        out[i] = accumulate(out[i], v);
      } else {
        out[i] = v;
      }
    }
  }
}

// Lanes per bucket: as the block kernels, but at most a warp (the norm's shuffles).
template <class Launch>
void dispatch_qsgd_group(uint32_t bucket, Launch&& launch) {
  if (group_threads(bucket) > 32) {
    launch(std::integral_constant<int, 32>{});
  } else {
    dispatch_group(bucket, [&](auto group) {
      if constexpr (decltype(group)::value <= 32) launch(group);
    });
  }
}

Status launch_qsgd_encode(const QsgdArgs& args, bool fused, CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(qsgd_cuda_can_implement(args.count, args.bucket, args.bits).with_context(name));
  if (args.count == 0) return ok_status();
  const bool missing_input = fused ? args.in == nullptr || args.acc == nullptr : args.x == nullptr;
  if (missing_input || args.out == nullptr) return null_pointer(name);
  const uint64_t buckets = ceil_div(args.count, args.bucket);
  dispatch_qsgd_group(args.bucket, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    const unsigned grid = grid_for(buckets, kThreads / kGroup);
    if (fused) {
      qsgd_encode_kernel<kGroup, true><<<grid, kThreads, 0, stream>>>(args);
    } else {
      qsgd_encode_kernel<kGroup, false><<<grid, kThreads, 0, stream>>>(args);
    }
  });
  return launch_status(name);
}

template <bool kAccumulate>
Status launch_qsgd_decode(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits, float* d_out,
                          CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(qsgd_cuda_can_implement(count, bucket, bits).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return null_pointer(name);
  const uint64_t buckets = ceil_div(count, bucket);
  dispatch_qsgd_group(bucket, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    qsgd_decode_kernel<kGroup, kAccumulate>
        <<<grid_for(buckets, kThreads / kGroup), kThreads, 0, stream>>>(d_in, count, bucket, bits, d_out);
  });
  return launch_status(name);
}

}  // namespace

// --- TFP -----------------------------------------------------------------------------------------

Status tfp_cuda_can_implement(uint64_t /*count*/, const TfpFormat& f) {
  if (f.base != TfpBase::kFloat32 && f.base != TfpBase::kFloat16 && f.base != TfpBase::kFloat8E4M3 &&
      f.base != TfpBase::kFloat8E5M2) {
    return invalid_argument("TFP: unknown base format");
  }
  if (!f.valid()) {
    return invalid_argument("TFP: " + std::to_string(f.bits) + " bits not in [" + std::to_string(f.min_bits()) + ", " +
                            std::to_string(f.base_bits()) + "] for this base");
  }
  return ok_status();
}

Status tfp_encode_cuda(const float* d_x, uint64_t count, const TfpFormat& f, bool random_rounding, const RngKey& key,
                       uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  constexpr const char* kName = "tfp_encode_cuda";
  CCSIM_RETURN_IF_ERROR(tfp_cuda_can_implement(count, f).with_context(kName));
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_out == nullptr) return null_pointer(kName);
  tfp_encode_kernel<false><<<grid_for(ceil_div(count, 8), kThreads), kThreads, 0, stream>>>(
      d_x, nullptr, nullptr, count, f, random_rounding, key, index_base, d_out);
  return launch_status(kName);
}

Status tfp_decode_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_out, CudaStream stream) {
  return launch_tfp_decode<false>(d_in, count, f, d_out, stream, "tfp_decode_cuda");
}

Status tfp_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_acc,
                                  CudaStream stream) {
  return launch_tfp_decode<true>(d_in, count, f, d_acc, stream, "tfp_decode_accumulate_cuda");
}

Status tfp_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_acc,
                                         bool random_rounding, const RngKey& key, uint64_t index_base, uint8_t* d_out,
                                         CudaStream stream) {
  constexpr const char* kName = "tfp_decode_accumulate_encode_cuda";
  CCSIM_RETURN_IF_ERROR(tfp_cuda_can_implement(count, f).with_context(kName));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_acc == nullptr || d_out == nullptr) return null_pointer(kName);
  tfp_encode_kernel<true><<<grid_for(ceil_div(count, 8), kThreads), kThreads, 0, stream>>>(
      nullptr, d_in, d_acc, count, f, random_rounding, key, index_base, d_out);
  return launch_status(kName);
}

// --- QSGD ----------------------------------------------------------------------------------------

Status qsgd_cuda_can_implement(uint64_t /*count*/, uint32_t bucket, uint32_t bits) {
  if (bits < 2 || bits > 8) return invalid_argument("QSGD: " + std::to_string(bits) + " bits not in [2, 8]");
  if (bucket < 1 || bucket > kBlockCudaMaxBlock) {
    return invalid_argument("QSGD bucket must be in [1, " + std::to_string(kBlockCudaMaxBlock) + "], got " +
                            std::to_string(bucket));
  }
  if (uint64_t{bucket} * bits % 8 != 0) {
    return invalid_argument("QSGD: bucket " + std::to_string(bucket) + " of " + std::to_string(bits) +
                            "-bit codes is not whole bytes");
  }
  return ok_status();
}

Status qsgd_encode_cuda(const float* d_x, uint64_t count, uint32_t bucket, uint32_t bits, const RngKey& key,
                        uint64_t index_base, uint8_t* d_out, CudaStream stream) {
  const QsgdArgs args{d_x, nullptr, nullptr, count, bucket, bits, key, index_base, d_out};
  return launch_qsgd_encode(args, false, stream, "qsgd_encode_cuda");
}

Status qsgd_decode_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits, float* d_out,
                        CudaStream stream) {
  return launch_qsgd_decode<false>(d_in, count, bucket, bits, d_out, stream, "qsgd_decode_cuda");
}

Status qsgd_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits, float* d_acc,
                                   CudaStream stream) {
  return launch_qsgd_decode<true>(d_in, count, bucket, bits, d_acc, stream, "qsgd_decode_accumulate_cuda");
}

Status qsgd_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits,
                                          float* d_acc, const RngKey& key, uint64_t index_base, uint8_t* d_out,
                                          CudaStream stream) {
  const QsgdArgs args{nullptr, d_in, d_acc, count, bucket, bits, key, index_base, d_out};
  return launch_qsgd_encode(args, true, stream, "qsgd_decode_accumulate_encode_cuda");
}

// --- FP16 ----------------------------------------------------------------------------------------

Status fp16_encode_cuda(const float* d_x, uint64_t count, uint16_t* d_out, CudaStream stream) {
  return launch_elem16<Fp16Codec, Elem16Op::kEncode>(d_x, nullptr, nullptr, d_out, count, stream, "fp16_encode_cuda");
}

Status fp16_decode_cuda(const uint16_t* d_in, uint64_t count, float* d_out, CudaStream stream) {
  return launch_elem16<Fp16Codec, Elem16Op::kDecode>(nullptr, d_in, d_out, nullptr, count, stream, "fp16_decode_cuda");
}

Status fp16_decode_accumulate_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, CudaStream stream) {
  return launch_elem16<Fp16Codec, Elem16Op::kDecodeAccumulate>(nullptr, d_in, d_acc, nullptr, count, stream,
                                                               "fp16_decode_accumulate_cuda");
}

Status fp16_decode_accumulate_encode_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, uint16_t* d_out,
                                          CudaStream stream) {
  return launch_elem16<Fp16Codec, Elem16Op::kFused>(nullptr, d_in, d_acc, d_out, count, stream,
                                                    "fp16_decode_accumulate_encode_cuda");
}

}  // namespace ccsim::kern
