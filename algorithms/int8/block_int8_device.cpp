// int8's device ops (algorithms/device_ops.hpp): group quantization at its defaults, int8 in
// blocks of 256 with stochastic rounding (kernels/cuda/block_cuda.hpp).
#include "algorithms/detail/device_cases.hpp"
#include "algorithms/int8/block_int8.hpp"

namespace ccsim::algo {

const DeviceOps& BlockInt8Compressor::device_ops() {
  static const DeviceOps kOps{[](const DeviceContext& c) -> Result<CollectiveKernels> {
    kern::GroupQuantFormat f = detail::int_groups(8, 256);
    f.rounding = kern::Rounding::kStochastic;
    return detail::group_kernels(f, f, c.n, c.collective_key());
  }};
  return kOps;
}

}  // namespace ccsim::algo
