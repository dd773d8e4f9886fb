#include "algorithms/convergence.hpp"

#include <algorithm>
#include <cmath>

namespace ccsim::algo {

double target_value(double relative, double baseline_final) { return relative * baseline_final; }

bool meets(double value, double goal, MetricSense sense) {
  // A relative slack of 1e-12 keeps a baseline's own last value at 100% from missing by rounding.
  const double slack = 1e-12 * std::abs(goal);
  return sense == MetricSense::kLowerIsBetter ? value <= goal + slack : value >= goal - slack;
}

std::optional<uint64_t> rounds_to_target(const Curve& curve, double goal, MetricSense sense) {
  for (size_t i = 0; i < curve.values.size(); ++i)
    if (std::isfinite(curve.values[i]) && meets(curve.values[i], goal, sense)) return curve.rounds[i];
  return std::nullopt;
}

std::string ConvergenceModel::family(std::string_view scheme) {
  size_t end = scheme.size();
  while (end > 0 && scheme[end - 1] >= '0' && scheme[end - 1] <= '9') --end;
  return std::string(scheme.substr(0, end));
}

double ConvergenceModel::final_ratio(double v, std::string_view scheme) const {
  const auto it = families.find(family(scheme));
  const FinalFit& f = it != families.end() ? it->second : all;
  const double shift = f.c * std::pow(std::max(v, 0.0), f.d);
  return sense == MetricSense::kLowerIsBetter ? 1.0 + shift : 1.0 - shift;
}

std::optional<double> ConvergenceModel::baseline_rounds(double goal) const {
  for (size_t i = 0; i < baseline.values.size(); ++i) {
    const double x = baseline.values[i], r = static_cast<double>(baseline.rounds[i]);
    if (!meets(x, goal, sense)) continue;
    if (i == 0) return r;
    const double x0 = baseline.values[i - 1], r0 = static_cast<double>(baseline.rounds[i - 1]);
    return x0 == x ? r : r0 + (r - r0) * (x0 - goal) / (x0 - x);
  }
  return std::nullopt;
}

std::optional<double> ConvergenceModel::rounds(double v, std::string_view scheme, double vb, std::string_view base,
                                               double t) const {
  const double f = final_ratio(v, scheme) / final_ratio(vb, base);
  if (!meets(f, t, sense)) return std::nullopt;
  return baseline_rounds(t / f);
}

void finish_tta(std::vector<TtaRow>& rows, const std::string& baseline) {
  for (TtaRow& r : rows) r.time_s = r.rounds ? *r.rounds * r.round_time_s : 0.0;
  for (TtaRow& r : rows) {
    const TtaRow* base = nullptr;
    for (const TtaRow& b : rows)
      if (b.label == baseline && std::abs(b.target - r.target) <= 1e-12) base = &b;
    const bool both = base != nullptr && r.rounds && base->rounds && *base->rounds > 0;
    r.ratio = both ? r.time_s / base->time_s : 0.0;
    r.rounds_ratio = both ? *r.rounds / *base->rounds : 0.0;
  }
}

}  // namespace ccsim::algo
