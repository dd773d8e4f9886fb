#pragma once
/// \file
/// Small helpers the trace readers share for reporting and reading JSON header fields.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"

namespace ccsim::traces::detail {

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

}  // namespace ccsim::traces::detail
