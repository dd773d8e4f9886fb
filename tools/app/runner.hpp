#pragma once
/// \file
/// Runs a loaded scenario end to end: topology, gradients, then for each compression scheme the
/// collective's schedule through both interpreters (timing and numerics), and writes the outputs.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "topology/topology.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::algo {
class Compressor;
}  // namespace ccsim::algo

namespace ccsim::app {

/// What one compression scheme produced.
struct SchemeResult {
  std::string scheme;
  nlohmann::json params;
  uint64_t tensor_wire_bytes = 0;  ///< S: one rank's whole tensor encoded once
  uint64_t plan_bytes_per_rank = 0;  ///< the scheme's metadata phase: bytes each rank contributes (0: none)
  double bits_per_element = 0;     ///< 8·S / elements
  uint64_t wire_bytes_total = 0;   ///< bytes over all transfers of the schedule
  uint64_t transfers = 0;
  double time_s = 0;               ///< simulated time: plan_local and the metadata phase, prepare, the
                                   ///< collective, finish (the round ops where the scheme has them)
  double plan_time_s = 0;          ///< of which plan_local and the metadata all-reduce (0: none)
  double analytic_time_s = 0;      ///< closed form where one exists (NaN otherwise)
  double kernel_time_s = 0;        ///< max over ranks of time spent in the collective's compression kernels
  double round_kernel_time_s = 0;  ///< max over ranks of time spent in round ops (plan_local, prepare, finish)
  std::string kernel_cost;         ///< how this scheme's kernels were charged (KernelCostModel::describe)
  double time_min_s = 0;           ///< fastest of the concurrent groups (time_s is the slowest)
  double vnmse = 0;                ///< mean over ranks of ‖X − X̂_r‖² / ‖X‖² (NaN when numerics were skipped)
  double vnmse_max_rank = 0;       ///< worst rank's normalized error
  bool unbiased = false;
  uint64_t events = 0;             ///< engine events of the timing run
  std::vector<sim::LinkStats> links;             ///< per topology link
  std::vector<std::vector<double>> timeline;     ///< per link, bytes per timeline bin (when requested)
};

/// A topology link as the outputs name it.
struct LinkRow {
  std::string from;
  std::string to;
  double capacity_Bps = 0;
};

/// Everything a run measured.
struct RunReport {
  LoadedScenario loaded;
  uint32_t ranks = 0;              ///< all ranks of the cluster
  uint32_t group_size = 0;         ///< ranks per collective instance
  uint32_t groups = 0;             ///< concurrent instances (one per parallelism group)
  std::string group_desc;
  std::string numerics_note;       ///< why numerics ran on what they ran on, or were skipped
  std::vector<LinkRow> link_rows;
  uint64_t elements = 0;
  std::string topology_desc;
  std::string gradients_desc;
  std::string kernel_cost_desc;    ///< the model's mode; each SchemeResult says how its kernels were charged
  std::string analytic_desc;
  std::vector<SchemeResult> results;
};

/// Runs the scenario. Input problems found only now (unreadable or inconsistent gradient files)
/// are input errors (exit code 2); anything else is a runtime failure.
Result<RunReport> run_scenario(const LoadedScenario& loaded);

/// Writes scenario.resolved.json, summary.json, results.csv, links.csv (and links_timeline.csv when
/// outputs.link_timeline_bin > 0) into `dir` (created if needed).
/// Each file is written under a temporary name and renamed only once all are complete.
Status write_outputs(const RunReport& report, const std::string& dir);

/// Writes every (path, content) under a temporary name first and renames them only once all are
/// complete, so a failure leaves no half-written output (the temporaries are removed).
Status write_files_atomically(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

/// The human-readable terminal summary.
std::string format_summary(const RunReport& report, const std::string& out_dir);

/// summary.json's content.
nlohmann::json summary_json(const RunReport& report);
/// results.csv's content.
std::string results_csv(const RunReport& report);
/// links.csv's content: per scheme and link, bytes, busy time, utilization, peak sharing.
std::string links_csv(const RunReport& report);
/// links_timeline.csv's content (empty unless a timeline was recorded).
std::string links_timeline_csv(const RunReport& report);

/// One run's link counters as links.csv / links_timeline.csv list them.
struct LinkCsvRun {
  std::string label;                                   ///< the scheme
  const std::vector<sim::LinkStats>* links = nullptr;  ///< per topology link
  const std::vector<std::vector<double>>* timeline = nullptr;  ///< per link, bytes per bin (may be empty)
  double duration_s = 0;                               ///< utilization = bytes / (capacity · duration)
};
/// The topology's links as links.csv names them.
std::vector<LinkRow> link_rows_of(const topo::Topology& topology);
/// The kernel cost models cluster.gpu asks for: ideal, roofline at its nominal memory bandwidth, or
/// each scheme's kernels from a measured device profile (roofline for those it lacks).
struct KernelCosts {
  sim::KernelCostModel roofline;  ///< ideal unless kernel_cost is "roofline" or "profile"
  std::shared_ptr<const kern::DeviceCostProfile> profile;  ///< kernel_cost "profile" only
  std::string profile_file;

  /// Loads the profile if the scenario names one (errors at /cluster/gpu/profile).
  static Result<KernelCosts> of(const Scenario& s);
  /// The model for the kernels of `scheme` made with `params` (its resolved parameters; which
  /// curves of a profile apply depends on them: sim/kernel_cost.hpp).
  sim::KernelCostModel scheme(const std::string& scheme, const nlohmann::json& params) const;
  /// The model for the kernels of `comp` (its name and params()).
  sim::KernelCostModel scheme(const algo::Compressor& comp) const;
  /// The mode line of a summary: "ideal (...)", "roofline (...)", "measured profile FILE (...)".
  std::string describe() const;
};

/// links.csv: per run and link, bytes, busy time, utilization, peak sharing.
std::string link_rows_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs);
/// links_timeline.csv: per run, link and non-empty bin of width `bin_s`, bytes and utilization.
std::string link_timeline_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs, double bin_s);
/// A CSV field, quoted when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

/// The ccsim version string ("0.1.0").
const char* ccsim_version();

}  // namespace ccsim::app
