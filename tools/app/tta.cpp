#include "tools/app/tta.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "algorithms/error_study.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/units.hpp"
#include "tools/app/outputs.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kCalibrationFormat = "ccsim-convergence-calibration";

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.emplace_back();
    else if (ch != '\r') out.back() += ch;
  }
  return out;
}

// The metric column of a curves CSV: the proxy's name first, then the plain one.
std::vector<std::string> metric_columns(const std::string& metric) {
  return metric == "accuracy" ? std::vector<std::string>{"val_accuracy", "accuracy"}
                              : std::vector<std::string>{"val_loss", "loss"};
}

double parse_number(const std::string& text, bool& ok) {
  if (text == "nan" || text.empty()) return kNan;
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    ok = used == text.size() && std::isfinite(v);
    return v;
  } catch (const std::exception&) {
    ok = false;
    return kNan;
  }
}

// Reads the curves CSV into `in.curves`; problems into `diag` as "/convergence/curves: FILE:LINE: ...".
void read_curves(const std::string& file, ConvergenceInputs& in, Diagnostics& diag) {
  const std::string at = "/convergence/curves";
  std::ifstream f(file);
  std::string line;
  if (!f || !std::getline(f, line)) return diag.add(at, fmt::format("{}: cannot read a header line", file));
  const std::vector<std::string> head = split_csv_line(line);
  auto column = [&](const std::vector<std::string>& names) -> int {
    for (const std::string& n : names)
      if (auto it = std::find(head.begin(), head.end(), n); it != head.end()) return static_cast<int>(it - head.begin());
    return -1;
  };
  const int lc = column({"label"}), rc = column({"round"}), mc = column(metric_columns(in.metric));
  if (lc < 0 || rc < 0 || mc < 0)
    return diag.add(at, fmt::format("{}:1: expected columns label, round and {} (metric {}), got '{}'", file,
                                    fmt::join(metric_columns(in.metric), " or "), in.metric, line));
  for (size_t n = 2; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    bool ok = cells.size() == head.size();
    const double round = ok ? parse_number(cells[rc], ok) : kNan;
    bool value_ok = true;
    const double value = ok ? parse_number(cells[mc], value_ok) : kNan;
    if (!ok || round < 0 || std::floor(round) != round || (!value_ok && cells[mc] != "nan" && !cells[mc].empty()))
      return diag.add(at, fmt::format("{}:{}: expected {} fields with an integer round and a number (or nan), got '{}'",
                                      file, n, head.size(), line));
    algo::Curve& c = in.curves[cells[lc]];
    if (!c.rounds.empty() && static_cast<uint64_t>(round) <= c.rounds.back())
      return diag.add(at, fmt::format("{}:{}: rounds of '{}' must increase, got {} after {}", file, n, cells[lc],
                                      round, c.rounds.back()));
    c.rounds.push_back(static_cast<uint64_t>(round));
    c.values.push_back(value);
  }
}

// Reads the calibration JSON into `in.model`; problems into `diag` as "/convergence/calibration: FILE: POINTER: ...".
void read_calibration(const std::string& file, ConvergenceInputs& in, Diagnostics& diag) {
  const std::string at = "/convergence/calibration";
  json doc;
  try {
    std::ifstream f(file);
    doc = json::parse(f);
  } catch (const json::exception& e) {
    return diag.add(at, fmt::format("{}: not JSON: {}", file, e.what()));
  }
  auto bad = [&](const std::string& ptr, const std::string& want) {
    const json* v = doc.contains(json::json_pointer(ptr)) ? &doc.at(json::json_pointer(ptr)) : nullptr;
    diag.add(at, fmt::format("{}: {}: expected {}, got {}", file, ptr, want, v ? v->dump() : "nothing"));
  };
  auto number = [&](const std::string& ptr, double& out) {
    const json::json_pointer p(ptr);
    if (!doc.contains(p) || !doc.at(p).is_number() || !std::isfinite(doc.at(p).get<double>()))
      return bad(ptr, "a finite number"), false;
    out = doc.at(p).get<double>();
    return true;
  };
  if (!doc.is_object() || doc.value("format", "") != kCalibrationFormat)
    return bad("/format", fmt::format("\"{}\"", kCalibrationFormat));
  algo::ConvergenceModel m;
  m.metric = doc.value("metric", "");
  if (m.metric != "loss" && m.metric != "accuracy") return bad("/metric", "\"loss\" or \"accuracy\"");
  m.sense = m.metric == "loss" ? algo::MetricSense::kLowerIsBetter : algo::MetricSense::kHigherIsBetter;
  auto final_fit = [&](const std::string& ptr, algo::FinalFit& f) {
    return number(ptr + "/c", f.c) && number(ptr + "/d", f.d) &&
           (f.c >= 0 || (bad(ptr + "/c", "a coefficient of at least 0"), false));
  };
  if (!final_fit("/default", m.all)) return;
  if (!doc.contains("families") || !doc["families"].is_object()) return bad("/families", "an object of family fits");
  for (const auto& [name, fam] : doc["families"].items())
    if (!final_fit("/families/" + name, m.families[name])) return;
  const json* curve = doc.contains("baseline_curve") ? &doc["baseline_curve"] : nullptr;
  if (curve == nullptr || !curve->is_array() || curve->empty())
    return bad("/baseline_curve", "a non-empty array of [round, value over the final value]");
  for (size_t i = 0; i < curve->size(); ++i) {
    const json& pt = (*curve)[i];
    const std::string ptr = fmt::format("/baseline_curve/{}", i);
    if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number_unsigned() || !pt[1].is_number() ||
        !std::isfinite(pt[1].get<double>()) ||
        (!m.baseline.rounds.empty() && pt[0].get<uint64_t>() <= m.baseline.rounds.back()))
      return bad(ptr, "[round, value] with rounds increasing");
    m.baseline.rounds.push_back(pt[0].get<uint64_t>());
    m.baseline.values.push_back(pt[1].get<double>());
  }
  m.provenance = doc.contains("provenance") ? doc["provenance"].value("summary", "") : "";
  in.model = std::move(m);
}

std::vector<double> default_targets(const std::string& metric) {
  return metric == "accuracy" ? std::vector<double>{0.99, 0.995, 1.0} : std::vector<double>{1.05, 1.02, 1.0};
}

void check_sources(const ConvergenceConfig& c, const std::vector<std::string>& labels, ConvergenceInputs& in,
                   Diagnostics& diag) {
  if (!c.curves.empty()) {
    read_curves(c.curves, in, diag);
    std::vector<std::string> missing;
    for (const std::string& l : labels)
      if (!in.curves.count(l)) missing.push_back(l);
    if (diag.empty() && !missing.empty())
      diag.add("/convergence/curves", fmt::format("{}: no curve for {} (its labels: {}); run python3 -m ccsim.proxy "
                                                  "SCENARIO to write the proxy's, or add them",
                                                  c.curves, fmt::join(missing, ", "), [&] {
                                                    std::vector<std::string> have;
                                                    for (const auto& [k, v] : in.curves) have.push_back(k);
                                                    return fmt::format("{}", fmt::join(have, ", "));
                                                  }()));
    in.source_desc = fmt::format("curves {}", std::filesystem::path(c.curves).filename().string());
    return;
  }
  read_calibration(c.calibration, in, diag);
  if (!in.model) return;
  if (!c.metric.empty() && c.metric != in.model->metric)
    diag.add("/convergence/metric", fmt::format("expected the calibration's metric '{}', got '{}'", in.model->metric,
                                                c.metric));
  in.metric = in.model->metric;
  in.sense = in.model->sense;
  in.source_desc = fmt::format("calibration {}{}", std::filesystem::path(c.calibration).filename().string(),
                               in.model->provenance.empty() ? "" : " (" + in.model->provenance + ")");
}

// convergence.phases: labels and timing entries of the run, rounds increasing per label.
void check_phases(const ConvergenceConfig& c, const std::vector<std::string>& labels, ConvergenceInputs& in,
                  Diagnostics& diag) {
  auto index = [&](const std::string& l) {
    return static_cast<size_t>(std::find(labels.begin(), labels.end(), l) - labels.begin());
  };
  for (size_t i = 0; i < c.phases.size(); ++i) {
    const TimingPhase& p = c.phases[i];
    const std::string at = fmt::format("/convergence/phases/{}", i);
    const size_t who = index(p.label), as = index(p.timed_as);
    for (const auto& [key, name, found] : {std::tuple{"label", p.label, who}, std::tuple{"timed_as", p.timed_as, as}})
      if (found == labels.size())
        diag.add(fmt::format("{}/{}", at, key),
                 fmt::format("expected the label of a compression entry ({}), got '{}'", fmt::join(labels, ", "), name));
    if (who == labels.size() || as == labels.size()) continue;
    auto& list = in.phases[who];
    const uint64_t from = static_cast<uint64_t>(p.from_round);
    if (!list.empty() && from <= list.back().from) {
      diag.add(at + "/from_round", fmt::format("expected more than {} (the previous phase of '{}'), got {}",
                                               list.back().from, p.label, from));
      continue;
    }
    list.push_back({from, as, p.share});
  }
}

// convergence.proxy.params: entry labels, each with parameters its scheme takes.
void check_proxy_params(const Scenario& s, const std::vector<std::string>& labels, Diagnostics& diag) {
  for (const auto& [label, params] : s.convergence.proxy.params.items()) {
    const std::string at = "/convergence/proxy/params/" + label;
    const auto it = std::find(labels.begin(), labels.end(), label);
    if (it == labels.end()) {
      diag.add(at, fmt::format("expected the label of a compression entry ({}), got '{}'", fmt::join(labels, ", "), label));
      continue;
    }
    const CompressionConfig& cc = s.compression[static_cast<size_t>(it - labels.begin())];
    const algo::CompressorInfo* info = algo::CompressorRegistry::global().find(cc.scheme);
    if (!params.is_object()) {
      diag.add(at, fmt::format("expected an object of {} parameters, got {}", cc.scheme, params.dump()));
      continue;
    }
    if (info != nullptr) info->params.resolve(params, at, diag);
  }
}

}  // namespace

std::shared_ptr<const ConvergenceInputs> check_convergence(const Scenario& s, RunKind kind,
                                                           const std::vector<std::string>& labels, Diagnostics& diag) {
  const ConvergenceConfig& c = s.convergence;
  if (c.curves.empty() && c.calibration.empty()) return nullptr;
  const size_t before = diag.size();
  if (!c.curves.empty() && !c.calibration.empty())
    diag.add("/convergence", "expected one source of rounds-to-target, curves or calibration, got both");
  if (kind == RunKind::kCollective)
    diag.add("/convergence", "expected a training run (a workload with a trace): time-to-accuracy needs rounds");
  if (kind == RunKind::kParallel && !c.calibration.empty())
    diag.add("/convergence/calibration", "expected curves in a 3D-parallel run (a calibration needs each entry's "
                                         "data-parallel vNMSE, which these runs do not measure)");
  auto in = std::make_shared<ConvergenceInputs>();
  in->metric = c.metric.empty() ? "loss" : c.metric;
  in->sense = in->metric == "accuracy" ? algo::MetricSense::kHigherIsBetter : algo::MetricSense::kLowerIsBetter;
  in->baseline = c.baseline.empty() && !labels.empty() ? labels[0] : c.baseline;
  const auto it = std::find(labels.begin(), labels.end(), in->baseline);
  if (it == labels.end())
    diag.add("/convergence/baseline",
             fmt::format("expected the label of a compression entry ({}), got '{}'", fmt::join(labels, ", "), c.baseline));
  in->baseline_index = static_cast<size_t>(it - labels.begin());
  check_phases(c, labels, *in, diag);
  check_proxy_params(s, labels, diag);
  if (diag.size() == before) check_sources(c, labels, *in, diag);
  in->targets = c.targets.empty() ? default_targets(in->metric) : c.targets;
  for (size_t i = 0; i < in->targets.size(); ++i) {
    const double t = in->targets[i];
    const bool sensible = in->sense == algo::MetricSense::kLowerIsBetter ? t >= 1.0 : t <= 1.0;
    if (!sensible)
      diag.add(fmt::format("/convergence/targets/{}", i),
               fmt::format("expected a target {} 1 for metric {} (a fraction of the baseline's final value it may "
                           "reach), got {}",
                           in->metric == "loss" ? "at least" : "at most", in->metric, t));
  }
  return diag.size() == before ? in : nullptr;
}

namespace {

// What measure_entry_vnmse measured on, in one line.
std::string vnmse_source(const Scenario& s, const algo::ErrorReport& rep) {
  if (s.gradients.source != GradientSource::kDump)
    return fmt::format("vNMSE on {} synthetic entries per rank of the scenario's generator, after {} warm-up rounds",
                       rep.elements, s.convergence.vnmse_warmup);
  std::string steps;
  for (const algo::ErrorRow& row : rep.rows) steps += (steps.empty() ? "" : ", ") + std::to_string(row.step);
  return fmt::format("vNMSE on gradient dump {} ({} of its entries per worker{}), the mean of steps {}, each after "
                     "{} warm-up rounds",
                     std::filesystem::path(s.gradients.dump).filename().string(), rep.elements,
                     rep.sampling_note.empty() ? std::string(", all") : ", sampled in whole rows", steps,
                     s.convergence.vnmse_warmup);
}

}  // namespace

namespace {

// Entry ci's error study, as measure_entry_vnmse runs it.
algo::ErrorRequest entry_request(const LoadedScenario& loaded, size_t ci, const std::vector<double>& bits) {
  const Scenario& s = loaded.scenario;
  const RunPlan& plan = *loaded.plan;
  const CompressionConfig& cc = s.compression[ci];
  algo::ErrorRequest r;
  algo::StudyScheme scheme{plan.schemes[ci].label, cc.scheme, cc.params, json::object()};
  if (cc.controller.kind == ControllerKind::kAqgb)  // the run's mean truncation width
    scheme.params["k"] = std::clamp<int64_t>(std::llround(bits[ci]), 10, 32);
  Diagnostics diag;
  scheme.resolved = plan.schemes[ci].info->params.resolve(scheme.params, "/params", diag);
  r.schemes = {scheme};
  if (s.gradients.source == GradientSource::kDump) {
    r.dump = s.gradients.dump;
    r.steps.assign(s.gradients.steps.begin(), s.gradients.steps.end());
    r.max_elements = static_cast<uint64_t>(s.convergence.vnmse_elements);
  } else {
    r.rows = static_cast<uint64_t>(s.convergence.vnmse_elements);
    r.shape_text = std::to_string(r.rows);
    r.structure = s.gradients.synthetic;
  }
  const bool broadcast = s.sync.mode == SyncMode::kBroadcast;
  r.operation = broadcast ? "allreduce" : std::string(topo::collective_op_name(plan.schemes[ci].collective->operation));
  r.algorithm = broadcast ? "p2p" : plan.schemes[ci].collective->algorithm;
  r.ranks = plan.topology->num_ranks();
  r.seed = static_cast<uint64_t>(s.seed);
  r.warmup = static_cast<uint32_t>(s.convergence.vnmse_warmup);
  r.base.segments = static_cast<uint32_t>(s.collective.segments);
  r.base.gpus_per_node = plan.topology->gpus_per_node();
  if (!broadcast) {
    r.ddp_cap = s.sync.bucket_bytes;
    r.ddp_first = s.sync.first_bucket_bytes;
  }
  return r;
}

// Every input of entry_request's study, for the numerics cache.
json request_key(const LoadedScenario& loaded, const algo::ErrorRequest& r) {
  const algo::StudyScheme& sc = r.schemes.front();
  json key = {{"numerics", "training entry vNMSE"}, {"format", 1},
              {"scheme", {sc.label, sc.name, sc.params, sc.resolved}},
              {"dump", r.dump}, {"steps", r.steps}, {"max_elements", r.max_elements}, {"rows", r.rows},
              {"gradients", loaded.resolved.value("gradients", json())},
              {"collective", {r.operation, r.algorithm, r.ranks, r.base.segments, r.base.gpus_per_node}},
              {"seed", r.seed}, {"warmup", r.warmup}, {"ddp", {r.ddp_cap, r.ddp_first}}};
  if (!r.dump.empty()) key["files"] = file_stamps(r.dump);
  return key;
}

}  // namespace

Result<EntryVnmse> measure_entry_vnmse(const LoadedScenario& loaded, const std::vector<double>& bits,
                                       NumericsCache* cache) {
  const Scenario& s = loaded.scenario;
  EntryVnmse out;
  for (size_t ci = 0; ci < s.compression.size(); ++ci) {
    const algo::ErrorRequest r = entry_request(loaded, ci, bits);
    CCSIM_ASSIGN_OR_RETURN(const json got, cached_numerics(cache, request_key(loaded, r), [&]() -> Result<json> {
      auto rep = algo::measure_errors(r);
      if (!rep.ok()) return r.dump.empty() ? rep.status() : rep.status().with_context("/gradients/dump");
      double sum = 0;
      for (const algo::ErrorRow& row : rep->rows) sum += row.vnmse;
      const double v = rep->rows.empty() ? kNan : sum / static_cast<double>(rep->rows.size());
      return json{{"vnmse", cache_number(v)}, {"desc", vnmse_source(s, *rep)}};
    }));
    out.vnmse.push_back(cached_number(got.at("vnmse")));
    if (ci == 0) out.desc = got.at("desc").get<std::string>();
  }
  return out;
}

namespace {

// Rows of entry i from its curve.
void rows_from_curve(const ConvergenceInputs& in, const std::string& label, double round_s, double base_final,
                     TtaReport& rep) {
  const algo::Curve& c = in.curves.at(label);
  for (double t : in.targets) {
    algo::TtaRow row{label, t, algo::target_value(t, base_final), std::nullopt, round_s};
    if (auto r = algo::rounds_to_target(c, row.goal, in.sense)) row.rounds = static_cast<double>(*r);
    rep.rows.push_back(row);
  }
  for (size_t k = 0; k < c.rounds.size(); ++k)
    rep.curve.push_back({label, c.rounds[k], static_cast<double>(c.rounds[k]) * round_s, c.values[k]});
}

// Rows of entry i from the calibrated model, against the baseline entry (vNMSE vb, scheme
// `base`), which reaches every target in the proxy baseline's rounds, scaled so that it reaches its
// final metric in `baseline_rounds` when that is set.
void rows_from_model(const ConvergenceInputs& in, const std::string& label, const std::string& scheme, double round_s,
                     double v, double vb, const std::string& base, int64_t baseline_rounds, TtaReport& rep) {
  const algo::ConvergenceModel& m = *in.model;
  const std::optional<double> full = m.baseline_rounds(1.0);
  const double scale =
      baseline_rounds > 0 && full && *full > 0 ? static_cast<double>(baseline_rounds) / *full : 1.0;
  for (double t : in.targets) {
    algo::TtaRow row{label, t, kNan, std::nullopt, round_s};
    if (auto r = m.rounds(v, scheme, vb, base, t)) row.rounds = *r * scale;
    rep.rows.push_back(row);
  }
}

// Simulated seconds of an entry's first `rounds` rounds: its own round time `own` before its first
// phase; in each phase, its share of the rounds at its timing entry's round time, the rest at the
// previous phase's.
double phased_seconds(double rounds, double own, const std::vector<ConvergenceInputs::Phase>& phases,
                      const std::vector<double>& round_s) {
  double t = 0, at = 0, rate = own;
  for (const ConvergenceInputs::Phase& p : phases) {
    const double f = std::min(static_cast<double>(p.from), rounds);
    t += (f - at) * rate;
    at = f;
    rate = p.share * round_s[p.timed_as] + (1 - p.share) * rate;
  }
  return t + (rounds - at) * rate;
}

// Entries with phases: each row's round time becomes the mean over its rounds, each curve point's
// time the phases' sum.
void apply_phases(const ConvergenceInputs& in, const std::vector<std::string>& labels,
                  const std::vector<double>& round_s, TtaReport& rep) {
  for (const auto& [i, phases] : in.phases) {
    for (algo::TtaRow& row : rep.rows)
      if (row.label == labels[i] && row.rounds && *row.rounds > 0)
        row.round_time_s = phased_seconds(*row.rounds, round_s[i], phases, round_s) / *row.rounds;
    for (TtaCurvePoint& p : rep.curve)
      if (p.label == labels[i]) p.time_s = phased_seconds(static_cast<double>(p.round), round_s[i], phases, round_s);
  }
}

}  // namespace

TtaReport compute_tta(const ConvergenceInputs& in, const std::vector<std::string>& labels,
                      const std::vector<std::string>& schemes, const std::vector<double>& round_s,
                      const std::vector<double>& vnmse, int64_t baseline_rounds) {
  TtaReport rep;
  rep.source_desc = in.source_desc;
  rep.metric = in.metric;
  rep.baseline = in.baseline;
  rep.vnmse = vnmse.empty() ? std::vector<double>(labels.size(), kNan) : vnmse;
  if (in.model) {
    for (size_t i = 0; i < labels.size(); ++i)
      rows_from_model(in, labels[i], schemes[i], round_s[i], rep.vnmse[i], rep.vnmse[in.baseline_index],
                      schemes[in.baseline_index], baseline_rounds, rep);
  } else {
    const algo::Curve& base = in.curves.at(in.baseline);
    const double base_final = base.values.empty() ? kNan : base.values.back();
    for (size_t i = 0; i < labels.size(); ++i) rows_from_curve(in, labels[i], round_s[i], base_final, rep);
  }
  apply_phases(in, labels, round_s, rep);
  algo::finish_tta(rep.rows, in.baseline);
  return rep;
}

namespace {
std::string opt_num(double v, bool present) { return present ? fmt::format("{}", v) : std::string(); }

}  // namespace

std::string tta_csv(const TtaReport& r) {
  std::string out = "label,target,goal,reached,rounds,round_time_s,time_s,ratio,rounds_ratio,vnmse\n";
  const size_t per = r.rows.empty() ? 1 : r.rows.size() / std::max<size_t>(1, r.vnmse.size());
  for (size_t k = 0; k < r.rows.size(); ++k) {
    const algo::TtaRow& t = r.rows[k];
    const bool base = t.ratio > 0;
    const double v = r.vnmse[k / per];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", csv_field(t.label), t.target,
                       opt_num(t.goal, std::isfinite(t.goal)),
                       t.rounds ? "true" : "false", opt_num(t.rounds.value_or(0), t.rounds.has_value()),
                       sec(t.round_time_s), t.rounds ? sec(t.time_s) : std::string(), opt_num(t.ratio, base),
                       opt_num(t.rounds_ratio, base), std::isfinite(v) ? fmt::format("{}", v) : std::string());
  }
  return out;
}

std::string curves_csv(const TtaReport& r) {
  std::string out = "label,round,time_s,metric,value\n";
  for (const TtaCurvePoint& p : r.curve)
    out += fmt::format("{},{},{},{},{}\n", csv_field(p.label), p.round, sec(p.time_s), r.metric,
                       std::isfinite(p.value) ? fmt::format("{}", p.value) : std::string("nan"));
  return out;
}

json tta_json(const TtaReport& r) {
  json rows = json::array();
  for (const algo::TtaRow& t : r.rows)
    rows.push_back({{"label", t.label}, {"target", t.target},
                    {"goal", std::isfinite(t.goal) ? json(t.goal) : json(nullptr)}, {"reached", t.rounds.has_value()},
                    {"rounds", t.rounds ? json(*t.rounds) : json(nullptr)}, {"round_time_s", t.round_time_s},
                    {"time_s", t.rounds ? json(t.time_s) : json(nullptr)},
                    {"ratio", t.ratio > 0 ? json(t.ratio) : json(nullptr)}});
  json out = {{"source", r.source_desc}, {"metric", r.metric}, {"baseline", r.baseline}, {"rows", rows}};
  if (!r.vnmse_desc.empty()) out["vnmse_source"] = r.vnmse_desc;
  return out;
}

std::string format_tta(const TtaReport& r) {
  std::vector<double> targets;
  for (const algo::TtaRow& t : r.rows)
    if (std::find(targets.begin(), targets.end(), t.target) == targets.end()) targets.push_back(t.target);
  size_t w = 8;
  for (const algo::TtaRow& t : r.rows) w = std::max(w, t.label.size());
  std::string out = fmt::format("\n  time to accuracy  {}; targets x the final {} of {}; time relative to {}\n",
                                r.source_desc, r.metric, r.baseline, r.baseline);
  if (!r.vnmse_desc.empty()) out += fmt::format("                    {}\n", r.vnmse_desc);
  out += fmt::format("  {:<{}}", "scheme", w);
  for (double t : targets) out += fmt::format(" {:>26}", fmt::format("{:g}%", 100 * t));
  out += "\n";
  for (size_t k = 0; k < r.rows.size(); k += targets.size()) {
    out += fmt::format("  {:<{}}", r.rows[k].label, w);
    for (size_t j = 0; j < targets.size() && k + j < r.rows.size(); ++j) {
      const algo::TtaRow& t = r.rows[k + j];
      const std::string cell =
          !t.rounds ? std::string("not reached")
                    : fmt::format("{:.0f} rd {} {}", *t.rounds, format_quantity(t.time_s, UnitKind::kTime),
                                  t.ratio > 0 ? fmt::format("{:.2f}x", t.ratio) : std::string("-"));
      out += fmt::format(" {:>26}", cell);
    }
    out += "\n";
  }
  return out;
}

}  // namespace ccsim::app
