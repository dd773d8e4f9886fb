// Compressor::plan_decisions(): what each adaptive scheme's last plan_commit fixed (DynamiQ's
// log2 C and mean bits, MX's mu, OmniReduce's k, EDGC's rank, THC's scale), checked against the
// compressor's own plan and against the controllers' rules recomputed by hand; schemes without a
// controller report nothing.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/mx/mx.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/thc/thc.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

using testing::make;
using testing::normal_vector;

template <class T>
T& as(Compressor& c) {
  return dynamic_cast<T&>(c);
}

/// The "name=value" pairs of a decision's detail.
std::map<std::string, std::string> fields(const std::string& detail) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < detail.size()) {
    size_t end = detail.find(' ', at);
    if (end == std::string::npos) end = detail.size();
    const std::string pair = detail.substr(at, end - at);
    const size_t eq = pair.find('=');
    EXPECT_NE(eq, std::string::npos) << "'" << pair << "' in '" << detail << "'";
    if (eq != std::string::npos) out[pair.substr(0, eq)] = pair.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

double number(const std::map<std::string, std::string>& f, const std::string& name) {
  const auto it = f.find(name);
  EXPECT_NE(it, f.end()) << "no " << name;
  return it == f.end() ? std::nan("") : std::stod(it->second);
}

void plan(Compressor& c, const std::vector<std::vector<float>>& bufs, uint32_t round = 0) {
  std::vector<std::span<const float>> ins(bufs.begin(), bufs.end());
  auto r = plan_round(c, ins, {1, round});
  ASSERT_TRUE(r.ok()) << r.status().message();
}

/// A whole round: plan, prepare, ring all-reduce, finish (key round `round`).
void full_round(Compressor& c, std::vector<std::vector<float>> bufs, uint32_t round = 0) {
  plan(c, bufs, round);
  topo::Schedule s = topo::make_allreduce_ring(static_cast<uint32_t>(bufs.size()), c.reduced_elements(bufs[0].size()),
                                               {c.alignment()});
  bind_schedule(s, c);
  std::vector<std::span<float>> views(bufs.begin(), bufs.end());
  auto stats = run_numerics(s, c, views, {1, round});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
}

// Super-groups whose scales spread over four decades, so all three widths occur.
std::vector<float> spread_vector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> decade(-4.0f, 0.0f);
  std::vector<float> x(n);
  float scale = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % 256 == 0) scale = std::pow(10.0f, decade(gen));
    x[i] = scale * normal(gen);
  }
  return x;
}

// --- DynamiQ ---------------------------------------------------------------------------------------

TEST(PlanDecisions, DynamiqReportsLog2CAndMeanBitsOfItsOwnWidthsWithinTheBudget) {
  for (uint64_t d : {uint64_t{256} * 400, uint64_t{256} * 300 + 77}) {  // the second has a partial super-group
    SCOPED_TRACE(d);
    const std::vector<std::vector<float>> data = {spread_vector(d, 1), spread_vector(d, 2), spread_vector(d, 3)};
    auto comp = make("dynamiq");
    auto& dq = as<DynamiqCompressor>(*comp);
    EXPECT_TRUE(comp->plan_decisions().empty());  // nothing planned yet
    plan(*comp, data);
    const auto ds = comp->plan_decisions();
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_EQ(ds[0].quantity, "log2_C");
    EXPECT_EQ(ds[1].quantity, "bits");

    // Mean bits = Σ m_j q_j / d from the compressor's own widths; counts per width.
    double payload = 0;
    std::map<uint32_t, uint64_t> count;
    for (uint64_t j = 0; j < dq.super_groups(); ++j) {
      payload += static_cast<double>(std::min<uint64_t>(256, d - 256 * j)) * dq.width_of(j);
      ++count[dq.width_of(j)];
    }
    const auto f = fields(ds[1].detail);
    EXPECT_EQ(ds[1].value, payload / static_cast<double>(d));
    EXPECT_LE(ds[1].value, number(f, "budget"));
    EXPECT_EQ(number(f, "budget"), dq.payload_budget());
    EXPECT_EQ(number(f, "budget_total"), 5.0);
    EXPECT_EQ(number(f, "super_groups"), static_cast<double>(dq.super_groups()));
    EXPECT_EQ(number(f, "w2") + number(f, "w4") + number(f, "w8"), static_cast<double>(dq.super_groups()));
    for (uint32_t w : {2u, 4u, 8u}) EXPECT_EQ(number(f, fmt::format("w{}", w)), static_cast<double>(count[w])) << w;
    EXPECT_GT(count[2], 0u);
    EXPECT_GT(count[8], 0u);
    if (d % 256 == 0) {
      // b̄ = 5 - (16 + 8·16)/256 - 64/256 = 4.1875 bits of payload per entry, exactly.
      EXPECT_EQ(number(f, "budget"), 4.1875);
      EXPECT_EQ(number(f, "budget"), 5.0 - DynamiqCompressor::metadata_bits_per_entry({}));
    }

    // log2 C and its thresholds: T_{a,b} = C / benefit(a, b), and App. A's u.
    const auto g = fields(ds[0].detail);
    ASSERT_EQ(dq.log2_thresholds().size(), 2u);
    EXPECT_EQ(number(g, "log2_T_2_4"), dq.log2_thresholds()[0]);
    EXPECT_EQ(number(g, "log2_T_4_8"), dq.log2_thresholds()[1]);
    // benefit(4, 8) = (4^4 - 1) / (4^8 · 4) = 255 / 2^18.
    EXPECT_NEAR(ds[0].value - dq.log2_thresholds()[1], std::log2(255.0 / 262144.0), 1e-12);
    EXPECT_NEAR(number(g, "u"), 4.0 - 4.0 / std::log2(512.0 / 17.0) * dq.log2_thresholds()[0], 1e-12);

    // The same inputs give the same search result, on this instance again and on a fresh one.
    plan(*comp, data, 1);
    EXPECT_EQ(comp->plan_decisions()[0].value, ds[0].value);
    EXPECT_EQ(comp->plan_decisions()[1].value, ds[1].value);
    auto fresh = make("dynamiq");
    plan(*fresh, data);
    EXPECT_EQ(fresh->plan_decisions()[0].value, ds[0].value);
    EXPECT_EQ(fresh->plan_decisions()[0].detail, ds[0].detail);
  }
}

TEST(PlanDecisions, DynamiqFixedWidthsAndTheGeneralWidthSet) {
  const uint64_t d = 256 * 200;
  const std::vector<std::vector<float>> data = {spread_vector(d, 4), spread_vector(d, 5)};
  // variable = false: no search; every super-group at the widest width within b̄ = 4.1875, i.e. 4.
  auto fixed = make("dynamiq", {{"variable", false}});
  plan(*fixed, data);
  auto ds = fixed->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].quantity, "bits");
  EXPECT_EQ(ds[0].value, 4.0);
  auto f = fields(ds[0].detail);
  EXPECT_EQ(number(f, "w4"), 200.0);
  EXPECT_EQ(number(f, "w2") + number(f, "w8"), 0.0);

  // W = {1,2,4,8,16}: log2 C with four thresholds, no u (App. A's form is for {2,4,8}).
  auto general = make("dynamiq", {{"widths", "1-2-4-8-16"}, {"budget", 6.0}});
  auto& dq = as<DynamiqCompressor>(*general);
  plan(*general, data);
  ds = general->plan_decisions();
  ASSERT_EQ(ds.size(), 2u);
  const auto g = fields(ds[0].detail);
  EXPECT_EQ(g.count("u"), 0u);
  EXPECT_EQ(number(g, "log2_T_8_16"), dq.log2_thresholds()[3]);
  f = fields(ds[1].detail);
  double sum = 0, payload = 0;
  for (uint32_t w : {1u, 2u, 4u, 8u, 16u}) sum += number(f, fmt::format("w{}", w));
  for (uint64_t j = 0; j < dq.super_groups(); ++j) payload += 256.0 * dq.width_of(j);
  EXPECT_EQ(sum, 200.0);
  EXPECT_EQ(ds[1].value, payload / static_cast<double>(d));
  EXPECT_LE(ds[1].value, number(f, "budget"));
}

// --- MX ----------------------------------------------------------------------------------------------

// Layer scaling, ε = 0.01, decay 1/2: mu starts at n = 4, then follows the overflow ratio of the
// encodes between plans: 16/800 = 0.02 > ε doubles, 4/800 halves, 8/800 = ε exactly halves (the
// rule is "exceeds"), no encodes hold.
TEST(PlanDecisions, MxMuStartsAtTheRankCountAndDoublesOrDecaysOnTheOverflowRatio) {
  const uint32_t n = 4;
  std::vector<std::vector<float>> bufs;
  for (uint32_t r = 0; r < n; ++r) bufs.push_back(normal_vector(1024, 70 + r, 0.1f));
  float gm = 0;
  for (const auto& b : bufs)
    for (float v : b) gm = std::max(gm, std::fabs(v));
  auto comp = make("mxfp8", {{"global_scaling", "layer"}, {"overflow_threshold", 0.01}, {"mu_decay", 0.5}});
  auto& mx = as<MxCompressor>(*comp);
  EXPECT_TRUE(comp->plan_decisions().empty());

  auto encode_with_overflows = [&](uint32_t overflows) {
    std::vector<float> x(800, 1.0f);
    for (uint32_t i = 0; i < overflows; ++i) x[(i * 7) % 800] = 1000.0f;  // > 448 = E4M3's max
    std::vector<uint8_t> msg(comp->wire_bytes({0, 800}, {1, n}));
    comp->encode(x, {0, 800}, {1, n}, kern::RngKey{}, msg);
  };
  struct Step {
    int overflows;  // encoded before the plan (-1: no encode at all)
    double mu;
    const char* move;
  };
  const std::vector<Step> steps = {{-1, 4.0, "init"}, {16, 8.0, "double"}, {4, 4.0, "decay"},
                                   {8, 2.0, "decay"}, {-1, 2.0, "hold"},   {800, 4.0, "double"}};
  double previous = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    SCOPED_TRACE(t);
    if (steps[t].overflows >= 0) encode_with_overflows(static_cast<uint32_t>(steps[t].overflows));
    plan(*comp, bufs, static_cast<uint32_t>(t));
    const auto ds = comp->plan_decisions();
    ASSERT_EQ(ds.size(), 1u);
    EXPECT_EQ(ds[0].quantity, "mu");
    EXPECT_EQ(ds[0].value, steps[t].mu);
    EXPECT_EQ(ds[0].value, mx.mu());
    // The reported mu is the one this round's scales use.
    EXPECT_EQ(mx.layer_scales()[0].to_fpx, static_cast<float>(mx.element_max() / (steps[t].mu * gm)));
    const auto f = fields(ds[0].detail);
    EXPECT_EQ(f.at("move"), steps[t].move);
    EXPECT_EQ(number(f, "overflow_threshold"), 0.01);
    EXPECT_EQ(number(f, "mu_decay"), 0.5);
    EXPECT_EQ(number(f, "previous_mu"), previous);
    if (steps[t].overflows >= 0) {
      EXPECT_EQ(number(f, "overflows"), static_cast<double>(steps[t].overflows));
      EXPECT_EQ(number(f, "encoded"), 800.0);
      EXPECT_EQ(number(f, "overflow_ratio"), steps[t].overflows / 800.0);
    } else {
      EXPECT_EQ(f.count("overflow_ratio"), 0u);
    }
    previous = steps[t].mu;
  }

  // Block scaling (the default) starts at n too; without global scaling there is no decision.
  auto block = make("mxfp6");
  plan(*block, {bufs[0], bufs[1], bufs[2]});
  ASSERT_EQ(block->plan_decisions().size(), 1u);
  EXPECT_EQ(block->plan_decisions()[0].value, 3.0);
  auto off = make("mxfp8", {{"global_scaling", "off"}});
  plan(*off, bufs);
  EXPECT_TRUE(off->plan_decisions().empty());
}

// --- OmniReduce --------------------------------------------------------------------------------------

// 64 chunks of 16, bits 8: K = 32. Four ranks with independent data pick different top-32 sets, so
// the union exceeds K and eq. 1 lowers k: k_{t+1} = 0.8 k_t + 0.2 (K / K'_t) k_t from k_0 = K.
TEST(PlanDecisions, OmniReduceKFollowsTheMomentumRuleFromTheReportedUnionSizes) {
  const uint32_t n = 4;
  auto comp = make("omnireduce", {{"chunk", 16}, {"bits", 8}});
  auto& omni = as<OmniReduceCompressor>(*comp);
  EXPECT_TRUE(comp->plan_decisions().empty());
  double k_real = 32;  // k_0 = K
  std::vector<uint64_t> ks;
  for (uint32_t t = 0; t < 3; ++t) {
    SCOPED_TRACE(t);
    std::vector<std::vector<float>> bufs;
    for (uint32_t r = 0; r < n; ++r) bufs.push_back(normal_vector(1024, 100 * t + r));
    plan(*comp, bufs, t);
    const auto ds = comp->plan_decisions();
    ASSERT_EQ(ds.size(), 1u);
    EXPECT_EQ(ds[0].quantity, "k");
    const auto f = fields(ds[0].detail);
    const double K = number(f, "K"), union_size = number(f, "K'");
    EXPECT_EQ(K, 32.0);
    EXPECT_EQ(number(f, "n_chunks"), 64.0);
    EXPECT_EQ(union_size, static_cast<double>(omni.union_chunks()));
    EXPECT_EQ(ds[0].value, std::round(k_real));  // the local k this round's ranks picked
    EXPECT_EQ(ds[0].value, static_cast<double>(omni.committed_k()));
    EXPECT_GE(union_size, ds[0].value);
    EXPECT_GT(union_size, K);
    EXPECT_DOUBLE_EQ(number(f, "k_t"), k_real);
    const double gamma = 0.8;  // eq. 1, in the implementation's order of operations
    k_real = gamma * k_real + (1.0 - gamma) * (K / union_size) * k_real;
    EXPECT_DOUBLE_EQ(number(f, "k_next"), k_real);
    ks.push_back(static_cast<uint64_t>(ds[0].value));
  }
  EXPECT_EQ(ks[0], 32u);
  EXPECT_LT(ks[2], ks[1]);
  EXPECT_LT(ks[1], ks[0]);
}

// --- EDGC --------------------------------------------------------------------------------------------

std::vector<float> matrix_gradient(uint64_t d, uint32_t seed) { return normal_vector(d, seed, 0.01f); }

TEST(PlanDecisions, EdgcReportsRankZeroWhileWarmingUpAndRmaxWithoutWarmup) {
  // One 64 x 64 matrix and a bias. DAC's bound allows more than 8, so r_max = 8, r_min = 2.
  const std::vector<LayerShape> layers = {{0, 4096, 64, 64}, {4096, 64, 64, 1}};
  const uint64_t d = 4160;
  const std::vector<std::vector<float>> bufs = {matrix_gradient(d, 1), matrix_gradient(d, 2)};

  auto warm = make("edgc", {{"max_rank", 8}});
  warm->set_layout(layers);
  plan(*warm, bufs);  // round 0 samples the entropy, so its metadata phase runs
  auto ds = warm->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].quantity, "rank");
  EXPECT_EQ(ds[0].value, 0.0);
  auto f = fields(ds[0].detail);
  EXPECT_EQ(number(f, "warming_up"), 1.0);
  EXPECT_EQ(number(f, "r_max"), 8.0);
  EXPECT_EQ(number(f, "r_min"), 2.0);
  EXPECT_EQ(f.count("H0"), 0u);  // no window has ended
  EXPECT_EQ(warm->reduced_elements(d), d);  // rank 0: everything travels uncompressed

  auto cold = make("edgc", {{"max_rank", 8}, {"warmup", false}});
  cold->set_layout(layers);
  plan(*cold, bufs);
  ds = cold->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].value, 8.0);
  f = fields(ds[0].detail);
  EXPECT_EQ(number(f, "warming_up"), 0.0);
  EXPECT_EQ(number(f, "r_max"), 8.0);
  EXPECT_EQ(cold->reduced_elements(d), 64u * 8 + 64);  // the reported rank is the engine's
}

// Window 1, α = 1, no warm-up: the first window's entropy becomes H0; gradients 4x smaller lower
// the window entropy by log2(4) = 2 bits (same sampled entries), and the rank falls by the step limit.
TEST(PlanDecisions, EdgcReportsWindowEntropyAgainstTheAnchor) {
  const std::vector<LayerShape> layers = {{0, 4096, 64, 64}, {4096, 64, 64, 1}};
  const uint64_t d = 4160;
  auto comp = make("edgc", {{"warmup", false}, {"window", 1}, {"alpha", 1.0}, {"max_rank", 8}, {"step_limit", 3}});
  comp->set_layout(layers);
  std::vector<std::vector<float>> bufs = {matrix_gradient(d, 3), matrix_gradient(d, 4)};
  full_round(*comp, bufs);
  for (auto& b : bufs)
    for (float& v : b) v *= 0.25f;
  full_round(*comp, bufs);  // key round 0 again: the same entries are sampled
  plan(*comp, bufs);
  const auto ds = comp->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  const auto f = fields(ds[0].detail);
  EXPECT_EQ(number(f, "rounds"), 2.0);
  EXPECT_NEAR(number(f, "H_w") - number(f, "H0"), -2.0, 1e-5);
  EXPECT_EQ(ds[0].value, 5.0);  // r_max - s
  EXPECT_EQ(ds[0].value, static_cast<double>(as<EdgcCompressor>(*comp).rank()));
  EXPECT_LT(number(f, "r_target"), 5.0);  // the step limit cut the move
}

// --- THC and schemes without a controller -----------------------------------------------------------

TEST(PlanDecisions, ThcReportsTheAgreedScale) {
  const std::vector<std::vector<float>> bufs = {normal_vector(1000, 1), normal_vector(1000, 2)};
  auto comp = make("thc");
  plan(*comp, bufs);
  auto ds = comp->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].quantity, "scale");
  EXPECT_EQ(ds[0].value, as<ThcCompressor>(*comp).lattice_max());
  EXPECT_GT(ds[0].value, 0.0);
  auto f = fields(ds[0].detail);
  EXPECT_EQ(f.at("lattice"), "valid");
  // M = M' 2^k, M' an fp32 number in [1, 2).
  EXPECT_EQ(std::ldexp(static_cast<double>(std::stof(f.at("m"))), std::stoi(f.at("k"))), ds[0].value);
  EXPECT_EQ(number(f, "bits"), 8.0);
  plan(*comp, {std::vector<float>(1000, 0.0f), std::vector<float>(1000, 0.0f)});
  ds = comp->plan_decisions();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].value, 0.0);
  EXPECT_EQ(fields(ds[0].detail).at("lattice"), "zero");
}

TEST(PlanDecisions, SchemesWithoutAControllerReportNothing) {
  const std::vector<std::vector<float>> bufs = {normal_vector(4160, 1), normal_vector(4160, 2)};
  for (const char* name : {"fp32", "bf16", "powersgd"}) {
    SCOPED_TRACE(name);
    auto comp = make(name);
    comp->set_layout(std::vector<LayerShape>{{0, 4096, 64, 64}, {4096, 64, 64, 1}});
    full_round(*comp, bufs);
    EXPECT_TRUE(comp->plan_decisions().empty());
  }
}

}  // namespace
}  // namespace ccsim::algo
