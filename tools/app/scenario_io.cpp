#include "tools/app/scenario_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "algorithms/params.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/json_text.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> unique_sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

Status parse_file(const std::string& file, json& doc) {
  if (const std::string why = why_not_a_file(file); why == "not found")
    return not_found(fmt::format("{}: no such scenario file", file));
  else if (!why.empty())
    return invalid_argument(fmt::format("{}: expected a scenario file, found {}", file, why));
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open scenario file", file));
  std::stringstream ss;
  ss << in.rdbuf();
  CCSIM_ASSIGN_OR_RETURN(doc, parse_json_text(ss.str(), file));
  return ok_status();
}

}  // namespace

std::vector<std::string> topology_names() {
  std::vector<std::string> v;
  for (const auto& t : topo::known_topologies()) v.push_back(t.name);
  return v;
}

std::vector<std::string> algorithm_names() { return unique_sorted(topo::collective_algorithm_names()); }

std::vector<std::string> algorithm_names_or_default() {
  std::vector<std::string> v{""};
  for (auto& a : algorithm_names()) v.push_back(std::move(a));
  return v;
}

std::vector<std::string> compressor_names() { return algo::CompressorRegistry::global().names(); }

TableField compressor_params(const std::string& scheme) {
  TableField f;
  f.resolve = [scheme](const json* v, const std::string& path, Diagnostics& diag) {
    const auto* info = algo::CompressorRegistry::global().find(scheme);
    if (info == nullptr) return json::object();  // the scheme itself was already reported
    const size_t errors = diag.items().size();
    json out = info->params.resolve(v ? *v : json(), path, diag);
    if (diag.items().size() == errors && info->check) diag.add(path, info->check(algo::Params(out)));
    return out;
  };
  f.schema_all_of = [](const std::string& key) {
    json all_of = json::array();
    for (const auto& info : algo::CompressorRegistry::global().all())
      all_of.push_back({{"if", {{"properties", {{"scheme", {{"const", info.name}}}}}, {"required", {"scheme"}}}},
                        {"then", {{"properties", {{key, info.params.json_schema()}}}}}});
    return all_of;
  };
  return f;
}

topo::ClusterSpec cluster_spec(const ClusterConfig& c) {
  topo::ClusterSpec spec;
  spec.topology = c.topology;
  spec.nodes = static_cast<uint32_t>(c.nodes);
  spec.gpus_per_node = static_cast<uint32_t>(c.gpus_per_node);
  spec.nic_Bps = c.nic_bandwidth_Bps;
  spec.link_latency_s = c.link_latency_s;
  spec.intra_Bps = c.intra_node.bandwidth_Bps;
  spec.intra_latency_s = c.intra_node.latency_s;
  spec.leaves = static_cast<uint32_t>(c.leaf_spine.leaves);
  spec.spines = static_cast<uint32_t>(c.leaf_spine.spines);
  spec.uplink_Bps = c.leaf_spine.uplink_bandwidth_Bps;
  spec.k = static_cast<uint32_t>(c.fat_tree.k);
  for (int64_t d : c.torus.dims) spec.dims.push_back(static_cast<uint32_t>(d));
  return spec;
}

namespace {

// From tokens[first] on, the assignment creates what it names; a number there would make an array
// with that many nulls before the value (nlohmann reads it as an index): only 0 is allowed.
// (tokens[first] itself is a key when its parent is an object.)
Status check_created_tokens(json::json_pointer walked, const std::vector<std::string>& tokens, size_t first,
                            bool parent_is_object) {
  for (size_t k = parent_is_object ? first + 1 : first; k < tokens.size(); ++k) {
    if (k > first) walked /= tokens[k - 1];
    const std::string& t = tokens[k];
    if (!t.empty() && t != "0" && t.find_first_not_of("0123456789") == std::string::npos)
      return invalid_argument(fmt::format("{}/{}: a new array starts at index 0, got '{}'", walked.to_string(), t, t));
  }
  return ok_status();
}

// An index into an array must name an entry or the one past the end (a new entry): nlohmann would
// pad the array with nulls up to any index, and the error would surface at a null it made up.
Status check_override_target(const json& doc, const std::string& pointer) {
  std::vector<std::string> tokens;
  for (size_t at = 1; at <= pointer.size() && !pointer.empty();) {  // "/a/b~1c" -> a, b/c
    const size_t next = std::min(pointer.find('/', at), pointer.size());
    std::string t = pointer.substr(at, next - at);
    for (size_t k = 0; (k = t.find('~', k)) != std::string::npos && k + 1 < t.size(); ++k)
      t.replace(k, 2, t[k + 1] == '1' ? "/" : "~");
    tokens.push_back(std::move(t));
    at = next + 1;
  }
  const json* at = &doc;
  json::json_pointer walked;
  for (const std::string& token : tokens) {
    if (at->is_array()) {
      if (token == "-") return ok_status();
      const bool digits = !token.empty() && token.size() <= 9 &&
                          token.find_first_not_of("0123456789") == std::string::npos;
      const size_t index = digits ? std::stoul(token) : SIZE_MAX;
      if (index > at->size())
        return invalid_argument(fmt::format("{}/{}: the array has {} entries; expected an index from 0 to {} ({} "
                                            "adds one), got '{}'",
                                            walked.to_string(), token, at->size(), at->size(), at->size(), token));
      if (index == at->size()) return ok_status();
      at = &(*at)[index];
    } else if (at->is_object() && at->contains(token)) {
      at = &(*at)[token];
    } else if (at->is_null() || at->is_object()) {
      return check_created_tokens(walked, tokens, static_cast<size_t>(&token - tokens.data()), at->is_object());
    } else {
      return ok_status();  // a type error the assignment reports
    }
    walked /= token;
  }
  return ok_status();
}

}  // namespace

Status apply_override(json& doc, const std::string& assignment) {
  CCSIM_RETURN_IF_ERROR(check_utf8(assignment, "--set"));
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(
        fmt::format("--set {}: expected PATH=VALUE (e.g. cluster.nodes=16 or /cluster/nodes=16)", assignment));
  std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  std::string pointer;
  if (path.front() == '/') {
    pointer = path;
  } else {
    std::stringstream ss(path);
    for (std::string part; std::getline(ss, part, '.');) {
      pointer += '/';
      pointer += json_pointer_escape(part);
    }
  }
  CCSIM_RETURN_IF_ERROR(check_json_depth(text, fmt::format("--set {} (its value)", path)));
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // a bare word is a string
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("--set {}: {}", assignment, e.what()));
  }
  try {
    const json::json_pointer target(pointer);  // throws on a malformed pointer
    CCSIM_RETURN_IF_ERROR(check_override_target(doc, pointer).with_context("--set " + assignment));
    doc[target] = value;
  } catch (const json::exception& e) {
    std::string what = e.what();  // "[json.exception.parse_error.107] parse error at byte 1: ..."
    if (const auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return invalid_argument(fmt::format("--set {}: cannot set {}: {}", assignment, pointer, what));
  }
  return ok_status();
}

Result<LoadedScenario> load_scenario_json(json doc, const std::string& file, const std::string& base_dir,
                                          const Overrides& overrides) {
  for (const auto& s : overrides.sets) CCSIM_RETURN_IF_ERROR(apply_override(doc, s).with_context(file));

  Diagnostics diag;
  LoadedScenario out;
  out.file = file;
  const fs::path base = base_dir.empty() ? fs::path(".") : fs::path(base_dir);
  if (!doc.is_object()) {
    diag.add("", fmt::format("expected a scenario object, got {}", describe_json(doc)));
    return diag.to_status(file);
  }
  if (overrides.seed) doc["seed"] = *overrides.seed;
  FieldReader reader(doc, "", diag, base);
  visit(reader, out.scenario);
  reader.finish();

  out.plan = check_scenario(out.scenario, doc, overrides.max_flows, diag);
  CCSIM_RETURN_IF_ERROR(diag.to_status(file));

  Scenario& s = out.scenario;
  if (s.outputs.dir.empty()) s.outputs.dir = "out/" + s.name;
  out.resolved = scenario_to_json(s);
  return out;
}

Result<LoadedScenario> load_scenario(const std::string& file, const Overrides& overrides) {
  json doc;
  CCSIM_RETURN_IF_ERROR(parse_file(file, doc));
  return load_scenario_json(std::move(doc), file, fs::path(file).parent_path().string(), overrides);
}

json scenario_to_json(const Scenario& s) {
  FieldWriter w;
  visit(w, const_cast<Scenario&>(s));
  return w.out;
}

json scenario_schema() {
  Scenario s;
  json schema =
      FieldSchema::object_schema(s, "A ccsim scenario: cluster, collective, gradients, compression schemes, outputs.");
  schema["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  schema["title"] = "ccsim scenario";
  return schema;
}

}  // namespace ccsim::app
