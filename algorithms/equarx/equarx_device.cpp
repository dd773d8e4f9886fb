// equarx's device ops (algorithms/device_ops.hpp): group quantization at its defaults, int8 in
// blocks of 64 (kernels/cuda/block_cuda.hpp).
#include "algorithms/detail/device_cases.hpp"
#include "algorithms/equarx/equarx.hpp"

namespace ccsim::algo {

const DeviceOps& EquarxCompressor::device_ops() {
  static const DeviceOps kOps{[](const DeviceContext& c) -> Result<CollectiveKernels> {
    return detail::group_kernels(detail::int_groups(8, 64), detail::int_groups(8, 64), c.n, c.collective_key());
  }};
  return kOps;
}

}  // namespace ccsim::algo
