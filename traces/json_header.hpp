#pragma once
/// \file
/// Small helpers the trace readers share for reporting and reading JSON header fields.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"
#include "sim/base/json_text.hpp"
#include "sim/base/status.hpp"
#include "sim/base/units.hpp"

namespace ccsim::traces::detail {

/// The parsed JSON file `path`, or an error naming it: kNotFound ("no such file (a `what`)"), an
/// I/O error, or an input error for text that is not JSON.
inline Result<nlohmann::json> read_json_file(const std::filesystem::path& path, const char* what) {
  const std::string name = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found(fmt::format("{}: no such file ({})", name, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open", name));
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), name);
}

/// A short description of a JSON value for error messages: an integer as itself, anything else as
/// its type and (up to 40 characters of) its text.
inline std::string describe_json(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return fmt::format("{}", j.get<uint64_t>());
  if (j.is_number_integer()) return fmt::format("{}", j.get<int64_t>());
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return fmt::format("{} {}", j.type_name(), s);
}

/// A non-negative integer that fits in uint64, or nullopt.
inline std::optional<uint64_t> json_as_u64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return static_cast<uint64_t>(j.get<int64_t>());
  return std::nullopt;
}

/// "a, b, c".
inline std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// Reports unknown keys of `obj` (with the nearest valid one) and missing required ones at `path`;
/// true if all is well.
inline bool check_keys(const nlohmann::json& obj, const std::string& path, const std::vector<std::string>& required,
                       const std::vector<std::string>& optional, Diagnostics& diag) {
  std::vector<std::string> valid = required;
  valid.insert(valid.end(), optional.begin(), optional.end());
  bool good = true;
  for (const auto& [key, value] : obj.items()) {
    if (std::find(valid.begin(), valid.end(), key) != valid.end()) continue;
    const std::string near = closest_match(key, valid);
    diag.add(path + "/" + json_pointer_escape(key),
             fmt::format("unknown key '{}'{}; valid keys here: {}", key,
                         near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(valid)));
    good = false;
  }
  for (const auto& key : required) {
    if (obj.contains(key)) continue;
    diag.add(path, fmt::format("missing required key '{}'", key));
    good = false;
  }
  return good;
}

/// Member `key` of `obj` as a quantity (a number in base units or a string with units), finite
/// and >= 0 (> 0 if `positive`), or nullopt after an error at its path.
inline std::optional<double> read_quantity(const nlohmann::json& obj, const std::string& path, const char* key,
                                           UnitKind kind, bool positive, Diagnostics& diag) {
  const nlohmann::json& v = obj.at(key);
  const std::string where = path + "/" + key;
  double x = 0;
  if (v.is_number()) {
    x = v.get<double>();
  } else if (v.is_string()) {
    auto parsed = parse_quantity(v.get<std::string>(), kind);
    if (!parsed.ok()) {
      diag.add(where, parsed.status().message());
      return std::nullopt;
    }
    x = *parsed;
  } else {
    diag.add(where, fmt::format("expected a number in {} or a string with units ({}), found {}", base_unit_name(kind),
                                unit_examples(kind), describe_json(v)));
    return std::nullopt;
  }
  if (!std::isfinite(x) || x < 0 || (positive && x == 0)) {
    diag.add(where, fmt::format("expected a {} value in {}, found {}", positive ? "positive" : "non-negative",
                                base_unit_name(kind), describe_json(v)));
    return std::nullopt;
  }
  return x;
}

/// Member `key` of `obj` as a non-empty string, or nullopt after an error at its path.
inline std::optional<std::string> read_string(const nlohmann::json& obj, const std::string& path, const char* key,
                                              Diagnostics& diag) {
  const nlohmann::json& v = obj.at(key);
  if (v.is_string() && !v.get<std::string>().empty()) return v.get<std::string>();
  diag.add(path + "/" + key, fmt::format("expected a non-empty string, found {}", describe_json(v)));
  return std::nullopt;
}

}  // namespace ccsim::traces::detail
