#pragma once
/// \file
/// How long a compression kernel op occupies its rank's GPU stream, for one scheme. Three models:
///  * ideal: kernels are free (communication-only studies, analytic cross-checks);
///  * roofline: a launch overhead plus the op's declared memory traffic at the device's nominal
///    memory bandwidth;
///  * measured: the scheme's kernels from a device profile (kernels/cost_profile.hpp), each op
///    kind the profile lacks charged by the roofline.
///
/// Which curve charges an op: among the profile's curves of the scheme and op, those whose every
/// recorded parameter has the same value in the scheme's parameters (a curve at "{}", measured
/// with the defaults, always qualifies); of these the one that records the most parameters, the
/// first in the file on a tie. So MX with layer scaling is charged from curves measured with
/// layer scaling where the profile has them, and from the default's otherwise.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

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

  /// The kernels of `scheme` made with `params` (compact JSON of its resolved parameters, as
  /// algo::Compressor::params() gives them; "{}" matches only default curves) from `profile`, by
  /// the rule in the file comment (op kinds without a curve fall back to `roofline`).
  static KernelCostModel from_profile(std::shared_ptr<const kern::DeviceCostProfile> profile, std::string profile_name,
                                      const std::string& scheme, std::string_view params,
                                      const KernelCostModel& roofline);

  bool ideal() const;
  /// Whether at least one op kind is charged from measurements.
  bool any_measured() const;
  /// Time of a kernel op of `kind` on `elements` that must move `memory_bytes`.
  Duration cost(topo::KernelKind kind, uint64_t elements, uint64_t memory_bytes) const;
  /// "ideal (...)", "roofline (2 TB/s, 5 us launch)", or "measured (FILE: device, date; ops ...)".
  /// The collective ops, the measured round ops and those in `round_ops` (the ones the scheme
  /// runs) are listed as measured or charged by the roofline; ops charged from curves measured
  /// with other than the default parameters are named with those parameters.
  std::string describe(std::span<const topo::KernelKind> round_ops = {}) const;
};

}  // namespace ccsim::sim
