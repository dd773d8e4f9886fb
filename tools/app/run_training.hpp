#pragma once
/// \file
/// Training runs (a scenario with a workload), once per compression scheme: the worker model of
/// sim/training/ replays the compute trace while gradients are synchronized over the shared
/// network, with stragglers and tenants. Data-parallel runs synchronize DDP buckets through the
/// scheme's bucket codecs (algorithms/bucket_codecs.hpp), or broadcast (fixed, or AQGB's rate
/// control); 3D-parallel runs synchronize each pipeline stage over its DP groups with the stage
/// codecs and EDGC's controllers (algorithms/lowrank/edgc_stages.hpp). This file wires the two.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/round_summary.hpp"
#include "sim/training/tenants.hpp"
#include "sim/training/training_job.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/scenario_io.hpp"
#include "tools/app/tta.hpp"

namespace ccsim::app {

/// What one compression scheme produced in a data-parallel run.
struct TrainingResult {
  std::string label;                 ///< the entry's name in every output
  std::string scheme;
  nlohmann::json params;
  std::string sync_desc;
  std::string kernel_cost;           ///< how its kernels were charged (KernelCostModel::describe)
  /// Bits per gradient entry of a round (its parts too): one rank's buckets encoded once and, where
  /// the scheme plans, the metadata phase (AQGB's broadcast: the mean over the run, payload only).
  double bits_per_element = 0;
  algo::RoundBytes bytes;            ///< bucketed syncs: one rank's bytes of a round that plans
  sim::TrainingSummary summary;      ///< rounds, their means, ROW, uplink utilization
  double wire_bytes_per_round = 0;   ///< sent by all workers, mean per completed round
  /// Bucketed syncs, mean per measured round (summed over buckets; not the exposed part): the
  /// gradient collective with its metadata phase, and (sync.mode sharded) the weight all-gather.
  double grad_comm_s = 0, weight_comm_s = 0;
  std::vector<sim::ControlDecision> decisions;
  std::vector<sim::BucketRecord> buckets;
  std::vector<sim::TenantStats> tenants;
  std::vector<sim::LinkStats> links;
  std::vector<std::vector<double>> timeline;
};

/// Everything a data-parallel training run measured.
struct TrainingReport {
  LoadedScenario loaded;
  uint32_t workers = 0;
  std::string topology_desc;
  std::string trace_desc;
  std::string stragglers_desc;
  std::string tenants_desc;
  std::string kernel_cost_desc;
  std::string horizon_desc;
  std::vector<LinkRow> link_rows;
  std::vector<TrainingResult> results;
  std::optional<TtaReport> tta;  ///< with a convergence block
};

/// What one compression scheme produced in a 3D-parallel run.
struct ParallelResult {
  std::string label;  ///< the entry's name in every output
  std::string scheme;
  std::string sync_desc;
  std::string kernel_cost;  ///< how its kernels were charged (KernelCostModel::describe)
  sim::ParallelSummary summary;
  std::vector<sim::ControlDecision> decisions;
  std::vector<sim::LinkStats> links;
  std::vector<std::vector<double>> timeline;
  uint64_t transfers = 0;  ///< flows the network carried (the job's and the tenants')
};

/// Everything a 3D-parallel training run measured.
struct ParallelReport {
  LoadedScenario loaded;
  std::string topology_desc;
  std::string layout_desc;
  std::string trace_desc;
  std::string stages_desc;
  std::string stragglers_desc;
  std::string tenants_desc;
  std::string kernel_cost_desc;
  std::vector<LinkRow> link_rows;
  std::vector<ParallelResult> results;
  std::optional<TtaReport> tta;  ///< with a convergence block (curves)
};

/// Runs a loaded data-parallel training scenario (plan kind kTraining).
Result<TrainingReport> run_training(const LoadedScenario& loaded, const RunHooks& hooks = {});
/// Runs a loaded 3D-parallel training scenario (plan kind kParallel).
Result<ParallelReport> run_parallel_training(const LoadedScenario& loaded, const RunHooks& hooks = {});

}  // namespace ccsim::app
