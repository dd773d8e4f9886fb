// CUDA kernels for the BF16 and block-int8 codecs. BF16 runs the elementwise 16-bit kernels of
// block_cuda_common.cuh with the CCSIM_HD element functions of kernels/quant/bf16_quant.hpp. Block int8
// is group quantization with integer codes of 8 bits, one fp32 block maximum per group and no
// Hadamard smoother: the same codes (int8_quantize and group_quantize compute (x / m) * 127 and
// round the same way), the same scales and the same layout [maxima | codes], so its entry points
// run the group kernels of block_cuda_group.cu. Bit identity rests on the shared element
// functions, IEEE division and no FMA contraction (--fmad=false on this target), and exact,
// order-independent block maxima.
#include "kernels/cuda/quant_cuda.hpp"

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/group_quant.hpp"

static_assert(std::is_same_v<ccsim::kern::CudaStream, cudaStream_t>, "CudaStream must be cudaStream_t");

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

// BF16 codes for the elementwise 16-bit kernels.
struct Bf16Codec {
  __device__ static uint16_t encode(float x) { return float_to_bf16_rne(x); }
  __device__ static float decode(uint16_t h) { return bf16_to_float(h); }
};

// Block int8 as a group-quantization format.
GroupQuantFormat int8_format(uint32_t block, Rounding rounding) {
  GroupQuantFormat f;
  f.element = GroupElement::kInt;
  f.bits = 8;
  f.group = block;
  f.rounding = rounding;
  f.hadamard = false;
  return f;
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
  return launch_elem16<Bf16Codec, Elem16Op::kEncode>(d_x, nullptr, nullptr, d_out, count, stream, "bf16_encode_cuda");
}

Status bf16_decode_cuda(const uint16_t* d_in, uint64_t count, float* d_out, CudaStream stream) {
  return launch_elem16<Bf16Codec, Elem16Op::kDecode>(nullptr, d_in, d_out, nullptr, count, stream, "bf16_decode_cuda");
}

Status bf16_decode_accumulate_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, CudaStream stream) {
  return launch_elem16<Bf16Codec, Elem16Op::kDecodeAccumulate>(nullptr, d_in, d_acc, nullptr, count, stream,
                                                               "bf16_decode_accumulate_cuda");
}

Status bf16_decode_accumulate_encode_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, uint16_t* d_out,
                                          CudaStream stream) {
  return launch_elem16<Bf16Codec, Elem16Op::kFused>(nullptr, d_in, d_acc, d_out, count, stream,
                                                    "bf16_decode_accumulate_encode_cuda");
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
  CCSIM_RETURN_IF_ERROR(block_int8_cuda_can_implement(count, block).with_context("block_int8_encode_cuda"));
  return group_quant_encode_cuda(d_x, count, int8_format(block, rounding), key, index_base, d_out, stream);
}

Status block_int8_decode_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_out, CudaStream stream) {
  CCSIM_RETURN_IF_ERROR(block_int8_cuda_can_implement(count, block).with_context("block_int8_decode_cuda"));
  return group_quant_decode_cuda(d_in, count, int8_format(block, Rounding::kNearest), d_out, stream);
}

Status block_int8_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_acc,
                                         CudaStream stream) {
  CCSIM_RETURN_IF_ERROR(block_int8_cuda_can_implement(count, block).with_context("block_int8_decode_accumulate_cuda"));
  return group_quant_decode_accumulate_cuda(d_in, count, int8_format(block, Rounding::kNearest), d_acc, stream);
}

Status block_int8_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_acc,
                                                Rounding rounding, const RngKey& key, uint64_t index_base,
                                                uint8_t* d_out, CudaStream stream) {
  CCSIM_RETURN_IF_ERROR(
      block_int8_cuda_can_implement(count, block).with_context("block_int8_decode_accumulate_encode_cuda"));
  const GroupQuantFormat f = int8_format(block, rounding);
  return group_quant_decode_accumulate_encode_cuda(d_in, count, f, d_acc, f, key, index_base, d_out, stream);
}

}  // namespace ccsim::kern
