#pragma once
/// \file
/// The 3D-parallel (tensor x pipeline x data) training-round model: a layer-wise compute trace
/// split into pipeline stages, each stage run by a tensor-parallel group, replicated over
/// data-parallel pipeline replicas, with each stage's gradients synchronized over its DP groups
/// by a caller-provided protocol (the same SyncPhase schedules BucketCollectiveSync runs).
///
/// Layout: topo::ParallelGroups (tp, pp, dp); rank r of the layout is topology rank r. A *stage
/// replica* (d, s) is the TP group {(t, d, s) : t < tp} of pipeline replica d and stage s; its tp
/// ranks act in lock step (one compute stream per stage replica). Worker index (stragglers):
/// w = d * pp + s.
///
/// Per round (training iteration) r:
///  * Compute. The trace's forward_s / backward_s are per micro-batch for the whole layer on one
///    device; a TP rank computes time / tp, scaled by the straggler factor of (r, w). Stage s
///    holds the contiguous layers [stage_starts[s], stage_starts[s+1]).
///  * Pipeline. Each replica runs, per stage, the op order pipeline_order(kind, pp, m) (GPipe or
///    1F1B, pipeline_schedule.hpp) with exactly its dependencies: F(s, i) needs F(s-1, i)'s
///    activation to have arrived, B(s, i) needs F(s, i) and B(s+1, i)'s gradient to have arrived,
///    and every op the previous op of its stage.
///  * An op F(s, i) (B(s, i)) runs the stage's layers in forward (reverse) order; per layer:
///    compute time / tp, then, when tp > 1 and the layer has params and activation_bytes > 0,
///    `tp_allreduces` sequential ring all-reduces (topo::make_ring, raw fp32, activation_bytes / 4
///    elements) among the stage replica's TP ranks, as real flows, blocking the stage's compute
///    (Megatron-LM: two all-reduces per transformer layer in forward and two in backward).
///  * Between stages. When F(s, i) ends, the activation_bytes of stage s's last layer go to stage
///    s+1 as tp flows (t, d, s) -> (t, d, s+1) of activation_bytes / tp each (Megatron's
///    scatter/gather); F(s+1, i) may start when all have arrived. When B(s, i) ends, the gradient
///    of stage s's input (the activation_bytes of stage s-1's last layer) goes back the same way
///    to stage s-1. A zero-byte transfer arrives at once.
///  * Data-parallel sync. When stage s has ended its last backward in every replica (the max over
///    d), its sync starts: for each TP index t, the DP group {(t, d, s) : d} runs the phases the
///    factory returns for (r, s, t, ceil(stage params / tp)) one after another through
///    ScheduleRunner (rank_map = the group's topology ranks, the job's KernelCostModel). The tp
///    groups run concurrently and share the network. The factory is called at that moment, so a
///    controller may first read stage_records(). With dp == 1 (or no phases) it is instantaneous.
///    Every stage's params go through its sync exactly once per round.
///  * Next round. Stage s's round r+1 opens, in every replica, optimizer share(s) after its
///    round-r sync ended (optimizer_s split over stages by params, evenly when no params); its
///    first op then still waits for its inputs. The optimizer is not counted as compute.
///
/// Observations, per round and stage (StageRoundRecord) and per round (ParallelRoundRecord):
///  * backward_end_s: last backward over replicas; sync_start_s / sync_end_s; exposed
///    communication of a round = max(0, max_s sync_end − max_s backward_end);
///  * compute_busy_s: mean over replicas of the time the stage replica ran F/B ops in the round
///    (layer compute plus its blocking TP all-reduces); micro_backward_s: mean B op duration.
///
/// Determinism: events are created in a fixed order (stages, replicas and TP indices ascending);
/// no unordered container is iterated; equal inputs give identical event orders.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "sim/engine.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/pipeline_schedule.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/training_job.hpp"
#include "topology/parallel_groups.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// Splits `layers` into `stages` contiguous, non-empty stages balancing forward + backward time,
/// and returns each stage's first layer (the first is 0). Rule: with T the total time and P(k) the
/// time of layers [0, k), stage s (s >= 1) starts at the k in [start(s-1) + 1, n - (stages - s)]
/// minimizing |P(k) − s·T / stages| (the smallest such k on ties), chosen for s = 1, 2, ... in turn.
/// Errors (invalid_argument): stages == 0; fewer layers than stages.
Result<std::vector<uint32_t>> split_stages(const std::vector<TrainingLayer>& layers, uint32_t stages);

/// How the job runs.
struct ParallelJobOptions {
  uint32_t rounds = 1;                           ///< rounds to run; REQUIRES >= 1
  uint32_t micro_batches = 1;                    ///< m per round; REQUIRES >= 1
  PipelineKind schedule = PipelineKind::kGPipe;  ///< per-stage op order
  uint32_t tp_allreduces = 2;                    ///< TP all-reduces per layer and op (Megatron: 2)
  double optimizer_s = 0;                        ///< optimizer step per round, split over stages by params
  KernelCostModel kernel_costs;                  ///< for the DP sync phases' kernels
  uint64_t ecmp_salt = 0;                        ///< mixed into every flow's ECMP key
  bool record_ops = false;                       ///< keep every F/B op's timing (op_records())
};

/// The phases synchronizing stage `stage`'s gradient shard `tp_index` (of `params` elements) in
/// `round` over its DP group (group rank d = pipeline replica d). REQUIRES: every phase's
/// schedule spans dp ranks (checked by ScheduleRunner). No phases: that group syncs instantly.
using StagePhaseFactory =
    std::function<std::vector<SyncPhase>(uint32_t round, uint32_t stage, uint32_t tp_index, uint64_t params)>;

/// One stage in one round (fields fill in as they happen; all final once `complete`).
struct StageRoundRecord {
  uint32_t round = 0;
  uint32_t stage = 0;
  double backward_end_s = 0;   ///< last backward over replicas ended
  double sync_start_s = 0;
  double sync_end_s = 0;
  uint64_t sync_wire_bytes = 0;  ///< over all TP groups' phases
  double compute_busy_s = 0;     ///< mean over replicas of F/B op time in the round
  double micro_backward_s = 0;   ///< mean over the round's B ops of their duration (incl. TP all-reduces)
  bool backward_done = false;    ///< backward_end_s, compute_busy_s, micro_backward_s are final
  bool complete = false;         ///< the sync ended
};

/// One round of the whole job.
struct ParallelRoundRecord {
  uint32_t round = 0;
  double start_s = 0;         ///< first F of stage 0 over replicas
  double backward_end_s = 0;  ///< max over stages
  double sync_end_s = 0;      ///< max over stages
  double end_s = 0;           ///< next round's start; last round: max over stages of sync end + optimizer share
  double exposed_comm_s = 0;  ///< max(0, sync_end − backward_end)
  double compute_s = 0;       ///< max over stages of compute_busy_s
  double duration() const { return end_s - start_s; }
};

/// One F or B op of one stage replica (ParallelJobOptions::record_ops).
struct ParallelOpRecord {
  uint32_t round = 0;
  uint32_t replica = 0;  ///< d
  uint32_t stage = 0;
  PipelineOp op{PipelineOp::kForward, 0};
  double start_s = 0, end_s = 0;
};

/// Pipeline replicas of TP groups running rounds of a trace, with per-stage DP synchronization.
/// Single-threaded: all methods run on the engine's thread.
class ParallelTrainingJob {
 public:
  /// Validates and builds a job; stage s holds layers [stage_starts[s], stage_starts[s+1]).
  /// All references must outlive the job. Errors (invalid_argument, naming the field): a layout
  /// larger than the topology; no layers; stage_starts not of size pp, not starting at 0, not
  /// strictly increasing below the layer count (so fewer layers than stages fails); rounds or
  /// micro_batches 0; a negative or non-finite time; a TP-all-reduced layer with fewer than
  /// 4·tp activation bytes; no factory while dp > 1.
  /// check(): the same errors but the factory's, without making anything.
  static Status check(const topo::Topology& topology, const topo::ParallelGroups& groups,
                      const std::vector<TrainingLayer>& layers, const std::vector<uint32_t>& stage_starts,
                      const ParallelJobOptions& options);
  static Result<std::unique_ptr<ParallelTrainingJob>> make(Engine& engine, FlowNetwork& network,
                                                           const topo::Topology& topology,
                                                           const topo::ParallelGroups& groups,
                                                           std::vector<TrainingLayer> layers,
                                                           std::vector<uint32_t> stage_starts,
                                                           const StragglerModel& stragglers,
                                                           ParallelJobOptions options, StagePhaseFactory factory);
  ParallelTrainingJob(const ParallelTrainingJob&) = delete;
  ParallelTrainingJob& operator=(const ParallelTrainingJob&) = delete;
  ~ParallelTrainingJob();

  /// Starts round 0 on every stage replica at the engine's current time. Call once.
  void start();
  /// Whether every round has synchronized (and run its optimizer step) on every stage.
  bool finished() const { return finished_; }
  /// Called once when the job finishes.
  void on_finished(std::function<void()> cb) { on_finished_ = std::move(cb); }

  // ---- shape ----
  Engine& engine() { return engine_; }
  FlowNetwork& network() { return network_; }
  const topo::Topology& topology() const { return topology_; }
  const topo::ParallelGroups& groups() const { return groups_; }
  const std::vector<TrainingLayer>& layers() const { return layers_; }
  const ParallelJobOptions& options() const { return options_; }
  const PipelineOrder& order() const { return order_; }
  uint32_t num_stages() const { return pp_; }
  /// First layer of each stage.
  const std::vector<uint32_t>& stage_starts() const { return stage_starts_; }
  /// Params of stage `s` (all its layers, before the TP split).
  uint64_t stage_params(uint32_t s) const { return stage_params_[s]; }
  /// The stage's optimizer share, seconds.
  double optimizer_share_s(uint32_t s) const { return optimizer_share_s_[s]; }

  // ---- observations (valid during the run) ----
  /// Per round and stage, index round * pp + stage; a round's records exist from the moment the
  /// round opens on any stage and fill in as they happen (see StageRoundRecord's flags).
  const std::vector<StageRoundRecord>& stage_records() const { return stage_records_; }
  /// Mean duration of every B op observed so far on `stage` (all rounds and replicas; 0 before any).
  double mean_micro_backward_s(uint32_t stage) const;
  /// Completed rounds (whose end is known), in order.
  std::vector<ParallelRoundRecord> round_records() const;
  /// Every F/B op, in completion order (empty unless options().record_ops).
  const std::vector<ParallelOpRecord>& op_records() const { return op_records_; }
  /// Appends to the controller log.
  void log(ControlDecision d) { decisions_.push_back(std::move(d)); }
  const std::vector<ControlDecision>& decisions() const { return decisions_; }

 private:
  struct Replica;
  struct StageSync;

  ParallelTrainingJob(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                      const topo::ParallelGroups& groups, std::vector<TrainingLayer> layers,
                      std::vector<uint32_t> stage_starts, PipelineOrder order, const StragglerModel& stragglers,
                      ParallelJobOptions options, StagePhaseFactory factory);

  StageRoundRecord& record(uint32_t round, uint32_t stage);
  Replica& replica(uint32_t d, uint32_t s) { return *replicas_[size_t{s} * dp_ + d]; }
  uint32_t stage_end(uint32_t s) const {
    return s + 1 < pp_ ? stage_starts_[s + 1] : static_cast<uint32_t>(layers_.size());
  }
  bool tp_allreduced(uint32_t layer) const;
  void open_round(Replica& rep, uint32_t round);
  void try_advance(Replica& rep);
  void run_layer(Replica& rep);
  void run_allreduce(Replica& rep);
  void op_done(Replica& rep);
  void send(Replica& from, uint32_t to_stage, uint64_t bytes, PipelineOp::Kind kind, uint32_t micro_batch);
  void arrived(uint32_t d, uint32_t s, PipelineOp::Kind kind, uint32_t micro_batch, uint32_t round);
  void replica_round_done(Replica& rep);
  void start_sync(uint32_t s, uint32_t round);
  void start_phase(uint32_t s, uint32_t t);
  void phase_done(uint32_t s, uint32_t t);
  void group_done(uint32_t s);
  void sync_done(uint32_t s);
  void stage_optimized(uint32_t s, uint32_t round);

  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  topo::ParallelGroups groups_;
  std::vector<TrainingLayer> layers_;
  std::vector<uint32_t> stage_starts_;
  PipelineOrder order_;
  const StragglerModel& stragglers_;
  ParallelJobOptions options_;
  StagePhaseFactory factory_;
  uint32_t tp_ = 1, pp_ = 1, dp_ = 1;
  std::vector<uint64_t> stage_params_;
  std::vector<double> optimizer_share_s_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // [stage * dp + d]
  std::vector<std::unique_ptr<StageSync>> syncs_;   // per stage
  std::vector<uint32_t> replicas_done_;             // per stage: replicas done with the current round
  std::vector<Duration> stage_busy_;                // per stage: summed busy time of the current round
  std::vector<Duration> stage_backward_sum_;        // per stage: summed B op time of the current round
  std::vector<Duration> backward_sum_;              // per stage: all rounds
  std::vector<uint64_t> backward_ops_;              // per stage: all rounds
  std::vector<StageRoundRecord> stage_records_;
  std::vector<double> round_start_s_;               // per round: first F of stage 0 over replicas
  std::vector<double> optimizer_end_s_;             // per stage: last round's sync end + optimizer share
  uint32_t stages_finished_ = 0;
  uint64_t flow_seq_ = 0;
  bool started_ = false;
  bool finished_ = false;
  std::function<void()> on_finished_;
  std::vector<ParallelOpRecord> op_records_;
  std::vector<ControlDecision> decisions_;
};

}  // namespace ccsim::sim
