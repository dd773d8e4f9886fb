#pragma once
/// \file
/// Where algorithms/ meets sim/ (neither includes the other) beyond the schedule phases they share
/// (topo::SchedulePhase): AQGB's controller becomes the broadcast's rate control, and a pipeline
/// run's observations become EDGC's. Wiring only: the decisions are made in algorithms/, the timing
/// in sim/.

#include <string>

#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/tfp/aqgb_controller.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/parallel_job.hpp"

namespace ccsim::app {

/// AQGB's controller as the broadcast's rate control.
class AqgbBroadcastControl final : public sim::BroadcastControl {
 public:
  explicit AqgbBroadcastControl(algo::AqgbController controller) : c_(std::move(controller)) {}
  std::string name() const override { return "aqgb"; }
  std::string describe() const override { return c_.describe(); }
  sim::SegmentBits stage1(const sim::Stage1View& v) const override;
  bool second_stage() const override { return c_.second_stage(); }
  sim::SegmentBits stage2(const sim::Stage2View& v) const override;
  double floor_bytes(double entries) const override { return c_.floor_bytes(entries); }

 private:
  algo::AqgbController c_;
};

/// What a pipeline job has observed by the start of stage syncs of `round`, as EDGC reads it.
algo::StageObservations observe_stages(const sim::ParallelTrainingJob& job, uint32_t round);

}  // namespace ccsim::app
