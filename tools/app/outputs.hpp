#pragma once
/// \file
/// What `ccsim run` writes and prints: every output file of each kind of run (written under
/// temporary names, renamed once all are complete, so a failure leaves nothing half-written) and
/// the terminal summaries. README "Outputs" and docs/training.md describe the columns.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/status.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/run_training.hpp"

namespace ccsim::app {

/// The ccsim version string ("0.1.0").
const char* ccsim_version();

/// Writes every (path, content) under a temporary name first and renames them only once all are
/// complete, so a failure leaves no half-written output (the temporaries are removed).
Status write_files_atomically(const std::vector<std::pair<std::filesystem::path, std::string>>& files);
/// Simulated seconds for a CSV: on the picosecond grid ("0.35949584", not "0.3594958400000001").
std::string sec(double s);
/// A CSV field, quoted when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

// ---- collective runs ----
/// Writes scenario.resolved.json, summary.json, results.csv, links.csv (and links_timeline.csv when
/// outputs.link_timeline_bin > 0) into `dir` (created if needed).
Status write_outputs(const RunReport& report, const std::string& dir);
std::string format_summary(const RunReport& report, const std::string& out_dir);
nlohmann::json summary_json(const RunReport& report);
std::string results_csv(const RunReport& report);
/// links.csv: per scheme and link, bytes, busy time, utilization, peak sharing.
std::string links_csv(const RunReport& report);
/// links_timeline.csv: per scheme, link and non-empty time bin, bytes and utilization ("" unless
/// outputs.link_timeline_bin > 0).
std::string links_timeline_csv(const RunReport& report);

// ---- data-parallel training runs ----
/// Writes scenario.resolved.json, summary.json, results.csv (one row per scheme), rounds.csv (per
/// round and worker), rounds_cluster.csv, controller.csv, buckets.csv, tenants.csv, links.csv (and
/// links_timeline.csv) into `dir`.
Status write_training_outputs(const TrainingReport& report, const std::string& dir);
std::string format_training_summary(const TrainingReport& report, const std::string& out_dir);
nlohmann::json training_summary_json(const TrainingReport& report);

// ---- 3D-parallel training runs ----
/// Writes scenario.resolved.json, summary.json, results.csv (one row per scheme), stages.csv (per
/// scheme, round and stage), rounds.csv (per scheme and round), controller.csv and links.csv (and
/// links_timeline.csv) into `dir`.
Status write_parallel_outputs(const ParallelReport& report, const std::string& dir);
std::string format_parallel_summary(const ParallelReport& report, const std::string& out_dir);
nlohmann::json parallel_summary_json(const ParallelReport& report);

}  // namespace ccsim::app
