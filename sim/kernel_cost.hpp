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
#include "sim/base/enum_names.hpp"
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

/// How a run times compression kernels (a scenario's cluster.gpu.kernel_cost).
enum class KernelCostMode : uint8_t { kIdeal, kRoofline, kProfile };
/// Their names, in the order scenario files list them.
inline constexpr EnumName<KernelCostMode> kKernelCostModes[] = {
    {KernelCostMode::kIdeal, "ideal"}, {KernelCostMode::kRoofline, "roofline"}, {KernelCostMode::kProfile, "profile"}};

/// The kernel cost models of every scheme of a run: all ideal, a roofline at one nominal memory
/// bandwidth, or each scheme's kernels from one measured device profile (the roofline for the op
/// kinds it lacks). Copyable; a measured one shares its profile.
class KernelCosts {
 public:
  /// Ideal: kernels are free.
  KernelCosts() = default;
  static KernelCosts roofline(double memory_Bps, Duration launch);
  /// `file` names the profile in descriptions.
  static KernelCosts measured(std::shared_ptr<const kern::DeviceCostProfile> profile, std::string file,
                              double memory_Bps, Duration launch);

  KernelCostMode mode() const { return mode_; }
  /// The model of the kernels of `scheme` made with `params` (its resolved parameters as compact
  /// JSON with sorted keys, as algo::Compressor::params() gives them; which curves of a profile
  /// apply depends on them).
  KernelCostModel scheme(const std::string& scheme, std::string_view params) const;
  /// The mode line of a summary: "ideal (...)", "roofline (...)", "measured profile FILE (...)".
  std::string describe() const;

 private:
  KernelCostMode mode_ = KernelCostMode::kIdeal;
  KernelCostModel roofline_;
  std::shared_ptr<const kern::DeviceCostProfile> profile_;
  std::string file_;
};

}  // namespace ccsim::sim
