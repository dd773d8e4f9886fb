// fp16's device ops (algorithms/device_ops.hpp): the elementwise FP16 codec (kernels/cuda/block_cuda.hpp).
#include "algorithms/detail/device_cases.hpp"
#include "algorithms/fp16/fp16.hpp"
#include "kernels/cuda/block_cuda.hpp"

namespace ccsim::algo {

const DeviceOps& Fp16Compressor::device_ops() {
  static const DeviceOps kOps{[](const DeviceContext& c) -> Result<CollectiveKernels> {
    return detail::elem16_kernels(kern::fp16_encode_cuda, kern::fp16_decode_cuda, kern::fp16_decode_accumulate_cuda,
                                  kern::fp16_decode_accumulate_encode_cuda, c.n);
  }};
  return kOps;
}

}  // namespace ccsim::algo
