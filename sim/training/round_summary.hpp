#pragma once
/// \file
/// Round metrics of a finished training run: the cluster's view of each round (AQGB Eq. 2: ROW of
/// the cluster = min over workers of T_overlap / max over workers of T_wait), means over the
/// measured rounds (those after the warm-up), the workers' uplink utilization, and for 3D-parallel
/// runs the per-stage sync times. Definitions: training_job.hpp and parallel_job.hpp.

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "sim/network/flow_network.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/parallel_job.hpp"
#include "sim/training/training_job.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// Per round: the cluster's view (all workers).
struct ClusterRound {
  uint32_t round = 0;
  double complete_s = 0;     ///< every layer's update arrived at every worker (NaN: not by the horizon)
  double duration_max_s = 0;
  double wait_max_s = 0;
  double overlap_min_s = 0;
  double row = 0;            ///< min overlap / max wait (AQGB Eq. 2; infinity when no worker waited)
};

/// A data-parallel run's rounds, summarized.
struct TrainingSummary {
  uint32_t rounds_completed = 0;     ///< rounds synchronized everywhere within the horizon
  double end_s = 0;                  ///< simulated time the run covered
  uint32_t measured_rounds = 0;      ///< rounds after the warm-up with every worker's metrics
  // Means over measured rounds and workers.
  double round_s = 0, compute_s = 0, wait_s = 0, comm_s = 0, overlap_s = 0;
  double compression_s = 0, compression_overhead_s = 0, exposed_comm_s = 0;
  double row_cluster = 0;            ///< mean over measured rounds of ClusterRound::row (finite ones)
  uint32_t rounds_without_wait = 0;  ///< measured rounds where no worker waited (ROW infinite)
  double uplink_utilization = 0;     ///< workers' NIC uplinks: bytes / (capacity · covered time), mean
  std::vector<RoundMetrics> rounds;
  std::vector<ClusterRound> cluster_rounds;
};

/// Summarizes `job` after its engine ran up to `horizon` (SimTime::infinite(): to the end), with
/// `duration_s` the scenario's horizon (0: until its rounds), the first `warmup` rounds left out
/// of the means, `links` the network's link counters and `now` the engine's final time.
TrainingSummary summarize_training(const TrainingJob& job, const std::vector<LinkStats>& links, SimTime horizon,
                                   double duration_s, uint32_t warmup, SimTime now);

/// Broadcast rounds: bits per entry (mean over segments sent) and wire bytes per completed round.
struct BroadcastTotals {
  double bits_per_element = 0;
  double wire_bytes_per_round = 0;
};
BroadcastTotals broadcast_totals(const BroadcastSync& sync, uint32_t workers, uint32_t rounds_completed);

/// Bucketed rounds: wire bytes per completed round, and per measured round (rounds [warmup,
/// completed)) the time in the phases named `apart` (the weights of sharded runs) and the rest.
struct BucketTotals {
  double wire_bytes_per_round = 0;
  double grad_comm_s = 0;
  double weight_comm_s = 0;
};
BucketTotals bucket_totals(const BucketCollectiveSync& sync, uint32_t rounds_completed, uint32_t warmup,
                           const std::string& apart);

/// One stage's sync in one round of a 3D-parallel run.
struct StageSyncRow {
  StageRoundRecord record;
  double exposed_s = 0;  ///< max(0, sync end − the round's last backward end)
  int64_t rank = -1;     ///< low-rank schemes: the rank its sync used (-1: not low-rank)
};

/// A 3D-parallel run's rounds, summarized.
struct ParallelSummary {
  uint32_t rounds_completed = 0;
  uint32_t measured_rounds = 0;
  // Means over measured rounds.
  double round_s = 0, compute_s = 0, exposed_comm_s = 0;
  double wire_bytes_per_round = 0;
  std::vector<double> stage_sync_s;      ///< per stage: sync duration
  std::vector<double> stage_start_s;     ///< per stage: sync start − round start
  std::vector<double> stage_exposed_s;   ///< per stage: max(0, sync end − last backward end)
  std::vector<double> stage_rank;        ///< per stage: mean rank (low-rank schemes)
  std::vector<ParallelRoundRecord> rounds;
  std::vector<StageSyncRow> stages;
  double end_s = 0;
};

/// Summarizes a finished 3D-parallel job of `rounds` rounds, the first `warmup` (at most rounds −
/// 1) left out of the means; `rank_of(round, stage)` the rank a stage's sync used (-1: none).
ParallelSummary summarize_parallel(const ParallelTrainingJob& job, uint32_t rounds, uint32_t warmup, SimTime now,
                                   const std::function<int64_t(uint32_t, uint32_t)>& rank_of);

}  // namespace ccsim::sim
