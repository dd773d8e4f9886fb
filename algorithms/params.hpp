#pragma once
/// \file
/// Typed compressor parameters, declared once (STYLE rule 3). The JSON loader, `ccsim list`, the
/// JSON Schema and error messages are all generated from a ParamTable. Values are never clamped:
/// out-of-range input is an error naming the range.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"
#include "sim/base/json_fields.hpp"

namespace ccsim::algo {

enum class ParamType { kInt, kNumber, kBool, kChoice };

/// One declared parameter.
struct ParamSpec {
  std::string name;
  std::string description;
  ParamType type = ParamType::kNumber;
  nlohmann::json default_value;
  std::optional<double> min;       ///< inclusive lower bound (numbers and ints)
  std::optional<double> max;       ///< inclusive upper bound
  std::vector<std::string> choices;  ///< kChoice only
  bool power_of_two = false;       ///< kInt only: value must be a power of two
};

/// The ordered parameter declarations of one compressor.
class ParamTable {
 public:
  ParamTable& add_int(std::string name, std::string description, int64_t def, int64_t min, int64_t max,
                      bool power_of_two = false);
  ParamTable& add_number(std::string name, std::string description, double def, double min, double max);
  ParamTable& add_bool(std::string name, std::string description, bool def);
  ParamTable& add_choice(std::string name, std::string description, std::string def, std::vector<std::string> choices);

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec* find(const std::string& name) const;

  /// Validates `input` (an object, or null for "all defaults") found at JSON Pointer `path`,
  /// appending every problem to `diag`. Returns the parameters with defaults filled in.
  nlohmann::json resolve(const nlohmann::json& input, const std::string& path, Diagnostics& diag) const;
  /// A JSON Schema object describing valid inputs.
  nlohmann::json json_schema() const;

 private:
  std::vector<ParamSpec> specs_;
};

/// Resolved parameters (every declared name present) with typed accessors.
class Params {
 public:
  Params() = default;
  explicit Params(nlohmann::json values) : values_(std::move(values)) {}
  int64_t get_int(const std::string& name) const { return values_.at(name).get<int64_t>(); }
  double get_number(const std::string& name) const { return values_.at(name).get<double>(); }
  bool get_bool(const std::string& name) const { return values_.at(name).get<bool>(); }
  std::string get_string(const std::string& name) const { return values_.at(name).get<std::string>(); }
  const nlohmann::json& json() const { return values_; }

 private:
  nlohmann::json values_ = nlohmann::json::object();
};

/// Describes a JSON value for error messages (sim/base/json_fields.hpp).
using ccsim::describe_json;

}  // namespace ccsim::algo
