#include "algorithms/params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ccsim::algo {


ParamTable& ParamTable::add_int(std::string name, std::string description, int64_t def, int64_t min, int64_t max,
                                bool power_of_two) {
  ParamSpec s{std::move(name), std::move(description), ParamType::kInt, def, static_cast<double>(min),
              static_cast<double>(max), {}, power_of_two};
  specs_.push_back(std::move(s));
  return *this;
}

ParamTable& ParamTable::add_number(std::string name, std::string description, double def, double min, double max) {
  specs_.push_back(ParamSpec{std::move(name), std::move(description), ParamType::kNumber, def, min, max, {}, false});
  return *this;
}

ParamTable& ParamTable::add_bool(std::string name, std::string description, bool def) {
  specs_.push_back(ParamSpec{std::move(name), std::move(description), ParamType::kBool, def, {}, {}, {}, false});
  return *this;
}

ParamTable& ParamTable::add_choice(std::string name, std::string description, std::string def,
                                   std::vector<std::string> choices) {
  specs_.push_back(ParamSpec{std::move(name), std::move(description), ParamType::kChoice, def, {}, {}, std::move(choices), false});
  return *this;
}

const ParamSpec* ParamTable::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

nlohmann::json ParamTable::resolve(const nlohmann::json& input, const std::string& path, Diagnostics& diag) const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& s : specs_) out[s.name] = s.default_value;
  if (input.is_null()) return out;
  if (!input.is_object()) {
    diag.add(path, fmt::format("expected an object of parameters, got {}", describe_json(input)));
    return out;
  }
  std::vector<std::string> names;
  for (const auto& s : specs_) names.push_back(s.name);
  for (const auto& [key, value] : input.items()) {
    const std::string p = path + "/" + json_pointer_escape(key);
    const ParamSpec* s = find(key);
    if (s == nullptr) {
      const std::string near = closest_match(key, names);
      std::string valid;
      for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
      diag.add(p, fmt::format("unknown parameter '{}'{}; valid: {}", key,
                              near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), valid.empty() ? "(none)" : valid));
      continue;
    }
    auto range_text = [&] { return fmt::format("in [{}, {}]", *s->min, *s->max); };
    switch (s->type) {
      case ParamType::kInt: {
        const bool integral = value.is_number_integer() ||
                              (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
        if (!integral) {
          diag.add(p, fmt::format("expected an integer {}, got {}", range_text(), describe_json(value)));
          break;
        }
        const double v = value.get<double>();
        if (v < *s->min || v > *s->max) {
          diag.add(p, fmt::format("expected an integer {}, got {}", range_text(), describe_json(value)));
          break;
        }
        const auto iv = static_cast<int64_t>(v);
        if (s->power_of_two && (iv <= 0 || (iv & (iv - 1)) != 0)) {
          diag.add(p, fmt::format("expected a power of two {}, got {}", range_text(), iv));
          break;
        }
        out[key] = iv;
        break;
      }
      case ParamType::kNumber: {
        if (!value.is_number()) {
          diag.add(p, fmt::format("expected a number {}, got {}", range_text(), describe_json(value)));
          break;
        }
        const double v = value.get<double>();
        if (!(v >= *s->min && v <= *s->max)) {
          diag.add(p, fmt::format("expected a number {}, got {}", range_text(), describe_json(value)));
          break;
        }
        out[key] = v;
        break;
      }
      case ParamType::kBool:
        if (!value.is_boolean()) diag.add(p, fmt::format("expected true or false, got {}", describe_json(value)));
        else out[key] = value;
        break;
      case ParamType::kChoice: {
        std::string valid;
        for (const auto& c : s->choices) valid += (valid.empty() ? "" : ", ") + c;
        if (!value.is_string()) {
          diag.add(p, fmt::format("expected one of {}, got {}", valid, describe_json(value)));
          break;
        }
        const std::string v = value.get<std::string>();
        if (std::find(s->choices.begin(), s->choices.end(), v) == s->choices.end()) {
          const std::string near = closest_match(v, s->choices);
          diag.add(p, fmt::format("expected one of {}, got \"{}\"{}", valid, v,
                                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
          break;
        }
        out[key] = v;
        break;
      }
    }
  }
  return out;
}

nlohmann::json ParamTable::json_schema() const {
  nlohmann::json props = nlohmann::json::object();
  for (const auto& s : specs_) {
    nlohmann::json p;
    p["description"] = s.description;
    p["default"] = s.default_value;
    switch (s.type) {
      case ParamType::kInt: p["type"] = "integer"; p["minimum"] = *s.min; p["maximum"] = *s.max; break;
      case ParamType::kNumber: p["type"] = "number"; p["minimum"] = *s.min; p["maximum"] = *s.max; break;
      case ParamType::kBool: p["type"] = "boolean"; break;
      case ParamType::kChoice: p["type"] = "string"; p["enum"] = s.choices; break;
    }
    props[s.name] = p;
  }
  return nlohmann::json{{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
}

}  // namespace ccsim::algo
