#pragma once
/// \file
/// The timing interpreter: executes a schedule on the event engine. Transfers become flows on the
/// flow network along the topology's routes; kernel ops occupy their rank's compression stream
/// (one FIFO stream per rank) for the cost model's duration. An op starts when all its
/// dependencies have finished.
///
/// The schedule is pulled from its generator one step at a time: step k+1 is generated when the
/// first op of step k becomes ready (the generator contract in topology/schedule.hpp guarantees
/// nothing of step k+1 could run earlier), and a step is dropped once all its ops have finished.
/// Memory therefore follows the ops in flight, not the size of the collective.

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "topology/schedule.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// Totals (and, when recorded, the per-op timeline) of one schedule execution.
struct ScheduleTiming {
  SimTime start;
  SimTime end;
  std::vector<SimTime> op_start;      ///< per op id, only with RunnerOptions::record_ops
  std::vector<SimTime> op_end;
  std::vector<Duration> kernel_busy;  ///< per group rank: time its stream ran kernels
  uint64_t ops = 0;
  uint64_t transfers = 0;
  uint64_t wire_bytes = 0;
  uint32_t steps = 0;
  size_t peak_window_ops = 0;         ///< most ops held at once (generated, not yet dropped)
  Duration duration() const { return end - start; }
};

/// Sets `bytes` on the ops [first, end) of a schedule window (transfers: wire bytes, kernels:
/// memory traffic). The numerics side provides it from a compressor.
using ScheduleBinder = std::function<void(topo::Schedule&, topo::OpId first, topo::OpId end)>;

/// Binds uncompressed traffic: a transfer carries `bytes_per_element` bytes per element of its
/// messages' chunks; kernels move no bytes (free under any cost model's bytes term). Usable as a
/// ScheduleBinder through a lambda (raw fp32: bytes_per_element = 4).
void bind_uncompressed(topo::Schedule& schedule, topo::OpId first, topo::OpId end, uint32_t bytes_per_element);

/// How a schedule is placed and observed.
struct RunnerOptions {
  /// Group rank → topology rank (empty: identity).
  std::vector<topo::Rank> rank_map;
  /// Mixed into every flow's ECMP key (src, dst, transfer id, salt), so concurrent collectives of
  /// the same shape hash differently.
  uint64_t ecmp_salt = 0;
  /// Keep each op's start and end time (memory proportional to the whole schedule).
  bool record_ops = false;
  /// Called with (group rank, true) when a rank's compression stream starts a kernel of non-zero
  /// cost and (group rank, false) when it finishes it (the worker model tracks compression time
  /// and its interference with compute).
  std::function<void(uint32_t, bool)> on_kernel;
  /// Called with each step's ops [first, end) once they are generated and bound (before any runs).
  std::function<void(const topo::Schedule&, topo::OpId, topo::OpId)> on_step;
};

/// Where the runner sends transfer `id` from topology rank `src` to `dst`: its route (into `route`)
/// and its latency. `salt` is RunnerOptions::ecmp_salt.
inline Duration place_transfer(const topo::Topology& topology, topo::Rank src, topo::Rank dst, topo::OpId id,
                               uint64_t salt, std::vector<topo::LinkId>& route) {
  topology.route(src, dst, topo::ecmp_hash(src, dst, id ^ salt), route);
  return Duration::from_seconds(topology.latency_s(route));
}
/// How long kernel `op` of `schedule` occupies its rank's stream under `costs`.
inline Duration kernel_duration(const KernelCostModel& costs, const topo::Schedule& schedule, const topo::Op& op) {
  return costs.ideal() ? Duration::zero() : costs.cost(op.kernel, schedule.op_elements(op), op.bytes);
}

/// Runs one schedule inside an existing engine and network (so several can share them).
class ScheduleRunner {
 public:
  /// All references must outlive the runner.
  ScheduleRunner(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                 topo::ScheduleGenerator& generator, ScheduleBinder binder, const KernelCostModel& costs,
                 RunnerOptions options = {});

  /// Starts at the engine's current time; `on_done` runs when the last op finishes.
  void start(std::function<void(const ScheduleTiming&)> on_done = nullptr);
  const ScheduleTiming& timing() const { return timing_; }
  bool done() const { return done_; }
  const topo::Schedule& window() const { return sched_; }

 private:
  struct OpState {
    uint32_t pending = 0;
    uint32_t step = 0;
    uint32_t succ_head = UINT32_MAX;  // successor list in succ_pool_
    bool finished = false;
    bool anchored = false;
  };
  struct SuccNode {
    topo::OpId to;
    uint32_t next;
  };
  struct Step {
    topo::OpId first;
    topo::OpId end;
    uint64_t unfinished;
  };
  struct Stream {
    std::deque<topo::OpId> queue;  // ready kernels
    bool busy = false;
  };

  OpState& state(topo::OpId id) { return states_[id - states_base_]; }
  bool finished(topo::OpId id) { return id < states_base_ || state(id).finished; }
  bool generate_step();
  void ensure_generated(uint32_t step);
  void make_ready(topo::OpId id);
  void dispatch(topo::OpId id);
  void pump_stream(uint32_t rank);
  void finish(topo::OpId id);
  void drain();
  void retire();
  topo::Rank place(uint32_t r) const { return options_.rank_map.empty() ? r : options_.rank_map[r]; }

  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  topo::ScheduleGenerator& generator_;
  ScheduleBinder binder_;
  KernelCostModel costs_;
  RunnerOptions options_;
  topo::Schedule sched_;
  std::vector<OpState> states_;
  topo::OpId states_base_ = 0;
  std::vector<SuccNode> succ_pool_;
  std::vector<uint32_t> succ_free_;
  std::deque<Step> steps_;
  uint32_t steps_generated_ = 0;
  topo::OpId last_step_first_ = 0;  // first op of the last generated step (anchoring check)
  bool generator_done_ = false;
  std::vector<Stream> streams_;
  std::vector<topo::OpId> ready_;  // min-heap of op ids
  bool draining_ = false;
  uint64_t unfinished_ = 0;
  bool done_ = false;
  std::vector<topo::LinkId> route_;
  ScheduleTiming timing_;
  std::function<void(const ScheduleTiming&)> on_done_;
};

/// A generator replaying an already built (and bound) schedule as one step.
class ScheduleReplay final : public topo::ScheduleGenerator {
 public:
  explicit ScheduleReplay(const topo::Schedule& schedule) : schedule_(schedule) {}
  topo::Schedule begin() override;
  bool next_step(topo::Schedule& out) override;

 private:
  const topo::Schedule& schedule_;
  bool emitted_ = false;
};

/// Convenience: a fresh engine and network over `topology`, one bound schedule, run to completion,
/// with the per-op timeline recorded.
ScheduleTiming simulate_schedule(const topo::Topology& topology, const topo::Schedule& schedule,
                                 const KernelCostModel& costs);

/// The topology's links as the network model's link specs.
std::vector<LinkSpec> link_specs(const topo::Topology& topology);

}  // namespace ccsim::sim
