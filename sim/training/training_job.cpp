#include "sim/training/training_job.hpp"

#include <algorithm>

#include "sim/base/check.hpp"

namespace ccsim::sim {

TrainingJob::TrainingJob(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                         std::vector<topo::Rank> worker_ranks, std::vector<TrainingLayer> layers,
                         const StragglerModel& stragglers, TrainingOptions options, GradientSync& sync)
    : engine_(engine),
      network_(network),
      topology_(topology),
      ranks_(std::move(worker_ranks)),
      layers_(std::move(layers)),
      stragglers_(stragglers),
      options_(options),
      sync_(sync) {
  CCSIM_CHECK(!ranks_.empty() && !layers_.empty(), "a training job needs workers and layers");
  CCSIM_CHECK(options_.interference >= 0, "negative interference");
  uint64_t params = 0;
  for (const auto& l : layers_) params += l.params;
  for (const auto& l : layers_)
    optimizer_share_s_.push_back(params > 0 ? options_.optimizer_s * static_cast<double>(l.params) / static_cast<double>(params)
                                            : options_.optimizer_s / static_cast<double>(layers_.size()));
  workers_.resize(ranks_.size());
  for (auto& w : workers_) w.synced_round.assign(layers_.size(), -1);
}

void TrainingJob::start() {
  sync_.attach(*this);
  for (uint32_t w = 0; w < workers_.size(); ++w) {
    workers_[w].factor = stragglers_.factor(0, w);
    workers_[w].prev_factor = 1.0;
    advance(w);
  }
}

double TrainingJob::speed(const Worker& w) const {
  return w.kernels.active() ? 1.0 / (1.0 + options_.interference) : 1.0;
}

double TrainingJob::expected_backward_s(uint32_t worker, uint32_t layer) const {
  return layers_[layer].backward_s * workers_[worker].prev_factor;
}

double TrainingJob::expected_forward_s(uint32_t worker, uint32_t layer) const {
  return layers_[layer].forward_s * workers_[worker].prev_factor;
}

bool TrainingJob::forward_started(uint32_t round, uint32_t worker, uint32_t layer) const {
  const Worker& w = workers_[worker];
  if (w.round != round) return w.round > round;
  return w.phase != Phase::kForward || w.layer > layer || (w.layer == layer && w.running);
}

void TrainingJob::advance(uint32_t wi) {
  Worker& w = workers_[wi];
  if (w.running || w.phase == Phase::kDone) return;
  double work = 0;
  if (w.phase == Phase::kForward) {
    if (w.round > 0 && w.synced_round[w.layer] < static_cast<int64_t>(w.round) - 1) return;  // wait for the update
    work = layers_[w.layer].forward_s * w.factor + (w.round > 0 ? optimizer_share_s_[w.layer] : 0.0);
    if (w.layer == 0) {
      CCSIM_CHECK(w.round_start.size() == w.round, "round starts out of order");
      w.round_start.push_back(engine_.now());
    }
  } else {
    work = layers_[w.layer].backward_s * w.factor;
  }
  w.running = true;
  w.remaining = work;
  w.op_start = w.last_update = engine_.now();
  w.done_event = engine_.schedule_in(Duration::from_seconds_ceil(work / speed(w)), [this, wi] { op_done(wi); });
}

void TrainingJob::reschedule(uint32_t wi) {
  Worker& w = workers_[wi];
  if (!w.running) return;
  engine_.reschedule(w.done_event, engine_.now() + Duration::from_seconds_ceil(std::max(0.0, w.remaining) / speed(w)));
}

void TrainingJob::op_done(uint32_t wi) {
  Worker& w = workers_[wi];
  w.running = false;
  w.busy.add(w.op_start, engine_.now());
  const uint32_t n = static_cast<uint32_t>(layers_.size());
  if (w.phase == Phase::kForward) {
    if (w.layer + 1 < n) {
      ++w.layer;
    } else {
      w.phase = Phase::kBackward;
      w.layer = n - 1;
    }
    advance(wi);
    return;
  }
  // Backward of w.layer ended: its gradient goes to the protocol.
  const uint32_t round = w.round, layer = w.layer;
  if (layer > 0) {
    --w.layer;
  } else {
    ++w.round;
    w.prev_factor = w.factor;
    if (options_.rounds > 0 && w.round >= options_.rounds) {
      w.phase = Phase::kDone;
    } else {
      w.phase = Phase::kForward;
      w.layer = 0;
      w.factor = stragglers_.factor(w.round, wi);
    }
  }
  sync_.gradient_ready(round, wi, layer);
  advance(wi);
}

void TrainingJob::synced(uint32_t round, uint32_t wi, uint32_t layer) {
  Worker& w = workers_[wi];
  CCSIM_CHECK(static_cast<int64_t>(round) == w.synced_round[layer] + 1, "worker {} layer {}: round {} synchronized after {}",
              wi, layer, round, w.synced_round[layer]);
  w.synced_round[layer] = round;
  if (w.synced_layers.size() <= round) {
    w.synced_layers.resize(round + 1, 0);
    w.round_synced.resize(round + 1, SimTime::zero());
  }
  w.round_synced[round] = std::max(w.round_synced[round], engine_.now());
  if (++w.synced_layers[round] == layers_.size()) {
    if (round_done_workers_.size() <= round) {
      round_done_workers_.resize(round + 1, 0);
      round_complete_.resize(round + 1, SimTime::zero());
    }
    round_complete_[round] = std::max(round_complete_[round], engine_.now());
    if (++round_done_workers_[round] == workers_.size() && options_.rounds > 0 && round + 1 == options_.rounds) {
      finished_ = true;
      if (on_finished_) on_finished_();
    }
  }
  advance(wi);
}

void TrainingJob::comm_begin(uint32_t w) { workers_[w].comm.up(engine_.now()); }
void TrainingJob::comm_end(uint32_t w) { workers_[w].comm.down(engine_.now()); }

void TrainingJob::kernel_begin(uint32_t wi) {
  Worker& w = workers_[wi];
  if (w.running && !w.kernels.active() && options_.interference > 0) {
    w.remaining -= (engine_.now() - w.last_update).seconds() * speed(w);
    w.last_update = engine_.now();
    w.kernels.up(engine_.now());
    reschedule(wi);
    return;
  }
  w.kernels.up(engine_.now());
}

void TrainingJob::kernel_end(uint32_t wi) {
  Worker& w = workers_[wi];
  const bool was_slow = w.kernels.active();
  if (w.running && was_slow && options_.interference > 0) {
    w.remaining -= (engine_.now() - w.last_update).seconds() * speed(w);
    w.last_update = engine_.now();
    w.kernels.down(engine_.now());
    if (!w.kernels.active()) reschedule(wi);
    return;
  }
  w.kernels.down(engine_.now());
}

std::vector<RoundMetrics> TrainingJob::round_metrics(SimTime until) const {
  std::vector<RoundMetrics> out;
  const SimTime now = engine_.now();
  size_t max_rounds = 0;
  for (const auto& w : workers_) max_rounds = std::max(max_rounds, w.round_start.size());
  std::vector<IntervalSet> comm(workers_.size()), kern(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    comm[i] = workers_[i].comm.snapshot(now);
    kern[i] = workers_[i].kernels.snapshot(now);
  }
  for (uint32_t r = 0; r < max_rounds; ++r) {
    for (uint32_t wi = 0; wi < workers_.size(); ++wi) {
      const Worker& w = workers_[wi];
      if (w.round_start.size() <= r) continue;
      SimTime end;
      if (w.round_start.size() > r + 1) {
        end = w.round_start[r + 1];
      } else if (w.synced_layers.size() > r && w.synced_layers[r] == layers_.size()) {
        end = std::max(w.round_synced[r], w.busy.empty() ? w.round_start[r] : w.busy.intervals().back().end);
      } else {
        continue;  // still running
      }
      if (end > until) continue;
      const SimTime a = w.round_start[r];
      RoundMetrics m;
      m.round = r;
      m.worker = wi;
      m.factor = stragglers_.factor(r, wi);
      m.start_s = a.seconds();
      m.end_s = end.seconds();
      const Duration compute = w.busy.measure(a, end);
      const Duration span = end - a;
      const Duration kernel = kern[wi].measure(a, end);
      const Duration kernel_hidden = IntervalSet::overlap(kern[wi], w.busy, a, end);
      m.compute_s = compute.seconds();
      m.wait_s = (span - compute).seconds();
      m.comm_s = comm[wi].measure(a, end).seconds();
      m.overlap_s = IntervalSet::overlap(w.busy, comm[wi], a, end).seconds();
      m.compression_s = kernel.seconds();
      m.compression_overhead_s = (kernel - kernel_hidden).seconds();
      m.exposed_comm_s = (span - compute - (kernel - kernel_hidden)).seconds();
      out.push_back(m);
    }
  }
  return out;
}

std::vector<SimTime> TrainingJob::round_completion() const {
  std::vector<SimTime> out;
  for (size_t r = 0; r < round_done_workers_.size() && round_done_workers_[r] == workers_.size(); ++r)
    out.push_back(round_complete_[r]);
  return out;
}

}  // namespace ccsim::sim
