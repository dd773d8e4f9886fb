// Unit tests of the test-only JSON Schema validator: each keyword accepts and rejects small
// hand-written cases, with the JSON Pointer of every violation checked.

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/tools/json_schema_validator.hpp"

namespace ccsim::testing {
namespace {

using nlohmann::json;

// The violation paths, in order.
std::vector<std::string> paths(const std::vector<SchemaViolation>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.path);
  return out;
}

// Asserts exactly one violation, at `path`, whose message contains `needle`.
void expect_one(const JsonSchemaValidator& v, const json& instance, const std::string& path, const std::string& needle) {
  const auto errs = v.validate(instance);
  ASSERT_EQ(errs.size(), 1u) << instance.dump() << " -> " << ::testing::PrintToString(v.errors(instance));
  EXPECT_EQ(errs[0].path, path);
  EXPECT_NE(errs[0].message.find(needle), std::string::npos) << errs[0].message;
}

TEST(JsonSchemaValidator, TypeDistinguishesIntegerFromNumber) {
  const JsonSchemaValidator integer(json{{"type", "integer"}});
  EXPECT_TRUE(integer.accepts(3));
  EXPECT_TRUE(integer.accepts(-3));
  EXPECT_TRUE(integer.accepts(json::parse("18446744073709551615")));
  EXPECT_TRUE(integer.accepts(2.0));  // draft 2020-12: a zero fractional part is an integer
  expect_one(integer, 2.5, "", "expected type integer");
  expect_one(integer, "3", "", "got string");
  expect_one(integer, true, "", "got boolean");

  const JsonSchemaValidator number(json{{"type", "number"}});
  EXPECT_TRUE(number.accepts(2.5));
  EXPECT_TRUE(number.accepts(7));
  expect_one(number, "2.5", "", "expected type number");
  expect_one(number, nullptr, "", "got null");
}

TEST(JsonSchemaValidator, TypeCoversEveryNameAndTypeLists) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"null", nullptr}, {"boolean", false}, {"string", "x"}, {"array", json::array()}, {"object", json::object()}};
  for (const auto& [type, good] : cases) {
    SCOPED_TRACE(type);
    const JsonSchemaValidator v(json{{"type", type}});
    EXPECT_TRUE(v.accepts(good));
    EXPECT_FALSE(v.accepts(1.5));
  }
  const JsonSchemaValidator either(json{{"type", {"string", "null"}}});
  EXPECT_TRUE(either.accepts("x"));
  EXPECT_TRUE(either.accepts(nullptr));
  expect_one(either, 1, "", "expected type string or null");
}

TEST(JsonSchemaValidator, PropertiesValidateOnlyPresentKeysAtTheirPointer) {
  const JsonSchemaValidator v(json::parse(R"({"properties": {"a": {"type": "string"},
                                                             "b/c": {"properties": {"d~e": {"type": "integer"}}}}})"));
  EXPECT_TRUE(v.accepts(json::object()));
  EXPECT_TRUE(v.accepts(json{{"a", "x"}, {"other", 1}}));
  EXPECT_TRUE(v.accepts(5));  // properties only constrain objects
  expect_one(v, json{{"a", 1}}, "/a", "expected type string");
  expect_one(v, json::parse(R"({"b/c": {"d~e": "x"}})"), "/b~1c/d~0e", "expected type integer");
}

TEST(JsonSchemaValidator, RequiredReportsEachMissingKey) {
  const JsonSchemaValidator v(json::parse(R"({"required": ["name", "seed"]})"));
  EXPECT_TRUE(v.accepts(json{{"name", 1}, {"seed", 2}}));
  EXPECT_TRUE(v.accepts("not an object"));
  const auto errs = v.validate(json::object());
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].message, "missing required property 'name'");
  EXPECT_EQ(errs[1].message, "missing required property 'seed'");
  EXPECT_EQ(errs[0].path, "");
  expect_one(v, json{{"name", 1}}, "", "'seed'");
}

TEST(JsonSchemaValidator, AdditionalPropertiesFalseRejectsUndeclaredKeys) {
  const JsonSchemaValidator v(json::parse(R"({"properties": {"nodes": {}}, "additionalProperties": false})"));
  EXPECT_TRUE(v.accepts(json{{"nodes", 8}}));
  EXPECT_TRUE(v.accepts(json::object()));
  expect_one(v, json{{"nodes", 8}, {"node", 8}}, "/node", "unexpected property 'node'");
  EXPECT_EQ(paths(v.validate(json{{"x", 1}, {"y", 2}})), (std::vector<std::string>{"/x", "/y"}));

  // Without "properties" every key is additional; a schema value validates them instead.
  const JsonSchemaValidator none(json{{"additionalProperties", false}});
  expect_one(none, json{{"a", 1}}, "/a", "unexpected property");
  const JsonSchemaValidator typed(json{{"additionalProperties", {{"type", "integer"}}}});
  EXPECT_TRUE(typed.accepts(json{{"a", 1}}));
  expect_one(typed, json{{"a", "x"}}, "/a", "expected type integer");
}

TEST(JsonSchemaValidator, EnumAndConstCompareWholeValues) {
  const JsonSchemaValidator e(json::parse(R"({"enum": ["ring", "star", 3, [1, 2]]})"));
  EXPECT_TRUE(e.accepts("ring"));
  EXPECT_TRUE(e.accepts(3));
  EXPECT_TRUE(e.accepts(3.0));  // numbers compare by value
  EXPECT_TRUE(e.accepts(json::array({1, 2})));
  expect_one(e, "Ring", "", "expected one of");
  expect_one(e, json::array({2, 1}), "", "got [2,1]");

  const JsonSchemaValidator c(json{{"const", "int8"}});
  EXPECT_TRUE(c.accepts("int8"));
  expect_one(c, "int4", "", "expected the constant \"int8\"");
  expect_one(c, 8, "", "got 8");
}

TEST(JsonSchemaValidator, MinimumMaximumAreInclusiveAndExact) {
  const JsonSchemaValidator v(json{{"minimum", 2}, {"maximum", 1048576}});
  EXPECT_TRUE(v.accepts(2));
  EXPECT_TRUE(v.accepts(1048576));
  EXPECT_TRUE(v.accepts(2.5));
  EXPECT_TRUE(v.accepts("1"));  // only numbers are range-checked
  expect_one(v, 1, "", "expected a value >= 2");
  expect_one(v, 1.999, "", ">= 2");
  expect_one(v, 1048577, "", "expected a value <= 1048576");
  expect_one(v, -5, "", ">= 2");

  // int64 bounds are compared exactly, not through double (INT64_MAX + 1 rounds to INT64_MAX).
  const JsonSchemaValidator big(json{{"minimum", 0}, {"maximum", INT64_MAX}});
  EXPECT_TRUE(big.accepts(json::parse("9223372036854775807")));
  expect_one(big, json::parse("9223372036854775808"), "", "<= 9223372036854775807");
  expect_one(big, json::parse("-1"), "", ">= 0");
}

TEST(JsonSchemaValidator, ExclusiveMinimumRejectsTheBound) {
  const JsonSchemaValidator v(json{{"exclusiveMinimum", 0}});
  EXPECT_TRUE(v.accepts(1e-300));
  EXPECT_TRUE(v.accepts(1));
  expect_one(v, 0, "", "expected a value > 0");
  expect_one(v, 0.0, "", "> 0");
  expect_one(v, -5, "", "> 0");
}

TEST(JsonSchemaValidator, PatternIsAnUnanchoredEcmaScriptSearch) {
  const JsonSchemaValidator unanchored(json{{"pattern", "b+"}});
  EXPECT_TRUE(unanchored.accepts("abbbc"));
  EXPECT_TRUE(unanchored.accepts(5));  // only strings are matched
  expect_one(unanchored, "ac", "", "expected a string matching");

  const JsonSchemaValidator anchored(json{{"pattern", "^[0-9]+(\\.[0-9]+)? *(Gbps|GB/s)?$"}});
  EXPECT_TRUE(anchored.accepts("100Gbps"));
  EXPECT_TRUE(anchored.accepts("12.5 GB/s"));
  EXPECT_TRUE(anchored.accepts("7"));
  expect_one(anchored, "100Gbsp", "", "got \"100Gbsp\"");
  expect_one(anchored, "-100Gbps", "", "matching");
}

TEST(JsonSchemaValidator, ItemsAndMinItemsCheckArrays) {
  const JsonSchemaValidator v(json::parse(R"({"type": "array", "items": {"type": "string"}, "minItems": 1})"));
  EXPECT_TRUE(v.accepts(json::array({"a", "b"})));
  expect_one(v, json::array(), "", "expected at least 1 item(s), got 0");
  EXPECT_EQ(paths(v.validate(json::array({"a", 1, "c", false}))), (std::vector<std::string>{"/1", "/3"}));
  // Built in code, 1 is a signed integer; parsed from text, an unsigned one. Both are accepted.
  const JsonSchemaValidator built(json{{"minItems", 2}});
  expect_one(built, json::array({1}), "", "at least 2");
  EXPECT_TRUE(built.accepts(json::array({1, 2})));
  EXPECT_THROW(JsonSchemaValidator{json({{"minItems", -1}})}, std::invalid_argument);
  const JsonSchemaValidator objects(json::parse(R"({"items": {"properties": {"s": {"type": "string"}}}})"));
  expect_one(objects, json::parse(R"([{"s": "x"}, {"s": 2}])"), "/1/s", "expected type string");
}

TEST(JsonSchemaValidator, OneOfRequiresExactlyOneMatch) {
  const JsonSchemaValidator v(json::parse(
      R"({"oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": "^[0-9]+B$"}]})"));
  EXPECT_TRUE(v.accepts(5));
  EXPECT_TRUE(v.accepts("25B"));
  expect_one(v, -5, "", "got none");
  expect_one(v, "25X", "", "alternative 1");
  expect_one(v, true, "", "alternative 0");

  const JsonSchemaValidator overlapping(json::parse(R"({"oneOf": [{"type": "number"}, {"minimum": 0}]})"));
  EXPECT_TRUE(overlapping.accepts(-1));     // only the first matches
  EXPECT_TRUE(overlapping.accepts("str"));  // only the second matches (minimum ignores strings)
  expect_one(overlapping, 3, "", "got 2 (0, 1)");
}

TEST(JsonSchemaValidator, AllOfAppliesEverySubschema) {
  const JsonSchemaValidator v(json::parse(R"({"allOf": [{"type": "integer"}, {"minimum": 2}, {"maximum": 4}]})"));
  EXPECT_TRUE(v.accepts(3));
  expect_one(v, 5, "", "<= 4");
  EXPECT_EQ(v.validate(1.5).size(), 2u);  // not an integer, and below the minimum
}

TEST(JsonSchemaValidator, IfThenAppliesThenOnlyWhenIfMatches) {
  const JsonSchemaValidator v(json::parse(R"({
    "properties": {"scheme": {"type": "string"}, "params": {"type": "object"}},
    "allOf": [
      {"if": {"properties": {"scheme": {"const": "int8"}}, "required": ["scheme"]},
       "then": {"properties": {"params": {"properties": {"block": {"type": "integer", "minimum": 8}},
                                          "additionalProperties": false}}}},
      {"if": {"properties": {"scheme": {"const": "bf16"}}, "required": ["scheme"]},
       "then": {"properties": {"params": {"additionalProperties": false}}}}]})"));
  EXPECT_TRUE(v.accepts(json::parse(R"({"scheme": "int8", "params": {"block": 256}})")));
  EXPECT_TRUE(v.accepts(json::parse(R"({"scheme": "bf16", "params": {}})")));
  EXPECT_TRUE(v.accepts(json::parse(R"({"params": {"anything": 1}})")));  // no scheme: no "if" holds
  EXPECT_TRUE(v.accepts(json::parse(R"({"scheme": "fp32", "params": {"anything": 1}})")));
  expect_one(v, json::parse(R"({"scheme": "int8", "params": {"block": 4}})"), "/params/block", ">= 8");
  expect_one(v, json::parse(R"({"scheme": "int8", "params": {"blok": 4}})"), "/params/blok", "unexpected property");
  expect_one(v, json::parse(R"({"scheme": "bf16", "params": {"block": 4}})"), "/params/block", "unexpected");
}

TEST(JsonSchemaValidator, BooleanSchemasAndAnnotations) {
  const JsonSchemaValidator v(json::parse(R"({"$schema": "https://json-schema.org/draft/2020-12/schema",
      "title": "t", "description": "d", "default": 1, "properties": {"never": false, "always": true}})"));
  EXPECT_TRUE(v.accepts(json{{"always", 1}}));
  expect_one(v, json{{"never", 1}}, "/never", "no value is allowed");
}

TEST(JsonSchemaValidator, ReportsEveryViolationOfADocument) {
  const JsonSchemaValidator v(json::parse(R"({"type": "object", "additionalProperties": false, "required": ["name"],
      "properties": {"name": {"type": "string"}, "nodes": {"type": "integer", "minimum": 2}}})"));
  const auto errs = v.errors(json::parse(R"({"nodes": 1, "nodse": 2})"));
  EXPECT_EQ(errs, (std::vector<std::string>{"/nodes: expected a value >= 2, got 1",
                                            "/: missing required property 'name'",
                                            "/nodse: unexpected property 'nodse' (additionalProperties is false)"}));
}

TEST(JsonSchemaValidator, RejectsUnsupportedOrMalformedSchemas) {
  EXPECT_THROW(JsonSchemaValidator{json({{"anyOf", json::array({json::object()})}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json({{"properties", {{"a", {{"$ref", "#/x"}}}}}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json({{"type", "int"}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json({{"pattern", "(unclosed"}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json({{"minimum", "3"}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json({{"oneOf", json::array()}})}, std::invalid_argument);
  EXPECT_THROW(JsonSchemaValidator{json(42)}, std::invalid_argument);
  try {
    const JsonSchemaValidator v(json({{"properties", {{"a", {{"else", true}}}}}}));
    FAIL() << "accepted an unsupported keyword";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/properties/a/else"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ccsim::testing
