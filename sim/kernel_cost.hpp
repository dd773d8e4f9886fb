#pragma once
/// \file
/// How long a compression kernel op occupies its rank's GPU stream. The roofline model charges a
/// launch overhead plus the op's declared memory traffic at the device's memory bandwidth; the
/// ideal model charges nothing (communication-only studies, analytic cross-checks).

#include <cstdint>
#include <string>

#include "sim/base/sim_time.hpp"

namespace ccsim::sim {

/// Kernel cost model (declared bytes moved / memory bandwidth + launch overhead).
struct KernelCostModel {
  double memory_Bps = 0;      ///< 0 = kernels are free (ideal)
  Duration launch = Duration::zero();

  bool ideal() const { return memory_Bps <= 0; }
  Duration cost(uint64_t memory_bytes) const {
    if (ideal()) return Duration::zero();
    return launch + Duration::from_seconds_ceil(static_cast<double>(memory_bytes) / memory_Bps);
  }
  /// "ideal (kernels not timed)" or "roofline (2 TB/s, 5 us launch)".
  std::string describe() const;
};

}  // namespace ccsim::sim
