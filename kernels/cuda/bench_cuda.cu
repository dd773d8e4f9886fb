// Timing harness of the CUDA kernels (bench_cuda.hpp). Every timed op is a host entry point of
// kernels/cuda/, enqueued on one stream between two CUDA events; the median over `repeats` such
// launches is kept after one untimed launch. Inputs are N(0,1) from the shared Philox generator.
#include "kernels/cuda/bench_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/block_int8.hpp"

namespace ccsim::kern {
namespace {

constexpr uint32_t kInt8Block = 256;  // the int8 compressor's default block

// Device memory released on scope exit.
struct DeviceMemory {
  void* p = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { cudaFree(p); }
  Status allocate(uint64_t bytes, const char* what) {
    return cuda_status(cudaMalloc(&p, std::max<uint64_t>(bytes, 16)), what);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// CUDA events and a stream released on scope exit.
struct Timer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  Timer() = default;
  ~Timer() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
  Status init() {
    if (Status s = cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); !s.ok())
      return s;
    if (Status s = cuda_status(cudaEventCreate(&start), "cudaEventCreate"); !s.ok()) return s;
    return cuda_status(cudaEventCreate(&stop), "cudaEventCreate");
  }
  // Median seconds of `repeats` launches of `op` (one untimed launch first).
  Status median(uint32_t repeats, const std::function<Status(cudaStream_t)>& op, double& seconds) {
    if (Status s = op(stream); !s.ok()) return s;
    std::vector<double> t;
    for (uint32_t r = 0; r < repeats; ++r) {
      if (Status s = cuda_status(cudaEventRecord(start, stream), "cudaEventRecord"); !s.ok()) return s;
      if (Status s = op(stream); !s.ok()) return s;
      if (Status s = cuda_status(cudaEventRecord(stop, stream), "cudaEventRecord"); !s.ok()) return s;
      if (Status s = cuda_status(cudaEventSynchronize(stop), "cudaEventSynchronize"); !s.ok()) return s;
      float ms = 0;
      if (Status s = cuda_status(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime"); !s.ok()) return s;
      t.push_back(static_cast<double>(ms) * 1e-3);
    }
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    seconds = t[t.size() / 2];
    return ok_status();
  }
};

// N(0,1) values by Box-Muller over the shared generator.
std::vector<float> normal_values(uint64_t n, uint64_t seed) {
  const RngKey key{seed, 0, 0, 7};
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const double u1 = std::max(static_cast<double>(uniform_at(key, 2 * i)), 1e-12);
    const double u2 = static_cast<double>(uniform_at(key, 2 * i + 1));
    v[i] = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return v;
}

// The kernels of one scheme: op name -> launcher on buffers sized for `n` elements.
struct Buffers {
  DeviceMemory x, acc, msg, out;
};
using Launcher = std::function<Status(cudaStream_t)>;

Status scheme_ops(const std::string& scheme, uint64_t n, uint64_t seed, Buffers& b,
                  std::vector<std::pair<std::string, Launcher>>& ops) {
  const RngKey key{seed, 0, 0, 1};
  const float* x = b.x.as<float>();
  float* acc = b.acc.as<float>();
  if (scheme == "bf16") {
    auto* msg = b.msg.as<uint16_t>();
    auto* out = b.out.as<uint16_t>();
    if (Status s = bf16_encode_cuda(x, n, msg); !s.ok()) return s;
    ops.emplace_back("encode", [=](cudaStream_t st) { return bf16_encode_cuda(x, n, out, st); });
    ops.emplace_back("decode", [=](cudaStream_t st) { return bf16_decode_cuda(msg, n, acc, st); });
    ops.emplace_back("decode_accumulate",
                     [=](cudaStream_t st) { return bf16_decode_accumulate_cuda(msg, n, acc, st); });
    return ok_status();
  }
  if (scheme == "int8") {
    auto* msg = b.msg.as<uint8_t>();
    auto* out = b.out.as<uint8_t>();
    if (Status s = block_int8_encode_cuda(x, n, kInt8Block, Rounding::kStochastic, key, 0, msg); !s.ok()) return s;
    ops.emplace_back("encode", [=](cudaStream_t st) {
      return block_int8_encode_cuda(x, n, kInt8Block, Rounding::kStochastic, key, 0, out, st);
    });
    ops.emplace_back("decode", [=](cudaStream_t st) { return block_int8_decode_cuda(msg, n, kInt8Block, acc, st); });
    ops.emplace_back("decode_accumulate",
                     [=](cudaStream_t st) { return block_int8_decode_accumulate_cuda(msg, n, kInt8Block, acc, st); });
    return ok_status();
  }
  return invalid_argument("no CUDA kernels for scheme '" + scheme + "'");
}

}  // namespace

std::vector<std::string> cuda_bench_schemes() { return {"bf16", "int8"}; }

Status cuda_bench(const std::vector<std::string>& schemes, const std::vector<uint64_t>& sizes, uint32_t repeats,
                  uint64_t seed, CudaBenchReport& out) {
  if (!cuda_device_available()) return internal_error("no CUDA device: --device cuda needs a GPU");
  if (sizes.empty()) return invalid_argument("cuda_bench: no sizes");
  int dev = 0;
  if (Status s = cuda_status(cudaGetDevice(&dev), "cudaGetDevice"); !s.ok()) return s;
  cudaDeviceProp prop{};
  if (Status s = cuda_status(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"); !s.ok()) return s;
  out.device = prop.name;
  const uint64_t max_n = sizes.back();
  Buffers b;
  const std::pair<DeviceMemory*, uint64_t> allocs[] = {
      {&b.x, 4 * max_n}, {&b.acc, 4 * max_n}, {&b.msg, 4 * max_n + 65536}, {&b.out, 4 * max_n + 65536}};
  for (const auto& [mem, bytes] : allocs)
    if (Status s = mem->allocate(bytes, "cudaMalloc"); !s.ok()) return s;
  const std::vector<float> host = normal_values(max_n, seed);
  if (Status s = cuda_status(cudaMemcpy(b.x.p, host.data(), 4 * max_n, cudaMemcpyHostToDevice), "cudaMemcpy"); !s.ok())
    return s;
  if (Status s = cuda_status(cudaMemcpy(b.acc.p, host.data(), 4 * max_n, cudaMemcpyHostToDevice), "cudaMemcpy");
      !s.ok())
    return s;
  Timer timer;
  if (Status s = timer.init(); !s.ok()) return s;
  double copy_s = 0;
  if (Status s = timer.median(repeats, [&](cudaStream_t st) {
        return cuda_status(cudaMemcpyAsync(b.acc.p, b.x.p, 4 * max_n, cudaMemcpyDeviceToDevice, st),
                           "cudaMemcpyAsync");
      }, copy_s); !s.ok())
    return s;
  out.copy_Bps = 2.0 * 4.0 * static_cast<double>(max_n) / copy_s;
  for (const std::string& scheme : schemes)
    for (const uint64_t n : sizes) {
      std::vector<std::pair<std::string, Launcher>> ops;
      if (Status s = scheme_ops(scheme, n, seed, b, ops); !s.ok()) return s;
      // The set-up launches ran on the legacy stream, which a non-blocking stream does not wait for.
      if (Status s = cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); !s.ok()) return s;
      for (const auto& [op, launch] : ops) {
        double t = 0;
        if (Status s = timer.median(repeats, launch, t); !s.ok()) return s;
        out.timings.push_back({scheme, op, n, t});
      }
    }
  return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace ccsim::kern
