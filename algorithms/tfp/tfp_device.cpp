// tfp's device ops (algorithms/device_ops.hpp): at its defaults, k = 16 of fp32 with truncation
// (kernels/cuda/block_cuda.hpp).
#include "algorithms/detail/device_cases.hpp"
#include "algorithms/tfp/tfp.hpp"
#include "kernels/cuda/block_cuda.hpp"

namespace ccsim::algo {
namespace {

Result<CollectiveKernels> tfp_kernels(const DeviceContext& c) {
  const uint64_t n = c.n;
  const kern::RngKey key = c.collective_key();
  const kern::TfpFormat f{kern::TfpBase::kFloat32, 16};
  CollectiveKernels o;
  o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
    return kern::tfp_encode_cuda(in, n, f, false, key, 0, out, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::tfp_decode_cuda(in, n, f, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::tfp_decode_accumulate_cuda(in, n, f, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::tfp_decode_accumulate_encode_cuda(in, n, f, acc, false, key, 0, out, s);
  };
  return o;
}

}  // namespace

const DeviceOps& TfpCompressor::device_ops() {
  static const DeviceOps kOps{tfp_kernels};
  return kOps;
}

}  // namespace ccsim::algo
