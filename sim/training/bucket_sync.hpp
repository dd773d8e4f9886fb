#pragma once
/// \file
/// DDP-style gradient synchronization: layers are packed into buckets in backward order (the last
/// layer first, PyTorch DDP's bucket_cap), and a bucket's collective (e.g. a ring all-reduce, with
/// the compressor's metadata all-reduce before it) starts on the job's communication stream once
/// every worker has produced all of its gradients. Collectives run one at a time, in the order
/// their buckets became ready (one NCCL stream). When a bucket's collective ends, its layers'
/// updates have arrived at every worker.
///
/// The schedules come from a factory the application layer provides (it binds the compressor's
/// exact wire sizes); this file knows no compression format.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/kernel_cost.hpp"
#include "sim/phase_replay.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/training/training_job.hpp"
#include "traces/ddp_buckets.hpp"

namespace ccsim::sim {

/// Layers synchronized together (traces/ddp_buckets.hpp).
using GradientBucket = traces::GradientBucket;

/// DDP bucketing of the trace's layers (traces::make_ddp_buckets over their params).
std::vector<GradientBucket> make_buckets(const std::vector<TrainingLayer>& layers, uint64_t bucket_bytes,
                                         uint64_t first_bucket_bytes, uint32_t bytes_per_param);

/// One phase of a bucket's synchronization: a schedule generator and the binder setting its bytes.
struct SyncPhase {
  std::string name;
  std::unique_ptr<topo::ScheduleGenerator> generator;
  /// A fresh generator of the same schedule (optional: lets the sync fingerprint a phase before
  /// running it, see BucketCollectiveSync::replay_repeated_phases).
  std::function<std::unique_ptr<topo::ScheduleGenerator>()> make;
  ScheduleBinder binder;
  std::optional<KernelCostModel> costs;  ///< this phase's kernel costs (its scheme's); default: the sync's
};

/// Appends a compressed round's phases (algorithms/compressed_collective.hpp) as sync phases, each
/// charged by its scheme's kernel costs and named by its kind ("plan_local", "metadata",
/// "prepare", `collective`, "finish"), or all `collective` when `name_all` (so that
/// BucketRecord::time_in(collective) covers them: a sharded bucket's weights). Adds the round-op
/// kinds it appends to `charged` (kept sorted, no duplicates).
void append_sync_phases(std::span<const topo::SchedulePhase> phases, const std::string& collective, bool name_all,
                        const KernelCosts& costs, std::vector<SyncPhase>& out, std::vector<topo::KernelKind>& charged);

/// The phases synchronizing bucket `bucket` (of `params` elements) in `round`.
using BucketPhaseFactory = std::function<std::vector<SyncPhase>(uint32_t round, uint32_t bucket, uint64_t params)>;

/// Per bucket and round: when its collective ran.
struct BucketRecord {
  uint32_t round = 0;
  uint32_t bucket = 0;
  double ready_s = 0;   ///< all workers had produced it
  double start_s = 0;   ///< its collective started
  double end_s = 0;
  uint64_t wire_bytes = 0;
  std::vector<std::string> phases;   ///< SyncPhase::name of each phase, in order
  std::vector<double> phase_end_s;   ///< when each phase ended (the first started at start_s)
  /// Time spent in the phases not named `name` (e.g. gradient time = all but "weights").
  double time_except(const std::string& name) const;
  /// Time spent in the phases named `name`.
  double time_in(const std::string& name) const;
};

/// Bucketed collective synchronization.
class BucketCollectiveSync final : public GradientSync {
 public:
  BucketCollectiveSync(std::vector<GradientBucket> buckets, BucketPhaseFactory factory, KernelCostModel costs,
                       std::string description, uint64_t ecmp_salt = 0);
  ~BucketCollectiveSync() override;
  /// Replays a phase whose run would repeat an earlier one instead of simulating it again
  /// (sim/phase_replay.hpp): the second and later phases of a kind (their place in the bucket, name
  /// and bucket size) are fingerprinted first, and one whose fingerprint has a record is replayed:
  /// the same kernel periods, network counters and duration, every figure bit for bit. REQUIRES:
  /// the job's network carries nothing but this sync's phases (no tenants, no other job), records
  /// no link timeline, and the run has no horizon. The sync replays nothing when the job's
  /// compression kernels slow its compute (the order of those events with compute's matters).
  /// REQUIRES: the job has not started (call before TrainingJob::start).
  void replay_repeated_phases();
  /// Phases replayed and fingerprinted without a record.
  uint64_t replayed_phases() const { return memo_.hits(); }
  uint64_t fingerprint_misses() const { return memo_.misses(); }
  void attach(TrainingJob& job) override;
  void gradient_ready(uint32_t round, uint32_t worker, uint32_t layer) override;
  std::string describe() const override { return description_; }

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  const std::vector<BucketRecord>& records() const { return records_; }

 private:
  struct Recording;
  void try_start();
  void start_phase();
  const PhaseRecord* replayable(SyncPhase& p, const KernelCostModel& costs, RunnerOptions& ro);
  void replay_edges();
  void phase_end();
  void phase_done();

  std::vector<GradientBucket> buckets_;
  std::vector<uint32_t> bucket_of_layer_;
  std::vector<uint32_t> layers_in_bucket_;
  BucketPhaseFactory factory_;
  KernelCostModel costs_;
  std::string description_;
  uint64_t salt_;
  TrainingJob* job_ = nullptr;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> produced_;  // (round, bucket) → layer gradients produced
  std::deque<size_t> queue_;                                    // records waiting for the stream
  bool busy_ = false;
  size_t active_ = 0;                                           // record being synchronized
  std::vector<SyncPhase> phases_;
  size_t phase_ = 0;
  std::unique_ptr<ScheduleRunner> runner_;
  std::vector<BucketRecord> records_;
  bool replay_ = false;
  bool phase_ended_ = false;                // the phase ended in this instant (with replay)
  PhaseMemo memo_;
  std::unique_ptr<Recording> recording_;    // the running phase's, when it is recorded
  const PhaseRecord* replaying_ = nullptr;  // the phase being replayed
  SimTime replay_start_;
  size_t replay_next_ = 0;                  // its next kernel edge
};

}  // namespace ccsim::sim
