#include "tools/app/runner.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <limits>

#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"
#include "sim/base/units.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/topology.hpp"
#include "traces/npy.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

topo::Topology build_topology(const ClusterConfig& c) {
  CCSIM_CHECK(c.topology == "star", "topology '{}' passed validation but has no builder", c.topology);
  return topo::make_star(static_cast<uint32_t>(c.nodes), c.nic_bandwidth_Bps, c.link_latency_s);
}

// Per-rank input gradients, flattened.
Status load_gradients(const Scenario& s, uint32_t ranks, std::vector<std::vector<float>>& grads, std::string& desc) {
  const GradientsConfig& g = s.gradients;
  grads.assign(ranks, {});
  if (g.source == "synthetic") {
    traces::SyntheticGradientSpec spec;
    spec.elements = g.size_bytes / 4;
    spec.layers = static_cast<uint32_t>(g.layers);
    spec.scale_decades = g.scale_decades;
    spec.correlation = g.correlation;
    spec.envelope_sigma = g.envelope_sigma;
    spec.envelope_span = static_cast<uint32_t>(g.envelope_span);
    std::vector<std::span<float>> views;
    for (auto& v : grads) {
      v.resize(spec.elements);
      views.emplace_back(v);
    }
    traces::generate_synthetic_gradients(spec, static_cast<uint64_t>(s.seed), views);
    desc = fmt::format("synthetic ({} layers, scales over {} decades, correlation {}, envelope sigma {})", g.layers,
                       g.scale_decades, g.correlation, g.envelope_sigma);
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
  desc = fmt::format("{} .npy file(s), worker w reads file w mod {}", loaded.size(), loaded.size());
  return ok_status();
}

std::vector<float> exact_sum(const std::vector<std::vector<float>>& grads) {
  const uint64_t n = grads.front().size();
  std::vector<float> sum(n);
  kern::parallel_for(n, 1 << 16, [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      double acc = 0;
      for (const auto& g : grads) acc += g[i];
      sum[i] = static_cast<float>(acc);
    }
  });
  return sum;
}

Status write_atomically(const std::vector<std::pair<fs::path, std::string>>& files) {
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

// Rounding noise below 1e-9 % prints as +0.0000%, not -0.0000%.
double display_zero(double x) { return std::fabs(x) < 1e-9 ? 0.0 : x; }

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

const char* ccsim_version() { return "0.1.0"; }

Result<RunReport> run_scenario(const LoadedScenario& loaded) {
  const Scenario& s = loaded.scenario;
  RunReport report;
  report.loaded = loaded;
  const topo::Topology topology = build_topology(s.cluster);
  const uint32_t ranks = topology.num_ranks();
  report.topology_desc = fmt::format("{} of {} ranks, {} links, {} per link", topology.kind(), ranks,
                                     format_quantity(s.cluster.nic_bandwidth_Bps, UnitKind::kBandwidth),
                                     format_quantity(s.cluster.link_latency_s, UnitKind::kTime));

  sim::KernelCostModel costs;
  if (s.cluster.gpu.kernel_cost == "roofline") {
    costs.memory_Bps = s.cluster.gpu.memory_bandwidth_Bps;
    costs.launch = Duration::from_seconds(s.cluster.gpu.kernel_launch_s);
  }
  report.kernel_cost_desc = costs.describe();

  std::vector<std::vector<float>> grads;
  CCSIM_RETURN_IF_ERROR(load_gradients(s, ranks, grads, report.gradients_desc));
  report.elements = grads.front().size();
  const std::vector<float> exact = exact_sum(grads);

  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* collective,
                         topo::find_collective(s.collective.operation, s.collective.algorithm));
  const double alpha = topology.route_latency_s(0, 1);
  const double bw = s.cluster.nic_bandwidth_Bps;
  const bool ring_formula = collective->operation == "allreduce" && collective->algorithm == "ring" && s.cluster.topology == "star";
  report.analytic_desc = ring_formula ? fmt::format("2(n-1)(alpha + S/(nB)), n={}, alpha={} (rank-to-rank route), B={}",
                                                    ranks, format_quantity(alpha, UnitKind::kTime),
                                                    format_quantity(bw, UnitKind::kBandwidth))
                                      : "none for this collective/topology";

  std::vector<std::vector<float>> work(ranks);
  for (size_t i = 0; i < s.compression.size(); ++i) {
    const CompressionConfig& cc = s.compression[i];
    auto created = algo::CompressorRegistry::global().create(cc.scheme, cc.params);
    if (!created.ok()) return created.status().with_context(fmt::format("/compression/{}", i));
    algo::Compressor& comp = **created;

    topo::CollectiveOptions options;
    options.align = comp.alignment();
    topo::Schedule schedule = collective->build(ranks, report.elements, options);
    algo::bind_schedule(schedule, comp);

    SchemeResult r;
    r.scheme = cc.scheme;
    r.params = cc.params;
    r.unbiased = comp.unbiased();
    for (const auto& c : schedule.chunks()) r.tensor_wire_bytes += comp.wire_bytes({c.offset, c.count}, {1, ranks});
    r.bits_per_element = 8.0 * static_cast<double>(r.tensor_wire_bytes) / static_cast<double>(report.elements);
    r.wire_bytes_total = schedule.wire_bytes();
    r.transfers = schedule.num_transfers();

    const sim::ScheduleTiming timing = sim::simulate_schedule(topology, schedule, costs);
    r.time_s = timing.duration().seconds();
    for (const Duration d : timing.kernel_busy) r.kernel_time_s = std::max(r.kernel_time_s, d.seconds());
    r.analytic_time_s = ring_formula ? 2.0 * (ranks - 1) *
                                           (alpha + static_cast<double>(r.tensor_wire_bytes) / (ranks * bw))
                                     : std::numeric_limits<double>::quiet_NaN();

    std::vector<std::span<float>> views;
    for (uint32_t rk = 0; rk < ranks; ++rk) {
      work[rk] = grads[rk];
      views.emplace_back(work[rk]);
    }
    CCSIM_ASSIGN_OR_RETURN(algo::NumericsStats stats,
                           algo::run_numerics(schedule, comp, views, {static_cast<uint64_t>(s.seed), 0}));
    CCSIM_CHECK(stats.wire_bytes == r.wire_bytes_total, "numerics sent {} bytes, schedule declares {}", stats.wire_bytes,
                r.wire_bytes_total);
    std::vector<algo::ErrorStats> errs;
    for (uint32_t rk = 0; rk < ranks; ++rk) {
      errs.push_back(algo::error_stats(exact, work[rk]));
      const algo::ErrorStats one[1] = {errs.back()};
      r.vnmse_max_rank = std::max(r.vnmse_max_rank, algo::vnmse(one));
    }
    r.vnmse = algo::vnmse(errs);
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
              {"wire_bytes_total", r.wire_bytes_total},
              {"transfers", r.transfers},
              {"time_s", r.time_s},
              {"kernel_time_s", r.kernel_time_s},
              {"vnmse", std::isfinite(r.vnmse) ? json(r.vnmse) : json("inf")},
              {"vnmse_max_rank", std::isfinite(r.vnmse_max_rank) ? json(r.vnmse_max_rank) : json("inf")},
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
              {"ranks", s.cluster.nodes},
              {"topology", report.topology_desc},
              {"collective", s.collective.operation + "/" + s.collective.algorithm},
              {"elements", report.elements},
              {"tensor_bytes", report.elements * 4},
              {"gradients", report.gradients_desc},
              {"kernel_cost", report.kernel_cost_desc},
              {"analytic_model", report.analytic_desc},
              {"results", results}};
}

std::string results_csv(const RunReport& report) {
  const Scenario& s = report.loaded.scenario;
  std::string out =
      "scenario,scheme,params,ranks,operation,algorithm,elements,bits_per_element,tensor_wire_bytes,wire_bytes_total,"
      "transfers,time_s,analytic_time_s,time_vs_analytic,kernel_time_s,vnmse,vnmse_max_rank,unbiased\n";
  for (const auto& r : report.results) {
    const bool has = std::isfinite(r.analytic_time_s);
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s.name, r.scheme, csv_escape(r.params.dump()),
                       s.cluster.nodes, s.collective.operation, s.collective.algorithm, report.elements,
                       r.bits_per_element, r.tensor_wire_bytes, r.wire_bytes_total, r.transfers, r.time_s,
                       has ? fmt::format("{}", r.analytic_time_s) : "", has ? fmt::format("{}", r.time_s / r.analytic_time_s - 1.0) : "",
                       r.kernel_time_s, r.vnmse, r.vnmse_max_rank, r.unbiased ? "true" : "false");
  }
  return out;
}

Status write_outputs(const RunReport& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  const fs::path d(dir);
  return write_atomically({{d / "scenario.resolved.json", report.loaded.resolved.dump(2) + "\n"},
                           {d / "summary.json", summary_json(report).dump(2) + "\n"},
                           {d / "results.csv", results_csv(report)}});
}

std::string format_summary(const RunReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out += fmt::format("ccsim {} | scenario {} | seed {}\n", ccsim_version(), s.name, s.seed);
  out += fmt::format("  cluster     {}\n", report.topology_desc);
  out += fmt::format("  collective  {}/{} over {} ranks\n", s.collective.operation, s.collective.algorithm, s.cluster.nodes);
  out += fmt::format("  tensor      {} fp32 per rank ({} elements), {}\n",
                     format_quantity(static_cast<double>(report.elements) * 4, UnitKind::kBytes), report.elements,
                     report.gradients_desc);
  out += fmt::format("  kernels     {}\n", report.kernel_cost_desc);
  out += fmt::format("  analytic    {}\n\n", report.analytic_desc);
  out += fmt::format("  {:<8} {:>9} {:>12} {:>12} {:>12} {:>10} {:>11}\n", "scheme", "bits/elem", "wire/rank", "time",
                     "analytic", "vs formula", "vNMSE");
  for (const auto& r : report.results) {
    const bool has = std::isfinite(r.analytic_time_s);
    out += fmt::format("  {:<8} {:>9.3f} {:>12} {:>12} {:>12} {:>10} {:>11.3e}\n", r.scheme, r.bits_per_element,
                       format_quantity(static_cast<double>(r.wire_bytes_total) / static_cast<double>(s.cluster.nodes), UnitKind::kBytes),
                       format_quantity(r.time_s, UnitKind::kTime),
                       has ? format_quantity(r.analytic_time_s, UnitKind::kTime) : "-",
                       has ? fmt::format("{:+.4f}%", display_zero(100.0 * (r.time_s / r.analytic_time_s - 1.0))) : "-",
                       r.vnmse);
  }
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv}}\n", out_dir);
  return out;
}

}  // namespace ccsim::app
