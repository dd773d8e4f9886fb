#include "tools/app/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "sim/base/diagnostics.hpp"
#include "sim/base/json_text.hpp"
#include "tools/app/outputs.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/run_training.hpp"

namespace ccsim::app {
namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxRuns = 100000;
constexpr const char* kPlanFile = "sweep.plan.json";

Result<std::string> read_text(const std::string& file, const char* what) {
  const std::string why = why_not_a_file(file);
  if (why == "not found") return not_found(fmt::format("{}: no such {}", file, what));
  if (!why.empty()) return invalid_argument(fmt::format("{}: expected a {}, found {}", file, what, why));
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return io_error(fmt::format("{}: cannot read", file));
  return ss.str();
}

// One axis: its path and its values (a zip group's axes share their length and index).
struct Axis {
  std::string path;
  std::vector<json> values;
  size_t group = 0;  ///< axes of one group vary together
};

// Axes of `obj` (found at `at`) into `axes`, all in `group`; problems into `diag`.
void read_axes(const ojson& obj, const std::string& at, size_t group, std::vector<Axis>& axes, Diagnostics& diag) {
  if (!obj.is_object()) return diag.add(at, fmt::format("expected an object of PATH: [values], got {}", obj.dump()));
  for (const auto& [path, values] : obj.items()) {
    const std::string where = at + "/" + json_pointer_escape(path);
    if (!values.is_array() || values.empty()) {
      diag.add(where, fmt::format("expected a non-empty array of values, got {}", values.dump()));
      continue;
    }
    if (std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return a.path == path; })) {
      diag.add(where, "this path is already an axis of the sweep");
      continue;
    }
    Axis a{path, {}, group};
    for (const auto& v : values) a.values.push_back(json::parse(v.dump()));
    axes.push_back(std::move(a));
  }
}

// The zip groups: one object, or an array of objects; each group's lists of one length.
void read_zip(const ojson& zip, size_t first_group, std::vector<Axis>& axes, Diagnostics& diag) {
  std::vector<std::pair<std::string, const ojson*>> groups;
  if (zip.is_array()) {
    for (size_t i = 0; i < zip.size(); ++i) groups.emplace_back(fmt::format("/zip/{}", i), &zip[i]);
  } else {
    groups.emplace_back("/zip", &zip);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t before = axes.size();
    read_axes(*groups[g].second, groups[g].first, first_group + g, axes, diag);
    for (size_t i = before + 1; i < axes.size(); ++i)
      if (axes[i].values.size() != axes[before].values.size())
        diag.add(groups[g].first + "/" + json_pointer_escape(axes[i].path),
                 fmt::format("expected {} values (as {} in this zip group), got {}", axes[before].values.size(),
                             axes[before].path, axes[i].values.size()));
  }
}

// A string value naming a file or folder relative to the sweep file's folder, re-expressed
// relative to the base scenario's folder (where the run resolves it).
json rebase_path(const json& v, const fs::path& sweep_dir, const fs::path& base_dir) {
  if (!v.is_string() || sweep_dir == base_dir) return v;
  const fs::path p(v.get<std::string>());
  std::error_code ec;
  if (p.empty() || p.is_absolute() || !fs::exists(sweep_dir / p, ec)) return v;
  return fs::relative(sweep_dir / p, base_dir.empty() ? fs::path(".") : base_dir, ec).string();
}

// The runs: groups in order, the first varying slowest.
std::vector<SweepRun> expand(const std::vector<Axis>& axes) {
  std::vector<size_t> sizes;  // per group
  for (const Axis& a : axes) {
    if (a.group >= sizes.size()) sizes.resize(a.group + 1, 0);
    sizes[a.group] = a.values.size();
  }
  size_t total = 1;
  for (size_t n : sizes) total *= n;
  const size_t width = std::max<size_t>(4, std::to_string(total > 0 ? total - 1 : 0).size());
  std::vector<SweepRun> runs(total);
  for (size_t k = 0; k < total; ++k) {
    std::vector<size_t> index(sizes.size());
    size_t rest = k;
    for (size_t g = sizes.size(); g-- > 0;) {
      index[g] = rest % sizes[g];
      rest /= sizes[g];
    }
    runs[k].id = fmt::format("{:0{}}", k, width);
    for (const Axis& a : axes) runs[k].values.push_back(a.values[index[a.group]]);
  }
  return runs;
}

// The base scenario: a file (relative to the sweep file's folder) or an inline object.
void read_base(const ojson& doc, const fs::path& sweep_dir, Sweep& sw, Diagnostics& diag) {
  if (!doc.contains("base")) return diag.add("", "missing 'base': a scenario file or an inline scenario object");
  const ojson& base = doc["base"];
  if (base.is_object()) {
    sw.base = json::parse(base.dump());
    sw.base_dir = sweep_dir.string();
    return;
  }
  if (!base.is_string()) return diag.add("/base", fmt::format("expected a scenario file or object, got {}", base.dump()));
  const fs::path file = sweep_dir / base.get<std::string>();
  Result<std::string> text = read_text(file.string(), "scenario file");
  if (!text.ok()) return diag.add("/base", text.status());
  Result<json> parsed = parse_json_text(*text, file.string());
  if (!parsed.ok()) return diag.add("/base", parsed.status());
  sw.base = std::move(*parsed);
  sw.base_dir = file.parent_path().string();
}

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

fs::path run_dir(const std::string& dir, const SweepRun& run) { return fs::path(dir) / "runs" / run.id; }

json plan_json(const Sweep& sw) {
  json runs = json::array();
  for (const SweepRun& r : sw.runs) runs.push_back({{"id", r.id}, {"values", r.values}});
  json set = json::array();
  for (const auto& [path, value] : sw.set) set.push_back({path, value});
  return {{"format", 1}, {"name", sw.name}, {"columns", sw.columns}, {"base", sw.base}, {"set", set}, {"runs", runs}};
}

}  // namespace

Result<Sweep> load_sweep(const std::string& file) {
  CCSIM_ASSIGN_OR_RETURN(const std::string text, read_text(file, "sweep file"));
  CCSIM_RETURN_IF_ERROR(parse_json_text(text, file).status());
  const ojson doc = ojson::parse(text);  // parse_json_text accepted it; this keeps the axes' order
  Diagnostics diag;
  if (!doc.is_object()) {
    diag.add("", fmt::format("expected a sweep object {{\"base\", \"axes\", \"zip\"}}, got {}", doc.dump()));
    return diag.to_status(file);
  }
  static const std::vector<std::string> kKeys = {"name", "base", "set", "axes", "zip", "out"};
  for (const auto& [key, value] : doc.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end()) continue;
    const std::string near = closest_match(key, kKeys);
    diag.add("/" + json_pointer_escape(key), fmt::format("unknown key '{}'{}; valid: name, base, set, axes, zip, out", key,
                                                         near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
  }
  Sweep sw;
  sw.file = file;
  const fs::path sweep_dir = fs::path(file).parent_path();
  sw.dir = sweep_dir.string();
  sw.name = doc.contains("name") && doc["name"].is_string() ? doc["name"].get<std::string>()
                                                             : fs::path(file).stem().string();
  if (doc.contains("name") && !doc["name"].is_string()) diag.add("/name", "expected a string");
  if (doc.contains("out") && !doc["out"].is_string()) diag.add("/out", "expected a folder name");
  sw.out_dir = doc.contains("out") && doc["out"].is_string() ? doc["out"].get<std::string>() : "out/" + sw.name;
  read_base(doc, sweep_dir, sw, diag);
  if (doc.contains("set")) {
    if (!doc["set"].is_object()) diag.add("/set", fmt::format("expected an object of PATH: value, got {}", doc["set"].dump()));
    else
      for (const auto& [path, value] : doc["set"].items()) sw.set.emplace_back(path, json::parse(value.dump()));
  }
  std::vector<Axis> axes;
  if (doc.contains("axes")) read_axes(doc["axes"], "/axes", 0, axes, diag);
  const size_t groups = axes.size();
  for (size_t i = 0; i < axes.size(); ++i) axes[i].group = i;
  if (doc.contains("zip")) read_zip(doc["zip"], groups, axes, diag);
  CCSIM_RETURN_IF_ERROR(diag.to_status(file));
  for (const Axis& a : axes) sw.columns.push_back(a.path);
  std::map<size_t, size_t> group_sizes;
  for (const Axis& a : axes) group_sizes[a.group] = a.values.size();
  double total = 1;  // counted before the runs are made: a product of long axes can be astronomical
  for (const auto& [group, n] : group_sizes) total *= static_cast<double>(n);
  if (total > static_cast<double>(kMaxRuns))
    return invalid_argument(fmt::format("{}: the axes make {:.0f} runs, more than {}", file, total, kMaxRuns));
  sw.runs = expand(axes);
  return sw;
}

std::string sweep_run_desc(const Sweep& sw, size_t k) {
  std::string vals;
  for (size_t c = 0; c < sw.columns.size(); ++c)
    vals += fmt::format("{}{}={}", c ? ", " : "", sw.columns[c], sw.runs[k].values[c].dump());
  return vals.empty() ? fmt::format("run {}", sw.runs[k].id) : fmt::format("run {} ({})", sw.runs[k].id, vals);
}

Result<json> sweep_run_document(const Sweep& sw, size_t k) {
  json doc = sw.base;
  for (const auto& [path, value] : sw.set)
    CCSIM_RETURN_IF_ERROR(apply_override(doc, path + "=" + rebase_path(value, sw.dir, sw.base_dir).dump())
                              .with_context(fmt::format("{}: /set/{}", sw.file, json_pointer_escape(path))));
  for (size_t c = 0; c < sw.columns.size(); ++c)
    CCSIM_RETURN_IF_ERROR(apply_override(doc, sw.columns[c] + "=" + rebase_path(sw.runs[k].values[c], sw.dir,
                                                                                sw.base_dir).dump())
                              .with_context(fmt::format("{}: {}", sw.file, sweep_run_desc(sw, k))));
  return doc;
}

Status check_sweep(const Sweep& sw, const Overrides& ov) {
  std::string errors;
  bool missing_only = true;
  for (size_t k = 0; k < sw.runs.size(); ++k) {
    Result<json> doc = sweep_run_document(sw, k);
    Status st = doc.ok() ? load_scenario_json(std::move(*doc), fmt::format("{}: {}", sw.file, sweep_run_desc(sw, k)),
                                              sw.base_dir, ov)
                               .status()
                         : doc.status();
    if (st.ok()) continue;
    missing_only &= st.code() == StatusCode::kNotFound;
    errors += (errors.empty() ? "" : "\n") + st.message();
  }
  if (errors.empty()) return ok_status();
  return missing_only ? not_found(errors) : invalid_argument(errors);
}

Status prepare_sweep_dir(const Sweep& sw, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "runs", ec);
  if (ec) return io_error(fmt::format("{}: cannot create the sweep's folder: {}", dir, ec.message()));
  const json plan = plan_json(sw);
  const fs::path file = fs::path(dir) / kPlanFile;
  if (fs::exists(file, ec)) {
    CCSIM_ASSIGN_OR_RETURN(const std::string text, read_text(file.string(), "sweep plan"));
    Result<json> old = parse_json_text(text, file.string());
    if (old.ok() && *old == plan) return ok_status();
    return invalid_argument(fmt::format(
        "{}: holds another sweep (its runs or base scenario differ from {}'s); choose another --out, or remove the "
        "folder to start over", dir, sw.file));
  }
  return write_files_atomically({{file, plan.dump(1) + "\n"}});
}

std::vector<size_t> pending_runs(const Sweep& sw, const std::string& dir, uint32_t shard, uint32_t shards) {
  std::vector<size_t> out;
  std::error_code ec;
  for (size_t k = shard; k < sw.runs.size(); k += shards)
    if (!fs::is_directory(run_dir(dir, sw.runs[k]), ec)) out.push_back(k);
  return out;
}

Result<std::string> run_and_write(const LoadedScenario& loaded, const std::string& out_dir, const RunHooks& hooks,
                                  const std::string& shown_dir) {
  auto run = [&](auto&& simulate, auto&& write, auto&& summarize) -> Result<std::string> {
    auto rep = simulate(loaded, hooks);
    if (!rep.ok()) return rep.status().with_context(loaded.file);
    CCSIM_RETURN_IF_ERROR(write(*rep, out_dir));
    return summarize(*rep, shown_dir.empty() ? out_dir : shown_dir);
  };
  switch (loaded.plan->kind) {
    case RunKind::kParallel:
      return run(run_parallel_training, write_parallel_outputs, format_parallel_summary);
    case RunKind::kTraining:
      return run(run_training, write_training_outputs, format_training_summary);
    case RunKind::kCollective: break;
  }
  return run(run_scenario, write_outputs, format_summary);
}

Status run_sweep_run(const Sweep& sw, size_t k, const std::string& dir, const Overrides& ov, const RunHooks& hooks) {
  const SweepRun& run = sw.runs[k];
  CCSIM_ASSIGN_OR_RETURN(json doc, sweep_run_document(sw, k));
  CCSIM_ASSIGN_OR_RETURN(const LoadedScenario loaded,
                         load_scenario_json(std::move(doc), fmt::format("{}: {}", sw.file, sweep_run_desc(sw, k)),
                                            sw.base_dir, ov));
  const fs::path runs = fs::path(dir) / "runs";
  std::error_code ec;
  // A killed attempt at this run (by any process) left its partial folder: nobody else runs it.
  for (const auto& e : fs::directory_iterator(runs, ec))
    if (e.path().filename().string().rfind("." + run.id + ".partial.", 0) == 0) fs::remove_all(e.path(), ec);
  const fs::path partial = runs / fmt::format(".{}.partial.{}", run.id, static_cast<unsigned long>(::getpid()));
  Result<std::string> summary = run_and_write(loaded, partial.string(), hooks, (runs / run.id).string());
  if (summary.ok()) {
    std::ofstream(partial / "console.txt", std::ios::binary) << *summary;
    fs::rename(partial, runs / run.id, ec);
    if (!ec) return ok_status();
    if (fs::is_directory(runs / run.id)) ec.clear();  // finished by another process meanwhile
  }
  std::error_code ignored;
  fs::remove_all(partial, ignored);
  if (!summary.ok()) return summary.status();
  return ec ? io_error(fmt::format("{}: cannot rename into place: {}", (runs / run.id).string(), ec.message()))
            : ok_status();
}

namespace {

// Records of a CSV text (RFC 4180 quoting, as csv_field writes it).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(field)), field.clear();
    } else if (c == '\n') {
      row.push_back(std::move(field)), field.clear();
      rows.push_back(std::move(row)), row.clear();
      any = false;
    } else {
      field += c, any = true;
    }
  }
  if (any || !row.empty()) row.push_back(std::move(field)), rows.push_back(std::move(row));
  return rows;
}

}  // namespace

Result<MergeResult> merge_sweep(const std::string& dir) {
  const fs::path plan_file = fs::path(dir) / kPlanFile;
  CCSIM_ASSIGN_OR_RETURN(const std::string plan_text, read_text(plan_file.string(), "sweep plan (not a sweep's folder?)"));
  CCSIM_ASSIGN_OR_RETURN(const json plan, parse_json_text(plan_text, plan_file.string()));
  MergeResult res;
  std::vector<std::string> header = {"run"};
  for (const auto& c : plan.at("columns")) header.push_back(c.get<std::string>());
  const size_t fixed = header.size();
  std::map<std::string, size_t> index;  // a results column's place in the header
  std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>> rows;
  for (const json& run : plan.at("runs")) {
    ++res.runs;
    const std::string id = run.at("id").get<std::string>();
    const fs::path csv = fs::path(dir) / "runs" / id / "results.csv";
    Result<std::string> text = read_text(csv.string(), "results file");
    if (!text.ok()) {
      res.missing.push_back(id);
      continue;
    }
    const auto records = parse_csv(*text);
    if (records.empty()) return io_error(fmt::format("{}: empty results file", csv.string()));
    for (const std::string& col : records[0])
      if (index.emplace(col, header.size()).second) header.push_back(col);
    for (size_t r = 1; r < records.size(); ++r) {
      std::vector<std::string> lead = {id};
      for (const json& v : run.at("values")) lead.push_back(value_text(v));
      std::map<std::string, std::string> cells;
      for (size_t c = 0; c < records[r].size() && c < records[0].size(); ++c) cells[records[0][c]] = records[r][c];
      rows.emplace_back(std::move(lead), std::move(cells));
    }
  }
  if (!res.missing.empty()) return res;
  std::string out;
  for (size_t c = 0; c < header.size(); ++c) out += (c ? "," : "") + csv_field(header[c]);
  out += "\n";
  for (const auto& [lead, cells] : rows) {
    std::vector<std::string> line(lead);
    for (size_t c = fixed; c < header.size(); ++c) {
      auto it = cells.find(header[c]);
      line.push_back(it == cells.end() ? std::string() : it->second);
    }
    for (size_t c = 0; c < line.size(); ++c) out += (c ? "," : "") + csv_field(line[c]);
    out += "\n";
  }
  res.rows = rows.size();
  CCSIM_RETURN_IF_ERROR(write_files_atomically({{fs::path(dir) / "sweep.csv", out}}));
  return res;
}

}  // namespace ccsim::app
