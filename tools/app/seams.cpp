#include "tools/app/seams.hpp"

#include <algorithm>

namespace ccsim::app {
namespace {

sim::ScheduleBinder binder_of(const algo::LoweredPhase& phase) {
  return [phase](topo::Schedule& s, topo::OpId first, topo::OpId end) { phase.bind(s, first, end); };
}

bool round_op_phase(algo::PhaseKind kind) {
  return kind == algo::PhaseKind::kPlanLocal || kind == algo::PhaseKind::kPrepare ||
         kind == algo::PhaseKind::kFinish;
}

topo::KernelKind round_op_kind(algo::PhaseKind kind) {
  return kind == algo::PhaseKind::kPlanLocal ? topo::KernelKind::kPlanLocal
         : kind == algo::PhaseKind::kPrepare ? topo::KernelKind::kPrepare
                                             : topo::KernelKind::kFinish;
}

}  // namespace

sim::KernelCostModel phase_costs(const algo::LoweredPhase& phase, const sim::KernelCosts& costs) {
  return costs.scheme(std::string(phase.codec->name()), phase.codec->params());
}

std::vector<sim::GroupPhase> group_phases(const algo::CompressedCollective& lowering, const sim::KernelCosts& costs) {
  std::vector<sim::GroupPhase> out;
  for (const algo::LoweredPhase& p : lowering.phases()) {
    sim::PhaseRole role = sim::PhaseRole::kCollective;
    if (p.kind == algo::PhaseKind::kPlanLocal || p.kind == algo::PhaseKind::kMetadata) role = sim::PhaseRole::kPlanning;
    if (p.kind == algo::PhaseKind::kPrepare) role = sim::PhaseRole::kPrepare;
    if (p.kind == algo::PhaseKind::kFinish) role = sim::PhaseRole::kFinish;
    out.push_back({role, round_op_phase(p.kind), p.make, binder_of(p), phase_costs(p, costs)});
  }
  return out;
}

void append_sync_phases(const algo::CompressedCollective& lowering, const std::string& collective, bool name_all,
                        const sim::KernelCosts& costs, std::vector<sim::SyncPhase>& out,
                        std::vector<topo::KernelKind>& charged) {
  for (const algo::LoweredPhase& p : lowering.phases()) {
    if (round_op_phase(p.kind) && std::find(charged.begin(), charged.end(), round_op_kind(p.kind)) == charged.end()) {
      charged.push_back(round_op_kind(p.kind));
      std::sort(charged.begin(), charged.end());
    }
    const std::string name = name_all || p.kind == algo::PhaseKind::kCollective
                                 ? collective
                                 : std::string(algo::phase_kind_name(p.kind));
    sim::SyncPhase phase;
    phase.name = name;
    phase.generator = p.make();
    phase.binder = binder_of(p);
    phase.costs = phase_costs(p, costs);
    out.push_back(std::move(phase));
  }
}

sim::SegmentBits AqgbBroadcastControl::stage1(const sim::Stage1View& v) const {
  const algo::AqgbController::Choice c = c_.stage1(v.now_s, v.rate_Bps, v.last_block, v.next_block_s,
                                                    v.backlog_entries);
  return {c.bits, c.deferred, "stage1_bits", c.value, c.detail};
}

sim::SegmentBits AqgbBroadcastControl::stage2(const sim::Stage2View& v) const {
  const algo::AqgbController::Choice c =
      c_.stage2(v.now_s, v.rate_Bps, v.forward_s, v.remaining_entries, v.deferred_bits);
  return {c.bits, c.deferred, "stage2_q", c.value, c.detail};
}

algo::StageObservations observe_stages(const sim::ParallelTrainingJob& job, uint32_t round) {
  algo::StageObservations seen;
  const uint32_t pp = job.num_stages();
  const auto& recs = job.stage_records();
  const size_t prev = static_cast<size_t>(round == 0 ? 0 : round - 1) * pp;  // first stage, previous round
  if (round > 0 && prev < recs.size() && recs[prev].complete)
    seen.first_stage_sync_s = recs[prev].sync_end_s - recs[prev].sync_start_s;
  for (uint32_t s = 0; s < pp; ++s) seen.micro_backward_s.push_back(job.mean_micro_backward_s(s));
  return seen;
}

}  // namespace ccsim::app
