#include "algorithms/convergence.hpp"

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

double ConvergenceModel::final_ratio(double v) const {
  const double shift = c * std::pow(std::max(v, 0.0), d);
  return sense == MetricSense::kLowerIsBetter ? 1.0 + shift : 1.0 - shift;
}

const TargetFit* ConvergenceModel::fit_of(double t) const {
  for (const TargetFit& f : targets)
    if (std::abs(f.target - t) <= 1e-12) return &f;
  return nullptr;
}

std::optional<double> ConvergenceModel::rounds_ratio(double v, double t, double vb) const {
  const TargetFit* f = fit_of(t);
  if (f == nullptr || !meets(final_ratio(v) / final_ratio(vb), t, sense)) return std::nullopt;
  auto slowdown = [&](double x) { return 1.0 + f->a * std::pow(std::max(x, 0.0), f->b); };
  return slowdown(v) / slowdown(vb);
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
