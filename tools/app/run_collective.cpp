#include "tools/app/run_collective.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>

#include "algorithms/collective_session.hpp"
#include "algorithms/compressed_collective.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"
#include "sim/base/uninit_vector.hpp"
#include "sim/base/units.hpp"
#include "sim/concurrent_groups.hpp"
#include "tools/app/seams.hpp"
#include "traces/npy.hpp"

namespace ccsim::app {
namespace {

using json = nlohmann::json;

using RankTensor = UninitVector<float>;

// `to` becomes a copy of `from`, written in pieces on every core.
void parallel_copy(std::span<const float> from, RankTensor& to) {
  to.resize(from.size());
  kern::parallel_for(from.size(), 1 << 20, [&](uint64_t b, uint64_t e) {
    std::copy(from.begin() + static_cast<ptrdiff_t>(b), from.begin() + static_cast<ptrdiff_t>(e),
              to.begin() + static_cast<ptrdiff_t>(b));
  });
}

// Group 0's per-rank gradients of `elements` entries: the synthetic generator's, or worker w
// reading files[w % files].
Result<RankTensors> load_gradients(const Scenario& s, uint64_t elements, uint32_t ranks) {
  const GradientsConfig& g = s.gradients;
  RankTensors grads(ranks);
  if (g.source == GradientSource::kSynthetic) {
    const traces::SyntheticGradientSpec spec = g.synthetic_spec(elements);
    std::vector<std::span<float>> views;
    for (auto& v : grads) {
      v.resize(spec.elements);
      views.emplace_back(v);
    }
    traces::generate_synthetic_gradients(spec, static_cast<uint64_t>(s.seed), views);
    return grads;
  }
  if (g.source == GradientSource::kDump) {
    CCSIM_ASSIGN_OR_RETURN(DumpGradients d, read_dump_gradients(g, ranks));
    if (d.ranks.empty() || d.ranks[0].size() != elements)
      return io_error(fmt::format("{}: now holds {} values per worker, {} when the scenario was checked", g.dump,
                                  d.ranks.empty() ? 0 : d.ranks[0].size(), elements));
    return std::move(d.ranks);
  }
  std::vector<std::vector<float>> loaded;
  for (const std::string& file : g.files) {
    CCSIM_ASSIGN_OR_RETURN(traces::NpyArray arr, traces::read_npy(file));
    if (arr.values.size() != elements)
      return io_error(fmt::format("{}: now holds {} values, {} when the scenario was checked", file,
                                  arr.values.size(), elements));
    CCSIM_RETURN_IF_ERROR(traces::check_finite_npy(file, arr.values));
    loaded.push_back(std::move(arr.values));
  }
  for (uint32_t r = 0; r < ranks; ++r) parallel_copy(loaded[r % loaded.size()], grads[r]);
  return grads;
}

std::string gradients_desc(const Scenario& s) {
  const GradientsConfig& g = s.gradients;
  if (g.source == GradientSource::kNpy)
    return fmt::format("{} .npy file(s), worker w reads file w mod {}", g.files.size(), g.files.size());
  if (g.source == GradientSource::kDump)
    return fmt::format("gradient dump {}, {}, rank r reads worker r mod its workers",
                       std::filesystem::path(g.dump).filename().string(),
                       g.steps.empty() ? std::string("its first dumped step") : fmt::format("step {}", g.steps[0]));
  const traces::SyntheticGradientSpec& y = g.synthetic;
  const std::string shared = y.envelope_correlation < 1.0
                                 ? fmt::format(" correlated {} between ranks", y.envelope_correlation)
                                 : std::string();
  return fmt::format("synthetic ({} layers, scales over {} decades, correlation {}, envelope sigma {}{})", y.layers,
                     y.scale_decades, y.correlation, y.envelope_sigma, shared);
}

// What the numerics ran on: every rank's whole gradient, or a sample, and why.
std::string numerics_note(const Scenario& s, const GradientPlan& gp, const RunReport& report) {
  const std::string where = report.groups == 1 ? fmt::format("all {} ranks", report.group_size)
                                               : fmt::format("group 0 (ranks {}..)", report.loaded.plan->groups.front().front());
  if (!gp.sampled()) return fmt::format("vNMSE on the whole tensor, on {}", where);
  if (gp.sample_elements == 0)
    return fmt::format("vNMSE not measured: even 4 KB per rank on {} would need about {}, more than {}; metadata "
                       "phases planned on the whole gradient, one rank at a time",
                       where, format_quantity(gp.sample_need_bytes, UnitKind::kBytes), numerics_limit_desc(s, gp.limit_bytes));
  return fmt::format("vNMSE on a {} synthetic sample per rank of the same distribution, on {} (the whole {} would "
                     "need about {}, more than {}); metadata phases planned on the whole gradient, one rank at a time",
                     format_quantity(4.0 * static_cast<double>(gp.sample_elements), UnitKind::kBytes), where,
                     format_quantity(4.0 * static_cast<double>(gp.elements), UnitKind::kBytes),
                     format_quantity(gp.full_need_bytes, UnitKind::kBytes), numerics_limit_desc(s, gp.limit_bytes));
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
  report.gradients_desc = gradients_desc(s);
  report.numerics_note = numerics_note(s, plan.gradients, report);
  report.vnmse_elements = plan.gradients.sample_elements;
}

// The ring all-reduce's closed form, where it applies (one switch, one GPU per node, one group).
bool ring_formula(const Scenario& s, const topo::CollectiveInfo& collective, const RunReport& report) {
  return collective.operation == topo::CollectiveOp::kAllReduce && collective.algorithm == "ring" &&
         s.cluster.topology == "star" && s.cluster.gpus_per_node == 1 && report.groups == 1 &&
         s.collective.segments == 1;
}

json layout_json(const std::vector<algo::LayerShape>& layout) {
  json out = json::array();
  for (const algo::LayerShape& l : layout) out.push_back({l.offset, l.count, l.rows, l.cols});
  return out;
}

// Every input scheme i's numerics (run_numerics) read: its scheme, the schedule's inputs (the
// collective, group size, options), the tensor (size, layers, sample, source, seed) and the
// gradient files' identity. Timing-only settings (bandwidth, latency, topology, tenants,
// stragglers, kernel costs) are not in it, so a run that differs only in them reuses the figure.
json numerics_key(const LoadedScenario& loaded, size_t i, uint32_t group_size) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const GradientPlan& gp = plan.gradients;
  const topo::CollectiveOptions& o = plan.base;
  json key = {{"numerics", "collective vNMSE"}, {"format", 1},
              {"scheme", s.compression[i].scheme}, {"params", s.compression[i].params},
              {"collective", {topo::collective_op_name(plan.schemes[i].collective->operation),
                              plan.schemes[i].collective->algorithm}},
              {"ranks", group_size}, {"options", {o.align, o.segments, o.root, o.gpus_per_node, o.cuts}},
              {"elements", gp.elements}, {"sample_elements", gp.sample_elements},
              {"layout", layout_json(gp.layout)}, {"sample_layout", layout_json(gp.sample_layout)},
              {"gradients", loaded.resolved.value("gradients", json())}, {"seed", s.seed}};
  if (s.gradients.source == GradientSource::kDump) key["files"] = file_stamps(s.gradients.dump);
  for (const std::string& f : s.gradients.files) key["files"].push_back(file_stamps(f));
  return key;
}

// The vNMSE figures of group 0's per-rank errors.
void set_vnmse(std::span<const algo::ErrorStats> errs, SchemeResult& r) {
  r.vnmse_max_rank = 0;
  for (const auto& e : errs) r.vnmse_max_rank = std::max(r.vnmse_max_rank, algo::relative_error(e));
  r.vnmse = algo::vnmse(errs);
}

// Group 0's numerics: the round run on real buffers, vNMSE against what the operation defines. On
// the whole tensor the timed round itself runs; on a sample, a fresh instance of the scheme
// (algo::CollectiveSession) plans and runs the sample's round. `work` is the ranks' buffers the
// round runs on, kept from scheme to scheme so that their memory is mapped once.
Status run_numerics(const LoadedScenario& loaded, size_t i, const algo::CompressedCollective& lowering,
                    const RankTensors& grads, RankTensors& work, uint32_t groups, SchemeResult& r) {
  const Scenario& s = loaded.scenario;
  const GradientPlan& gp = loaded.plan->gradients;
  const auto seed = static_cast<uint64_t>(s.seed);
  const std::vector<std::span<const float>> ins(grads.begin(), grads.end());
  work.resize(grads.size());
  for (size_t k = 0; k < grads.size(); ++k) parallel_copy(grads[k], work[k]);
  const std::vector<std::span<float>> views(work.begin(), work.end());
  std::vector<algo::ErrorStats> errs;
  if (gp.sampled()) {
    CCSIM_ASSIGN_OR_RETURN(auto session, algo::CollectiveSession::create(
                                             s.compression[i].scheme, s.compression[i].params, *loaded.plan->schemes[i].collective,
                                             lowering.ranks(), gp.sample_elements, loaded.plan->base,
                                             gp.sample_layout, seed));
    Result<algo::SessionRound> round = session->run(ins, views);
    if (!round.ok()) return round.status().at("/gradients");
    errs = std::move(round->errors);
  } else {
    CCSIM_ASSIGN_OR_RETURN(const algo::NumericsRound round, lowering.run(views, {seed, 0}));
    CCSIM_CHECK(round.stats.wire_bytes * groups == r.timing.wire_bytes, "numerics sent {} bytes, timing {} over {} groups",
                round.stats.wire_bytes, r.timing.wire_bytes, groups);
    const std::vector<std::span<const float>> outs(work.begin(), work.end());
    errs = algo::operation_errors(round.schedule, ins, outs);
    CCSIM_RETURN_IF_ERROR(algo::check_errors_finite(ins, errs, r.scheme).at("/gradients"));
  }
  set_vnmse(errs, r);
  return ok_status();
}

// A compression entry's scheme and its lowering on the whole tensor (planned by plan_schemes).
struct Lowered {
  std::unique_ptr<algo::Compressor> comp;
  std::unique_ptr<algo::CompressedCollective> lowering;
};

Result<std::vector<Lowered>> lower_schemes(const LoadedScenario& loaded, uint32_t g, uint64_t elements) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  std::vector<Lowered> out(s.compression.size());
  for (size_t i = 0; i < out.size(); ++i) {
    CCSIM_ASSIGN_OR_RETURN(out[i].comp, algo::CompressorRegistry::global().create(s.compression[i].scheme,
                                                                                 s.compression[i].params));
    out[i].comp->set_layout(plan.gradients.layout);
    out[i].lowering =
        std::make_unique<algo::CompressedCollective>(*out[i].comp, *plan.schemes[i].collective, g, elements, plan.base);
  }
  return out;
}

// Every scheme's round fixed: those with a metadata phase planned on the whole gradient, from
// `grads` when they hold it, else generated one rank at a time (the same plan, bit for bit).
Status plan_schemes(const Scenario& s, const GradientPlan& gp, uint32_t g,
                    const RankTensors& grads, std::vector<Lowered>& schemes) {
  const algo::NumericsOptions options{static_cast<uint64_t>(s.seed), 0};
  std::vector<algo::PlanAccumulator> streams;
  std::vector<size_t> streamed;
  for (size_t i = 0; i < schemes.size(); ++i) {
    algo::CompressedCollective& l = *schemes[i].lowering;
    if (l.plan_bytes() == 0) {
      CCSIM_RETURN_IF_ERROR(l.fix());
    } else if (!gp.sampled()) {
      const std::vector<std::span<const float>> ins(grads.begin(), grads.end());
      CCSIM_RETURN_IF_ERROR(l.plan(ins, options).status());
    } else {
      streams.emplace_back(*schemes[i].comp, gp.elements, g, options);
      streamed.push_back(i);
    }
  }
  if (streams.empty()) return ok_status();
  RankTensor rank(gp.elements);
  const std::span<float> view(rank);
  for (uint32_t r = 0; r < g; ++r) {
    traces::generate_synthetic_gradients(s.gradients.synthetic_spec(gp.elements), static_cast<uint64_t>(s.seed),
                                         std::span<const std::span<float>>(&view, 1), r);
    for (auto& acc : streams) acc.add(rank);
  }
  for (size_t k = 0; k < streams.size(); ++k) {
    CCSIM_RETURN_IF_ERROR(schemes[streamed[k]].lowering->commit_plan(streams[k]).status());
  }
  return ok_status();
}

// The entries a thread holds of each rank's gradient and of its working copy in
// run_in_pieces(): 8 MiB of them in all, or one error piece of each.
uint64_t piece_elements(uint32_t ranks) { return std::max<uint64_t>(uint64_t{1} << 16, (uint64_t{1} << 20) / ranks); }

// Group 0's gradients a piece at a time: copied from `grads` where they are loaded, else drawn (the
// generator starts on an even entry: a piece starting on an odd one is drawn from the entry before).
algo::PieceSource piece_source(const Scenario& s, uint64_t elements, const RankTensors& grads) {
  if (!grads.empty())
    return [&grads](uint64_t first, std::span<const std::span<float>> views) {
      for (size_t r = 0; r < views.size(); ++r)
        std::copy_n(grads[r].begin() + static_cast<ptrdiff_t>(first), views[r].size(), views[r].begin());
    };
  return [spec = s.gradients.synthetic_spec(elements), seed = static_cast<uint64_t>(s.seed)](
             uint64_t first, std::span<const std::span<float>> views) {
    if (first % 2 == 0) {
      traces::generate_synthetic_range(spec, seed, first, views);
      return;
    }
    RankTensors wide(views.size());
    std::vector<std::span<float>> drawn;
    for (size_t r = 0; r < views.size(); ++r) {
      wide[r].resize(views[r].size() + 1);
      drawn.emplace_back(wide[r]);
    }
    traces::generate_synthetic_range(spec, seed, first - 1, drawn);
    for (size_t r = 0; r < views.size(); ++r) std::copy_n(wide[r].begin() + 1, views[r].size(), views[r].begin());
  };
}

// The numerics of the schemes whose collective runs in pieces (schedules[i] set), in one pass over
// group 0's gradients for each set of them that runs over the same pieces (every piece drawn once
// for all of a set).
Result<std::vector<std::optional<algo::PieceRoundResult>>> numerics_in_pieces(
    const Scenario& s, uint64_t elements, uint32_t g, const std::vector<Lowered>& schemes,
    const std::vector<std::optional<topo::Schedule>>& schedules, const RankTensors& grads) {
  std::vector<std::optional<algo::PieceRoundResult>> out(schemes.size());
  std::vector<bool> done(schemes.size(), false);
  const algo::PieceSource source = piece_source(s, elements, grads);
  const algo::NumericsOptions options{static_cast<uint64_t>(s.seed), 0};
  for (size_t i = 0; i < schemes.size(); ++i) {
    if (!schedules[i] || done[i]) continue;
    std::vector<algo::PieceRound> rounds;
    std::vector<size_t> which;
    for (size_t j = i; j < schemes.size(); ++j)
      if (schedules[j] && !done[j] && algo::pieces_together(*schedules[i], *schedules[j])) {
        rounds.push_back({&*schedules[j], schemes[j].comp.get()});
        which.push_back(j);
        done[j] = true;
      }
    CCSIM_ASSIGN_OR_RETURN(std::vector<algo::PieceRoundResult> results,
                           algo::run_in_pieces(rounds, source, piece_elements(g), options));
    for (size_t k = 0; k < results.size(); ++k) out[which[k]] = std::move(results[k]);
  }
  for (size_t i = 0; i < schemes.size(); ++i)  // in entry order, as the whole-tensor runs check them
    if (out[i])
      CCSIM_RETURN_IF_ERROR(algo::check_errors_finite(source, elements, g, 2, piece_elements(g), out[i]->errors,
                                                      s.compression[i].scheme)
                                .at("/gradients"));
  return out;
}

// One planned scheme timed on every group at once, then its numerics (`cached`: as an earlier run
// with the same numerics inputs measured them).
Result<SchemeResult> run_scheme(const LoadedScenario& loaded, size_t i, Lowered& lowered,
                                const RankTensors& grads, RankTensors& work, const RunReport& report,
                                const std::optional<json>& cached,
                                const std::optional<algo::PieceRoundResult>& in_pieces) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const CompressionConfig& cc = s.compression[i];
  algo::CompressedCollective& lowering = *lowered.lowering;
  const uint32_t g = report.group_size;
  SchemeResult r;
  r.label = plan.schemes[i].label;
  r.algorithm = plan.schemes[i].collective->algorithm;
  r.scheme = cc.scheme;
  r.params = cc.params;
  r.unbiased = lowered.comp->unbiased();
  r.tensor_wire_bytes = lowering.tensor_wire_bytes();
  r.bytes = lowering.round_bytes();
  r.bits_per_element = algo::RoundBytes::bits(r.bytes.total(), report.elements);

  sim::Engine engine;
  sim::FlowNetwork network(engine, sim::link_specs(*plan.topology));
  if (s.outputs.link_timeline_bin_s > 0) network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
  sim::ConcurrentGroups groups(engine, network, *plan.topology, plan.groups);
  const std::vector<topo::KernelKind> round = lowering.round_ops();
  r.kernel_cost = plan.costs.scheme(cc.scheme, lowered.comp->params()).describe(round);
  r.timing = sim::time_round(groups, sim::group_phases(lowering.phases(), plan.costs));
  if (engine.passed_horizon())
    return sim::past_horizon_error(fmt::format("the {} collective of '{}'", r.algorithm, r.label))
        .at("/gradients");
  r.events = engine.events_processed();
  r.links = network.link_stats();
  r.timeline = network.timeline();
  const double alpha = plan.topology->route_latency_s(0, 1), bw = s.cluster.nic_bandwidth_Bps;
  r.analytic_time_s = ring_formula(s, *plan.schemes[i].collective, report)
                          ? 2.0 * (g - 1) * (alpha + static_cast<double>(r.tensor_wire_bytes) / (g * bw))
                          : std::numeric_limits<double>::quiet_NaN();
  const ServingConfig& sv = s.serving;
  r.serving_latency_s = static_cast<double>(sv.layers) *
                        (sv.layer_compute_s + static_cast<double>(sv.collectives_per_layer) * r.timing.time_s);
  r.vs_analytic = s.cluster.gpu.kernel_cost == sim::KernelCostMode::kIdeal
                      ? (r.timing.time_s - r.timing.plan_time_s) / r.analytic_time_s - 1.0
                      : std::numeric_limits<double>::quiet_NaN();
  r.vnmse = r.vnmse_max_rank = std::numeric_limits<double>::quiet_NaN();
  if (cached) {
    r.vnmse = cached_number(cached->at("vnmse"));
    r.vnmse_max_rank = cached_number(cached->at("vnmse_max_rank"));
  } else if (in_pieces) {
    CCSIM_CHECK(in_pieces->stats.wire_bytes * report.groups == r.timing.wire_bytes,
                "numerics sent {} bytes, timing {} over {} groups", in_pieces->stats.wire_bytes, r.timing.wire_bytes,
                report.groups);
    set_vnmse(in_pieces->errors, r);
  } else if (plan.gradients.sample_elements > 0) {
    CCSIM_RETURN_IF_ERROR(run_numerics(loaded, i, lowering, grads, work, report.groups, r));
  }
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

Result<RunReport> run_scenario(const LoadedScenario& loaded, const RunHooks& hooks) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  CCSIM_CHECK(plan.kind == RunKind::kCollective, "run_scenario on a training scenario");
  RunReport report;
  report.loaded = loaded;
  describe(loaded, report);
  const uint32_t g = report.group_size;
  const double alpha = plan.topology->route_latency_s(0, 1), bw = s.cluster.nic_bandwidth_Bps;
  const bool any_ring = std::any_of(plan.schemes.begin(), plan.schemes.end(), [&](const SchemePlan& e) {
    return ring_formula(s, *e.collective, report);
  });
  report.analytic_desc = any_ring
                             ? fmt::format("2(n-1)(alpha + S/(nB)), n={}, alpha={} (rank-to-rank route), B={}{}", g,
                                           format_quantity(alpha, UnitKind::kTime),
                                           format_quantity(bw, UnitKind::kBandwidth),
                                           s.cluster.gpu.kernel_cost == sim::KernelCostMode::kIdeal
                                               ? ""
                                               : "; network only, so not compared with a run whose kernels are timed")
                             : "none for this collective/topology";
  const GradientPlan& gp = plan.gradients;
  CCSIM_ASSIGN_OR_RETURN(std::vector<Lowered> schemes, lower_schemes(loaded, g, gp.elements));
  // Numerics an earlier run measured on equal inputs; the gradients are read only where a scheme
  // still needs them (its numerics, or a metadata phase planned on the whole tensor).
  const bool caching = hooks.numerics != nullptr && gp.sample_elements > 0;
  std::vector<json> keys(schemes.size());
  std::vector<std::optional<json>> cached(schemes.size());
  // A scheme without a metadata phase is fixed now, whatever the data; where its collective then
  // runs in pieces (schedules[i]), its numerics need no whole gradients when they are drawn.
  std::vector<std::optional<topo::Schedule>> schedules(schemes.size());
  bool numerics_needed = false, plan_needs_data = false;
  for (size_t i = 0; i < schemes.size(); ++i) {
    if (caching) {
      keys[i] = numerics_key(loaded, i, g);
      cached[i] = hooks.numerics->find(keys[i]);
    }
    algo::CompressedCollective& l = *schemes[i].lowering;
    const bool measured = !cached[i] && gp.sample_elements > 0;
    if (measured && !gp.sampled() && l.plan_bytes() == 0) {
      CCSIM_RETURN_IF_ERROR(l.fix());
      topo::Schedule schedule = l.bound_schedule();
      if (algo::runs_in_pieces(schedule, *schemes[i].comp, {})) schedules[i] = std::move(schedule);
    }
    numerics_needed |= measured && (!schedules[i] || s.gradients.source != GradientSource::kSynthetic);
    plan_needs_data |= l.plan_bytes() > 0;
  }
  RankTensors grads;
  if (!gp.sampled() && (numerics_needed || plan_needs_data)) {
    CCSIM_ASSIGN_OR_RETURN(grads, load_gradients(s, gp.elements, g));
  }
  CCSIM_RETURN_IF_ERROR(plan_schemes(s, gp, g, grads, schemes));
  if (gp.sampled() && numerics_needed) {
    CCSIM_ASSIGN_OR_RETURN(grads, load_gradients(s, gp.sample_elements, g));
  }
  CCSIM_ASSIGN_OR_RETURN(const auto in_pieces, numerics_in_pieces(s, gp.elements, g, schemes, schedules, grads));
  RankTensors work;
  for (size_t i = 0; i < s.compression.size(); ++i) {
    if (hooks.progress) hooks.progress(i, s.compression.size(), report.loaded.plan->schemes[i].label);
    CCSIM_ASSIGN_OR_RETURN(SchemeResult r,
                           run_scheme(loaded, i, schemes[i], grads, work, report, cached[i], in_pieces[i]));
    if (caching && !cached[i])
      hooks.numerics->store(keys[i],
                            {{"vnmse", cache_number(r.vnmse)}, {"vnmse_max_rank", cache_number(r.vnmse_max_rank)}});
    report.results.push_back(std::move(r));
  }
  return report;
}

}  // namespace ccsim::app
