#pragma once
/// \file
/// Device cost profiles (`ccsim bench-kernels`): measures every compression kernel a schedule runs (encode, decode,
/// decode-accumulate, the fused decode-accumulate-encode) over chunk sizes and writes a device
/// cost profile (traces/device_profile.hpp) that scenarios use with cluster.gpu.kernel_cost
/// "profile". Method, per scheme (default parameters), op and size: one untimed run, then the
/// median wall time of `repeats` runs (CUDA events on a GPU); the launch overhead is the median at a
/// tiny chunk; the bytes of each point are the compressor's declared memory traffic, so the
/// timing interpreter's model reproduces the measured time at measured sizes.
///
/// Round ops that a scheme only runs under a parameter switch (its CompressorInfo::round_variants:
/// MX's per-layer scaling, TLq's Hadamard) are measured again under it, and their curves record the
/// switch as their params, so that sim/kernel_cost.hpp charges a scenario with the switch from them.
/// Round ops run on a tensor laid out as algo::bench_layer() (algorithms/device_ops.hpp).
///
/// On a GPU (`--device cuda`) the bench times each registered scheme's device ops
/// (CompressorInfo::device_ops, algorithms/device_ops.hpp): every scheme without them is skipped.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cost_profile.hpp"
#include "sim/base/status.hpp"

namespace ccsim::algo {

struct KernelBenchOptions {
  std::string device = "cpu";        ///< "cpu" (the CPU reference kernels) or "cuda"
  uint64_t min_bytes = 64ull << 10;  ///< smallest chunk, bytes of fp32 input
  uint64_t max_bytes = 1ull << 30;   ///< largest chunk (sizes grow by 4x from min_bytes)
  uint32_t repeats = 5;              ///< timed runs per point (median)
  std::vector<std::string> schemes;  ///< empty: every registered scheme the bench supports
  uint64_t seed = 1;
};

/// Chunk sizes in fp32 elements: min_bytes/4, 4x that, ... up to max_bytes/4.
std::vector<uint64_t> bench_sizes(const KernelBenchOptions& options);

/// Runs the bench; `progress` is told each scheme as it starts. Input errors (unknown scheme or
/// device, bad sizes) are input errors; a CUDA failure is a runtime failure.
Result<kern::DeviceCostProfile> bench_kernels(const KernelBenchOptions& options,
                                              const std::function<void(const std::string&)>& progress = {});

}  // namespace ccsim::algo
