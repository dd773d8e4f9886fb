#include "sim/schedule_runner.hpp"

#include "sim/base/check.hpp"

namespace ccsim::sim {

using topo::OpId;
using topo::OpKind;

std::vector<LinkSpec> link_specs(const topo::Topology& topology) {
  std::vector<LinkSpec> specs;
  specs.reserve(topology.links().size());
  for (const auto& l : topology.links()) specs.push_back(LinkSpec{l.capacity_Bps});
  return specs;
}

ScheduleRunner::ScheduleRunner(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                               const topo::Schedule& schedule, const KernelCostModel& costs)
    : engine_(engine), network_(network), topology_(topology), schedule_(schedule), costs_(costs) {
  CCSIM_CHECK(schedule.num_ranks() <= topology.num_ranks(), "schedule over {} ranks on a topology of {}",
              schedule.num_ranks(), topology.num_ranks());
  const auto& ops = schedule.ops();
  pending_deps_.assign(ops.size(), 0);
  succ_begin_.assign(ops.size() + 1, 0);
  for (const auto& op : ops)
    for (OpId d : schedule.deps(op)) ++succ_begin_[d + 1];
  for (size_t i = 0; i < ops.size(); ++i) succ_begin_[i + 1] += succ_begin_[i];
  succ_.resize(succ_begin_.back());
  std::vector<uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (OpId id = 0; id < ops.size(); ++id) {
    pending_deps_[id] = static_cast<uint32_t>(schedule.deps(ops[id]).size());
    for (OpId d : schedule.deps(ops[id])) succ_[fill[d]++] = id;
  }
  streams_.resize(schedule.num_ranks());
  timing_.op_start.assign(ops.size(), SimTime::zero());
  timing_.op_end.assign(ops.size(), SimTime::zero());
  timing_.kernel_busy.assign(schedule.num_ranks(), Duration::zero());
}

void ScheduleRunner::start(std::function<void(const ScheduleTiming&)> on_done) {
  on_done_ = std::move(on_done);
  timing_.start = timing_.end = engine_.now();
  remaining_ = schedule_.ops().size();
  if (remaining_ == 0) {
    if (on_done_) on_done_(timing_);
    return;
  }
  for (OpId id = 0; id < schedule_.ops().size(); ++id)
    if (pending_deps_[id] == 0) ready(id);
}

void ScheduleRunner::ready(OpId id) {
  const topo::Op& op = schedule_.op(id);
  if (op.kind == OpKind::kTransfer) {
    timing_.op_start[id] = engine_.now();
    const Duration latency = Duration::from_seconds(topology_.route_latency_s(op.rank, op.peer));
    network_.start_flow(topology_.route(op.rank, op.peer), static_cast<double>(op.bytes), latency,
                        [this, id] { finish(id); });
    return;
  }
  streams_[op.rank].queue.push_back(id);
  pump_stream(op.rank);
}

void ScheduleRunner::pump_stream(uint32_t rank) {
  Stream& s = streams_[rank];
  if (s.busy || s.head == s.queue.size()) return;
  const OpId id = s.queue[s.head++];
  s.busy = true;
  timing_.op_start[id] = engine_.now();
  const Duration d = costs_.cost(schedule_.op(id).bytes);
  timing_.kernel_busy[rank] += d;
  engine_.schedule_in(d, [this, id, rank] {
    streams_[rank].busy = false;
    finish(id);
    pump_stream(rank);
  });
}

void ScheduleRunner::finish(OpId id) {
  timing_.op_end[id] = engine_.now();
  timing_.end = std::max(timing_.end, engine_.now());
  for (uint32_t i = succ_begin_[id]; i < succ_begin_[id + 1]; ++i)
    if (--pending_deps_[succ_[i]] == 0) ready(succ_[i]);
  if (--remaining_ == 0 && on_done_) on_done_(timing_);
}

ScheduleTiming simulate_schedule(const topo::Topology& topology, const topo::Schedule& schedule,
                                 const KernelCostModel& costs) {
  Engine engine;
  FlowNetwork network(engine, link_specs(topology));
  ScheduleRunner runner(engine, network, topology, schedule, costs);
  runner.start();
  engine.run();
  CCSIM_CHECK(runner.done(), "schedule {} did not complete: a dependency cycle or a lost event", schedule.name());
  return runner.timing();
}

}  // namespace ccsim::sim
