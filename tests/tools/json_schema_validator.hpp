#pragma once
/// \file
/// A small JSON Schema validator (draft 2020-12 semantics) for the subset of keywords that
/// scenarios/schema.json uses. It is deliberately independent of the scenario loader, so that
/// tests can check the generated schema and the loader against each other.
///
/// Supported keywords: type (incl. integer vs number), properties, required,
/// additionalProperties (boolean or schema), enum, const, minimum, maximum, exclusiveMinimum,
/// pattern (std::regex, ECMAScript, unanchored search as the spec requires), items, minItems,
/// oneOf (exactly one), allOf, if/then. Annotations ($schema, title, description, default) are
/// ignored. Any other keyword makes the constructor throw, so an unsupported schema is never
/// silently half-checked.

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace ccsim::testing {

/// One way in which an instance fails its schema.
struct SchemaViolation {
  std::string path;     ///< JSON Pointer into the instance ("" is the root)
  std::string message;  ///< what was expected, and what was found
  /// "<path>: <message>", the root written as "/".
  std::string to_string() const;
};

/// Validates JSON instances against one schema.
class JsonSchemaValidator {
 public:
  /// Checks that `schema` only uses supported keywords with well-formed values.
  /// Throws std::invalid_argument naming the schema location otherwise.
  explicit JsonSchemaValidator(nlohmann::json schema);

  /// Every violation found (empty when `instance` is valid). The order is deterministic: per schema
  /// node, type, enum, const, bounds, pattern, properties, required, additionalProperties, items,
  /// minItems, allOf, oneOf, if/then.
  std::vector<SchemaViolation> validate(const nlohmann::json& instance) const;
  /// validate() rendered as strings "<JSON pointer>: <message>".
  std::vector<std::string> errors(const nlohmann::json& instance) const;
  /// True when `instance` is valid.
  bool accepts(const nlohmann::json& instance) const { return validate(instance).empty(); }

 private:
  void check_schema(const nlohmann::json& schema, const std::string& where);
  void validate_node(const nlohmann::json& schema, const nlohmann::json& instance, const std::string& path,
                     std::vector<SchemaViolation>& out) const;

  nlohmann::json schema_;
  std::map<std::string, std::regex> patterns_;  ///< compiled once, by pattern text
};

}  // namespace ccsim::testing
