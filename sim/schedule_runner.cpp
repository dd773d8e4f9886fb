#include "sim/schedule_runner.hpp"

#include <algorithm>
#include <functional>

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

void bind_uncompressed(topo::Schedule& schedule, topo::OpId first, topo::OpId end, uint32_t bytes_per_element) {
  for (OpId id = first; id < end; ++id) {
    topo::Op& op = schedule.mutable_op(id);
    op.bytes = op.kind == OpKind::kTransfer ? uint64_t{bytes_per_element} * schedule.op_elements(op) : 0;
  }
}

topo::Schedule ScheduleReplay::begin() {
  topo::Schedule s(schedule_.name(), schedule_.operation(), schedule_.num_ranks(), schedule_.elements());
  for (const auto& c : schedule_.chunks()) s.add_chunk(c.offset, c.count);
  s.set_shards(schedule_.shards());
  s.set_root(schedule_.root());
  return s;
}

bool ScheduleReplay::next_step(topo::Schedule& out) {
  CCSIM_CHECK(schedule_.id_base() == 0, "replaying a schedule window");
  if (emitted_ || schedule_.ops().empty()) return false;
  emitted_ = true;
  for (const auto& op : schedule_.ops()) out.append_op(op, schedule_.deps(op), schedule_.bundle(op));
  return true;
}

ScheduleRunner::ScheduleRunner(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                               topo::ScheduleGenerator& generator, ScheduleBinder binder,
                               const KernelCostModel& costs, RunnerOptions options)
    : engine_(engine),
      network_(network),
      topology_(topology),
      generator_(generator),
      binder_(std::move(binder)),
      costs_(costs),
      options_(std::move(options)),
      sched_(generator.begin()) {
  const uint32_t n = sched_.num_ranks();
  if (options_.rank_map.empty()) {
    CCSIM_CHECK(n <= topology.num_ranks(), "schedule over {} ranks on a topology of {}", n, topology.num_ranks());
  } else {
    CCSIM_CHECK(options_.rank_map.size() == n, "rank map of {} for {} ranks", options_.rank_map.size(), n);
    for (topo::Rank r : options_.rank_map) CCSIM_CHECK(r < topology.num_ranks(), "rank map names rank {}", r);
  }
  streams_.resize(n);
  timing_.kernel_busy.assign(n, Duration::zero());
}

bool ScheduleRunner::generate_step() {
  if (generator_done_) return false;
  const OpId first = sched_.id_end();
  if (!generator_.next_step(sched_)) {
    generator_done_ = true;
    return false;
  }
  const OpId end = sched_.id_end();
  const uint32_t step = steps_generated_++;
  if (binder_) binder_(sched_, first, end);
  const OpId prev_first = last_step_first_;
  last_step_first_ = first;
  steps_.push_back(Step{first, end, end - first});
  unfinished_ += end - first;
  timing_.ops += end - first;
  timing_.steps = steps_generated_;
  states_.resize(end - states_base_);
  if (options_.record_ops) {
    timing_.op_start.resize(end);
    timing_.op_end.resize(end);
  }
  // Pending counts and successor lists first; then release what is already runnable.
  for (OpId id = first; id < end; ++id) {
    const topo::Op& op = sched_.op(id);
    OpState& st = state(id);
    st.step = step;
    if (op.kind == OpKind::kTransfer) {
      ++timing_.transfers;
      timing_.wire_bytes += op.bytes;
    }
    for (OpId d : sched_.deps(op)) {
      if (d >= prev_first && d < first) st.anchored = true;
      if (d >= first && state(d).anchored) st.anchored = true;
      if (finished(d)) continue;
      ++st.pending;
      uint32_t node;
      if (!succ_free_.empty()) {
        node = succ_free_.back();
        succ_free_.pop_back();
      } else {
        node = static_cast<uint32_t>(succ_pool_.size());
        succ_pool_.emplace_back();
      }
      OpState& ds = state(d);
      succ_pool_[node] = SuccNode{id, ds.succ_head};
      ds.succ_head = node;
    }
    CCSIM_CHECK(step == 0 || st.anchored,
                "schedule {}: op {} of step {} does not depend on step {} (generator contract)", sched_.name(), id,
                step, step - 1);
  }
  timing_.peak_window_ops = std::max<size_t>(timing_.peak_window_ops, sched_.id_end() - sched_.id_base());
  if (options_.on_step) options_.on_step(sched_, first, end);
  for (OpId id = first; id < end; ++id)
    if (state(id).pending == 0) make_ready(id);
  return true;
}

void ScheduleRunner::make_ready(OpId id) {
  ready_.push_back(id);
  std::push_heap(ready_.begin(), ready_.end(), std::greater<>());
}

void ScheduleRunner::ensure_generated(uint32_t step) {
  while (steps_generated_ <= step && generate_step()) {
  }
}

void ScheduleRunner::start(std::function<void(const ScheduleTiming&)> on_done) {
  on_done_ = std::move(on_done);
  timing_.start = timing_.end = engine_.now();
  ensure_generated(0);
  if (unfinished_ == 0) {
    done_ = true;
    if (on_done_) on_done_(timing_);
    return;
  }
  drain();
}

void ScheduleRunner::drain() {
  if (draining_) return;
  draining_ = true;
  // Lowest id first: the dispatch order (hence each stream's kernel order) is a function of the
  // schedule alone, the same whether it is streamed step by step or replayed whole.
  while (!ready_.empty()) {
    std::pop_heap(ready_.begin(), ready_.end(), std::greater<>());
    const OpId id = ready_.back();
    ready_.pop_back();
    dispatch(id);
  }
  draining_ = false;
  retire();
}

void ScheduleRunner::dispatch(OpId id) {
  ensure_generated(state(id).step + 1);
  const topo::Op& op = sched_.op(id);
  if (op.kind == OpKind::kTransfer) {
    if (options_.record_ops) timing_.op_start[id] = engine_.now();
    const Duration latency = place_transfer(topology_, place(op.rank), place(op.peer), id, options_.ecmp_salt, route_);
    network_.start_flow(route_, static_cast<double>(op.bytes), latency, [this, id] {
      finish(id);
      drain();
    });
    return;
  }
  streams_[op.rank].queue.push_back(id);
  pump_stream(op.rank);
}

void ScheduleRunner::pump_stream(uint32_t rank) {
  Stream& s = streams_[rank];
  while (!s.busy && !s.queue.empty()) {
    const OpId id = s.queue.front();
    s.queue.pop_front();
    const topo::Op& op = sched_.op(id);
    const Duration d = kernel_duration(costs_, sched_, op);
    if (options_.record_ops) timing_.op_start[id] = engine_.now();
    if (d == Duration::zero()) {
      finish(id);
      continue;
    }
    s.busy = true;
    timing_.kernel_busy[rank] += d;
    if (options_.on_kernel) options_.on_kernel(rank, true);
    engine_.schedule_in(d, [this, id, rank] {
      streams_[rank].busy = false;
      if (options_.on_kernel) options_.on_kernel(rank, false);
      finish(id);
      pump_stream(rank);
      drain();
    });
  }
}

void ScheduleRunner::finish(OpId id) {
  OpState& st = state(id);
  st.finished = true;
  if (options_.record_ops) timing_.op_end[id] = engine_.now();
  timing_.end = std::max(timing_.end, engine_.now());
  for (uint32_t node = st.succ_head; node != UINT32_MAX;) {
    const SuccNode n = succ_pool_[node];
    succ_free_.push_back(node);
    if (--state(n.to).pending == 0) make_ready(n.to);
    node = n.next;
  }
  st.succ_head = UINT32_MAX;
  --steps_[st.step - (steps_generated_ - static_cast<uint32_t>(steps_.size()))].unfinished;
  --unfinished_;
}

void ScheduleRunner::retire() {
  while (!steps_.empty() && steps_.front().unfinished == 0) steps_.pop_front();
  const OpId keep = steps_.empty() ? sched_.id_end() : steps_.front().first;
  if (keep > states_base_ && (keep - states_base_) * 2 >= states_.size()) {
    states_.erase(states_.begin(), states_.begin() + (keep - states_base_));
    states_base_ = keep;
  }
  sched_.retire_before(keep);
  if (unfinished_ == 0 && generator_done_ && !done_) {
    done_ = true;
    if (on_done_) on_done_(timing_);
  } else if (unfinished_ == 0 && !generator_done_) {
    // Every generated op finished but the generator has more: pull the next step.
    if (generate_step()) drain();
    else retire();
  }
}

ScheduleTiming simulate_schedule(const topo::Topology& topology, const topo::Schedule& schedule,
                                 const KernelCostModel& costs) {
  Engine engine;
  FlowNetwork network(engine, link_specs(topology));
  ScheduleReplay replay(schedule);
  RunnerOptions options;
  options.record_ops = true;
  ScheduleRunner runner(engine, network, topology, replay, nullptr, costs, options);
  runner.start();
  engine.run();
  CCSIM_CHECK(!engine.passed_horizon(), "schedule {} runs past the end of simulated time", schedule.name());
  CCSIM_CHECK(runner.done(), "schedule {} did not complete: a dependency cycle or a lost event", schedule.name());
  return runner.timing();
}

}  // namespace ccsim::sim
