#pragma once
/// \file
/// Runs a scenario with a workload (training rounds): the compute trace replayed by the worker
/// model (sim/training), gradients synchronized by DDP bucket collectives (each bucket's schedule
/// bound to the compressor's exact wire sizes) or by broadcast (fixed, or AQGB's adaptive ratio),
/// with stragglers and tenants, once per compression scheme; writes the per-round outputs.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/compressor.hpp"
#include "sim/base/status.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/tenants.hpp"
#include "sim/training/training_job.hpp"
#include "tools/app/runner.hpp"
#include "tools/app/scenario_io.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/compute_trace.hpp"

namespace ccsim::app {

/// Per round: the cluster's view (all workers).
struct ClusterRound {
  uint32_t round = 0;
  double complete_s = 0;     ///< every layer's update arrived at every worker
  double duration_max_s = 0;
  double wait_max_s = 0;
  double overlap_min_s = 0;
  double row = 0;            ///< min overlap / max wait (AQGB Eq. 2; infinity when no worker waited)
};

/// What one compression scheme produced over the run.
struct TrainingResult {
  std::string scheme;                ///< label: the scheme, with its explicit parameters if any
  nlohmann::json params;
  std::string sync_desc;
  std::string kernel_cost;           ///< how its kernels were charged (KernelCostModel::describe)
  double bits_per_element = 0;       ///< wire bits per gradient entry (mean over the run for adaptive schemes)
  uint32_t rounds_completed = 0;     ///< rounds synchronized everywhere within the horizon
  double end_s = 0;                  ///< simulated time the run covered
  // Means over measured rounds (after warm-up) and workers.
  uint32_t measured_rounds = 0;
  double round_s = 0, compute_s = 0, wait_s = 0, comm_s = 0, overlap_s = 0;
  double compression_s = 0, compression_overhead_s = 0, exposed_comm_s = 0;
  double row_cluster = 0;            ///< mean over measured rounds of ClusterRound::row (finite ones)
  uint32_t rounds_without_wait = 0;  ///< measured rounds where no worker waited (ROW infinite)
  double uplink_utilization = 0;     ///< workers' NIC uplinks: bytes / (capacity · end_s), mean
  double wire_bytes_per_round = 0;   ///< sent by all workers, mean per completed round
  /// Bucketed syncs, mean per measured round (summed over buckets; not the exposed part): the
  /// gradient collective with its metadata phase, and (sync.mode sharded) the weight all-gather.
  double grad_comm_s = 0, weight_comm_s = 0;
  std::vector<sim::RoundMetrics> rounds;
  std::vector<ClusterRound> cluster_rounds;
  std::vector<sim::ControlDecision> decisions;
  std::vector<sim::BucketRecord> buckets;
  std::vector<sim::TenantStats> tenants;
  std::vector<sim::LinkStats> links;
  std::vector<std::vector<double>> timeline;
};

/// Everything a training run measured.
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
};

namespace detail {
// Inputs shared by the data-parallel and the 3D-parallel training runs (errors name the JSON path).
/// The workload's trace, merged into workload.blocks when given.
Result<traces::ComputeTrace> load_trace(const WorkloadConfig& wl);
/// The scenario's straggler model for `workers` workers.
Result<sim::StragglerModel> make_stragglers(const Scenario& s, uint32_t workers);
/// The scenario's tenants; a ring tenant without ranks runs over `workers`.
std::vector<sim::TenantSpec> tenant_specs(const Scenario& s, const std::vector<topo::Rank>& workers);
/// "scheme(k=v,...)" with the parameters that differ from the scheme's defaults.
std::string scheme_label(const std::string& scheme, const nlohmann::json& params);
/// The gradient layout of `layers` (in that order), each layer's 1/tp share as a matrix of
/// `rows` rows (0: about square) plus a 1-D remainder, padded with a 1-D layer up to `total`
/// entries: what low-rank schemes factor.
std::vector<algo::LayerShape> layer_matrices(const std::vector<sim::TrainingLayer>& layers,
                                             const std::vector<uint32_t>& ids, uint32_t tp, uint64_t rows,
                                             uint64_t total);
/// Whether `comp` factors matrices (its wire size depends on the layer shapes).
bool factors_matrices(const algo::Compressor& comp);
/// After a plan, the round to run on the same synthetic gradients: `collective` (with `options`:
/// segments, gpus_per_node; the shard cuts are set from the plan) through the numerics interpreter,
/// so the controllers that adapt from a whole round's encodes advance as in a numerics run (MX's
/// mu from the overflows counted at every hop, EDGC's window and rank at the round's end).
struct SyntheticRound {
  const topo::CollectiveInfo* collective = nullptr;
  topo::CollectiveOptions options;
  uint32_t round = 0;
};
/// Per-rank synthetic gradients of `elements` entries (gradients.* settings, `salt` picks the
/// draw), if `copies` times their size fits gradients.numerics_memory; else an input error that
/// starts with `purpose`.
Result<std::vector<std::vector<float>>> synthetic_gradients(const Scenario& s, uint64_t elements, uint32_t ranks,
                                                            uint32_t salt, double copies, std::string_view purpose);
/// What a plan on synthetic gradients decided: the entries the planned round reduces and the
/// controllers' decisions, both taken right after the plan (a round run may already have moved a
/// low-rank scheme's rank on for the next round).
struct SyntheticPlan {
  uint64_t reduced = 0;
  std::vector<algo::PlanDecision> decisions;
};
/// Plans `comp` (its metadata phase) on synthetic per-rank gradients of `elements` (`salt` picks
/// the draw), then runs `run` on them if given, within gradients.numerics_memory.
Result<SyntheticPlan> plan_on_synthetic(const Scenario& s, algo::Compressor& comp, uint64_t elements, uint32_t ranks,
                                        uint32_t salt, const SyntheticRound* run = nullptr);
/// The phase running `generator`'s schedule bound to `comp`'s wire sizes (`comp` must outlive it).
sim::SyncPhase compressor_phase(std::string name, std::unique_ptr<topo::ScheduleGenerator> generator,
                                const algo::Compressor& comp, const KernelCosts& costs);
/// A compressor's metadata phase: a ring all-reduce of its plan_bytes per rank as fp32 words.
sim::SyncPhase metadata_phase(uint64_t plan_bytes, uint32_t ranks, const KernelCosts& costs);
/// Appends the phases of one synchronization of a tensor of `elements` entries per rank through
/// `comp` on `ranks` ranks: when it plans (`plan_bytes` > 0) its plan_local ops and the metadata
/// all-reduce, its prepare ops, `collective` (a phase named `name`), its finish ops. Round-op
/// phases (one op per rank on its whole tensor, charged like any kernel) only where the scheme
/// does round work (algo::round_ops), named "plan_local", "prepare", "finish", or all `name`
/// with `name_all` (so that BucketRecord::time_in(name) covers them). Adds the round-op kinds it
/// appended to `charged` (kept sorted, no duplicates) when given.
void append_sync_phases(std::vector<sim::SyncPhase>& out, const std::string& name,
                        std::unique_ptr<topo::ScheduleGenerator> collective, const algo::Compressor& comp,
                        uint64_t elements, uint32_t ranks, uint64_t plan_bytes, const KernelCosts& costs,
                        bool name_all = false, std::vector<topo::KernelKind>* charged = nullptr);
/// controller.csv: per run, its decisions; `who` names the column of ControlDecision::worker.
std::string decisions_csv(const std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>>& runs,
                          const std::string& who);
}  // namespace detail

/// Runs the scenario's training rounds (REQUIRES: scenario.workload.trace set). Input problems
/// (trace file, inconsistent settings) are input errors (exit code 2).
Result<TrainingReport> run_training(const LoadedScenario& loaded);

/// Writes scenario.resolved.json, summary.json, results.csv (one row per scheme), rounds.csv (per
/// round and worker), rounds_cluster.csv, controller.csv, buckets.csv, links.csv (and
/// links_timeline.csv) into `dir`, atomically.
Status write_training_outputs(const TrainingReport& report, const std::string& dir);

/// The terminal summary.
std::string format_training_summary(const TrainingReport& report, const std::string& out_dir);
nlohmann::json training_summary_json(const TrainingReport& report);

}  // namespace ccsim::app
