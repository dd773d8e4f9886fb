// SDP4Bit / ZeRO++ pipelines: TLq, TLq-HS and ULq on the two_level reduce-scatter (wire sizes per
// aggregation level, errors), the Hadamard transform applied once around the collective, and qW /
// qWD on the ring all-gather (round 0 equal, round 1 far better with weight differences).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "kernels/transform/hadamard.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

using testing::ceil_div;
using testing::make;
using testing::normal_vector;
using testing::EdgeInput;
using testing::edge_inputs;

struct CollectiveRun {
  std::vector<std::vector<float>> out;
  double vnmse = 0;
  uint64_t wire_bytes = 0;
};

// Runs `algorithm`'s `operation` over `inputs` with the compressor (round `round`), in place on
// copies of the inputs; returns the outputs and their vNMSE against what the operation defines.
CollectiveRun run_collective(Compressor& comp, const char* operation, const char* algorithm,
                   const std::vector<std::vector<float>>& inputs, uint32_t gpus_per_node = 1, uint32_t round = 0) {
  auto info = topo::find_collective(operation, algorithm);
  EXPECT_TRUE(info.ok());
  topo::CollectiveOptions options;
  options.align = comp.alignment();
  options.gpus_per_node = gpus_per_node;
  const auto ranks = static_cast<uint32_t>(inputs.size());
  topo::Schedule s = (*info)->build(ranks, inputs[0].size(), options);
  bind_schedule(s, comp);
  CollectiveRun r;
  r.out = inputs;
  std::vector<std::span<float>> v(r.out.begin(), r.out.end());
  auto stats = run_numerics(s, comp, v, {11, round});
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  r.wire_bytes = stats->wire_bytes;
  std::vector<std::span<const float>> ins(inputs.begin(), inputs.end()), outs(r.out.begin(), r.out.end());
  r.vnmse = vnmse(operation_errors(s, ins, outs));
  return r;
}

// --- parameters and wire format ------------------------------------------------------------------

TEST(Sdp4bitPipeline, RegisteredWithTheirParameterTables) {
  auto& reg = CompressorRegistry::global();
  ASSERT_NE(reg.find("sdp4bit_tlq"), nullptr);
  ASSERT_NE(reg.find("sdp4bit_qw"), nullptr);
  ASSERT_NE(reg.find("sdp4bit_qwd"), nullptr);
  EXPECT_EQ(reg.find("sdp4bit_tlq")->params.find("mode")->default_value, "tlq");
  EXPECT_EQ(reg.find("sdp4bit_tlq")->params.find("group")->default_value, 128);
  EXPECT_EQ(reg.find("sdp4bit_tlq")->params.find("hadamard")->default_value, false);
  EXPECT_EQ(reg.find("sdp4bit_tlq")->params.find("rounding")->default_value, "nearest");
  EXPECT_EQ(reg.find("sdp4bit_qw")->params.find("group")->default_value, 2048);
  EXPECT_EQ(reg.find("sdp4bit_qwd")->params.find("group")->default_value, 2048);
  EXPECT_FALSE(reg.create("sdp4bit_tlq", {{"mode", "int8"}}).ok());
  EXPECT_FALSE(reg.create("sdp4bit_tlq", {{"group", 16}}).ok());
  EXPECT_FALSE(reg.create("sdp4bit_qwd", {{"group", 3000}}).ok());
  for (const char* name : {"sdp4bit_tlq", "sdp4bit_qw", "sdp4bit_qwd"}) {
    auto c = make(name);
    EXPECT_EQ(c->name(), name);
    EXPECT_FALSE(c->unbiased());
    EXPECT_TRUE(make(name, {{"rounding", "stochastic"}})->unbiased());
    EXPECT_EQ(c->determinism(), Determinism::kBitwiseCpuGpu);
  }
}

TEST(Sdp4bitPipeline, WireSizePerAggregationLevel) {
  // bits at (summed 1, summed G): tlq (8, 4), ulq (4, 4); qw and qwd 4 at every hop, group 2048.
  struct Case {
    const char* name;
    nlohmann::json params;
    uint32_t group, bits_leaf, bits_sum;
  };
  const Case cases[] = {{"sdp4bit_tlq", nlohmann::json::object(), 128, 8, 4},
                        {"sdp4bit_tlq", {{"mode", "ulq"}}, 128, 4, 4},
                        {"sdp4bit_tlq", {{"hadamard", true}, {"group", 64}}, 64, 8, 4},
                        {"sdp4bit_qw", nlohmann::json::object(), 2048, 4, 4},
                        {"sdp4bit_qwd", nlohmann::json::object(), 2048, 4, 4}};
  for (const Case& c : cases) {
    auto comp = make(c.name, c.params);
    EXPECT_EQ(comp->alignment(), c.group);
    for (uint64_t n : {1ull, 31ull, 128ull, 129ull, 4097ull, 100000ull}) {
      for (const HopContext hop : {HopContext{1, 8}, HopContext{4, 8}, HopContext{2, 8}, HopContext{8, 8}}) {
        SCOPED_TRACE(fmt::format("{} {} n={} summed={}", c.name, c.params.dump(), n, hop.summed));
        const uint32_t bits = hop.summed == 1 ? c.bits_leaf : c.bits_sum;
        const TensorSpec spec{256, n};
        const uint64_t bytes = comp->wire_bytes(spec, hop);
        EXPECT_EQ(bytes, 4 * ceil_div(n, c.group) + ceil_div(n * bits, 8));
        const auto x = normal_vector(n, 1);
        std::vector<uint8_t> a(bytes + 16, 0xAB), b(bytes + 16, 0x5C);
        comp->encode(x, spec, hop, kern::RngKey{3, 1, 2, 5}, std::span<uint8_t>(a.data(), bytes));
        comp->encode(x, spec, hop, kern::RngKey{3, 1, 2, 5}, std::span<uint8_t>(b.data(), bytes));
        for (uint64_t i = bytes; i < bytes + 16; ++i) ASSERT_EQ(a[i], 0xAB) << "encode wrote past the wire size";
        EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(bytes), b.begin()));
      }
    }
  }
}

TEST(Sdp4bitPipeline, MessagesAreTheGroupQuantizerOfTheirLevelBitForBit) {
  // Per hop, no Hadamard (that belongs to prepare/finish): the sdp4bit_q codes of the same width.
  const auto x = normal_vector(5000, 2);
  const TensorSpec spec{384, x.size()};
  auto check = [&](Compressor& c, const HopContext& hop, const nlohmann::json& q) {
    auto ref = make("sdp4bit_q", q);
    std::vector<uint8_t> a(c.wire_bytes(spec, hop)), b(ref->wire_bytes(spec, hop));
    c.encode(x, spec, hop, kern::RngKey{2, 3, 4, 5}, a);
    ref->encode(x, spec, hop, kern::RngKey{2, 3, 4, 5}, b);
    EXPECT_EQ(a, b) << c.name() << " at summed " << hop.summed << " vs sdp4bit_q " << q.dump();
  };
  for (const char* rounding : {"nearest", "stochastic"}) {
    for (const bool hadamard : {false, true}) {
      auto tlq = make("sdp4bit_tlq", {{"rounding", rounding}, {"hadamard", hadamard}});
      auto ulq = make("sdp4bit_tlq", {{"mode", "ulq"}, {"rounding", rounding}, {"hadamard", hadamard}});
      check(*tlq, {1, 8}, {{"bits", 8}, {"group", 128}, {"rounding", rounding}});
      check(*tlq, {4, 8}, {{"bits", 4}, {"group", 128}, {"rounding", rounding}});
      check(*tlq, {2, 8}, {{"bits", 4}, {"group", 128}, {"rounding", rounding}});  // flat ring: int4 after hop 1
      check(*ulq, {1, 8}, {{"bits", 4}, {"group", 128}, {"rounding", rounding}});
      check(*ulq, {8, 8}, {{"bits", 4}, {"group", 128}, {"rounding", rounding}});
    }
    check(*make("sdp4bit_qw", {{"rounding", rounding}}), {1, 8},
          {{"bits", 4}, {"group", 2048}, {"rounding", rounding}});
    check(*make("sdp4bit_qwd", {{"rounding", rounding}}), {1, 8},
          {{"bits", 4}, {"group", 2048}, {"rounding", rounding}});
  }
}

TEST(Sdp4bitPipeline, FusedHopEqualsDecodeAccumulateThenEncode) {
  for (const char* name : {"sdp4bit_tlq", "sdp4bit_qw", "sdp4bit_qwd"}) {
    auto comp = make(name, {{"rounding", "stochastic"}});
    for (const uint32_t summed_in : {1u, 3u}) {
      SCOPED_TRACE(fmt::format("{} summed_in={}", name, summed_in));
      const uint64_t n = 5000;
      const TensorSpec spec{1024, n};
      const HopContext in{summed_in, 4}, out{summed_in + 1, 4};
      const auto x = normal_vector(n, 3), y = normal_vector(n, 4);
      std::vector<uint8_t> msg(comp->wire_bytes(spec, in));
      comp->encode(x, spec, in, kern::RngKey{1, 0, 0, 1}, msg);
      auto acc_a = y, acc_b = y;
      std::vector<uint8_t> out_a(comp->wire_bytes(spec, out)), out_b(out_a.size());
      comp->decode_accumulate_encode(msg, spec, in, acc_a, out, kern::RngKey{1, 0, 1, 2}, out_a);
      comp->decode_accumulate(msg, spec, in, acc_b);
      comp->encode(acc_b, spec, out, kern::RngKey{1, 0, 1, 2}, out_b);
      EXPECT_EQ(acc_a, acc_b);
      EXPECT_EQ(out_a, out_b);
      std::vector<float> d(n), z(n, 0.0f);
      comp->decode(msg, spec, in, d);
      comp->decode_accumulate(msg, spec, in, z);
      EXPECT_EQ(d, z);
    }
  }
}

TEST(Sdp4bitPipeline, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t n = 300007;
  const auto x = normal_vector(n, 5);
  for (const char* name : {"sdp4bit_tlq", "sdp4bit_qwd"}) {
    SCOPED_TRACE(name);
    auto run = [&](int threads) {
      kern::set_worker_threads(threads);
      nlohmann::json params = {{"rounding", "stochastic"}};
      if (std::string(name) == "sdp4bit_tlq") params["hadamard"] = true;
      auto comp = make(name, params);
      std::vector<float> p(n);
      comp->prepare(x, p, 0, 1, kern::RngKey{});
      const TensorSpec spec{0, n};
      std::vector<uint8_t> msg(comp->wire_bytes(spec, {1, 4}));
      comp->encode(p, spec, {1, 4}, kern::RngKey{5, 0, 0, 0}, msg);
      std::vector<float> d(n), f(n);
      comp->decode(msg, spec, {1, 4}, d);
      comp->finish(d, f, 0, 1);
      return std::make_pair(msg, f);
    };
    const int saved = kern::worker_threads();
    const auto one = run(1), many = run(7);
    kern::set_worker_threads(saved);
    EXPECT_EQ(one.first, many.first);
    EXPECT_EQ(one.second, many.second);
  }
}

TEST(Sdp4bitPipeline, NeverNanOnZerosConstantsDenormalsOrHugeValues) {
  const uint64_t n = 1000;
  const std::vector<EdgeInput> inputs = edge_inputs(n);
  struct Scheme {
    const char* name;
    nlohmann::json params;
  };
  const Scheme schemes[] = {{"sdp4bit_tlq", nlohmann::json::object()},
                            {"sdp4bit_tlq", {{"mode", "ulq"}, {"rounding", "stochastic"}}},
                            {"sdp4bit_tlq", {{"hadamard", true}}},
                            {"sdp4bit_qw", nlohmann::json::object()},
                            {"sdp4bit_qwd", {{"rounding", "stochastic"}}}};
  for (const Scheme& s : schemes) {
    for (const auto& [what, x] : inputs) {
      for (const HopContext hop : {HopContext{1, 8}, HopContext{4, 8}}) {
        SCOPED_TRACE(fmt::format("{} {} on {} summed={}", s.name, s.params.dump(), what, hop.summed));
        auto comp = make(s.name, s.params);
        // The whole per-rank path: prepare, encode, decode, finish.
        std::vector<float> p(n), d(n), f(n);
        comp->prepare(x, p, 0, 1, kern::RngKey{});
        std::vector<uint8_t> msg(comp->wire_bytes({0, n}, hop));
        comp->encode(p, {0, n}, hop, kern::RngKey{1, 0, 0, 0}, msg);
        comp->decode(msg, {0, n}, hop, d);
        comp->finish(d, f, 0, 1);
        for (uint64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(p[i])) << i;
          ASSERT_TRUE(std::isfinite(d[i])) << i;
          ASSERT_TRUE(std::isfinite(f[i])) << "element " << i << " of " << x[i] << " ends as " << f[i];
        }
      }
    }
  }
}

// --- TLq / ULq / TLq-HS on the two-level reduce-scatter ------------------------------------------

TEST(Sdp4bitTlq, TwoLevelReduceScatterSendsInt8WithinNodesAndInt4Across) {
  const uint32_t ranks = 8, g = 4;
  const uint64_t n = 128 * 8 * 12 + 77;
  std::vector<std::vector<float>> x;
  for (uint32_t r = 0; r < ranks; ++r) x.push_back(normal_vector(n, 20 + r));
  auto tlq = make("sdp4bit_tlq");
  auto info = topo::find_collective("reduce_scatter", "two_level");
  ASSERT_TRUE(info.ok());
  topo::CollectiveOptions options;
  options.align = tlq->alignment();
  options.gpus_per_node = g;
  topo::Schedule s = (*info)->build(ranks, n, options);
  // Intra-node messages carry one rank (int8), inter-node ones a node's sum (int4).
  uint64_t expected = 0, intra = 0, inter = 0;
  for (const auto& op : s.ops()) {
    if (op.kind != topo::OpKind::kTransfer) continue;
    s.for_each_message(op, [&](const topo::MessageRef& m) {
      const uint64_t count = s.chunks()[m.chunk].count;
      ASSERT_TRUE(m.summed == 1 || m.summed == g) << m.summed;
      const uint64_t bits = m.summed == 1 ? 8 : 4;
      expected += 4 * ceil_div(count, 128) + ceil_div(count * bits, 8);
      (m.summed == 1 ? intra : inter) += 1;
    });
  }
  EXPECT_EQ(intra, ranks * (g - 1));
  EXPECT_EQ(inter, ranks * (ranks / g - 1));
  const CollectiveRun r = run_collective(*tlq, "reduce_scatter", "two_level", x, g);
  EXPECT_EQ(r.wire_bytes, expected);
}

TEST(Sdp4bitTlq, TwoLevelErrorIsBelowUniformInt4) {
  const uint32_t ranks = 8, g = 4;
  const uint64_t n = 128 * 8 * 40;
  std::vector<std::vector<float>> x;
  for (uint32_t r = 0; r < ranks; ++r) x.push_back(normal_vector(n, 30 + r));
  const double tlq = run_collective(*make("sdp4bit_tlq"), "reduce_scatter", "two_level", x, g).vnmse;
  const double ulq = run_collective(*make("sdp4bit_tlq", {{"mode", "ulq"}}), "reduce_scatter", "two_level", x, g).vnmse;
  SCOPED_TRACE(fmt::format("vNMSE tlq {:.4g} ulq {:.4g}", tlq, ulq));
  EXPECT_GT(tlq, 0.0);
  EXPECT_LT(tlq, 0.75 * ulq);
  EXPECT_LT(ulq, 0.05);
}

TEST(Sdp4bitTlq, HadamardSmootherBeatsTlqOnOutliers) {
  // N(0,1) gradients with one outlier of 20 per 128-group (the same position on every rank): the
  // int4 step of a node sum's group, 4 * 20 / 7, flattens the group's other values (sigma 2) to 0;
  // H_32 spreads the outlier over its 32-element block, which shrinks the step to about 2.
  const uint32_t ranks = 8, g = 4;
  const uint64_t n = 128 * 8 * 40 + 45;  // and an untransformed tail
  std::vector<std::vector<float>> x;
  for (uint32_t r = 0; r < ranks; ++r) {
    x.push_back(normal_vector(n, 40 + r));
    for (uint64_t grp = 0; grp < n / 128; ++grp) x[r][128 * grp + (grp * 37) % 128] = grp % 2 ? 20.0f : -20.0f;
  }
  for (const char* rounding : {"nearest", "stochastic"}) {
    const double tlq =
        run_collective(*make("sdp4bit_tlq", {{"rounding", rounding}}), "reduce_scatter", "two_level", x, g).vnmse;
    const double hs = run_collective(*make("sdp4bit_tlq", {{"rounding", rounding}, {"hadamard", true}}),
                                     "reduce_scatter", "two_level", x, g)
                          .vnmse;
    SCOPED_TRACE(fmt::format("{}: vNMSE tlq {:.4g} tlq-hs {:.4g}", rounding, tlq, hs));
    EXPECT_LT(hs, 0.5 * tlq);
  }
}

TEST(Sdp4bitTlq, HadamardIsAppliedOnceAroundTheCollective) {
  auto hs = make("sdp4bit_tlq", {{"hadamard", true}});
  for (const uint64_t n : {31ull, 32ull, 1000ull, 4096ull + 17}) {
    SCOPED_TRACE(fmt::format("n={}", n));
    const auto x = normal_vector(n, 50, 3.0f);
    // prepare() is kernels/transform/hadamard.hpp's transform of the complete 32-blocks, bit for
    // bit; the tail is copied.
    std::vector<float> p(n);
    hs->prepare(x, p, 2, 8, kern::RngKey{});
    auto expected = x;
    kern::hadamard_transform(expected.data(), n / 32 * 32, 32);
    EXPECT_EQ(p, expected);
    // finish() applies it again: the input comes back to fp32 rounding, the tail exactly; and in
    // place works the same way.
    std::vector<float> f(n);
    hs->finish(p, f, 2, 8);
    for (uint64_t i = 0; i < n; ++i) {
      if (i >= n / 32 * 32) {
        ASSERT_EQ(f[i], x[i]) << i;
      } else {
        ASSERT_NEAR(f[i], x[i], 1e-5 * 3.0) << i;
      }
    }
    auto in_place = x;
    hs->prepare(in_place, in_place, 2, 8, kern::RngKey{});
    hs->finish(in_place, in_place, 2, 8);
    EXPECT_EQ(in_place, f);
  }
  // Without the smoother prepare and finish copy.
  auto plain = make("sdp4bit_tlq");
  const auto x = normal_vector(100, 51);
  std::vector<float> p(100), f(100);
  plain->prepare(x, p, 0, 2, kern::RngKey{});
  plain->finish(p, f, 0, 2);
  EXPECT_EQ(f, x);
  // Blocks too large to transform in float are transformed in double and saturate, finitely.
  std::vector<float> huge(64, std::numeric_limits<float>::max());
  huge[1] = -huge[1];
  std::vector<float> hp(64), hf(64);
  hs->prepare(huge, hp, 0, 1, kern::RngKey{});
  hs->finish(hp, hf, 0, 1);
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(std::isfinite(hp[i]) && std::isfinite(hf[i])) << i;
}

// --- qW / qWD on the all-gather ------------------------------------------------------------------

TEST(Sdp4bitWeights, QwdMatchesQwOnRoundZeroAndIsFarBetterOnceWeightsMove) {
  const uint32_t ranks = 8;
  const uint64_t n = 2048 * 8 * 3 + 1000;
  // Weights: N(0, 0.02) with a few large entries (as LayerNorm gains near 1); the step moves them by 1e-4.
  auto w0 = normal_vector(n, 60, 0.02f);
  for (uint64_t i = 0; i < n; i += 997) w0[i] = 1.0f;
  const auto step = normal_vector(n, 61, 1e-4f);
  std::vector<float> w1(n);
  for (uint64_t i = 0; i < n; ++i) w1[i] = w0[i] + step[i];
  // Every rank holds the weights (only its shard matters to an all-gather).
  const std::vector<std::vector<float>> round0(ranks, w0), round1(ranks, w1);

  auto qw = make("sdp4bit_qw");
  auto qwd_c = make("sdp4bit_qwd");
  auto& qwd = dynamic_cast<Sdp4bitWeightCompressor&>(*qwd_c);
  EXPECT_TRUE(qwd.reference().empty());
  const CollectiveRun qw0 = run_collective(*qw, "allgather", "ring", round0, 1, 0);
  const CollectiveRun qwd0 = run_collective(qwd, "allgather", "ring", round0, 1, 0);
  EXPECT_EQ(qw0.out, qwd0.out);  // R = 0 on the first round
  EXPECT_EQ(qw0.wire_bytes, qwd0.wire_bytes);
  for (uint32_t r = 1; r < ranks; ++r) EXPECT_EQ(qwd0.out[r], qwd0.out[0]);
  ASSERT_EQ(qwd.reference().size(), n);
  EXPECT_TRUE(std::equal(qwd.reference().begin(), qwd.reference().end(), qwd0.out[0].begin()));
  EXPECT_GT(qw0.vnmse, 1e-4);

  const CollectiveRun qw1 = run_collective(*qw, "allgather", "ring", round1, 1, 1);
  const CollectiveRun qwd1 = run_collective(qwd, "allgather", "ring", round1, 1, 1);
  SCOPED_TRACE(fmt::format("round 1 vNMSE qW {:.4g} qWD {:.4g}", qw1.vnmse, qwd1.vnmse));
  // qW loses the small weights next to the large ones (vNMSE ~0.28); qWD quantizes the difference
  // (step + round 0's error), whose own int4 error is a few percent of it (~0.0055).
  EXPECT_LT(qwd1.vnmse, 0.05 * qw1.vnmse);
  EXPECT_EQ(qw1.wire_bytes, qwd1.wire_bytes);
  for (uint32_t r = 1; r < ranks; ++r) EXPECT_EQ(qwd1.out[r], qwd1.out[0]);
  EXPECT_TRUE(std::equal(qwd.reference().begin(), qwd.reference().end(), qwd1.out[0].begin()));

  // A tensor of another size restarts from R = 0, i.e. equals qW again.
  const std::vector<std::vector<float>> other(ranks, normal_vector(2048 * 8, 62));
  EXPECT_EQ(run_collective(qwd, "allgather", "ring", other).out, run_collective(*qw, "allgather", "ring", other).out);
}

}  // namespace
}  // namespace ccsim::algo
