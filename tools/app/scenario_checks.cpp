// Cross-field and cross-file checks of a loaded scenario: everything its run would otherwise find
// wrong, found here, each at its JSON pointer, all of a file's problems together (a check whose
// inputs already had a problem is skipped, so one defect gives one message). What the checks build
// becomes the run's plan (run_plan.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#include <unistd.h>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/numerics.hpp"
#include "sim/training/bucket_sync.hpp"
#include "sim/training/parallel_job.hpp"
#include "tools/app/scenario_io.hpp"
#include "tools/app/tta.hpp"
#include "topology/builders/builders.hpp"
#include "traces/device_profile.hpp"
#include "traces/gradient_dump.hpp"
#include "traces/npy.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// Whether no problem so far is at or under one of `prefixes` (a problem at the root counts
// everywhere).
bool clean(const Diagnostics& diag, std::initializer_list<std::string_view> prefixes) {
  for (const Diagnostic& d : diag.items()) {
    if (d.path.empty() || d.path == "/") return false;
    for (std::string_view p : prefixes)
      if (d.path.rfind(p, 0) == 0 && (d.path.size() == p.size() || d.path[p.size()] == '/')) return false;
  }
  return true;
}

std::string at_entry(size_t i) { return fmt::format("/compression/{}", i); }

// The workload's trace, merged into workload.blocks when given.
Result<traces::ComputeTrace> load_trace(const WorkloadConfig& wl) {
  auto trace = traces::ComputeTrace::load(wl.trace);
  if (!trace.ok()) return invalid_argument_at("/workload/trace", trace.status().message());
  if (wl.blocks.empty()) return trace;
  auto merged = trace->merged(std::vector<size_t>(wl.blocks.begin(), wl.blocks.end()));
  if (!merged.ok()) return merged.status().at("/workload/blocks");
  return merged;
}

// ---- gradients, profile, cluster ---------------------------------------------------------------

// The dump fields: set only with source "dump", whose dump opens and holds the steps asked for; a
// training run reads it only to measure its calibration's vNMSE, a collective run reads one step.
void check_dump_fields(const Scenario& s, bool training, Diagnostics& diag) {
  const GradientsConfig& g = s.gradients;
  if (g.source != GradientSource::kDump) {
    auto stray = [&](const char* at) {
      diag.add(at, fmt::format("applies to source \"dump\" only, and the source is \"{}\"; set /gradients/source to "
                               "\"dump\", or remove it",
                               enum_name<GradientSource>(kGradientSources, g.source)));
    };
    if (!g.dump.empty()) stray("/gradients/dump");
    if (!g.steps.empty()) stray("/gradients/steps");
    return;
  }
  if (!clean(diag, {"/gradients/dump"})) return;
  if (g.dump.empty()) return diag.add("/gradients/dump", "expected a gradient dump's directory for source \"dump\"");
  if (training && s.convergence.calibration.empty())
    diag.add("/gradients/dump", "a training run reads its dump only to measure the vNMSE a convergence calibration "
                                "needs, and this one has no /convergence/calibration: the dump would change nothing");
  if (!training && g.steps.size() > 1)
    diag.add("/gradients/steps", fmt::format("expected at most one step in a collective run (it reduces one "
                                             "gradient), got {}", g.steps.size()));
  auto dump = traces::GradientDump::open(g.dump);
  if (!dump.ok()) return diag.add("/gradients/dump", dump.status().message());
  const std::vector<uint64_t> steps(g.steps.begin(), g.steps.end());
  auto found = dump->step_indices(steps);
  if (!found.ok()) return diag.add("/gradients/steps", found.status().message());
  if (!training) return;  // check_dump_gradients reads the collective's step
  for (size_t si : *found)  // the values too, as the measurement reads them (non-finite ones are errors)
    for (uint32_t w = 0; w < dump->workers(); ++w)
      if (auto v = dump->worker(w, si); !v.ok()) return diag.add("/gradients/dump", v.status().message());
}

// A collective run needs a synthetic size or .npy files (training runs size their gradients from
// the compute trace).
void check_gradient_fields(const Scenario& s, const json& doc, bool training, Diagnostics& diag) {
  const GradientsConfig& g = s.gradients;
  if (g.source == GradientSource::kSynthetic && clean(diag, {"/gradients/size"}) && (!training || g.size_bytes != 0)) {
    if (g.size_bytes == 0 || g.size_bytes % 4 != 0)
      diag.add("/gradients/size",
               fmt::format("expected a positive multiple of 4 bytes (fp32) for synthetic gradients, got {}",
                           g.size_bytes));
  } else if (g.source == GradientSource::kNpy) {
    const json* files = nullptr;
    if (doc.contains("gradients") && doc["gradients"].is_object() && doc["gradients"].contains("files"))
      files = &doc["gradients"]["files"];
    if (files == nullptr || (files->is_array() && files->empty()))
      diag.add("/gradients/files", "expected at least one .npy file for source \"npy\"");
    if (training)
      diag.add("/gradients/source",
               "expected \"synthetic\" or \"dump\" in a training run (its vNMSE is measured on a gradient dump, "
               "whose manifest gives the layers and steps), got \"npy\"; give the .npy files a manifest.json "
               "(docs/gradient-dumps.md) and name its directory in /gradients/dump");
  }
  check_dump_fields(s, training, diag);
}

// No field a run would ignore: a run without a workload trace times one collective per scheme, so
// a training section's field would change nothing. Each field set to another value than its
// default is reported where it is set, with what would make it apply. (A field at its default
// changes no run, so a written scenario.resolved.json, which holds every field, runs again.)
void check_fields_apply(const Scenario& s, bool training, Diagnostics& diag) {
  const json given = scenario_to_json(s), defaults = scenario_to_json(Scenario{});
  if (training && given["serving"] != defaults["serving"])
    diag.add("/serving", "applies to collective runs only: a training run (workload.trace) times its own layers; "
                         "remove /serving or /workload/trace");
  if (training) return;
  for (const char* section : {"workload", "sync", "stragglers", "network"}) {
    std::set<std::string> reported;
    for (const json& op : json::diff(defaults[section], given[section])) {
      std::string at = fmt::format("/{}{}", section, op["path"].get<std::string>());
      if (const size_t dash = at.find("/-"); dash != std::string::npos) at.resize(dash);  // an appended element
      if (!reported.insert(at).second) continue;
      diag.add(at, fmt::format("applies to training runs only: without /workload/trace this scenario times one "
                               "collective per scheme, and {} would change nothing (add a workload with a compute "
                               "trace, or remove it)",
                               at));
    }
  }
}

// The kernel cost model; a measured one needs a profile that reads (its errors name its file).
void check_kernel_costs(const Scenario& s, const json& doc, Diagnostics& diag, RunPlan& plan) {
  const GpuConfig& gpu = s.cluster.gpu;
  const bool given = doc.contains("cluster") && doc["cluster"].is_object() && doc["cluster"].contains("gpu") &&
                     doc["cluster"]["gpu"].is_object() && doc["cluster"]["gpu"].contains("profile");
  const Duration launch = Duration::from_seconds(gpu.kernel_launch_s);
  if (gpu.kernel_cost == sim::KernelCostMode::kProfile && !given) {
    diag.add("/cluster/gpu/profile", "missing: kernel_cost \"profile\" needs a device cost profile (`ccsim "
                                     "bench-kernels --out FILE` writes one; traces/devices/ holds measured ones)");
    return;
  }
  std::shared_ptr<const kern::DeviceCostProfile> profile;
  if (!gpu.profile.empty()) {
    auto p = traces::load_device_profile(gpu.profile);
    if (!p.ok()) return diag.add("/cluster/gpu/profile", p.status().message());
    profile = std::make_shared<const kern::DeviceCostProfile>(std::move(*p));
  }
  if (gpu.kernel_cost == sim::KernelCostMode::kRoofline)
    plan.costs = sim::KernelCosts::roofline(gpu.memory_bandwidth_Bps, launch);
  else if (gpu.kernel_cost == sim::KernelCostMode::kProfile)
    plan.costs = sim::KernelCosts::measured(profile, gpu.profile, gpu.memory_bandwidth_Bps, launch);
}

// The cluster must build; every problem of its shape at its own field.
void check_cluster(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  if (s.cluster.nodes * s.cluster.gpus_per_node < 2)
    return diag.add("/cluster/nodes", fmt::format("expected at least 2 ranks in all (nodes * gpus_per_node), got {} "
                                                  "node(s) of {} GPU(s)", s.cluster.nodes, s.cluster.gpus_per_node));
  const topo::ClusterSpec spec = cluster_spec(s.cluster);
  const std::vector<topo::SpecProblem> problems = topo::cluster_spec_problems(spec);
  for (const topo::SpecProblem& p : problems) diag.add("/cluster" + topo::cluster_field_pointer(p.field), p.message);
  if (!problems.empty()) return;
  auto topology = topo::build_topology(spec);
  if (!topology.ok()) return diag.add("/cluster", topology.status().message());
  plan.topology = std::make_shared<const topo::Topology>(std::move(*topology));
}

// ---- the collective section ----------------------------------------------------------------------

// The scenario's tp x pp x dp layout of `world` ranks (dp 0: as many replicas as fill it).
Result<topo::ParallelGroups> parallel_groups(const Scenario& s, uint32_t world) {
  const ParallelismConfig& p = s.parallelism;
  auto groups = topo::ParallelGroups::make_filling(
      {static_cast<uint32_t>(p.tp), static_cast<uint32_t>(p.pp), static_cast<uint32_t>(p.dp), p.order}, world);
  if (!groups.ok()) return invalid_argument_at("/parallelism", groups.status().message());
  return groups;
}

// The ranks of every concurrent collective instance: one group of all ranks, or every group of the
// collective's parallelism dimension (group 0 first).
Result<std::vector<std::vector<uint32_t>>> collective_groups(const Scenario& s, uint32_t world) {
  CCSIM_ASSIGN_OR_RETURN(const topo::ParallelGroups groups, parallel_groups(s, world));
  const CollectiveGroup g = s.collective.group;
  if (g == CollectiveGroup::kWorld) {
    std::vector<uint32_t> all(world);
    std::iota(all.begin(), all.end(), 0u);
    return std::vector<std::vector<uint32_t>>{std::move(all)};
  }
  auto out = groups.groups(g == CollectiveGroup::kTp   ? topo::Dim::kTensor
                           : g == CollectiveGroup::kPp ? topo::Dim::kPipeline
                                                       : topo::Dim::kData);
  if (out.front().size() < 2 && s.collective.operation != topo::CollectiveOp::kBroadcast)
    return invalid_argument_at("/collective/group", fmt::format("the {} groups have a single rank; nothing to "
                                                                "communicate",
                                                                enum_name<CollectiveGroup>(kCollectiveGroups, g)));
  return out;
}

// The collective section: its (operation, algorithm) pair, its groups and root. A training run's
// buckets have their own sizes: the algorithm is checked here on a plausible size only.
void check_collective_section(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  if (!clean(diag, {"/collective/operation", "/collective/algorithm"})) return;
  const auto found =
      topo::find_collective(std::string(enum_name<topo::CollectiveOp>(kCollectiveOps, s.collective.operation)),
                            s.collective.algorithm);
  if (!found.ok()) return diag.add("/collective/algorithm", found.status().message());
  plan.collective = *found;
  if (!clean(diag, {"/cluster", "/parallelism", "/collective"})) return;
  auto groups = collective_groups(s, plan.topology->num_ranks());
  if (!groups.ok()) return diag.add("", groups.status());
  plan.groups = std::move(*groups);
  const auto group_size = static_cast<uint32_t>(plan.groups.front().size());
  plan.base.segments = static_cast<uint32_t>(s.collective.segments);
  plan.base.root = static_cast<uint32_t>(s.collective.root);
  plan.base.gpus_per_node = topo::group_gpus_per_node(plan.groups.front(), *plan.topology);
  if (s.collective.root >= group_size)
    diag.add("/collective/root", fmt::format("expected a rank below the group size {}, got {}", group_size,
                                             s.collective.root));
  // A collective run checks the algorithm on the real tensor (check_collective_run), a 3D-parallel
  // run on each stage's DP group (check_parallel_scheme).
  if (plan.kind != RunKind::kTraining) return;
  topo::CollectiveOptions options = plan.base;
  options.gpus_per_node = static_cast<uint32_t>(s.cluster.gpus_per_node);
  const uint64_t elements = uint64_t{group_size} * 1024;
  if (Status st = plan.collective->check(group_size, elements, options); !st.ok())
    diag.add("/collective/algorithm", fmt::format("{} cannot run on a group of {} ranks: {}", s.collective.algorithm,
                                                  group_size, st.message()));
}

// Every entry's label names it alone (outputs key their rows by it).
void check_labels(const Scenario& s, const RunPlan& plan, Diagnostics& diag) {
  for (size_t i = 0; i < plan.schemes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (plan.schemes[i].label == plan.schemes[j].label) {
        diag.add(at_entry(i) + (s.compression[i].label.empty() ? "" : "/label"),
                 fmt::format("expected a label no other entry has, got '{}', entry {}'s too; give one of them a "
                             "\"label\"", plan.schemes[i].label, j));
        break;
      }
}

// ---- collective runs -----------------------------------------------------------------------------

// This machine's physical memory in bytes (infinite where the system does not say).
double machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(pages) * static_cast<double>(page);
}

// False, with an input error at `at`, when `need` bytes of gradient buffers exceed this machine's
// physical memory (gradients.numerics_memory may allow more than the machine has).
bool check_machine_memory(double need, const std::string& at, const std::string& purpose, Diagnostics& diag) {
  const double have = machine_memory_bytes();
  if (need <= have) return true;
  diag.add(at, fmt::format("{}: about {} of gradient buffers are needed, more than this machine's {} of memory; "
                           "a smaller gradient runs here",
                           purpose, format_quantity(need, UnitKind::kBytes), format_quantity(have, UnitKind::kBytes)));
  return false;
}

// A collective run's dump: the step it reads fits this machine and sums in range on g ranks (check_dump_fields
// opened it and found the step).
void check_dump_gradients(const GradientsConfig& gc, uint32_t g, Diagnostics& diag, GradientPlan& out) {
  auto dump = traces::GradientDump::open(gc.dump);
  if (!dump.ok()) return diag.add("/gradients/dump", dump.status().message());
  out.elements = dump->elements();
  if (!check_machine_memory(3.0 * g * static_cast<double>(out.elements) * 4, "/gradients/dump",
                            fmt::format("the numerics on {} ranks", g), diag))
    return;
  auto read = read_dump_gradients(gc, g);
  if (!read.ok()) return diag.add("/gradients/dump", read.status().message());
  std::vector<std::span<const float>> ranks(read->ranks.begin(), read->ranks.end());
  if (Status st = algo::check_sum_in_range(ranks); !st.ok())
    return diag.add("/gradients/dump", fmt::format("{} step {} (rank r reads worker r mod {}): {}", gc.dump,
                                                   read->step, dump->workers(), st.message()));
  out.layout = read->layout;
  out.sample_elements = out.elements;
  out.sample_layout = out.layout;
}

// The tensor: a synthetic size or .npy files of one size or a dump's step (the numerics are sized by size_numerics).
void check_gradients(const Scenario& s, uint32_t g, Diagnostics& diag, GradientPlan& out) {
  const GradientsConfig& gc = s.gradients;
  if (gc.source == GradientSource::kSynthetic) {
    out.elements = gc.size_bytes / 4;
    out.layout = synthetic_layout(s, out.elements);
    return;
  }
  if (gc.source == GradientSource::kDump) return check_dump_gradients(gc, g, diag, out);
  for (size_t i = 0; i < gc.files.size(); ++i) {
    const std::string at = fmt::format("/gradients/files/{}", i);
    auto h = traces::read_npy_header(gc.files[i]);
    if (!h.ok()) return diag.add(at, h.status().message());
    if (h->elements == 0) return diag.add(at, fmt::format("{} is empty", gc.files[i]));
    if (i > 0 && h->elements != out.elements)
      return diag.add(at, fmt::format("{} has {} elements but {} has {}; all workers' gradients must have the same "
                                      "size", gc.files[i], h->elements, gc.files[0], out.elements));
    out.elements = h->elements;
  }
  if (!check_machine_memory(3.0 * g * static_cast<double>(out.elements) * 4, "/gradients/files",
                            fmt::format("the numerics on {} ranks", g), diag))
    return;
  std::vector<std::vector<float>> values;  // the values too: run reads them (non_finite.hpp)
  for (size_t i = 0; i < gc.files.size(); ++i) {
    auto arr = traces::read_npy(gc.files[i]);
    if (!arr.ok()) return diag.add(fmt::format("/gradients/files/{}", i), arr.status().message());
    if (Status st = traces::check_finite_npy(gc.files[i], arr->values); !st.ok())
      return diag.add(fmt::format("/gradients/files/{}", i), st.message());
    values.push_back(std::move(arr->values));
  }
  std::vector<std::span<const float>> ranks;  // rank r reads file r mod F
  for (uint32_t r = 0; r < g; ++r) ranks.emplace_back(values[r % values.size()]);
  if (Status st = algo::check_sum_in_range(ranks); !st.ok())
    return diag.add("/gradients/files", fmt::format("{} (rank r reads file r mod {}): {}", gc.files[0],
                                                    values.size(), st.message()));
  out.layout = {{0, out.elements, out.elements, 1}};
  out.sample_elements = out.elements;
  out.sample_layout = out.layout;
}

// What a scheme's metadata phase holds when planned one rank at a time: that rank's whole gradient,
// its statistics and the combined ones (doubles), and 64 MiB of the rest.
double stream_plan_bytes(const algo::Compressor& comp, uint64_t elements, uint32_t g) {
  const algo::PlanFormat f = comp.plan_format(elements, g);
  return static_cast<double>(elements) * 4 + 2.0 * static_cast<double>(8 * f.sum_entries + 4 * f.max_entries +
                                                                       8 * f.bit_words) + 64.0 * (1 << 20);
}

// The largest gradients.size (a multiple of 4 KB) whose `need` fits `limit`, 0 if none.
uint64_t largest_size(double limit, const std::function<double(uint64_t)>& need, uint64_t upto) {
  uint64_t lo = 0, hi = upto / 4096;  // in units of 1024 elements
  while (lo < hi) {
    const uint64_t mid = (lo + hi + 1) / 2;
    if (need(mid * 1024) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo * 4096;
}


// How much of a synthetic tensor the numerics hold (GradientPlan::sample_elements; .npy files: all
// of them, whose memory check_gradients checked): all of it where every scheme's estimate
// (algo::numerics_peak_bytes) fits the limit, else the largest 1/2^k of it that does, a sample of
// the same distribution. A scheme with a metadata phase plans it on the whole gradient one rank at
// a time, which must fit too.
void size_numerics(const Scenario& s, uint32_t g, const std::vector<std::unique_ptr<algo::Compressor>>& comps,
                   Diagnostics& diag, GradientPlan& out) {
  const uint64_t n = out.elements;
  // At most half this machine's memory, whatever numerics_memory allows: the rest is the system's.
  out.limit_bytes = std::min(static_cast<double>(s.gradients.numerics_memory_bytes), machine_memory_bytes() / 2);
  auto need = [&](uint64_t elements) {
    double m = 0;
    for (const auto& c : comps)
      if (c != nullptr) m = std::max(m, algo::numerics_peak_bytes(*c, elements, g));
    return m;
  };
  out.full_need_bytes = out.sample_need_bytes = need(n);
  out.sample_elements = n;
  out.sample_layout = out.layout;
  if (out.full_need_bytes <= out.limit_bytes || s.gradients.source != GradientSource::kSynthetic) return;
  for (size_t i = 0; i < comps.size(); ++i) {
    if (comps[i] == nullptr || comps[i]->plan_format(n, g).empty()) continue;
    const double stream = stream_plan_bytes(*comps[i], n, g);
    if (stream <= out.limit_bytes) continue;
    const uint64_t fits = largest_size(
        out.limit_bytes, [&](uint64_t e) { return stream_plan_bytes(*comps[i], e, g); }, n * 4);
    diag.add(at_entry(i), fmt::format("'{}' plans its metadata phase on each rank's whole gradient, one rank at a "
                                      "time: about {}, more than {}; set gradients.numerics_memory to at least {}{}{}",
                                      comps[i]->name(), format_quantity(stream, UnitKind::kBytes),
                                      numerics_limit_desc(s, out.limit_bytes), format_quantity(stream, UnitKind::kBytes),
                                      stream > machine_memory_bytes() / 2 ? " on a machine with twice that memory" : "",
                                      fits == 0 ? std::string() : fmt::format(", or gradients.size to at most {}",
                                          format_quantity(static_cast<double>(fits), UnitKind::kBytes))));
  }
  // A scale model: the tensor halved until it fits, so that its layers keep their proportions and
  // a scheme's padding (THC's power of two) its share.
  uint64_t sample = n / 2;
  while (sample >= 1024 && need(sample) > out.limit_bytes) sample /= 2;
  if (sample < 1024) sample = 0;
  out.sample_elements = sample;  // 0: not even 1024 entries per rank fit, so the run times only
  out.sample_need_bytes = need(std::max<uint64_t>(sample, 1024));
  out.sample_layout = sample == 0 ? std::vector<algo::LayerShape>{} : synthetic_layout(s, sample);
}

// A compression entry's scheme (registered: the caller checked), with a tensor's layout.
std::unique_ptr<algo::Compressor> entry_compressor(const Scenario& s, size_t i, const RunPlan& plan,
                                                   std::span<const algo::LayerShape> layout) {
  auto comp = plan.schemes[i].info->create(algo::Params(s.compression[i].params));
  comp->set_layout(layout);
  return comp;
}

// Entry i's collective in a collective run: its own `algorithm` for collective.operation, or the
// scenario's; false (with the error at its pointer) where it does not exist or cannot run the tensor.
bool entry_collective(const Scenario& s, size_t i, uint32_t g, uint64_t n, Diagnostics& diag, RunPlan& plan) {
  const CompressionConfig& cc = s.compression[i];
  plan.schemes[i].collective = plan.collective;
  if (cc.algorithm.empty() || cc.algorithm == plan.collective->algorithm) return true;
  const std::string at = at_entry(i) + "/algorithm";
  const auto found = topo::find_collective(std::string(topo::collective_op_name(s.collective.operation)), cc.algorithm);
  if (!found.ok()) {
    diag.add(at, found.status().message());
    return false;
  }
  if (Status st = (*found)->check(g, n, plan.base); !st.ok()) {
    diag.add(at, fmt::format("{} cannot run {} elements on {} ranks: {}", cc.algorithm, n, g, st.message()));
    return false;
  }
  plan.schemes[i].collective = *found;
  return true;
}

void check_collective_run(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  if (plan.collective == nullptr || plan.groups.empty() || !clean(diag, {"/gradients"})) return;
  const auto g = static_cast<uint32_t>(plan.groups.front().size());
  check_gradients(s, g, diag, plan.gradients);
  if (!clean(diag, {"/gradients", "/collective"})) return;
  const uint64_t n = plan.gradients.elements;
  if (Status st = plan.collective->check(g, n, plan.base); !st.ok())
    return diag.add("/collective/algorithm", fmt::format("{} cannot run {} elements on {} ranks: {}",
                                                         s.collective.algorithm, n, g, st.message()));
  std::vector<std::unique_ptr<algo::Compressor>> comps(s.compression.size());
  for (size_t i = 0; i < s.compression.size(); ++i) {
    if (plan.schemes[i].info == nullptr || !clean(diag, {at_entry(i)})) continue;
    if (!entry_collective(s, i, g, n, diag, plan)) continue;
    comps[i] = entry_compressor(s, i, plan, plan.gradients.layout);
    diag.add(at_entry(i), algo::CompressedCollective::check(*comps[i], *plan.schemes[i].collective, g, n, plan.base));
  }
  if (!clean(diag, {"/compression"})) return;
  size_numerics(s, g, comps, diag, plan.gradients);
  if (!plan.gradients.sampled() || plan.gradients.sample_elements == 0 || !clean(diag, {"/compression", "/gradients"}))
    return;
  for (size_t i = 0; i < s.compression.size(); ++i) {  // the sample runs every scheme too
    auto comp = entry_compressor(s, i, plan, plan.gradients.sample_layout);
    if (Status st = algo::CompressedCollective::check(*comp, *plan.schemes[i].collective, g,
                                                      plan.gradients.sample_elements,
                                                      plan.base);
        !st.ok())
      diag.add(at_entry(i), fmt::format("the vNMSE sample of {} per rank: {}",
                                        format_quantity(4.0 * static_cast<double>(plan.gradients.sample_elements), UnitKind::kBytes),
                                        st.message()));
  }
}

// ---- training runs: workload, stragglers, tenants ----------------------------------------------

void check_workload(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  const WorkloadConfig& wl = s.workload;
  if (!clean(diag, {"/workload"})) return;
  if (plan.kind == RunKind::kTraining && wl.rounds == 0 && wl.duration_s <= 0)
    diag.add("/workload", "expected rounds > 0 or a duration > 0, got neither (the run would never end)");
  if (plan.kind == RunKind::kParallel && wl.rounds == 0)
    diag.add("/workload/rounds", "a tensor/pipeline-parallel run needs rounds > 0, got 0");
  if (plan.kind == RunKind::kParallel && wl.duration_s > 0)
    diag.add("/workload/duration", "tensor/pipeline-parallel runs stop after workload.rounds; expected no duration");
  auto trace = load_trace(wl);
  if (!trace.ok()) return diag.add("", trace.status());
  if (trace->params() == 0) return diag.add("/workload/trace", "the trace has no parameters to synchronize");
  for (const auto& l : trace->layers())
    plan.layers.push_back({l.name, l.params, l.forward_s, l.backward_s, l.activation_bytes});
  for (const auto& l : trace->layers()) plan.layer_params.push_back(l.params);
  plan.trace = std::make_shared<const traces::ComputeTrace>(std::move(*trace));
}

void check_stragglers_and_tenants(const Scenario& s, uint32_t workers, Diagnostics& diag, RunPlan& plan) {
  for (const Diagnostic& d : sim::StragglerModel::problems(s.stragglers, workers))
    diag.add("/stragglers" + d.path, d.message);
  if (clean(diag, {"/stragglers"})) {
    auto stragglers = sim::StragglerModel::make(s.stragglers, static_cast<uint64_t>(s.seed));
    if (!stragglers.ok()) diag.add("", stragglers.status().at("/stragglers"));
    else plan.stragglers = std::move(*stragglers);
  }
  if (!clean(diag, {"/network"})) return;
  for (const Diagnostic& d : sim::TenantTraffic::problems(*plan.topology, s.network.tenants))
    diag.add("/network/tenants" + d.path, d.message);
}

// ---- data-parallel training ------------------------------------------------------------------

// `need` bytes of synthetic gradients a plan holds, as an input error when over
// gradients.numerics_memory or this machine's memory. `what`: the tensors, as "a N-entry gradient on
// R ranks"; `smaller`: how to need less.
void check_synthetic_bytes(const Scenario& s, const std::string& at, const std::string& purpose,
                           const std::string& what, double need, const std::string& smaller, Diagnostics& diag) {
  if (!check_machine_memory(need, at, purpose, diag)) return;
  if (need <= static_cast<double>(s.gradients.numerics_memory_bytes)) return;
  diag.add(at, fmt::format("{} {} needs {} of synthetic gradients (> gradients.numerics_memory {}); set "
                           "gradients.numerics_memory to at least {}, or {}",
                           purpose, what, format_quantity(need, UnitKind::kBytes),
                           format_quantity(static_cast<double>(s.gradients.numerics_memory_bytes), UnitKind::kBytes),
                           format_quantity(need, UnitKind::kBytes), smaller));
}

// check_synthetic_bytes() of `copies` of every rank's whole `elements`-entry draw.
void check_synthetic_memory(const Scenario& s, const std::string& at, const std::string& purpose, uint64_t elements,
                            uint32_t ranks, double copies, Diagnostics& diag) {
  check_synthetic_bytes(s, at, purpose, fmt::format("a {}-entry gradient on {} ranks", elements, ranks),
                        algo::SyntheticGradients::bytes(elements, ranks, copies), "use smaller buckets", diag);
}

// The piece of a bucket of `shape` a training run plans in, per rank, when its metadata phases plan
// once (BucketCodecs::make_all: every entry's plan on the bucket's draw shares it), or 0 when the
// run holds the whole draw. Low-rank schemes see other shapes, but never plan in pieces.
uint64_t shared_plan_piece(const Scenario& s, const algo::BucketShape& shape, uint32_t ranks) {
  std::vector<std::unique_ptr<algo::Compressor>> probes;
  for (const CompressionConfig& cc : s.compression) {
    auto comp = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
    if (!comp.ok()) return 0;
    (*comp)->set_layout(shape.layout);
    if (!(*comp)->plan_format(shape.elements, ranks).empty()) probes.push_back(std::move(*comp));
  }
  std::vector<const algo::Compressor*> list;
  for (const auto& p : probes) list.push_back(p.get());
  return algo::plan_piece_length(list, shape.elements, 2, algo::SyntheticGradients().piece_elements());
}

// A metadata phase's synthetic gradients on bucket `shape`: a piece of every rank's draw at a time
// where the scheme plans in pieces and never declines, else the whole draw (`copies` of it).
void check_plan_memory(const Scenario& s, const std::string& at, const std::string& scheme,
                       const algo::Compressor& comp, const algo::BucketShape& shape, uint32_t ranks, bool replans,
                       Diagnostics& diag) {
  const std::string purpose = fmt::format("'{}' agrees on metadata from the gradients each round; {}", scheme,
                                          replans ? "planning and running" : "planning");
  const uint64_t piece = replans ? 0 : shared_plan_piece(s, shape, ranks);
  if (piece == 0 || piece >= shape.elements || comp.plan_pieces_may_decline() ||
      !comp.plan_pieces(shape.elements, 0, kern::RngKey{0, 0, 0, algo::kPlanStream}))
    return check_synthetic_memory(s, at, purpose, shape.elements, ranks, algo::synthetic_copies(replans), diag);
  check_synthetic_bytes(s, at, purpose,
                        fmt::format("a {}-entry gradient on {} ranks, {} entries of each at a time,", shape.elements,
                                    ranks, piece),
                        algo::SyntheticGradients::bytes(piece, ranks, 1.0), "use fewer ranks", diag);
}

// A scheme's bucket codecs (the gradients', or the weights' all-gather with `weights`).
void check_bucket_codecs(const Scenario& s, size_t i, bool weights, Diagnostics& diag, RunPlan& plan) {
  const CompressionConfig& cc = s.compression[i];
  const std::string at = at_entry(i) + (weights ? "/weights" : "");
  const std::string& scheme = weights ? cc.weights.scheme : cc.scheme;
  const json& params = weights ? cc.weights.params : cc.params;
  const topo::CollectiveInfo& info = weights ? *plan.schemes[i].weights : *plan.schemes[i].collective;
  const uint32_t m = plan.topology->num_ranks();
  auto probe = algo::CompressorRegistry::global().create(scheme, params);
  if (!probe.ok()) return diag.add(at, probe.status());
  const std::vector<algo::BucketShape> shapes =
      algo::bucket_shapes(weights ? nullptr : probe->get(), plan.buckets, plan.layer_params,
                          static_cast<uint64_t>(s.workload.matrix_rows));
  topo::CollectiveOptions base;
  base.segments = static_cast<uint32_t>(s.collective.segments);
  base.gpus_per_node = plan.topology->gpus_per_node();
  const bool replans = s.sync.replan_every > 0;
  std::set<uint64_t> sized;  // flat buckets whose plan memory was checked, by size
  for (const algo::BucketShape& b : shapes) {
    auto comp = algo::CompressorRegistry::global().create(scheme, params);
    if (!comp.ok()) return diag.add(at, comp.status());
    (*comp)->set_layout(b.layout);
    if (!(*comp)->plan_format(b.elements, m).empty()) {
      if (weights)
        return diag.add(at + "/scheme", fmt::format("'{}' needs a metadata phase, which the weight all-gather does "
                                                    "not run; use bf16, sdp4bit_qw or sdp4bit_qwd", scheme));
      if (b.layout.size() > 1 || sized.insert(b.elements).second)
        check_plan_memory(s, at, scheme, **comp, b, m, replans, diag);
    }
    if (Status st = algo::CompressedCollective::check_scheme(**comp, info.operation, m, b.elements); !st.ok())
      return diag.add(at + (st.pointer().empty() ? "/scheme" : ""), st);
    if (Status st = algo::CompressedCollective::check_collective(**comp, info, m, b.elements, base); !st.ok())
      return diag.add(weights ? at + "/algorithm" : cc.algorithm.empty() ? "/collective/algorithm" : at + "/algorithm",
                      fmt::format("a bucket of {} entries: {}", b.elements, st.message()));
  }
  if (!weights) plan.schemes[i].buckets = shapes;
}

void check_broadcast_scheme(const Scenario& s, size_t i, Diagnostics& diag, RunPlan& plan) {
  const CompressionConfig& cc = s.compression[i];
  const std::string at = at_entry(i);
  if (cc.controller.kind == ControllerKind::kAqgb) {
    if (cc.scheme != "tfp")
      diag.add(at + "/scheme", fmt::format("the aqgb controller drives TFP's truncation, so the scheme must be tfp, "
                                           "got {}", cc.scheme));
    return;
  }
  auto comp = plan.schemes[i].info->create(algo::Params(cc.params));
  const uint64_t segment = static_cast<uint64_t>(s.sync.segment);
  const uint32_t m = plan.topology->num_ranks();
  if (!comp->plan_format(segment, m).empty())
    return diag.add(at + "/scheme", fmt::format("'{}' needs a metadata phase across ranks, which a broadcast does not "
                                                "have; use sync.mode allreduce", cc.scheme));
  // The broadcast charges each segment's encode and decode-accumulates only; a scheme with work
  // around the collective (prepare, finish) would have it silently dropped.
  if (const auto round = algo::round_ops(*comp, segment, m); !round.empty())
    diag.add(at + "/scheme", fmt::format("'{}' with these params runs {} around the collective, which a broadcast "
                                         "does not model; use sync.mode allreduce",
                                         cc.scheme, topo::kernel_kind_name(round.front())));
}

void check_training_scheme(const Scenario& s, size_t i, Diagnostics& diag, RunPlan& plan) {
  const CompressionConfig& cc = s.compression[i];
  const std::string at = at_entry(i);
  if (cc.controller.kind == ControllerKind::kEdgc)
    return diag.add(at + "/controller/kind", "edgc sets the ranks of pipeline stages (parallelism.pp > 1); a "
                                             "data-parallel run expected none or aqgb");
  if (s.sync.mode == SyncMode::kBroadcast) {
    if (!cc.algorithm.empty() && cc.algorithm != s.collective.algorithm)
      return diag.add(at + "/algorithm", fmt::format("sync.mode broadcast sends every block peer to peer; a "
                                                     "scheme's own algorithm would change nothing, got {}",
                                                     cc.algorithm));
    return check_broadcast_scheme(s, i, diag, plan);
  }
  if (cc.controller.kind != ControllerKind::kNone)
    return diag.add(at + "/controller/kind",
                    fmt::format("aqgb drives a broadcast (sync.mode broadcast); with sync.mode {} expected none",
                                enum_name<SyncMode>(kSyncModes, s.sync.mode)));
  const bool sharded = s.sync.mode == SyncMode::kSharded;
  const std::string op = sharded ? "reduce_scatter" : "allreduce";
  const std::string algorithm = cc.algorithm.empty() ? s.collective.algorithm : cc.algorithm;
  const auto found = topo::find_collective(op, algorithm);
  if (!found.ok()) return diag.add(cc.algorithm.empty() ? "/collective/algorithm" : at + "/algorithm", found.status());
  plan.schemes[i].collective = *found;
  if (sharded) {
    const auto weights = topo::find_collective("allgather", cc.weights.algorithm);
    if (!weights.ok()) return diag.add(at + "/weights/algorithm", weights.status());
    plan.schemes[i].weights = *weights;
  }
  check_bucket_codecs(s, i, false, diag, plan);
  if (sharded && clean(diag, {at})) check_bucket_codecs(s, i, true, diag, plan);
}

void check_training_run(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  const uint32_t m = plan.topology->num_ranks();
  if (clean(diag, {"/parallelism"}) && s.parallelism.dp != 0 && s.parallelism.dp != m)
    diag.add("/parallelism/dp", fmt::format("expected 0 or the number of ranks ({}), got {}", m, s.parallelism.dp));
  check_stragglers_and_tenants(s, m, diag, plan);
  if (!clean(diag, {"/sync", "/collective/operation"})) return;
  const topo::CollectiveOp op = s.collective.operation;
  if (s.sync.mode == SyncMode::kAllReduce && op != topo::CollectiveOp::kAllReduce)
    return diag.add("/collective/operation", fmt::format("sync.mode allreduce synchronizes gradients with an "
                                                         "allreduce, got {}", topo::collective_op_name(op)));
  if (s.sync.mode == SyncMode::kSharded && op != topo::CollectiveOp::kReduceScatter)
    return diag.add("/collective/operation", fmt::format("sync.mode sharded reduce-scatters gradients, so expected "
                                                         "reduce_scatter, got {}", topo::collective_op_name(op)));
  if (s.sync.mode != SyncMode::kBroadcast)
    plan.buckets = sim::make_buckets(plan.layers, s.sync.bucket_bytes, s.sync.first_bucket_bytes,
                                     plan.trace->gradient_bytes_per_param());
  for (size_t i = 0; i < s.compression.size(); ++i)
    if (plan.schemes[i].info != nullptr && clean(diag, {at_entry(i), "/collective/algorithm", "/gradients"}))
      check_training_scheme(s, i, diag, plan);
}

// ---- 3D-parallel training ---------------------------------------------------------------------

void check_parallel_layout(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  auto groups = parallel_groups(s, plan.topology->num_ranks());
  if (!groups.ok()) return diag.add("", groups.status());
  const topo::ParallelLayout layout = groups->layout();
  auto starts = sim::split_stages(plan.layers, layout.pp);
  if (!starts.ok()) return diag.add("/parallelism/pp", starts.status().message());
  if (Status st = sim::ParallelTrainingJob::check(*plan.topology, *groups, plan.layers, *starts,
                                                  parallel_job_options(s, *plan.trace));
      !st.ok())
    return diag.add("/parallelism", st.message());
  plan.parallel = std::move(*groups);
  plan.stage_starts = std::move(*starts);
  plan.stages = algo::stage_shapes(plan.layer_params, plan.stage_starts, layout.tp,
                                   static_cast<uint64_t>(s.workload.matrix_rows));
}

void check_parallel_scheme(const Scenario& s, size_t i, Diagnostics& diag, RunPlan& plan) {
  const CompressionConfig& cc = s.compression[i];
  const std::string at = at_entry(i);
  const uint32_t dp = plan.parallel->layout().dp;
  if (!cc.algorithm.empty() && cc.algorithm != s.collective.algorithm)
    return diag.add(at + "/algorithm", fmt::format("a 3D-parallel run syncs every stage with collective.algorithm "
                                                   "({}); a scheme's own algorithm would change nothing, got {}",
                                                   s.collective.algorithm, cc.algorithm));
  auto probe = plan.schemes[i].info->create(algo::Params(cc.params));
  const bool low_rank = dynamic_cast<const algo::LowRankCompressor*>(probe.get()) != nullptr;
  if (cc.controller.kind == ControllerKind::kAqgb)
    return diag.add(at + "/controller/kind", "aqgb drives a broadcast of data-parallel workers, not a pipeline's "
                                             "stages");
  if (cc.controller.kind == ControllerKind::kEdgc && !low_rank)
    return diag.add(at + "/scheme",
                    fmt::format("the edgc controller sets the ranks of powersgd or edgc, got {}", cc.scheme));
  if (cc.controller.r_min > cc.controller.r_max)
    return diag.add(at + "/controller/r_max", fmt::format("expected at least r_min ({}), got {}", cc.controller.r_min,
                                                          cc.controller.r_max));
  const algo::ParamSpec* rank = algo::CompressorRegistry::global().find("powersgd")->params.find("rank");
  if ((cc.controller.kind == ControllerKind::kEdgc || cc.scheme == "edgc") &&
      static_cast<double>(cc.controller.r_max) > *rank->max)
    return diag.add(at + "/controller/r_max", fmt::format("expected at most {} (the largest rank powersgd, EDGC's "
                                                          "engine, takes), got {}", *rank->max, cc.controller.r_max));
  plan.schemes[i].collective = plan.collective;
  if (cc.scheme == "edgc")
    check_synthetic_bytes(s, at, "edgc's Algorithm 1 samples the first stage's entropy:",
                          fmt::format("its largest matrix layer ({} entries) on {} ranks at a time",
                                      algo::RoundEntropies::largest_matrix_layer(plan.stages[0]),
                                      algo::RoundEntropies::ranks_at_once(plan.stages[0], dp)),
                          algo::RoundEntropies::bytes(plan.stages[0], dp), "use more tensor parallelism", diag);
  if (dp <= 1) return;
  topo::CollectiveOptions base;
  base.segments = static_cast<uint32_t>(s.collective.segments);
  for (uint32_t st = 0; st < plan.stages.size(); ++st) {
    if (plan.stages[st].elements == 0) continue;
    probe->set_layout(plan.stages[st].layout);
    if (!low_rank && !probe->plan_format(plan.stages[st].elements, dp).empty())
      check_synthetic_memory(s, at, fmt::format("'{}' agrees on metadata from the gradients each round; planning",
                                                cc.scheme), plan.stages[st].elements, dp, 1.0, diag);
    if (Status e = algo::CompressedCollective::check_scheme(*probe, topo::CollectiveOp::kAllReduce, dp,
                                                            plan.stages[st].elements);
        !e.ok())
      return diag.add(at, e);
    if (Status e =
            algo::CompressedCollective::check_collective(*probe, *plan.collective, dp, plan.stages[st].elements, base);
        !e.ok())
      return diag.add("/collective/algorithm", fmt::format("stage {}: {}", st, e.message()));
  }
}

void check_parallel_run(const Scenario& s, Diagnostics& diag, RunPlan& plan) {
  if (clean(diag, {"/sync/mode"}) && s.sync.mode != SyncMode::kAllReduce)
    diag.add("/sync/mode", fmt::format("tensor/pipeline-parallel runs synchronize each stage's gradients with an "
                                       "all-reduce over its DP group; expected allreduce, got {}",
                                       enum_name<SyncMode>(kSyncModes, s.sync.mode)));
  if (clean(diag, {"/collective/operation"}) && s.collective.operation != topo::CollectiveOp::kAllReduce)
    diag.add("/collective/operation", fmt::format("expected allreduce (each stage's DP sync), got {}",
                                                  topo::collective_op_name(s.collective.operation)));
  if (!clean(diag, {"/parallelism", "/workload", "/sync", "/collective"})) return;
  check_parallel_layout(s, diag, plan);
  if (!plan.parallel) return;
  const auto found = topo::find_collective("allreduce", s.collective.algorithm);
  if (!found.ok()) return diag.add("/collective/algorithm", found.status());
  plan.collective = *found;
  const topo::ParallelLayout& layout = plan.parallel->layout();
  check_stragglers_and_tenants(s, layout.pp * layout.dp, diag, plan);
  for (size_t i = 0; i < s.compression.size(); ++i)
    if (plan.schemes[i].info != nullptr && clean(diag, {at_entry(i), "/gradients"}))
      check_parallel_scheme(s, i, diag, plan);
}

}  // namespace

std::string entry_label(const Scenario& s, size_t i, RunKind kind) {
  const CompressionConfig& cc = s.compression[i];
  if (!cc.label.empty()) return cc.label;
  if (kind == RunKind::kParallel && cc.controller.kind == ControllerKind::kEdgc)
    return fmt::format("edgc({},{})",
                       cc.scheme == "edgc" ? std::string("entropy") : fmt::format("{}", cc.params.value("rank", 4)),
                       enum_name<algo::EdgcAnchor>(algo::kEdgcAnchors, cc.controller.anchor));
  std::string label = cc.controller.kind == ControllerKind::kNone
                          ? algo::scheme_label(cc.scheme, cc.params)
                          : std::string(enum_name<ControllerKind>(kControllerKinds, cc.controller.kind));
  if (kind == RunKind::kTraining && s.sync.mode == SyncMode::kSharded && cc.weights.scheme != "bf16")
    label += fmt::format("+{}", algo::scheme_label(cc.weights.scheme, cc.weights.params));
  return label;
}

std::string numerics_limit_desc(const Scenario& s, double limit) {
  const auto set = static_cast<double>(s.gradients.numerics_memory_bytes);
  return limit < set ? fmt::format("half this machine's memory, {}", format_quantity(limit, UnitKind::kBytes))
                     : fmt::format("gradients.numerics_memory {}", format_quantity(set, UnitKind::kBytes));
}

std::vector<algo::LayerShape> synthetic_layout(const Scenario& s, uint64_t elements) {
  const std::vector<uint64_t> offsets =
      traces::synthetic_layer_offsets(s.gradients.synthetic_spec(elements), static_cast<uint64_t>(s.seed));
  std::vector<algo::LayerShape> layout;
  for (size_t l = 0; l + 1 < offsets.size(); ++l)
    layout.push_back({offsets[l], offsets[l + 1] - offsets[l], offsets[l + 1] - offsets[l], 1});
  return layout;
}

sim::ParallelJobOptions parallel_job_options(const Scenario& s, const traces::ComputeTrace& trace) {
  sim::ParallelJobOptions po;
  po.rounds = static_cast<uint32_t>(s.workload.rounds);
  po.micro_batches = static_cast<uint32_t>(s.workload.micro_batches);
  po.schedule = s.workload.pipeline;
  po.tp_allreduces = static_cast<uint32_t>(s.workload.tp_allreduces);
  po.optimizer_s = trace.optimizer_s();
  return po;
}

// A 3D-parallel round's transfers (sim/training/parallel_job.hpp): per replica and micro-batch, the
// TP ring all-reduces of each layer with params and activations, forward and backward, and the tp
// sends each way across every stage boundary; per stage and TP index, the DP group's sync.
uint64_t parallel_round_transfers(const Scenario& s, const RunPlan& plan) {
  const topo::ParallelLayout& layout = plan.parallel->layout();
  const auto mb = static_cast<uint64_t>(s.workload.micro_batches);
  uint64_t tp_flows = 0;  // one micro-batch through every stage of one pipeline replica
  if (layout.tp > 1)
    if (auto ring = topo::find_collective("allreduce", "ring"); ring.ok())
      for (const auto& l : plan.layers)
        if (l.params > 0 && l.activation_bytes >= 4)
          tp_flows += 2 * static_cast<uint64_t>(s.workload.tp_allreduces) *
                      (*ring)->transfers(layout.tp, l.activation_bytes / 4, plan.base);
  const uint64_t sends = 2 * uint64_t{layout.dp} * (layout.pp - 1) * layout.tp * mb;
  uint64_t dp_flows = 0;
  if (layout.dp > 1)
    for (const algo::BucketShape& st : plan.stages)
      if (st.elements > 0)
        dp_flows += uint64_t{layout.tp} * plan.collective->transfers(layout.dp, st.elements, plan.base);
  return tp_flows * mb * layout.dp + sends + dp_flows;
}

// The transfers a run would simulate, from the schedules' closed forms (CollectiveInfo::transfers),
// against --max-flows: a run too large to finish is refused before it starts, with its estimate. A
// collective run times each scheme's collective on every group; a data-parallel training run each
// bucket's collective every round (twice when sharded: gradients and weights). Metadata phases and
// round ops add to this; a broadcast run counts its first stage (every segment of every block from
// each worker to every other), a 3D-parallel run parallel_round_transfers; a run bounded by
// duration only is not estimated.
void check_run_size(const Scenario& s, uint64_t max_flows, Diagnostics& diag, const RunPlan& plan) {
  uint64_t total = 0, per_unit = 0;
  std::string unit, at;
  auto add = [&](uint64_t n, uint64_t times) {
    const uint64_t t = n > UINT64_MAX / std::max<uint64_t>(times, 1) ? UINT64_MAX : n * times;
    total = total > UINT64_MAX - t ? UINT64_MAX : total + t;
  };
  if (plan.kind == RunKind::kCollective && plan.collective != nullptr && !plan.groups.empty()) {
    const auto g = static_cast<uint32_t>(plan.groups.front().size());
    per_unit = plan.collective->transfers(g, plan.gradients.elements, plan.base);
    for (size_t i = 0; i < s.compression.size(); ++i) {
      const topo::CollectiveInfo* c = plan.schemes[i].collective ? plan.schemes[i].collective : plan.collective;
      add(c->transfers(g, plan.gradients.elements, plan.base), plan.groups.size());
    }
    unit = fmt::format("{} per collective of {} ranks x {} concurrent group(s) x {} scheme(s)", per_unit, g,
                       plan.groups.size(), s.compression.size());
    at = "/cluster/nodes";
  } else if (plan.kind == RunKind::kTraining && s.sync.mode == SyncMode::kBroadcast && s.workload.rounds > 0) {
    // Every worker sends each segment of each block to every other worker (stage 2 adds more).
    const uint64_t m = plan.topology->num_ranks(), seg = static_cast<uint64_t>(s.sync.segment);
    uint64_t segments = 0;
    for (const auto& l : plan.layers) segments += (l.params + seg - 1) / seg;
    const uint64_t flows = segments > UINT64_MAX / (m - 1) ? UINT64_MAX : segments * (m - 1);
    for (size_t i = 0; i < s.compression.size(); ++i) add(flows, m * static_cast<uint64_t>(s.workload.rounds));
    unit = fmt::format("{} segment(s) per worker per round, each to {} other worker(s), x {} rounds x {} scheme(s), "
                       "at least", segments, m - 1, s.workload.rounds, s.compression.size());
    at = "/workload/rounds";
  } else if (plan.kind == RunKind::kTraining && s.workload.rounds > 0) {
    const uint32_t m = plan.topology->num_ranks();
    for (const SchemePlan& sp : plan.schemes) {
      if (sp.collective == nullptr) continue;
      per_unit = 0;
      for (const auto& b : plan.buckets) per_unit += sp.collective->transfers(m, b.params, plan.base);
      add(per_unit * (s.sync.mode == SyncMode::kSharded ? 2 : 1), static_cast<uint64_t>(s.workload.rounds));
    }
    unit = fmt::format("{} bucket collective(s) of {} ranks per round x {} rounds x {} scheme(s)",
                       plan.buckets.size(), m, s.workload.rounds, s.compression.size());
    at = "/workload/rounds";
  }
  if (plan.kind == RunKind::kParallel && plan.parallel && plan.collective && !plan.stages.empty()) {
    per_unit = parallel_round_transfers(s, plan);
    for (size_t i = 0; i < s.compression.size(); ++i) add(per_unit, static_cast<uint64_t>(s.workload.rounds));
    unit = fmt::format("{} per round (TP all-reduces, stage-to-stage sends, each stage's DP sync) x {} rounds x {} "
                       "scheme(s)", per_unit, s.workload.rounds, s.compression.size());
    at = "/workload/rounds";
  }
  if (total <= max_flows) return;
  diag.add(at, fmt::format("the run would simulate {:.3g} transfers ({}), more than --max-flows {:.3g} allows; a "
                           "smaller cluster or run finishes in reasonable time, or raise --max-flows to run it anyway",
                           static_cast<double>(total), unit, static_cast<double>(max_flows)));
}

// Bytes per second rank 0's links carry out, or in, whichever is more.
double rank0_capacity(const topo::Topology& topology) {
  double out = 0, in = 0;
  for (const auto& l : topology.links()) {
    if (l.from == 0) out += l.capacity_Bps;
    if (l.to == 0) in += l.capacity_Bps;
  }
  return std::max(out, in);
}

// Seconds a collective of `g` ranks needs at least: rank 0 sends, or receives, (g-1)/g of one
// encoded copy of the tensor or more (all-reduce, reduce-scatter and all-gather both; broadcast and
// reduce as root or not, one of them), through its links out or in (`capacity`: rank0_capacity). 0
// for a scheme whose encoding a metadata phase fixes (left to the run-time check) and for g < 2.
double collective_lower_bound_s(const algo::CompressorInfo& info, const CompressionConfig& cc,
                                const std::vector<algo::LayerShape>& layout, uint64_t n, uint32_t g,
                                double capacity, const RunPlan& plan) {
  if (g < 2 || capacity <= 0 || n == 0) return 0;
  auto comp = info.create(algo::Params(cc.params));
  comp->set_layout(layout);
  if (!comp->plan_format(n, g).empty()) return 0;
  const auto bytes = static_cast<double>(algo::tensor_bytes(*comp, comp->reduced_elements(n), g, plan.base).tensor());
  return (g - 1.0) / g * bytes / capacity;
}

// A lower bound of the simulated time a run needs, against the end of the simulated clock (the
// engine stops there and the run fails with past_horizon_error): each collective at least its
// collective_lower_bound_s; every data-parallel round at least its compute (each layer forward and
// backward once) plus each bucket's collective; a 3D-parallel round at least its micro-batches'
// compute spread over pp x tp GPUs.
void check_horizon(const Scenario& s, Diagnostics& diag, const RunPlan& plan) {
  const double end_s = SimTime::infinite().seconds();
  const double capacity = rank0_capacity(*plan.topology);
  auto refuse = [&](const std::string& at, double need_s, const std::string& why) {
    if (need_s <= end_s) return;
    diag.add(at, fmt::format("the run needs at least {:.3g} s of simulated time ({}), past the end of the simulated "
                             "clock at {:.4g} s (about {:.0f} days); smaller gradients, layers or fewer rounds, or "
                             "faster links, bring it in range",
                             need_s, why, end_s, end_s / 86400));
  };
  if (plan.kind == RunKind::kCollective && plan.collective != nullptr && !plan.groups.empty()) {
    const auto g = static_cast<uint32_t>(plan.groups.front().size());
    for (size_t i = 0; i < s.compression.size(); ++i)
      if (plan.schemes[i].info != nullptr)
        refuse(at_entry(i),
               collective_lower_bound_s(*plan.schemes[i].info, s.compression[i], plan.gradients.layout,
                                        plan.gradients.elements, g, capacity, plan),
               fmt::format("'{}' on {} ranks, through rank 0's links", s.compression[i].scheme, g));
    return;
  }
  if (!plan.trace || s.workload.rounds <= 0) return;
  const double compute = plan.trace->forward_s() + plan.trace->backward_s();
  const auto rounds = static_cast<double>(s.workload.rounds);
  if (plan.kind == RunKind::kParallel) {
    const double per_round = compute * static_cast<double>(s.workload.micro_batches) /
                             static_cast<double>(s.parallelism.pp * s.parallelism.tp);
    return refuse("/workload/rounds", per_round * rounds,
                  fmt::format("{} rounds of at least {:.3g} s of compute", s.workload.rounds, per_round));
  }
  if (compute * rounds > end_s)
    return refuse("/workload/rounds", compute * rounds,
                  fmt::format("{} rounds of at least {:.3g} s of compute", s.workload.rounds, compute));
  const uint32_t m = plan.topology->num_ranks();
  for (size_t i = 0; i < s.compression.size(); ++i) {
    double comm = 0;
    if (plan.schemes[i].info != nullptr && s.sync.mode != SyncMode::kBroadcast)
      for (const algo::BucketShape& b : plan.schemes[i].buckets)
        comm += collective_lower_bound_s(*plan.schemes[i].info, s.compression[i], b.layout, b.elements, m, capacity,
                                         plan);
    refuse(at_entry(i), (compute + comm) * rounds,
           fmt::format("{} rounds of at least {:.3g} s of compute and {:.3g} s of '{}' collectives", s.workload.rounds,
                       compute, comm, s.compression[i].scheme));
  }
}

std::shared_ptr<const RunPlan> check_scenario(const Scenario& s, const json& doc, uint64_t max_flows,
                                              Diagnostics& diag) {
  auto plan = std::make_shared<RunPlan>();
  // Training runs size their gradients from the compute trace. (A trace path given but not found
  // was reported already and leaves the field empty.)
  const bool training = !s.workload.trace.empty() ||
                        (doc.contains("workload") && doc["workload"].is_object() && doc["workload"].contains("trace") &&
                         doc["workload"]["trace"].is_string() && !doc["workload"]["trace"].get<std::string>().empty());
  plan->kind = !training ? RunKind::kCollective
               : (s.parallelism.tp > 1 || s.parallelism.pp > 1) ? RunKind::kParallel
                                                                : RunKind::kTraining;
  for (size_t i = 0; i < s.compression.size(); ++i)
    plan->schemes.push_back({entry_label(s, i, plan->kind),
                             algo::CompressorRegistry::global().find(s.compression[i].scheme), nullptr, nullptr, {}});
  check_labels(s, *plan, diag);
  check_gradient_fields(s, doc, training, diag);
  check_fields_apply(s, training, diag);
  check_kernel_costs(s, doc, diag, *plan);
  plan->synthetic = algo::SyntheticGradients(s.gradients.synthetic_spec(0), static_cast<uint64_t>(s.seed));
  if (!clean(diag, {"/cluster"})) return nullptr;
  check_cluster(s, diag, *plan);
  if (plan->topology == nullptr) return nullptr;
  check_collective_section(s, diag, *plan);
  if (plan->kind == RunKind::kCollective) check_collective_run(s, diag, *plan);
  if (plan->kind != RunKind::kCollective) check_workload(s, diag, *plan);
  if (plan->kind == RunKind::kTraining && plan->trace) check_training_run(s, diag, *plan);
  if (plan->kind == RunKind::kParallel && plan->trace) check_parallel_run(s, diag, *plan);
  if (diag.empty()) check_run_size(s, max_flows, diag, *plan);
  if (diag.empty()) check_horizon(s, diag, *plan);
  std::vector<std::string> labels;
  for (const SchemePlan& sp : plan->schemes) labels.push_back(sp.label);
  plan->convergence = check_convergence(s, plan->kind, labels, diag);
  if (!diag.empty()) return nullptr;
  return plan;
}

Result<DumpGradients> read_dump_gradients(const GradientsConfig& g, uint32_t ranks) {
  CCSIM_ASSIGN_OR_RETURN(const traces::GradientDump dump, traces::GradientDump::open(g.dump));
  const std::vector<uint64_t> want(g.steps.begin(), g.steps.begin() + std::min<size_t>(g.steps.size(), 1));
  CCSIM_ASSIGN_OR_RETURN(const std::vector<size_t> steps, dump.step_indices(want));
  DumpGradients out;
  out.step = dump.step_info()[steps[0]].step;
  for (const traces::GradientLayer& l : dump.layers()) {
    const uint64_t rows = l.shape.empty() ? 1 : std::max<uint64_t>(1, l.shape.front());
    out.layout.push_back({l.offset, l.count, rows, l.count / rows});
  }
  RankTensors workers;
  for (uint32_t w = 0; w < std::min(ranks, dump.workers()); ++w) {
    CCSIM_ASSIGN_OR_RETURN(const traces::GradientVector v, dump.worker(w, steps[0]));
    workers.emplace_back(v.values().begin(), v.values().end());
  }
  for (uint32_t r = 0; r < ranks; ++r) out.ranks.push_back(workers[r % workers.size()]);
  return out;
}

}  // namespace ccsim::app
