#include "sim/base/json_fields.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

namespace ccsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The JSON Schema pattern of a quantity: a number with an optional unit of `kind`.
std::string unit_pattern(UnitKind kind) {
  std::string units;
  switch (kind) {
    case UnitKind::kTime: units = "ps|ns|us|\u00b5s|ms|s|min|h"; break;
    case UnitKind::kBytes: units = "B|KB|kB|MB|GB|TB|KiB|MiB|GiB|TiB|b|Kb|Mb|Gb"; break;
    case UnitKind::kBandwidth:
      units = "bps|Kbps|kbps|Mbps|Gbps|Tbps|Bps|KBps|kBps|MBps|GBps|TBps|B/s|KB/s|kB/s|MB/s|GB/s|TB/s|KiB/s|MiB/s|"
              "GiB/s|TiB/s|b/s|Gb/s|Mb/s|Tb/s";
      break;
  }
  return "^ *([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)? *(" + units + ")? *$";
}

}  // namespace

std::string describe_json(const json& j) {
  std::string dumped = j.dump();
  if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return fmt::format("the boolean {}", dumped);
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return fmt::format("the number {}", dumped);
    case json::value_t::string: return fmt::format("the string {}", dumped);
    case json::value_t::array: return fmt::format("an array {}", dumped);
    case json::value_t::object: return fmt::format("an object {}", dumped);
    default: return dumped;
  }
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& s : names) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// ---- FieldReader ----------------------------------------------------------------------------------

void FieldReader::integer(const std::string& key, int64_t& out, int64_t min, int64_t max, const char*) {
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

void FieldReader::integer_list(const std::string& key, std::vector<int64_t>& out, int64_t min, int64_t max,
                               const char*) {
  const json* v = get(key);
  if (!v) return;
  const std::string want = fmt::format("an array of integers in [{}, {}]", min, max);
  if (!v->is_array()) return expected(key, want, *v);
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const bool integral =
        e.is_number_integer() || (e.is_number_float() && std::floor(e.get<double>()) == e.get<double>());
    const double d = e.is_number() ? e.get<double>() : 0;
    if (!integral || d < static_cast<double>(min) || d > static_cast<double>(max)) {
      diag_.add(at(key) + "/" + std::to_string(i),
                fmt::format("expected an integer in [{}, {}], got {}", min, max, describe_json(e)));
      continue;
    }
    out.push_back(static_cast<int64_t>(d));
  }
}

void FieldReader::number(const std::string& key, double& out, double min, double max, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (!v->is_number() || !(v->get<double>() >= min && v->get<double>() <= max))
    return expected(key, fmt::format("a number in [{}, {}]", min, max), *v);
  out = v->get<double>();
}

void FieldReader::number_list(const std::string& key, std::vector<double>& out, double min, double max,
                              const char*) {
  const json* v = get(key);
  if (!v) return;
  if (!v->is_array()) return expected(key, fmt::format("an array of numbers in [{}, {}]", min, max), *v);
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number() || !(e.get<double>() >= min && e.get<double>() <= max)) {
      diag_.add(at(key) + "/" + std::to_string(i),
                fmt::format("expected a number in [{}, {}], got {}", min, max, describe_json(e)));
      continue;
    }
    out.push_back(e.get<double>());
  }
}

void FieldReader::quantity(const std::string& key, double& out, UnitKind unit, Sign sign, const char*) {
  const json* v = get(key);
  if (!v) return;
  const std::string want =
      fmt::format("{} {}", sign == Sign::kPositive ? "a positive" : "a non-negative",
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
  const bool ok = sign == Sign::kPositive ? value > 0 : value >= 0;
  if (!ok || !std::isfinite(value))
    return diag_.add(at(key), fmt::format("expected {}, got {} (= {} {})", want, describe_json(*v), value,
                                          base_unit_name(unit)));
  out = value;
}

void FieldReader::bytes(const std::string& key, uint64_t& out, const char* desc) {
  double b = static_cast<double>(out);
  const size_t before = diag_.items().size();
  quantity(key, b, UnitKind::kBytes, Sign::kNonNegative, desc);
  if (diag_.items().size() != before || !get_quiet(key)) return;
  if (std::floor(b) != b) return diag_.add(at(key), fmt::format("expected a whole number of bytes, got {} bytes", b));
  if (b > 9.0e18)
    return diag_.add(at(key), fmt::format("expected at most 9e18 bytes (64-bit counts), got {:.6g} bytes", b));
  out = static_cast<uint64_t>(b);
}

void FieldReader::path_list(const std::string& key, std::vector<std::string>& out, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (!v->is_array()) return expected(key, "an array of file paths", *v);
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    std::string file;
    if (resolve_path((*v)[i], at(key) + "/" + std::to_string(i), file)) out.push_back(std::move(file));
  }
}

void FieldReader::path(const std::string& key, std::string& out, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (v->is_string() && v->get<std::string>().empty()) return out.clear();  // "" = not set (resolved files)
  resolve_path(*v, at(key), out);
}

void FieldReader::directory(const std::string& key, std::string& out, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (v->is_string() && v->get<std::string>().empty()) return out.clear();
  resolve_path(*v, at(key), out, true);
}

void FieldReader::json_object(const std::string& key, json& out, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (!v->is_object()) return expected(key, "an object", *v);
  out = *v;
}

void FieldReader::boolean(const std::string& key, bool& out, const char*) {
  const json* v = get(key);
  if (!v) return;
  if (!v->is_boolean()) return expected(key, "true or false", *v);
  out = v->get<bool>();
}

void FieldReader::table(const std::string& key, json& out, const TableField& field, const char*) {
  out = field.resolve(get(key), at(key), diag_);
}

void FieldReader::finish() {
  if (!obj_.is_object()) return;
  for (const auto& [key, value] : obj_.items()) {
    if (declared_.count(key)) continue;
    std::vector<std::string> names(declared_.begin(), declared_.end());
    const std::string near = closest_match(key, names);
    diag_.add(at(key), fmt::format("unknown key '{}'{}; valid keys here: {}", key,
                                   near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join_names(names)));
  }
}

const json* FieldReader::get_quiet(const std::string& key) const {
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

const json* FieldReader::get(const std::string& key) {
  declared_.insert(key);
  return get_quiet(key);
}

std::string why_not_a_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec == std::errc::too_many_symbolic_link_levels) return "a symbolic link loop";
  if (ec || !fs::exists(st)) return "not found";
  if (fs::is_directory(st)) return "a directory";
  if (!fs::is_regular_file(st)) return "a special file (not a regular file)";
  return "";
}

// A file path relative to the document's folder, made absolute (so a resolved document still finds
// it from any folder); false (and an error at `p`) unless it names an existing file (or directory).
bool FieldReader::resolve_path(const json& e, const std::string& p, std::string& out, bool directory) {
  const char* what = directory ? "directory" : "file";
  if (!e.is_string()) {
    diag_.add(p, fmt::format("expected a {} path string, got {}", what, describe_json(e)));
    return false;
  }
  fs::path file = e.get<std::string>();
  if (file.is_relative()) file = base_dir_ / file;
  file = fs::absolute(file).lexically_normal();
  std::error_code ec;
  const std::string why = !directory              ? why_not_a_file(file)
                          : fs::is_directory(file, ec) ? std::string()
                          : fs::exists(file, ec)  ? std::string("not a directory")
                                                  : std::string("not found");
  if (!why.empty()) {
    diag_.add(p, fmt::format("expected an existing {}, got \"{}\" (looked for {}: {})", what, e.get<std::string>(),
                             file.string(), why));
    diag_.mark_not_found();
    return false;
  }
  out = file.string();
  return true;
}

void FieldReader::expected(const std::string& key, const std::string& what, const json& got) {
  diag_.add(at(key), fmt::format("expected {}, got {}", what, describe_json(got)));
}

void FieldReader::read_choice(const std::string& key, std::string& out, const std::vector<std::string>& choices,
                              bool required) {
  const json* v = get(key);
  if (!v) {
    if (required)
      diag_.add(at(key), fmt::format("missing required key '{}'; expected one of {}", key, join_names(choices)));
    return;
  }
  if (!v->is_string()) return expected(key, fmt::format("one of {}", join_names(choices)), *v);
  const std::string s = v->get<std::string>();
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
    const std::string near = closest_match(s, choices);
    return diag_.add(at(key), fmt::format("expected one of {}, got \"{}\"{}", join_names(choices), s,
                                          near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
  }
  out = s;
}

void FieldReader::read_string(const std::string& key, std::string& out, bool required, const StringPattern* pattern) {
  const json* v = get(key);
  if (!v) {
    if (required) diag_.add(at(key), fmt::format("missing required key '{}'", key));
    return;
  }
  if (!v->is_string()) return expected(key, "a string", *v);
  out = v->get<std::string>();
  if (pattern != nullptr && !std::regex_match(out, std::regex(pattern->regex)))
    diag_.add(at(key), fmt::format("expected {}, got \"{}\"", pattern->expected, out));
}

// ---- FieldSchema ----------------------------------------------------------------------------------

void FieldSchema::choice(const std::string& k, const std::string& def, const std::vector<std::string>& c,
                         const char* d) {
  props[k] = {{"type", "string"}, {"enum", c}, {"default", def}, {"description", d}};
}

void FieldSchema::required_choice(const std::string& k, const std::string&, const std::vector<std::string>& c,
                                  const char* d) {
  props[k] = {{"type", "string"}, {"enum", c}, {"description", d}};
  required.push_back(k);
}

void FieldSchema::integer(const std::string& k, int64_t def, int64_t min, int64_t max, const char* d) {
  props[k] = {{"type", "integer"}, {"minimum", min}, {"maximum", max}, {"default", def}, {"description", d}};
}

void FieldSchema::integer_list(const std::string& k, const std::vector<int64_t>& def, int64_t min, int64_t max,
                               const char* d) {
  props[k] = {{"type", "array"},
              {"items", {{"type", "integer"}, {"minimum", min}, {"maximum", max}}},
              {"default", def},
              {"description", d}};
}

void FieldSchema::number(const std::string& k, double def, double min, double max, const char* d) {
  props[k] = {{"type", "number"}, {"minimum", min}, {"maximum", max}, {"default", def}, {"description", d}};
}

void FieldSchema::number_list(const std::string& k, const std::vector<double>& def, double min, double max,
                              const char* d) {
  props[k] = {{"type", "array"},
              {"items", {{"type", "number"}, {"minimum", min}, {"maximum", max}}},
              {"default", def},
              {"description", d}};
}

void FieldSchema::quantity(const std::string& k, double def, UnitKind u, Sign sign, const char* d) {
  json num = {{"type", "number"}};
  if (sign == Sign::kPositive) num["exclusiveMinimum"] = 0;
  else num["minimum"] = 0;
  props[k] = {{"oneOf", json::array({num, {{"type", "string"}, {"pattern", unit_pattern(u)}}})},
              {"default", def},
              {"description", fmt::format("{} ({}; in {})", d, unit_examples(u), base_unit_name(u))}};
}

void FieldSchema::bytes(const std::string& k, uint64_t def, const char* d) {
  quantity(k, static_cast<double>(def), UnitKind::kBytes, Sign::kNonNegative, d);
  props[k]["default"] = def;
}

void FieldSchema::string(const std::string& k, const std::string& def, const char* d) {
  props[k] = {{"type", "string"}, {"default", def}, {"description", d}};
}

void FieldSchema::required_string(const std::string& k, const std::string&, const char* d,
                                  const StringPattern* pattern) {
  props[k] = {{"type", "string"}, {"description", d}};
  if (pattern != nullptr) props[k]["pattern"] = pattern->regex;
  required.push_back(k);
}

void FieldSchema::path_list(const std::string& k, const std::vector<std::string>&, const char* d) {
  props[k] = {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", d}};
}

void FieldSchema::path(const std::string& k, const std::string&, const char* d) {
  props[k] = {{"type", "string"}, {"description", d}};
}

void FieldSchema::boolean(const std::string& k, bool def, const char* d) {
  props[k] = {{"type", "boolean"}, {"default", def}, {"description", d}};
}

void FieldSchema::table(const std::string& k, const json&, const TableField& field, const char* d) {
  props[k] = {{"type", "object"}, {"description", d}};
  for (auto& entry : field.schema_all_of(k)) all_of.push_back(std::move(entry));
}

}  // namespace ccsim
