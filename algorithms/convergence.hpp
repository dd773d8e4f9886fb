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
/// The model (fitted by `python3 -m ccsim.tta fit` on proxy curves, stored as JSON): compression
/// error scales the baseline's curve. A scheme of gradient vNMSE v ends at
///   f(v) = 1 + sign * c * v^d        (sign +1 for a loss, -1 for an accuracy)
/// times the baseline's final metric, and its metric at round r is the baseline's times f(v), so its
/// rounds to a target t are the baseline's rounds to t / f(v) (not reached when f(v) misses t).
/// c and d are fitted per scheme family (the name without trailing digits: mxfp4/6/8 -> mxfp), and
/// once over every fitted entry for families the calibration has not seen.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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

/// The final-metric fit of one family: f(v) = 1 +- c v^d.
struct FinalFit {
  double c = 0, d = 1;
};

/// A calibrated convergence model.
struct ConvergenceModel {
  MetricSense sense = MetricSense::kLowerIsBetter;
  std::string metric = "loss";
  Curve baseline;                          ///< the proxy baseline's curve, values over its final value
  FinalFit all;                            ///< fitted on every entry
  std::map<std::string, FinalFit> families;  ///< fitted on each family's entries
  std::string provenance;                  ///< what it was fitted on (one line)

  /// A scheme's family: its name without trailing digits.
  static std::string family(std::string_view scheme);
  /// f(v) for `scheme` (its family's fit, else the fit over all entries).
  double final_ratio(double v, std::string_view scheme) const;
  /// The baseline's rounds to `goal` (relative to its final value), interpolated linearly between
  /// its evaluations (nullopt: its curve never meets the goal).
  std::optional<double> baseline_rounds(double goal) const;
  /// Rounds to relative target `t` of `scheme` at vNMSE v, against a baseline `base` at vNMSE vb
  /// (which itself reaches t in baseline_rounds(t)): the baseline's rounds to t / (f(v) / f(vb)),
  /// or nullopt when f(v) / f(vb) misses t.
  std::optional<double> rounds(double v, std::string_view scheme, double vb, std::string_view base, double t) const;
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
