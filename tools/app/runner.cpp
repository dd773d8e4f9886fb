#include "tools/app/runner.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <limits>

#include "algorithms/fp32/fp32.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"
#include "sim/base/units.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/topology.hpp"
#include "traces/device_profile.hpp"
#include "traces/npy.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Per-rank input gradients, flattened, and their layers (1-D: neither source records matrix shapes).
Status load_gradients(const Scenario& s, uint32_t ranks, std::vector<std::vector<float>>& grads, std::string& desc,
                      std::vector<algo::LayerShape>& layout) {
  const GradientsConfig& g = s.gradients;
  grads.assign(ranks, {});
  layout.clear();
  if (g.source == "synthetic") {
    const traces::SyntheticGradientSpec spec = g.synthetic_spec(g.size_bytes / 4);
    std::vector<std::span<float>> views;
    for (auto& v : grads) {
      v.resize(spec.elements);
      views.emplace_back(v);
    }
    traces::generate_synthetic_gradients(spec, static_cast<uint64_t>(s.seed), views);
    const std::vector<uint64_t> offsets = traces::synthetic_layer_offsets(spec, static_cast<uint64_t>(s.seed));
    for (size_t l = 0; l + 1 < offsets.size(); ++l)
      layout.push_back({offsets[l], offsets[l + 1] - offsets[l], offsets[l + 1] - offsets[l], 1});
    const std::string shared = g.envelope_correlation < 1.0
                                   ? fmt::format(" correlated {} between ranks", g.envelope_correlation)
                                   : std::string();
    desc = fmt::format("synthetic ({} layers, scales over {} decades, correlation {}, envelope sigma {}{})", g.layers,
                       g.scale_decades, g.correlation, g.envelope_sigma, shared);
    return ok_status();
  }
  // npy: worker w reads files[w % files.size()].
  std::vector<std::vector<float>> loaded;
  for (size_t i = 0; i < g.files.size(); ++i) {
    CCSIM_ASSIGN_OR_RETURN(traces::NpyArray arr, traces::read_npy(g.files[i]));
    if (!loaded.empty() && arr.values.size() != loaded.front().size())
      return invalid_argument(fmt::format("/gradients/files/{}: {} has {} elements but {} has {}; all workers' gradients "
                                          "must have the same size", i, g.files[i], arr.values.size(), g.files[0],
                                          loaded.front().size()));
    if (arr.values.empty()) return invalid_argument(fmt::format("/gradients/files/{}: {} is empty", i, g.files[i]));
    loaded.push_back(std::move(arr.values));
  }
  for (uint32_t r = 0; r < ranks; ++r) grads[r] = loaded[r % loaded.size()];
  layout.push_back({0, grads.front().size(), grads.front().size(), 1});
  desc = fmt::format("{} .npy file(s), worker w reads file w mod {}", loaded.size(), loaded.size());
  return ok_status();
}

// Group members per node as hierarchical algorithms see it: consecutive members in blocks of G on
// one node each; 1 when the group is not laid out that way.
uint32_t group_gpus_per_node(const std::vector<uint32_t>& group, const topo::Topology& t) {
  uint32_t lead = 0;
  while (lead < group.size() && t.node_of(group[lead]) == t.node_of(group[0])) ++lead;
  if (group.size() % lead != 0) return 1;
  for (size_t i = 0; i < group.size(); ++i)
    if (t.node_of(group[i]) != t.node_of(group[i - i % lead])) return 1;
  for (size_t b = lead; b < group.size(); b += lead)
    if (t.node_of(group[b]) == t.node_of(group[b - lead])) return 1;
  return lead;
}

// Rounding noise below 1e-9 % prints as +0.0000%, not -0.0000%.
double display_zero(double x) { return std::fabs(x) < 1e-9 ? 0.0 : x; }

}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

const char* ccsim_version() { return "0.1.0"; }

Status write_files_atomically(const std::vector<std::pair<fs::path, std::string>>& files) {
  std::vector<fs::path> temps;
  auto cleanup = [&] {
    std::error_code ec;
    for (const auto& t : temps) fs::remove(t, ec);
  };
  for (const auto& [path, content] : files) {
    fs::path tmp = path;
    tmp += fmt::format(".tmp.{}", static_cast<unsigned long>(::getpid()));
    temps.push_back(tmp);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      cleanup();
      return io_error(fmt::format("{}: write failed", tmp.string()));
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temps[i], files[i].first, ec);
    if (ec) {
      cleanup();
      return io_error(fmt::format("{}: rename failed: {}", files[i].first.string(), ec.message()));
    }
  }
  return ok_status();
}


Result<RunReport> run_scenario(const LoadedScenario& loaded) {
  const Scenario& s = loaded.scenario;
  RunReport report;
  report.loaded = loaded;
  CCSIM_ASSIGN_OR_RETURN(const topo::Topology topology, topo::build_topology(cluster_spec(s.cluster)));
  report.ranks = topology.num_ranks();
  report.topology_desc = fmt::format("{}; {} ranks ({} x {} GPUs), {} links, NIC {}, link latency {}",
                                     topology.description().empty() ? topology.kind() : topology.description(),
                                     report.ranks, topology.num_nodes(), topology.gpus_per_node(),
                                     topology.links().size(), format_quantity(s.cluster.nic_bandwidth_Bps, UnitKind::kBandwidth),
                                     format_quantity(s.cluster.link_latency_s, UnitKind::kTime));
  report.link_rows = link_rows_of(topology);

  CCSIM_ASSIGN_OR_RETURN(const std::vector<std::vector<uint32_t>> groups, collective_groups(s));
  report.groups = static_cast<uint32_t>(groups.size());
  report.group_size = static_cast<uint32_t>(groups.front().size());
  report.group_desc = s.collective.group == "world"
                          ? fmt::format("all {} ranks", report.ranks)
                          : fmt::format("{} {} groups of {} ranks at once (tp={} pp={} dp={}, order {})", report.groups,
                                        s.collective.group, report.group_size, s.parallelism.tp, s.parallelism.pp,
                                        report.ranks / (s.parallelism.tp * s.parallelism.pp), s.parallelism.order);

  CCSIM_ASSIGN_OR_RETURN(const KernelCosts kernel_costs, KernelCosts::of(s));
  report.kernel_cost_desc = kernel_costs.describe();

  // Numerics run on group 0's ranks with real data, when they fit in memory.
  const uint32_t g = report.group_size;
  std::vector<std::vector<float>> grads;
  std::vector<algo::LayerShape> layout;
  const uint64_t synthetic_elements = s.gradients.size_bytes / 4;
  const bool numerics = s.gradients.source != "synthetic" ||
                        3.0 * g * static_cast<double>(synthetic_elements) * 4 <= static_cast<double>(s.gradients.numerics_memory_bytes);
  if (numerics) {
    CCSIM_RETURN_IF_ERROR(load_gradients(s, g, grads, report.gradients_desc, layout));
    report.elements = grads.front().size();
    report.numerics_note = report.groups == 1 ? fmt::format("numerics on all {} ranks", g)
                                              : fmt::format("numerics on group 0 (ranks {}..)", groups.front().front());
  } else {
    report.elements = synthetic_elements;
    report.gradients_desc = "synthetic (not generated: numerics skipped)";
    report.numerics_note = fmt::format(
        "numerics skipped: {} ranks x {} need about {} (> gradients.numerics_memory {})", g,
        format_quantity(static_cast<double>(synthetic_elements) * 4, UnitKind::kBytes),
        format_quantity(3.0 * g * static_cast<double>(synthetic_elements) * 4, UnitKind::kBytes),
        format_quantity(static_cast<double>(s.gradients.numerics_memory_bytes), UnitKind::kBytes));
  }

  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* collective,
                         topo::find_collective(s.collective.operation, s.collective.algorithm));
  topo::CollectiveOptions base_options;
  base_options.segments = static_cast<uint32_t>(s.collective.segments);
  base_options.root = static_cast<uint32_t>(s.collective.root);
  base_options.gpus_per_node = group_gpus_per_node(groups.front(), topology);
  if (Status st = collective->check(g, report.elements, base_options); !st.ok())
    return invalid_argument(fmt::format("/collective/algorithm: {} cannot run {} elements on {} ranks: {}",
                                        s.collective.algorithm, report.elements, g, st.message()));

  const bool ring_formula = collective->operation == topo::CollectiveOp::kAllReduce && collective->algorithm == "ring" &&
                            s.cluster.topology == "star" && s.cluster.gpus_per_node == 1 && report.groups == 1 &&
                            s.collective.segments == 1;
  const double alpha = topology.route_latency_s(0, 1);
  const double bw = s.cluster.nic_bandwidth_Bps;
  report.analytic_desc = ring_formula ? fmt::format("2(n-1)(alpha + S/(nB)), n={}, alpha={} (rank-to-rank route), B={}",
                                                    g, format_quantity(alpha, UnitKind::kTime),
                                                    format_quantity(bw, UnitKind::kBandwidth))
                                      : "none for this collective/topology";

  std::vector<std::vector<float>> work(numerics ? g : 0);
  for (size_t i = 0; i < s.compression.size(); ++i) {
    const CompressionConfig& cc = s.compression[i];
    auto created = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
    if (!created.ok()) return created.status().with_context(fmt::format("/compression/{}", i));
    algo::Compressor& comp = **created;
    topo::CollectiveOptions options = base_options;
    options.align = comp.alignment();

    SchemeResult r;
    r.scheme = cc.scheme;
    r.params = cc.params;
    r.unbiased = comp.unbiased();
    comp.set_layout(layout);
    // Metadata phase first: wire sizes may depend on what it agrees on. It needs every rank's data.
    if (!comp.plan_format(report.elements, g).empty()) {
      if (!numerics)
        return invalid_argument(fmt::format("/compression/{}: '{}' agrees on metadata from the gradients each round, "
                                            "but they are not loaded ({})",
                                            i, cc.scheme, report.numerics_note));
      std::vector<std::span<const float>> ins(grads.begin(), grads.end());
      CCSIM_ASSIGN_OR_RETURN(const algo::PlanReport plan,
                             algo::plan_round(comp, ins, {static_cast<uint64_t>(s.seed), 0}));
      r.plan_bytes_per_rank = plan.wire_bytes_per_rank;
    }
    // After the plan, which may fix a low-rank scheme's factors: such schemes reduce a shorter
    // vector than the tensor, which only an all-reduce can do.
    const uint64_t reduced = comp.reduced_elements(report.elements);
    CCSIM_RETURN_IF_ERROR(algo::check_reduced_length(comp, collective->operation, report.elements, reduced)
                              .with_context(fmt::format("/compression/{}", i)));
    algo::set_shard_options(comp, collective->operation, reduced, g, options);
    // The collective under the scheme's alignment and shard cuts, on what it reduces.
    if (Status st = collective->check(g, reduced, options); !st.ok()) {
      if (reduced != report.elements)
        return invalid_argument(fmt::format("/compression/{}: {} cannot reduce the {} prepared entries of '{}' on {} "
                                            "ranks: {}", i, s.collective.algorithm, reduced, cc.scheme, g, st.message()));
      return invalid_argument(fmt::format("/compression/{}: {} cannot run '{}' on {} elements over {} ranks: {}", i,
                                          s.collective.algorithm, cc.scheme, reduced, g, st.message()));
    }
    r.tensor_wire_bytes = algo::tensor_wire_bytes(comp, reduced, g, options);
    r.bits_per_element = 8.0 * static_cast<double>(r.tensor_wire_bytes) / static_cast<double>(report.elements);

    // Timing: every group's schedule at once on one network, generated step by step: first the
    // metadata all-reduce (plain fp32 words, ring), then the collective itself.
    sim::Engine engine;
    sim::FlowNetwork network(engine, sim::link_specs(topology));
    if (s.outputs.link_timeline_bin_s > 0) network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
    std::vector<std::unique_ptr<topo::ScheduleGenerator>> generators;
    std::vector<std::unique_ptr<sim::ScheduleRunner>> runners;
    const sim::KernelCostModel scheme_costs = kernel_costs.scheme(cc.scheme, cc.params);
    using MakeGenerator = std::function<std::unique_ptr<topo::ScheduleGenerator>()>;
    auto run_groups = [&](const MakeGenerator& make, const sim::ScheduleBinder& binder,
                          const sim::KernelCostModel& costs) {
      const size_t first = runners.size();
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        generators.push_back(make());
        sim::RunnerOptions ro;
        ro.rank_map = groups[gi];
        ro.ecmp_salt = gi;
        runners.push_back(std::make_unique<sim::ScheduleRunner>(engine, network, topology, *generators.back(), binder,
                                                                costs, ro));
        runners.back()->start();
      }
      engine.run();
      for (size_t k = first; k < runners.size(); ++k)
        CCSIM_CHECK(runners[k]->done(), "schedule {} did not complete", runners[k]->window().name());
      // The runners themselves, not a view of `runners`: a later call's push_back may reallocate it.
      std::vector<const sim::ScheduleRunner*> ran;
      for (size_t k = first; k < runners.size(); ++k) ran.push_back(runners[k].get());
      return ran;
    };
    const auto comp_binder = [&comp](topo::Schedule& sched, topo::OpId first, topo::OpId end) {
      algo::bind_ops(sched, comp, first, end);
    };
    // Round ops (one per rank on its whole tensor) where the scheme does round work.
    const std::vector<topo::KernelKind> round = algo::round_ops(comp, report.elements, g);
    std::vector<Duration> round_busy(groups.size() * g, Duration::zero());  // per group and group rank
    auto run_round = [&](topo::KernelKind kind) {
      if (std::find(round.begin(), round.end(), kind) == round.end()) return;
      const auto runs = run_groups([&] { return topo::make_round_ops(kind, g, report.elements); }, comp_binder,
                                   scheme_costs);
      for (size_t gi = 0; gi < runs.size(); ++gi)
        for (uint32_t rk = 0; rk < g; ++rk) round_busy[gi * g + rk] += runs[gi]->timing().kernel_busy[rk];
    };
    r.kernel_cost = scheme_costs.describe(round);
    const SimTime plan_start = engine.now();
    if (r.plan_bytes_per_rank > 0) {
      run_round(topo::KernelKind::kPlanLocal);
      CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* plan_ar, topo::find_collective("allreduce", "ring"));
      const uint64_t words = (r.plan_bytes_per_rank + 3) / 4;
      topo::CollectiveOptions plan_options;
      plan_options.align = 1;
      algo::Fp32Compressor fp32;
      run_groups([&] { return plan_ar->make(g, std::max<uint64_t>(words, g), plan_options); },
                 [&fp32](topo::Schedule& sched, topo::OpId first, topo::OpId end) {
                   algo::bind_ops(sched, fp32, first, end);
                 },
                 kernel_costs.scheme(fp32));
      r.plan_time_s = (engine.now() - plan_start).seconds();
    }
    run_round(topo::KernelKind::kPrepare);
    const auto main = run_groups([&] { return collective->make(g, reduced, options); }, comp_binder, scheme_costs);
    const SimTime main_end = engine.now();
    run_round(topo::KernelKind::kFinish);
    const double finish_s = (engine.now() - main_end).seconds();
    for (const Duration d : round_busy) r.round_kernel_time_s = std::max(r.round_kernel_time_s, d.seconds());
    r.time_min_s = std::numeric_limits<double>::infinity();
    for (const auto& run : main) {
      const sim::ScheduleTiming& t = run->timing();
      r.time_s = std::max(r.time_s, (t.end - plan_start).seconds() + finish_s);
      r.time_min_s = std::min(r.time_min_s, (t.end - plan_start).seconds() + finish_s);
      r.wire_bytes_total += t.wire_bytes;
      r.transfers += t.transfers;
      for (const Duration d : t.kernel_busy) r.kernel_time_s = std::max(r.kernel_time_s, d.seconds());
    }
    r.events = engine.events_processed();
    r.links = network.link_stats();
    r.timeline = network.timeline();
    r.analytic_time_s = ring_formula ? 2.0 * (g - 1) * (alpha + static_cast<double>(r.tensor_wire_bytes) / (g * bw))
                                     : std::numeric_limits<double>::quiet_NaN();

    // Numerics: group 0's schedule, materialized, on real buffers.
    r.vnmse = r.vnmse_max_rank = std::numeric_limits<double>::quiet_NaN();
    if (numerics) {
      topo::Schedule schedule = collective->build(g, reduced, options);
      algo::bind_schedule(schedule, comp);
      std::vector<std::span<float>> views;
      std::vector<std::span<const float>> ins, outs;
      for (uint32_t rk = 0; rk < g; ++rk) {
        work[rk] = grads[rk];
        views.emplace_back(work[rk]);
        ins.emplace_back(grads[rk]);
        outs.emplace_back(work[rk]);
      }
      CCSIM_ASSIGN_OR_RETURN(algo::NumericsStats stats,
                             algo::run_numerics(schedule, comp, views, {static_cast<uint64_t>(s.seed), 0}));
      CCSIM_CHECK(stats.wire_bytes * report.groups == r.wire_bytes_total, "numerics sent {} bytes, timing {} over {} groups",
                  stats.wire_bytes, r.wire_bytes_total, report.groups);
      const std::vector<algo::ErrorStats> errs = algo::operation_errors(schedule, ins, outs);
      r.vnmse_max_rank = 0;
      for (const auto& e : errs) {
        const algo::ErrorStats one[1] = {e};
        r.vnmse_max_rank = std::max(r.vnmse_max_rank, algo::vnmse(one));
      }
      r.vnmse = algo::vnmse(errs);
    }
    report.results.push_back(std::move(r));
  }
  return report;
}


json summary_json(const RunReport& report) {
  const Scenario& s = report.loaded.scenario;
  json results = json::array();
  for (const auto& r : report.results) {
    json j = {{"scheme", r.scheme},
              {"params", r.params},
              {"bits_per_element", r.bits_per_element},
              {"tensor_wire_bytes", r.tensor_wire_bytes},
              {"plan_bytes_per_rank", r.plan_bytes_per_rank},
              {"plan_time_s", r.plan_time_s},
              {"wire_bytes_total", r.wire_bytes_total},
              {"transfers", r.transfers},
              {"time_s", r.time_s},
              {"time_min_s", r.time_min_s},
              {"kernel_time_s", r.kernel_time_s},
              {"round_kernel_time_s", r.round_kernel_time_s},
              {"kernel_cost", r.kernel_cost},
              {"events", r.events},
              {"vnmse", std::isnan(r.vnmse) ? json(nullptr) : std::isfinite(r.vnmse) ? json(r.vnmse) : json("inf")},
              {"vnmse_max_rank", std::isnan(r.vnmse_max_rank) ? json(nullptr)
                                 : std::isfinite(r.vnmse_max_rank) ? json(r.vnmse_max_rank)
                                                                   : json("inf")},
              {"unbiased", r.unbiased}};
    if (std::isfinite(r.analytic_time_s)) {
      j["analytic_time_s"] = r.analytic_time_s;
      j["time_vs_analytic"] = r.time_s / r.analytic_time_s - 1.0;
    }
    results.push_back(std::move(j));
  }
  return json{{"ccsim_version", ccsim_version()},
              {"scenario", s.name},
              {"seed", s.seed},
              {"ranks", report.ranks},
              {"topology", report.topology_desc},
              {"collective", s.collective.operation + "/" + s.collective.algorithm},
              {"group", report.group_desc},
              {"group_size", report.group_size},
              {"groups", report.groups},
              {"elements", report.elements},
              {"tensor_bytes", report.elements * 4},
              {"gradients", report.gradients_desc},
              {"numerics", report.numerics_note},
              {"kernel_cost", report.kernel_cost_desc},
              {"analytic_model", report.analytic_desc},
              {"results", results}};
}

std::string results_csv(const RunReport& report) {
  const Scenario& s = report.loaded.scenario;
  std::string out =
      "scenario,scheme,params,ranks,group_size,groups,operation,algorithm,elements,bits_per_element,tensor_wire_bytes,"
      "wire_bytes_total,transfers,time_s,time_min_s,analytic_time_s,time_vs_analytic,kernel_time_s,round_kernel_time_s,"
      "vnmse,vnmse_max_rank,unbiased\n";
  auto num = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{}", x); };
  for (const auto& r : report.results) {
    const bool has = std::isfinite(r.analytic_time_s);
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s.name, r.scheme,
                       csv_field(r.params.dump()), report.ranks, report.group_size, report.groups,
                       s.collective.operation, s.collective.algorithm, report.elements, r.bits_per_element,
                       r.tensor_wire_bytes, r.wire_bytes_total, r.transfers, r.time_s, r.time_min_s,
                       has ? fmt::format("{}", r.analytic_time_s) : "",
                       has ? fmt::format("{}", r.time_s / r.analytic_time_s - 1.0) : "", r.kernel_time_s,
                       r.round_kernel_time_s, num(r.vnmse),
                       num(r.vnmse_max_rank), r.unbiased ? "true" : "false");
  }
  return out;
}

std::vector<LinkRow> link_rows_of(const topo::Topology& topology) {
  std::vector<LinkRow> rows;
  for (const auto& l : topology.links())
    rows.push_back(LinkRow{topology.vertex_name(l.from), topology.vertex_name(l.to), l.capacity_Bps});
  return rows;
}

Result<KernelCosts> KernelCosts::of(const Scenario& s) {
  KernelCosts c;
  const GpuConfig& gpu = s.cluster.gpu;
  if (gpu.kernel_cost == "ideal") return c;
  c.roofline.memory_Bps = gpu.memory_bandwidth_Bps;
  c.roofline.launch = Duration::from_seconds(gpu.kernel_launch_s);
  if (gpu.kernel_cost == "profile") {
    auto p = traces::load_device_profile(gpu.profile);
    if (!p.ok()) return p.status().with_context("/cluster/gpu/profile");
    c.profile = std::make_shared<const kern::DeviceCostProfile>(std::move(*p));
    c.profile_file = gpu.profile;
  }
  return c;
}

sim::KernelCostModel KernelCosts::scheme(const std::string& scheme, const nlohmann::json& params) const {
  if (profile == nullptr) return roofline;
  return sim::KernelCostModel::from_profile(profile, profile_file, scheme, params.dump(), roofline);
}

sim::KernelCostModel KernelCosts::scheme(const algo::Compressor& comp) const {
  if (profile == nullptr) return roofline;
  return sim::KernelCostModel::from_profile(profile, profile_file, std::string(comp.name()), comp.params(), roofline);
}

std::string KernelCosts::describe() const {
  if (profile == nullptr) return roofline.describe();
  return fmt::format("measured profile {} ({} {}, measured {}); kernels it lacks: {}", profile_file, profile->kind,
                     profile->name, profile->measured, roofline.describe());
}

std::string link_rows_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs) {
  std::string out = "scheme,link,from,to,capacity_Bps,bytes,busy_s,utilization,max_flows\n";
  for (const auto& r : runs)
    for (size_t l = 0; l < r.links->size(); ++l) {
      const LinkRow& row = rows[l];
      const sim::LinkStats& st = (*r.links)[l];
      const double util = r.duration_s > 0 ? st.bytes / (row.capacity_Bps * r.duration_s) : 0.0;
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(r.label), l, row.from, row.to, row.capacity_Bps,
                         st.bytes, st.busy_s, util, st.max_flows);
    }
  return out;
}

std::string link_timeline_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs, double bin) {
  if (!(bin > 0)) return {};
  std::string out = "scheme,link,from,to,bin_start_s,bytes,utilization\n";
  for (const auto& r : runs)
    for (size_t l = 0; l < r.timeline->size(); ++l)
      for (size_t b = 0; b < (*r.timeline)[l].size(); ++b) {
        const double bytes = (*r.timeline)[l][b];
        if (bytes <= 0) continue;
        const LinkRow& row = rows[l];
        out += fmt::format("{},{},{},{},{},{},{}\n", csv_field(r.label), l, row.from, row.to,
                           static_cast<double>(b) * bin, bytes, bytes / (row.capacity_Bps * bin));
      }
  return out;
}

namespace {
std::vector<LinkCsvRun> link_runs(const RunReport& report) {
  std::vector<LinkCsvRun> runs;
  for (const auto& r : report.results) runs.push_back({r.scheme, &r.links, &r.timeline, r.time_s});
  return runs;
}
}  // namespace

std::string links_csv(const RunReport& report) { return link_rows_csv(report.link_rows, link_runs(report)); }

std::string links_timeline_csv(const RunReport& report) {
  return link_timeline_csv(report.link_rows, link_runs(report), report.loaded.scenario.outputs.link_timeline_bin_s);
}

Status write_outputs(const RunReport& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  const fs::path d(dir);
  std::vector<std::pair<fs::path, std::string>> files = {
      {d / "scenario.resolved.json", report.loaded.resolved.dump(2) + "\n"},
      {d / "summary.json", summary_json(report).dump(2) + "\n"},
      {d / "results.csv", results_csv(report)},
      {d / "links.csv", links_csv(report)}};
  if (report.loaded.scenario.outputs.link_timeline_bin_s > 0)
    files.emplace_back(d / "links_timeline.csv", links_timeline_csv(report));
  return write_files_atomically(files);
}

std::string format_summary(const RunReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out += fmt::format("ccsim {} | scenario {} | seed {}\n", ccsim_version(), s.name, s.seed);
  out += fmt::format("  cluster     {}\n", report.topology_desc);
  out += fmt::format("  collective  {}/{} over {}\n", s.collective.operation, s.collective.algorithm, report.group_desc);
  out += fmt::format("  tensor      {} fp32 per rank ({} elements), {}\n",
                     format_quantity(static_cast<double>(report.elements) * 4, UnitKind::kBytes), report.elements,
                     report.gradients_desc);
  out += fmt::format("  numerics    {}\n", report.numerics_note);
  out += fmt::format("  kernels     {}\n", report.kernel_cost_desc);
  out += fmt::format("  analytic    {}\n\n", report.analytic_desc);
  out += fmt::format("  {:<8} {:>9} {:>12} {:>12} {:>12} {:>10} {:>11} {:>12} {:>12}\n", "scheme", "bits/elem",
                     "wire/rank", "time", "analytic", "vs formula", "vNMSE", "kernels", "round ops");
  for (const auto& r : report.results) {
    const bool has = std::isfinite(r.analytic_time_s);
    out += fmt::format("  {:<8} {:>9.3f} {:>12} {:>12} {:>12} {:>10} {:>11} {:>12} {:>12}\n", r.scheme,
                       r.bits_per_element,
                       format_quantity(static_cast<double>(r.wire_bytes_total) / static_cast<double>(report.ranks), UnitKind::kBytes),
                       format_quantity(r.time_s, UnitKind::kTime),
                       has ? format_quantity(r.analytic_time_s, UnitKind::kTime) : "-",
                       has ? fmt::format("{:+.4f}%", display_zero(100.0 * (r.time_s / r.analytic_time_s - 1.0))) : "-",
                       std::isnan(r.vnmse) ? std::string("-") : fmt::format("{:.3e}", r.vnmse),
                       format_quantity(r.kernel_time_s, UnitKind::kTime),
                       format_quantity(r.round_kernel_time_s, UnitKind::kTime));
  }
  if (s.cluster.gpu.kernel_cost == "profile")
    for (const auto& r : report.results) out += fmt::format("  {:<8} kernels: {}\n", r.scheme, r.kernel_cost);
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,links.csv{}}}\n", out_dir,
                     s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

}  // namespace ccsim::app
