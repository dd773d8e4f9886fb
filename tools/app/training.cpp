#include "tools/app/training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>

#include "algorithms/fp32/fp32.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/units.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/stragglers.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/compute_trace.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A bucket size's compressor, with its committed plan (metadata-phase schemes plan once per size,
// on synthetic gradients of that size) and what its collective reduces.
struct BucketCodec {
  std::unique_ptr<algo::Compressor> comp;
  uint64_t reduced = 0;
  uint64_t plan_bytes = 0;
  topo::CollectiveOptions options;
  uint64_t tensor_wire_bytes = 0;  // one rank's bucket, encoded once
  std::vector<algo::PlanDecision> decisions;  // of the last plan
};

}  // namespace

namespace detail {

Result<traces::ComputeTrace> load_trace(const WorkloadConfig& wl) {
  auto trace = traces::ComputeTrace::load(wl.trace);
  if (!trace.ok()) return trace.status().with_context("/workload/trace");
  if (wl.blocks.empty()) return trace;
  std::vector<size_t> starts;
  std::vector<std::string> names;
  const auto& layers = trace->layers();
  for (size_t b = 0; b < wl.blocks.size(); ++b) {
    const auto st = static_cast<size_t>(wl.blocks[b]);
    const size_t end = b + 1 < wl.blocks.size() ? static_cast<size_t>(wl.blocks[b + 1]) : layers.size();
    if ((b == 0 && st != 0) || (b > 0 && st <= starts.back()) || st >= layers.size())
      return invalid_argument(fmt::format("/workload/blocks/{}: expected {} (block starts begin at 0, increase and stay "
                                          "below the trace's {} layers), got {}", b, b == 0 ? "0" : "a larger index",
                                          layers.size(), st));
    starts.push_back(st);
    names.push_back(end - st == 1 ? layers[st].name : layers[st].name + "-" + layers[end - 1].name);
  }
  auto merged = trace->merged(starts, names);
  if (!merged.ok()) return merged.status().with_context("/workload/blocks");
  return merged;
}

Result<sim::StragglerModel> make_stragglers(const Scenario& s, uint32_t workers) {
  const StragglersConfig& c = s.stragglers;
  sim::StragglerSpec spec;
  spec.model = c.model;
  spec.low = c.low;
  spec.high = c.high;
  spec.sigma = c.sigma;
  spec.slow_factor = c.factor;
  if (c.model == "empirical") {
    if (c.file.empty()) return invalid_argument("/stragglers/file: the empirical model needs a CDF file, got none");
    auto cdf = sim::EmpiricalCdf::load(c.file);
    if (!cdf.ok()) return cdf.status().with_context("/stragglers/file");
    spec.cdf = std::move(*cdf);
  }
  for (size_t i = 0; i < c.workers.size(); ++i) {
    if (c.workers[i] >= workers)
      return invalid_argument(fmt::format("/stragglers/workers/{}: expected a worker below {}, got {}", i, workers,
                                          c.workers[i]));
    spec.slow_workers.push_back(static_cast<uint32_t>(c.workers[i]));
  }
  if (c.model == "uniform" && c.low > c.high)
    return invalid_argument(fmt::format("/stragglers/high: expected at least low ({}), got {}", c.low, c.high));
  auto model = sim::StragglerModel::make(std::move(spec), static_cast<uint64_t>(s.seed));
  if (!model.ok()) return model.status().with_context("/stragglers");
  return model;
}

std::vector<sim::TenantSpec> tenant_specs(const Scenario& s, const std::vector<topo::Rank>& workers) {
  std::vector<sim::TenantSpec> out;
  for (const TenantConfig& c : s.network.tenants) {
    sim::TenantSpec t;
    t.kind = c.kind;
    t.count = static_cast<uint32_t>(c.count);
    t.bytes = c.size_bytes;
    for (int64_t r : c.ranks) t.ranks.push_back(static_cast<topo::Rank>(r));
    if (t.ranks.empty() && t.kind == "ring_allreduce") t.ranks = workers;
    t.src = static_cast<topo::Rank>(c.src);
    t.dst = static_cast<topo::Rank>(c.dst);
    t.rate_Bps = c.rate_Bps;
    t.on_s = c.on_s;
    t.off_s = c.off_s;
    t.period_s = c.period_s;
    t.start_s = c.start_s;
    out.push_back(std::move(t));
  }
  return out;
}

std::string scheme_label(const std::string& scheme, const json& params) {
  const auto* info = algo::CompressorRegistry::global().find(scheme);
  if (info == nullptr || !params.is_object()) return scheme;
  Diagnostics diag;
  const json defaults = info->params.resolve(json::object(), "", diag);
  std::vector<std::string> kv;
  for (const auto& [k, v] : params.items())
    if (!defaults.contains(k) || defaults.at(k) != v)
      kv.push_back(fmt::format("{}={}", k, v.is_string() ? v.get<std::string>() : v.dump()));
  return kv.empty() ? scheme : fmt::format("{}({})", scheme, fmt::join(kv, ","));
}

Result<std::vector<std::vector<float>>> synthetic_gradients(const Scenario& s, uint64_t elements, uint32_t ranks,
                                                            uint32_t salt, double copies, std::string_view purpose) {
  const double need = copies * 4.0 * static_cast<double>(elements) * ranks;
  if (need > static_cast<double>(s.gradients.numerics_memory_bytes))
    return invalid_argument(fmt::format(
        "/compression: {} a {}-entry gradient on {} ranks needs {} of synthetic gradients (> gradients.numerics_memory "
        "{}); use smaller buckets or raise the limit",
        purpose, elements, ranks, format_quantity(need, UnitKind::kBytes),
        format_quantity(static_cast<double>(s.gradients.numerics_memory_bytes), UnitKind::kBytes)));
  traces::SyntheticGradientSpec spec = s.gradients.synthetic_spec(elements);
  spec.layers = static_cast<uint32_t>(std::min<uint64_t>(s.gradients.layers, std::max<uint64_t>(1, elements / 1024)));
  std::vector<std::vector<float>> grads(ranks, std::vector<float>(elements));
  std::vector<std::span<float>> views(grads.begin(), grads.end());
  traces::generate_synthetic_gradients(spec, static_cast<uint64_t>(s.seed) + salt, views);
  return grads;
}

Result<SyntheticPlan> plan_on_synthetic(const Scenario& s, algo::Compressor& comp, uint64_t elements, uint32_t ranks,
                                        uint32_t salt, const SyntheticRound* run) {
  // A round run keeps the inputs, the buffers reduced in place and the messages in flight.
  CCSIM_ASSIGN_OR_RETURN(
      std::vector<std::vector<float>> grads,
      synthetic_gradients(s, elements, ranks, salt, run ? 3.0 : 1.0,
                          fmt::format("'{}' agrees on metadata from the gradients each round; {}", comp.name(),
                                      run ? "planning and running" : "planning")));
  std::vector<std::span<float>> views(grads.begin(), grads.end());
  const uint32_t round = run ? run->round : 0;
  {
    std::vector<std::span<const float>> ins(grads.begin(), grads.end());
    CCSIM_RETURN_IF_ERROR(algo::plan_round(comp, ins, {static_cast<uint64_t>(s.seed), round}).status());
  }
  SyntheticPlan planned{comp.reduced_elements(elements), comp.plan_decisions()};
  if (run == nullptr) return planned;
  topo::CollectiveOptions options = run->options;
  algo::set_shard_options(comp, run->collective->operation, planned.reduced, ranks, options);
  CCSIM_RETURN_IF_ERROR(run->collective->check(ranks, planned.reduced, options));
  topo::Schedule schedule = run->collective->build(ranks, planned.reduced, options);
  algo::bind_schedule(schedule, comp);
  CCSIM_RETURN_IF_ERROR(algo::run_numerics(schedule, comp, views, {static_cast<uint64_t>(s.seed), round}).status());
  return planned;
}

std::vector<algo::LayerShape> layer_matrices(const std::vector<sim::TrainingLayer>& layers,
                                             const std::vector<uint32_t>& ids, uint32_t tp, uint64_t rows_wanted,
                                             uint64_t total) {
  std::vector<algo::LayerShape> out;
  uint64_t offset = 0;
  for (uint32_t l : ids) {
    const uint64_t share = (layers[l].params + tp - 1) / tp;
    if (share == 0) continue;
    const uint64_t rows =
        rows_wanted > 0 ? std::min(rows_wanted, share)
                        : std::max<uint64_t>(1, static_cast<uint64_t>(std::sqrt(static_cast<double>(share))));
    const uint64_t cols = share / rows;
    out.push_back({offset, rows * cols, rows, cols});
    offset += rows * cols;
    if (share > rows * cols) {
      out.push_back({offset, share - rows * cols, share - rows * cols, 1});
      offset += share - rows * cols;
    }
  }
  if (offset < total) out.push_back({offset, total - offset, total - offset, 1});  // rounding of ceil(params / tp)
  return out;
}

bool factors_matrices(const algo::Compressor& comp) {
  return dynamic_cast<const algo::LowRankCompressor*>(&comp) != nullptr;
}

std::string decisions_csv(const std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>>& runs,
                          const std::string& who) {
  std::string out = fmt::format("scheme,round,{},layer,time_s,controller,quantity,value,detail\n", who);
  for (const auto& [scheme, decisions] : runs)
    for (const auto& d : *decisions)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(scheme), d.round, d.worker, d.layer, d.time_s,
                         d.controller, d.quantity, d.value, csv_field(d.detail));
  return out;
}

sim::SyncPhase metadata_phase(uint64_t plan_bytes, uint32_t ranks, const KernelCosts& costs) {
  static const algo::Fp32Compressor fp32;
  const uint64_t words = std::max<uint64_t>((plan_bytes + 3) / 4, ranks);
  return compressor_phase("metadata", topo::make_ring(topo::CollectiveOp::kAllReduce, ranks, words, {}, false), fp32,
                          costs);
}

void append_sync_phases(std::vector<sim::SyncPhase>& out, const std::string& name,
                        std::unique_ptr<topo::ScheduleGenerator> collective, const algo::Compressor& comp,
                        uint64_t elements, uint32_t ranks, uint64_t plan_bytes, const KernelCosts& costs,
                        bool name_all, std::vector<topo::KernelKind>* charged) {
  const std::vector<topo::KernelKind> round = algo::round_ops(comp, elements, ranks);
  auto round_phase = [&](topo::KernelKind kind) {
    if (std::find(round.begin(), round.end(), kind) == round.end()) return;
    if (charged != nullptr && std::find(charged->begin(), charged->end(), kind) == charged->end()) {
      charged->push_back(kind);
      std::sort(charged->begin(), charged->end());
    }
    out.push_back(compressor_phase(name_all ? name : std::string(topo::kernel_kind_name(kind)),
                                   topo::make_round_ops(kind, ranks, elements), comp, costs));
  };
  if (plan_bytes > 0) {
    round_phase(topo::KernelKind::kPlanLocal);
    out.push_back(metadata_phase(plan_bytes, ranks, costs));
    if (name_all) out.back().name = name;
  }
  round_phase(topo::KernelKind::kPrepare);
  out.push_back(compressor_phase(name, std::move(collective), comp, costs));
  round_phase(topo::KernelKind::kFinish);
}

sim::SyncPhase compressor_phase(std::string name, std::unique_ptr<topo::ScheduleGenerator> generator,
                                const algo::Compressor& comp, const KernelCosts& costs) {
  sim::SyncPhase p;
  p.name = std::move(name);
  p.generator = std::move(generator);
  p.binder = [&comp](topo::Schedule& sc, topo::OpId first, topo::OpId end) { algo::bind_ops(sc, comp, first, end); };
  p.costs = costs.scheme(comp);
  return p;
}

}  // namespace detail

using detail::load_trace;
using detail::make_stragglers;
using detail::plan_on_synthetic;
using detail::SyntheticRound;
using detail::scheme_label;
using detail::tenant_specs;

Result<TrainingReport> run_training(const LoadedScenario& loaded) {
  const Scenario& s = loaded.scenario;
  const WorkloadConfig& wl = s.workload;
  TrainingReport report;
  report.loaded = loaded;
  if (wl.rounds == 0 && wl.duration_s <= 0)
    return invalid_argument("/workload: expected rounds > 0 or a duration > 0, got neither (the run would never end)");
  CCSIM_ASSIGN_OR_RETURN(const traces::ComputeTrace trace, load_trace(wl));
  if (s.parallelism.tp != 1 || s.parallelism.pp != 1)
    return invalid_argument(fmt::format("/parallelism: this run is data-parallel (tp = pp = 1); tensor/pipeline "
                                        "parallelism runs through run_parallel_training, got tp = {}, pp = {}",
                                        s.parallelism.tp, s.parallelism.pp));
  CCSIM_ASSIGN_OR_RETURN(const topo::Topology topology, topo::build_topology(cluster_spec(s.cluster)));
  const uint32_t m = topology.num_ranks();
  if (s.parallelism.dp != 0 && s.parallelism.dp != m)
    return invalid_argument(fmt::format("/parallelism/dp: expected 0 or the number of ranks ({}), got {}", m,
                                        s.parallelism.dp));
  report.workers = m;
  report.topology_desc = fmt::format("{}; {} ranks ({} x {} GPUs), NIC {}, link latency {}",
                                     topology.description().empty() ? topology.kind() : topology.description(), m,
                                     topology.num_nodes(), topology.gpus_per_node(),
                                     format_quantity(s.cluster.nic_bandwidth_Bps, UnitKind::kBandwidth),
                                     format_quantity(s.cluster.link_latency_s, UnitKind::kTime));
  report.link_rows = link_rows_of(topology);
  report.trace_desc = fmt::format("{}: {} layers/blocks, {} params, forward {} + backward {} per round ({}, {})",
                                  trace.model(), trace.layers().size(), trace.params(),
                                  format_quantity(trace.forward_s(), UnitKind::kTime),
                                  format_quantity(trace.backward_s(), UnitKind::kTime), trace.provenance().kind,
                                  trace.provenance().device);
  CCSIM_ASSIGN_OR_RETURN(const sim::StragglerModel stragglers, make_stragglers(s, m));
  report.stragglers_desc = stragglers.describe();
  std::vector<topo::Rank> worker_ranks(m);
  for (uint32_t r = 0; r < m; ++r) worker_ranks[r] = r;
  const std::vector<sim::TenantSpec> tenants = tenant_specs(s, worker_ranks);

  CCSIM_ASSIGN_OR_RETURN(const KernelCosts kernel_costs, KernelCosts::of(s));
  report.kernel_cost_desc = kernel_costs.describe();
  report.horizon_desc = wl.duration_s > 0
                            ? fmt::format("{} of simulated time{}", format_quantity(wl.duration_s, UnitKind::kTime),
                                          wl.rounds > 0 ? fmt::format(" (at most {} rounds)", wl.rounds) : "")
                            : fmt::format("{} rounds", wl.rounds);

  std::vector<sim::TrainingLayer> layers;
  for (const auto& l : trace.layers()) layers.push_back({l.name, l.params, l.forward_s, l.backward_s});
  uint64_t total_params = trace.params();
  if (total_params == 0) return invalid_argument("/workload/trace: the trace has no parameters to synchronize");

  const bool bucketed = s.sync.mode == "allreduce" || s.sync.mode == "sharded";
  if (s.sync.mode == "allreduce" && s.collective.operation != "allreduce")
    return invalid_argument(fmt::format("/collective/operation: sync.mode allreduce synchronizes gradients with an "
                                        "allreduce, got {}", s.collective.operation));
  if (s.sync.mode == "sharded" && s.collective.operation != "reduce_scatter")
    return invalid_argument(fmt::format("/collective/operation: sync.mode sharded reduce-scatters gradients, so "
                                        "expected reduce_scatter, got {}", s.collective.operation));

  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    const CompressionConfig& cc = s.compression[ci];
    const std::string at = fmt::format("/compression/{}", ci);
    auto probe = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
    if (!probe.ok()) return probe.status().with_context(at);
    TrainingResult res;
    res.scheme = cc.controller.kind == "none" ? scheme_label(cc.scheme, cc.params) : cc.controller.kind;
    if (s.sync.mode == "sharded" && cc.weights.scheme != "bf16")
      res.scheme += fmt::format("+{}", scheme_label(cc.weights.scheme, cc.weights.params));
    res.params = cc.params;

    sim::Engine engine;
    sim::FlowNetwork network(engine, sim::link_specs(topology));
    if (s.outputs.link_timeline_bin_s > 0) network.record_timeline(Duration::from_seconds(s.outputs.link_timeline_bin_s));
    auto traffic = sim::TenantTraffic::make(engine, network, topology, tenants, 0x7E4A47 + ci);
    if (!traffic.ok()) return traffic.status();
    report.tenants_desc = (*traffic)->describe();

    std::unique_ptr<sim::GradientSync> sync;
    std::vector<BucketCodec> codecs;        // gradient codecs (see codec_of)
    std::map<uint64_t, BucketCodec> weight_codecs;  // sharded: weight all-gather codecs by bucket size
    sim::BucketCollectiveSync* bucket_sync = nullptr;
    sim::BroadcastSync* broadcast = nullptr;
    sim::TrainingJob* job_ptr = nullptr;  // set once the job exists (the factory logs decisions into it)
    // Round ops the phases charged, per scheme (one list when the weights use the gradients' scheme
    // and parameters, whose kernels are charged alike).
    const bool same_weights = cc.weights.scheme == cc.scheme && cc.weights.params == cc.params;
    std::vector<topo::KernelKind> round_charged, weight_round_charged;
    std::vector<topo::KernelKind>* weight_charged = same_weights ? &round_charged : &weight_round_charged;
    if (bucketed) {
      if (cc.controller.kind != "none")
        return invalid_argument(fmt::format("{}/controller/kind: {} drives a broadcast (sync.mode broadcast); with "
                                            "sync.mode {} expected none", at, cc.controller.kind, s.sync.mode));
      const bool sharded = s.sync.mode == "sharded";
      const topo::CollectiveOp op = sharded ? topo::CollectiveOp::kReduceScatter : topo::CollectiveOp::kAllReduce;
      const std::string algorithm = cc.algorithm.empty() ? s.collective.algorithm : cc.algorithm;
      const topo::CollectiveInfo* collective = nullptr;
      {
        auto found = topo::find_collective(std::string(topo::collective_op_name(op)), algorithm);
        if (!found.ok()) return found.status().with_context(cc.algorithm.empty() ? "/collective/algorithm" : at + "/algorithm");
        collective = *found;
      }
      const auto buckets = sim::make_buckets(layers, s.sync.bucket_bytes, s.sync.first_bucket_bytes,
                                             trace.gradient_bytes_per_param());
      // Low-rank schemes factor each bucket's layers as matrices (workload.matrix_rows rows); the
      // others see a bucket as one flat tensor.
      const bool matrices = detail::factors_matrices(**probe);
      auto bucket_layout = [&](size_t b) {
        const uint64_t n = buckets[b].params;
        return matrices ? detail::layer_matrices(layers, buckets[b].layers, 1, static_cast<uint64_t>(wl.matrix_rows), n)
                        : std::vector<algo::LayerShape>{{0, n, n, 1}};
      };
      (*probe)->set_layout(bucket_layout(0));
      // Codecs: one per bucket when the scheme re-plans every few rounds (its controller's state is
      // the bucket's) or factors the bucket's own layer shapes, else one per distinct bucket size
      // (the plan depends on the size only).
      const bool planned = !(*probe)->plan_format(buckets.front().params, m).empty();
      const bool replanned = planned && s.sync.replan_every > 0;
      const bool per_bucket = replanned || matrices;
      std::vector<size_t> codec_of(buckets.size());
      std::map<uint64_t, size_t> by_size;
      auto make_codec = [&](const std::string& scheme, const nlohmann::json& params, topo::CollectiveOp cop,
                            const topo::CollectiveInfo& info, uint64_t elements, uint32_t salt,
                            std::vector<algo::LayerShape> layout, const std::string& where) -> Result<BucketCodec> {
        BucketCodec codec;
        auto created = algo::CompressorRegistry::global().create(scheme, params);
        if (!created.ok()) return created.status().with_context(where);
        codec.comp = std::move(*created);
        codec.comp->set_layout(std::move(layout));
        codec.options.segments = static_cast<uint32_t>(s.collective.segments);
        codec.options.gpus_per_node = topology.gpus_per_node();
        if (!codec.comp->plan_format(elements, m).empty()) {
          if (cop != op)
            return invalid_argument(fmt::format("{}/scheme: '{}' needs a metadata phase, which the weight all-gather "
                                                "does not run; use bf16, sdp4bit_qw or sdp4bit_qwd", where, scheme));
          // Re-planned buckets run each planned round on the synthetic gradients too (controllers).
          const SyntheticRound run{&info, codec.options, 0};
          CCSIM_ASSIGN_OR_RETURN(detail::SyntheticPlan plan,
                                 plan_on_synthetic(s, *codec.comp, elements, m, salt, replanned ? &run : nullptr));
          codec.reduced = plan.reduced;
          codec.decisions = std::move(plan.decisions);
          codec.plan_bytes = codec.comp->plan_format(elements, m).wire_bytes();
        } else {
          codec.reduced = codec.comp->reduced_elements(elements);
        }
        CCSIM_RETURN_IF_ERROR(algo::check_reduced_length(*codec.comp, cop, elements, codec.reduced)
                                  .with_context(fmt::format("{}/scheme", where)));
        algo::set_shard_options(*codec.comp, cop, codec.reduced, m, codec.options);
        if (Status st = info.check(m, codec.reduced, codec.options); !st.ok())
          return invalid_argument(fmt::format("/sync/bucket: {} cannot run {} on a bucket of {} entries ({} reduced) "
                                              "on {} ranks with '{}': {}", info.algorithm,
                                              topo::collective_op_name(cop), elements, codec.reduced, m, scheme,
                                              st.message()));
        codec.tensor_wire_bytes = algo::tensor_wire_bytes(*codec.comp, codec.reduced, m, codec.options);
        return codec;
      };
      const topo::CollectiveInfo* weight_ag = nullptr;
      if (sharded) {
        auto found = topo::find_collective("allgather", cc.weights.algorithm);
        if (!found.ok()) return found.status().with_context(at + "/weights/algorithm");
        weight_ag = *found;
      }
      uint64_t model_wire = 0;
      for (size_t b = 0; b < buckets.size(); ++b) {
        const uint64_t params = buckets[b].params;
        if (!per_bucket && by_size.count(params)) {
          codec_of[b] = by_size.at(params);
        } else {
          CCSIM_ASSIGN_OR_RETURN(BucketCodec codec, make_codec(cc.scheme, cc.params, op, *collective, params,
                                                               static_cast<uint32_t>(b), bucket_layout(b), at));
          codec_of[b] = codecs.size();
          by_size.emplace(params, codecs.size());
          codecs.push_back(std::move(codec));
        }
        model_wire += codecs[codec_of[b]].tensor_wire_bytes;
        if (sharded && weight_codecs.count(params) == 0) {
          CCSIM_ASSIGN_OR_RETURN(BucketCodec wc, make_codec(cc.weights.scheme, cc.weights.params,
                                                            topo::CollectiveOp::kAllGather, *weight_ag, params,
                                                            static_cast<uint32_t>(b),
                                                            std::vector<algo::LayerShape>{{0, params, params, 1}},
                                                            at + "/weights"));
          weight_codecs.emplace(params, std::move(wc));
        }
      }
      res.bits_per_element = 8.0 * static_cast<double>(model_wire) / static_cast<double>(total_params);
      const uint32_t replan = static_cast<uint32_t>(s.sync.replan_every);
      auto log_plan = [&job_ptr, scheme = cc.scheme](uint32_t round, uint32_t bucket, const BucketCodec& codec) {
        if (job_ptr == nullptr) return;
        for (const algo::PlanDecision& d : codec.decisions)
          job_ptr->log({round, 0, -1, job_ptr->engine().now().seconds(), scheme, d.quantity, d.value,
                        fmt::format("bucket={} {}", bucket, d.detail)});
      };
      // Captures by reference only what outlives this block (codecs, weight_codecs, s, m).
      auto factory = [&codecs, &weight_codecs, &s, &kernel_costs, &round_charged, weight_charged, m, codec_of, op,
                      collective, weight_ag, replanned, replan, log_plan](uint32_t round, uint32_t bucket,
                                                                          uint64_t params) {
        BucketCodec& codec = codecs[codec_of[bucket]];
        if (replanned && round > 0 && round % replan == 0) {
          // The controller's next decision, from fresh synthetic gradients of this round and bucket,
          // and the round itself run on them.
          const SyntheticRound run{collective, codec.options, round};
          Result<detail::SyntheticPlan> plan =
              plan_on_synthetic(s, *codec.comp, params, m, bucket + 0x10000u * round, &run);
          CCSIM_CHECK(plan.ok(), "re-plan of bucket {} in round {}: {}", bucket, round, plan.status().message());
          codec.reduced = plan->reduced;
          codec.decisions = std::move(plan->decisions);
          algo::set_shard_options(*codec.comp, op, codec.reduced, m, codec.options);
        }
        if (codec.plan_bytes > 0 && (round == 0 || (replanned && round % replan == 0))) log_plan(round, bucket, codec);
        std::vector<sim::SyncPhase> phases;
        detail::append_sync_phases(phases, weight_ag ? "gradients" : "collective",
                                   collective->make(m, codec.reduced, codec.options), *codec.comp, params, m,
                                   codec.plan_bytes, kernel_costs, false, &round_charged);
        if (weight_ag) {
          BucketCodec& wc = weight_codecs.at(params);
          detail::append_sync_phases(phases, "weights", weight_ag->make(m, wc.reduced, wc.options), *wc.comp, params,
                                     m, wc.plan_bytes, kernel_costs, true, weight_charged);
        }
        return phases;
      };
      std::string desc = fmt::format("DDP buckets of {} ({} buckets), {} {}, {}",
                                     format_quantity(static_cast<double>(s.sync.bucket_bytes), UnitKind::kBytes),
                                     buckets.size(), algorithm, topo::collective_op_name(op), cc.scheme);
      if (sharded)
        desc += fmt::format("; weights all-gathered by {} in {}", cc.weights.algorithm, cc.weights.scheme);
      if (planned)
        desc += replanned ? fmt::format("; metadata plan every {} round(s) per bucket", replan)
                           : "; metadata plan once per bucket size";
      auto bs = std::make_unique<sim::BucketCollectiveSync>(buckets, factory, kernel_costs.scheme(cc.scheme, cc.params),
                                                               std::move(desc));
      bucket_sync = bs.get();
      sync = std::move(bs);
    } else {
      sim::BroadcastOptions bo;
      bo.segment_params = static_cast<uint64_t>(s.sync.segment);
      bo.costs = kernel_costs.scheme(cc.scheme, cc.params);
      bo.scheme = cc.scheme;
      if (cc.controller.kind == "aqgb") {
        if (cc.scheme != "tfp")
          return invalid_argument(fmt::format("{}/scheme: the aqgb controller drives TFP's truncation, so the scheme "
                                              "must be tfp, got {}", at, cc.scheme));
        bo.adaptive = true;
        bo.q_floor = cc.controller.q_floor;
        bo.second_stage = cc.controller.second_stage;
      } else {
        algo::Compressor& comp = **probe;
        if (!comp.plan_format(bo.segment_params, m).empty())
          return invalid_argument(fmt::format("{}/scheme: '{}' needs a metadata phase across ranks, which a broadcast "
                                              "does not have; use sync.mode allreduce", at, cc.scheme));
        // The broadcast charges each segment's encode and decode-accumulates only; a scheme with work
        // around the collective (prepare, finish) would have it silently dropped.
        if (const auto round = algo::round_ops(comp, bo.segment_params, m); !round.empty())
          return invalid_argument(fmt::format("{}/scheme: '{}' with these params runs {} around the collective, which "
                                              "a broadcast does not model; use sync.mode allreduce",
                                              at, cc.scheme, topo::kernel_kind_name(round.front())));
        bo.fixed_bits = 8.0 * static_cast<double>(comp.wire_bytes({0, bo.segment_params}, {1, m})) /
                        static_cast<double>(bo.segment_params);
      }
      auto b = std::make_unique<sim::BroadcastSync>(bo);
      broadcast = b.get();
      sync = std::move(b);
    }
    res.sync_desc = sync->describe();

    sim::TrainingOptions topt;
    topt.rounds = static_cast<uint32_t>(wl.rounds);
    topt.optimizer_s = trace.optimizer_s();
    topt.interference = wl.interference;
    sim::TrainingJob job(engine, network, topology, worker_ranks, layers, stragglers, topt, *sync);
    job_ptr = &job;
    sim::TenantTraffic& tt = **traffic;
    job.on_finished([&tt] { tt.stop(); });
    tt.start();
    job.start();
    const SimTime horizon = wl.duration_s > 0 ? SimTime::zero() + Duration::from_seconds(wl.duration_s) : SimTime::infinite();
    engine.run_until(horizon);
    // After the run: the round ops its phases charged (a scheme may start planning later).
    res.kernel_cost = kernel_costs.scheme(cc.scheme, cc.params).describe(round_charged);
    if (s.sync.mode == "sharded" && !same_weights)
      res.kernel_cost += fmt::format(
          "; weights: {}", kernel_costs.scheme(cc.weights.scheme, cc.weights.params).describe(weight_round_charged));
    const std::vector<SimTime> done = job.round_completion();
    res.rounds_completed = static_cast<uint32_t>(
        std::count_if(done.begin(), done.end(), [&](SimTime t) { return t <= horizon; }));
    res.end_s = wl.duration_s > 0 ? wl.duration_s : (done.empty() ? engine.now().seconds() : done.back().seconds());

    res.rounds = job.round_metrics(horizon);
    res.decisions = job.decisions();
    if (bucket_sync) res.buckets = bucket_sync->records();
    res.tenants = tt.stats();
    res.links = network.link_stats();
    res.timeline = network.timeline();

    // Per-round cluster view and means over the measured rounds.
    std::map<uint32_t, std::vector<const sim::RoundMetrics*>> by_round;
    for (const auto& r : res.rounds) by_round[r.round].push_back(&r);
    double row_sum = 0;
    uint32_t row_n = 0;
    for (const auto& [round, rows] : by_round) {
      if (rows.size() != m) continue;
      ClusterRound c;
      c.round = round;
      c.complete_s = round < done.size() ? done[round].seconds() : std::numeric_limits<double>::quiet_NaN();
      c.overlap_min_s = kInf;
      for (const auto* r : rows) {
        c.duration_max_s = std::max(c.duration_max_s, r->duration());
        c.wait_max_s = std::max(c.wait_max_s, r->wait_s);
        c.overlap_min_s = std::min(c.overlap_min_s, r->overlap_s);
      }
      c.row = c.wait_max_s > 0 ? c.overlap_min_s / c.wait_max_s : kInf;
      res.cluster_rounds.push_back(c);
      if (round < static_cast<uint32_t>(wl.warmup_rounds)) continue;
      ++res.measured_rounds;
      if (std::isfinite(c.row)) {
        row_sum += c.row;
        ++row_n;
      } else {
        ++res.rounds_without_wait;
      }
    }
    res.row_cluster = row_n > 0 ? row_sum / row_n : kInf;
    size_t n = 0;
    for (const auto& r : res.rounds) {
      if (r.round < static_cast<uint32_t>(wl.warmup_rounds)) continue;
      ++n;
      res.round_s += r.duration();
      res.compute_s += r.compute_s;
      res.wait_s += r.wait_s;
      res.comm_s += r.comm_s;
      res.overlap_s += r.overlap_s;
      res.compression_s += r.compression_s;
      res.compression_overhead_s += r.compression_overhead_s;
      res.exposed_comm_s += r.exposed_comm_s;
    }
    if (n > 0) {
      for (double* v : {&res.round_s, &res.compute_s, &res.wait_s, &res.comm_s, &res.overlap_s, &res.compression_s,
                        &res.compression_overhead_s, &res.exposed_comm_s})
        *v /= static_cast<double>(n);
    }
    // Workers' uplinks: the links leaving their rank vertices.
    double util = 0;
    uint32_t uplinks = 0;
    for (size_t l = 0; l < topology.links().size(); ++l) {
      const auto& link = topology.links()[l];
      if (link.from >= m) continue;
      ++uplinks;
      // Tenants may still finish flows after the job's end: their bytes count over the whole run.
      util += res.links[l].bytes / (link.capacity_Bps * std::max(res.end_s, engine.now().seconds()));
    }
    res.uplink_utilization = uplinks > 0 ? util / uplinks : 0;
    if (broadcast) {
      double bits = 0, params = 0, bytes = 0;
      for (const auto& [r, st] : broadcast->round_stats()) {
        bits += st.bits_sum;
        params += static_cast<double>(st.sent_params);
        bytes += static_cast<double>(st.stage1_bytes + st.stage2_bytes) * (m - 1);
      }
      res.bits_per_element = params > 0 ? bits / params : 0;
      res.wire_bytes_per_round = res.rounds_completed > 0 ? bytes / res.rounds_completed : 0;
    } else if (bucket_sync) {
      double bytes = 0;
      for (const auto& b : bucket_sync->records()) bytes += static_cast<double>(b.wire_bytes);
      res.wire_bytes_per_round = res.rounds_completed > 0 ? bytes / res.rounds_completed : 0;
      const uint32_t first = static_cast<uint32_t>(wl.warmup_rounds);
      if (res.rounds_completed > first) {
        for (const auto& b : bucket_sync->records()) {
          if (b.round < first || b.round >= res.rounds_completed) continue;
          res.grad_comm_s += b.time_except("weights");
          res.weight_comm_s += b.time_in("weights");
        }
        res.grad_comm_s /= res.rounds_completed - first;
        res.weight_comm_s /= res.rounds_completed - first;
      }
    }
    report.results.push_back(std::move(res));
  }
  return report;
}

json training_summary_json(const TrainingReport& report) {
  const Scenario& s = report.loaded.scenario;
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json out = {{"ccsim_version", ccsim_version()},
              {"scenario", s.name},
              {"seed", s.seed},
              {"mode", "training"},
              {"workers", report.workers},
              {"topology", report.topology_desc},
              {"trace", report.trace_desc},
              {"stragglers", report.stragglers_desc},
              {"tenants", report.tenants_desc},
              {"kernel_cost", report.kernel_cost_desc},
              {"horizon", report.horizon_desc},
              {"warmup_rounds", s.workload.warmup_rounds}};
  json results = json::array();
  for (const auto& r : report.results) {
    results.push_back({{"scheme", r.scheme},
                       {"params", r.params},
                       {"sync", r.sync_desc},
                       {"kernel_cost", r.kernel_cost},
                       {"bits_per_element", r.bits_per_element},
                       {"rounds_completed", r.rounds_completed},
                       {"simulated_s", r.end_s},
                       {"measured_rounds", r.measured_rounds},
                       {"round_s", r.round_s},
                       {"throughput_rounds_per_s", r.round_s > 0 ? json(1.0 / r.round_s) : json(nullptr)},
                       {"compute_s", r.compute_s},
                       {"exposed_comm_s", r.exposed_comm_s},
                       {"compression_overhead_s", r.compression_overhead_s},
                       {"compression_s", r.compression_s},
                       {"t_wait_s", r.wait_s},
                       {"t_wait_normalized", r.compute_s > 0 ? json(r.wait_s / r.compute_s) : json(nullptr)},
                       {"t_comm_s", r.comm_s},
                       {"t_overlap_s", r.overlap_s},
                       {"row_cluster_mean", num(r.row_cluster)},
                       {"rounds_without_wait", r.rounds_without_wait},
                       {"uplink_utilization", r.uplink_utilization},
                       {"wire_bytes_per_round", r.wire_bytes_per_round},
                       {"grad_comm_s", r.grad_comm_s},
                       {"weight_comm_s", r.weight_comm_s}});
  }
  out["results"] = std::move(results);
  return out;
}

namespace {

std::string fmt_num(double v) { return std::isfinite(v) ? fmt::format("{}", v) : (v > 0 ? "inf" : "nan"); }

std::string training_results_csv(const TrainingReport& report) {
  std::string out =
      "scheme,bits_per_element,rounds_completed,simulated_s,round_s,throughput_rounds_per_s,compute_s,exposed_comm_s,"
      "compression_overhead_s,t_wait_s,t_wait_normalized,t_overlap_s,row_cluster_mean,uplink_utilization,"
      "wire_bytes_per_round,grad_comm_s,weight_comm_s\n";
  for (const auto& r : report.results)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.scheme), r.bits_per_element,
                       r.rounds_completed, r.end_s, r.round_s, r.round_s > 0 ? fmt_num(1.0 / r.round_s) : "nan",
                       r.compute_s, r.exposed_comm_s, r.compression_overhead_s, r.wait_s,
                       r.compute_s > 0 ? fmt_num(r.wait_s / r.compute_s) : "nan", r.overlap_s, fmt_num(r.row_cluster),
                       r.uplink_utilization, r.wire_bytes_per_round, r.grad_comm_s, r.weight_comm_s);
  return out;
}

std::string rounds_csv(const TrainingReport& report) {
  std::string out =
      "scheme,round,worker,factor,start_s,end_s,duration_s,compute_s,t_wait_s,t_comm_s,t_overlap_s,row,compression_s,"
      "compression_overhead_s,exposed_comm_s\n";
  for (const auto& res : report.results)
    for (const auto& r : res.rounds)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(res.scheme), r.round, r.worker,
                         r.factor, r.start_s, r.end_s, r.duration(), r.compute_s, r.wait_s, r.comm_s, r.overlap_s,
                         fmt_num(r.row()), r.compression_s, r.compression_overhead_s, r.exposed_comm_s);
  return out;
}

std::string cluster_rounds_csv(const TrainingReport& report) {
  std::string out = "scheme,round,complete_s,duration_max_s,t_wait_max_s,t_overlap_min_s,row_cluster\n";
  for (const auto& res : report.results)
    for (const auto& c : res.cluster_rounds)
      out += fmt::format("{},{},{},{},{},{},{}\n", csv_field(res.scheme), c.round, fmt_num(c.complete_s),
                         c.duration_max_s, c.wait_max_s, c.overlap_min_s, fmt_num(c.row));
  return out;
}

std::string controller_csv(const TrainingReport& report) {
  std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>> runs;
  for (const auto& res : report.results) runs.emplace_back(res.scheme, &res.decisions);
  return detail::decisions_csv(runs, "worker");
}

std::string buckets_csv(const TrainingReport& report) {
  std::string out = "scheme,round,bucket,ready_s,start_s,end_s,gradient_s,weights_s,wire_bytes\n";
  for (const auto& res : report.results)
    for (const auto& b : res.buckets)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(res.scheme), b.round, b.bucket, b.ready_s, b.start_s,
                         b.end_s, b.time_except("weights"), b.time_in("weights"), b.wire_bytes);
  return out;
}

std::string tenants_csv(const TrainingReport& report) {
  std::string out = "scheme,tenant,iterations,bytes\n";
  for (const auto& res : report.results)
    for (const auto& t : res.tenants)
      out += fmt::format("{},{},{},{}\n", csv_field(res.scheme), t.name, t.iterations, t.bytes);
  return out;
}

}  // namespace

Status write_training_outputs(const TrainingReport& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  const fs::path d(dir);
  std::vector<LinkCsvRun> link_runs;
  for (const auto& r : report.results) link_runs.push_back({r.scheme, &r.links, &r.timeline, r.end_s});
  std::vector<std::pair<fs::path, std::string>> files = {
      {d / "scenario.resolved.json", report.loaded.resolved.dump(2) + "\n"},
      {d / "summary.json", training_summary_json(report).dump(2) + "\n"},
      {d / "results.csv", training_results_csv(report)},
      {d / "rounds.csv", rounds_csv(report)},
      {d / "rounds_cluster.csv", cluster_rounds_csv(report)},
      {d / "controller.csv", controller_csv(report)},
      {d / "buckets.csv", buckets_csv(report)},
      {d / "tenants.csv", tenants_csv(report)},
      {d / "links.csv", link_rows_csv(report.link_rows, link_runs)}};
  const double bin = report.loaded.scenario.outputs.link_timeline_bin_s;
  if (bin > 0) files.emplace_back(d / "links_timeline.csv", link_timeline_csv(report.link_rows, link_runs, bin));
  return write_files_atomically(files);
}

std::string format_training_summary(const TrainingReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out += fmt::format("ccsim {} | scenario {} | seed {} | training rounds\n", ccsim_version(), s.name, s.seed);
  out += fmt::format("  cluster     {}\n", report.topology_desc);
  out += fmt::format("  workload    {}\n", report.trace_desc);
  out += fmt::format("  horizon     {} (averages skip {} warm-up round(s))\n", report.horizon_desc,
                     s.workload.warmup_rounds);
  out += fmt::format("  stragglers  {}\n", report.stragglers_desc);
  out += fmt::format("  tenants     {}\n", report.tenants_desc);
  out += fmt::format("  kernels     {}\n\n", report.kernel_cost_desc);
  size_t w = 8;
  for (const auto& r : report.results) w = std::max(w, r.scheme.size());
  out += fmt::format("  {:<{}} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>6}\n", "scheme", w, "bits/elem",
                     "rounds", "round", "compute", "exposed", "compress", "T_wait", "T_wait/c", "ROW", "util");
  for (const auto& r : report.results) {
    out += fmt::format("  {:<{}} {:>9.3f} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8.3f} {:>7} {:>5.1f}%\n", r.scheme, w,
                       r.bits_per_element, r.rounds_completed, format_quantity(r.round_s, UnitKind::kTime),
                       format_quantity(r.compute_s, UnitKind::kTime), format_quantity(r.exposed_comm_s, UnitKind::kTime),
                       format_quantity(r.compression_overhead_s, UnitKind::kTime),
                       format_quantity(r.wait_s, UnitKind::kTime), r.compute_s > 0 ? r.wait_s / r.compute_s : 0.0,
                       std::isfinite(r.row_cluster) ? fmt::format("{:.3f}", r.row_cluster) : std::string("inf"),
                       100.0 * r.uplink_utilization);
  }
  for (const auto& r : report.results) {
    out += fmt::format("  {:<{}} sync: {}\n", r.scheme, w, r.sync_desc);
    if (s.cluster.gpu.kernel_cost == "profile") out += fmt::format("  {:<{}} kernels: {}\n", "", w, r.kernel_cost);
    if (s.sync.mode != "broadcast")
      out += fmt::format("  {:<{}}       per round: gradient collective {}{}\n", "", w,
                         format_quantity(r.grad_comm_s, UnitKind::kTime),
                         s.sync.mode == "sharded"
                             ? fmt::format(", weight all-gather {}", format_quantity(r.weight_comm_s, UnitKind::kTime))
                             : std::string());
  }
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,rounds.csv,rounds_cluster.csv,"
                     "controller.csv,buckets.csv,tenants.csv,links.csv{}}}\n",
                     out_dir, s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

}  // namespace ccsim::app
