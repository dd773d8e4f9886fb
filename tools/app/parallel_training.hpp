#pragma once
/// \file
/// Runs a scenario with a workload and tensor or pipeline parallelism (parallelism.tp or .pp > 1):
/// the 3D-parallel round model (sim/training/parallel_job.hpp) with each stage's data-parallel
/// gradient sync compressed by the scenario's schemes, once per scheme; writes per-stage and
/// per-round outputs.
///
/// DP sync of stage s (per TP index, over its DP group): an all-reduce (collective.algorithm) of
/// the stage's gradient share (params / tp), bound to the scheme's exact wire sizes, after the
/// scheme's metadata all-reduce if it has one. Low-rank schemes (powersgd) see each layer's share
/// as a workload.matrix_rows x (share / rows) matrix; their metadata phase is the P all-reduce and
/// the collective the Q all-reduce (sizes only: timing runs need no gradient values).
///
/// The edgc controller (EDGC §IV-D4, Algorithm 2) sets powersgd's rank per stage and round from
/// what the run observed: η = T_com / r of the first stage's previous sync (Eq. 3, T_com(r) = η r),
/// T̄_microBack = the mean micro-batch backward time over stages so far, and
/// r_s = clamp(round((η r_1 + s · T̄_microBack) / η), r_min, r_max) for stage s (0-based; stage 0,
/// the paper's "Stage 1", starts its sync last). r_1 is the scheme's rank (anchor first_stage: the
/// paper's Algorithm 2 with Algorithm 1's rank given) or r̄ − (pp − 1) T̄_microBack / (2η), so that
/// the stages' mean rank is the scheme's rank r̄ (anchor mean: the same volume as one shared
/// rank). Round 0, with nothing observed, runs r_1 everywhere. Every decision is logged.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/training/parallel_job.hpp"
#include "sim/training/training_job.hpp"
#include "tools/app/runner.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::app {

/// One stage's sync in one round.
struct StageSyncRow {
  sim::StageRoundRecord record;
  double exposed_s = 0;  ///< max(0, sync end − the round's last backward end)
  int64_t rank = -1;     ///< low-rank schemes: the rank its sync used (-1: not low-rank)
};

/// What one compression scheme produced.
struct ParallelResult {
  std::string scheme;
  std::string sync_desc;
  std::string kernel_cost;  ///< how its kernels were charged (KernelCostModel::describe)
  uint32_t rounds_completed = 0;
  uint32_t measured_rounds = 0;
  // Means over measured rounds (after warm-up).
  double round_s = 0, compute_s = 0, exposed_comm_s = 0;
  double wire_bytes_per_round = 0;
  std::vector<double> stage_sync_s;      ///< per stage: sync duration
  std::vector<double> stage_start_s;     ///< per stage: sync start − round start
  std::vector<double> stage_exposed_s;   ///< per stage: max(0, sync end − last backward end)
  std::vector<double> stage_rank;        ///< per stage: mean rank (low-rank schemes)
  std::vector<sim::ParallelRoundRecord> rounds;
  std::vector<StageSyncRow> stages;
  std::vector<sim::ControlDecision> decisions;
  std::vector<sim::LinkStats> links;
  std::vector<std::vector<double>> timeline;
  double end_s = 0;
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
};

/// Whether the scenario runs the 3D-parallel model (a workload with tp or pp > 1).
bool runs_parallel_training(const Scenario& s);

/// Runs it. Input problems are input errors (exit code 2).
Result<ParallelReport> run_parallel_training(const LoadedScenario& loaded);

/// Writes scenario.resolved.json, summary.json, results.csv (one row per scheme), stages.csv (per
/// scheme, round and stage), rounds.csv (per scheme and round), controller.csv and links.csv (and
/// links_timeline.csv) into `dir`, atomically.
Status write_parallel_outputs(const ParallelReport& report, const std::string& dir);

std::string format_parallel_summary(const ParallelReport& report, const std::string& out_dir);
nlohmann::json parallel_summary_json(const ParallelReport& report);

}  // namespace ccsim::app
