#pragma once
/// \file
/// Time-to-accuracy: how many rounds a compressed run needs to reach a target, and what that costs
/// in simulated time (docs/tta.md).
///
/// Targets are relative to the uncompressed baseline's final metric: for a loss (lower is better)
/// 1.05, 1.02, 1.0 mean 105%, 102%, 100% of the baseline's last value; for an accuracy 0.99, 0.995,
/// 1.0 mean 99%, 99.5%, 100% of it. Rounds-to-target come from a curve (metric against round, from
/// a proxy run or the user's own training) or from a calibrated convergence model that maps a
/// scheme's gradient vNMSE to a rounds ratio against the baseline.
///
/// The model (fitted by `python3 -m ccsim.tta fit` on proxy curves, stored as JSON):
///   final metric:  m(v) = m_base * (1 + sign * c * v^d)            (sign +1 loss, -1 accuracy)
///   rounds ratio:  R(v, t) / R_base(t) = 1 + a_t * v^b_t, if m(v) reaches t; else not reached
/// v the scheme's vNMSE (mean over ranks of ||X - X^||^2 / ||X||^2 of the averaged gradient).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::algo {

/// Whether smaller or larger metric values are better.
enum class MetricSense : uint8_t { kLowerIsBetter, kHigherIsBetter };

/// A scheme's metric against training rounds (rounds increasing).
struct Curve {
  std::vector<uint64_t> rounds;
  std::vector<double> values;
};

/// The absolute value a relative target asks for: `target` x the baseline's final value.
double target_value(double relative, double baseline_final);
/// Whether `value` meets `goal` under `sense`.
bool meets(double value, double goal, MetricSense sense);
/// The first round of `curve` whose value meets `goal` (nullopt: never).
std::optional<uint64_t> rounds_to_target(const Curve& curve, double goal, MetricSense sense);

/// One target's fitted rounds model.
struct TargetFit {
  double target = 1.0;          ///< relative target
  double a = 0, b = 1;          ///< rounds ratio 1 + a v^b
  uint64_t baseline_rounds = 0; ///< the proxy baseline's rounds to this target
};

/// A calibrated convergence model.
struct ConvergenceModel {
  MetricSense sense = MetricSense::kLowerIsBetter;
  std::string metric = "loss";
  double c = 0, d = 1;                 ///< final metric m(v) = m_base (1 +- c v^d)
  std::vector<TargetFit> targets;
  std::string provenance;              ///< what it was fitted on (one line)

  /// The final metric relative to the baseline's, for a scheme of vNMSE v.
  double final_ratio(double v) const;
  /// The rounds ratio to relative target `t` for vNMSE v against a baseline of vNMSE vb (the
  /// baseline itself reaches every target at ratio 1), or nullopt when the predicted final metric,
  /// relative to the baseline's, misses it. REQUIRES: t is one of `targets`.
  std::optional<double> rounds_ratio(double v, double t, double vb = 0) const;
  const TargetFit* fit_of(double t) const;
};

/// One scheme's time-to-accuracy for one target.
struct TtaRow {
  std::string label;
  double target = 0;              ///< relative
  double goal = 0;                ///< absolute metric value
  std::optional<double> rounds;   ///< rounds to the target (fractional when predicted); nullopt: not reached
  double round_time_s = 0;        ///< the scheme's simulated seconds per round
  double time_s = 0;              ///< rounds x round_time_s (0 when not reached)
  double ratio = 0;               ///< time_s over the baseline's (0 when either is not reached)
  double rounds_ratio = 0;        ///< rounds over the baseline's
};

/// Fills time_s, ratio and rounds_ratio of `rows` (one per label and target; `baseline` names the
/// baseline's label) from each row's rounds and round time.
void finish_tta(std::vector<TtaRow>& rows, const std::string& baseline);

}  // namespace ccsim::algo
