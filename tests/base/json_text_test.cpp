#include "sim/base/json_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ccsim {
namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonText, DepthUpToTheLimitParses) {
  auto doc = parse_json_text(nested(kMaxJsonDepth), "f.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  size_t depth = 0;
  for (const nlohmann::json* j = &*doc; j->is_array() && !j->empty(); j = &(*j)[0]) ++depth;
  EXPECT_EQ(depth + 1, kMaxJsonDepth);  // the innermost array is empty
}

TEST(JsonText, OneLevelTooDeepIsAnInputErrorAtItsByte) {
  const std::string text = " {\"a\": " + nested(kMaxJsonDepth) + "}";
  auto doc = parse_json_text(text, "f.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_TRUE(doc.status().is_input_error());
  // The object opens level 1 at byte 1; the arrays open levels 2.. from byte 7: level 257 at 7 + 255.
  EXPECT_EQ(doc.status().message().rfind("f.json: JSON nested deeper than 256 levels at byte 262", 0), 0u)
      << doc.status().message();
}

TEST(JsonText, BracketsInsideStringsAndEscapesDoNotCount) {
  const std::string deep_string = "\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"";
  auto doc = parse_json_text("{\"k\": " + deep_string + "}", "f.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["k"].get<std::string>().size(), 2001u);
  EXPECT_TRUE(check_json_depth("[[[", "x", 3).ok());
  EXPECT_FALSE(check_json_depth("[[[[", "x", 3).ok());
  EXPECT_TRUE(check_json_depth("[]]]][[[", "x", 3).ok());  // stray closers never go below zero
}

TEST(JsonText, SyntaxErrorsNameLineAndColumn) {
  auto doc = parse_json_text("{\n  \"a\": 1,,\n}", "f.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().message().rfind("f.json: invalid JSON: line 2, column 10:", 0), 0u) << doc.status().message();
  auto big = parse_json_text("[1e999]", "f.json");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(big.status().is_input_error());
}

}  // namespace
}  // namespace ccsim
