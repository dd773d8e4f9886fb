#include "sim/concurrent_groups.hpp"

#include <algorithm>
#include <limits>

#include "sim/base/check.hpp"

namespace ccsim::sim {

std::vector<GroupPhase> group_phases(std::span<const topo::SchedulePhase> phases, const KernelCosts& costs) {
  std::vector<GroupPhase> out;
  for (const topo::SchedulePhase& p : phases) {
    PhaseRole role = PhaseRole::kCollective;
    if (p.kind == topo::PhaseKind::kPlanLocal || p.kind == topo::PhaseKind::kMetadata) role = PhaseRole::kPlanning;
    if (p.kind == topo::PhaseKind::kPrepare) role = PhaseRole::kPrepare;
    if (p.kind == topo::PhaseKind::kFinish) role = PhaseRole::kFinish;
    out.push_back({role, topo::is_round_op_phase(p.kind), p.make, p.bind, costs.scheme(p.scheme, p.params)});
  }
  return out;
}

ConcurrentGroups::ConcurrentGroups(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                                   std::vector<std::vector<topo::Rank>> groups)
    : engine_(engine), network_(network), topology_(topology), groups_(std::move(groups)) {}

std::vector<const ScheduleRunner*> ConcurrentGroups::run(const GroupPhase& phase) {
  const size_t first = runners_.size();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    generators_.push_back(phase.make());
    RunnerOptions ro;
    ro.rank_map = groups_[gi];
    ro.ecmp_salt = gi;
    runners_.push_back(std::make_unique<ScheduleRunner>(engine_, network_, topology_, *generators_.back(),
                                                        phase.binder, phase.costs, ro));
    runners_.back()->start();
  }
  engine_.run();
  if (engine_.passed_horizon()) return {};  // the caller reports it (Engine::passed_horizon)
  // The runners themselves, not a view of `runners_`: a later call's push_back may reallocate it.
  std::vector<const ScheduleRunner*> ran;
  for (size_t k = first; k < runners_.size(); ++k) {
    CCSIM_CHECK(runners_[k]->done(), "schedule {} did not complete", runners_[k]->window().name());
    ran.push_back(runners_[k].get());
  }
  return ran;
}

RoundTiming time_round(ConcurrentGroups& groups, std::span<const GroupPhase> phases) {
  RoundTiming out;
  Engine& engine = groups.engine();
  std::vector<Duration> round_busy;  // per group and group rank
  std::vector<const ScheduleRunner*> main;
  const SimTime start = engine.now();
  SimTime main_end = start;
  double finish_s = 0;
  for (const GroupPhase& phase : phases) {
    const std::vector<const ScheduleRunner*> ran = groups.run(phase);
    if (engine.passed_horizon()) return out;  // no timing: the caller reports the horizon
    if (phase.round_ops) {
      for (size_t gi = 0; gi < ran.size(); ++gi) {
        const std::vector<Duration>& busy = ran[gi]->timing().kernel_busy;
        if (round_busy.size() < ran.size() * busy.size()) round_busy.assign(ran.size() * busy.size(), Duration::zero());
        for (size_t rk = 0; rk < busy.size(); ++rk) round_busy[gi * busy.size() + rk] += busy[rk];
      }
    }
    if (phase.role == PhaseRole::kPlanning) out.plan_time_s = (engine.now() - start).seconds();
    if (phase.role == PhaseRole::kCollective) {
      main = ran;
      main_end = engine.now();
    }
    if (phase.role == PhaseRole::kFinish) finish_s = (engine.now() - main_end).seconds();
  }
  CCSIM_CHECK(!main.empty(), "a round without a collective phase");
  for (const Duration d : round_busy) out.round_kernel_time_s = std::max(out.round_kernel_time_s, d.seconds());
  out.time_min_s = std::numeric_limits<double>::infinity();
  for (const ScheduleRunner* run : main) {
    const ScheduleTiming& t = run->timing();
    out.time_s = std::max(out.time_s, (t.end - start).seconds() + finish_s);
    out.time_min_s = std::min(out.time_min_s, (t.end - start).seconds() + finish_s);
    out.wire_bytes += t.wire_bytes;
    out.transfers += t.transfers;
    for (const Duration d : t.kernel_busy) out.kernel_time_s = std::max(out.kernel_time_s, d.seconds());
  }
  return out;
}

}  // namespace ccsim::sim
