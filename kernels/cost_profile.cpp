#include "kernels/cost_profile.hpp"

#include <algorithm>
#include <cmath>

namespace ccsim::kern {
namespace {

// Seconds per byte beyond the launch at measured point p (never negative: a point measured at or
// below the launch overhead moves its bytes for free).
double per_byte(const KernelCostPoint& p, double launch_s) {
  if (p.bytes == 0) return 0;
  return std::max(p.seconds - launch_s, 0.0) / static_cast<double>(p.bytes);
}

}  // namespace

double KernelCostCurve::seconds(uint64_t elements, uint64_t bytes) const {
  const auto& pts = points;
  double tau = 0;
  if (pts.size() == 1 || elements <= pts.front().elements) {
    tau = per_byte(pts.front(), launch_s);
  } else if (elements >= pts.back().elements) {
    tau = per_byte(pts.back(), launch_s);
  } else {
    const auto hi = std::upper_bound(pts.begin(), pts.end(), elements,
                                     [](uint64_t n, const KernelCostPoint& p) { return n < p.elements; });
    const auto lo = hi - 1;
    const double w = (std::log(static_cast<double>(elements)) - std::log(static_cast<double>(lo->elements))) /
                     (std::log(static_cast<double>(hi->elements)) - std::log(static_cast<double>(lo->elements)));
    tau = (1 - w) * per_byte(*lo, launch_s) + w * per_byte(*hi, launch_s);
  }
  return launch_s + static_cast<double>(bytes) * tau;
}

double KernelCostCurve::bandwidth_Bps(size_t i) const {
  const KernelCostPoint& p = points.at(i);
  return p.seconds > 0 ? static_cast<double>(p.bytes) / p.seconds : 0.0;
}

const KernelCostCurve* DeviceCostProfile::find(std::string_view scheme, std::string_view op,
                                               std::string_view params) const {
  for (const auto& k : kernels)
    if (k.scheme == scheme && k.op == op && k.params == params) return &k;
  return nullptr;
}

bool DeviceCostProfile::covers(std::string_view scheme) const {
  return std::any_of(kernels.begin(), kernels.end(), [&](const KernelCostCurve& k) { return k.scheme == scheme; });
}

}  // namespace ccsim::kern
