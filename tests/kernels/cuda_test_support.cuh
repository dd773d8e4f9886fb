#pragma once
// What the CUDA kernel tests share: skipping without a device, status assertions, device buffers
// (optionally offset, to exercise unaligned paths), seeded input families (synthetic adversarial
// ones and slices of the shipped real gradient) and bitwise comparisons that report the first
// differences. Include after gtest and cuda_runtime; the includer defines FMT_USE_CONSTEXPR before
// any fmt include (see quant_cuda_test.cu) and links ccsim_cuda_test_support.

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/float_bits.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "sim/base/status.hpp"
#include "tests/kernels/gradient_sample.hpp"

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
  explicit DeviceBuffer(uint64_t count, uint64_t offset_bytes = 0)
      : count_(count), bytes_(count * sizeof(T) + offset_bytes + 16) {
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
  /// Sets every byte of the `count` elements to `byte` (garbage a kernel must overwrite).
  cudaError_t fill(uint8_t byte) { return cudaMemset(ptr_, byte, count_ * sizeof(T)); }

 private:
  uint64_t count_;
  uint64_t bytes_;
  void* base_ = nullptr;
  T* ptr_ = nullptr;
};

// --- inputs --------------------------------------------------------------------------------------

enum class Input { kNormal, kZeros, kDenormals, kHuge, kMixed, kNonFinite, kGradient };

inline const std::vector<Input>& all_inputs() {
  static const std::vector<Input> inputs{Input::kNormal, Input::kZeros,     Input::kDenormals, Input::kHuge,
                                         Input::kMixed,  Input::kNonFinite, Input::kGradient};
  return inputs;
}

inline std::string input_name(Input in) {
  switch (in) {
    case Input::kNormal: return "normal";
    case Input::kZeros: return "zeros";
    case Input::kDenormals: return "denormals";
    case Input::kHuge: return "huge";
    case Input::kMixed: return "mixed";
    case Input::kNonFinite: return "nonfinite";
    case Input::kGradient: return "gradient";
  }
  return "?";
}

inline std::string rounding_name(Rounding r) { return r == Rounding::kNearest ? "nearest" : "stochastic"; }

inline float from_bits(uint32_t u) { return bits_to_float(u); }
inline uint32_t to_bits(float f) { return float_to_bits(f); }
inline uint64_t to_bits(double d) { return double_to_bits(d); }

// Seeded inputs of one family. kNormal spans 16 decades; kMixed draws each element from zeros,
// denormals, bf16 rounding ties, ordinary values and values near FLT_MAX, with random signs;
// kNonFinite mixes ±inf, quiet and signaling NaNs of both signs into normal values; kGradient is
// a slice of the shipped real gradient (worker `seed % 8`, at an offset drawn from the seed).
inline std::vector<float> make_input(Input kind, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (kind == Input::kGradient) {
    std::string error;
    std::vector<float> g = test::shipped_gradient(static_cast<uint32_t>(seed % 8), rng() % 100'000, n, error);
    EXPECT_EQ(g.size(), n) << "cannot read the shipped gradient dump: " << error;
    g.resize(n);
    return g;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  std::uniform_int_distribution<int> decade(-8, 8);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> x(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float sign = negative(rng) ? -1.0f : 1.0f;
    switch (kind) {
      case Input::kNormal: x[i] = normal(rng) * std::pow(10.0f, static_cast<float>(decade(rng))); break;
      case Input::kZeros: x[i] = sign * 0.0f; break;
      case Input::kDenormals: x[i] = sign * (i % 7 == 0 ? from_bits(1) : 1e-40f * unit(rng)); break;
      case Input::kHuge: x[i] = sign * 3e38f * unit(rng) * (i % 5 == 0 ? 1.1f : 1.0f); break;
      case Input::kMixed: {
        switch (rng() % 8) {
          case 0: x[i] = sign * 0.0f; break;
          case 1: x[i] = sign * 1e-40f * unit(rng); break;
          case 2: x[i] = sign * from_bits(0x3F808000u | static_cast<uint32_t>(rng() & 0x10000u)); break;  // tie
          case 3: x[i] = sign * FLT_MAX; break;
          case 4: x[i] = sign * 3e38f * unit(rng); break;
          case 5: x[i] = sign * FLT_MIN; break;
          default: x[i] = normal(rng) * std::pow(10.0f, static_cast<float>(decade(rng))); break;
        }
        break;
      }
      case Input::kNonFinite: {
        const uint64_t r = rng() % 6;
        const uint32_t s = negative(rng) ? 0x80000000u : 0u;
        x[i] = r == 0   ? sign * INFINITY
               : r == 1 ? from_bits(s | 0x7FC00000u | static_cast<uint32_t>(rng() & 0x3FFFFF))  // quiet NaN
               : r == 2 ? from_bits(s | 0x7F800001u | static_cast<uint32_t>(rng() & 0x3FFFFF))  // signaling NaN
                        : normal(rng);
        break;
      }
      case Input::kGradient: break;
    }
  }
  return x;
}

// The accumulator a decode-accumulate adds to: finite values (another worker's gradient for the
// gradient family, so that a fused hop sums two real gradients).
inline std::vector<float> make_accumulator(Input kind, uint64_t n, uint64_t seed) {
  return make_input(kind == Input::kGradient ? Input::kGradient : Input::kNormal, n, seed + 1);
}

// A seed that differs for every parameter combination but is fixed from run to run.
inline uint64_t case_seed(uint64_t n, uint64_t a, uint64_t b, uint64_t c) {
  return 0x9E3779B97F4A7C15ull ^ (n * 0x100000001B3ull) ^ (a << 40) ^ (b << 20) ^ (c << 8);
}

// --- comparisons ---------------------------------------------------------------------------------

// Float arrays equal bit for bit. With `nan_payload_may_differ`, a NaN matches any NaN (see the
// NaN rules of block_cuda.hpp).
inline void expect_same_floats(std::span<const float> cpu, std::span<const float> gpu,
                               bool nan_payload_may_differ = false) {
  ASSERT_EQ(cpu.size(), gpu.size());
  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < cpu.size(); ++i) {
    if (nan_payload_may_differ && std::isnan(cpu[i]) && std::isnan(gpu[i])) continue;
    if (to_bits(cpu[i]) != to_bits(gpu[i]) && ++mismatches <= 5) {
      ADD_FAILURE() << fmt::format("element {}: cpu {:#010x} ({}) gpu {:#010x} ({})", i, to_bits(cpu[i]), cpu[i],
                                   to_bits(gpu[i]), gpu[i]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

inline void expect_same_bytes(std::span<const uint8_t> cpu, std::span<const uint8_t> gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  if (cpu.empty() || std::memcmp(cpu.data(), gpu.data(), cpu.size()) == 0) return;
  uint64_t first = 0, differing = 0;
  for (uint64_t i = cpu.size(); i-- > 0;) {
    if (cpu[i] != gpu[i]) {
      first = i;
      ++differing;
    }
  }
  ADD_FAILURE() << fmt::format("encoded bytes differ at {} of {} bytes, first at byte {}: cpu {:#04x} gpu {:#04x}",
                               differing, cpu.size(), first, cpu[first], gpu[first]);
}

inline void expect_same_bytes(const void* cpu, const void* gpu, uint64_t bytes) {
  const auto* c = static_cast<const uint8_t*>(cpu);
  const auto* g = static_cast<const uint8_t*>(gpu);
  expect_same_bytes(std::span<const uint8_t>(c, bytes), std::span<const uint8_t>(g, bytes));
}

}  // namespace ccsim::kern::testing
