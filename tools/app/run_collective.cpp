#include "tools/app/run_collective.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/check.hpp"
#include "sim/base/units.hpp"
#include "sim/concurrent_groups.hpp"
#include "tools/app/seams.hpp"
#include "traces/npy.hpp"

namespace ccsim::app {
namespace {

// Group 0's per-rank gradients: the synthetic generator's, or worker w reading files[w % files].
Result<std::vector<std::vector<float>>> load_gradients(const Scenario& s, const GradientPlan& plan, uint32_t ranks) {
  const GradientsConfig& g = s.gradients;
  std::vector<std::vector<float>> grads(ranks);
  if (g.source == GradientSource::kSynthetic) {
    const traces::SyntheticGradientSpec spec = g.synthetic_spec(plan.elements);
    std::vector<std::span<float>> views;
    for (auto& v : grads) {
      v.resize(spec.elements);
      views.emplace_back(v);
    }
    traces::generate_synthetic_gradients(spec, static_cast<uint64_t>(s.seed), views);
    return grads;
  }
  std::vector<std::vector<float>> loaded;
  for (const std::string& file : g.files) {
    CCSIM_ASSIGN_OR_RETURN(traces::NpyArray arr, traces::read_npy(file));
    if (arr.values.size() != plan.elements)
      return io_error(fmt::format("{}: now holds {} values, {} when the scenario was checked", file,
                                  arr.values.size(), plan.elements));
    CCSIM_RETURN_IF_ERROR(traces::check_finite_npy(file, arr.values));
    loaded.push_back(std::move(arr.values));
  }
  for (uint32_t r = 0; r < ranks; ++r) grads[r] = loaded[r % loaded.size()];
  return grads;
}

std::string gradients_desc(const Scenario& s, const GradientPlan& plan) {
  const GradientsConfig& g = s.gradients;
  if (g.source == GradientSource::kNpy)
    return fmt::format("{} .npy file(s), worker w reads file w mod {}", g.files.size(), g.files.size());
  if (!plan.numerics) return "synthetic (not generated: numerics skipped)";
  const traces::SyntheticGradientSpec& y = g.synthetic;
  const std::string shared = y.envelope_correlation < 1.0
                                 ? fmt::format(" correlated {} between ranks", y.envelope_correlation)
                                 : std::string();
  return fmt::format("synthetic ({} layers, scales over {} decades, correlation {}, envelope sigma {}{})", y.layers,
                     y.scale_decades, y.correlation, y.envelope_sigma, shared);
}

// The report's description of the run (everything but the schemes' results).
void describe(const LoadedScenario& loaded, RunReport& report) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const topo::Topology& topology = *plan.topology;
  report.ranks = topology.num_ranks();
  report.topology_desc = topology_line(s, topology, true, true);
  report.link_rows = link_rows_of(topology);
  report.groups = static_cast<uint32_t>(plan.groups.size());
  report.group_size = static_cast<uint32_t>(plan.groups.front().size());
  report.group_desc = s.collective.group == CollectiveGroup::kWorld
                          ? fmt::format("all {} ranks", report.ranks)
                          : fmt::format("{} {} groups of {} ranks at once (tp={} pp={} dp={}, order {})", report.groups,
                                        enum_name<CollectiveGroup>(kCollectiveGroups, s.collective.group),
                                        report.group_size, s.parallelism.tp, s.parallelism.pp,
                                        report.ranks / (s.parallelism.tp * s.parallelism.pp), s.parallelism.order);
  report.kernel_cost_desc = plan.costs.describe();
  report.elements = plan.gradients.elements;
  report.gradients_desc = gradients_desc(s, plan.gradients);
  const uint32_t g = report.group_size;
  report.numerics_note = !plan.gradients.numerics ? numerics_skipped_note(s, g, report.elements)
                         : report.groups == 1
                             ? fmt::format("numerics on all {} ranks", g)
                             : fmt::format("numerics on group 0 (ranks {}..)", plan.groups.front().front());
}

// The ring all-reduce's closed form, where it applies (one switch, one GPU per node, one group).
bool ring_formula(const Scenario& s, const RunPlan& plan, const RunReport& report) {
  return plan.collective->operation == topo::CollectiveOp::kAllReduce && plan.collective->algorithm == "ring" &&
         s.cluster.topology == "star" && s.cluster.gpus_per_node == 1 && report.groups == 1 &&
         s.collective.segments == 1;
}

// Group 0's numerics: the round run on real buffers, vNMSE against what the operation defines.
Status run_numerics(const Scenario& s, const algo::CompressedCollective& lowering,
                    const std::vector<std::vector<float>>& grads, uint32_t groups, SchemeResult& r) {
  std::vector<std::vector<float>> work(grads);
  std::vector<std::span<float>> views(work.begin(), work.end());
  std::vector<std::span<const float>> ins(grads.begin(), grads.end()), outs(work.begin(), work.end());
  CCSIM_ASSIGN_OR_RETURN(const algo::NumericsRound round,
                         lowering.run(views, {static_cast<uint64_t>(s.seed), 0}));
  CCSIM_CHECK(round.stats.wire_bytes * groups == r.timing.wire_bytes, "numerics sent {} bytes, timing {} over {} groups",
              round.stats.wire_bytes, r.timing.wire_bytes, groups);
  const std::vector<algo::ErrorStats> errs = algo::operation_errors(round.schedule, ins, outs);
  CCSIM_RETURN_IF_ERROR(algo::check_errors_finite(ins, errs, r.scheme).at("/gradients"));
  r.vnmse_max_rank = 0;
  for (const auto& e : errs) r.vnmse_max_rank = std::max(r.vnmse_max_rank, algo::relative_error(e));
  r.vnmse = algo::vnmse(errs);
  return ok_status();
}

// One scheme: its round planned (on group 0's data when it has a metadata phase), timed on every
// group at once, then its numerics.
Result<SchemeResult> run_scheme(const LoadedScenario& loaded, size_t i, const std::vector<std::vector<float>>& grads,
                                const RunReport& report) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const CompressionConfig& cc = s.compression[i];
  CCSIM_ASSIGN_OR_RETURN(auto comp, algo::CompressorRegistry::global().create(cc.scheme, cc.params));
  comp->set_layout(plan.gradients.layout);
  const uint32_t g = report.group_size;
  algo::CompressedCollective lowering(*comp, *plan.collective, g, report.elements, plan.base);
  SchemeResult r;
  r.scheme = cc.scheme;
  r.params = cc.params;
  r.unbiased = comp->unbiased();
  if (lowering.plan_bytes() > 0) {
    const std::vector<std::span<const float>> ins(grads.begin(), grads.end());
    CCSIM_ASSIGN_OR_RETURN(const algo::PlanReport p, lowering.plan(ins, {static_cast<uint64_t>(s.seed), 0}));
    r.plan_bytes_per_rank = p.wire_bytes_per_rank;
  } else {
    CCSIM_RETURN_IF_ERROR(lowering.fix());
  }
  r.tensor_wire_bytes = lowering.tensor_wire_bytes();
  r.bits_per_element = 8.0 * static_cast<double>(r.tensor_wire_bytes) / static_cast<double>(report.elements);

  sim::Engine engine;
  sim::FlowNetwork network(engine, sim::link_specs(*plan.topology));
  if (s.outputs.link_timeline_bin_s > 0) network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
  sim::ConcurrentGroups groups(engine, network, *plan.topology, plan.groups);
  const std::vector<topo::KernelKind> round = lowering.round_ops();
  r.kernel_cost = plan.costs.scheme(cc.scheme, comp->params()).describe(round);
  r.timing = sim::time_round(groups, sim::group_phases(lowering.phases(), plan.costs));
  if (engine.passed_horizon())
    return sim::past_horizon_error(fmt::format("the {} collective of '{}'", s.collective.algorithm, cc.scheme))
        .at("/gradients");
  r.events = engine.events_processed();
  r.links = network.link_stats();
  r.timeline = network.timeline();
  const double alpha = plan.topology->route_latency_s(0, 1), bw = s.cluster.nic_bandwidth_Bps;
  r.analytic_time_s = ring_formula(s, plan, report)
                          ? 2.0 * (g - 1) * (alpha + static_cast<double>(r.tensor_wire_bytes) / (g * bw))
                          : std::numeric_limits<double>::quiet_NaN();
  r.vs_analytic = s.cluster.gpu.kernel_cost == sim::KernelCostMode::kIdeal
                      ? (r.timing.time_s - r.timing.plan_time_s) / r.analytic_time_s - 1.0
                      : std::numeric_limits<double>::quiet_NaN();
  r.vnmse = r.vnmse_max_rank = std::numeric_limits<double>::quiet_NaN();
  if (plan.gradients.numerics) CCSIM_RETURN_IF_ERROR(run_numerics(s, lowering, grads, report.groups, r));
  return r;
}

}  // namespace

std::vector<LinkRow> link_rows_of(const topo::Topology& topology) {
  std::vector<LinkRow> rows;
  for (const auto& l : topology.links())
    rows.push_back(LinkRow{topology.vertex_name(l.from), topology.vertex_name(l.to), l.capacity_Bps});
  return rows;
}

std::string topology_line(const Scenario& s, const topo::Topology& topology, bool links, bool latency) {
  std::string out = fmt::format("{}; {} ranks ({} x {} GPUs), ",
                                topology.description().empty() ? topology.kind() : topology.description(),
                                topology.num_ranks(), topology.num_nodes(), topology.gpus_per_node());
  if (links) out += fmt::format("{} links, ", topology.links().size());
  out += fmt::format("NIC {}", format_quantity(s.cluster.nic_bandwidth_Bps, UnitKind::kBandwidth));
  if (latency) out += fmt::format(", link latency {}", format_quantity(s.cluster.link_latency_s, UnitKind::kTime));
  return out;
}

Result<RunReport> run_scenario(const LoadedScenario& loaded, const Progress& progress) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  CCSIM_CHECK(plan.kind == RunKind::kCollective, "run_scenario on a training scenario");
  RunReport report;
  report.loaded = loaded;
  describe(loaded, report);
  const uint32_t g = report.group_size;
  const double alpha = plan.topology->route_latency_s(0, 1), bw = s.cluster.nic_bandwidth_Bps;
  report.analytic_desc = ring_formula(s, plan, report)
                             ? fmt::format("2(n-1)(alpha + S/(nB)), n={}, alpha={} (rank-to-rank route), B={}{}", g,
                                           format_quantity(alpha, UnitKind::kTime),
                                           format_quantity(bw, UnitKind::kBandwidth),
                                           s.cluster.gpu.kernel_cost == sim::KernelCostMode::kIdeal
                                               ? ""
                                               : "; network only, so not compared with a run whose kernels are timed")
                             : "none for this collective/topology";
  std::vector<std::vector<float>> grads;
  if (plan.gradients.numerics) {
    CCSIM_ASSIGN_OR_RETURN(grads, load_gradients(s, plan.gradients, g));
  }
  for (size_t i = 0; i < s.compression.size(); ++i) {
    if (progress) progress(i, s.compression.size(), s.compression[i].scheme);
    CCSIM_ASSIGN_OR_RETURN(SchemeResult r, run_scheme(loaded, i, grads, report));
    report.results.push_back(std::move(r));
  }
  return report;
}

}  // namespace ccsim::app
