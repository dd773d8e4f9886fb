#include "tools/app/scenario_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "algorithms/params.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/diagnostics.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/parallel_groups.hpp"
#include "topology/topology.hpp"
#include "traces/device_profile.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using algo::describe_json;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::vector<std::string> unique_sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Name lists shared by all visitors.
struct Names {
  static constexpr int kPositive = 1;
  static constexpr int kNonNegative = 2;
  static std::vector<std::string> topology_names() {
    std::vector<std::string> v;
    for (const auto& t : topo::known_topologies()) v.push_back(t.name);
    return v;
  }
  static std::vector<std::string> algorithm_names_or_default() {
    std::vector<std::string> v{""};
    for (auto& a : algorithm_names()) v.push_back(std::move(a));
    return v;
  }
  static std::vector<std::string> algorithm_names() {
    return unique_sorted(topo::collective_algorithm_names());
  }
  static std::vector<std::string> compressor_names() { return algo::CompressorRegistry::global().names(); }
};

const std::regex kNamePattern("^[A-Za-z0-9_.-]+$");

// ---------------------------------------------------------------------------------------------
// Reader: JSON -> Scenario, collecting every error.
class Reader : public Names {
 public:
  Reader(const json& obj, std::string path, Diagnostics& diag, const fs::path& base_dir)
      : obj_(obj), path_(std::move(path)), diag_(diag), base_dir_(base_dir) {}

  bool is_object() const { return obj_.is_object(); }

  void choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, const char*) {
    read_choice(key, out, choices, false);
  }
  void required_choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, const char*) {
    read_choice(key, out, choices, true);
  }
  template <class E, size_t N>
  void choice(const std::string& key, E& out, const EnumName<E> (&names)[N], const char*) {
    std::string name(enum_name<E>(names, out));
    read_choice(key, name, enum_names<E>(names), false);
    if (const auto v = enum_value<E>(names, name)) out = *v;
  }
  void integer(const std::string& key, int64_t& out, int64_t min, int64_t max, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (v->is_number_float()) {
      // JSON Schema counts 8.0 as an integer; so do we, when it is one and in range.
      const double d = v->get<double>();
      if (std::floor(d) != d || d < static_cast<double>(min) || d > static_cast<double>(max))
        return expected(key, fmt::format("an integer in [{}, {}]", min, max), *v);
      out = static_cast<int64_t>(d);
      return;
    }
    if (!v->is_number_integer()) return expected(key, fmt::format("an integer in [{}, {}]", min, max), *v);
    bool in_range;
    if (v->is_number_unsigned()) {
      const auto u = v->get<uint64_t>();
      in_range = u <= static_cast<uint64_t>(max) && (min <= 0 || u >= static_cast<uint64_t>(min));
    } else {
      const auto i = v->get<int64_t>();
      in_range = i >= min && i <= max;
    }
    if (!in_range) return expected(key, fmt::format("an integer in [{}, {}]", min, max), *v);
    out = v->get<int64_t>();
  }
  void integer_list(const std::string& key, std::vector<int64_t>& out, int64_t min, int64_t max, const char*) {
    const json* v = get(key);
    if (!v) return;
    const std::string want = fmt::format("an array of integers in [{}, {}]", min, max);
    if (!v->is_array()) return expected(key, want, *v);
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      const bool integral = e.is_number_integer() || (e.is_number_float() && std::floor(e.get<double>()) == e.get<double>());
      const double d = e.is_number() ? e.get<double>() : 0;
      if (!integral || d < static_cast<double>(min) || d > static_cast<double>(max)) {
        diag_.add(at(key) + "/" + std::to_string(i), fmt::format("expected an integer in [{}, {}], got {}", min, max,
                                                                 describe_json(e)));
        continue;
      }
      out.push_back(static_cast<int64_t>(d));
    }
  }
  void number(const std::string& key, double& out, double min, double max, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_number() || !(v->get<double>() >= min && v->get<double>() <= max))
      return expected(key, fmt::format("a number in [{}, {}]", min, max), *v);
    out = v->get<double>();
  }
  void quantity(const std::string& key, double& out, UnitKind unit, int constraint, const char*) {
    const json* v = get(key);
    if (!v) return;
    const std::string want = fmt::format("{} {}", constraint == kPositive ? "a positive" : "a non-negative",
                                         unit == UnitKind::kTime ? "duration" : unit == UnitKind::kBytes ? "size" : "bandwidth");
    double value = 0;
    if (v->is_number()) {
      value = v->get<double>();
    } else if (v->is_string()) {
      auto parsed = parse_quantity(v->get<std::string>(), unit);
      if (!parsed.ok()) return diag_.add(at(key), parsed.status().message());
      value = *parsed;
    } else {
      return expected(key, fmt::format("{}: {}", want, unit_examples(unit)), *v);
    }
    const bool ok = constraint == kPositive ? value > 0 : value >= 0;
    if (!ok || !std::isfinite(value))
      return diag_.add(at(key), fmt::format("expected {}, got {} (= {} {})", want, describe_json(*v), value, base_unit_name(unit)));
    out = value;
  }
  void bytes(const std::string& key, uint64_t& out, const char* desc) {
    double b = static_cast<double>(out);
    const size_t before = diag_.items().size();
    quantity(key, b, UnitKind::kBytes, kNonNegative, desc);
    if (diag_.items().size() != before || !get_quiet(key)) return;
    if (std::floor(b) != b || b > 9.0e18)
      return diag_.add(at(key), fmt::format("expected a whole number of bytes, got {} bytes", b));
    out = static_cast<uint64_t>(b);
  }
  void string(const std::string& key, std::string& out, const char*) { read_string(key, out, false); }
  void required_string(const std::string& key, std::string& out, const char*) { read_string(key, out, true); }

  void path_list(const std::string& key, std::vector<std::string>& out, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_array()) return expected(key, "an array of file paths", *v);
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      std::string file;
      if (resolve_path((*v)[i], at(key) + "/" + std::to_string(i), file)) out.push_back(std::move(file));
    }
  }
  void path(const std::string& key, std::string& out, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (v->is_string() && v->get<std::string>().empty()) return out.clear();  // "" = not set (resolved files)
    resolve_path(*v, at(key), out);
  }
  void boolean(const std::string& key, bool& out, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_boolean()) return expected(key, "true or false", *v);
    out = v->get<bool>();
  }

  template <class T>
  void object(const std::string& key, T& out, const char*) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_object()) return expected(key, "an object", *v);
    Reader sub(*v, at(key), diag_, base_dir_);
    visit(sub, out);
    sub.finish();
  }

  template <class T>
  void required_object_list(const std::string& key, std::vector<T>& out, const char* desc) {
    if (!get_quiet(key)) {
      get(key);
      return diag_.add(at(key), fmt::format("missing required key '{}' ({})", key, desc));
    }
    read_object_list(key, out, true);
  }
  template <class T>
  void object_list(const std::string& key, std::vector<T>& out, const char*) {
    read_object_list(key, out, false);
  }
  // An object or an array of objects; `nonempty`: an empty array is an error.
  template <class T>
  void read_object_list(const std::string& key, std::vector<T>& out, bool nonempty) {
    const json* v = get(key);
    if (!v) return;
    auto read_one = [&](const json& e, const std::string& p) {
      T item;
      if (!e.is_object()) {
        diag_.add(p, fmt::format("expected an object, got {}", describe_json(e)));
        return;
      }
      Reader sub(e, p, diag_, base_dir_);
      visit(sub, item);
      sub.finish();
      out.push_back(std::move(item));
    };
    out.clear();
    if (v->is_object()) return read_one(*v, at(key));
    if (!v->is_array()) return expected(key, "an object or an array of objects", *v);
    if (v->empty() && nonempty) return diag_.add(at(key), "expected at least one object, got an empty array");
    for (size_t i = 0; i < v->size(); ++i) read_one((*v)[i], at(key) + "/" + std::to_string(i));
  }

  void compressor_params(const std::string& key, json& out, const std::string& scheme, const char*) {
    const json* v = get(key);
    const auto* info = algo::CompressorRegistry::global().find(scheme);
    if (info == nullptr) return;  // the scheme itself was already reported
    const size_t errors = diag_.items().size();
    out = info->params.resolve(v ? *v : json(), at(key), diag_);
    if (diag_.items().size() != errors || !info->check) return;
    diag_.add(at(key), info->check(algo::Params(out)));
  }

  /// Reports keys that no field declared, with the closest declared key.
  void finish() {
    if (!obj_.is_object()) return;
    for (const auto& [key, value] : obj_.items()) {
      if (declared_.count(key)) continue;
      std::vector<std::string> names(declared_.begin(), declared_.end());
      const std::string near = closest_match(key, names);
      diag_.add(at(key), fmt::format("unknown key '{}'{}; valid keys here: {}", key,
                                     near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(names)));
    }
  }

 private:
  std::string at(const std::string& key) const { return path_ + "/" + json_pointer_escape(key); }
  const json* get_quiet(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  const json* get(const std::string& key) {
    declared_.insert(key);
    return get_quiet(key);
  }
  // A file path relative to the scenario's folder, made absolute (so the resolved scenario still
  // finds it from any folder); false (and an error at `p`) unless it names an existing file.
  bool resolve_path(const json& e, const std::string& p, std::string& out) {
    if (!e.is_string()) {
      diag_.add(p, fmt::format("expected a file path string, got {}", describe_json(e)));
      return false;
    }
    fs::path file = e.get<std::string>();
    if (file.is_relative()) file = base_dir_ / file;
    file = fs::absolute(file).lexically_normal();
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      diag_.add(p, fmt::format("expected an existing file, got \"{}\" (looked for {}: not found)", e.get<std::string>(),
                               file.string()));
      diag_.mark_not_found();
      return false;
    }
    out = file.string();
    return true;
  }
  void expected(const std::string& key, const std::string& what, const json& got) {
    diag_.add(at(key), fmt::format("expected {}, got {}", what, describe_json(got)));
  }
  void read_choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, bool required) {
    const json* v = get(key);
    if (!v) {
      if (required) diag_.add(at(key), fmt::format("missing required key '{}'; expected one of {}", key, join(choices)));
      return;
    }
    if (!v->is_string()) return expected(key, fmt::format("one of {}", join(choices)), *v);
    const std::string s = v->get<std::string>();
    if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
      const std::string near = closest_match(s, choices);
      return diag_.add(at(key), fmt::format("expected one of {}, got \"{}\"{}", join(choices), s,
                                            near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    }
    out = s;
  }
  void read_string(const std::string& key, std::string& out, bool required) {
    const json* v = get(key);
    if (!v) {
      if (required) diag_.add(at(key), fmt::format("missing required key '{}'", key));
      return;
    }
    if (!v->is_string()) return expected(key, "a string", *v);
    out = v->get<std::string>();
    if (key == "name" && !std::regex_match(out, kNamePattern))
      diag_.add(at(key), fmt::format("expected a name of letters, digits, '_', '.', '-', got \"{}\"", out));
  }

  const json& obj_;
  std::string path_;
  Diagnostics& diag_;
  const fs::path& base_dir_;
  std::set<std::string> declared_;
};

// ---------------------------------------------------------------------------------------------
// Writer: Scenario -> JSON (everything, defaults included; quantities in base units).
class Writer : public Names {
 public:
  json out = json::object();
  void choice(const std::string& k, const std::string& v, const std::vector<std::string>&, const char*) { out[k] = v; }
  void required_choice(const std::string& k, const std::string& v, const std::vector<std::string>&, const char*) { out[k] = v; }
  template <class E, size_t N>
  void choice(const std::string& k, E v, const EnumName<E> (&names)[N], const char*) {
    out[k] = std::string(enum_name<E>(names, v));
  }
  void integer(const std::string& k, int64_t v, int64_t, int64_t, const char*) { out[k] = v; }
  void integer_list(const std::string& k, const std::vector<int64_t>& v, int64_t, int64_t, const char*) { out[k] = v; }
  void number(const std::string& k, double v, double, double, const char*) { out[k] = v; }
  void quantity(const std::string& k, double v, UnitKind, int, const char*) { out[k] = v; }
  void bytes(const std::string& k, uint64_t v, const char*) { out[k] = v; }
  void string(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void required_string(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void path_list(const std::string& k, const std::vector<std::string>& v, const char*) { out[k] = v; }
  void path(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void boolean(const std::string& k, bool v, const char*) { out[k] = v; }
  void compressor_params(const std::string& k, const json& v, const std::string&, const char*) { out[k] = v; }
  template <class T>
  void object(const std::string& k, T& v, const char*) {
    Writer w;
    visit(w, v);
    out[k] = std::move(w.out);
  }
  template <class T>
  void required_object_list(const std::string& k, std::vector<T>& v, const char* d) {
    object_list(k, v, d);
  }
  template <class T>
  void object_list(const std::string& k, std::vector<T>& v, const char*) {
    json arr = json::array();
    for (auto& item : v) {
      Writer w;
      visit(w, item);
      arr.push_back(std::move(w.out));
    }
    out[k] = std::move(arr);
  }
};

// ---------------------------------------------------------------------------------------------
// SchemaWriter: declarations -> JSON Schema.
std::string unit_pattern(UnitKind kind) {
  std::string units;
  switch (kind) {
    case UnitKind::kTime: units = "ps|ns|us|\u00b5s|ms|s|min|h"; break;
    case UnitKind::kBytes: units = "B|KB|kB|MB|GB|TB|KiB|MiB|GiB|TiB|b|Kb|Mb|Gb"; break;
    case UnitKind::kBandwidth:
      units = "bps|Kbps|kbps|Mbps|Gbps|Tbps|Bps|KBps|kBps|MBps|GBps|TBps|B/s|KB/s|kB/s|MB/s|GB/s|TB/s|KiB/s|MiB/s|GiB/s|TiB/s|b/s|Gb/s|Mb/s|Tb/s";
      break;
  }
  return "^ *([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)? *(" + units + ")? *$";
}

class SchemaWriter : public Names {
 public:
  json props = json::object();
  json required = json::array();
  json all_of = json::array();

  void choice(const std::string& k, const std::string& def, const std::vector<std::string>& c, const char* d) {
    props[k] = {{"type", "string"}, {"enum", c}, {"default", def}, {"description", d}};
  }
  void required_choice(const std::string& k, const std::string&, const std::vector<std::string>& c, const char* d) {
    props[k] = {{"type", "string"}, {"enum", c}, {"description", d}};
    required.push_back(k);
  }
  template <class E, size_t N>
  void choice(const std::string& k, E def, const EnumName<E> (&names)[N], const char* d) {
    choice(k, std::string(enum_name<E>(names, def)), enum_names<E>(names), d);
  }
  void integer(const std::string& k, int64_t def, int64_t min, int64_t max, const char* d) {
    props[k] = {{"type", "integer"}, {"minimum", min}, {"maximum", max}, {"default", def}, {"description", d}};
  }
  void integer_list(const std::string& k, const std::vector<int64_t>& def, int64_t min, int64_t max, const char* d) {
    props[k] = {{"type", "array"},
                {"items", {{"type", "integer"}, {"minimum", min}, {"maximum", max}}},
                {"default", def},
                {"description", d}};
  }
  void number(const std::string& k, double def, double min, double max, const char* d) {
    props[k] = {{"type", "number"}, {"minimum", min}, {"maximum", max}, {"default", def}, {"description", d}};
  }
  void quantity(const std::string& k, double def, UnitKind u, int constraint, const char* d) {
    json num = {{"type", "number"}};
    if (constraint == kPositive) num["exclusiveMinimum"] = 0;
    else num["minimum"] = 0;
    props[k] = {{"oneOf", json::array({num, {{"type", "string"}, {"pattern", unit_pattern(u)}}})},
                {"default", def},
                {"description", fmt::format("{} ({}; in {})", d, unit_examples(u), base_unit_name(u))}};
  }
  void bytes(const std::string& k, uint64_t def, const char* d) {
    quantity(k, static_cast<double>(def), UnitKind::kBytes, kNonNegative, d);
    props[k]["default"] = def;
  }
  void string(const std::string& k, const std::string& def, const char* d) {
    props[k] = {{"type", "string"}, {"default", def}, {"description", d}};
  }
  void required_string(const std::string& k, const std::string&, const char* d) {
    props[k] = {{"type", "string"}, {"description", d}};
    if (k == "name") props[k]["pattern"] = "^[A-Za-z0-9_.-]+$";
    required.push_back(k);
  }
  void path_list(const std::string& k, const std::vector<std::string>&, const char* d) {
    props[k] = {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", d}};
  }
  void path(const std::string& k, const std::string&, const char* d) {
    props[k] = {{"type", "string"}, {"description", d}};
  }
  void boolean(const std::string& k, bool def, const char* d) {
    props[k] = {{"type", "boolean"}, {"default", def}, {"description", d}};
  }
  void compressor_params(const std::string& k, const json&, const std::string&, const char* d) {
    props[k] = {{"type", "object"}, {"description", d}};
    for (const auto& info : algo::CompressorRegistry::global().all()) {
      all_of.push_back({{"if", {{"properties", {{"scheme", {{"const", info.name}}}}}, {"required", {"scheme"}}}},
                        {"then", {{"properties", {{k, info.params.json_schema()}}}}}});
    }
  }
  template <class T>
  json object_schema(T& v, const char* d) {
    SchemaWriter w;
    visit(w, v);
    json s = {{"type", "object"}, {"description", d}, {"properties", w.props}, {"additionalProperties", false}};
    if (!w.required.empty()) s["required"] = w.required;
    if (!w.all_of.empty()) s["allOf"] = w.all_of;
    return s;
  }
  template <class T>
  void object(const std::string& k, T& v, const char* d) {
    props[k] = object_schema(v, d);
  }
  template <class T>
  void required_object_list(const std::string& k, std::vector<T>& v, const char* d) {
    list_schema(k, v, d, 1);
    required.push_back(k);
  }
  template <class T>
  void object_list(const std::string& k, std::vector<T>& v, const char* d) {
    list_schema(k, v, d, 0);
  }
  template <class T>
  void list_schema(const std::string& k, std::vector<T>&, const char* d, int min_items) {
    T item;
    json one = object_schema(item, d);
    props[k] = {{"description", d},
                {"oneOf", json::array({one, {{"type", "array"}, {"minItems", min_items}, {"items", one}}})}};
  }
};

Status parse_file(const std::string& file, json& doc) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return not_found(fmt::format("{}: no such scenario file", file));
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open scenario file", file));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string what = e.what();
    const auto pos = what.find("at line ");
    if (pos != std::string::npos) what = what.substr(pos + 3);
    return invalid_argument(fmt::format("{}: invalid JSON: {}", file, what));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return invalid_argument(fmt::format("{}: invalid JSON: {}", file, what));
  }
  return ok_status();
}

}  // namespace

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

Status apply_override(json& doc, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(fmt::format("--set {}: expected PATH=VALUE (e.g. cluster.nodes=16 or /cluster/nodes=16)", assignment));
  std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  std::string pointer;
  if (path.front() == '/') {
    pointer = path;
  } else {
    std::stringstream ss(path);
    for (std::string part; std::getline(ss, part, '.');) pointer += "/" + json_pointer_escape(part);
  }
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // a bare word is a string
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("--set {}: {}", assignment, e.what()));
  }
  try {
    doc[json::json_pointer(pointer)] = value;
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("--set {}: cannot set {}: {}", assignment, pointer, e.what()));
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
  Reader reader(doc, "", diag, base);
  visit(reader, out.scenario);
  reader.finish();

  out.plan = check_scenario(out.scenario, doc, diag);
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
  Writer w;
  visit(w, const_cast<Scenario&>(s));
  return w.out;
}

json scenario_schema() {
  SchemaWriter w;
  Scenario s;
  json schema = w.object_schema(s, "A ccsim scenario: cluster, collective, gradients, compression schemes, outputs.");
  schema["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  schema["title"] = "ccsim scenario";
  return schema;
}

}  // namespace ccsim::app
