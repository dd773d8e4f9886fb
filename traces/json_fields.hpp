#pragma once
/// \file
/// Small helpers the trace readers share for reporting and reading JSON header fields.

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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

}  // namespace ccsim::traces::detail
