#pragma once
/// \file
/// The timing interpreter: executes a bound schedule on the event engine. Transfers become flows
/// on the flow network along the topology's routes; kernel ops occupy their rank's compression
/// stream (one FIFO stream per rank) for the cost model's duration. An op starts when all its
/// dependencies have finished.

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/engine.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "topology/schedule.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// Per-op timeline and totals of one schedule execution.
struct ScheduleTiming {
  SimTime start;
  SimTime end;
  std::vector<SimTime> op_start;
  std::vector<SimTime> op_end;
  std::vector<Duration> kernel_busy;  ///< per rank: time its stream ran kernels
  Duration duration() const { return end - start; }
};

/// Runs one schedule inside an existing engine and network (so several can share them).
class ScheduleRunner {
 public:
  /// All references must outlive the runner. REQUIRES: `schedule` is bound (op bytes set).
  ScheduleRunner(Engine& engine, FlowNetwork& network, const topo::Topology& topology, const topo::Schedule& schedule,
                 const KernelCostModel& costs);

  /// Starts at the engine's current time; `on_done` runs when the last op finishes.
  void start(std::function<void(const ScheduleTiming&)> on_done = nullptr);
  const ScheduleTiming& timing() const { return timing_; }
  bool done() const { return remaining_ == 0; }

 private:
  void ready(topo::OpId id);
  void finish(topo::OpId id);
  void pump_stream(uint32_t rank);

  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  const topo::Schedule& schedule_;
  KernelCostModel costs_;
  std::vector<uint32_t> pending_deps_;
  std::vector<uint32_t> succ_begin_;  // CSR of successors
  std::vector<topo::OpId> succ_;
  struct Stream {
    std::vector<topo::OpId> queue;  // FIFO of ready kernels
    size_t head = 0;
    bool busy = false;
  };
  std::vector<Stream> streams_;
  size_t remaining_ = 0;
  ScheduleTiming timing_;
  std::function<void(const ScheduleTiming&)> on_done_;
};

/// Convenience: a fresh engine and network over `topology`, one schedule, run to completion.
ScheduleTiming simulate_schedule(const topo::Topology& topology, const topo::Schedule& schedule,
                                 const KernelCostModel& costs);

/// The topology's links as the network model's link specs.
std::vector<LinkSpec> link_specs(const topo::Topology& topology);

}  // namespace ccsim::sim
