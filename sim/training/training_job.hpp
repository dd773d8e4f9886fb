#pragma once
/// \file
/// The worker model: data-parallel workers replaying a layer-wise compute trace round after round,
/// with a gradient-synchronization protocol (GradientSync) moving the gradients over the shared
/// flow network while they compute.
///
/// Each worker, in round r:
///  * forward, layer by layer in model order; layer l's forward (r >= 1) waits until the protocol
///    reports that layer's round r−1 update synchronized at this worker (AQGB Fig. 1: the next
///    round's forward overlaps the tail of the communication), then runs the layer's share of the
///    optimizer step (by parameters) and its forward;
///  * backward in reverse order; when layer l's backward ends its gradient is handed to the protocol
///    (GradientSync::gradient_ready), which synchronizes it (DDP buckets, broadcast, ...);
///  * every forward and backward time is scaled by the straggler model's factor for (r, worker);
///    while the worker's compression kernels run, compute runs at 1 / (1 + interference) speed.
///
/// Metrics, per round and worker, over the round's span [start of its first forward, start of the
/// next round's first forward) (the last round ends when its last update arrives):
///  * compute: time the worker computed; T_wait = span − compute (the worker is blocked only by
///    synchronization);
///  * T_comm: time the worker had communication in flight (sending or receiving);
///    T_overlap = |compute ∩ comm| (AQGB §3.2: overlap of T_comp and T_comm);
///  * ROW = T_overlap / T_wait (AQGB Eq. 1); per round, ROW(cluster) = min_w T_overlap / max_w
///    T_wait (Eq. 2);
///  * compression overhead = time its compression kernels ran while it did not compute; exposed
///    communication = T_wait − compression overhead (DynamiQ Fig. 6: compute + exposed
///    communication + compression overhead = the round's duration).

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/training/intervals.hpp"
#include "sim/training/stragglers.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// One layer (or block) of a worker's round.
struct TrainingLayer {
  std::string name;
  uint64_t params = 0;
  double forward_s = 0;
  double backward_s = 0;
  /// Bytes of the layer's output activation per micro-batch (what tensor parallelism all-reduces
  /// and pipeline parallelism sends to the next stage; ParallelTrainingJob only, 0: none).
  uint64_t activation_bytes = 0;
};

/// How long the job runs and how its compute behaves.
struct TrainingOptions {
  uint32_t rounds = 0;        ///< rounds to run (0: until the caller's horizon)
  double optimizer_s = 0;     ///< optimizer step per round, split over layers by parameters
  double interference = 0;    ///< compute slowdown while the worker's compression kernels run
};

/// One worker's round.
struct RoundMetrics {
  uint32_t round = 0;
  uint32_t worker = 0;
  double factor = 1;             ///< straggler factor
  double start_s = 0, end_s = 0;
  double compute_s = 0;
  double wait_s = 0;             ///< T_wait
  double comm_s = 0;             ///< T_comm
  double overlap_s = 0;          ///< T_overlap
  double compression_s = 0;      ///< compression kernels' busy time
  double compression_overhead_s = 0;
  double exposed_comm_s = 0;
  double duration() const { return end_s - start_s; }
  /// T_overlap / T_wait (infinity when the worker never waited).
  double row() const { return wait_s > 0 ? overlap_s / wait_s : std::numeric_limits<double>::infinity(); }
};

/// A decision of an adaptive controller (quantization ratio, bits, rank, ...), logged per round.
struct ControlDecision {
  uint32_t round = 0;
  uint32_t worker = 0;
  int32_t layer = -1;   ///< -1: not layer-specific
  double time_s = 0;
  std::string controller;
  std::string quantity;  ///< what was decided ("q", "bits", "rank", ...)
  double value = 0;
  std::string detail;    ///< the inputs it was decided from
};

class TrainingJob;

/// A gradient-synchronization protocol: receives each worker's gradients as backward produces them
/// and reports, per worker and layer, when the round's update has arrived.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  /// Called once by TrainingJob::start() before any gradient.
  virtual void attach(TrainingJob& job) = 0;
  /// `worker`'s backward of `layer` in `round` has just ended.
  virtual void gradient_ready(uint32_t round, uint32_t worker, uint32_t layer) = 0;
  /// One line for the summary.
  virtual std::string describe() const = 0;
};

/// Data-parallel workers running rounds of a trace over a shared engine and network.
class TrainingJob {
 public:
  /// Worker w runs on topology rank `worker_ranks[w]`. All references must outlive the job.
  TrainingJob(Engine& engine, FlowNetwork& network, const topo::Topology& topology, std::vector<topo::Rank> worker_ranks,
              std::vector<TrainingLayer> layers, const StragglerModel& stragglers, TrainingOptions options,
              GradientSync& sync);
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  /// Starts every worker's round 0 at the engine's current time.
  void start();
  /// Whether every round of TrainingOptions::rounds is synchronized everywhere.
  bool finished() const { return finished_; }
  /// Called when the job finishes (tenants stop looping).
  void on_finished(std::function<void()> cb) { on_finished_ = std::move(cb); }

  // ---- for protocols ----
  Engine& engine() { return engine_; }
  FlowNetwork& network() { return network_; }
  const topo::Topology& topology() const { return topology_; }
  uint32_t num_workers() const { return static_cast<uint32_t>(workers_.size()); }
  topo::Rank rank_of(uint32_t worker) const { return ranks_[worker]; }
  const std::vector<topo::Rank>& ranks() const { return ranks_; }
  const std::vector<TrainingLayer>& layers() const { return layers_; }
  /// `layer`'s update of `round` has arrived at `worker` (rounds in order per worker and layer).
  void synced(uint32_t round, uint32_t worker, uint32_t layer);
  /// Communication involving `worker` starts / ends (nested calls count).
  void comm_begin(uint32_t worker);
  void comm_end(uint32_t worker);
  /// Whether compression kernels slow the worker's compute (TrainingOptions::interference > 0).
  bool kernels_slow_compute() const { return options_.interference > 0; }
  /// A compression kernel on `worker`'s GPU starts / ends.
  void kernel_begin(uint32_t worker);
  void kernel_end(uint32_t worker);
  /// The backward time of `layer` the worker expects, from its previous round's straggler factor
  /// (what a profiler on the worker would have seen; the trace's time in round 0).
  double expected_backward_s(uint32_t worker, uint32_t layer) const;
  double expected_forward_s(uint32_t worker, uint32_t layer) const;
  /// The round the worker is in (forward or backward) and whether its backward has started.
  uint32_t current_round(uint32_t worker) const { return workers_[worker].round; }
  /// Whether `worker` has started the forward of `layer` in `round`.
  bool forward_started(uint32_t round, uint32_t worker, uint32_t layer) const;
  /// Appends to the controller log.
  void log(ControlDecision d) { decisions_.push_back(std::move(d)); }
  const std::vector<ControlDecision>& decisions() const { return decisions_; }

  // ---- results (call after the run) ----
  /// Per round and worker, rounds whose span ended by `until` (ordered by round, then worker).
  std::vector<RoundMetrics> round_metrics(SimTime until) const;
  /// When each round was synchronized on every worker (all layers), for rounds that were.
  std::vector<SimTime> round_completion() const;
  /// Per worker: busy compute intervals.
  const IntervalSet& compute_intervals(uint32_t worker) const { return workers_[worker].busy; }

 private:
  enum class Phase : uint8_t { kForward, kBackward, kDone };
  struct Worker {
    uint32_t round = 0;
    Phase phase = Phase::kForward;
    uint32_t layer = 0;
    bool running = false;
    double remaining = 0;  // seconds of work left at full speed
    SimTime last_update;
    SimTime op_start;
    EventId done_event;
    double factor = 1, prev_factor = 1;
    IntervalSet busy;
    ActivityCounter comm, kernels;
    std::vector<SimTime> round_start;     // first forward's start per round
    std::vector<SimTime> round_synced;    // last layer update's arrival per round
    std::vector<uint32_t> synced_layers;  // per round: layers whose update arrived
    std::vector<int64_t> synced_round;    // per layer: last round synchronized (-1 none)
  };

  double speed(const Worker& w) const;
  void advance(uint32_t w);
  void op_done(uint32_t w);
  void reschedule(uint32_t w);

  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  std::vector<topo::Rank> ranks_;
  std::vector<TrainingLayer> layers_;
  std::vector<double> optimizer_share_s_;
  const StragglerModel& stragglers_;
  TrainingOptions options_;
  GradientSync& sync_;
  std::vector<Worker> workers_;
  std::vector<uint32_t> round_done_workers_;  // per round: workers whose whole update arrived
  std::vector<SimTime> round_complete_;
  bool finished_ = false;
  std::function<void()> on_finished_;
  std::vector<ControlDecision> decisions_;
};

}  // namespace ccsim::sim
