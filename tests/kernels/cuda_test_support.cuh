#pragma once
// What the CUDA kernel tests share: skipping without a device, status assertions, and device
// buffers (optionally offset, to exercise unaligned paths). Include after gtest and cuda_runtime.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <span>

#include "kernels/cuda/quant_cuda.hpp"
#include "sim/base/status.hpp"

#define SKIP_WITHOUT_GPU()                                                                           \
  do {                                                                                               \
    if (!::ccsim::kern::cuda_device_available()) GTEST_SKIP() << "no CUDA device: skipping GPU test"; \
  } while (0)

#define ASSERT_CUDA_OK(expr) ASSERT_EQ(cudaSuccess, (expr)) << cudaGetErrorString(cudaGetLastError())
#define ASSERT_STATUS_OK(expr)            \
  do {                                    \
    const ::ccsim::Status s_ = (expr);    \
    ASSERT_TRUE(s_.ok()) << s_.message(); \
  } while (0)

namespace ccsim::kern::testing {

// Device memory owned for the length of a test; `offset_bytes` shifts the pointer handed out so
// tests can exercise unaligned (non-vectorized) paths. REQUIRES: offset_bytes % alignof(T) == 0.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(uint64_t count, uint64_t offset_bytes = 0) : bytes_(count * sizeof(T) + offset_bytes + 16) {
    if (cudaMalloc(&base_, bytes_) != cudaSuccess) base_ = nullptr;
    ptr_ = base_ == nullptr ? nullptr : reinterpret_cast<T*>(static_cast<uint8_t*>(base_) + offset_bytes);
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  cudaError_t upload(std::span<const T> v) {
    return cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t download(std::span<T> v) const {
    return cudaMemcpy(v.data(), ptr_, v.size() * sizeof(T), cudaMemcpyDeviceToHost);
  }

 private:
  uint64_t bytes_;
  void* base_ = nullptr;
  T* ptr_ = nullptr;
};

}  // namespace ccsim::kern::testing
