#pragma once
/// \file
/// Straggler models: the factor by which a worker's compute (every forward and backward time of the
/// trace) is scaled in one round. Draws come from the counter-based generator keyed by
/// (seed, round, worker), so a worker's factor in a round never depends on anything else that was
/// simulated (repeatable, and identical across schemes compared in one scenario).
///
///  * none: 1.
///  * uniform: U[low, high] (AQGB §5.1: U[0.9, 1.1]).
///  * lognormal: exp(sigma·Z − sigma²/2), mean 1.
///  * empirical: inverse-transform sampling of a piecewise-linear CDF read from a file
///    (format below), divided by the distribution's mean so factors average 1 (AQGB Fig. 8).
///  * persistent: the listed workers are always `factor` times slower, the others never.
///
/// Empirical CDF file:
///   { "format": "ccsim-straggler-cdf", "version": 1, "unit": "s", "description": "...",
///     "points": [[1.33, 0.0], [1.40, 0.30], ..., [2.67, 1.0]] }
/// `points` are (value, cumulative probability) with values strictly and probabilities weakly
/// increasing, the first probability 0 and the last 1.

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/diagnostics.hpp"
#include "sim/base/enum_names.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/status.hpp"

namespace ccsim::sim {

/// A piecewise-linear cumulative distribution.
struct EmpiricalCdf {
  std::vector<double> values;  ///< strictly increasing
  std::vector<double> probs;   ///< weakly increasing, 0 first, 1 last
  std::string description;

  /// Reads and validates a CDF file (errors name the file, the JSON path, expected and found).
  static Result<EmpiricalCdf> load(const std::filesystem::path& path);
  /// The value at cumulative probability u in [0, 1] (linear interpolation).
  double quantile(double u) const;
  /// The distribution's mean (exact for the piecewise-linear CDF: uniform within each piece).
  double mean() const;
};

/// The straggler models.
enum class StragglerKind : uint8_t { kNone, kUniform, kLognormal, kEmpirical, kPersistent };
/// Their names, in the order scenario files list them.
inline constexpr EnumName<StragglerKind> kStragglerKinds[] = {{StragglerKind::kNone, "none"},
                                                              {StragglerKind::kUniform, "uniform"},
                                                              {StragglerKind::kLognormal, "lognormal"},
                                                              {StragglerKind::kEmpirical, "empirical"},
                                                              {StragglerKind::kPersistent, "persistent"}};

/// Which straggler model and its parameters.
struct StragglerSpec {
  StragglerKind model = StragglerKind::kNone;
  double low = 0.9, high = 1.1;
  double sigma = 0.1;
  std::string cdf_file;                ///< empirical: the CDF file make() reads (unless `cdf` is set)
  EmpiricalCdf cdf;                    ///< empirical
  std::vector<uint32_t> slow_workers;  ///< persistent
  double slow_factor = 1.5;            ///< persistent
};

/// The straggler model's fields in a scenario file (sim/base/json_fields.hpp).
template <class V>
void visit(V& v, StragglerSpec& c) {
  v.choice("model", c.model, kStragglerKinds, "per-round, per-worker compute factor");
  v.number("low", c.low, 0.01, 100.0, "uniform: lower bound");
  v.number("high", c.high, 0.01, 100.0, "uniform: upper bound");
  v.number("sigma", c.sigma, 0.0, 5.0, "lognormal: sigma (mean 1)");
  v.path("file", c.cdf_file, "empirical: CDF file (format ccsim-straggler-cdf), normalized to mean 1");
  v.integer_list("workers", c.slow_workers, 0, 1 << 20, "persistent: the slow workers");
  v.number("factor", c.slow_factor, 0.01, 100.0, "persistent: how many times slower they are");
}

/// Draws per-round, per-worker compute factors.
class StragglerModel {
 public:
  /// Every problem of `spec` for `workers` workers, each at a JSON Pointer relative to the spec
  /// ("/workers/1"); the CDF file is read by make().
  static std::vector<Diagnostic> problems(const StragglerSpec& spec, uint32_t workers);
  /// Validates the spec (low <= high, positive factors, ...) and reads its CDF file (errors at
  /// "/file").
  static Result<StragglerModel> make(StragglerSpec spec, uint64_t seed);
  /// The factor for `worker` in `round` (> 0).
  double factor(uint32_t round, uint32_t worker) const;
  /// The mean factor of the model (analytic).
  double mean() const;
  /// "uniform U[0.9, 1.1]" and the like.
  std::string describe() const;

 private:
  StragglerSpec spec_;
  uint64_t seed_ = 0;
  double cdf_mean_ = 1;
};

}  // namespace ccsim::sim
