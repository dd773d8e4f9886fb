#include "tools/app/outputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "sim/base/units.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Rounding noise below 1e-9 % prints as +0.0000%, not -0.0000%.
double display_zero(double x) { return std::fabs(x) < 1e-9 ? 0.0 : x; }

std::string fmt_num(double v) { return std::isfinite(v) ? fmt::format("{}", v) : (v > 0 ? "inf" : "nan"); }

// A simulated time (or a sum or difference of them) in seconds, on the engine's picosecond grid:
// 0.35949584, not the 0.3594958400000001 that subtracting two doubles leaves.

// One run's link counters as links.csv / links_timeline.csv list them.
struct LinkCsvRun {
  std::string label;                                   // the scheme
  const std::vector<sim::LinkStats>* links = nullptr;  // per topology link
  const std::vector<std::vector<double>>* timeline = nullptr;  // per link, bytes per bin (may be empty)
  double duration_s = 0;                               // utilization = bytes / (capacity · duration)
};

// links.csv: per run and link, bytes, busy time, utilization, peak sharing.
std::string link_rows_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs) {
  std::string out = "label,link,from,to,capacity_Bps,bytes,busy_s,utilization,max_flows\n";
  for (const auto& r : runs)
    for (size_t l = 0; l < r.links->size(); ++l) {
      const LinkRow& row = rows[l];
      const sim::LinkStats& st = (*r.links)[l];
      const double util = r.duration_s > 0 ? st.bytes / (row.capacity_Bps * r.duration_s) : 0.0;
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(r.label), l, row.from, row.to, row.capacity_Bps,
                         st.bytes, sec(st.busy_s), util, st.max_flows);
    }
  return out;
}

// links_timeline.csv: per run, link and non-empty bin of width `bin`, bytes and utilization.
std::string link_timeline_csv(const std::vector<LinkRow>& rows, const std::vector<LinkCsvRun>& runs, double bin) {
  if (!(bin > 0)) return {};
  std::string out = "label,link,from,to,bin_start_s,bytes,utilization\n";
  for (const auto& r : runs)
    for (size_t l = 0; l < r.timeline->size(); ++l)
      for (size_t b = 0; b < (*r.timeline)[l].size(); ++b) {
        const double bytes = (*r.timeline)[l][b];
        if (bytes <= 0) continue;
        const LinkRow& row = rows[l];
        out += fmt::format("{},{},{},{},{},{},{}\n", csv_field(r.label), l, row.from, row.to,
                           sec(static_cast<double>(b) * bin), bytes, bytes / (row.capacity_Bps * bin));
      }
  return out;
}

// The files every kind of run writes around its own: the resolved scenario and summary first, the
// link counters last (and their timeline when asked), all into `dir` at once.
Status write_run_folder(const std::string& dir, const LoadedScenario& loaded, const json& summary,
                        std::vector<std::pair<std::string, std::string>> own, const std::vector<LinkRow>& rows,
                        const std::vector<LinkCsvRun>& links) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  const fs::path d(dir);
  std::vector<std::pair<fs::path, std::string>> files = {{d / "scenario.resolved.json", loaded.resolved.dump(2) + "\n"},
                                                         {d / "summary.json", summary.dump(2) + "\n"}};
  for (auto& [name, content] : own) files.emplace_back(d / name, std::move(content));
  files.emplace_back(d / "links.csv", link_rows_csv(rows, links));
  const double bin = loaded.scenario.outputs.link_timeline_bin_s;
  if (bin > 0) files.emplace_back(d / "links_timeline.csv", link_timeline_csv(rows, links, bin));
  return write_files_atomically(files);
}

// tta.csv and curves.csv, with a convergence block.
void add_tta_files(const std::optional<TtaReport>& tta, std::vector<std::pair<std::string, std::string>>& own) {
  if (!tta) return;
  own.emplace_back("tta.csv", tta_csv(*tta));
  if (!tta->curve.empty()) own.emplace_back("curves.csv", curves_csv(*tta));
}

// The outputs line's extra files, with a convergence block.
std::string tta_files(const std::optional<TtaReport>& tta) {
  return !tta ? std::string() : tta->curve.empty() ? std::string(",tta.csv") : std::string(",tta.csv,curves.csv");
}

// controller.csv: per run, its decisions; `who` names the column of ControlDecision::worker.
std::string decisions_csv(const std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>>& runs,
                          const std::string& who) {
  std::string out = fmt::format("label,round,{},layer,time_s,controller,quantity,value,detail\n", who);
  for (const auto& [scheme, decisions] : runs)
    for (const auto& d : *decisions)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(scheme), d.round, d.worker, d.layer, sec(d.time_s),
                         d.controller, d.quantity, d.value, csv_field(d.detail));
  return out;
}

}  // namespace

std::string sec(double s) { return std::isfinite(s) ? fmt::format("{}", std::round(s * 1e12) / 1e12) : fmt_num(s); }

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

// ---- collective runs ----------------------------------------------------------------------------

namespace {
// A serving pass's speedup: the first entry's latency over `r`'s.
double serving_speedup(const RunReport& report, const SchemeResult& r) {
  return report.results.front().serving_latency_s / r.serving_latency_s;
}
}  // namespace

json summary_json(const RunReport& report) {
  const Scenario& s = report.loaded.scenario;
  json results = json::array();
  for (const auto& r : report.results) {
    json j = {{"label", r.label},
         {"scheme", r.scheme},
              {"params", r.params},
              {"bits_per_element", r.bits_per_element},
              {"payload_bits_per_element", algo::RoundBytes::bits(r.bytes.payload, report.elements)},
              {"metadata_bits_per_element", algo::RoundBytes::bits(r.bytes.metadata, report.elements)},
              {"plan_bits_per_element", algo::RoundBytes::bits(r.bytes.plan, report.elements)},
              {"tensor_wire_bytes", r.tensor_wire_bytes},
              {"plan_bytes_per_rank", r.bytes.plan},
              {"plan_time_s", r.timing.plan_time_s},
              {"wire_bytes_total", r.timing.wire_bytes},
              {"transfers", r.timing.transfers},
              {"time_s", r.timing.time_s},
              {"time_min_s", r.timing.time_min_s},
              {"kernel_time_s", r.timing.kernel_time_s},
              {"round_kernel_time_s", r.timing.round_kernel_time_s},
              {"kernel_cost", r.kernel_cost},
              {"events", r.events},
              {"vnmse", std::isnan(r.vnmse) ? json(nullptr) : std::isfinite(r.vnmse) ? json(r.vnmse) : json("inf")},
              {"vnmse_max_rank", std::isnan(r.vnmse_max_rank) ? json(nullptr)
                                 : std::isfinite(r.vnmse_max_rank) ? json(r.vnmse_max_rank)
                                                                   : json("inf")},
              {"unbiased", r.unbiased}};
    if (r.algorithm != s.collective.algorithm) j["algorithm"] = r.algorithm;  // the entry's own
    if (s.serving.layers > 0) {
      j["serving_latency_s"] = r.serving_latency_s;
      j["serving_speedup"] = serving_speedup(report, r);
    }
    if (std::isfinite(r.analytic_time_s)) {
      j["analytic_time_s"] = r.analytic_time_s;
      if (std::isfinite(r.vs_analytic)) j["time_vs_analytic"] = r.vs_analytic;
    }
    results.push_back(std::move(j));
  }
  json out{{"ccsim_version", ccsim_version()},
              {"scenario", s.name},
              {"seed", s.seed},
              {"ranks", report.ranks},
              {"topology", report.topology_desc},
              {"collective", fmt::format("{}/{}", topo::collective_op_name(s.collective.operation),
                                         s.collective.algorithm)},
              {"group", report.group_desc},
              {"group_size", report.group_size},
              {"groups", report.groups},
              {"elements", report.elements},
              {"tensor_bytes", report.elements * 4},
              {"gradients", report.gradients_desc},
              {"numerics", report.numerics_note},
              {"vnmse_elements", report.vnmse_elements},
              {"numerics_memory_estimate_bytes", report.loaded.plan->gradients.sample_need_bytes},
              {"kernel_cost", report.kernel_cost_desc},
              {"analytic_model", report.analytic_desc},
              {"results", results}};
  if (s.serving.layers > 0)
    out["serving"] = {{"layers", s.serving.layers}, {"collectives_per_layer", s.serving.collectives_per_layer},
                      {"layer_compute_s", s.serving.layer_compute_s}, {"baseline", report.results.front().label}};
  return out;
}

std::string results_csv(const RunReport& report) {
  const Scenario& s = report.loaded.scenario;
  std::string out =
      "scenario,label,scheme,params,ranks,group_size,groups,operation,algorithm,elements,bits_per_element,"
      "payload_bits_per_element,metadata_bits_per_element,plan_bits_per_element,tensor_wire_bytes,plan_bytes_per_rank,"
      "wire_bytes_total,transfers,time_s,time_min_s,plan_time_s,analytic_time_s,time_vs_analytic,kernel_time_s,"
      "round_kernel_time_s,vnmse,vnmse_max_rank,vnmse_elements,unbiased";
  const bool serving = s.serving.layers > 0;
  out += serving ? ",serving_latency_s,serving_speedup\n" : "\n";
  auto num = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{}", x); };
  const uint64_t n = report.elements;
  for (const auto& r : report.results) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},", s.name, csv_field(r.label), r.scheme,
                       csv_field(r.params.dump()), report.ranks, report.group_size, report.groups,
                       topo::collective_op_name(s.collective.operation), r.algorithm, n);
    out += fmt::format("{},{},{},{},{},{},", r.bits_per_element, algo::RoundBytes::bits(r.bytes.payload, n),
                       algo::RoundBytes::bits(r.bytes.metadata, n), algo::RoundBytes::bits(r.bytes.plan, n),
                       r.tensor_wire_bytes, r.bytes.plan);
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.timing.wire_bytes, r.timing.transfers,
                       sec(r.timing.time_s), sec(r.timing.time_min_s), sec(r.timing.plan_time_s),
                       num(r.analytic_time_s), num(r.vs_analytic), sec(r.timing.kernel_time_s),
                       sec(r.timing.round_kernel_time_s), num(r.vnmse),
                       num(r.vnmse_max_rank), report.vnmse_elements, r.unbiased ? "true" : "false");
    if (serving) out.insert(out.size() - 1, fmt::format(",{},{}", sec(r.serving_latency_s), serving_speedup(report, r)));
  }
  return out;
}

namespace {
std::vector<LinkCsvRun> link_runs(const RunReport& report) {
  std::vector<LinkCsvRun> runs;
  for (const auto& r : report.results) runs.push_back({r.label, &r.links, &r.timeline, r.timing.time_s});
  return runs;
}
}  // namespace

std::string links_csv(const RunReport& report) { return link_rows_csv(report.link_rows, link_runs(report)); }

std::string links_timeline_csv(const RunReport& report) {
  return link_timeline_csv(report.link_rows, link_runs(report), report.loaded.scenario.outputs.link_timeline_bin_s);
}

Status write_outputs(const RunReport& report, const std::string& dir) {
  return write_run_folder(dir, report.loaded, summary_json(report), {{"results.csv", results_csv(report)}},
                          report.link_rows, link_runs(report));
}

std::string format_summary(const RunReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out += fmt::format("ccsim {} | scenario {} | seed {}\n", ccsim_version(), s.name, s.seed);
  out += fmt::format("  cluster     {}\n", report.topology_desc);
  out += fmt::format("  collective  {}/{} over {}\n", topo::collective_op_name(s.collective.operation),
                     s.collective.algorithm, report.group_desc);
  out += fmt::format("  tensor      {} fp32 per rank ({} elements), {}\n",
                     format_quantity(static_cast<double>(report.elements) * 4, UnitKind::kBytes), report.elements,
                     report.gradients_desc);
  out += fmt::format("  numerics    {}\n", report.numerics_note);
  out += fmt::format("  kernels     {}\n", report.kernel_cost_desc);
  out += fmt::format("  analytic    {}\n\n", report.analytic_desc);
  size_t w = 8;
  for (const auto& r : report.results) w = std::max(w, r.label.size());
  out += fmt::format("  {:<{}} {:>9} {:>12} {:>12} {:>12} {:>12} {:>10} {:>11} {:>12} {:>12}\n", "scheme", w,
                     "bits/elem", "wire/rank", "time", "meta phase", "analytic", "vs formula", "vNMSE", "kernels",
                     "round ops");
  for (const auto& r : report.results) {
    const bool has = std::isfinite(r.analytic_time_s);
    out += fmt::format(
        "  {:<{}} {:>9.3f} {:>12} {:>12} {:>12} {:>12} {:>10} {:>11} {:>12} {:>12}\n", r.label, w, r.bits_per_element,
        format_quantity(static_cast<double>(r.timing.wire_bytes) / static_cast<double>(report.ranks), UnitKind::kBytes),
        format_quantity(r.timing.time_s, UnitKind::kTime),
        r.bytes.plan > 0 ? format_quantity(r.timing.plan_time_s, UnitKind::kTime) : "-",
        has ? format_quantity(r.analytic_time_s, UnitKind::kTime) : "-",
        std::isfinite(r.vs_analytic) ? fmt::format("{:+.4f}%", display_zero(100.0 * r.vs_analytic)) : "-",
        std::isnan(r.vnmse) ? std::string("-") : fmt::format("{:.3e}", r.vnmse),
        format_quantity(r.timing.kernel_time_s, UnitKind::kTime), format_quantity(r.timing.round_kernel_time_s, UnitKind::kTime));
  }
  for (const auto& r : report.results)
    if (r.algorithm != s.collective.algorithm)
      out += fmt::format("  {:<{}} collective: {}/{} (its own algorithm)\n", r.label, w,
                         topo::collective_op_name(s.collective.operation), r.algorithm);
  if (s.cluster.gpu.kernel_cost == sim::KernelCostMode::kProfile)
    for (const auto& r : report.results) out += fmt::format("  {:<{}} kernels: {}\n", r.label, w, r.kernel_cost);
  if (s.serving.layers > 0) {
    out += fmt::format("\n  serving     {} layers x ({} of compute + {} x the collective), speedup over {}\n",
                       s.serving.layers, format_quantity(s.serving.layer_compute_s, UnitKind::kTime),
                       s.serving.collectives_per_layer, report.results.front().label);
    for (const auto& r : report.results)
      out += fmt::format("  {:<{}} {:>12} {:>8.3f}x\n", r.label, w, format_quantity(r.serving_latency_s, UnitKind::kTime),
                         serving_speedup(report, r));
  }
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,links.csv{}}}\n", out_dir,
                     s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

// ---- data-parallel training runs ------------------------------------------------------------------

namespace {
// A training result's part of its bits per element: 0 payload, 1 metadata, 2 metadata phase (AQGB's
// broadcast, which has no bucket bytes: all payload).
double part_bits(const TrainingResult& r, int part) {
  const uint64_t total = r.bytes.total();
  if (total == 0) return part == 0 ? r.bits_per_element : 0.0;
  const uint64_t bytes = part == 0 ? r.bytes.payload : part == 1 ? r.bytes.metadata : r.bytes.plan;
  return r.bits_per_element * static_cast<double>(bytes) / static_cast<double>(total);
}
}  // namespace

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
    results.push_back(
        {{"label", r.label},
         {"scheme", r.scheme},
         {"params", r.params},
         {"sync", r.sync_desc},
         {"kernel_cost", r.kernel_cost},
         {"bits_per_element", r.bits_per_element},
         {"payload_bits_per_element", part_bits(r, 0)},
         {"metadata_bits_per_element", part_bits(r, 1)},
         {"plan_bits_per_element", part_bits(r, 2)},
         {"rounds_completed", r.summary.rounds_completed},
         {"simulated_s", r.summary.end_s},
         {"measured_rounds", r.summary.measured_rounds},
         {"round_s", r.summary.round_s},
         {"throughput_rounds_per_s", r.summary.round_s > 0 ? json(1.0 / r.summary.round_s) : json(nullptr)},
         {"compute_s", r.summary.compute_s},
         {"exposed_comm_s", r.summary.exposed_comm_s},
         {"compression_overhead_s", r.summary.compression_overhead_s},
         {"compression_s", r.summary.compression_s},
         {"t_wait_s", r.summary.wait_s},
         {"t_wait_normalized", r.summary.compute_s > 0 ? json(r.summary.wait_s / r.summary.compute_s) : json(nullptr)},
         {"t_comm_s", r.summary.comm_s},
         {"t_overlap_s", r.summary.overlap_s},
         {"row_cluster_mean", num(r.summary.row_cluster)},
         {"rounds_without_wait", r.summary.rounds_without_wait},
         {"uplink_utilization", r.summary.uplink_utilization},
         {"wire_bytes_per_round", r.wire_bytes_per_round},
         {"grad_comm_s", r.grad_comm_s},
         {"weight_comm_s", r.weight_comm_s}});
  }
  out["results"] = std::move(results);
  if (report.tta) out["tta"] = tta_json(*report.tta);
  return out;
}

namespace {

std::string training_results_csv(const TrainingReport& report) {
  std::string out =
      "label,scheme,params,bits_per_element,payload_bits_per_element,metadata_bits_per_element,plan_bits_per_element,"
      "rounds_completed,simulated_s,round_s,throughput_rounds_per_s,compute_s,exposed_comm_s,compression_overhead_s,"
      "t_wait_s,t_wait_normalized,t_overlap_s,row_cluster_mean,uplink_utilization,wire_bytes_per_round,grad_comm_s,"
      "weight_comm_s\n";
  for (const auto& r : report.results)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.label),
                       r.scheme, csv_field(r.params.dump()), r.bits_per_element, part_bits(r, 0),
                       part_bits(r, 1), part_bits(r, 2),
                       r.summary.rounds_completed, sec(r.summary.end_s), sec(r.summary.round_s),
                       r.summary.round_s > 0 ? fmt_num(1.0 / r.summary.round_s) : "nan", sec(r.summary.compute_s),
                       sec(r.summary.exposed_comm_s), sec(r.summary.compression_overhead_s), sec(r.summary.wait_s),
                       r.summary.compute_s > 0 ? fmt_num(r.summary.wait_s / r.summary.compute_s) : "nan",
                       sec(r.summary.overlap_s), fmt_num(r.summary.row_cluster), r.summary.uplink_utilization,
                       r.wire_bytes_per_round, sec(r.grad_comm_s), sec(r.weight_comm_s));
  return out;
}

std::string rounds_csv(const TrainingReport& report) {
  std::string out =
      "label,round,worker,factor,start_s,end_s,duration_s,compute_s,t_wait_s,t_comm_s,t_overlap_s,row,compression_s,"
      "compression_overhead_s,exposed_comm_s\n";
  for (const auto& res : report.results)
    for (const auto& r : res.summary.rounds)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(res.label), r.round, r.worker,
                         r.factor, sec(r.start_s), sec(r.end_s), sec(r.duration()), sec(r.compute_s), sec(r.wait_s),
                         sec(r.comm_s), sec(r.overlap_s), fmt_num(r.row()), sec(r.compression_s),
                         sec(r.compression_overhead_s), sec(r.exposed_comm_s));
  return out;
}

std::string cluster_rounds_csv(const TrainingReport& report) {
  std::string out = "label,round,complete_s,duration_max_s,t_wait_max_s,t_overlap_min_s,row_cluster\n";
  for (const auto& res : report.results)
    for (const auto& c : res.summary.cluster_rounds)
      out += fmt::format("{},{},{},{},{},{},{}\n", csv_field(res.label), c.round, sec(c.complete_s),
                         sec(c.duration_max_s), sec(c.wait_max_s), sec(c.overlap_min_s), fmt_num(c.row));
  return out;
}

std::string controller_csv(const TrainingReport& report) {
  std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>> runs;
  for (const auto& res : report.results) runs.emplace_back(res.label, &res.decisions);
  return decisions_csv(runs, "worker");
}

std::string buckets_csv(const TrainingReport& report) {
  std::string out = "label,round,bucket,ready_s,start_s,end_s,gradient_s,weights_s,wire_bytes\n";
  for (const auto& res : report.results)
    for (const auto& b : res.buckets)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(res.label), b.round, b.bucket, sec(b.ready_s),
                         sec(b.start_s), sec(b.end_s), sec(b.time_except("weights")), sec(b.time_in("weights")),
                         b.wire_bytes);
  return out;
}

std::string tenants_csv(const TrainingReport& report) {
  std::string out = "label,tenant,iterations,bytes\n";
  for (const auto& res : report.results)
    for (const auto& t : res.tenants)
      out += fmt::format("{},{},{},{}\n", csv_field(res.label), t.name, t.iterations, t.bytes);
  return out;
}

}  // namespace

Status write_training_outputs(const TrainingReport& report, const std::string& dir) {
  std::vector<LinkCsvRun> links;
  for (const auto& r : report.results) links.push_back({r.label, &r.links, &r.timeline, r.summary.end_s});
  std::vector<std::pair<std::string, std::string>> own = {{"results.csv", training_results_csv(report)},
                                                          {"rounds.csv", rounds_csv(report)},
                                                          {"rounds_cluster.csv", cluster_rounds_csv(report)},
                                                          {"controller.csv", controller_csv(report)},
                                                          {"buckets.csv", buckets_csv(report)},
                                                          {"tenants.csv", tenants_csv(report)}};
  add_tta_files(report.tta, own);
  return write_run_folder(dir, report.loaded, training_summary_json(report), std::move(own), report.link_rows, links);
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
  for (const auto& r : report.results) w = std::max(w, r.label.size());
  out +=
      fmt::format("  {:<{}} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>6}\n", "scheme", w, "bits/elem",
                  "rounds", "round", "compute", "exposed", "compress", "T_wait", "T_wait/c", "ROW", "util");
  for (const auto& r : report.results) {
    out += fmt::format(
        "  {:<{}} {:>9.3f} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8.3f} {:>7} {:>5.1f}%\n", r.label, w,
        r.bits_per_element, r.summary.rounds_completed, format_quantity(r.summary.round_s, UnitKind::kTime),
        format_quantity(r.summary.compute_s, UnitKind::kTime),
        format_quantity(r.summary.exposed_comm_s, UnitKind::kTime),
        format_quantity(r.summary.compression_overhead_s, UnitKind::kTime),
        format_quantity(r.summary.wait_s, UnitKind::kTime),
        r.summary.compute_s > 0 ? r.summary.wait_s / r.summary.compute_s : 0.0,
        std::isfinite(r.summary.row_cluster) ? fmt::format("{:.3f}", r.summary.row_cluster) : std::string("inf"),
        100.0 * r.summary.uplink_utilization);
  }
  for (const auto& r : report.results) {
    out += fmt::format("  {:<{}} sync: {}\n", r.label, w, r.sync_desc);
    if (s.cluster.gpu.kernel_cost == sim::KernelCostMode::kProfile)
      out += fmt::format("  {:<{}} kernels: {}\n", "", w, r.kernel_cost);
    if (s.sync.mode != SyncMode::kBroadcast)
      out += fmt::format("  {:<{}}       per round: gradient collective {}{}\n", "", w,
                         format_quantity(r.grad_comm_s, UnitKind::kTime),
                         s.sync.mode == SyncMode::kSharded
                             ? fmt::format(", weight all-gather {}", format_quantity(r.weight_comm_s, UnitKind::kTime))
                             : std::string());
  }
  if (report.tta) out += format_tta(*report.tta);
  out +=
      fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,rounds.csv,rounds_cluster.csv,"
                  "controller.csv,buckets.csv,tenants.csv{},links.csv{}}}\n",
                  out_dir, tta_files(report.tta), s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

// ---- 3D-parallel training runs ----------------------------------------------------------------------

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
    results.push_back({{"label", r.label},
         {"scheme", r.scheme},
                       {"sync", r.sync_desc},
                       {"kernel_cost", r.kernel_cost},
                       {"rounds_completed", r.summary.rounds_completed},
                       {"measured_rounds", r.summary.measured_rounds},
                       {"round_s", r.summary.round_s},
                       {"compute_s", r.summary.compute_s},
                       {"exposed_comm_s", r.summary.exposed_comm_s},
                       {"wire_bytes_per_round", r.summary.wire_bytes_per_round},
                       {"stage_sync_start_s", r.summary.stage_start_s},
                       {"stage_sync_s", r.summary.stage_sync_s},
                       {"stage_exposed_s", r.summary.stage_exposed_s},
                       {"stage_rank", r.summary.stage_rank}});
  out["results"] = std::move(results);
  if (report.tta) out["tta"] = tta_json(*report.tta);
  return out;
}

namespace {

std::string parallel_results_csv(const ParallelReport& report) {
  std::string out = "label,scheme,rounds_completed,round_s,compute_s,exposed_comm_s,wire_bytes_per_round\n";
  for (const auto& r : report.results)
    out += fmt::format("{},{},{},{},{},{},{}\n", csv_field(r.label), r.scheme, r.summary.rounds_completed,
                       sec(r.summary.round_s), sec(r.summary.compute_s), sec(r.summary.exposed_comm_s),
                       r.summary.wire_bytes_per_round);
  return out;
}

std::string stages_csv(const ParallelReport& report) {
  std::string out = "label,round,stage,backward_end_s,sync_start_s,sync_end_s,sync_s,exposed_s,rank,wire_bytes,"
                    "compute_busy_s,micro_backward_s\n";
  for (const auto& res : report.results)
    for (const auto& row : res.summary.stages) {
      const auto& r = row.record;
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(res.label), r.round, r.stage,
                         sec(r.backward_end_s), sec(r.sync_start_s), sec(r.sync_end_s),
                         sec(r.sync_end_s - r.sync_start_s), sec(row.exposed_s),
                         row.rank >= 0 ? fmt::format("{}", row.rank) : std::string(), r.sync_wire_bytes,
                         sec(r.compute_busy_s), sec(r.micro_backward_s));
    }
  return out;
}

std::string parallel_rounds_csv(const ParallelReport& report) {
  std::string out = "label,round,start_s,backward_end_s,sync_end_s,end_s,duration_s,exposed_comm_s,compute_s\n";
  for (const auto& res : report.results)
    for (const auto& r : res.summary.rounds)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(res.label), r.round, sec(r.start_s),
                         sec(r.backward_end_s), sec(r.sync_end_s), sec(r.end_s), sec(r.duration()),
                         sec(r.exposed_comm_s), sec(r.compute_s));
  return out;
}

}  // namespace

Status write_parallel_outputs(const ParallelReport& report, const std::string& dir) {
  std::vector<LinkCsvRun> links;
  std::vector<std::pair<std::string, const std::vector<sim::ControlDecision>*>> decisions;
  for (const auto& r : report.results) {
    links.push_back({r.label, &r.links, &r.timeline, r.summary.end_s});
    decisions.emplace_back(r.label, &r.decisions);
  }
  std::vector<std::pair<std::string, std::string>> own = {{"results.csv", parallel_results_csv(report)},
                                                          {"stages.csv", stages_csv(report)},
                                                          {"rounds.csv", parallel_rounds_csv(report)},
                                                          {"controller.csv", decisions_csv(decisions, "stage")}};
  add_tta_files(report.tta, own);
  return write_run_folder(dir, report.loaded, parallel_summary_json(report), std::move(own), report.link_rows, links);
}

std::string format_parallel_summary(const ParallelReport& report, const std::string& out_dir) {
  const Scenario& s = report.loaded.scenario;
  std::string out;
  out +=
      fmt::format("ccsim {} | scenario {} | seed {} | 3D-parallel training rounds\n", ccsim_version(), s.name, s.seed);
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
  for (const auto& r : report.results) w = std::max(w, r.label.size());
  out +=
      fmt::format("  {:<{}} {:>10} {:>10} {:>10}   per stage: sync start (from round start) / sync / exposed / rank\n",
                  "scheme", w, "round", "compute", "exposed");
  for (const auto& r : report.results) {
    std::vector<std::string> st;
    for (size_t i = 0; i < r.summary.stage_sync_s.size(); ++i)
      st.push_back(
          fmt::format("{}: {} / {} / {}{}", i, format_quantity(r.summary.stage_start_s[i], UnitKind::kTime),
                      format_quantity(r.summary.stage_sync_s[i], UnitKind::kTime),
                      format_quantity(r.summary.stage_exposed_s[i], UnitKind::kTime),
                      r.summary.stage_rank[i] > 0 ? fmt::format(" / {:.1f}", r.summary.stage_rank[i]) : std::string()));
    out += fmt::format("  {:<{}} {:>10} {:>10} {:>10}   {}\n", r.label, w,
                       format_quantity(r.summary.round_s, UnitKind::kTime),
                       format_quantity(r.summary.compute_s, UnitKind::kTime),
                       format_quantity(r.summary.exposed_comm_s, UnitKind::kTime), fmt::join(st, "; "));
  }
  for (const auto& r : report.results) {
    out += fmt::format("  {:<{}} sync: {}\n", r.label, w, r.sync_desc);
    if (s.cluster.gpu.kernel_cost == sim::KernelCostMode::kProfile)
      out += fmt::format("  {:<{}} kernels: {}\n", "", w, r.kernel_cost);
  }
  if (report.tta) out += format_tta(*report.tta);
  out += fmt::format("\n  outputs     {}/{{scenario.resolved.json,summary.json,results.csv,stages.csv,rounds.csv,"
                     "controller.csv{},links.csv{}}}\n",
                     out_dir, tta_files(report.tta), s.outputs.link_timeline_bin_s > 0 ? ",links_timeline.csv" : "");
  return out;
}

}  // namespace ccsim::app
