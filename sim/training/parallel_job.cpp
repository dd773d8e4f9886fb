#include "sim/training/parallel_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/base/check.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {

/// Stage s of pipeline replica d: its TP group, in lock step.
struct ParallelTrainingJob::Replica {
  uint32_t d = 0, s = 0;
  std::vector<topo::Rank> tp_ranks;  // topology rank of (t, d, s), by t
  uint32_t round = 0;
  bool open = false;     // the round's ops may run
  size_t pos = 0;        // next op of order_[s]
  bool running = false;  // an op is in progress
  double factor = 1;
  PipelineOp op{PipelineOp::kForward, 0};
  uint32_t layer_k = 0;      // layers of the running op completed
  uint32_t allreduce_k = 0;  // TP all-reduces of the current layer started
  SimTime op_start;
  Duration busy = Duration::zero();  // F/B op time in the current round
  // Per micro-batch: the round whose activation / gradient arrived and whose forward ended (-1: none).
  std::vector<int64_t> act_in, grad_in, f_done;
  std::unique_ptr<topo::ScheduleGenerator> tp_gen;
  std::unique_ptr<ScheduleRunner> tp_runner;
};

/// A stage's DP synchronization: one sequence of phases per TP index, run concurrently.
struct ParallelTrainingJob::StageSync {
  struct Group {
    std::vector<topo::Rank> ranks;  // topology rank of (t, d, s), by d
    std::vector<SyncPhase> phases;
    size_t phase = 0;
    std::unique_ptr<ScheduleRunner> runner;
  };
  std::vector<Group> groups;  // by t
  uint32_t round = 0;
  uint32_t pending = 0;
  bool active = false;
};

namespace {

void bind_fp32(topo::Schedule& schedule, topo::OpId first, topo::OpId end) {
  bind_uncompressed(schedule, first, end, 4);
}

bool valid_time(double t) { return std::isfinite(t) && t >= 0; }

}  // namespace

Result<std::vector<uint32_t>> split_stages(const std::vector<TrainingLayer>& layers, uint32_t stages) {
  if (stages == 0) return invalid_argument("pipeline stages: expected >= 1, got 0");
  const auto n = static_cast<uint32_t>(layers.size());
  if (n < stages)
    return invalid_argument(fmt::format("pipeline stages: {} stages need at least as many layers, got {}", stages, n));
  std::vector<double> prefix(n + 1, 0.0);
  for (uint32_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + layers[k].forward_s + layers[k].backward_s;
  const double total = prefix[n];
  std::vector<uint32_t> starts{0};
  for (uint32_t s = 1; s < stages; ++s) {
    const double target = total * s / stages;
    uint32_t best = starts.back() + 1;
    for (uint32_t k = best + 1; k <= n - (stages - s); ++k)
      if (std::abs(prefix[k] - target) < std::abs(prefix[best] - target)) best = k;
    starts.push_back(best);
  }
  return starts;
}

Status ParallelTrainingJob::check(const topo::Topology& topology, const topo::ParallelGroups& groups,
                                  const std::vector<TrainingLayer>& layers, const std::vector<uint32_t>& stage_starts,
                                  const ParallelJobOptions& options) {
  const topo::ParallelLayout& lay = groups.layout();
  if (groups.world_size() > topology.num_ranks())
    return invalid_argument(fmt::format("parallelism: tp * pp * dp = {} ranks exceed the topology's {}",
                                        groups.world_size(), topology.num_ranks()));
  if (layers.empty()) return invalid_argument("layers: expected at least one layer");
  if (stage_starts.size() != lay.pp)
    return invalid_argument(fmt::format("stage_starts: expected one start per pipeline stage ({}), got {}", lay.pp,
                                        stage_starts.size()));
  if (layers.size() < lay.pp)
    return invalid_argument(
        fmt::format("stage_starts: {} pipeline stages need at least as many layers, got {}", lay.pp, layers.size()));
  if (stage_starts[0] != 0)
    return invalid_argument(fmt::format("stage_starts/0: expected 0, got {}", stage_starts[0]));
  for (size_t s = 1; s < stage_starts.size(); ++s)
    if (stage_starts[s] <= stage_starts[s - 1] || stage_starts[s] >= layers.size())
      return invalid_argument(fmt::format("stage_starts/{}: expected a layer in ({}, {}), got {}", s,
                                          stage_starts[s - 1], layers.size(), stage_starts[s]));
  if (options.rounds < 1) return invalid_argument("rounds: expected >= 1, got 0");
  CCSIM_RETURN_IF_ERROR(pipeline_order(options.schedule, lay.pp, options.micro_batches).status());
  if (!valid_time(options.optimizer_s))
    return invalid_argument(fmt::format("optimizer_s: expected a finite time >= 0, got {}", options.optimizer_s));
  for (size_t l = 0; l < layers.size(); ++l) {
    const TrainingLayer& L = layers[l];
    if (!valid_time(L.forward_s) || !valid_time(L.backward_s))
      return invalid_argument(fmt::format("layers/{} ({}): expected finite times >= 0, got forward {} s, backward {} s",
                                          l, L.name, L.forward_s, L.backward_s));
    if (lay.tp > 1 && options.tp_allreduces > 0 && L.params > 0 && L.activation_bytes > 0 &&
        L.activation_bytes < 4ull * lay.tp)
      return invalid_argument(fmt::format(
          "layers/{} ({}): activation_bytes: expected at least 4 bytes per TP rank ({} B), got {} B", l, L.name,
          4ull * lay.tp, L.activation_bytes));
  }
  return ok_status();
}

Result<std::unique_ptr<ParallelTrainingJob>> ParallelTrainingJob::make(
    Engine& engine, FlowNetwork& network, const topo::Topology& topology, const topo::ParallelGroups& groups,
    std::vector<TrainingLayer> layers, std::vector<uint32_t> stage_starts, const StragglerModel& stragglers,
    ParallelJobOptions options, StagePhaseFactory factory) {
  CCSIM_RETURN_IF_ERROR(check(topology, groups, layers, stage_starts, options));
  if (groups.layout().dp > 1 && !factory) return invalid_argument("sync: a phase factory is required when dp > 1");
  CCSIM_ASSIGN_OR_RETURN(PipelineOrder order,
                         pipeline_order(options.schedule, groups.layout().pp, options.micro_batches));
  return std::unique_ptr<ParallelTrainingJob>(new ParallelTrainingJob(engine, network, topology, groups,
                                                                      std::move(layers), std::move(stage_starts),
                                                                      std::move(order), stragglers, options,
                                                                      std::move(factory)));
}

ParallelTrainingJob::ParallelTrainingJob(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                                         const topo::ParallelGroups& groups, std::vector<TrainingLayer> layers,
                                         std::vector<uint32_t> stage_starts, PipelineOrder order,
                                         const StragglerModel& stragglers, ParallelJobOptions options,
                                         StagePhaseFactory factory)
    : engine_(engine),
      network_(network),
      topology_(topology),
      groups_(groups),
      layers_(std::move(layers)),
      stage_starts_(std::move(stage_starts)),
      order_(std::move(order)),
      stragglers_(stragglers),
      options_(options),
      factory_(std::move(factory)),
      tp_(groups.layout().tp),
      pp_(groups.layout().pp),
      dp_(groups.layout().dp) {
  stage_params_.assign(pp_, 0);
  uint64_t total = 0;
  for (uint32_t s = 0; s < pp_; ++s) {
    for (uint32_t l = stage_starts_[s]; l < stage_end(s); ++l) stage_params_[s] += layers_[l].params;
    total += stage_params_[s];
  }
  for (uint32_t s = 0; s < pp_; ++s)
    optimizer_share_s_.push_back(total > 0 ? options_.optimizer_s * static_cast<double>(stage_params_[s]) /
                                                 static_cast<double>(total)
                                           : options_.optimizer_s / pp_);
  const uint32_t m = options_.micro_batches;
  for (uint32_t s = 0; s < pp_; ++s)
    for (uint32_t d = 0; d < dp_; ++d) {
      auto rep = std::make_unique<Replica>();
      rep->d = d;
      rep->s = s;
      for (uint32_t t = 0; t < tp_; ++t) rep->tp_ranks.push_back(groups_.rank_at({t, d, s}));
      rep->act_in.assign(m, -1);
      rep->grad_in.assign(m, -1);
      rep->f_done.assign(m, -1);
      replicas_.push_back(std::move(rep));
    }
  for (uint32_t s = 0; s < pp_; ++s) {
    auto sync = std::make_unique<StageSync>();
    sync->groups.resize(tp_);
    for (uint32_t t = 0; t < tp_; ++t)
      for (uint32_t d = 0; d < dp_; ++d) sync->groups[t].ranks.push_back(groups_.rank_at({t, d, s}));
    syncs_.push_back(std::move(sync));
  }
  replicas_done_.assign(pp_, 0);
  stage_busy_.assign(pp_, Duration::zero());
  stage_backward_sum_.assign(pp_, Duration::zero());
  backward_sum_.assign(pp_, Duration::zero());
  backward_ops_.assign(pp_, 0);
  optimizer_end_s_.assign(pp_, 0.0);
}

ParallelTrainingJob::~ParallelTrainingJob() = default;

void ParallelTrainingJob::start() {
  CCSIM_CHECK(!started_, "ParallelTrainingJob::start called twice");
  started_ = true;
  for (uint32_t s = 0; s < pp_; ++s)
    for (uint32_t d = 0; d < dp_; ++d) open_round(replica(d, s), 0);
}

StageRoundRecord& ParallelTrainingJob::record(uint32_t round, uint32_t stage) {
  const size_t need = (size_t{round} + 1) * pp_;
  while (stage_records_.size() < need) {
    StageRoundRecord r;
    r.round = static_cast<uint32_t>(stage_records_.size() / pp_);
    r.stage = static_cast<uint32_t>(stage_records_.size() % pp_);
    stage_records_.push_back(r);
  }
  return stage_records_[size_t{round} * pp_ + stage];
}

bool ParallelTrainingJob::tp_allreduced(uint32_t layer) const {
  const TrainingLayer& l = layers_[layer];
  return tp_ > 1 && options_.tp_allreduces > 0 && l.params > 0 && l.activation_bytes > 0;
}

double ParallelTrainingJob::mean_micro_backward_s(uint32_t stage) const {
  return backward_ops_[stage] > 0 ? backward_sum_[stage].seconds() / static_cast<double>(backward_ops_[stage]) : 0.0;
}

void ParallelTrainingJob::open_round(Replica& rep, uint32_t round) {
  record(round, rep.s);
  rep.round = round;
  rep.open = true;
  rep.pos = 0;
  rep.busy = Duration::zero();
  rep.factor = stragglers_.factor(round, rep.d * pp_ + rep.s);
  try_advance(rep);
}

void ParallelTrainingJob::try_advance(Replica& rep) {
  if (rep.running || !rep.open || rep.pos >= order_[rep.s].size()) return;
  const PipelineOp op = order_[rep.s][rep.pos];
  const auto r = static_cast<int64_t>(rep.round);
  const uint32_t i = op.micro_batch;
  if (op.kind == PipelineOp::kForward) {
    if (rep.s > 0 && rep.act_in[i] != r) return;
  } else {
    if (rep.f_done[i] != r) return;
    if (rep.s + 1 < pp_ && rep.grad_in[i] != r) return;
  }
  rep.running = true;
  rep.op = op;
  rep.layer_k = 0;
  rep.op_start = engine_.now();
  if (rep.s == 0 && rep.pos == 0) {
    if (round_start_s_.size() <= rep.round) round_start_s_.resize(rep.round + 1, engine_.now().seconds());
    round_start_s_[rep.round] = std::min(round_start_s_[rep.round], engine_.now().seconds());
  }
  run_layer(rep);
}

void ParallelTrainingJob::run_layer(Replica& rep) {
  const uint32_t first = stage_starts_[rep.s], end = stage_end(rep.s);
  if (rep.layer_k == end - first) return op_done(rep);
  const bool fwd = rep.op.kind == PipelineOp::kForward;
  const uint32_t l = fwd ? first + rep.layer_k : end - 1 - rep.layer_k;
  const double work = (fwd ? layers_[l].forward_s : layers_[l].backward_s) / tp_ * rep.factor;
  rep.allreduce_k = 0;
  Replica* p = &rep;
  engine_.schedule_in(Duration::from_seconds_ceil(work), [this, p] { run_allreduce(*p); });
}

void ParallelTrainingJob::run_allreduce(Replica& rep) {
  const uint32_t first = stage_starts_[rep.s], end = stage_end(rep.s);
  const uint32_t l = rep.op.kind == PipelineOp::kForward ? first + rep.layer_k : end - 1 - rep.layer_k;
  if (!tp_allreduced(l) || rep.allreduce_k >= options_.tp_allreduces) {
    ++rep.layer_k;
    return run_layer(rep);
  }
  ++rep.allreduce_k;
  rep.tp_gen = topo::make_ring(topo::CollectiveOp::kAllReduce, tp_, layers_[l].activation_bytes / 4, {}, false);
  RunnerOptions ro;
  ro.rank_map = rep.tp_ranks;
  ro.ecmp_salt = options_.ecmp_salt ^ topo::ecmp_hash(0x7417, rep.d * pp_ + rep.s, flow_seq_++);
  rep.tp_runner = std::make_unique<ScheduleRunner>(engine_, network_, topology_, *rep.tp_gen, bind_fp32,
                                                   KernelCostModel{}, std::move(ro));
  Replica* p = &rep;
  // Continue in a fresh event: the runner must not be destroyed inside its own callback.
  rep.tp_runner->start([this, p](const ScheduleTiming&) {
    engine_.schedule_in(Duration::zero(), [this, p] {
      p->tp_runner.reset();
      p->tp_gen.reset();
      run_allreduce(*p);
    });
  });
}

void ParallelTrainingJob::op_done(Replica& rep) {
  const SimTime now = engine_.now();
  const Duration dur = now - rep.op_start;
  const PipelineOp op = rep.op;
  rep.running = false;
  rep.busy += dur;
  if (op.kind == PipelineOp::kBackward) {
    stage_backward_sum_[rep.s] += dur;
    backward_sum_[rep.s] += dur;
    ++backward_ops_[rep.s];
  }
  if (options_.record_ops)
    op_records_.push_back({rep.round, rep.d, rep.s, op, rep.op_start.seconds(), now.seconds()});
  ++rep.pos;
  if (op.kind == PipelineOp::kForward) {
    rep.f_done[op.micro_batch] = rep.round;
    if (rep.s + 1 < pp_)
      send(rep, rep.s + 1, layers_[stage_end(rep.s) - 1].activation_bytes, PipelineOp::kForward, op.micro_batch);
  } else if (rep.s > 0) {
    send(rep, rep.s - 1, layers_[stage_starts_[rep.s] - 1].activation_bytes, PipelineOp::kBackward, op.micro_batch);
  }
  if (rep.pos == order_[rep.s].size()) {
    CCSIM_CHECK(op.kind == PipelineOp::kBackward, "stage {} ends its round with a forward", rep.s);
    replica_round_done(rep);
  }
  try_advance(rep);
}

void ParallelTrainingJob::send(Replica& from, uint32_t to_stage, uint64_t bytes, PipelineOp::Kind kind,
                               uint32_t micro_batch) {
  const uint32_t d = from.d, round = from.round;
  if (bytes == 0) return arrived(d, to_stage, kind, micro_batch, round);
  auto pending = std::make_shared<uint32_t>(tp_);
  const Replica& to = replica(d, to_stage);
  std::vector<topo::LinkId> route;
  for (uint32_t t = 0; t < tp_; ++t) {
    const topo::Rank src = from.tp_ranks[t], dst = to.tp_ranks[t];
    topology_.route(src, dst, topo::ecmp_hash(src, dst, options_.ecmp_salt ^ (0x5e4d000000ull + flow_seq_++)), route);
    const Duration latency = Duration::from_seconds(topology_.latency_s(route));
    network_.start_flow(route, static_cast<double>(bytes) / tp_, latency,
                        [this, pending, d, to_stage, kind, micro_batch, round] {
                          if (--*pending == 0) arrived(d, to_stage, kind, micro_batch, round);
                        });
  }
}

void ParallelTrainingJob::arrived(uint32_t d, uint32_t s, PipelineOp::Kind kind, uint32_t micro_batch,
                                  uint32_t round) {
  Replica& rep = replica(d, s);
  (kind == PipelineOp::kForward ? rep.act_in : rep.grad_in)[micro_batch] = round;
  try_advance(rep);
}

void ParallelTrainingJob::replica_round_done(Replica& rep) {
  rep.open = false;
  const uint32_t s = rep.s;
  stage_busy_[s] += rep.busy;
  if (++replicas_done_[s] < dp_) return;
  replicas_done_[s] = 0;
  StageRoundRecord& rec = record(rep.round, s);
  rec.backward_end_s = engine_.now().seconds();
  rec.compute_busy_s = stage_busy_[s].seconds() / dp_;
  rec.micro_backward_s = stage_backward_sum_[s].seconds() / (static_cast<double>(dp_) * options_.micro_batches);
  rec.backward_done = true;
  stage_busy_[s] = stage_backward_sum_[s] = Duration::zero();
  start_sync(s, rep.round);
}

void ParallelTrainingJob::start_sync(uint32_t s, uint32_t round) {
  StageSync& sy = *syncs_[s];
  CCSIM_CHECK(!sy.active, "stage {}: round {} sync starts while round {} syncs", s, round, sy.round);
  sy.active = true;
  sy.round = round;
  record(round, s).sync_start_s = engine_.now().seconds();
  if (dp_ == 1 || stage_params_[s] == 0) return sync_done(s);
  const uint64_t params = (stage_params_[s] + tp_ - 1) / tp_;
  // Every group's phases first (the factory sees the stage's observations), then start them.
  for (uint32_t t = 0; t < tp_; ++t) {
    sy.groups[t].phases = factory_(round, s, t, params);
    sy.groups[t].phase = 0;
  }
  sy.pending = tp_;
  for (uint32_t t = 0; t < tp_; ++t) {
    if (sy.groups[t].phases.empty()) {
      group_done(s);
    } else {
      start_phase(s, t);
    }
  }
}

void ParallelTrainingJob::start_phase(uint32_t s, uint32_t t) {
  StageSync::Group& g = syncs_[s]->groups[t];
  SyncPhase& phase = g.phases[g.phase];
  RunnerOptions ro;
  ro.rank_map = g.ranks;
  ro.ecmp_salt = options_.ecmp_salt + 0x10000ull * (uint64_t{s} * tp_ + t + 1) + g.phase;
  g.runner = std::make_unique<ScheduleRunner>(engine_, network_, topology_, *phase.generator, phase.binder,
                                              phase.costs ? *phase.costs : options_.kernel_costs, std::move(ro));
  g.runner->start([this, s, t](const ScheduleTiming&) {
    engine_.schedule_in(Duration::zero(), [this, s, t] { phase_done(s, t); });
  });
}

void ParallelTrainingJob::phase_done(uint32_t s, uint32_t t) {
  StageSync& sy = *syncs_[s];
  StageSync::Group& g = sy.groups[t];
  record(sy.round, s).sync_wire_bytes += g.runner->timing().wire_bytes;
  g.runner.reset();
  if (++g.phase < g.phases.size()) return start_phase(s, t);
  g.phases.clear();
  group_done(s);
}

void ParallelTrainingJob::group_done(uint32_t s) {
  StageSync& sy = *syncs_[s];
  CCSIM_CHECK(sy.pending > 0, "stage {}: more sync groups ended than started", s);
  if (--sy.pending == 0) sync_done(s);
}

void ParallelTrainingJob::sync_done(uint32_t s) {
  StageSync& sy = *syncs_[s];
  sy.active = false;
  const uint32_t round = sy.round;
  StageRoundRecord& rec = record(round, s);
  rec.sync_end_s = engine_.now().seconds();
  rec.complete = true;
  engine_.schedule_in(Duration::from_seconds_ceil(optimizer_share_s_[s]),
                      [this, s, round] { stage_optimized(s, round); });
}

void ParallelTrainingJob::stage_optimized(uint32_t s, uint32_t round) {
  if (round + 1 < options_.rounds) {
    for (uint32_t d = 0; d < dp_; ++d) open_round(replica(d, s), round + 1);
    return;
  }
  optimizer_end_s_[s] = engine_.now().seconds();
  if (++stages_finished_ == pp_) {
    finished_ = true;
    if (on_finished_) on_finished_();
  }
}

std::vector<ParallelRoundRecord> ParallelTrainingJob::round_records() const {
  std::vector<ParallelRoundRecord> out;
  for (uint32_t r = 0; r < round_start_s_.size(); ++r) {
    if (stage_records_.size() < (size_t{r} + 1) * pp_) break;
    ParallelRoundRecord rr;
    rr.round = r;
    rr.start_s = round_start_s_[r];
    bool complete = true;
    for (uint32_t s = 0; s < pp_; ++s) {
      const StageRoundRecord& rec = stage_records_[size_t{r} * pp_ + s];
      complete = complete && rec.complete;
      rr.backward_end_s = std::max(rr.backward_end_s, rec.backward_end_s);
      rr.sync_end_s = std::max(rr.sync_end_s, rec.sync_end_s);
      rr.compute_s = std::max(rr.compute_s, rec.compute_busy_s);
    }
    if (!complete) break;
    if (r + 1 < round_start_s_.size()) {
      rr.end_s = round_start_s_[r + 1];
    } else if (finished_ && r + 1 == options_.rounds) {
      rr.end_s = *std::max_element(optimizer_end_s_.begin(), optimizer_end_s_.end());
    } else {
      break;
    }
    rr.exposed_comm_s = std::max(0.0, rr.sync_end_s - rr.backward_end_s);
    out.push_back(rr);
  }
  return out;
}

}  // namespace ccsim::sim
