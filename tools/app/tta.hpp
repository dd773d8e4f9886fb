#pragma once
/// \file
/// Time-to-accuracy of a training run (docs/tta.md): the scenario's `convergence` block read and
/// checked with the scenario (curves CSV or calibration JSON), each entry's rounds-to-target from
/// its curve or from the calibrated model applied to its measured vNMSE, times the entry's
/// simulated round time; tta.csv, curves.csv, the summary's "tta" and the console table.
/// The arithmetic is algorithms/convergence.hpp's; this file reads, measures and writes.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/convergence.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/status.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::app {

/// Reads and checks `s.convergence` (nothing when it names neither curves nor a calibration);
/// `labels` are the entries' names. Problems go into `diag` at /convergence/...
std::shared_ptr<const ConvergenceInputs> check_convergence(const Scenario& s, RunKind kind,
                                                           const std::vector<std::string>& labels, Diagnostics& diag);

/// One point of curves.csv: an entry's metric against rounds and simulated time.
struct TtaCurvePoint {
  std::string label;
  uint64_t round = 0;
  double time_s = 0;
  double value = 0;
};

/// A run's time-to-accuracy.
struct TtaReport {
  std::string source_desc;
  std::string metric;
  std::string baseline;
  std::vector<algo::TtaRow> rows;    ///< per entry and target, entries in order
  std::vector<double> vnmse;         ///< per entry (calibration: what the model was applied to; else NaN)
  std::string vnmse_desc;            ///< calibration: what the vNMSE was measured on
  std::vector<TtaCurvePoint> curve;  ///< curves source: every point
};

/// Each entry's gradient vNMSE, and one line on what it was measured on.
struct EntryVnmse {
  std::vector<double> vnmse;
  std::string desc;
};
/// Measures each entry's gradient vNMSE for a calibration, bucketed as the run, on the entry's
/// collective: on the scenario's gradient dump (gradients.source "dump": its steps, each a sampled
/// round, averaged; at most convergence.vnmse_elements per worker, sampled in whole rows beyond),
/// else on convergence.vnmse_elements synthetic entries per rank of the scenario's generator.
/// `bits` the entry's mean bits per entry in the run (AQGB's truncation width comes from it). With a
/// `cache`, an entry measured before on equal inputs is read from it.
Result<EntryVnmse> measure_entry_vnmse(const LoadedScenario& loaded, const std::vector<double>& bits,
                                       NumericsCache* cache = nullptr);

/// Time-to-accuracy of entries `labels` (registered schemes `schemes`, whose families pick a
/// calibration's fit) with mean simulated round times `round_s` and (calibration) vNMSE `vnmse`.
TtaReport compute_tta(const ConvergenceInputs& in, const std::vector<std::string>& labels,
                      const std::vector<std::string>& schemes, const std::vector<double>& round_s,
                      const std::vector<double>& vnmse, int64_t baseline_rounds);

/// tta.csv: label, target, goal, reached, rounds, round_time_s, time_s, ratio, rounds_ratio, vnmse.
std::string tta_csv(const TtaReport& r);
/// curves.csv: label, round, time_s, metric, value (empty unless the rounds came from curves).
std::string curves_csv(const TtaReport& r);
nlohmann::json tta_json(const TtaReport& r);
/// The console's time-to-accuracy table.
std::string format_tta(const TtaReport& r);

}  // namespace ccsim::app
