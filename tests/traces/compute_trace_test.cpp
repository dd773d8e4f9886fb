// Compute traces: the shipped AQGB ResNet50 trace against its paper's Table 1, validation errors
// (file, JSON path, expected, found), the JSON round trip, scaling and block merging.

#include "traces/compute_trace.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define EXPECT_CONTAINS(haystack, needle)                                                                              \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

const fs::path kModels = fs::path(CCSIM_SOURCE_DIR) / "traces" / "models";

json minimal() {
  return json::parse(R"({
    "format": "ccsim-compute-trace", "version": 1, "model": "toy",
    "provenance": {"kind": "estimated", "device": "none", "source": "hand-written"},
    "layers": [
      {"name": "a", "params": 10, "forward": "1ms", "backward": 0.002, "activation_bytes": "1KB"},
      {"name": "b", "params": 20, "forward": 0.003, "backward": "4ms"},
      {"name": "c", "params": 0, "forward": 0.0005, "backward": 0.0005, "activation_bytes": 64}
    ]})");
}

std::string error_of(const json& j) {
  auto t = ComputeTrace::from_json(j, "t.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? std::string() : t.status().message();
}

TEST(ComputeTrace, AqgbResnet50MatchesTable1) {
  auto t = ComputeTrace::load(kModels / "resnet50-aqgb-4blocks.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->layers().size(), 4u);
  EXPECT_EQ(t->params(), 25'600'000u);  // 3 M + 5.6 M + 6 M + 11 M
  EXPECT_EQ(t->gradient_bytes(), 102'400'000u);
  EXPECT_NEAR(t->forward_s() + t->backward_s(), 1.5, 1e-12);   // 1.5 s per local iteration
  EXPECT_NEAR(t->forward_s() / 1.5, 0.365, 1e-12);             // FP:BP = 0.365:0.635
  const double fp[] = {41.9, 15.5, 16.5, 26.1}, bp[] = {50.5, 14.2, 12.9, 22.4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(100 * t->layers()[i].forward_s / t->forward_s(), fp[i], 1e-9) << i;
    EXPECT_NEAR(100 * t->layers()[i].backward_s / t->backward_s(), bp[i], 1e-9) << i;
  }
  EXPECT_EQ(t->provenance().kind, "estimated");
}

TEST(ComputeTrace, ReadsUnitsAndRoundTrips) {
  auto t = ComputeTrace::from_json(minimal(), "t.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->params(), 30u);
  EXPECT_DOUBLE_EQ(t->layers()[0].forward_s, 1e-3);
  EXPECT_DOUBLE_EQ(t->layers()[1].backward_s, 4e-3);
  EXPECT_EQ(t->layers()[0].activation_bytes, 1000u);
  EXPECT_EQ(t->gradient_bytes_per_param(), 4u);
  auto again = ComputeTrace::from_json(t->to_json(), "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *t);
}

TEST(ComputeTrace, ScalesAndMergesBlocks) {
  auto t = ComputeTrace::from_json(minimal(), "t.json");
  ASSERT_TRUE(t.ok());
  const ComputeTrace s = t->scaled(2.0);
  EXPECT_DOUBLE_EQ(s.forward_s(), 2 * t->forward_s());
  EXPECT_DOUBLE_EQ(s.backward_s(), 2 * t->backward_s());
  EXPECT_EQ(s.params(), t->params());

  auto m = t->merged({0, 1}, {"a", "b+c"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->layers().size(), 2u);
  EXPECT_EQ(m->layers()[1].name, "b+c");
  EXPECT_EQ(m->layers()[1].params, 20u);
  EXPECT_DOUBLE_EQ(m->layers()[1].forward_s, 0.0035);
  EXPECT_DOUBLE_EQ(m->layers()[1].backward_s, 0.0045);
  EXPECT_EQ(m->layers()[1].activation_bytes, 64u);  // the block's output is its last layer's
  EXPECT_DOUBLE_EQ(m->forward_s() + m->backward_s(), t->forward_s() + t->backward_s());

  EXPECT_FALSE(t->merged({1, 2}, {"x", "y"}).ok());  // must start at 0
  EXPECT_FALSE(t->merged({0, 2, 2}, {"x", "y", "z"}).ok());
  EXPECT_FALSE(t->merged({0, 3}, {"x", "y"}).ok());
  EXPECT_FALSE(t->merged({0}, {"x", "y"}).ok());
  EXPECT_EQ(t->merged({0, 2, 2}).status().pointer(), "/2");  // the offending start
  EXPECT_EQ(t->merged({1}).status().pointer(), "/0");
}

TEST(ComputeTrace, MergedBlocksAreNamedAfterTheirLayers) {
  auto t = ComputeTrace::from_json(minimal(), "t.json");
  ASSERT_TRUE(t.ok());
  auto m = t->merged({0, 1});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->layers().size(), 2u);
  EXPECT_EQ(m->layers()[0].name, t->layers()[0].name);  // a block of one keeps its layer's name
  EXPECT_EQ(m->layers()[1].name, t->layers()[1].name + "-" + t->layers()[2].name);
}

TEST(ComputeTrace, ErrorsNameFilePathExpectedAndFound) {
  json j = minimal();
  j["format"] = "something";
  j["layers"][0]["forwrd"] = 1;
  j["layers"][1]["forward"] = "3 parsecs";
  j["layers"][1]["backward"] = -1;
  j["layers"][2]["name"] = "a";
  j["provenance"]["kind"] = "guessed";
  j["gradient_bytes_per_param"] = 3;
  const std::string m = error_of(j);
  EXPECT_CONTAINS(m, "t.json: /format: expected \"ccsim-compute-trace\", found string \"something\"");
  EXPECT_CONTAINS(m, "t.json: /layers/0/forwrd: unknown key 'forwrd' (did you mean 'forward'?)");
  EXPECT_CONTAINS(m, "t.json: /layers/1/forward: ");
  EXPECT_CONTAINS(m, "t.json: /layers/1/backward: expected a non-negative value in s, found -1");
  EXPECT_CONTAINS(m, "t.json: /layers/2/name: duplicate layer name 'a'");
  EXPECT_CONTAINS(m, "t.json: /provenance/kind: expected \"estimated\" or \"measured\", found \"guessed\"");
  EXPECT_CONTAINS(m, "t.json: /gradient_bytes_per_param: expected 2 (fp16/bf16) or 4 (fp32), found 3");

  json k = minimal();
  k.erase("layers");
  EXPECT_CONTAINS(error_of(k), "t.json: /: missing required key 'layers'");
  k = minimal();
  k["layers"] = json::array();
  EXPECT_CONTAINS(error_of(k), "/layers: expected a non-empty array of layers, found array []");
  k = minimal();
  for (auto& l : k["layers"]) l["params"] = 0;
  EXPECT_CONTAINS(error_of(k), "/layers: expected at least one layer with parameters, found none");
}

TEST(ComputeTrace, MissingAndMalformedFiles) {
  auto missing = ComputeTrace::load("no/such/trace.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(missing.status().message(), "no/such/trace.json: no such file");

  const fs::path bad = fs::temp_directory_path() / ("ccsim_trace_" + std::to_string(::getpid()) + ".json");
  std::ofstream(bad) << "{ \"format\": ";
  auto parsed = ComputeTrace::load(bad);
  fs::remove(bad);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(parsed.status().message(), "invalid JSON");
}

}  // namespace
}  // namespace ccsim::traces
