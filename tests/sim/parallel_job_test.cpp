// The 3D-parallel (TP x PP x DP) round model: cross-checks against the analytic pipeline executor,
// hand-computed TP all-reduce, p2p and DP-sync timelines, stragglers and input validation.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "sim/training/parallel_job.hpp"
#include "sim/training/pipeline_schedule.hpp"
#include "sim/training/stragglers.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/parallel_groups.hpp"

namespace ccsim::sim {
namespace {

constexpr double kTol = 1e-9;

topo::ParallelGroups layout(uint32_t tp, uint32_t pp, uint32_t dp) {
  auto g = topo::ParallelGroups::make({.tp = tp, .pp = pp, .dp = dp}, tp * pp * dp);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

// A cluster of `nodes` x `gpus` ranks on one star switch (NIC nic_Bps per GPU, intra-node fabric
// intra_Bps), no latency.
topo::Topology star(uint32_t nodes, uint32_t gpus, double nic_Bps, double intra_Bps) {
  topo::ClusterSpec spec;
  spec.topology = "star";
  spec.nodes = nodes;
  spec.gpus_per_node = gpus;
  spec.nic_Bps = nic_Bps;
  spec.link_latency_s = 0;
  spec.intra_Bps = gpus > 1 ? intra_Bps : 0;
  auto t = topo::build_topology(spec);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

StragglerModel no_stragglers() { return *StragglerModel::make({}, 1); }

// Ring all-reduce of the shard's fp32 gradient over the n-rank DP group; records every call.
struct FactoryCall {
  uint32_t round, stage, tp_index;
  uint64_t params;
  double time_s;
};
StagePhaseFactory ring_factory(uint32_t n, std::vector<FactoryCall>* calls = nullptr, const Engine* engine = nullptr) {
  return [n, calls, engine](uint32_t round, uint32_t stage, uint32_t t, uint64_t params) {
    if (calls) calls->push_back({round, stage, t, params, engine ? engine->now().seconds() : 0.0});
    std::vector<SyncPhase> phases;
    SyncPhase p;
    p.name = "ring";
    p.generator = topo::make_ring(topo::CollectiveOp::kAllReduce, n, params, {}, false);
    p.binder = [](topo::Schedule& s, topo::OpId first, topo::OpId end) { bind_uncompressed(s, first, end, 4); };
    phases.push_back(std::move(p));
    return phases;
  };
}

// One layer per stage with the given per-stage times and activation bytes.
std::vector<TrainingLayer> stage_layers(const std::vector<double>& f, const std::vector<double>& b, uint64_t params,
                                        uint64_t activation_bytes) {
  std::vector<TrainingLayer> layers;
  for (size_t s = 0; s < f.size(); ++s) layers.push_back({fmt::format("s{}", s), params, f[s], b[s], activation_bytes});
  return layers;
}

std::vector<uint32_t> one_layer_per_stage(uint32_t pp) {
  std::vector<uint32_t> starts;
  for (uint32_t s = 0; s < pp; ++s) starts.push_back(s);
  return starts;
}

struct Outcome {
  bool finished = false;
  std::vector<ParallelOpRecord> ops;
  std::vector<StageRoundRecord> stages;
  std::vector<ParallelRoundRecord> rounds;
  double end_s = 0;
};

Outcome run_job(const topo::Topology& topo, const topo::ParallelGroups& g, std::vector<TrainingLayer> layers,
                std::vector<uint32_t> starts, ParallelJobOptions opt, StagePhaseFactory factory,
                const StragglerModel& stragglers) {
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  opt.record_ops = true;
  auto job = ParallelTrainingJob::make(engine, net, topo, g, std::move(layers), std::move(starts), stragglers, opt,
                                       std::move(factory));
  EXPECT_TRUE(job.ok()) << job.status().message();
  if (!job.ok()) return {};
  (*job)->start();
  engine.run();
  return {(*job)->finished(), (*job)->op_records(), (*job)->stage_records(), (*job)->round_records(),
          engine.now().seconds()};
}

// Every op of replica d in round 0 matches the analytic executor's start and end.
void expect_ops_match(const Outcome& out, const PipelineTimeline& tl, uint32_t replica) {
  size_t matched = 0;
  for (const ParallelOpRecord& r : out.ops) {
    if (r.round != 0 || r.replica != replica) continue;
    for (const PipelineOpTiming& t : tl.ops[r.stage]) {
      if (t.op != r.op) continue;
      SCOPED_TRACE(fmt::format("stage {} {}", r.stage, r.op.to_string()));
      EXPECT_NEAR(r.start_s, t.start_s, kTol);
      EXPECT_NEAR(r.end_s, t.end_s, kTol);
      ++matched;
    }
  }
  size_t total = 0;
  for (const auto& s : tl.ops) total += s.size();
  EXPECT_EQ(matched, total);
}

TEST(ParallelJob, SplitStagesBalancesForwardPlusBackwardContiguously) {
  std::vector<TrainingLayer> layers;
  for (double t : {0.5, 0.5, 0.5, 0.5, 2.0}) layers.push_back({"l", 1, t, t, 0});  // f + b = 1, 1, 1, 1, 4
  // Total 8: the half-way point 4 is reached after 4 layers.
  EXPECT_EQ(*split_stages(layers, 2), (std::vector<uint32_t>{0, 4}));
  // Thirds 2.67 and 5.33: prefix 3 (k = 3) is nearest the first; the second must leave a layer.
  EXPECT_EQ(*split_stages(layers, 3), (std::vector<uint32_t>{0, 3, 4}));
  EXPECT_EQ(*split_stages(layers, 5), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  std::vector<TrainingLayer> equal(8, {"l", 1, 1.0, 2.0, 0});
  EXPECT_EQ(*split_stages(equal, 4), (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_FALSE(split_stages(equal, 9).ok());
  EXPECT_FALSE(split_stages(equal, 0).ok());
}

TEST(ParallelJob, PipelineOnlyMatchesTheAnalyticExecutor) {
  // tp = dp = 1, pp = 3, m = 4, no activation bytes: every op's start and end, each stage's last
  // backward and the makespan equal execute_pipeline(order, f, b, 0), GPipe and 1F1B. Stages 0
  // and 2 have two layers each (their times add up).
  const topo::Topology topo = star(3, 1, 1e9, 0);
  const std::vector<TrainingLayer> layers = {{"a", 10, 0.5, 1.0, 0}, {"b", 10, 0.25, 0.5, 0}, {"c", 10, 1.0, 2.5, 0},
                                             {"d", 10, 0.5, 1.0, 0}, {"e", 10, 0.5, 0.75, 0}};
  const std::vector<double> f = {0.75, 1.0, 1.0}, b = {1.5, 2.5, 1.75};
  for (PipelineKind kind : {PipelineKind::kGPipe, PipelineKind::k1F1B}) {
    SCOPED_TRACE(pipeline_kind_name(kind));
    ParallelJobOptions opt;
    opt.micro_batches = 4;
    opt.schedule = kind;
    const Outcome out = run_job(topo, layout(1, 3, 1), layers, {0, 2, 3}, opt, nullptr, no_stragglers());
    ASSERT_TRUE(out.finished);
    const PipelineTimeline tl = execute_pipeline(*pipeline_order(kind, 3, 4), f, b, 0.0);
    expect_ops_match(out, tl, 0);
    ASSERT_EQ(out.stages.size(), 3u);
    for (uint32_t s = 0; s < 3; ++s) {
      EXPECT_NEAR(out.stages[s].backward_end_s, tl.last_backward_end_s[s], kTol);
      EXPECT_NEAR(out.stages[s].compute_busy_s, tl.busy_s[s], kTol);
      EXPECT_NEAR(out.stages[s].micro_backward_s, b[s], kTol);
      EXPECT_NEAR(out.stages[s].sync_end_s, out.stages[s].sync_start_s, 0.0);  // dp = 1: instantaneous
    }
    ASSERT_EQ(out.rounds.size(), 1u);
    EXPECT_NEAR(out.rounds[0].backward_end_s, tl.makespan_s, kTol);
    EXPECT_NEAR(out.rounds[0].end_s, tl.makespan_s, kTol);
    EXPECT_NEAR(out.rounds[0].compute_s, 4 * (1.0 + 2.5), kTol);  // stage 1 is the busiest
  }
}

TEST(ParallelJob, ActivationTransfersDelayEachHopByBytesOverRate) {
  // A 4-node ring (a dedicated 1 GB/s link per direction between neighbours), one layer per stage,
  // 250 MB activations: every p2p hop takes d = 0.25 s, and every op matches execute_pipeline with
  // p2p_s = d (no two transfers ever share a link: consecutive sends on a link are >= 0.5 s apart).
  topo::ClusterSpec spec;
  spec.topology = "ring";
  spec.nodes = 4;
  spec.nic_Bps = 1e9;
  spec.link_latency_s = 0;
  const topo::Topology topo = *topo::build_topology(spec);
  const std::vector<double> f = {1.0, 1.5, 1.0, 0.5}, b = {2.0, 1.5, 2.0, 1.0};
  for (PipelineKind kind : {PipelineKind::kGPipe, PipelineKind::k1F1B}) {
    SCOPED_TRACE(pipeline_kind_name(kind));
    ParallelJobOptions opt;
    opt.micro_batches = 4;
    opt.schedule = kind;
    const Outcome out =
        run_job(topo, layout(1, 4, 1), stage_layers(f, b, 10, 250000000), one_layer_per_stage(4), opt, nullptr,
                no_stragglers());
    ASSERT_TRUE(out.finished);
    const PipelineTimeline tl = execute_pipeline(*pipeline_order(kind, 4, 4), f, b, 0.25);
    expect_ops_match(out, tl, 0);
    for (uint32_t s = 0; s < 4; ++s) EXPECT_NEAR(out.stages[s].backward_end_s, tl.last_backward_end_s[s], kTol);
    EXPECT_NEAR(out.rounds.at(0).backward_end_s, tl.makespan_s, kTol);
    // Same inputs, same event order: a second run gives the identical op log.
    const Outcome again =
        run_job(topo, layout(1, 4, 1), stage_layers(f, b, 10, 250000000), one_layer_per_stage(4), opt, nullptr,
                no_stragglers());
    ASSERT_EQ(again.ops.size(), out.ops.size());
    for (size_t k = 0; k < out.ops.size(); ++k) {
      EXPECT_EQ(again.ops[k].stage, out.ops[k].stage);
      EXPECT_EQ(again.ops[k].op, out.ops[k].op);
      EXPECT_EQ(again.ops[k].end_s, out.ops[k].end_s);
    }
  }
}

TEST(ParallelJob, StaggeredDataParallelSyncStartsAndRingTime) {
  // pp = 4, dp = 2, tp = 1, GPipe, m = 4, t_f = 1, t_b = 2, 100 MB activations over 1 GB/s NICs
  // (d = 0.1 s). Node s holds stage s's two replicas, so the DP ring runs on the 2 GB/s fabric
  // and never meets the p2p traffic. Closed form: makespan = (m+p-1)(t_f+t_b) + 2(p-1)d = 21.6;
  // stage s's sync starts at makespan - s(t_b + d) (stage 3 first, stage 0 last) and lasts
  // 2(n-1)/n · 4P / 2 GB/s = 2 ms for P = 1e6 params, n = 2.
  const topo::Topology topo = star(4, 2, 1e9, 2e9);
  const uint64_t P = 1000000;
  const std::vector<double> f(4, 1.0), b(4, 2.0);
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  std::vector<FactoryCall> calls;
  const ParallelTrainingJob* observed = nullptr;
  std::vector<bool> saw_backward_end;
  StagePhaseFactory inner = ring_factory(2, &calls, &engine);
  StagePhaseFactory factory = [&](uint32_t round, uint32_t stage, uint32_t t, uint64_t params) {
    // A controller reads the stage's observations before deciding.
    const StageRoundRecord& rec = observed->stage_records().at(size_t{round} * 4 + stage);
    saw_backward_end.push_back(rec.backward_done && rec.backward_end_s == engine.now().seconds() &&
                               rec.sync_start_s == engine.now().seconds());
    return inner(round, stage, t, params);
  };
  ParallelJobOptions opt;
  opt.micro_batches = 4;
  const StragglerModel none = no_stragglers();
  auto job = ParallelTrainingJob::make(engine, net, topo, layout(1, 4, 2), stage_layers(f, b, P, 100000000),
                                       one_layer_per_stage(4), none, opt, factory);
  ASSERT_TRUE(job.ok()) << job.status().message();
  observed = job->get();
  (*job)->start();
  engine.run();
  ASSERT_TRUE((*job)->finished());

  const double d = 0.1, makespan = 7 * 3.0 + 2 * 3 * d;
  const PipelineTimeline tl = execute_pipeline(*pipeline_order(PipelineKind::kGPipe, 4, 4), f, b, d);
  EXPECT_NEAR(tl.makespan_s, makespan, kTol);
  const double ring = 2.0 * (2 - 1) / 2 * 4.0 * P / 2e9;
  const auto& recs = (*job)->stage_records();
  ASSERT_EQ(recs.size(), 4u);
  for (uint32_t s = 0; s < 4; ++s) {
    SCOPED_TRACE(fmt::format("stage {}", s));
    EXPECT_NEAR(recs[s].sync_start_s, makespan - s * (2.0 + d), kTol);
    EXPECT_NEAR(recs[s].sync_start_s, tl.last_backward_end_s[s], kTol);
    EXPECT_NEAR(recs[s].sync_end_s - recs[s].sync_start_s, ring, kTol);
    EXPECT_EQ(recs[s].sync_wire_bytes, 2u * 2u * (4 * P / 2));  // 2(n-1) steps x n sends x 4P/n
    EXPECT_TRUE(recs[s].complete);
  }
  // The factory ran once per stage, latest stage first, when its sync started, with all its params.
  ASSERT_EQ(calls.size(), 4u);
  uint64_t params = 0;
  for (uint32_t k = 0; k < 4; ++k) {
    EXPECT_EQ(calls[k].stage, 3 - k);
    EXPECT_EQ(calls[k].tp_index, 0u);
    EXPECT_NEAR(calls[k].time_s, makespan - (3 - k) * (2.0 + d), kTol);
    params += calls[k].params;
  }
  EXPECT_EQ(params, 4 * P);  // every layer param synchronized once
  EXPECT_EQ(saw_backward_end, std::vector<bool>(4, true));
  const auto rounds = (*job)->round_records();
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_NEAR(rounds[0].backward_end_s, makespan, kTol);
  EXPECT_NEAR(rounds[0].sync_end_s, makespan + ring, kTol);
  EXPECT_NEAR(rounds[0].exposed_comm_s, ring, kTol);
}

TEST(ParallelJob, TensorParallelAllReducesBlockEachLayer) {
  // tp = 2 on one node (fabric 2 GB/s), one stage, m = 1: a 2-rank ring all-reduce of A = 4 MB
  // sends A/2 per step for 2 steps, A / 2 GB/s = 2 ms. Layers a and c have params (2 all-reduces
  // each per op); b has none (no all-reduce). F = (1 + 0.25 + 1)/2 + 2·2·2 ms = 1.133 s,
  // B = (2 + 0.5 + 2)/2 + 8 ms = 2.258 s.
  const topo::Topology topo = star(1, 2, 1e9, 2e9);
  const uint64_t A = 4000000;
  const std::vector<TrainingLayer> layers = {{"a", 100, 1.0, 2.0, A}, {"b", 0, 0.25, 0.5, A}, {"c", 100, 1.0, 2.0, A}};
  for (uint32_t allreduces : {2u, 1u, 0u}) {
    SCOPED_TRACE(fmt::format("{} all-reduces per layer", allreduces));
    ParallelJobOptions opt;
    opt.tp_allreduces = allreduces;
    const Outcome out = run_job(topo, layout(2, 1, 1), layers, {0}, opt, nullptr, no_stragglers());
    ASSERT_TRUE(out.finished);
    ASSERT_EQ(out.ops.size(), 2u);
    const double ar = 2 * allreduces * (A / 2e9);
    const double F = 1.125 + ar, B = 2.25 + ar;
    EXPECT_EQ(out.ops[0].op.kind, PipelineOp::kForward);
    EXPECT_NEAR(out.ops[0].start_s, 0.0, kTol);
    EXPECT_NEAR(out.ops[0].end_s, F, kTol);
    EXPECT_NEAR(out.ops[1].end_s - out.ops[1].start_s, B, kTol);
    EXPECT_NEAR(out.stages.at(0).micro_backward_s, B, kTol);
    EXPECT_NEAR(out.stages.at(0).compute_busy_s, F + B, kTol);
    EXPECT_NEAR(out.rounds.at(0).backward_end_s, F + B, kTol);
  }
}

TEST(ParallelJob, TensorAndPipelineSplitActivationsOverTpFlows) {
  // tp = 2, pp = 2 on two nodes (stage s on node s, fabric 2 GB/s, NICs 1 GB/s): each op pays
  // 2 TP all-reduces of A = 4 MB (2 ms each), and a hop sends A/2 per TP rank over its own NIC
  // (2 ms). Every op matches execute_pipeline(f = 0.5 + 4 ms, b = 1 + 4 ms, p2p = 2 ms).
  const topo::Topology topo = star(2, 2, 1e9, 2e9);
  const uint64_t A = 4000000;
  const std::vector<double> f = {1.0, 1.0}, b = {2.0, 2.0};
  for (PipelineKind kind : {PipelineKind::kGPipe, PipelineKind::k1F1B}) {
    SCOPED_TRACE(pipeline_kind_name(kind));
    ParallelJobOptions opt;
    opt.micro_batches = 3;
    opt.schedule = kind;
    const Outcome out =
        run_job(topo, layout(2, 2, 1), stage_layers(f, b, 100, A), {0, 1}, opt, nullptr, no_stragglers());
    ASSERT_TRUE(out.finished);
    const std::vector<double> ef = {0.504, 0.504}, eb = {1.004, 1.004};
    const PipelineTimeline tl = execute_pipeline(*pipeline_order(kind, 2, 3), ef, eb, 0.002);
    expect_ops_match(out, tl, 0);
  }
}

TEST(ParallelJob, ExposedCommunicationAndOptimizerGateTheNextRound) {
  // pp = 2, dp = 2 (stage s on node s, fabric 1 GB/s), GPipe, m = 2, t_f = t_b = 1, no
  // activations, 2 rounds, optimizer 1 s split by params (P0 = 2.5e8 → 0.25 s, P1 = 7.5e8 → 0.75 s).
  // DP ring (n = 2) lasts 4P / 1 GB/s: 1 s for stage 0, 3 s for stage 1.
  // Round 0: stage 1 ends backward at 5, syncs [5, 8]; stage 0 at 6, syncs [6, 7].
  //   Stage 0 reopens at 7.25, stage 1 at 8.75.
  // Round 1: stage 0 F [7.25, 9.25]; stage 1 F [8.75, 10.75], B [10.75, 12.75] → sync [12.75, 15.75];
  //   stage 0 B [11.75, 13.75] → sync [13.75, 14.75]. Ends at max(14.75 + 0.25, 15.75 + 0.75) = 16.5.
  const topo::Topology topo = star(2, 2, 1e9, 1e9);
  const std::vector<TrainingLayer> layers = {{"s0", 250000000, 1.0, 1.0, 0}, {"s1", 750000000, 1.0, 1.0, 0}};
  ParallelJobOptions opt;
  opt.rounds = 2;
  opt.micro_batches = 2;
  opt.optimizer_s = 1.0;
  const Outcome out = run_job(topo, layout(1, 2, 2), layers, {0, 1}, opt, ring_factory(2), no_stragglers());
  ASSERT_TRUE(out.finished);
  ASSERT_EQ(out.stages.size(), 4u);
  const double want[4][3] = {{6, 6, 7}, {5, 5, 8}, {13.75, 13.75, 14.75}, {12.75, 12.75, 15.75}};
  for (size_t k = 0; k < 4; ++k) {
    SCOPED_TRACE(fmt::format("round {} stage {}", out.stages[k].round, out.stages[k].stage));
    EXPECT_NEAR(out.stages[k].backward_end_s, want[k][0], kTol);
    EXPECT_NEAR(out.stages[k].sync_start_s, want[k][1], kTol);
    EXPECT_NEAR(out.stages[k].sync_end_s, want[k][2], kTol);
    EXPECT_NEAR(out.stages[k].compute_busy_s, 4.0, kTol);
  }
  ASSERT_EQ(out.rounds.size(), 2u);
  EXPECT_NEAR(out.rounds[0].start_s, 0.0, kTol);
  EXPECT_NEAR(out.rounds[0].backward_end_s, 6.0, kTol);
  EXPECT_NEAR(out.rounds[0].sync_end_s, 8.0, kTol);
  EXPECT_NEAR(out.rounds[0].exposed_comm_s, 2.0, kTol);
  EXPECT_NEAR(out.rounds[0].end_s, 7.25, kTol);  // stage 0's sync end 7 + its optimizer share 0.25
  EXPECT_NEAR(out.rounds[0].compute_s, 4.0, kTol);
  EXPECT_NEAR(out.rounds[1].start_s, 7.25, kTol);
  EXPECT_NEAR(out.rounds[1].backward_end_s, 13.75, kTol);
  EXPECT_NEAR(out.rounds[1].sync_end_s, 15.75, kTol);
  EXPECT_NEAR(out.rounds[1].exposed_comm_s, 2.0, kTol);
  EXPECT_NEAR(out.rounds[1].end_s, 16.5, kTol);
  EXPECT_NEAR(out.end_s, 16.5, kTol);
  // Stage 1's first forward of round 1 waited for its optimizer (8.75), not only its input (8.25).
  for (const ParallelOpRecord& r : out.ops) {
    if (r.round == 1 && r.stage == 1 && r.op == PipelineOp{PipelineOp::kForward, 0}) {
      EXPECT_NEAR(r.start_s, 8.75, kTol);
    }
  }
}

TEST(ParallelJob, PersistentStragglerSlowsTheRoundAsThePipelinePredicts) {
  // pp = 2, dp = 2, GPipe, m = 2, t_f = 1, t_b = 2; worker 1 = replica 0, stage 1 computes 2x slower.
  // Replica 0 follows execute_pipeline(f = {1, 2}, b = {2, 4}): stage 1 ends backward at 13,
  // stage 0 at 15 (vs 7 and 9 without the straggler); replica 1 is unaffected, the stage maxima
  // are replica 0's. The round (sync of 250 params: 1 µs) ends 6 s later.
  const topo::Topology topo = star(2, 2, 1e9, 1e9);
  StragglerSpec spec;
  spec.model = StragglerKind::kPersistent;
  spec.slow_workers = {1};
  spec.slow_factor = 2.0;
  const StragglerModel slow = *StragglerModel::make(spec, 1);
  const StragglerModel none = no_stragglers();
  ParallelJobOptions opt;
  opt.micro_batches = 2;
  const auto order = *pipeline_order(PipelineKind::kGPipe, 2, 2);
  const PipelineTimeline base = execute_pipeline(order, std::vector<double>{1, 1}, std::vector<double>{2, 2}, 0);
  const PipelineTimeline slowed = execute_pipeline(order, std::vector<double>{1, 2}, std::vector<double>{2, 4}, 0);
  EXPECT_NEAR(slowed.makespan_s - base.makespan_s, 6.0, kTol);
  const double ring = 4.0 * 250 / 1e9;
  std::vector<double> duration;
  for (const StragglerModel* m : {&none, &slow}) {
    const Outcome out = run_job(topo, layout(1, 2, 2), stage_layers({1, 1}, {2, 2}, 250, 0), {0, 1}, opt,
                                ring_factory(2), *m);
    ASSERT_TRUE(out.finished);
    const PipelineTimeline& tl = m == &none ? base : slowed;
    expect_ops_match(out, tl, 0);
    expect_ops_match(out, base, 1);
    EXPECT_NEAR(out.stages.at(0).backward_end_s, tl.last_backward_end_s[0], kTol);
    EXPECT_NEAR(out.stages.at(1).backward_end_s, tl.last_backward_end_s[1], kTol);
    EXPECT_NEAR(out.rounds.at(0).end_s, tl.makespan_s + ring, kTol);
    duration.push_back(out.rounds.at(0).duration());
    if (m == &slow) {
      EXPECT_NEAR(out.stages[1].backward_end_s, 13.0, kTol);
      EXPECT_NEAR(out.stages[0].backward_end_s, 15.0, kTol);
      EXPECT_NEAR(out.stages[1].compute_busy_s, (2 * (2 + 4) + 2 * (1 + 2)) / 2.0, kTol);  // mean over replicas
      EXPECT_NEAR(out.stages[1].micro_backward_s, (4 + 4 + 2 + 2) / 4.0, kTol);
      EXPECT_NEAR(out.rounds[0].compute_s, 9.0, kTol);
    }
  }
  EXPECT_NEAR(duration[1] - duration[0], 6.0, kTol);
}

TEST(ParallelJob, BadLayoutsAreRejectedWithAClearStatus) {
  const topo::Topology topo = star(4, 1, 1e9, 0);
  Engine engine;
  FlowNetwork net(engine, link_specs(topo));
  const StragglerModel none = no_stragglers();
  const auto layers = stage_layers({1, 1}, {2, 2}, 10, 0);
  auto expect_error = [&](const topo::ParallelGroups& g, std::vector<TrainingLayer> l, std::vector<uint32_t> starts,
                          ParallelJobOptions opt, StagePhaseFactory factory, const std::string& needle) {
    auto job = ParallelTrainingJob::make(engine, net, topo, g, std::move(l), std::move(starts), none, opt,
                                         std::move(factory));
    ASSERT_FALSE(job.ok()) << needle;
    EXPECT_TRUE(job.status().is_input_error());
    EXPECT_NE(job.status().message().find(needle), std::string::npos) << job.status().message();
  };
  ParallelJobOptions opt;
  // Two layers for three stages.
  expect_error(layout(1, 3, 1), layers, {0, 1, 2}, opt, nullptr, "at least as many layers");
  EXPECT_FALSE(split_stages(layers, 3).ok());
  // m = 0.
  ParallelJobOptions zero_m;
  zero_m.micro_batches = 0;
  expect_error(layout(1, 2, 1), layers, {0, 1}, zero_m, nullptr, "micro_batches");
  ParallelJobOptions zero_rounds;
  zero_rounds.rounds = 0;
  expect_error(layout(1, 2, 1), layers, {0, 1}, zero_rounds, nullptr, "rounds");
  // Stage starts of the wrong size, not from 0.
  expect_error(layout(1, 2, 1), layers, {0}, opt, nullptr, "stage_starts");
  expect_error(layout(1, 2, 1), layers, {1, 0}, opt, nullptr, "stage_starts/0");
  // More ranks than the topology has.
  expect_error(layout(2, 2, 2), layers, {0, 1}, opt, ring_factory(2), "exceed the topology");
  // dp > 1 without a sync protocol.
  expect_error(layout(1, 2, 2), layers, {0, 1}, opt, nullptr, "factory");
  // A TP-all-reduced layer too small to split over the ring.
  expect_error(layout(2, 1, 1), stage_layers({1}, {2}, 10, 4), {0}, opt, nullptr, "activation_bytes");
  // A valid job builds.
  auto ok = ParallelTrainingJob::make(engine, net, topo, layout(1, 2, 2), layers, {0, 1}, none, opt, ring_factory(2));
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace ccsim::sim
