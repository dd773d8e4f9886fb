// bf16's device ops (algorithms/device_ops.hpp): the elementwise BF16 codec (kernels/cuda/quant_cuda.hpp).
#include "algorithms/bf16/bf16.hpp"
#include "algorithms/detail/device_cases.hpp"
#include "kernels/cuda/quant_cuda.hpp"

namespace ccsim::algo {

const DeviceOps& Bf16Compressor::device_ops() {
  static const DeviceOps kOps{[](const DeviceContext& c) -> Result<CollectiveKernels> {
    return detail::elem16_kernels(kern::bf16_encode_cuda, kern::bf16_decode_cuda, kern::bf16_decode_accumulate_cuda,
                                  kern::bf16_decode_accumulate_encode_cuda, c.n);
  }};
  return kOps;
}

}  // namespace ccsim::algo
