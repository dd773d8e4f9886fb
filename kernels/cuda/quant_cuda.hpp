#pragma once
/// \file
/// CUDA versions of the BF16 and block-int8 codecs (kernels/quant/), behind a host API that needs
/// no CUDA header, so plain C++ code can include it.
///
/// Every op is bit-identical to its CPU reference: the kernels call the same CCSIM_HD element
/// functions, write the same wire layout and draw the same Philox numbers (element i of a chunk at
/// index `index_base + i`), and the target is compiled with --fmad=false so no multiply-add is
/// contracted differently. NaNs produced by arithmetic follow the CPU's x86-64 rules too (see
/// block_cuda.hpp): block int8 runs the group-quantization kernels of block_cuda.hpp and BF16 the
/// elementwise kernels FP16 uses.
///
/// Entry points follow CUB's shape: device pointers (prefix `d_`), an optional stream, a Status.
/// They never allocate (the codecs need no workspace) and never synchronize: they check the
/// arguments, enqueue one kernel on `stream` and return. A non-OK Status from a launch means the
/// launch itself failed; errors raised while the kernel runs surface at the caller's next
/// synchronization. `count == 0` is a no-op.
///
/// Thread safety: the functions hold no state; concurrent calls on different streams are safe.

#include <cstdint>
#include <string_view>

#include "kernels/philox.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "sim/base/status.hpp"

/// The CUDA runtime's stream handle type (cudaStream_t is `CUstream_st*`), declared here so this
/// header does not need cuda_runtime.h.
struct CUstream_st;

namespace ccsim::kern {

/// A CUDA stream; the same type as cudaStream_t. nullptr is the legacy default stream.
using CudaStream = ::CUstream_st*;

/// Largest block size the CUDA block-int8 kernels accept (the CPU reference has no limit).
inline constexpr uint32_t kBlockInt8CudaMaxBlock = 65536;

/// True when the CUDA runtime reports at least one device (cudaGetDeviceCount > 0). Never fails:
/// a missing driver reads as "no device".
bool cuda_device_available();

/// Converts a CUDA runtime error code to a Status: OK for cudaSuccess, otherwise kInternal with
/// "`context`: <cudaGetErrorName>: <cudaGetErrorString>". `cuda_error` is a cudaError_t, passed as
/// int so that this header needs no CUDA header. The one place ccsim maps cudaError_t to Status.
Status cuda_status(int cuda_error, std::string_view context);

/// BF16 encode: d_out[i] = float_to_bf16_rne(d_x[i]) for i < count.
/// REQUIRES: d_x holds `count` floats and d_out `count` uint16 (device memory); they do not overlap.
Status bf16_encode_cuda(const float* d_x, uint64_t count, uint16_t* d_out, CudaStream stream = nullptr);

/// BF16 decode: d_out[i] = bf16_to_float(d_in[i]) (overwrites d_out).
/// REQUIRES: d_in holds `count` uint16 and d_out `count` floats; they do not overlap.
Status bf16_decode_cuda(const uint16_t* d_in, uint64_t count, float* d_out, CudaStream stream = nullptr);

/// BF16 decode-accumulate: d_acc[i] += bf16_to_float(d_in[i]), the sum in fp32.
/// REQUIRES: d_in holds `count` uint16 and d_acc `count` floats; they do not overlap.
Status bf16_decode_accumulate_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, CudaStream stream = nullptr);

/// BF16 fused intermediate hop, elementwise in one pass: d_acc[i] += bf16_to_float(d_in[i]), then
/// d_out[i] = float_to_bf16_rne(d_acc[i]).
/// REQUIRES: d_in and d_out hold `count` uint16, d_acc `count` floats; no two overlap.
Status bf16_decode_accumulate_encode_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, uint16_t* d_out,
                                          CudaStream stream = nullptr);

/// Checks that the CUDA block-int8 kernels can serve a chunk: kInvalidArgument unless
/// 1 <= block <= kBlockInt8CudaMaxBlock. Called by every block_int8_*_cuda entry point.
Status block_int8_cuda_can_implement(uint64_t count, uint32_t block);

/// Block-int8 encode into the layout of block_int8_encode (kernels/quant/block_int8_quant.hpp):
/// [ceil(count/block) fp32 block maxima | count int8 codes]. Element i draws its stochastic-rounding
/// number at index `index_base + i` of stream `key` (unused with Rounding::kNearest).
/// REQUIRES: d_x holds `count` floats; d_out holds block_int8_bytes(count, block) bytes (any
/// alignment) and does not overlap d_x.
Status block_int8_encode_cuda(const float* d_x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                              uint64_t index_base, uint8_t* d_out, CudaStream stream = nullptr);

/// Block-int8 decode of a chunk produced by either encoder into d_out (overwrites).
/// REQUIRES: d_in holds block_int8_bytes(count, block) bytes; d_out holds `count` floats.
Status block_int8_decode_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_out,
                              CudaStream stream = nullptr);

/// Block-int8 decode-accumulate: d_acc[i] += decoded value of element i, the sum in fp32.
/// REQUIRES: d_in holds block_int8_bytes(count, block) bytes; d_acc holds `count` floats.
Status block_int8_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_acc,
                                         CudaStream stream = nullptr);

/// Block-int8 fused intermediate hop (the int8 compressor; EQuARX's int8 mode):
/// block_int8_decode_accumulate into d_acc, then block_int8_encode of the new d_acc into d_out, in
/// one pass over memory.
/// REQUIRES: d_in and d_out hold block_int8_bytes(count, block) bytes, d_acc `count` floats; no two
/// overlap.
Status block_int8_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, uint32_t block, float* d_acc,
                                                Rounding rounding, const RngKey& key, uint64_t index_base,
                                                uint8_t* d_out, CudaStream stream = nullptr);

}  // namespace ccsim::kern
