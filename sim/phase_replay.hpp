#pragma once
/// \file
/// Replaying a schedule's run instead of simulating it again. A schedule run on an idle network
/// that nothing else uses, whose kernels slow nothing down, is a function of what the runner sees
/// of it: the ops of each step in order, each transfer's route, latency and bytes, each kernel's
/// rank and duration, and the dependencies. The event engine's clock and the flow network's
/// arithmetic use differences of integer picoseconds only, so a run started later is the same run
/// shifted in time. Its effects are what a later run of the same schedule must reproduce:
///  * its duration (when the runner's completion fires) and wire bytes;
///  * each rank's busy periods of non-zero-cost kernels (the worker's compression time), as the
///    union of its kernels' [start, end), since a rank's stream runs one kernel at a time;
///  * the network's counters: bytes per link (sums of integer flow sizes, exact in doubles below
///    2^53), busy picoseconds, peak sharing and the solver's counters (NetworkDelta);
///  * the stale completion batches it leaves pending, whose events move the clock when they fire.
/// The caller makes a run repeatable (BucketCollectiveSync): the network's pending batches are
/// detached before it starts (FlowNetwork::detach_batches), and it ends after every other event of
/// its last instant, where a replayed run ends too.
///
/// A PhaseFingerprint hashes what the runner sees, step by step, into 128 bits (two 64-bit lanes;
/// two different runs collide with probability about 2^-128); PhaseMemo keeps the effects of runs
/// by fingerprint (PhaseRecord) and decides which phases are worth fingerprinting before they run.

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/schedule.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// 128 bits identifying a run's inputs.
struct PhaseDigest {
  uint64_t a = 0, b = 0;
  friend bool operator==(const PhaseDigest&, const PhaseDigest&) = default;
};

/// Hashes the steps of a schedule as ScheduleRunner would place and time them.
class PhaseFingerprint {
 public:
  /// `rank_map`, `salt` and `costs` as the runner gets them (RunnerOptions, its cost model).
  PhaseFingerprint(const topo::Topology& topology, std::vector<topo::Rank> rank_map, uint64_t salt,
                   const KernelCostModel& costs);
  /// Adds the ops [first, end) of `schedule`, one generated (and bound) step.
  void step(const topo::Schedule& schedule, topo::OpId first, topo::OpId end);
  PhaseDigest digest() const;

 private:
  void add(uint64_t word);
  topo::Rank place(uint32_t r) const { return rank_map_.empty() ? r : rank_map_[r]; }

  const topo::Topology& topology_;
  std::vector<topo::Rank> rank_map_;
  uint64_t salt_;
  KernelCostModel costs_;
  std::vector<topo::LinkId> route_;
  uint64_t a_ = 0x6A09E667F3BCC908ull, b_ = 0xBB67AE8584CAA73Bull, n_ = 0;
};

/// Generates, binds and fingerprints a whole schedule a step at a time (the generator is used up;
/// memory follows one step).
PhaseDigest fingerprint_schedule(topo::ScheduleGenerator& generator, const ScheduleBinder& binder,
                                 PhaseFingerprint fingerprint);

/// A rank's kernels starting (`up`) or ending, `t_ps` after the run's start.
struct KernelEdge {
  int64_t t_ps = 0;
  uint32_t rank = 0;
  bool up = false;
};

/// The effects of one run of a schedule (see the file comment).
struct PhaseRecord {
  PhaseDigest digest;
  Duration duration;
  uint64_t wire_bytes = 0;
  std::vector<KernelEdge> edges;  ///< in time order; per rank, disjoint and non-touching periods
  NetworkDelta network;
  /// The stale completion batches the run left pending, after its start: a replay fires as many
  /// empty events at those times, so the clock ends where the run's would.
  std::vector<int64_t> stale_ps;
};

/// Collects a run's kernel periods from RunnerOptions::on_kernel calls.
class KernelPeriods {
 public:
  KernelPeriods(SimTime start, uint32_t ranks) : start_(start), open_(ranks, -1), spans_(ranks) {}
  void on_kernel(uint32_t rank, bool begin, SimTime now);
  /// The run's start, from which the edges' times count.
  SimTime start() const { return start_; }
  /// Every period's edges in time order. REQUIRES: no kernel running.
  std::vector<KernelEdge> edges() const;
  size_t periods() const { return periods_; }

 private:
  SimTime start_;
  std::vector<int64_t> open_;  // per rank: start of the running kernel (-1: none)
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans_;
  size_t periods_ = 0;
};

/// The records of one network's runs, and which phases to fingerprint before running them.
/// A phase kind (the caller's key, e.g. the phase's place in a bucket and the bucket's size) is
/// fingerprinted the second time it comes and after, as long as its fingerprints have missed fewer
/// than four times for each time they found a record, plus four (a fingerprint costs a fraction of
/// a run; phases that change every time stop paying for it, and are no longer recorded).
class PhaseMemo {
 public:
  /// Records hold at most this many bytes in all (kernel edges, link deltas, stale batches); runs
  /// beyond are not kept.
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  explicit PhaseMemo(size_t max_bytes = kMaxBytes) : max_bytes_(max_bytes) {}

  /// Whether to fingerprint a phase of kind `kind` before running it.
  bool worth_checking(uint64_t kind) const;
  /// Whether fingerprinting `kind` was given up (its runs are no longer worth recording either).
  bool given_up(uint64_t kind) const;
  /// The record of `digest`, or nullptr. Counts a hit or a miss for `kind`.
  const PhaseRecord* find(uint64_t kind, const PhaseDigest& digest);
  /// Notes that a phase of `kind` ran (so the next one is worth checking).
  void ran(uint64_t kind) { kinds_[kind].runs++; }
  /// Keeps `record` if there is room.
  void keep(PhaseRecord record);
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Kind {
    uint32_t runs = 0, hits = 0, misses = 0;
  };
  struct DigestHash {
    size_t operator()(const PhaseDigest& d) const { return static_cast<size_t>(d.a ^ (d.b * 0x9E3779B97F4A7C15ull)); }
  };
  std::unordered_map<uint64_t, Kind> kinds_;
  std::unordered_map<PhaseDigest, std::unique_ptr<PhaseRecord>, DigestHash> records_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace ccsim::sim
