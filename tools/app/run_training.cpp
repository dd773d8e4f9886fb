#include "tools/app/run_training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "algorithms/bucket_codecs.hpp"
#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"
#include "sim/base/units.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/parallel_job.hpp"
#include "tools/app/seams.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// The network of one scheme's run, with its tenants (ECMP salt per scheme).
struct Network {
  sim::Engine engine;
  sim::FlowNetwork network;
  std::unique_ptr<sim::TenantTraffic> tenants;
  Network(const Scenario& s, const RunPlan& plan, size_t ci)
      : network(engine, sim::link_specs(*plan.topology)) {
    if (s.outputs.link_timeline_bin_s > 0)
      network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
    auto traffic = sim::TenantTraffic::make(engine, network, *plan.topology, s.network.tenants, 0x7E4A47 + ci);
    CCSIM_CHECK(traffic.ok(), "tenants passed the scenario's checks: {}", traffic.status().message());
    tenants = std::move(*traffic);
  }
};

// A bucketed sync: its gradient (and sharded: weight) codecs, the factory of each bucket's phases.
struct BucketedSync {
  std::unique_ptr<algo::BucketCodecs> grads, weights;
  std::vector<topo::KernelKind> charged, weight_charged;
  bool same_weights = false;
  std::unique_ptr<sim::BucketCollectiveSync> sync;
};

std::string bucketed_desc(const Scenario& s, const CompressionConfig& cc, const SchemePlan& sp, size_t buckets,
                          const algo::BucketCodecs& codecs) {
  std::string desc =
      fmt::format("DDP buckets of {} ({} buckets), {} {}, {}",
                  format_quantity(static_cast<double>(s.sync.bucket_bytes), UnitKind::kBytes), buckets,
                  sp.collective->algorithm, topo::collective_op_name(sp.collective->operation), cc.scheme);
  if (s.sync.mode == SyncMode::kSharded)
    desc += fmt::format("; weights all-gathered by {} in {}", cc.weights.algorithm, cc.weights.scheme);
  if (codecs.planned())
    desc += codecs.replanned() ? fmt::format("; metadata plan every {} round(s) per bucket", s.sync.replan_every)
                               : "; metadata plan once per bucket size";
  return desc;
}

// Every entry's bucket codecs (gradients, then weights where sharded), made together so that the
// plans that can share a synthetic draw share it (BucketCodecs::make_all).
struct EntryCodecs {
  std::unique_ptr<algo::BucketCodecs> grads, weights;
};

Result<std::vector<EntryCodecs>> make_entry_codecs(const LoadedScenario& loaded) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  std::vector<EntryCodecs> out(s.compression.size());
  if (s.sync.mode == SyncMode::kBroadcast) return out;
  std::vector<algo::BucketCodecs::Config> configs;
  std::vector<std::vector<algo::BucketShape>> shapes;
  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    const CompressionConfig& cc = s.compression[ci];
    const SchemePlan& sp = plan.schemes[ci];
    algo::BucketCodecs::Config config{cc.scheme, cc.params, sp.collective, plan.topology->num_ranks(), {}, 0};
    config.base.segments = static_cast<uint32_t>(s.collective.segments);
    config.base.gpus_per_node = plan.topology->gpus_per_node();
    config.replan_every = static_cast<uint32_t>(s.sync.replan_every);
    configs.push_back(config);
    shapes.push_back(sp.buckets);
    if (sp.weights == nullptr) continue;
    configs.push_back({cc.weights.scheme, cc.weights.params, sp.weights, config.ranks, config.base, 0});
    shapes.push_back(algo::bucket_shapes(nullptr, plan.buckets, plan.layer_params, 0));
  }
  CCSIM_ASSIGN_OR_RETURN(std::vector<algo::BucketCodecs> made,
                         algo::BucketCodecs::make_all(std::move(configs), std::move(shapes), plan.synthetic));
  size_t k = 0;
  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    out[ci].grads = std::make_unique<algo::BucketCodecs>(std::move(made[k++]));
    if (plan.schemes[ci].weights != nullptr)
      out[ci].weights = std::make_unique<algo::BucketCodecs>(std::move(made[k++]));
  }
  return out;
}

std::unique_ptr<BucketedSync> make_bucketed(const LoadedScenario& loaded, size_t ci, EntryCodecs codecs,
                                            sim::TrainingJob*& job, algo::RoundBytes& bytes) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const CompressionConfig& cc = s.compression[ci];
  const SchemePlan& sp = plan.schemes[ci];
  auto b = std::make_unique<BucketedSync>();
  b->grads = std::move(codecs.grads);
  bytes = b->grads->model_bytes();
  if (codecs.weights) {
    b->weights = std::move(codecs.weights);
    b->same_weights = cc.weights.scheme == cc.scheme && cc.weights.params == cc.params;
  }
  BucketedSync* raw = b.get();
  auto factory = [raw, &job, &plan, scheme = cc.scheme](uint32_t round, uint32_t bucket, uint64_t) {
    std::vector<algo::PlanDecision> decisions;
    const auto lowered = raw->grads->round(round, bucket, decisions);
    CCSIM_CHECK(lowered.ok(), "bucket {} in round {}: {}", bucket, round, lowered.status().message());
    for (const algo::PlanDecision& d : decisions)
      job->log({round, 0, -1, job->engine().now().seconds(), scheme, d.quantity, d.value,
                fmt::format("bucket={} {}", bucket, d.detail)});
    std::vector<sim::SyncPhase> phases;
    sim::append_sync_phases((*lowered)->phases(), raw->weights ? "gradients" : "collective", false, plan.costs, phases,
                            raw->charged);
    if (raw->weights) {
      const auto weights = raw->weights->round(round, bucket, decisions);
      CCSIM_CHECK(weights.ok(), "weights of bucket {}: {}", bucket, weights.status().message());
      sim::append_sync_phases((*weights)->phases(), "weights", true, plan.costs, phases,
                              raw->same_weights ? raw->charged : raw->weight_charged);
    }
    return phases;
  };
  b->sync = std::make_unique<sim::BucketCollectiveSync>(plan.buckets, factory,
                                                        plan.costs.scheme(cc.scheme, cc.params.dump()),
                                                        bucketed_desc(s, cc, sp, plan.buckets.size(), *b->grads));
  return b;
}

// The broadcast's rate control: AQGB's, or the scheme's exact wire size per entry.
std::unique_ptr<sim::BroadcastControl> broadcast_control(const Scenario& s, const CompressionConfig& cc,
                                                         uint32_t workers) {
  if (cc.controller.kind == ControllerKind::kAqgb)
    return std::make_unique<AqgbBroadcastControl>(
        algo::AqgbController(cc.controller.q_floor, cc.controller.second_stage));
  auto comp = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
  CCSIM_CHECK(comp.ok(), "{}", comp.status().message());
  const auto seg = static_cast<uint64_t>(s.sync.segment);
  const double bits = 8.0 * static_cast<double>((*comp)->wire_bytes({0, seg}, {1, workers})) / static_cast<double>(seg);
  return std::make_unique<sim::FixedBroadcastBits>(cc.scheme, bits);
}

// One scheme's data-parallel run.
// `replay`: RunHooks::replay_phases.
Result<TrainingResult> train_scheme(const LoadedScenario& loaded, size_t ci, EntryCodecs codecs, bool replay,
                                    std::string& tenants_desc) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const WorkloadConfig& wl = s.workload;
  const CompressionConfig& cc = s.compression[ci];
  const uint32_t m = plan.topology->num_ranks();
  TrainingResult res;
  res.label = plan.schemes[ci].label;
  res.scheme = cc.scheme;
  res.params = cc.params;
  Network net(s, plan, ci);
  tenants_desc = net.tenants->describe();
  sim::TrainingJob* job_ptr = nullptr;
  std::unique_ptr<BucketedSync> bucketed;
  std::unique_ptr<sim::BroadcastControl> control;
  std::unique_ptr<sim::BroadcastSync> broadcast;
  sim::GradientSync* sync = nullptr;
  if (s.sync.mode == SyncMode::kBroadcast) {
    control = broadcast_control(s, cc, m);
    broadcast = std::make_unique<sim::BroadcastSync>(
        sim::BroadcastOptions{static_cast<uint64_t>(s.sync.segment), plan.costs.scheme(cc.scheme, cc.params.dump())},
        *control);
    sync = broadcast.get();
  } else {
    bucketed = make_bucketed(loaded, ci, std::move(codecs), job_ptr, res.bytes);
    // The sync's phases alone use the network, and every one runs to its end: a phase that would
    // repeat an earlier run is replayed (no tenants, no horizon, no link timeline).
    if (replay && s.network.tenants.empty() && wl.duration_s <= 0 && s.outputs.link_timeline_bin_s <= 0)
      bucketed->sync->replay_repeated_phases();
    res.bits_per_element = algo::RoundBytes::bits(res.bytes.total(), plan.trace->params());
    sync = bucketed->sync.get();
  }
  res.sync_desc = sync->describe();
  sim::TrainingOptions topt{static_cast<uint32_t>(wl.rounds), plan.trace->optimizer_s(), wl.interference};
  std::vector<topo::Rank> workers(m);
  for (uint32_t r = 0; r < m; ++r) workers[r] = r;
  sim::TrainingJob job(net.engine, net.network, *plan.topology, workers, plan.layers, *plan.stragglers, topt, *sync);
  job_ptr = &job;
  sim::TenantTraffic& tt = *net.tenants;
  job.on_finished([&tt] { tt.stop(); });
  tt.start();
  job.start();
  const SimTime horizon =
      wl.duration_s > 0 ? SimTime::zero() + Duration::from_seconds(wl.duration_s) : SimTime::infinite();
  net.engine.run_until(horizon);
  if (net.engine.passed_horizon() && horizon == SimTime::infinite())
    return sim::past_horizon_error(fmt::format("training with '{}'", cc.scheme)).at("/workload");

  const sim::KernelCostModel costs = plan.costs.scheme(cc.scheme, cc.params.dump());
  res.kernel_cost = costs.describe(bucketed ? bucketed->charged : std::vector<topo::KernelKind>{});
  if (bucketed && bucketed->weights && !bucketed->same_weights)
    res.kernel_cost += fmt::format("; weights: {}", plan.costs.scheme(cc.weights.scheme, cc.weights.params.dump())
                                                        .describe(bucketed->weight_charged));
  res.links = net.network.link_stats();
  res.timeline = net.network.timeline();
  const auto warmup = static_cast<uint32_t>(wl.warmup_rounds);
  res.summary = sim::summarize_training(job, res.links, horizon, wl.duration_s, warmup, net.engine.now());
  res.decisions = job.decisions();
  res.tenants = tt.stats();
  if (broadcast) {
    const sim::BroadcastTotals t = sim::broadcast_totals(*broadcast, m, res.summary.rounds_completed);
    res.bits_per_element = t.bits_per_element;
    res.wire_bytes_per_round = t.wire_bytes_per_round;
  } else {
    res.buckets = bucketed->sync->records();
    const sim::BucketTotals t = sim::bucket_totals(*bucketed->sync, res.summary.rounds_completed, warmup, "weights");
    res.wire_bytes_per_round = t.wire_bytes_per_round;
    res.grad_comm_s = t.grad_comm_s;
    res.weight_comm_s = t.weight_comm_s;
  }
  return res;
}

// Whether the schemes' runs may go at once: several schemes and threads, and no codec that plans
// again during the rounds (a plan holds a synthetic draw; one at a time keeps the memory peak).
bool schemes_at_once(const std::vector<EntryCodecs>& codecs) {
  if (codecs.size() < 2 || kern::worker_threads() < 2) return false;
  for (const EntryCodecs& c : codecs)
    if ((c.grads && c.grads->replanned()) || (c.weights && c.weights->replanned())) return false;
  return true;
}

// train_scheme() of every entry, the results in entry order. Each run has its own engine, network
// and codecs, so where schemes_at_once() allows, up to worker_threads() of them run at once, each
// on one thread (its kernels inline): every result, and so every output, is the same whatever the
// thread count. The first error (or exception, such as running out of memory) in entry order is
// returned (rethrown), as a serial run would return it.
Result<std::vector<TrainingResult>> train_schemes(const LoadedScenario& loaded, std::vector<EntryCodecs> codecs,
                                                  const RunHooks& hooks, std::string& tenants_desc) {
  const size_t n = codecs.size();
  if (n == 0) return std::vector<TrainingResult>{};
  std::vector<std::optional<Result<TrainingResult>>> done(n);
  std::vector<std::exception_ptr> thrown(n);
  std::vector<std::string> tenants(n);
  std::mutex progress;
  auto one = [&](size_t ci) {
    try {
      if (hooks.progress) {
        const std::lock_guard<std::mutex> lock(progress);
        hooks.progress(ci, n, loaded.scenario.compression[ci].scheme);
      }
      done[ci] = train_scheme(loaded, ci, std::move(codecs[ci]), hooks.replay_phases, tenants[ci]);
    } catch (...) {
      thrown[ci] = std::current_exception();
    }
  };
  if (schemes_at_once(codecs)) {
    loaded.plan->topology->warm_routes();  // route() from several threads
    std::atomic<size_t> next{0};
    auto worker = [&] {
      const kern::SerialScope serial;
      for (size_t ci; (ci = next.fetch_add(1)) < n;) one(ci);
    };
    std::vector<std::thread> pool(std::min<size_t>(n, static_cast<size_t>(kern::worker_threads())) - 1);
    for (auto& t : pool) t = std::thread(worker);
    worker();
    for (auto& t : pool) t.join();
  } else {
    for (size_t ci = 0; ci < n; ++ci) {
      one(ci);
      if (thrown[ci] || !done[ci]->ok()) break;
    }
  }
  std::vector<TrainingResult> out;
  for (size_t ci = 0; ci < n; ++ci) {
    if (thrown[ci]) std::rethrow_exception(thrown[ci]);
    if (!done[ci]->ok()) return done[ci]->status();
    out.push_back(std::move(**done[ci]));
  }
  tenants_desc = tenants.back();
  return out;
}

// ---- 3D-parallel --------------------------------------------------------------------------------

algo::StageCodecs::Config stage_config(const Scenario& s, const RunPlan& plan, const CompressionConfig& cc) {
  algo::StageCodecs::Config c;
  c.scheme = cc.scheme;
  c.params = cc.params;
  c.edgc_controller = cc.controller.kind == ControllerKind::kEdgc;
  c.r_min = static_cast<uint32_t>(cc.controller.r_min);
  c.r_max = static_cast<uint32_t>(cc.controller.r_max);
  c.anchor = cc.controller.anchor;
  c.collective = plan.collective;
  c.dp = plan.parallel->layout().dp;
  c.base.segments = static_cast<uint32_t>(s.collective.segments);
  c.stages = plan.stages;
  c.rounds = static_cast<uint32_t>(s.workload.rounds);
  return c;
}

// One scheme's 3D-parallel run.
// `entropies`: Algorithm 1's samples, shared by the run's edgc schemes.
Result<ParallelResult> train_parallel_scheme(const LoadedScenario& loaded, size_t ci, ParallelReport& report,
                                             const std::shared_ptr<algo::RoundEntropies>& entropies) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const CompressionConfig& cc = s.compression[ci];
  ParallelResult res;
  res.label = plan.schemes[ci].label;
  res.scheme = cc.scheme;
  Network net(s, plan, ci);
  report.tenants_desc = net.tenants->describe();
  CCSIM_ASSIGN_OR_RETURN(algo::StageCodecs codecs,
                         algo::StageCodecs::make(stage_config(s, plan, cc), plan.synthetic, entropies));
  sim::ParallelTrainingJob* job_ptr = nullptr;
  std::vector<topo::KernelKind> charged;
  auto factory = [&](uint32_t round, uint32_t stage, uint32_t, uint64_t) {
    std::vector<algo::StageDecision> decisions;
    const auto lowered = codecs.stage(round, stage, observe_stages(*job_ptr, round), decisions);
    CCSIM_CHECK(lowered.ok(), "stage {} in round {}: {}", stage, round, lowered.status().message());
    for (const algo::StageDecision& d : decisions)
      job_ptr->log({d.round, d.stage, -1, net.engine.now().seconds(), "edgc", d.quantity, d.value, d.detail});
    std::vector<sim::SyncPhase> phases;
    sim::append_sync_phases((*lowered)->phases(), "collective", false, plan.costs, phases, charged);
    return phases;
  };
  sim::ParallelJobOptions po = parallel_job_options(s, *plan.trace);
  po.kernel_costs = plan.costs.scheme(cc.scheme, cc.params.dump());
  po.ecmp_salt = ci;
  auto job = sim::ParallelTrainingJob::make(net.engine, net.network, *plan.topology, *plan.parallel, plan.layers,
                                            plan.stage_starts, *plan.stragglers, po, factory);
  if (!job.ok()) return internal_error(fmt::format("the 3D-parallel job: {}", job.status().message()));
  job_ptr = job->get();
  sim::TenantTraffic& tt = *net.tenants;
  (*job)->on_finished([&tt] { tt.stop(); });
  tt.start();
  (*job)->start();
  net.engine.run();
  if (net.engine.passed_horizon())
    return sim::past_horizon_error(fmt::format("3D-parallel training with '{}'", cc.scheme)).at("/workload");
  res.transfers = net.network.counters().flows_started;
  CCSIM_CHECK((*job)->finished(), "the 3D-parallel job did not finish its {} rounds", s.workload.rounds);
  res.kernel_cost = po.kernel_costs.describe(charged);
  res.sync_desc = fmt::format(
      "per stage and TP index: {} all-reduce over DP {} of the stage's share, {}{}", s.collective.algorithm,
      plan.parallel->layout().dp, cc.scheme,
      cc.controller.kind == ControllerKind::kEdgc
          ? fmt::format("; edgc stage-aligned ranks (anchor {}, r in [{}, {}])",
                        enum_name<algo::EdgcAnchor>(algo::kEdgcAnchors, cc.controller.anchor), cc.controller.r_min,
                        cc.controller.r_max)
          : std::string());
  res.summary = sim::summarize_parallel(**job, static_cast<uint32_t>(s.workload.rounds),
                                        static_cast<uint32_t>(s.workload.warmup_rounds), net.engine.now(),
                                        [&](uint32_t r, uint32_t st) { return codecs.rank_used(r, st); });
  res.decisions = (*job)->decisions();
  res.links = net.network.link_stats();
  res.timeline = net.network.timeline();
  return res;
}

std::string trace_line(const traces::ComputeTrace& trace, bool parallel) {
  if (parallel)
    return fmt::format("{}: {} layers, {} params, per micro-batch forward {} + backward {} ({})", trace.model(),
                       trace.layers().size(), trace.params(), format_quantity(trace.forward_s(), UnitKind::kTime),
                       format_quantity(trace.backward_s(), UnitKind::kTime), trace.provenance().kind);
  return fmt::format("{}: {} layers/blocks, {} params, forward {} + backward {} per round ({}, {})", trace.model(),
                     trace.layers().size(), trace.params(), format_quantity(trace.forward_s(), UnitKind::kTime),
                     format_quantity(trace.backward_s(), UnitKind::kTime), trace.provenance().kind,
                     trace.provenance().device);
}

// Time-to-accuracy of the entries from their mean round times (and, for a calibration, their vNMSE).
template <class Results>
Result<std::optional<TtaReport>> tta_of(const LoadedScenario& loaded, const Results& results,
                                        const std::vector<double>& bits, NumericsCache* cache) {
  const ConvergenceInputs* in = loaded.plan->convergence.get();
  if (in == nullptr) return std::optional<TtaReport>();
  std::vector<std::string> labels, schemes;
  std::vector<double> round_s;
  EntryVnmse measured;
  for (const auto& r : results) {
    labels.push_back(r.label);
    schemes.push_back(r.scheme);
    round_s.push_back(r.summary.round_s);
  }
  if (in->model) {
    CCSIM_ASSIGN_OR_RETURN(measured, measure_entry_vnmse(loaded, bits, cache));
  }
  TtaReport rep = compute_tta(*in, labels, schemes, round_s, measured.vnmse, loaded.scenario.convergence.baseline_rounds);
  rep.vnmse_desc = measured.desc;
  return std::optional<TtaReport>(std::move(rep));
}

}  // namespace


Result<TrainingReport> run_training(const LoadedScenario& loaded, const RunHooks& hooks) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  CCSIM_CHECK(plan.kind == RunKind::kTraining, "run_training on another kind of scenario");
  const WorkloadConfig& wl = s.workload;
  TrainingReport report;
  report.loaded = loaded;
  report.workers = plan.topology->num_ranks();
  report.topology_desc = topology_line(s, *plan.topology, false, true);
  report.link_rows = link_rows_of(*plan.topology);
  report.trace_desc = trace_line(*plan.trace, false);
  report.stragglers_desc = plan.stragglers->describe();
  report.kernel_cost_desc = plan.costs.describe();
  report.horizon_desc = wl.duration_s > 0
                            ? fmt::format("{} of simulated time{}", format_quantity(wl.duration_s, UnitKind::kTime),
                                          wl.rounds > 0 ? fmt::format(" (at most {} rounds)", wl.rounds) : "")
                            : fmt::format("{} rounds", wl.rounds);
  CCSIM_ASSIGN_OR_RETURN(std::vector<EntryCodecs> codecs, make_entry_codecs(loaded));
  CCSIM_ASSIGN_OR_RETURN(report.results, train_schemes(loaded, std::move(codecs), hooks, report.tenants_desc));
  std::vector<double> bits;
  for (const TrainingResult& r : report.results) bits.push_back(r.bits_per_element);
  CCSIM_ASSIGN_OR_RETURN(report.tta, tta_of(loaded, report.results, bits, hooks.numerics));
  return report;
}

Result<ParallelReport> run_parallel_training(const LoadedScenario& loaded, const RunHooks& hooks) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  CCSIM_CHECK(plan.kind == RunKind::kParallel, "run_parallel_training on another kind of scenario");
  const topo::ParallelLayout& layout = plan.parallel->layout();
  ParallelReport report;
  report.loaded = loaded;
  report.topology_desc = topology_line(s, *plan.topology, false, false);
  report.layout_desc = fmt::format("TP {} x PP {} x DP {} ({}), {} micro-batches per round, {}", layout.tp, layout.pp,
                                   layout.dp, layout.order, s.workload.micro_batches,
                                   enum_name<sim::PipelineKind>(sim::kPipelineKinds, s.workload.pipeline));
  report.link_rows = link_rows_of(*plan.topology);
  report.trace_desc = trace_line(*plan.trace, true);
  std::vector<std::string> parts;
  for (uint32_t st = 0; st < layout.pp; ++st) {
    const uint32_t end = st + 1 < layout.pp ? plan.stage_starts[st + 1] : static_cast<uint32_t>(plan.layers.size());
    uint64_t p = 0;
    for (uint32_t l = plan.stage_starts[st]; l < end; ++l) p += plan.layers[l].params;
    parts.push_back(fmt::format("{}: layers {}-{} ({} params)", st, plan.stage_starts[st], end - 1, p));
  }
  report.stages_desc = fmt::format("{}", fmt::join(parts, "; "));
  report.stragglers_desc = plan.stragglers->describe();
  report.kernel_cost_desc = plan.costs.describe();
  const auto entropies = std::make_shared<algo::RoundEntropies>(plan.synthetic, plan.stages.front(), layout.dp,
                                                                 static_cast<uint32_t>(s.workload.rounds));
  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    if (hooks.progress) hooks.progress(ci, s.compression.size(), s.compression[ci].scheme);
    CCSIM_ASSIGN_OR_RETURN(ParallelResult r, train_parallel_scheme(loaded, ci, report, entropies));
    report.results.push_back(std::move(r));
  }
  CCSIM_ASSIGN_OR_RETURN(report.tta, tta_of(loaded, report.results, {}, hooks.numerics));
  return report;
}

}  // namespace ccsim::app
