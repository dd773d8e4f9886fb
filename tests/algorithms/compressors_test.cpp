#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "algorithms/registry.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "tests/algorithms/unbiased.hpp"

namespace ccsim::algo {
namespace {

using testing::test_vector;

TEST(Registry, ListsBuiltinsAndRejectsUnknownNames) {
  auto& reg = CompressorRegistry::global();
  for (const char* name : {"fp32", "bf16", "int8"}) EXPECT_NE(reg.find(name), nullptr) << name;
  auto bad = reg.create("int9", nlohmann::json::object());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("valid: fp32, bf16, int8"), std::string::npos) << bad.status().message();
}

TEST(Registry, ValidatesParametersWithoutClamping) {
  auto& reg = CompressorRegistry::global();
  auto r = reg.create("int8", {{"block", 100}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/params/block: expected a power of two"), std::string::npos) << r.status().message();
  r = reg.create("int8", {{"blok", 64}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did you mean 'block'"), std::string::npos) << r.status().message();
  r = reg.create("int8", {{"block", 1 << 20}});
  EXPECT_FALSE(r.ok());
  r = reg.create("int8", {{"rounding", "nearst"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did you mean 'nearest'"), std::string::npos);
  EXPECT_TRUE(reg.create("int8", {{"block", 64}, {"rounding", "nearest"}}).ok());
  // Constraints between parameters: each valid alone, not together.
  r = reg.create("tfp", {{"k", 20}, {"base", "fp16"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/params/k: expected an integer in [7, 16] with base fp16, got 20"),
            std::string::npos)
      << r.status().message();
  EXPECT_TRUE(reg.create("tfp", {{"k", 12}, {"base", "fp16"}}).ok());
}

// A compressor made by the registry carries its resolved parameters (every declared one, the
// defaults filled in; compact JSON with sorted keys), which pick its curves in a device profile.
TEST(Registry, MadeCompressorsCarryTheirResolvedParameters) {
  auto& reg = CompressorRegistry::global();
  auto r = reg.create("int8", {{"rounding", "nearest"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const nlohmann::json made = nlohmann::json::parse((*r)->params());
  Diagnostics diag;
  EXPECT_EQ(made, reg.find("int8")->params.resolve({{"rounding", "nearest"}}, "", diag));
  EXPECT_EQ(made["rounding"], "nearest");
  EXPECT_EQ(made.size(), reg.find("int8")->params.specs().size());
  EXPECT_EQ((*r)->params(), made.dump());
  auto d = reg.create("mxfp8", nlohmann::json::object());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(nlohmann::json::parse((*d)->params())["global_scaling"], "block");
}

// One spelling of a scheme instance: non-default parameters only, keys in order, numbers in their
// shortest form whatever JSON type they came as.
TEST(Registry, LabelsNameTheNonDefaultParametersInOneSpelling) {
  EXPECT_EQ(scheme_label("dynamiq", {{"budget", 3}}), "dynamiq(budget=3)");
  EXPECT_EQ(scheme_label("dynamiq", {{"budget", 3.0}}), "dynamiq(budget=3)");
  EXPECT_EQ(scheme_label("dynamiq", {{"budget", 3.5}}), "dynamiq(budget=3.5)");
  EXPECT_EQ(scheme_label("dynamiq", {{"budget", 5}}), "dynamiq");  // the default
  EXPECT_EQ(scheme_label("int8", {{"rounding", "nearest"}, {"block", 128}}), "int8(block=128,rounding=nearest)");
  EXPECT_EQ(scheme_label("mxfp8", nlohmann::json::object()), "mxfp8");
  // A made compressor's resolved parameters (every one present) give the same label.
  auto made = CompressorRegistry::global().create("dynamiq", {{"budget", 3}});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(scheme_label("dynamiq", nlohmann::json::parse((*made)->params())), "dynamiq(budget=3)");
  EXPECT_EQ(scheme_label("nosuch", {{"a", 1}}), "nosuch");
}

// payload_bytes is the codes' part of wire_bytes: at most all of it, and for the formats with
// block scales exactly the packed codes.
TEST(Registry, PayloadIsTheCodesPartOfTheWireBytes) {
  auto& reg = CompressorRegistry::global();
  for (const auto& info : reg.all()) {
    auto comp = reg.create(info.name, nlohmann::json::object());
    ASSERT_TRUE(comp.ok());
    if ((*comp)->plan_format(4096, 4).wire_bytes() > 0 || (*comp)->reduced_elements(4096) != 4096) continue;
    const TensorSpec spec{0, 4096};
    EXPECT_LE((*comp)->payload_bytes(spec, {1, 4}), (*comp)->wire_bytes(spec, {1, 4})) << info.name;
  }
  auto int8 = reg.create("int8", {{"block", 256}});
  EXPECT_EQ((*int8)->payload_bytes({0, 4096}, {1, 4}), 4096u);
  EXPECT_EQ((*int8)->wire_bytes({0, 4096}, {1, 4}) - (*int8)->payload_bytes({0, 4096}, {1, 4}), 4u * 16);
  auto mx = reg.create("mxfp8", nlohmann::json::object());
  EXPECT_EQ((*mx)->payload_bytes({0, 4096}, {1, 4}), 4096u);
  EXPECT_EQ((*mx)->wire_bytes({0, 4096}, {1, 4}) - (*mx)->payload_bytes({0, 4096}, {1, 4}), 2u * 4096 / 32);
  auto fp32 = reg.create("fp32", nlohmann::json::object());
  EXPECT_EQ((*fp32)->payload_bytes({0, 4096}, {1, 4}), 4u * 4096);
}

struct Case {
  const char* name;
  nlohmann::json params;
  uint64_t (*expected_bytes)(uint64_t);
};

class EveryCompressor : public ::testing::TestWithParam<Case> {};

TEST_P(EveryCompressor, WireSizeMatchesDeclaredFormat) {
  const Case& c = GetParam();
  auto comp = CompressorRegistry::global().create(c.name, c.params);
  ASSERT_TRUE(comp.ok()) << comp.status().message();
  for (uint64_t n : {1ull, 31ull, 32ull, 33ull, 4097ull, 100000ull}) {
    SCOPED_TRACE(fmt::format("{} n={}", c.name, n));
    const TensorSpec spec{7, n};
    EXPECT_EQ((*comp)->wire_bytes(spec, {1, 8}), c.expected_bytes(n));
    EXPECT_EQ((*comp)->wire_bytes(spec, {8, 8}), c.expected_bytes(n));
  }
}

TEST_P(EveryCompressor, FusedHopEqualsDecodeAccumulateThenEncode) {
  const Case& c = GetParam();
  auto made = CompressorRegistry::global().create(c.name, c.params);
  ASSERT_TRUE(made.ok());
  Compressor& comp = **made;
  const uint64_t n = 5000;
  const TensorSpec spec{1000, n};
  const auto x = test_vector(n), y = test_vector(n + 3);
  const kern::RngKey k1{1, 0, 0, 1}, k2{1, 0, 1, 2};
  std::vector<uint8_t> msg(comp.wire_bytes(spec, {1, 4}));
  comp.encode(x, spec, {1, 4}, k1, msg);

  std::vector<float> acc_a(y.begin(), y.begin() + n), acc_b = acc_a;
  std::vector<uint8_t> out_a(comp.wire_bytes(spec, {2, 4})), out_b(out_a.size());
  comp.decode_accumulate_encode(msg, spec, {1, 4}, acc_a, {2, 4}, k2, out_a);
  comp.decode_accumulate(msg, spec, {1, 4}, acc_b);
  comp.encode(acc_b, spec, {2, 4}, k2, out_b);
  EXPECT_EQ(acc_a, acc_b);
  EXPECT_EQ(out_a, out_b);

  // decode == decode_accumulate into zeros.
  std::vector<float> d(n), z(n, 0.0f);
  comp.decode(msg, spec, {1, 4}, d);
  comp.decode_accumulate(msg, spec, {1, 4}, z);
  EXPECT_EQ(d, z);
}

TEST_P(EveryCompressor, UnbiasedWhereClaimed) {
  const Case& c = GetParam();
  auto made = CompressorRegistry::global().create(c.name, c.params);
  ASSERT_TRUE(made.ok());
  Compressor& comp = **made;
  if (!comp.unbiased()) GTEST_SKIP() << c.name << " does not claim unbiasedness";
  const uint64_t n = 512;
  const TensorSpec spec{0, n};
  const auto x = test_vector(n);
  testing::UnbiasednessSampler sampler(std::vector<double>(x.begin(), x.end()));
  std::vector<uint8_t> msg(comp.wire_bytes(spec, {1, 1}));
  std::vector<float> d(n);
  for (int t = 0; t < 3000; ++t) {
    comp.encode(x, spec, {1, 1}, kern::RngKey{static_cast<uint64_t>(t) + 100, 0, 0, 0}, msg);
    comp.decode(msg, spec, {1, 1}, d);
    sampler.add(d);
  }
  EXPECT_TRUE(sampler.unbiased());
}

INSTANTIATE_TEST_SUITE_P(
    Builtins, EveryCompressor,
    ::testing::Values(Case{"fp32", nlohmann::json::object(), [](uint64_t n) { return 4 * n; }},
                      Case{"bf16", nlohmann::json::object(), [](uint64_t n) { return 2 * n; }},
                      Case{"int8", {{"block", 32}}, [](uint64_t n) { return n + 4 * ((n + 31) / 32); }},
                      Case{"int8", {{"block", 256}, {"rounding", "nearest"}},
                           [](uint64_t n) { return n + 4 * ((n + 255) / 256); }}),
    [](const auto& p) { return fmt::format("{}_{}", p.param.name, p.index); });

}  // namespace
}  // namespace ccsim::algo
