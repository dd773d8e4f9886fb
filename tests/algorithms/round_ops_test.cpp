// Round ops (plan_local, prepare, finish): which schemes run them, the memory traffic each declares
// (the formulas of the compressors' headers, recomputed here from the scheme's parameters and
// plan), the one-step round-op schedule, its binding, and how cost models charge and describe them.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cost_profile.hpp"
#include "kernels/transform/hadamard.hpp"
#include "sim/kernel_cost.hpp"
#include "topology/schedule.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {
namespace {

using topo::KernelKind;
constexpr KernelKind kPlan = KernelKind::kPlanLocal, kPrep = KernelKind::kPrepare, kFin = KernelKind::kFinish;
constexpr uint32_t kRanks = 4;

std::unique_ptr<Compressor> make(const std::string& scheme, const nlohmann::json& params = nlohmann::json::object()) {
  auto made = CompressorRegistry::global().create(scheme, params);
  EXPECT_TRUE(made.ok()) << scheme << ": " << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

uint64_t bytes(const Compressor& c, KernelKind kind, uint64_t n) {
  return c.memory_bytes(kind, TensorSpec{0, n}, HopContext{1, kRanks});
}

// Plans `c` on four ranks' synthetic gradients of n entries (what the round ops' bytes depend on).
void plan(Compressor& c, uint64_t n, uint64_t seed = 7) {
  std::vector<std::vector<float>> x(kRanks, std::vector<float>(n));
  std::vector<std::span<float>> views(x.begin(), x.end());
  traces::SyntheticGradientSpec spec;
  spec.elements = n;
  traces::generate_synthetic_gradients(spec, seed, views);
  std::vector<std::span<const float>> ins(x.begin(), x.end());
  ASSERT_TRUE(plan_round(c, ins, NumericsOptions{seed, 0, false}).ok());
}

TEST(RoundOps, SchemesWithoutRoundWorkRunNone) {
  for (const char* s : {"fp32", "bf16", "fp16", "int8", "tfp", "qsgd", "equarx", "sdp4bit_q", "sdp4bit_qw"}) {
    auto c = make(s);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(round_ops(*c, 1 << 16, kRanks).empty()) << s;
  }
  // Options that switch the round work off.
  EXPECT_TRUE(round_ops(*make("mxfp8", {{"global_scaling", "off"}}), 1 << 16, kRanks).empty());
  EXPECT_TRUE(round_ops(*make("sdp4bit_tlq", {{"hadamard", false}}), 1 << 16, kRanks).empty());
}

TEST(RoundOps, DynamiqReadsTheTensorOnceInEachPhase) {
  for (const uint32_t S : {256u, 64u}) {
    auto c = make("dynamiq", {{"super_group", S}});
    const uint64_t n = 100000, groups = (n + S - 1) / S;  // a partial last super-group
    plan(*c, n);
    EXPECT_EQ(round_ops(*c, n, kRanks), (std::vector<KernelKind>{kPlan, kPrep, kFin}));
    EXPECT_EQ(bytes(*c, kPlan, n), 4 * n + 16 * groups);
    EXPECT_EQ(bytes(*c, kPrep, n), 8 * n + 4 * groups);
    EXPECT_EQ(bytes(*c, kFin, n), 8 * n + 4 * groups);
  }
}

TEST(RoundOps, ThcChargesTheRotationsPasses) {
  EXPECT_EQ(kern::hadamard_tiled_passes(1), 1u);
  EXPECT_EQ(kern::hadamard_tiled_passes(1 << 13), 1u);
  EXPECT_EQ(kern::hadamard_tiled_passes(1 << 14), 2u);
  EXPECT_EQ(kern::hadamard_tiled_passes(1 << 21), 2u);
  EXPECT_EQ(kern::hadamard_tiled_passes(1 << 22), 3u);
  EXPECT_EQ(kern::hadamard_tiled_passes(1 << 24), 3u);
  struct Case {
    uint64_t block, n, padded, passes;
  };
  // The block is capped at the power of two >= the tensor, which is padded to a multiple of it.
  for (const Case& k : {Case{1 << 20, 3000000, 3 << 20, 2}, Case{1 << 12, 10000, 12288, 1},
                        Case{1 << 22, 5000000, 8 << 20, 3}, Case{1 << 20, 5000, 8192, 1}}) {
    auto c = make("thc", {{"rotation_block", k.block}});
    EXPECT_EQ(c->reduced_elements(k.n), k.padded) << k.n;
    EXPECT_EQ(round_ops(*c, k.n, kRanks), (std::vector<KernelKind>{kPlan, kPrep, kFin}));
    EXPECT_EQ(bytes(*c, kPlan, k.n), 4 * k.n + (8 * k.passes - 4) * k.padded) << k.n;
    EXPECT_EQ(bytes(*c, kPrep, k.n), 8 * k.passes * k.padded) << k.n;
    EXPECT_EQ(bytes(*c, kFin, k.n), 8 * k.passes * k.padded) << k.n;
  }
}

TEST(RoundOps, MxGlobalScalingReadsTheTensorAndWritesItsMaxima) {
  const uint64_t n = 1 << 16;
  auto block = make("mxfp8");  // block scaling: one max per 32-entry block
  // Block scaling: encode applies the agreed scale codes, so prepare and finish are copies.
  EXPECT_EQ(round_ops(*block, n, kRanks), (std::vector<KernelKind>{kPlan}));
  EXPECT_EQ(bytes(*block, kPlan, n), 4 * n + 4 * (n / 32));
  EXPECT_EQ(bytes(*block, kPrep, n), 0u);
  EXPECT_EQ(bytes(*block, kFin, n), 0u);
  auto layer = make("mxfp4", {{"global_scaling", "layer"}});
  const std::vector<LayerShape> layers = {{0, n / 4, n / 4, 1}, {n / 4, 3 * n / 4, 3 * n / 4, 1}};
  layer->set_layout(layers);
  EXPECT_EQ(round_ops(*layer, n, kRanks), (std::vector<KernelKind>{kPlan, kPrep, kFin}));
  EXPECT_EQ(bytes(*layer, kPlan, n), 4 * n + 4 * 2);  // one max per layer
  EXPECT_EQ(bytes(*layer, kPrep, n), 8 * n);          // x times its layer's scale
  EXPECT_EQ(bytes(*layer, kFin, n), 8 * n);
}

TEST(RoundOps, OmniReduceGathersAndScattersTheUnion) {
  const uint64_t n = 1 << 18;
  auto compact = make("omnireduce");
  plan(*compact, n);
  const auto& omni = dynamic_cast<const OmniReduceCompressor&>(*compact);
  const uint64_t chunks = n / 256, u = compact->reduced_elements(n);
  ASSERT_GT(u, 0u);
  ASSERT_LT(u, n);
  EXPECT_EQ(u, omni.union_chunks() * 256);
  EXPECT_EQ(bytes(*compact, kPlan, n), 4 * n + 8 * ((chunks + 63) / 64));
  EXPECT_EQ(bytes(*compact, kPrep, n), 8 * u);
  EXPECT_EQ(bytes(*compact, kFin, n), 4 * u + 4 * n);
  auto sparse = make("omnireduce", {{"layout", "sparse"}});
  plan(*sparse, n);
  const uint64_t u_sparse = dynamic_cast<const OmniReduceCompressor&>(*sparse).union_chunks() * 256;
  EXPECT_EQ(bytes(*sparse, kPrep, n), 4 * (n - u_sparse));  // zero-fill outside the union, in place
  EXPECT_EQ(round_ops(*sparse, n, kRanks), (std::vector<KernelKind>{kPlan, kPrep}));  // finish is a copy
  // send=own: the gather reads the rank's own k chunks; in place, zeros over everything else.
  for (const bool is_compact : {true, false}) {
    auto own = make("omnireduce", {{"layout", is_compact ? "compact" : "sparse"}, {"send", "own"}});
    plan(*own, n);
    const auto& o = dynamic_cast<const OmniReduceCompressor&>(*own);
    const uint64_t k_own = o.committed_k() * 256, u_own = o.union_chunks() * 256;
    ASSERT_LT(k_own, u_own);
    EXPECT_EQ(bytes(*own, kPrep, n), is_compact ? 4 * k_own + 4 * u_own : 4 * (n - k_own));
    EXPECT_EQ(bytes(*own, kFin, n), is_compact ? 4 * u_own + 4 * n : 0);
  }
}

TEST(RoundOps, LowRankCountsFactorsResidualsAndUncompressedLayers) {
  // A 512 x 256 matrix (compressed at rank 4) and a 1000-entry bias (uncompressed).
  const uint64_t c = 512 * 256, u = 1000, n = c + u, r = 4, q = 256 * r, p = 512 * r;
  const std::vector<LayerShape> layers = {{0, c, 512, 256}, {c, u, u, 1}};
  for (const bool ef : {true, false}) {
    auto low = make("powersgd", {{"rank", r}, {"error_feedback", ef}});
    low->set_layout(layers);
    plan(*low, n);
    const uint64_t e = ef ? 1 : 0;
    EXPECT_EQ(low->reduced_elements(n), q + u);
    EXPECT_EQ(bytes(*low, kPlan, n), 4 * c * (3 + e) + 4 * p) << ef;
    EXPECT_EQ(bytes(*low, kPrep, n), 4 * c * (1 + 2 * e) + 4 * q + 4 * u * (2 + 2 * e)) << ef;
    EXPECT_EQ(bytes(*low, kFin, n), 4 * q + 4 * c + 8 * u) << ef;
  }
  // Nothing compressed (a 1-D tensor): no plan; prepare only adds the residual; finish is a copy.
  auto flat = make("powersgd");
  EXPECT_EQ(round_ops(*flat, n, kRanks), (std::vector<KernelKind>{kPrep}));
  EXPECT_EQ(bytes(*flat, kPrep, n), 16 * n);
  EXPECT_TRUE(round_ops(*make("powersgd", {{"error_feedback", false}}), n, kRanks).empty());
}

// EDGC's sampled rounds add GDS's entropy estimate to plan_local: two passes over the matrix
// layers (range, then histogram), 8 bytes per entry; other rounds of its warm-up have no plan.
TEST(RoundOps, EdgcSampledRoundsReadTheMatrixLayersTwice) {
  const uint64_t c = 512 * 256, u = 1000, n = c + u;
  const std::vector<LayerShape> layers = {{0, c, 512, 256}, {c, u, u, 1}};
  auto edgc = make("edgc", {{"alpha", 0.5}});  // a sample every 2 rounds, starting uncompressed
  edgc->set_layout(layers);
  auto& e = dynamic_cast<EdgcCompressor&>(*edgc);
  ASSERT_EQ(e.rank(), 0u);
  ASSERT_TRUE(e.controller().samples_round());
  EXPECT_EQ(bytes(*edgc, kPlan, n), 8 * c + 2 * 4);  // the matrix twice, and the 2 fp32 sums
  e.observe_round(std::nullopt);
  ASSERT_FALSE(e.controller().samples_round());
  EXPECT_EQ(bytes(*edgc, kPlan, n), 0u);
  // Uncompressed: prepare only moves x + e into the reduced vector (error feedback is on).
  EXPECT_EQ(round_ops(*edgc, n, kRanks), (std::vector<KernelKind>{kPrep}));
}

TEST(RoundOps, Sdp4bitHadamardAndWeightDifferences) {
  const uint64_t n = 4096;
  auto hs = make("sdp4bit_tlq", {{"hadamard", true}});
  EXPECT_EQ(round_ops(*hs, n, kRanks), (std::vector<KernelKind>{kPrep, kFin}));
  EXPECT_EQ(bytes(*hs, kPrep, n), 8 * n);
  EXPECT_EQ(bytes(*hs, kFin, n), 8 * n);
  auto qwd = make("sdp4bit_qwd");
  EXPECT_EQ(round_ops(*qwd, n, kRanks), (std::vector<KernelKind>{kPrep, kFin}));
  EXPECT_EQ(bytes(*qwd, kPrep, n), 12 * n);
  EXPECT_EQ(bytes(*qwd, kFin, n), 16 * n);
}

TEST(RoundOps, ScheduleHasOneIndependentOpPerRankOnTheWholeTensor) {
  auto gen = topo::make_round_ops(kPrep, 5, 12345);
  topo::Schedule s = topo::materialize(*gen);
  EXPECT_EQ(s.name(), "prepare");
  ASSERT_EQ(s.chunks().size(), 1u);
  EXPECT_EQ(s.chunks()[0], (topo::Chunk{0, 12345}));
  ASSERT_EQ(s.ops().size(), 5u);
  EXPECT_EQ(s.num_transfers(), 0u);
  auto dyn = make("dynamiq");
  plan(*dyn, 12345);
  bind_schedule(s, *dyn);
  for (uint32_t r = 0; r < 5; ++r) {
    const topo::Op& op = s.op(r);
    EXPECT_EQ(op.kind, topo::OpKind::kKernel);
    EXPECT_EQ(op.kernel, kPrep);
    EXPECT_EQ(op.rank, r);
    EXPECT_EQ(op.num_deps, 0u);
    EXPECT_EQ(op.message, topo::kNoOp);
    EXPECT_EQ(s.op_elements(op), 12345u);
    EXPECT_EQ(op.bytes, dyn->memory_bytes(kPrep, TensorSpec{0, 12345}, HopContext{1, 5}));
  }
  EXPECT_FALSE(topo::Schedule::consumes_message(kPlan));
  EXPECT_FALSE(topo::Schedule::produces_message(kFin));
}

TEST(RoundOps, CostModelsChargeThemAndSayHow) {
  sim::KernelCostModel roof;
  roof.memory_Bps = 1e9;
  roof.launch = Duration::from_seconds(5e-6);
  EXPECT_EQ(roof.cost(kPrep, 1000, 8000), Duration::from_seconds(5e-6) + Duration::from_seconds(8e-6));
  // A profile measuring only dynamiq's prepare: it is charged from the curve, plan_local and finish
  // by the roofline, and the description names both (and no round op the scheme does not run).
  auto profile = std::make_shared<kern::DeviceCostProfile>();
  profile->kind = "cuda";
  profile->name = "test GPU";
  profile->measured = "2026-11-21";
  profile->kernels.push_back({"dynamiq", "prepare", "{}", 2e-6, {{1000, 1000000, 2e-6 + 1e-3}}});
  const sim::KernelCostModel m = sim::KernelCostModel::from_profile(profile, "p.json", "dynamiq", "{}", roof);
  EXPECT_EQ(m.cost(kPrep, 1000, 1000000), Duration::from_seconds_ceil(2e-6 + 1e-3));
  EXPECT_EQ(m.cost(kFin, 1000, 8000), roof.cost(kFin, 1000, 8000));
  const std::vector<KernelKind> runs = {kPlan, kPrep, kFin};
  const std::string d = m.describe(runs);
  EXPECT_NE(d.find("(prepare)"), std::string::npos) << d;
  EXPECT_NE(d.find("for encode, decode, decode_accumulate, decode_accumulate_encode, plan_local, finish"),
            std::string::npos)
      << d;
  const std::string none = m.describe();
  EXPECT_EQ(none.find("plan_local"), std::string::npos) << none;
  EXPECT_NE(none.find("(prepare)"), std::string::npos) << none;  // a measured op is always named
}

}  // namespace
}  // namespace ccsim::algo
