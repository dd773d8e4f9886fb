// SDP4Bit (Jia et al. 2024) Counterexample 4.1 on ccsim's own qW / qWD compressors and ring
// all-gather: SGD on f(w) = ||w||^2 with a nearest ternary weight quantizer stays at w_init = (1, -1)
// for ever, while SGD without weight quantization and SGD with weight-difference quantization
// converge to the optimum 0.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/numerics.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

// The paper's quantizer, s = max|w|, q(w) = round(w / s) * s with round to {-1, 0, 1}, is
// group_quant.hpp's kInt with 2 bits: L = 2^(2-1) - 1 = 1 level each side, so an entry codes as
// rint(x / m) clamped to [-1, 1] and decodes as (q / 1) * m, m = the group's max |x| (ties go to
// even, i.e. 0, but 1 - 4 eta > 1/2 for eta < 0.125 never ties). A group must fill whole bytes
// (group * bits % 8 == 0), so the smallest is 4: the 2-entry weight vector is one (short) group.
constexpr kern::GroupQuantFormat kTernary{kern::GroupElement::kInt, 2, 4, kern::Rounding::kNearest, false};
constexpr uint64_t kSeed = 41;  // std::mt19937_64 seed of the gradient draws, the same in every run
constexpr int kSteps = 200;

// The weight all-gather of sharded data parallelism on 2 ranks: a ring all-gather of the 2-entry
// weight vector with chunk boundaries aligned to the compressor's group (4). The even split then
// gives rank 0 the empty shard [0, 0) and rank 1 the whole vector [0, 2), one group: rank 1
// encodes it once and both ranks (rank 1 included) decode that message, running the compressor's
// prepare / finish around it, so both end with q(w) (qW) or R + q(w - R) (qWD, R = what the
// previous all-gather ended with).
class WeightAllGather {
 public:
  explicit WeightAllGather(Compressor& comp) : comp_(comp), schedule_(build(comp)) {}

  // Every rank passes the weights it computed (only the owner's shard is sent); returns what the
  // ranks end with, which is the same on both.
  std::vector<float> operator()(const std::vector<float>& w) {
    std::vector<std::vector<float>> bufs(2, w);
    std::vector<std::span<float>> spans(bufs.begin(), bufs.end());
    auto stats = run_numerics(schedule_, comp_, spans, {kSeed, round_++});
    EXPECT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(bufs[0], bufs[1]);
    return bufs[1];
  }

 private:
  static topo::Schedule build(const Compressor& comp) {
    topo::CollectiveOptions options;
    options.align = comp.alignment();
    topo::Schedule s = (*topo::find_collective("allgather", "ring"))->build(2, 2, options);
    EXPECT_EQ(s.shards(), (std::vector<topo::Chunk>{{0, 0}, {0, 2}}));
    bind_schedule(s, comp);
    return s;
  }

  Compressor& comp_;
  topo::Schedule schedule_;
  uint32_t round_ = 0;
};

using Sync = std::function<std::vector<float>(const std::vector<float>&)>;

struct SgdStep {
  int coordinate = 0;      // i of the drawn gradient g = (4 w_i) e_i
  std::vector<float> pre;  // w - eta g, what the ranks send
  std::vector<float> w;    // what the all-gather delivers: the next step's weights
};

// SGD from w_init = (1, -1), as the paper's Algorithm 4 (no master copy: each step starts from the
// weights the last all-gather delivered). A first all-gather distributes w_init (Algorithm 4's
// w~_0 <- w_0; for qWD it sets R = w_init, for the others it is exact). Step t draws coordinate
// i = gen() & 1, the same sequence in every run.
std::vector<SgdStep> run_sgd(float eta, const Sync& sync) {
  std::mt19937_64 gen(kSeed);
  std::vector<float> w = sync({1.0f, -1.0f});
  std::vector<SgdStep> steps;
  for (int t = 0; t < kSteps; ++t) {
    SgdStep s{static_cast<int>(gen() & 1), w, {}};
    s.pre[s.coordinate] = w[s.coordinate] - eta * (4.0f * w[s.coordinate]);
    s.w = sync(s.pre);
    w = s.w;
    steps.push_back(std::move(s));
  }
  return steps;
}

// The paper's claim: from (1, -1) the step goes to (1 - 4 eta, -1) or (1, -1 + 4 eta), which the
// ternary quantizer maps back to (1, -1), at every step, bit for bit.
void expect_stuck(const std::vector<SgdStep>& qw, float eta) {
  const double moved = 1.0 - 4.0 * static_cast<double>(eta);
  for (int t = 0; t < kSteps; ++t) {
    SCOPED_TRACE(fmt::format("qW step {}", t));
    const std::vector<float>& pre = qw[t].pre;
    if (qw[t].coordinate == 0) {
      EXPECT_NEAR(pre[0], moved, 1e-6);
      EXPECT_EQ(pre[1], -1.0f);
    } else {
      EXPECT_EQ(pre[0], 1.0f);
      EXPECT_NEAR(pre[1], -moved, 1e-6);
    }
    ASSERT_EQ(qw[t].w, (std::vector<float>{1.0f, -1.0f}));
  }
}

// Coordinate i is multiplied by 1 - 4 eta once per draw of i: after the run w = ((1 - 4 eta)^k0,
// -(1 - 4 eta)^k1), to fp32 rounding over ~100 steps per coordinate.
void expect_converged(const std::vector<SgdStep>& run, float eta) {
  int k[2] = {0, 0};
  for (const SgdStep& s : run) ++k[s.coordinate];
  const double factor = 1.0 - 4.0 * static_cast<double>(eta);
  const double expected[2] = {std::pow(factor, k[0]), -std::pow(factor, k[1])};
  const std::vector<float>& w = run.back().w;
  SCOPED_TRACE(fmt::format("draws {} / {}, w = ({:.6g}, {:.6g})", k[0], k[1], w[0], w[1]));
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(w[i], expected[i], 1e-4 * std::fabs(expected[i]));
  EXPECT_LT(std::hypot(w[0], w[1]), 1e-3);
}

TEST(Sdp4bitCounterexample41, TwoBitGroupsAreTheNearestTernaryQuantizer) {
  Sdp4bitWeightCompressor qw(kTernary, false);
  const HopContext hop{1, 2};
  EXPECT_EQ(testing::round_trip(qw, {0.6f, -1.0f}, hop), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(testing::round_trip(qw, {1.0f, -0.55f}, hop), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(testing::round_trip(qw, {0.4f, -1.0f}, hop), (std::vector<float>{0.0f, -1.0f}));
  EXPECT_EQ(testing::round_trip(qw, {-0.3f, 0.2f}, hop), (std::vector<float>{-0.3f, 0.3f}));
  EXPECT_EQ(testing::round_trip(qw, {0.0f, -0.25f}, hop), (std::vector<float>{0.0f, -0.25f}));
}

TEST(Sdp4bitCounterexample41, TernaryWeightQuantizationStallsWeightDifferencesConverge) {
  for (const float eta : {0.1f, 0.05f}) {
    SCOPED_TRACE(fmt::format("eta={}", eta));
    Sdp4bitWeightCompressor qw_comp(kTernary, false), qwd_comp(kTernary, true);
    WeightAllGather qw_sync(qw_comp), qwd_sync(qwd_comp);
    const auto sgd = run_sgd(eta, [](const std::vector<float>& w) { return w; });
    const auto qw = run_sgd(eta, std::ref(qw_sync));
    const auto qwd = run_sgd(eta, std::ref(qwd_sync));
    expect_stuck(qw, eta);
    expect_converged(sgd, eta);
    expect_converged(qwd, eta);
    // qWD is even exact here: a step changes one coordinate, so w - R has one nonzero entry d,
    // the group's maximum, whose ternary code +-1 decodes to d itself; d = (w - eta g) - w is
    // exact in fp32 (Sterbenz: w - eta g lies in [w / 2, w]), so R + d = w - eta g.
    for (int t = 0; t < kSteps; ++t) ASSERT_EQ(qwd[t].w, sgd[t].w) << "step " << t;
  }
}

}  // namespace
}  // namespace ccsim::algo
