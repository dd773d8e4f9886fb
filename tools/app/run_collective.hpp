#pragma once
/// \file
/// A collective run (a scenario without a workload): for each compression scheme, the collective's
/// round lowered once (algorithms/compressed_collective.hpp) and run through both interpreters:
/// timed on every parallelism group at once (sim/concurrent_groups.hpp), and its numerics on group
/// 0's real per-rank tensors when they fit in memory.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "algorithms/numerics.hpp"
#include "sim/base/status.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/concurrent_groups.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::app {

/// What one compression scheme produced.
struct SchemeResult {
  std::string scheme;
  nlohmann::json params;
  std::string label;               ///< the entry's name in every output
  std::string algorithm;           ///< the collective algorithm it ran (its own or collective.algorithm)
  double serving_latency_s = 0;    ///< serving.layers x (layer_compute + collectives_per_layer x time_s); 0: none
  uint64_t tensor_wire_bytes = 0;  ///< S: one rank's whole tensor encoded once
  algo::RoundBytes bytes;          ///< one rank's bytes: payload and metadata (= S), metadata phase
  double bits_per_element = 0;     ///< 8 · bytes.total() / elements
  sim::RoundTiming timing;         ///< the round's simulated time: plan_local and the metadata phase,
                                   ///< prepare, the collective, finish (sim/concurrent_groups.hpp)
  double analytic_time_s = 0;      ///< closed form where one exists (NaN otherwise)
  /// What the closed form models against the run: the collective's time (the round's, less its
  /// metadata phase) / analytic_time_s - 1. NaN without a closed form, and where kernels are timed
  /// (kernel_cost other than ideal), since the formula models the network only.
  double vs_analytic = 0;
  std::string kernel_cost;         ///< how this scheme's kernels were charged (KernelCostModel::describe)
  double vnmse = 0; ///< mean over ranks of ‖X − X̂_r‖² / ‖X‖² (NaN when numerics were skipped)
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
  std::string numerics_note;       ///< what the numerics ran on, and why
  uint64_t vnmse_elements = 0;     ///< per rank, the entries the vNMSE was measured on
  std::vector<LinkRow> link_rows;
  uint64_t elements = 0;
  std::string topology_desc;
  std::string gradients_desc;
  std::string kernel_cost_desc;    ///< the model's mode; each SchemeResult says how its kernels were charged
  std::string analytic_desc;
  std::vector<SchemeResult> results;
};

/// Runs a loaded collective scenario (its plan's kind is kCollective). The loader found every input
/// error; what fails here is a runtime failure (an unreadable gradient file, a validation gap).
/// With `hooks.numerics`, each scheme's vNMSE is read from the cache when an earlier run had the same
/// numerics inputs (numerics_key), and computed and stored otherwise.
Result<RunReport> run_scenario(const LoadedScenario& loaded, const RunHooks& hooks = {});

/// The topology's links as links.csv names them.
std::vector<LinkRow> link_rows_of(const topo::Topology& topology);
/// "star, 8 hosts, 1 switch; 8 ranks (8 x 1 GPUs), ..." (with `links`: the link count too).
std::string topology_line(const Scenario& s, const topo::Topology& topology, bool links, bool latency);

}  // namespace ccsim::app
