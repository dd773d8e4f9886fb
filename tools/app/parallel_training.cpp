#include "tools/app/parallel_training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/units.hpp"
#include "sim/training/tenants.hpp"
#include "tools/app/training.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/parallel_groups.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The edgc controller's state for one run.
struct EdgcStageController {
  uint32_t base = 0, r_min = 1, r_max = 256;
  bool mean_anchor = false;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> used;  // (round, stage) -> rank

  uint32_t decide(const sim::ParallelTrainingJob& job, uint32_t round, uint32_t stage, std::string& detail) const {
    const uint32_t pp = job.num_stages();
    auto clamp = [&](double r) {
      return static_cast<uint32_t>(std::clamp(std::lround(r), static_cast<long>(r_min), static_cast<long>(r_max)));
    };
    const auto& recs = job.stage_records();
    const size_t prev = static_cast<size_t>(round == 0 ? 0 : round - 1) * pp;  // first stage, previous round
    if (round == 0 || prev >= recs.size() || !recs[prev].complete || used.count({round - 1, 0}) == 0 ||
        used.at({round - 1, 0}) == 0) {
      const uint32_t r = clamp(base);
      detail = "no observation yet: every stage at the base rank";
      return r;
    }
    const double t_com = recs[prev].sync_end_s - recs[prev].sync_start_s;
    const double eta = t_com / used.at({round - 1, 0});
    double mb = 0;
    for (uint32_t s = 0; s < pp; ++s) mb += job.mean_micro_backward_s(s);
    mb /= pp;
    // Algorithm 2: stage s may take s·T̄_microBack more sync time than the first stage.
    const double step = mb / eta;
    double r1 = base;
    if (mean_anchor) {
      // The largest r1 whose clamped stage ranks average at most the scheme's rank (bisection: the
      // mean is non-decreasing in r1).
      auto mean_rank = [&](double x) {
        double sum = 0;
        for (uint32_t i = 0; i < pp; ++i) sum += clamp(x + i * step);
        return sum / pp;
      };
      double lo = static_cast<double>(r_min) - (pp - 1) * step, hi = r_max;
      for (int it = 0; it < 100; ++it) {
        const double mid = 0.5 * (lo + hi);
        (mean_rank(mid) <= base ? lo : hi) = mid;
      }
      r1 = lo;
    }
    const uint32_t r = clamp(r1 + stage * step);
    detail = fmt::format("eta={} t_com_stage0={} r_stage0_prev={} t_micro_back={} r1={}", eta, t_com,
                         used.at({round - 1, 0}), mb, r1);
    return r;
  }
};


}  // namespace

bool runs_parallel_training(const Scenario& s) {
  return !s.workload.trace.empty() && (s.parallelism.tp > 1 || s.parallelism.pp > 1);
}

Result<ParallelReport> run_parallel_training(const LoadedScenario& loaded) {
  const Scenario& s = loaded.scenario;
  const WorkloadConfig& wl = s.workload;
  ParallelReport report;
  report.loaded = loaded;
  if (wl.rounds == 0)
    return invalid_argument("/workload/rounds: a tensor/pipeline-parallel run needs rounds > 0, got 0");
  if (wl.duration_s > 0)
    return invalid_argument("/workload/duration: tensor/pipeline-parallel runs stop after workload.rounds; expected "
                            "no duration");
  if (s.sync.mode != "allreduce")
    return invalid_argument(fmt::format("/sync/mode: tensor/pipeline-parallel runs synchronize each stage's gradients "
                                        "with an all-reduce over its DP group; expected allreduce, got {}", s.sync.mode));
  if (s.collective.operation != "allreduce")
    return invalid_argument(fmt::format("/collective/operation: expected allreduce (each stage's DP sync), got {}",
                                        s.collective.operation));
  CCSIM_ASSIGN_OR_RETURN(const traces::ComputeTrace trace, detail::load_trace(wl));
  CCSIM_ASSIGN_OR_RETURN(const topo::Topology topology, topo::build_topology(cluster_spec(s.cluster)));
  const uint32_t world = topology.num_ranks();
  topo::ParallelLayout layout;
  layout.tp = static_cast<uint32_t>(s.parallelism.tp);
  layout.pp = static_cast<uint32_t>(s.parallelism.pp);
  layout.dp = s.parallelism.dp > 0 ? static_cast<uint32_t>(s.parallelism.dp)
                                   : world / std::max<uint32_t>(1, layout.tp * layout.pp);
  layout.order = s.parallelism.order;
  auto groups = topo::ParallelGroups::make(layout, world);
  if (!groups.ok()) return groups.status().with_context("/parallelism");
  report.topology_desc = fmt::format("{}; {} ranks ({} x {} GPUs), NIC {}",
                                     topology.description().empty() ? topology.kind() : topology.description(), world,
                                     topology.num_nodes(), topology.gpus_per_node(),
                                     format_quantity(s.cluster.nic_bandwidth_Bps, UnitKind::kBandwidth));
  report.layout_desc = fmt::format("TP {} x PP {} x DP {} ({}), {} micro-batches per round, {}", layout.tp, layout.pp,
                                   layout.dp, layout.order, wl.micro_batches, wl.pipeline);
  report.link_rows = link_rows_of(topology);
  report.trace_desc = fmt::format("{}: {} layers, {} params, per micro-batch forward {} + backward {} ({})",
                                  trace.model(), trace.layers().size(), trace.params(),
                                  format_quantity(trace.forward_s(), UnitKind::kTime),
                                  format_quantity(trace.backward_s(), UnitKind::kTime), trace.provenance().kind);
  std::vector<sim::TrainingLayer> layers;
  for (const auto& l : trace.layers())
    layers.push_back({l.name, l.params, l.forward_s, l.backward_s, l.activation_bytes});
  auto starts = sim::split_stages(layers, layout.pp);
  if (!starts.ok()) return starts.status().with_context("/parallelism/pp");
  // Per stage: its layers [first, end), params, one TP rank's share and that share's matrix layout.
  std::vector<uint64_t> shares(layout.pp);
  std::vector<std::vector<algo::LayerShape>> layouts(layout.pp);
  {
    std::vector<std::string> parts;
    for (uint32_t st = 0; st < layout.pp; ++st) {
      const uint32_t end = st + 1 < layout.pp ? (*starts)[st + 1] : static_cast<uint32_t>(layers.size());
      uint64_t p = 0;
      for (uint32_t l = (*starts)[st]; l < end; ++l) p += layers[l].params;
      shares[st] = (p + layout.tp - 1) / layout.tp;
      std::vector<uint32_t> ids;
      for (uint32_t l = (*starts)[st]; l < end; ++l) ids.push_back(l);
      layouts[st] = detail::layer_matrices(layers, ids, layout.tp, static_cast<uint64_t>(wl.matrix_rows), shares[st]);
      parts.push_back(fmt::format("{}: layers {}-{} ({} params)", st, (*starts)[st], end - 1, p));
    }
    report.stages_desc = fmt::format("{}", fmt::join(parts, "; "));
  }
  CCSIM_ASSIGN_OR_RETURN(const sim::StragglerModel stragglers, detail::make_stragglers(s, layout.pp * layout.dp));
  report.stragglers_desc = stragglers.describe();
  std::vector<topo::Rank> all(world);
  for (uint32_t r = 0; r < world; ++r) all[r] = r;
  const std::vector<sim::TenantSpec> tenants = detail::tenant_specs(s, all);
  CCSIM_ASSIGN_OR_RETURN(const KernelCosts kernel_costs, KernelCosts::of(s));
  report.kernel_cost_desc = kernel_costs.describe();
  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* collective,
                         topo::find_collective("allreduce", s.collective.algorithm));
  const uint32_t dp = layout.dp;
  CCSIM_ASSIGN_OR_RETURN(const sim::PipelineKind kind, sim::parse_pipeline_kind(wl.pipeline));

  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    const CompressionConfig& cc = s.compression[ci];
    const std::string at = fmt::format("/compression/{}", ci);
    auto probe = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
    if (!probe.ok()) return probe.status().with_context(at);
    const bool low_rank = detail::factors_matrices(**probe);
    // edgc: Algorithm 1 sets the first stage's rank from its gradients' entropy every round.
    const bool entropy = cc.scheme == "edgc";
    if (cc.controller.kind == "aqgb")
      return invalid_argument(fmt::format("{}/controller/kind: aqgb drives a broadcast of data-parallel workers, not "
                                          "a pipeline's stages", at));
    if (cc.controller.kind == "edgc" && !low_rank)
      return invalid_argument(fmt::format("{}/scheme: the edgc controller sets the ranks of powersgd or edgc, got {}",
                                          at, cc.scheme));
    if (cc.controller.r_min > cc.controller.r_max)
      return invalid_argument(fmt::format("{}/controller/r_max: expected at least r_min ({}), got {}", at,
                                          cc.controller.r_min, cc.controller.r_max));
    ParallelResult res;
    res.scheme = cc.controller.kind == "edgc"
                     ? fmt::format("edgc({},{})", entropy ? std::string("entropy") : fmt::format("{}", cc.params.value("rank", 4)),
                                   cc.controller.anchor)
                     : detail::scheme_label(cc.scheme, cc.params);

    sim::Engine engine;
    sim::FlowNetwork network(engine, sim::link_specs(topology));
    if (s.outputs.link_timeline_bin_s > 0) network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
    auto traffic = sim::TenantTraffic::make(engine, network, topology, tenants, 0x7E4A47 + ci);
    if (!traffic.ok()) return traffic.status();
    report.tenants_desc = (*traffic)->describe();

    // Per (round, stage): the compressor its DP groups use (shared by the TP indices).
    std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<algo::Compressor>> comps;
    std::map<uint32_t, std::unique_ptr<algo::Compressor>> planned;  // per stage, fixed-format planned schemes
    EdgcStageController edgc;
    edgc.base = static_cast<uint32_t>(cc.params.value("rank", 4));
    edgc.r_min = static_cast<uint32_t>(cc.controller.r_min);
    edgc.r_max = static_cast<uint32_t>(cc.controller.r_max);
    edgc.mean_anchor = cc.controller.anchor == "mean";
    sim::ParallelTrainingJob* job_ptr = nullptr;
    // EDGC's Algorithm 1 for the first stage: the entropy of stage 0's gradients (synthetic, one
    // draw kept for the whole run: stationary statistics) sampled in the rounds its GDS samples.
    std::unique_ptr<algo::Compressor> alg1_owner;
    algo::EdgcCompressor* alg1 = nullptr;
    std::vector<std::vector<float>> alg1_grads;
    std::map<uint32_t, uint32_t> alg1_rank;  // round -> Algorithm 1's rank
    if (entropy) {
      alg1_owner = std::move(*probe);
      alg1 = dynamic_cast<algo::EdgcCompressor*>(alg1_owner.get());
      CCSIM_CHECK(alg1 != nullptr, "edgc is an EdgcCompressor");
      alg1->set_layout(layouts[0]);
      CCSIM_ASSIGN_OR_RETURN(alg1_grads,
                             detail::synthetic_gradients(s, shares[0], dp, 0x3D0000u, 1.0,
                                                         "edgc's Algorithm 1 samples the first stage's entropy:"));
    }
    // Algorithm 1's rank of `round` (rounds in order), logged with the controller's state.
    auto alg1_round = [&](uint32_t round) -> uint32_t {
      if (auto it = alg1_rank.find(round); it != alg1_rank.end()) return it->second;
      CCSIM_CHECK(alg1_rank.size() == round, "rounds in order");
      const uint32_t r = alg1->rank();
      std::string state = alg1->plan_decisions().front().detail;
      std::optional<double> h;
      if (alg1->controller().samples_round()) {
        double sum = 0;
        uint32_t n = 0;
        for (uint32_t k = 0; k < dp; ++k) {
          const kern::RngKey key{static_cast<uint64_t>(s.seed), round, k, algo::kPlanStream};
          if (auto e = alg1->entropy_estimate(alg1_grads[k], key)) sum += *e, ++n;
        }
        if (n > 0) h = sum / n;
        if (h) state += fmt::format(" H_round={}", *h);
      }
      alg1->observe_round(h);
      job_ptr->log({round, 0, -1, engine.now().seconds(), "edgc", "alg1_rank", static_cast<double>(r), state});
      return alg1_rank[round] = r;
    };
    for (uint32_t st = 0; st < layout.pp && !entropy; ++st) {
      if (!low_rank && shares[st] > 0 && dp > 1 && !(*probe)->plan_format(shares[st], dp).empty()) {
        auto made = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
        if (!made.ok()) return made.status().with_context(at);
        (*made)->set_layout(std::vector<algo::LayerShape>{{0, shares[st], shares[st], 1}});
        CCSIM_RETURN_IF_ERROR(detail::plan_on_synthetic(s, **made, shares[st], dp, st).status());
        planned[st] = std::move(*made);
      }
    }
    std::string build_error;
    std::vector<topo::KernelKind> round_charged;  // round ops the phases charged
    auto factory = [&](uint32_t round, uint32_t stage, uint32_t, uint64_t params) {
      std::vector<sim::SyncPhase> phases;
      algo::Compressor* comp = nullptr;
      if (auto it = planned.find(stage); it != planned.end()) {
        comp = it->second.get();
      } else if (auto found = comps.find({round, stage}); found != comps.end()) {
        comp = found->second.get();
      } else {
        nlohmann::json params_json = cc.params;
        std::string scheme = cc.scheme;
        if (cc.controller.kind == "edgc" || entropy) {
          std::string why;
          uint32_t r = 0;
          if (entropy) {
            // Algorithm 1's rank for this round; 0 while warming up (every stage uncompressed).
            const uint32_t r1 = alg1_round(round);
            edgc.base = r1;
            if (r1 == 0) {
              why = "Algorithm 1 warming up: uncompressed";
            } else if (cc.controller.kind == "edgc") {
              r = edgc.decide(*job_ptr, round, stage, why);
            } else {
              r = r1;
              why = "Algorithm 1's rank";
            }
            // EDGC's engine is PowerSGD's: the stages run it at the decided rank (fp32 when warming up).
            nlohmann::json engine_params = nlohmann::json::object();
            for (const char* key : {"error_feedback", "warm_start"})
              if (cc.params.contains(key)) engine_params[key] = cc.params[key];
            if (r > 0) engine_params["rank"] = r;
            scheme = r > 0 ? "powersgd" : "fp32";
            params_json = r > 0 ? engine_params : nlohmann::json::object();
          } else {
            r = edgc.decide(*job_ptr, round, stage, why);
            params_json["rank"] = r;
          }
          edgc.used[{round, stage}] = r;
          job_ptr->log({round, stage, -1, engine.now().seconds(), "edgc", "rank", static_cast<double>(r),
                        fmt::format("stage={} {}", stage, why)});
        }
        auto made = algo::CompressorRegistry::global().create(scheme, params_json);
        CCSIM_CHECK(made.ok(), "{}", made.status().message());
        (*made)->set_layout(layouts[stage]);
        comp = made->get();
        comps[{round, stage}] = std::move(*made);
      }
      const algo::PlanFormat pf = comp->plan_format(params, dp);
      topo::CollectiveOptions opt;
      opt.segments = static_cast<uint32_t>(s.collective.segments);
      const uint64_t reduced = comp->reduced_elements(params);
      algo::set_shard_options(*comp, topo::CollectiveOp::kAllReduce, reduced, dp, opt);
      if (Status st = collective->check(dp, reduced, opt); !st.ok()) {
        build_error = fmt::format("stage {}: {} cannot all-reduce {} entries on {} ranks: {}", stage,
                                  s.collective.algorithm, reduced, dp, st.message());
        return std::vector<sim::SyncPhase>{};
      }
      detail::append_sync_phases(phases, "collective", collective->make(dp, reduced, opt), *comp, params, dp,
                                 pf.wire_bytes(), kernel_costs, false, &round_charged);
      return phases;
    };
    sim::ParallelJobOptions po;
    po.rounds = static_cast<uint32_t>(wl.rounds);
    po.micro_batches = static_cast<uint32_t>(wl.micro_batches);
    po.schedule = kind;
    po.tp_allreduces = static_cast<uint32_t>(wl.tp_allreduces);
    po.optimizer_s = trace.optimizer_s();
    po.kernel_costs = kernel_costs.scheme(cc.scheme, cc.params);
    po.ecmp_salt = ci;
    auto job = sim::ParallelTrainingJob::make(engine, network, topology, *groups, layers, *starts, stragglers, po,
                                              factory);
    if (!job.ok()) return job.status().with_context("/parallelism");
    job_ptr = job->get();
    sim::TenantTraffic& tt = **traffic;
    (*job)->on_finished([&tt] { tt.stop(); });
    tt.start();
    (*job)->start();
    engine.run();
    if (!build_error.empty()) return invalid_argument(fmt::format("/collective/algorithm: {}", build_error));
    CCSIM_CHECK((*job)->finished(), "the 3D-parallel job did not finish its {} rounds", wl.rounds);
    res.kernel_cost = po.kernel_costs.describe(round_charged);
    res.sync_desc = fmt::format("per stage and TP index: {} all-reduce over DP {} of the stage's share, {}{}",
                                s.collective.algorithm, dp, cc.scheme,
                                cc.controller.kind == "edgc"
                                    ? fmt::format("; edgc stage-aligned ranks (anchor {}, r in [{}, {}])",
                                                  cc.controller.anchor, cc.controller.r_min, cc.controller.r_max)
                                    : std::string());
    res.rounds = (*job)->round_records();
    res.rounds_completed = static_cast<uint32_t>(res.rounds.size());
    res.decisions = (*job)->decisions();
    res.links = network.link_stats();
    res.timeline = network.timeline();
    res.end_s = res.rounds.empty() ? engine.now().seconds() : res.rounds.back().end_s;
    const auto& recs = (*job)->stage_records();
    res.stage_sync_s.assign(layout.pp, 0);
    res.stage_start_s.assign(layout.pp, 0);
    res.stage_exposed_s.assign(layout.pp, 0);
    res.stage_rank.assign(layout.pp, 0);
    const uint32_t first = static_cast<uint32_t>(std::min<int64_t>(wl.warmup_rounds, wl.rounds - 1));
    double wire = 0;
    for (const auto& rec : recs) {
      StageSyncRow row;
      row.record = rec;
      const sim::ParallelRoundRecord& rr = res.rounds[rec.round];
      row.exposed_s = std::max(0.0, rec.sync_end_s - rr.backward_end_s);
      if (low_rank) {
        if (auto u = edgc.used.find({rec.round, rec.stage}); u != edgc.used.end()) row.rank = u->second;
        else row.rank = cc.params.value("rank", 4);
      }
      wire += static_cast<double>(rec.sync_wire_bytes);
      if (rec.round >= first) {
        res.stage_sync_s[rec.stage] += rec.sync_end_s - rec.sync_start_s;
        res.stage_start_s[rec.stage] += rec.sync_start_s - rr.start_s;
        res.stage_exposed_s[rec.stage] += row.exposed_s;
        res.stage_rank[rec.stage] += static_cast<double>(row.rank);
      }
      res.stages.push_back(row);
    }
    for (const auto& rr : res.rounds) {
      if (rr.round < first) continue;
      ++res.measured_rounds;
      res.round_s += rr.duration();
      res.compute_s += rr.compute_s;
      res.exposed_comm_s += rr.exposed_comm_s;
    }
    if (res.measured_rounds > 0) {
      const double n = res.measured_rounds;
      res.round_s /= n;
      res.compute_s /= n;
      res.exposed_comm_s /= n;
      for (uint32_t st = 0; st < layout.pp; ++st) {
        res.stage_sync_s[st] /= n;
        res.stage_start_s[st] /= n;
        res.stage_exposed_s[st] /= n;
        res.stage_rank[st] /= n;
      }
    }
    res.wire_bytes_per_round = res.rounds_completed > 0 ? wire / res.rounds_completed : 0;
    report.results.push_back(std::move(res));
  }
  return report;
}

json parallel_summary_json(const ParallelReport& report) {
  const Scenario& s = report.loaded.scenario;
  json out = {{"ccsim_version", ccsim_version()},
              {"scenario", s.name},
              {"seed", s.seed},
              {"mode", "training-3d"},
              {"topology", report.topology_desc},
              {"layout", report.layout_desc},
              {"trace", report.trace_desc},
              {"stages", report.stages_desc},
              {"stragglers", report.stragglers_desc},
              {"tenants", report.tenants_desc},
              {"kernel_cost", report.kernel_cost_desc},
              {"warmup_rounds", s.workload.warmup_rounds}};
  json results = json::array();
  for (const auto& r : report.results)
    results.push_back({{"scheme", r.scheme},
                       {"sync", r.sync_desc},
                       {"kernel_cost", r.kernel_cost},
                       {"rounds_completed", r.rounds_completed},
                       {"measured_rounds", r.measured_rounds},
                       {"round_s", r.round_s},
                       {"compute_s", r.compute_s},
                       {"exposed_comm_s", r.exposed_comm_s},
                       {"wire_bytes_per_round", r.wire_bytes_per_round},
                       {"stage_sync_start_s", r.stage_start_s},
                       {"stage_sync_s", r.stage_sync_s},
                       {"stage_exposed_s", r.stage_exposed_s},
                       {"stage_rank", r.stage_rank}});
  out["results"] = std::move(results);
  return out;
}

namespace {

std::string parallel_results_csv(const ParallelReport& report) {
  std::string out = "scheme,rounds_completed,round_s,compute_s,exposed_comm_s,wire_bytes_per_round\n";
  for (const auto& r : report.results)
    out += fmt::format("{},{},{},{},{},{}\n", csv_field(r.scheme), r.rounds_completed, r.round_s, r.compute_s,
                       r.exposed_comm_s, r.wire_bytes_per_round);
  return out;
}

std::string stages_csv(const ParallelReport& report) {
  std::string out = "scheme,round,stage,backward_end_s,sync_start_s,sync_end_s,sync_s,exposed_s,rank,wire_bytes,"
                    "compute_busy_s,micro_backward_s\n";
  for (const auto& res : report.results)
    for (const auto& row : res.stages) {
      const auto& r = row.record;
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(res.scheme), r.round, r.stage,
                         r.backward_end_s, r.sync_start_s, r.sync_end_s, r.sync_end_s - r.sync_start_s, row.exposed_s,
                         row.rank >= 0 ? fmt::format("{}", row.rank) : std::string(), r.sync_wire_bytes,
                         r.compute_busy_s, r.micro_backward_s);
    }
  return out;
}

std::string parallel_rounds_csv(const ParallelReport& report) {
  std::string out = "scheme,round,start_s,backward_end_s,sync_end_s,end_s,duration_s,exposed_comm_s,compute_s\n";
  for (const auto& res : report.results)
    for (const auto& r : res.rounds)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(res.scheme), r.round, r.start_s, r.backward_end_s,
                         r.sync_end_s, r.end_s, r.duration(), r.exposed_comm_s, r.compute_s);
  return out;
}

}  // namespace

Status write_parallel_outputs(const ParallelReport& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  const fs::path d(dir);
  std::vector<LinkCsvRun> link_runs;
  std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>> decisions;
  for (const auto& r : report.results) {
    link_runs.push_back({r.scheme, &r.links, &r.timeline, r.end_s});
    decisions.emplace_back(r.scheme, &r.decisions);
  }
  std::vector<std::pair<fs::path, std::string>> files = {
      {d / "scenario.resolved.json", report.loaded.resolved.dump(2) + "\n"},
      {d / "summary.json", parallel_summary_json(report).dump(2) + "\n"},
      {d / "results.csv", parallel_results_csv(report)},
      {d / "stages.csv", stages_csv(report)},
      {d / "rounds.csv", parallel_rounds_csv(report)},
      {d / "controller.csv", detail::decisions_csv(decisions, "stage")},
      {d / "links.csv", link_rows_csv(report.link_rows, link_runs)}};
  const double bin = report.loaded.scenario.outputs.link_timeline_bin_s;
  if (bin > 0) files.emplace_back(d / "links_timeline.csv", link_timeline_csv(report.link_rows, link_runs, bin));
  return write_files_atomically(files);
}

std::string format_parallel_summary(const ParallelReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out += fmt::format("ccsim {} | scenario {} | seed {} | 3D-parallel training rounds\n", ccsim_version(), s.name, s.seed);
  out += fmt::format("  cluster     {}\n", report.topology_desc);
  out += fmt::format("  layout      {}\n", report.layout_desc);
  out += fmt::format("  workload    {}\n", report.trace_desc);
  out += fmt::format("  stages      {}\n", report.stages_desc);
  out += fmt::format("  stragglers  {}\n", report.stragglers_desc);
  out += fmt::format("  tenants     {}\n", report.tenants_desc);
  out += fmt::format("  kernels     {}\n", report.kernel_cost_desc);
  out += fmt::format("  rounds      {} (averages skip {} warm-up round(s))\n\n", s.workload.rounds,
                     s.workload.warmup_rounds);
  size_t w = 8;
  for (const auto& r : report.results) w = std::max(w, r.scheme.size());
  out += fmt::format("  {:<{}} {:>10} {:>10} {:>10}   per stage: sync start (from round start) / sync / exposed / rank\n",
                     "scheme", w, "round", "compute", "exposed");
  for (const auto& r : report.results) {
    std::vector<std::string> st;
    for (size_t i = 0; i < r.stage_sync_s.size(); ++i)
      st.push_back(fmt::format("{}: {} / {} / {}{}", i, format_quantity(r.stage_start_s[i], UnitKind::kTime),
                               format_quantity(r.stage_sync_s[i], UnitKind::kTime),
                               format_quantity(r.stage_exposed_s[i], UnitKind::kTime),
                               r.stage_rank[i] > 0 ? fmt::format(" / {:.1f}", r.stage_rank[i]) : std::string()));
    out += fmt::format("  {:<{}} {:>10} {:>10} {:>10}   {}\n", r.scheme, w, format_quantity(r.round_s, UnitKind::kTime),
                       format_quantity(r.compute_s, UnitKind::kTime), format_quantity(r.exposed_comm_s, UnitKind::kTime),
                       fmt::join(st, "; "));
  }
  for (const auto& r : report.results) {
    out += fmt::format("  {:<{}} sync: {}\n", r.scheme, w, r.sync_desc);
    if (s.cluster.gpu.kernel_cost == "profile") out += fmt::format("  {:<{}} kernels: {}\n", "", w, r.kernel_cost);
  }
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,stages.csv,rounds.csv,"
                     "controller.csv,links.csv{}}}\n",
                     out_dir, s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

}  // namespace ccsim::app
