#pragma once
/// \file
/// Timing harness of the CUDA kernels for `ccsim bench-kernels --device cuda`: device memory owned
/// by the bench, one stream, each op's median time over repeated launches measured with CUDA events
/// (one untimed launch first), and the device's copy bandwidth (cudaMemcpyDeviceToDevice, bytes
/// read + written per second). No CUDA header needed, so the cases (which kernels, on which inputs:
/// the schemes' device ops, algorithms/device_ops.hpp) are plain C++ over the kernels' host APIs.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/lowrank_cuda.hpp"
#include "kernels/cuda/quant_cuda.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// The current CUDA device, for timing. Not thread-safe; one per bench.
class CudaBench {
 public:
  /// kInternal "no CUDA device" when none is present; kInternal for another CUDA failure.
  static Result<std::unique_ptr<CudaBench>> open();
  ~CudaBench();
  CudaBench(const CudaBench&) = delete;
  CudaBench& operator=(const CudaBench&) = delete;

  /// cudaDeviceProp::name.
  const std::string& device_name() const { return name_; }
  /// `bytes` of device memory (at least 16), owned by the bench until it is destroyed.
  Result<void*> allocate(uint64_t bytes);
  /// Releases everything allocate() handed out.
  void release_all();
  /// Copies `bytes` from host memory to device memory (synchronously).
  Status upload(void* d_dst, const void* src, uint64_t bytes);
  /// Copies `bytes` from device memory to host memory (synchronously).
  Status download(void* dst, const void* d_src, uint64_t bytes);
  /// Waits for all work on the device (set-up launches run on the legacy default stream, which the
  /// bench's non-blocking stream does not wait for).
  Status synchronize();
  /// The bench's cuBLAS handle (made on first use, destroyed with the bench). Its stream is
  /// whatever the last caller set (cublas_set_stream): a timed op sets the stream it is given.
  Result<CublasHandle> cublas();
  /// Median seconds of `repeats` launches of `op` on the bench's stream, after one untimed launch.
  Status median_seconds(uint32_t repeats, const std::function<Status(CudaStream)>& op, double& seconds);
  /// Device-to-device copy of `bytes`, as bytes read + written per second (median of `repeats`).
  Status copy_bandwidth(uint64_t bytes, uint32_t repeats, double& bytes_per_second);

 private:
  CudaBench() = default;
  struct Events;
  std::string name_;
  CudaStream stream_ = nullptr;
  std::unique_ptr<Events> events_;
  std::vector<void*> owned_;
  CublasHandle cublas_ = nullptr;
};

}  // namespace ccsim::kern
