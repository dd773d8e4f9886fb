#include "tests/tools/json_schema_validator.hpp"

#include "sim/base/diagnostics.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>

namespace ccsim::testing {
namespace {

using nlohmann::json;

const std::set<std::string> kAnnotations = {"$schema", "title", "description", "default"};
const std::set<std::string> kTypeNames = {"null", "boolean", "integer", "number", "string", "array", "object"};

std::string brief(const json& j) {
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string type_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "unknown";
  }
}

// JSON Schema: an integer is any number with a zero fractional part (1.0 included).
bool is_integer(const json& j) {
  if (j.is_number_integer()) return true;
  if (!j.is_number_float()) return false;
  const double d = j.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool has_type(const json& j, const std::string& type) {
  if (type == "integer") return is_integer(j);
  if (type == "number") return j.is_number();
  if (type == "null") return j.is_null();
  if (type == "boolean") return j.is_boolean();
  if (type == "string") return j.is_string();
  if (type == "array") return j.is_array();
  if (type == "object") return j.is_object();
  return false;
}

// Three-way comparison of two JSON numbers, exact when both are integers (int64 or uint64).
int compare_numbers(const json& a, const json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    const double x = a.get<double>();
    const double y = b.get<double>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (x > y ? 1 : 0); };
  const bool au = a.is_number_unsigned();
  const bool bu = b.is_number_unsigned();
  if (au && bu) return cmp(a.get<uint64_t>(), b.get<uint64_t>());
  if (!au && !bu) return cmp(a.get<int64_t>(), b.get<int64_t>());
  if (au) {  // a >= 0
    const int64_t y = b.get<int64_t>();
    return y < 0 ? 1 : cmp(a.get<uint64_t>(), static_cast<uint64_t>(y));
  }
  const int64_t x = a.get<int64_t>();
  return x < 0 ? -1 : cmp(static_cast<uint64_t>(x), b.get<uint64_t>());
}

[[noreturn]] void bad_schema(const std::string& where, const std::string& what) {
  throw std::invalid_argument(fmt::format("schema{}: {}", where.empty() ? " root" : " at " + where, what));
}

}  // namespace

std::string SchemaViolation::to_string() const { return (path.empty() ? "/" : path) + ": " + message; }

JsonSchemaValidator::JsonSchemaValidator(json schema) : schema_(std::move(schema)) { check_schema(schema_, ""); }

void JsonSchemaValidator::check_schema(const json& s, const std::string& where) {
  if (s.is_boolean()) return;
  if (!s.is_object()) bad_schema(where, "a schema must be an object or a boolean, got " + brief(s));
  for (const auto& [key, value] : s.items()) {
    const std::string at = where + "/" + json_pointer_escape(key);
    if (kAnnotations.count(key) || key == "const") continue;
    if (key == "type") {
      const json types = value.is_array() ? value : json::array({value});
      if (types.empty()) bad_schema(at, "empty type list");
      for (const auto& t : types)
        if (!t.is_string() || !kTypeNames.count(t.get<std::string>())) bad_schema(at, "unknown type " + brief(t));
    } else if (key == "properties") {
      if (!value.is_object()) bad_schema(at, "expected an object of schemas");
      for (const auto& [name, sub] : value.items()) check_schema(sub, at + "/" + json_pointer_escape(name));
    } else if (key == "required") {
      if (!value.is_array()) bad_schema(at, "expected an array of property names");
      for (const auto& n : value)
        if (!n.is_string()) bad_schema(at, "expected property names, got " + brief(n));
    } else if (key == "additionalProperties" || key == "items" || key == "if" || key == "then") {
      check_schema(value, at);
    } else if (key == "enum") {
      if (!value.is_array()) bad_schema(at, "expected an array");
    } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum") {
      if (!value.is_number()) bad_schema(at, "expected a number, got " + brief(value));
    } else if (key == "minItems") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0)
        bad_schema(at, "expected a non-negative integer, got " + brief(value));
    } else if (key == "pattern") {
      if (!value.is_string()) bad_schema(at, "expected a regular expression string");
      const std::string text = value.get<std::string>();
      try {
        patterns_.emplace(text, std::regex(text, std::regex::ECMAScript));
      } catch (const std::regex_error& e) {
        bad_schema(at, fmt::format("invalid regular expression \"{}\": {}", text, e.what()));
      }
    } else if (key == "oneOf" || key == "allOf") {
      if (!value.is_array() || value.empty()) bad_schema(at, "expected a non-empty array of schemas");
      for (size_t i = 0; i < value.size(); ++i) check_schema(value[i], at + "/" + std::to_string(i));
    } else {
      bad_schema(at, fmt::format("unsupported keyword '{}'", key));
    }
  }
}

std::vector<SchemaViolation> JsonSchemaValidator::validate(const json& instance) const {
  std::vector<SchemaViolation> out;
  validate_node(schema_, instance, "", out);
  return out;
}

std::vector<std::string> JsonSchemaValidator::errors(const json& instance) const {
  std::vector<std::string> out;
  for (const auto& v : validate(instance)) out.push_back(v.to_string());
  return out;
}

void JsonSchemaValidator::validate_node(const json& s, const json& inst, const std::string& path,
                                        std::vector<SchemaViolation>& out) const {
  auto fail = [&](const std::string& at, std::string msg) { out.push_back({at, std::move(msg)}); };
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail(path, "no value is allowed here, got " + brief(inst));
    return;
  }
  if (auto it = s.find("type"); it != s.end()) {
    const json types = it->is_array() ? *it : json::array({*it});
    bool ok = false;
    for (const auto& t : types) ok = ok || has_type(inst, t.get<std::string>());
    if (!ok) {
      std::string want;
      for (const auto& t : types) want += (want.empty() ? "" : " or ") + t.get<std::string>();
      fail(path, fmt::format("expected type {}, got {} {}", want, type_of(inst), brief(inst)));
    }
  }
  if (auto it = s.find("enum"); it != s.end()) {
    bool found = false;
    for (const auto& e : *it) found = found || e == inst;
    if (!found) fail(path, fmt::format("expected one of {}, got {}", it->dump(), brief(inst)));
  }
  if (auto it = s.find("const"); it != s.end() && *it != inst)
    fail(path, fmt::format("expected the constant {}, got {}", it->dump(), brief(inst)));
  if (inst.is_number()) {
    if (auto it = s.find("minimum"); it != s.end() && compare_numbers(inst, *it) < 0)
      fail(path, fmt::format("expected a value >= {}, got {}", it->dump(), inst.dump()));
    if (auto it = s.find("maximum"); it != s.end() && compare_numbers(inst, *it) > 0)
      fail(path, fmt::format("expected a value <= {}, got {}", it->dump(), inst.dump()));
    if (auto it = s.find("exclusiveMinimum"); it != s.end() && compare_numbers(inst, *it) <= 0)
      fail(path, fmt::format("expected a value > {}, got {}", it->dump(), inst.dump()));
  }
  if (inst.is_string()) {
    if (auto it = s.find("pattern"); it != s.end()) {
      const std::regex& re = patterns_.at(it->get<std::string>());
      if (!std::regex_search(inst.get<std::string>(), re))
        fail(path, fmt::format("expected a string matching {}, got {}", it->dump(), brief(inst)));
    }
  }
  if (inst.is_object()) {
    const auto props = s.find("properties");
    if (props != s.end())
      for (const auto& [name, sub] : props->items())
        if (auto v = inst.find(name); v != inst.end()) validate_node(sub, *v, path + "/" + json_pointer_escape(name), out);
    if (auto it = s.find("required"); it != s.end())
      for (const auto& name : *it)
        if (!inst.contains(name.get<std::string>()))
          fail(path, fmt::format("missing required property '{}'", name.get<std::string>()));
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      for (const auto& [name, value] : inst.items()) {
        if (props != s.end() && props->contains(name)) continue;
        const std::string at = path + "/" + json_pointer_escape(name);
        if (it->is_boolean() && !it->get<bool>())
          fail(at, fmt::format("unexpected property '{}' (additionalProperties is false)", name));
        else
          validate_node(*it, value, at, out);
      }
    }
  }
  if (inst.is_array()) {
    if (auto it = s.find("items"); it != s.end())
      for (size_t i = 0; i < inst.size(); ++i) validate_node(*it, inst[i], path + "/" + std::to_string(i), out);
    if (auto it = s.find("minItems"); it != s.end() && inst.size() < it->get<uint64_t>())
      fail(path, fmt::format("expected at least {} item(s), got {}", it->get<uint64_t>(), inst.size()));
  }
  if (auto it = s.find("allOf"); it != s.end())
    for (const auto& sub : *it) validate_node(sub, inst, path, out);
  if (auto it = s.find("oneOf"); it != s.end()) {
    std::vector<size_t> matched;
    std::string why;
    for (size_t i = 0; i < it->size(); ++i) {
      std::vector<SchemaViolation> sub;
      validate_node((*it)[i], inst, path, sub);
      if (sub.empty()) {
        matched.push_back(i);
        continue;
      }
      why += fmt::format(" [alternative {}:", i);
      for (const auto& v : sub) {
        why += ' ';
        why += v.to_string();
        why += ';';
      }
      why += "]";
    }
    if (matched.empty()) {
      fail(path, fmt::format("expected exactly one oneOf alternative to match, got none;{}", why));
    } else if (matched.size() > 1) {
      std::string which;
      for (size_t m : matched) which += (which.empty() ? "" : ", ") + std::to_string(m);
      fail(path, fmt::format("expected exactly one oneOf alternative to match, got {} ({})", matched.size(), which));
    }
  }
  if (auto it = s.find("if"); it != s.end()) {
    std::vector<SchemaViolation> cond;
    validate_node(*it, inst, path, cond);
    if (cond.empty())
      if (auto then = s.find("then"); then != s.end()) validate_node(*then, inst, path, out);
  }
}

}  // namespace ccsim::testing
