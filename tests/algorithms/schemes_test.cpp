// Properties every compression scheme must have (exact wire size, fused hop = decode_accumulate +
// encode, decode = decode_accumulate into zeros, unbiasedness where claimed, thread-count
// independence, no NaN/inf on edge inputs), over several parameter settings of fp16, tfp, qsgd,
// equarx and sdp4bit_q; then exact reference values and error magnitudes per scheme.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "kernels/transform/hadamard.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "tests/algorithms/unbiased.hpp"

namespace ccsim::algo {
namespace {

using testing::ceil_div;
using testing::make;
using testing::test_vector;
using testing::normal_vector;
using testing::round_trip;
using testing::relative_mse;
using testing::EdgeInput;
using testing::edge_inputs;

// --- properties of every scheme ------------------------------------------------------------------

struct Case {
  const char* label;
  const char* name;
  nlohmann::json params;
  /// Declared wire size for n elements at hop (summed, ranks).
  uint64_t (*bytes)(uint64_t n, uint32_t summed, uint32_t ranks);
  bool unbiased;
  HopContext quantized_hop;  ///< a hop at which the scheme actually quantizes
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class EveryScheme : public ::testing::TestWithParam<Case> {};

TEST_P(EveryScheme, WireSizeMatchesDeclaredFormulaAndEncodeStaysInside) {
  const Case& c = GetParam();
  auto comp = make(c.name, c.params);
  ASSERT_TRUE(comp);
  ASSERT_TRUE(comp->can_implement({0, 1}).ok());
  for (uint64_t n : {1ull, 31ull, 32ull, 33ull, 4097ull, 100000ull}) {
    const auto x = test_vector(n);
    for (const HopContext hop : {HopContext{1, 8}, HopContext{7, 8}, HopContext{8, 8}}) {
      SCOPED_TRACE(fmt::format("{} n={} hop={}/{}", c.label, n, hop.summed, hop.ranks));
      const TensorSpec spec{7, n};
      const uint64_t bytes = comp->wire_bytes(spec, hop);
      EXPECT_EQ(bytes, c.bytes(n, hop.summed, hop.ranks));
      // Encode into exactly `bytes` followed by guard bytes, which must stay untouched; encoding
      // twice into different garbage gives the same bytes (padding included).
      std::vector<uint8_t> a(bytes + 16, 0xAB), b(bytes + 16, 0x5C);
      comp->encode(x, spec, hop, kern::RngKey{3, 1, 2, 5}, std::span<uint8_t>(a.data(), bytes));
      comp->encode(x, spec, hop, kern::RngKey{3, 1, 2, 5}, std::span<uint8_t>(b.data(), bytes));
      for (uint64_t i = bytes; i < bytes + 16; ++i) ASSERT_EQ(a[i], 0xAB) << "encode wrote past the wire size";
      EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(bytes), b.begin()));
    }
  }
}

TEST_P(EveryScheme, FusedHopEqualsDecodeAccumulateThenEncode) {
  const Case& c = GetParam();
  auto comp = make(c.name, c.params);
  ASSERT_TRUE(comp);
  for (uint64_t n : {33ull, 5000ull}) {
    // Hops inside reduce-scatter, and the one that completes the sum (all-gather phase output).
    for (const uint32_t summed_in : {1u, 3u}) {
      SCOPED_TRACE(fmt::format("{} n={} summed_in={}", c.label, n, summed_in));
      const TensorSpec spec{1000, n};
      const HopContext in{summed_in, 4}, out{summed_in + 1, 4};
      const auto x = test_vector(n), y = test_vector(n + 3);
      std::vector<uint8_t> msg(comp->wire_bytes(spec, in));
      comp->encode(x, spec, in, kern::RngKey{1, 0, 0, 1}, msg);

      std::vector<float> acc_a(y.begin() + 3, y.end()), acc_b = acc_a;
      std::vector<uint8_t> out_a(comp->wire_bytes(spec, out)), out_b(out_a.size());
      const kern::RngKey k2{1, 0, 1, 2};
      comp->decode_accumulate_encode(msg, spec, in, acc_a, out, k2, out_a);
      comp->decode_accumulate(msg, spec, in, acc_b);
      comp->encode(acc_b, spec, out, k2, out_b);
      EXPECT_EQ(acc_a, acc_b);
      EXPECT_EQ(out_a, out_b);

      std::vector<float> d(n), z(n, 0.0f);
      comp->decode(msg, spec, in, d);
      comp->decode_accumulate(msg, spec, in, z);
      EXPECT_EQ(d, z);
    }
  }
}

TEST_P(EveryScheme, UnbiasedExactlyWhereClaimed) {
  const Case& c = GetParam();
  auto comp = make(c.name, c.params);
  ASSERT_TRUE(comp);
  EXPECT_EQ(comp->unbiased(), c.unbiased);
  EXPECT_EQ(comp->determinism(), Determinism::kBitwiseCpuGpu);
  if (!comp->unbiased()) GTEST_SKIP() << c.label << " does not claim unbiasedness";
  const uint64_t n = 512;
  const TensorSpec spec{0, n};
  const auto x = test_vector(n);
  testing::UnbiasednessSampler sampler(std::vector<double>(x.begin(), x.end()));
  std::vector<uint8_t> msg(comp->wire_bytes(spec, c.quantized_hop));
  std::vector<float> d(n);
  for (int t = 0; t < 3000; ++t) {
    comp->encode(x, spec, c.quantized_hop, kern::RngKey{static_cast<uint64_t>(t) + 100, 0, 0, 0}, msg);
    comp->decode(msg, spec, c.quantized_hop, d);
    sampler.add(d);
  }
  EXPECT_TRUE(sampler.unbiased());
}

TEST_P(EveryScheme, ResultsDoNotDependOnTheThreadCount) {
  const Case& c = GetParam();
  auto comp = make(c.name, c.params);
  ASSERT_TRUE(comp);
  const uint64_t n = 300007;
  const TensorSpec spec{12345, n};
  const auto x = normal_vector(n, 9);
  std::vector<uint8_t> one(comp->wire_bytes(spec, c.quantized_hop)), many(one.size());
  std::vector<float> d_one(n), d_many(n);
  const int saved = kern::worker_threads();
  kern::set_worker_threads(1);
  comp->encode(x, spec, c.quantized_hop, kern::RngKey{5, 0, 0, 0}, one);
  comp->decode(one, spec, c.quantized_hop, d_one);
  kern::set_worker_threads(7);
  comp->encode(x, spec, c.quantized_hop, kern::RngKey{5, 0, 0, 0}, many);
  comp->decode(many, spec, c.quantized_hop, d_many);
  kern::set_worker_threads(saved);
  EXPECT_EQ(one, many);
  EXPECT_EQ(d_one, d_many);
}

TEST_P(EveryScheme, NeverNanOnZerosConstantsDenormalsOrHugeValues) {
  const Case& c = GetParam();
  auto comp = make(c.name, c.params);
  ASSERT_TRUE(comp);
  const uint64_t n = 1000;
  // The Hadamard smoother mixes the elements of a block: signs and zeros need not survive.
  const bool mixes_elements = c.params.value("hadamard", false);
  const std::vector<EdgeInput> inputs = edge_inputs(n);
  for (const auto& in : inputs) {
    for (const HopContext hop : {HopContext{1, 8}, HopContext{8, 8}}) {
      SCOPED_TRACE(fmt::format("{} on {} hop={}/{}", c.label, in.what, hop.summed, hop.ranks));
      // EQuARX's unquantized phase is BF16, as the bf16 scheme: magnitudes from 0x1.FFp127 (half a
      // unit past BF16's largest finite) round to infinity, as a hardware conversion does.
      const bool bf16_phase = std::string(c.name) == "equarx" && comp->wire_bytes({0, n}, hop) == 2 * n;
      for (uint64_t seed = 0; seed < 4; ++seed) {
        const auto d = round_trip(*comp, in.x, hop, seed);
        std::vector<float> z(n, 0.0f);
        std::vector<uint8_t> msg(comp->wire_bytes({0, n}, hop));
        comp->encode(in.x, {0, n}, hop, kern::RngKey{seed, 0, 0, 0}, msg);
        comp->decode_accumulate(msg, {0, n}, hop, z);
        for (uint64_t i = 0; i < n; ++i) {
          if (bf16_phase && std::abs(in.x[i]) >= 0x1.FFp127f) {
            ASSERT_TRUE(std::isinf(d[i]) && (d[i] > 0) == (in.x[i] > 0)) << i;
            continue;
          }
          ASSERT_TRUE(std::isfinite(d[i])) << "element " << i << " of " << in.x[i] << " decodes to " << d[i];
          ASSERT_TRUE(std::isfinite(z[i]));
          if (mixes_elements) continue;
          // Elementwise schemes keep the sign, and zeros stay zero.
          ASSERT_FALSE(d[i] * in.x[i] < 0.0f) << i;
          if (in.x[i] == 0.0f) {
            ASSERT_EQ(d[i], 0.0f) << i;
          }
        }
      }
    }
  }
}

uint64_t fp16_bytes(uint64_t n, uint32_t, uint32_t) { return 2 * n; }
template <uint32_t kBits>
uint64_t tfp_bytes(uint64_t n, uint32_t, uint32_t) {
  return ceil_div(n * kBits, 8);
}
template <uint32_t kBucket, uint32_t kBits>
uint64_t bucketed_bytes(uint64_t n, uint32_t, uint32_t) {
  return 4 * ceil_div(n, kBucket) + ceil_div(n * kBits, 8);
}
enum class Q { kRs, kAg, kBoth };
template <Q kPhases, uint32_t kBlock>
uint64_t equarx_bytes(uint64_t n, uint32_t summed, uint32_t ranks) {
  const bool rs = summed < ranks;
  const bool quantized = kPhases == Q::kBoth || (kPhases == Q::kRs) == rs;
  return quantized ? 4 * ceil_div(n, kBlock) + n : 2 * n;  // unquantized: BF16
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, EveryScheme,
    ::testing::Values(
        Case{"fp16", "fp16", nlohmann::json::object(), fp16_bytes, false, {1, 8}},
        Case{"tfp_default", "tfp", nlohmann::json::object(), tfp_bytes<16>, false, {1, 8}},
        Case{"tfp_k12_rr", "tfp", {{"k", 12}, {"random_rounding", true}}, tfp_bytes<12>, true, {1, 8}},
        Case{"tfp_k10_rr", "tfp", {{"k", 10}, {"random_rounding", true}}, tfp_bytes<10>, true, {1, 8}},
        Case{"tfp_k32", "tfp", {{"k", 32}}, tfp_bytes<32>, false, {1, 8}},
        Case{"tfp_fp16_k9_rr",
             "tfp",
             {{"k", 9}, {"base", "fp16"}, {"random_rounding", true}},
             tfp_bytes<9>,
             true,
             {1, 8}},
        Case{"tfp_fp16_k13", "tfp", {{"k", 13}, {"base", "fp16"}}, tfp_bytes<13>, false, {1, 8}},
        Case{"tfp_e4m3_k6_rr",
             "tfp",
             {{"k", 6}, {"base", "fp8e4m3"}, {"random_rounding", true}},
             tfp_bytes<6>,
             true,
             {1, 8}},
        Case{"tfp_e5m2_k8", "tfp", {{"k", 8}, {"base", "fp8e5m2"}}, tfp_bytes<8>, false, {1, 8}},
        Case{"qsgd_default", "qsgd", nlohmann::json::object(), bucketed_bytes<512, 4>, true, {1, 8}},
        Case{"qsgd_8bit_b64", "qsgd", {{"bits", 8}, {"bucket", 64}}, bucketed_bytes<64, 8>, true, {1, 8}},
        Case{"qsgd_4bit_b8", "qsgd", {{"bits", 4}, {"bucket", 8}}, bucketed_bytes<8, 4>, true, {1, 8}},
        Case{"equarx_default", "equarx", nlohmann::json::object(), equarx_bytes<Q::kBoth, 64>, false, {1, 8}},
        Case{"equarx_int8_sr", "equarx", {{"rounding", "stochastic"}}, equarx_bytes<Q::kBoth, 64>, true, {1, 8}},
        // One phase quantized stochastically: the other's BF16 rounding is biased.
        Case{"equarx_e4m3_rs_sr",
             "equarx",
             {{"format", "e4m3"}, {"phases", "rs"}, {"rounding", "stochastic"}},
             equarx_bytes<Q::kRs, 64>,
             false,
             {1, 8}},
        Case{"equarx_e5m2_ag_b32",
             "equarx",
             {{"format", "e5m2"}, {"phases", "ag"}, {"block", 32}},
             equarx_bytes<Q::kAg, 32>,
             false,
             {8, 8}},
        Case{"equarx_int8_ag_sr",
             "equarx",
             {{"phases", "ag"}, {"rounding", "stochastic"}},
             equarx_bytes<Q::kAg, 64>,
             false,
             {8, 8}},
        Case{"sdp4bit_default", "sdp4bit_q", nlohmann::json::object(), bucketed_bytes<128, 4>, false, {1, 8}},
        Case{"sdp4bit_w8_g2048_sr",
             "sdp4bit_q",
             {{"bits", 8}, {"group", 2048}, {"rounding", "stochastic"}},
             bucketed_bytes<2048, 8>,
             true,
             {1, 8}},
        Case{"sdp4bit_hs_g32_sr",
             "sdp4bit_q",
             {{"hadamard", true}, {"group", 32}, {"rounding", "stochastic"}},
             bucketed_bytes<32, 4>,
             true,
             {1, 8}},
        Case{"sdp4bit_hs_g128", "sdp4bit_q", {{"hadamard", true}}, bucketed_bytes<128, 4>, false, {1, 8}}),
    [](const auto& p) { return std::string(p.param.label); });

// --- registry ------------------------------------------------------------------------------------

TEST(SchemeRegistry, ListsTheSchemesWithTheirParameterTables) {
  auto& reg = CompressorRegistry::global();
  for (const char* name : {"fp16", "tfp", "qsgd", "equarx", "sdp4bit_q"}) {
    const CompressorInfo* info = reg.find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->description.empty());
  }
  EXPECT_EQ(reg.find("tfp")->params.find("k")->default_value, 16);
  EXPECT_EQ(reg.find("qsgd")->params.find("bucket")->default_value, 512);
  EXPECT_EQ(reg.find("equarx")->params.find("block")->default_value, 64);
  EXPECT_EQ(reg.find("equarx")->params.find("rounding")->default_value, "nearest");
  EXPECT_EQ(reg.find("sdp4bit_q")->params.find("group")->default_value, 128);
  // bits is 4 or 8, nothing else, and is never clamped.
  EXPECT_FALSE(reg.create("qsgd", {{"bits", 6}}).ok());
  EXPECT_FALSE(reg.create("sdp4bit_q", {{"bits", 2}}).ok());
  EXPECT_FALSE(reg.create("sdp4bit_q", {{"group", 16}}).ok());
  EXPECT_FALSE(reg.create("equarx", {{"phases", "reduce"}}).ok());
  EXPECT_FALSE(reg.create("tfp", {{"k", 33}}).ok());
}

// --- qsgd ----------------------------------------------------------------------------------------

TEST(Qsgd, SendsTheNormAndSignedLevels) {
  auto comp = make("qsgd", {{"bits", 4}, {"bucket", 8}});
  const std::vector<float> x = {0.0f, -5.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.0f};
  std::vector<uint8_t> msg(comp->wire_bytes({0, 8}, {1, 2}));
  ASSERT_EQ(msg.size(), 4u + 4u);
  comp->encode(x, {0, 8}, {1, 2}, kern::RngKey{1, 0, 0, 0}, msg);
  float norm;
  std::memcpy(&norm, msg.data(), 4);
  EXPECT_EQ(norm, 5.0f);
  // |-5| / 5 * 7 = 7 exactly: sign bit 1, level 7 -> code 0xF in the high nibble of byte 0; the
  // trailing -0 keeps its sign bit with level 0 (code 0x8, high nibble of byte 3).
  EXPECT_EQ(msg[4], 0xF0);
  EXPECT_EQ(msg[5], 0x00);
  EXPECT_EQ(msg[6], 0x00);
  EXPECT_EQ(msg[7], 0x80);
}

TEST(Qsgd, LevelsAndProbabilitiesMatchTheDefinition) {
  // Bucket {3, 4}: norm 5. 4-bit: 3/5*7 = 4.2 -> level 4 or 5 (p = 0.2); 4/5*7 = 5.6 -> 5 or 6.
  // 8-bit: 3/5*127 = 76.2 -> 76 or 77.
  for (const uint32_t bits : {4u, 8u}) {
    SCOPED_TRACE(fmt::format("bits={}", bits));
    auto comp = make("qsgd", {{"bits", bits}, {"bucket", 8}});
    const double s = bits == 4 ? 7.0 : 127.0;
    const double lo3 = std::floor(0.6 * s), lo4 = std::floor(0.8 * s);
    const uint64_t buckets = 20000, n = 8 * buckets;
    std::vector<float> x(n, 0.0f);
    for (uint64_t b = 0; b < buckets; ++b) {
      x[8 * b] = 3.0f;
      x[8 * b + 1] = -4.0f;
    }
    const auto d = round_trip(*comp, x, {1, 2}, 77);
    uint64_t up3 = 0, up4 = 0;
    for (uint64_t b = 0; b < buckets; ++b) {
      const double l3 = d[8 * b] / 5.0 * s, l4 = -d[8 * b + 1] / 5.0 * s;
      ASSERT_TRUE(std::abs(l3 - lo3) < 1e-4 || std::abs(l3 - lo3 - 1) < 1e-4) << l3;
      ASSERT_TRUE(std::abs(l4 - lo4) < 1e-4 || std::abs(l4 - lo4 - 1) < 1e-4) << l4;
      ASSERT_LT(d[8 * b + 1], 0.0f);
      up3 += l3 > lo3 + 0.5;
      up4 += l4 > lo4 + 0.5;
      for (int j = 2; j < 8; ++j) ASSERT_EQ(d[8 * b + static_cast<uint64_t>(j)], 0.0f);
    }
    const double p3 = 0.6 * s - lo3, p4 = 0.8 * s - lo4;
    const double bound3 = 5 * std::sqrt(p3 * (1 - p3) / buckets), bound4 = 5 * std::sqrt(p4 * (1 - p4) / buckets);
    EXPECT_NEAR(static_cast<double>(up3) / buckets, p3, bound3);
    EXPECT_NEAR(static_cast<double>(up4) / buckets, p4, bound4);
  }
}

TEST(Qsgd, NormIsRoundedUpAndSaturates) {
  auto comp = make("qsgd", {{"bits", 8}, {"bucket", 8}});
  // sqrt(1 + 1 + 1) is not a float: the stored norm is the float just above it.
  std::vector<float> x = {1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0};
  std::vector<uint8_t> msg(comp->wire_bytes({0, 8}, {1, 2}));
  comp->encode(x, {0, 8}, {1, 2}, kern::RngKey{}, msg);
  float norm;
  std::memcpy(&norm, msg.data(), 4);
  EXPECT_GE(static_cast<double>(norm), std::sqrt(3.0));
  EXPECT_LT(static_cast<double>(std::nextafter(norm, 0.0f)), std::sqrt(3.0));
  // A bucket of 3e38 values has a norm beyond FLT_MAX: stored as FLT_MAX, decoded finite.
  x.assign(8, 3e38f);
  comp->encode(x, {0, 8}, {1, 2}, kern::RngKey{}, msg);
  std::memcpy(&norm, msg.data(), 4);
  EXPECT_EQ(norm, std::numeric_limits<float>::max());
}

// --- equarx --------------------------------------------------------------------------------------

TEST(Equarx, Int8CodesOfAKnownBlock) {
  auto comp = make("equarx", nlohmann::json::object());  // int8, block 64, nearest, both phases
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 32);
  std::vector<uint8_t> msg(comp->wire_bytes({0, 64}, {1, 8}));
  ASSERT_EQ(msg.size(), 4u + 64u);
  comp->encode(x, {0, 64}, {1, 8}, kern::RngKey{}, msg);
  float scale;
  std::memcpy(&scale, msg.data(), 4);
  EXPECT_EQ(scale, 32.0f);
  // code = round_half_even(x / 32 * 127), exact in fp32 for these x.
  for (int i = 0; i < 64; ++i) {
    const double v = (i - 32) * 127.0 / 32.0;
    const auto expected = static_cast<int8_t>(std::nearbyint(v));
    EXPECT_EQ(static_cast<int8_t>(msg[4 + static_cast<size_t>(i)]), expected) << "x=" << i - 32;
  }
  EXPECT_EQ(static_cast<int8_t>(msg[4 + 0]), -127);  // x = -32
  EXPECT_EQ(static_cast<int8_t>(msg[4 + 48]), 64);   // x = 16: 63.5 ties to even
  EXPECT_EQ(static_cast<int8_t>(msg[4 + 33]), 4);    // x = 1: 3.96875
}

TEST(Equarx, Int8EqualsTheInt8SchemeBitForBit) {
  auto equarx = make("equarx", {{"block", 64}});
  auto int8 = make("int8", {{"block", 64}, {"rounding", "nearest"}});
  const auto x = normal_vector(10000, 4);
  const TensorSpec spec{64, x.size()};
  std::vector<uint8_t> a(equarx->wire_bytes(spec, {1, 8})), b(int8->wire_bytes(spec, {1, 8}));
  equarx->encode(x, spec, {1, 8}, kern::RngKey{}, a);
  int8->encode(x, spec, {1, 8}, kern::RngKey{}, b);
  EXPECT_EQ(a, b);
}

// BF16 round to nearest even on the fp32 bits, written out here (independent of kernels/quant).
float bf16_reference(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // finite inputs only
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// EQuARX's tensor and baseline are BF16: a phase it leaves unquantized travels as BF16, 2 bytes per
// element, rounded to nearest even, and is added in fp32.
TEST(Equarx, UnquantizedPhaseTravelsAsBf16) {
  auto rs_only = make("equarx", {{"phases", "rs"}});
  auto ag_only = make("equarx", {{"phases", "ag"}});
  for (const uint64_t n : {1ull, 63ull, 64ull, 1000ull}) {
    EXPECT_EQ(rs_only->wire_bytes({0, n}, {8, 8}), 2 * n);  // all-gather: not quantized
    EXPECT_EQ(ag_only->wire_bytes({0, n}, {3, 8}), 2 * n);  // reduce-scatter: not quantized
    EXPECT_EQ(ag_only->payload_bytes({0, n}, {3, 8}), 2 * n);
    EXPECT_EQ(ag_only->wire_bytes({0, n}, {8, 8}), 4 * ceil_div(n, 64) + n);
  }
  // 1 + 2^-8 ties to even (1); 1 + 3 * 2^-8 ties to even (1 + 2^-6); 1 + 2^-8 + 2^-20 rounds up;
  // -pi = -1.1001001 0000111...b * 2 rounds down in magnitude to -3.140625.
  const std::vector<float> x = {1.00390625f, 1.01171875f, 1.0f + 0x1p-8f + 0x1p-20f, -3.14159265f, 0.0f, -0.0f};
  const std::vector<float> expected = {1.0f, 1.015625f, 1.0078125f, -3.140625f, 0.0f, -0.0f};
  const TensorSpec spec{0, x.size()};
  std::vector<uint8_t> msg(ag_only->wire_bytes(spec, {3, 8}));
  ag_only->encode(x, spec, {3, 8}, kern::RngKey{}, msg);
  EXPECT_EQ(msg[0], 0x80);  // 1.0 = 0x3F80, little-endian
  EXPECT_EQ(msg[1], 0x3F);
  std::vector<float> acc(x.size(), 0.5f);
  ag_only->decode_accumulate(msg, spec, {3, 8}, acc);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(round_trip(*ag_only, x, {3, 8})[i], expected[i]) << i;
    EXPECT_EQ(acc[i], 0.5f + expected[i]) << i;
  }
  // Past BF16's range, as in bf16: 0x1.FEp127 is its largest finite, 0x1.FFp127 ties up to infinity.
  const std::vector<float> edges = {0x1.FEp127f, 0x1.FE8p127f, 0x1.FFp127f, -std::numeric_limits<float>::max()};
  const auto edge_out = round_trip(*ag_only, edges, {3, 8});
  EXPECT_EQ(edge_out[0], 0x1.FEp127f);
  EXPECT_EQ(edge_out[1], 0x1.FEp127f);
  EXPECT_EQ(edge_out[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(edge_out[3], -std::numeric_limits<float>::infinity());
  // Normal data: exactly BF16's rounding, element by element, in either flavour's unquantized phase.
  const auto y = normal_vector(4099, 5);
  std::vector<float> rounded(y.size());
  for (size_t i = 0; i < y.size(); ++i) rounded[i] = bf16_reference(y[i]);
  EXPECT_EQ(round_trip(*rs_only, y, {8, 8}), rounded);
  EXPECT_EQ(round_trip(*ag_only, y, {3, 8}), rounded);
  EXPECT_EQ(round_trip(*make("bf16", nlohmann::json::object()), y, {3, 8}), rounded);
  EXPECT_NE(round_trip(*rs_only, y, {3, 8}), rounded);  // the quantized phases are not BF16
  EXPECT_NE(round_trip(*ag_only, y, {8, 8}), rounded);
}

TEST(Equarx, ErrorMagnitudesOnNormalData) {
  const auto x = normal_vector(8 * 4096, 6);
  const double int8 = relative_mse(x, round_trip(*make("equarx", nlohmann::json::object()), x, {1, 8}));
  const double e4m3 = relative_mse(x, round_trip(*make("equarx", {{"format", "e4m3"}}), x, {1, 8}));
  const double e5m2 = relative_mse(x, round_trip(*make("equarx", {{"format", "e5m2"}}), x, {1, 8}));
  SCOPED_TRACE(fmt::format("relative MSE int8 {:.3g} e4m3 {:.3g} e5m2 {:.3g}", int8, e4m3, e5m2));
  EXPECT_LT(int8, 1e-4);
  EXPECT_GT(e5m2, e4m3);
  EXPECT_GT(e4m3, int8);
}

// An 8-rank ring chain for one shard: rank 0 encodes, ranks 1..7 decode-accumulate-encode (the
// last output, summed 8, is the all-gather message), and another rank decodes it.
double ring_chain_error(Compressor& c, uint64_t n) {
  const uint32_t ranks = 8;
  std::vector<std::vector<float>> x;
  std::vector<float> exact(n, 0.0f);
  for (uint32_t r = 0; r < ranks; ++r) {
    x.push_back(normal_vector(n, 100 + r));
    for (uint64_t i = 0; i < n; ++i) exact[i] += x[r][i];
  }
  const TensorSpec spec{0, n};
  std::vector<uint8_t> msg(c.wire_bytes(spec, {1, ranks}));
  c.encode(x[0], spec, {1, ranks}, kern::RngKey{1, 0, 0, 0}, msg);
  for (uint32_t r = 1; r < ranks; ++r) {
    std::vector<uint8_t> next(c.wire_bytes(spec, {r + 1, ranks}));
    c.decode_accumulate_encode(msg, spec, {r, ranks}, x[r], {r + 1, ranks}, kern::RngKey{1, 0, r, 0}, next);
    msg.swap(next);
  }
  std::vector<float> got(n);
  c.decode(msg, spec, {ranks, ranks}, got);
  return relative_mse(exact, got);
}

TEST(Equarx, QuantizingOnlyTheAllGatherGivesTheSmallestRingError) {
  const uint64_t n = 4096 * 4;
  const double both = ring_chain_error(*make("equarx", {{"phases", "both"}}), n);
  const double rs = ring_chain_error(*make("equarx", {{"phases", "rs"}}), n);
  const double ag = ring_chain_error(*make("equarx", {{"phases", "ag"}}), n);
  SCOPED_TRACE(fmt::format("relative MSE both {:.3g} rs {:.3g} ag {:.3g}", both, rs, ag));
  EXPECT_LT(ag, rs);
  EXPECT_LT(rs, both);
  EXPECT_LT(ag, 1e-4);
  EXPECT_LT(both, 1e-3);
}

// --- sdp4bit_q -----------------------------------------------------------------------------------

TEST(Sdp4bitQ, Int4CodesOfAKnownGroup) {
  auto comp = make("sdp4bit_q", {{"bits", 4}, {"group", 32}});
  std::vector<float> x(32, 0.0f);
  const float head[] = {8, -8, 4, -4, 6, 7, 0, 0.5f};
  std::copy(std::begin(head), std::end(head), x.begin());
  std::vector<uint8_t> msg(comp->wire_bytes({0, 32}, {1, 8}));
  ASSERT_EQ(msg.size(), 4u + 16u);
  comp->encode(x, {0, 32}, {1, 8}, kern::RngKey{}, msg);
  float scale;
  std::memcpy(&scale, msg.data(), 4);
  EXPECT_EQ(scale, 8.0f);
  // round(x / 8 * 7): 7, -7, 3.5 -> 4, -4, 5.25 -> 5, 6.125 -> 6, 0, 0.4375 -> 0, as 4-bit two's
  // complement, element 2j in the low nibble: 0x97, 0xC4, 0x65, 0x00.
  EXPECT_EQ(msg[4], 0x97);
  EXPECT_EQ(msg[5], 0xC4);
  EXPECT_EQ(msg[6], 0x65);
  EXPECT_EQ(msg[7], 0x00);
  const auto d = round_trip(*comp, x, {1, 8});
  EXPECT_EQ(d[0], 8.0f);
  EXPECT_EQ(d[1], -8.0f);
  EXPECT_FLOAT_EQ(d[2], 4.0f / 7.0f * 8.0f);
  EXPECT_FLOAT_EQ(d[4], 5.0f / 7.0f * 8.0f);
  EXPECT_EQ(d[7], 0.0f);
}

TEST(Sdp4bitQ, EightBitsEqualTheInt8Scheme) {
  auto sdp = make("sdp4bit_q", {{"bits", 8}, {"group", 128}, {"rounding", "stochastic"}});
  auto int8 = make("int8", {{"block", 128}, {"rounding", "stochastic"}});
  const auto x = normal_vector(5000, 8);
  const TensorSpec spec{999, x.size()};
  std::vector<uint8_t> a(sdp->wire_bytes(spec, {1, 8})), b(int8->wire_bytes(spec, {1, 8}));
  sdp->encode(x, spec, {1, 8}, kern::RngKey{2, 3, 4, 5}, a);
  int8->encode(x, spec, {1, 8}, kern::RngKey{2, 3, 4, 5}, b);
  EXPECT_EQ(a, b);
}

TEST(Sdp4bitQ, HadamardIsTheBlockwiseTransformAroundThePlainQuantizer) {
  // With Hadamard, the codes of x are the plain codes of H·x, and the decode is H·(plain decode):
  // kernels/transform/hadamard.hpp's transform, bit for bit.
  auto hs = make("sdp4bit_q", {{"hadamard", true}, {"group", 64}});
  auto plain = make("sdp4bit_q", {{"hadamard", false}, {"group", 64}});
  const uint64_t n = 32 * 40;
  const auto x = normal_vector(n, 10);
  auto hx = x;
  kern::hadamard_transform(hx.data(), n, 32);
  const TensorSpec spec{0, n};
  std::vector<uint8_t> a(hs->wire_bytes(spec, {1, 8})), b(a.size());
  hs->encode(x, spec, {1, 8}, kern::RngKey{}, a);
  plain->encode(hx, spec, {1, 8}, kern::RngKey{}, b);
  EXPECT_EQ(a, b);
  std::vector<float> da(n), db(n);
  hs->decode(a, spec, {1, 8}, da);
  plain->decode(a, spec, {1, 8}, db);
  kern::hadamard_transform(db.data(), n, 32);
  EXPECT_EQ(da, db);
}

TEST(Sdp4bitQ, HadamardReducesTheErrorOfOutlierBlocks) {
  // N(0,1) values with one outlier of 20 per 32-element block: without the smoother the int4 step
  // (20/7) rounds most values to 0; H_32 spreads each outlier over its block.
  const uint64_t n = 32 * 512 + 13;  // and an untransformed tail
  auto x = normal_vector(n, 11);
  for (uint64_t b = 0; b < n / 32; ++b) x[32 * b + (b * 7) % 32] = (b % 2 ? 20.0f : -20.0f);
  for (const char* rounding : {"nearest", "stochastic"}) {
    const double plain = relative_mse(x, round_trip(*make("sdp4bit_q", {{"rounding", rounding}}), x, {1, 8}));
    const double hs =
        relative_mse(x, round_trip(*make("sdp4bit_q", {{"rounding", rounding}, {"hadamard", true}}), x, {1, 8}));
    SCOPED_TRACE(fmt::format("{}: relative MSE plain {:.3g} hadamard {:.3g}", rounding, plain, hs));
    EXPECT_LT(hs, 0.5 * plain);
  }
}

}  // namespace
}  // namespace ccsim::algo
