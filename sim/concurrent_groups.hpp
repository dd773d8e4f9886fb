#pragma once
/// \file
/// The timing of one collective round on concurrent groups: every group of a parallelism dimension
/// (or the one group of all ranks) runs the same phases at once over one engine and one flow
/// network, phase after phase, as `ccsim run` times a compressed collective (the phases come from
/// algorithms/compressed_collective.hpp; this file knows no compression format).
///
/// A phase starts on every group at the engine's current time and the next phase starts once it
/// has ended on all of them. Group g's ranks are placed on its topology ranks, and its flows carry
/// ECMP salt g, so concurrent collectives of one shape hash differently.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/schedule.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// What a phase is in its round (how its time is reported).
enum class PhaseRole : uint8_t {
  kPlanning,    ///< the metadata phase and the round ops before it: plan time
  kPrepare,     ///< round ops before the collective
  kCollective,  ///< the collective itself
  kFinish,      ///< round ops after it
};

/// A phase every group runs: a fresh generator per group, the binder of its bytes, its kernels' costs.
struct GroupPhase {
  PhaseRole role = PhaseRole::kCollective;
  bool round_ops = false;  ///< one op per rank on its whole tensor (counted as round-op time)
  std::function<std::unique_ptr<topo::ScheduleGenerator>()> make;
  ScheduleBinder binder;
  KernelCostModel costs;
};

/// A round's phases for concurrent groups, each charged by its scheme's kernel costs.
std::vector<GroupPhase> group_phases(std::span<const topo::SchedulePhase> phases, const KernelCosts& costs);

/// Groups running phases at once on one engine and network.
class ConcurrentGroups {
 public:
  /// `groups[g]` maps group g's ranks to topology ranks. References must outlive the object.
  ConcurrentGroups(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                   std::vector<std::vector<topo::Rank>> groups);

  size_t size() const { return groups_.size(); }
  Engine& engine() { return engine_; }
  /// Runs `phase` on every group until all have ended; each group's runner (kept alive with the
  /// object), in group order.
  std::vector<const ScheduleRunner*> run(const GroupPhase& phase);

 private:
  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  std::vector<std::vector<topo::Rank>> groups_;
  std::vector<std::unique_ptr<topo::ScheduleGenerator>> generators_;
  std::vector<std::unique_ptr<ScheduleRunner>> runners_;
};

/// What one round took.
struct RoundTiming {
  double time_s = 0;      ///< start of the round to the slowest group's end (its finish ops included)
  double time_min_s = 0;  ///< the fastest group's
  double plan_time_s = 0;            ///< the planning phases (0: none)
  double kernel_time_s = 0;          ///< busiest rank's time in the collective's kernels
  double round_kernel_time_s = 0;    ///< busiest rank's time in round ops, over the round
  uint64_t wire_bytes = 0;           ///< the collective's transfers, all groups
  uint64_t transfers = 0;
};

/// Runs `phases` in order on `groups` (REQUIRES: exactly one kCollective phase) from the engine's
/// current time. A group's time is from the round's start to the end of its collective plus the
/// finish phases' time (they run on every group at once after the last collective ends). When the
/// round runs past the end of simulated time (Engine::passed_horizon) it stops there and returns
/// no timing; the caller reports past_horizon_error.
RoundTiming time_round(ConcurrentGroups& groups, std::span<const GroupPhase> phases);

}  // namespace ccsim::sim
