#include "sim/kernel_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "sim/base/units.hpp"

namespace ccsim::sim {

namespace {

// How many parameters `curve` records if every one of them has the same value in `made` (the
// scheme's parameters), or -1 if one differs or is absent. Profiles are validated on loading, so a
// curve's params parse; `made` comes from the registry.
int matching_params(const kern::KernelCostCurve& curve, const nlohmann::json& made) {
  const nlohmann::json recorded = nlohmann::json::parse(curve.params.empty() ? "{}" : curve.params);
  for (const auto& [key, value] : recorded.items()) {
    const auto it = made.find(key);
    if (it == made.end() || *it != value) return -1;
  }
  return static_cast<int>(recorded.size());
}

}  // namespace

KernelCostModel KernelCostModel::from_profile(std::shared_ptr<const kern::DeviceCostProfile> profile,
                                              std::string profile_name, const std::string& scheme,
                                              std::string_view params, const KernelCostModel& roofline) {
  KernelCostModel m = roofline;
  m.scheme = scheme;
  m.profile_name = std::move(profile_name);
  const nlohmann::json made = nlohmann::json::parse(params.empty() ? std::string_view("{}") : params);
  std::array<int, topo::kNumKernelKinds> best;
  best.fill(-1);
  for (const kern::KernelCostCurve& c : profile->kernels) {
    if (c.scheme != scheme) continue;
    for (size_t k = 0; k < m.measured.size(); ++k) {
      if (c.op != topo::kernel_kind_name(static_cast<topo::KernelKind>(k))) continue;
      if (const int n = matching_params(c, made); n > best[k]) {
        best[k] = n;
        m.measured[k] = &c;
      }
    }
  }
  m.profile = std::move(profile);
  return m;
}

bool KernelCostModel::any_measured() const {
  for (const auto* c : measured)
    if (c != nullptr) return true;
  return false;
}

bool KernelCostModel::ideal() const { return memory_Bps <= 0 && !any_measured(); }

Duration KernelCostModel::cost(topo::KernelKind kind, uint64_t elements, uint64_t memory_bytes) const {
  if (const kern::KernelCostCurve* c = measured[static_cast<size_t>(kind)])
    return Duration::from_seconds_ceil(c->seconds(elements, memory_bytes));
  if (memory_Bps <= 0) return Duration::zero();
  return launch + Duration::from_seconds_ceil(static_cast<double>(memory_bytes) / memory_Bps);
}

std::string KernelCostModel::describe(std::span<const topo::KernelKind> round_ops) const {
  const std::string roofline = memory_Bps > 0 ? fmt::format("roofline ({}, {} launch)",
                                                            format_quantity(memory_Bps, UnitKind::kBandwidth),
                                                            format_quantity(launch.seconds(), UnitKind::kTime))
                                              : std::string("ideal (compression kernels not timed)");
  if (profile == nullptr) return roofline;
  std::string ops, missing;
  bool any_params = false;  // an op charged from a curve measured with other than the defaults
  for (size_t k = 0; k < measured.size(); ++k) {
    const auto kind = static_cast<topo::KernelKind>(k);
    if (topo::is_round_op(kind) && measured[k] == nullptr &&
        std::find(round_ops.begin(), round_ops.end(), kind) == round_ops.end())
      continue;  // a round op the scheme does not run is neither measured nor charged
    std::string& list = measured[k] != nullptr ? ops : missing;
    list += fmt::format("{}{}", list.empty() ? "" : ", ", topo::kernel_kind_name(kind));
    if (measured[k] != nullptr && !measured[k]->params.empty() && measured[k]->params != "{}") {
      list += fmt::format(" at {}", measured[k]->params);
      any_params = true;
    }
  }
  const std::string where = fmt::format("{} ({} {}, measured {})", profile_name, profile->kind, profile->name,
                                        profile->measured);
  if (ops.empty()) return fmt::format("{}: no kernels of '{}' in the profile {}", roofline, scheme, where);
  if (missing.empty() && !any_params) return fmt::format("measured {} kernels: {}", scheme, where);
  if (missing.empty()) return fmt::format("measured {} kernels: {} ({})", scheme, where, ops);
  return fmt::format("measured {} kernels: {} ({}); {} for {}", scheme, where, ops, roofline, missing);
}

KernelCosts KernelCosts::roofline(double memory_Bps, Duration launch) {
  KernelCosts c;
  c.mode_ = KernelCostMode::kRoofline;
  c.roofline_.memory_Bps = memory_Bps;
  c.roofline_.launch = launch;
  return c;
}

KernelCosts KernelCosts::measured(std::shared_ptr<const kern::DeviceCostProfile> profile, std::string file,
                                  double memory_Bps, Duration launch) {
  KernelCosts c = roofline(memory_Bps, launch);
  c.mode_ = KernelCostMode::kProfile;
  c.profile_ = std::move(profile);
  c.file_ = std::move(file);
  return c;
}

KernelCostModel KernelCosts::scheme(const std::string& scheme, std::string_view params) const {
  if (profile_ == nullptr) return roofline_;
  return KernelCostModel::from_profile(profile_, file_, scheme, params, roofline_);
}

std::string KernelCosts::describe() const {
  if (profile_ == nullptr) return roofline_.describe();
  return fmt::format("measured profile {} ({} {}, measured {}); kernels it lacks: {}", file_, profile_->kind,
                     profile_->name, profile_->measured, roofline_.describe());
}

}  // namespace ccsim::sim
