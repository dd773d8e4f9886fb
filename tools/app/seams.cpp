#include "tools/app/seams.hpp"

namespace ccsim::app {

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
