#pragma once
/// \file
/// The kernel cost model: what a compression kernel op costs on a device, from a measured device
/// profile (`ccsim bench-kernels`, file format in traces/device_profile.hpp) or, without one, from
/// a roofline (declared memory traffic / memory bandwidth + a launch overhead).
///
/// A measured kernel is a curve: its launch overhead (the median time of the op on a tiny chunk)
/// and its median time at sizes from 64 KB up, each with the bytes the op must read and write
/// there (the compressor's declared memory traffic). Between launch and the measured time, the op
/// moves its bytes at an effective rate; the model charges an op of `elements` and `bytes`
///
///     launch + bytes · τ(elements),   τ(n) = (seconds_i − launch) / bytes_i at the measured n_i,
///
/// with τ interpolated linearly in log(n) between measured sizes and held constant beyond them.
/// At a measured size with the measured traffic this is exactly the measured time; a chunk of a
/// scheme measured with other parameters (another bit width) is charged its own declared bytes at
/// the measured rate.
///
/// A curve records the parameters it was measured with, as compact JSON: "{}" for the scheme's
/// defaults, or the switches that differ from them where a scheme only runs an op under a
/// switch (MX's per-layer scaling, TLq's Hadamard). A profile holds at most one curve per scheme,
/// op and parameters; sim/kernel_cost.hpp picks the one that fits a scenario's parameters.
///
/// Thread safety: immutable after construction; safe to share.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ccsim::kern {

/// One measured size of a kernel.
struct KernelCostPoint {
  uint64_t elements = 0;  ///< fp32 elements of the chunk
  uint64_t bytes = 0;     ///< memory traffic the op must do there (bytes read + written)
  double seconds = 0;     ///< median wall time of one op
  friend bool operator==(const KernelCostPoint&, const KernelCostPoint&) = default;
};

/// One kernel (a scheme's op) measured on a device.
struct KernelCostCurve {
  std::string scheme;       ///< registered compressor name ("dynamiq", "mxfp8", ...)
  std::string op;           ///< "encode", "decode", "decode_accumulate", "decode_accumulate_encode"
  std::string params;       ///< the parameters it was measured with, as compact JSON ("{}" = defaults)
  double launch_s = 0;      ///< median time of the op on a tiny chunk
  std::vector<KernelCostPoint> points;  ///< ascending, distinct `elements`, at least one

  /// Seconds the op takes on a chunk of `elements` that must move `bytes` (see the file comment).
  double seconds(uint64_t elements, uint64_t bytes) const;
  /// Effective bandwidth at measured point `i`: bytes_i / seconds_i (launch included).
  double bandwidth_Bps(size_t i) const;
  friend bool operator==(const KernelCostCurve&, const KernelCostCurve&) = default;
};

/// Everything measured on one device.
struct DeviceCostProfile {
  std::string kind;            ///< "cpu" or "cuda"
  std::string name;            ///< the device ("NVIDIA H100 80GB HBM3", "x86-64, 2 threads")
  uint32_t threads = 0;        ///< CPU worker threads used (0 for a GPU)
  std::string measured;        ///< date of the measurement, YYYY-MM-DD
  std::string source;          ///< what measured it ("ccsim 0.1.0 bench-kernels --repeats 5")
  double copy_bandwidth_Bps = 0;  ///< measured copy bandwidth, bytes read + written per second
  std::vector<KernelCostCurve> kernels;

  /// The curve of `scheme`'s `op` measured with exactly `params` (compact JSON), or nullptr.
  const KernelCostCurve* find(std::string_view scheme, std::string_view op, std::string_view params = "{}") const;
  /// Whether any curve belongs to `scheme`.
  bool covers(std::string_view scheme) const;
  friend bool operator==(const DeviceCostProfile&, const DeviceCostProfile&) = default;
};

}  // namespace ccsim::kern
