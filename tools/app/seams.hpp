#pragma once
/// \file
/// Where algorithms/ meets sim/ (neither includes the other): a lowered compressed-collective phase
/// becomes a timed phase (its binder and its scheme's kernel costs), AQGB's controller becomes the
/// broadcast's rate control, and a pipeline run's observations become EDGC's. Wiring only: the
/// decisions are made in algorithms/, the timing in sim/.

#include <string>
#include <vector>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/tfp/aqgb_controller.hpp"
#include "sim/concurrent_groups.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/parallel_job.hpp"

namespace ccsim::app {

/// The kernel costs of the compressor that binds `phase` (its name and resolved params).
sim::KernelCostModel phase_costs(const algo::LoweredPhase& phase, const sim::KernelCosts& costs);

/// A round's phases for concurrent groups (ccsim run's collective runs).
std::vector<sim::GroupPhase> group_phases(const algo::CompressedCollective& lowering, const sim::KernelCosts& costs);

/// A round's phases for a training sync, each named by its kind ("plan_local", "metadata",
/// "prepare", `collective`, "finish"), or all `collective` when `name_all` (a bucket's weights).
/// Appends to `out`; adds the round-op kinds appended to `charged` (kept sorted, no duplicates).
void append_sync_phases(const algo::CompressedCollective& lowering, const std::string& collective, bool name_all,
                        const sim::KernelCosts& costs, std::vector<sim::SyncPhase>& out,
                        std::vector<topo::KernelKind>& charged);

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
