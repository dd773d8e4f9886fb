#include "sim/base/json_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ccsim {
namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonText, Utf8IsCheckedSequenceBySequence) {
  EXPECT_TRUE(check_utf8("plain ascii", "x").ok());
  EXPECT_TRUE(check_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF", "x").ok());  // é € 😀 U+10FFFF
  const struct {
    std::string text;
    std::string want;
  } bad[] = {
      {"a\xFB", "x: not valid UTF-8 at byte 1 (0xFB)"},             // not a lead byte
      {"ab\x80", "x: not valid UTF-8 at byte 2 (0x80)"},            // a stray continuation
      {"\xC3", "x: not valid UTF-8 at byte 0 (0xC3)"},              // truncated
      {"\xC0\xAF", "x: not valid UTF-8 at byte 0 (0xC0)"},          // overlong '/'
      {"\xE0\x80\xAF", "x: not valid UTF-8 at byte 0 (0xE0)"},      // overlong, 3 bytes
      {"\xED\xA0\x80", "x: not valid UTF-8 at byte 0 (0xED)"},      // a surrogate
      {"\xF4\x90\x80\x80", "x: not valid UTF-8 at byte 0 (0xF4)"},  // past U+10FFFF
      {"\xE2\x82" "A", "x: not valid UTF-8 at byte 0 (0xE2)"},      // continuation missing
  };
  for (const auto& b : bad) {
    const Status st = check_utf8(b.text, "x");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), b.want);
  }
}

TEST(JsonText, MessagesQuotingInvalidUtf8StayUtf8) {
  // The parser quotes what it last read; a byte that is not UTF-8 is written as \xNN.
  const auto r = parse_json_text("{\"name\": \"caf\xE9\"}", "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.json: invalid JSON: line 1, column "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("caf\\xE9"), std::string::npos) << r.status().message();
  EXPECT_TRUE(check_utf8(r.status().message(), "message").ok());
  EXPECT_EQ(escape_invalid_utf8("a\xFF\xC3\xA9b\xC3"), "a\\xFF\xC3\xA9b\\xC3");
}

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

TEST(JsonText, ADuplicateKeyIsAnInputErrorAtItsPointer) {
  // nlohmann::json keeps one of two equal keys silently; the first repeated key is reported with
  // its pointer, through objects and arrays.
  auto top = parse_json_text(R"({"a": 1, "b": 2, "a": 3})", "f.json");
  ASSERT_FALSE(top.ok());
  EXPECT_TRUE(top.status().is_input_error());
  EXPECT_EQ(top.status().message().rfind("f.json: /a: duplicate key", 0), 0u) << top.status().message();
  auto deep = parse_json_text(R"({"x": [1, {"k": 0}, [2, 3], {"y": {"z~/": 1, "z~/": 2}}], "w": 0})", "f.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message().rfind("f.json: /x/3/y/z~0~1: duplicate key", 0), 0u) << deep.status().message();
  // The same key in sibling objects, or in an object and its parent, is no duplicate.
  auto fine = parse_json_text(R"({"a": {"a": 1}, "l": [{"k": 1}, {"k": 2}], "k": [{"a": {"b": 1}, "b": 2}]})", "f.json");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ((*fine)["l"][1]["k"], 2);
}

}  // namespace
}  // namespace ccsim
