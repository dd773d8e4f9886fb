// qsgd's device ops (algorithms/device_ops.hpp): at its defaults, 4 bits in buckets of 512
// (kernels/cuda/block_cuda.hpp).
#include "algorithms/detail/device_cases.hpp"
#include "algorithms/qsgd/qsgd.hpp"
#include "kernels/cuda/block_cuda.hpp"

namespace ccsim::algo {
namespace {

Result<CollectiveKernels> qsgd_kernels(const DeviceContext& c) {
  constexpr uint32_t kBucket = 512, kBits = 4;
  const uint64_t n = c.n;
  const kern::RngKey key = c.collective_key();
  CollectiveKernels o;
  o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
    return kern::qsgd_encode_cuda(in, n, kBucket, kBits, key, 0, out, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::qsgd_decode_cuda(in, n, kBucket, kBits, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::qsgd_decode_accumulate_cuda(in, n, kBucket, kBits, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::qsgd_decode_accumulate_encode_cuda(in, n, kBucket, kBits, acc, key, 0, out, s);
  };
  return o;
}

}  // namespace

const DeviceOps& QsgdCompressor::device_ops() {
  static const DeviceOps kOps{qsgd_kernels};
  return kOps;
}

}  // namespace ccsim::algo
