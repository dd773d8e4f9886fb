#pragma once
/// \file
/// How long a compression kernel op occupies its rank's GPU stream, for one scheme. Three models:
///  * ideal: kernels are free (communication-only studies, analytic cross-checks);
///  * roofline: a launch overhead plus the op's declared memory traffic at the device's nominal
///    memory bandwidth;
///  * measured: the scheme's kernels from a device profile (kernels/cost_profile.hpp), each op
///    kind the profile lacks charged by the roofline.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/cost_profile.hpp"
#include "sim/base/sim_time.hpp"
#include "topology/schedule.hpp"

namespace ccsim::sim {

/// Kernel cost model of one scheme (copyable; a measured model shares its profile).
struct KernelCostModel {
  double memory_Bps = 0;      ///< roofline bandwidth; 0 (and no measured kernels) = ideal
  Duration launch = Duration::zero();  ///< roofline launch overhead

  /// Measured curves by topo::KernelKind (nullptr: roofline), pointing into `profile`.
  std::array<const kern::KernelCostCurve*, topo::kNumKernelKinds> measured{};
  std::shared_ptr<const kern::DeviceCostProfile> profile;
  std::string profile_name;  ///< the profile's file, for describe()
  std::string scheme;        ///< the scheme whose kernels `measured` holds

  /// `scheme`'s kernels from `profile` (op kinds it lacks fall back to `roofline`).
  static KernelCostModel from_profile(std::shared_ptr<const kern::DeviceCostProfile> profile, std::string profile_name,
                                      const std::string& scheme, const KernelCostModel& roofline);

  bool ideal() const;
  /// Whether at least one op kind is charged from measurements.
  bool any_measured() const;
  /// Time of a kernel op of `kind` on `elements` that must move `memory_bytes`.
  Duration cost(topo::KernelKind kind, uint64_t elements, uint64_t memory_bytes) const;
  /// "ideal (...)", "roofline (2 TB/s, 5 us launch)", or "measured (FILE: device, date; ops ...)".
  /// The collective ops, the measured round ops and those in `round_ops` (the ones the scheme
  /// runs) are listed as measured or charged by the roofline.
  std::string describe(std::span<const topo::KernelKind> round_ops = {}) const;
};

}  // namespace ccsim::sim
