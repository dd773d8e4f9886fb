#pragma once
/// \file
/// Timing of the CUDA kernels for `ccsim bench-kernels --device cuda`: each kernel's median time
/// over repeated launches measured with CUDA events (one untimed launch first), and the device's
/// copy bandwidth (cudaMemcpyDeviceToDevice, bytes read + written per second). No CUDA header
/// needed; built only with nvcc, and callable only when cuda_device_available().
///
/// Cases are named by the compressor they implement and its op, with that compressor's default
/// parameters ("int8": block 256, stochastic rounding), so that a profile's curves apply to the
/// schemes a scenario runs.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::kern {

/// One measured kernel size.
struct CudaKernelTiming {
  std::string scheme;     ///< registered compressor name
  std::string op;         ///< "encode", "decode", "decode_accumulate", "decode_accumulate_encode"
  uint64_t elements = 0;  ///< fp32 elements of the chunk
  double seconds = 0;     ///< median time of one launch
};

/// What a CUDA bench measured.
struct CudaBenchReport {
  std::string device;       ///< cudaDeviceProp::name
  double copy_Bps = 0;      ///< device-to-device copy of the largest size, bytes read + written per second
  std::vector<CudaKernelTiming> timings;
};

/// Schemes with CUDA kernels in this build.
std::vector<std::string> cuda_bench_schemes();

/// Times every CUDA kernel of `schemes` (each must be in cuda_bench_schemes()) at each of `sizes`
/// (fp32 elements, ascending), on N(0,1) inputs drawn from `seed`. kNotFound when no device is
/// present; kInternal for a CUDA failure (out of memory included).
Status cuda_bench(const std::vector<std::string>& schemes, const std::vector<uint64_t>& sizes, uint32_t repeats,
                  uint64_t seed, CudaBenchReport& out);

}  // namespace ccsim::kern
