// The one lowering of a compressed collective round (algorithms/compressed_collective.hpp), the
// codecs of a data-parallel run's buckets (bucket_codecs.hpp), EDGC's stage controller
// (lowrank/edgc_stages.hpp) and AQGB's ratio controller (tfp/aqgb_controller.hpp): the training
// model's decisions, tested without the simulator or the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "algorithms/bucket_codecs.hpp"
#include "algorithms/compressed_collective.hpp"
#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/registry.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "algorithms/tfp/aqgb_controller.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

using testing::make;  // the registry's compressor, expected to exist

// Every operation but the all-reduce.
constexpr topo::CollectiveOp kNotAllReduce[] = {topo::CollectiveOp::kReduceScatter, topo::CollectiveOp::kAllGather,
                                                topo::CollectiveOp::kBroadcast, topo::CollectiveOp::kAllToAll};

const topo::CollectiveInfo& collective(const char* op, const char* algorithm) {
  auto c = topo::find_collective(op, algorithm);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return **c;
}

std::vector<PhaseKind> kinds(const CompressedCollective& c) {
  std::vector<PhaseKind> out;
  for (const topo::SchedulePhase& p : c.phases()) out.push_back(p.kind);
  return out;
}

// A scheme whose prepared vector has another length than the tensor (THC pads to its rotation
// block), or whose plan may change it (OmniReduce's compacted union, EDGC's controlled rank), can
// only be all-reduced; one of the tensor's length goes with any operation.
TEST(Lowering, OnlyAnAllReduceTakesAnotherLength) {
  const uint64_t n = 1000;
  auto thc = make("thc");
  auto omni = make("omnireduce");
  auto sparse = make("omnireduce", {{"layout", "sparse"}});
  auto bf16 = make("bf16");
  const uint64_t padded = thc->reduced_elements(n);
  ASSERT_NE(padded, n);
  ASSERT_EQ(omni->reduced_elements(n), n);  // before a plan
  EXPECT_TRUE(CompressedCollective::check_scheme(*thc, topo::CollectiveOp::kAllReduce, 4, n).ok());
  for (const auto op : kNotAllReduce) {
    SCOPED_TRACE(topo::collective_op_name(op));
    const Status st = CompressedCollective::check_scheme(*thc, op, 4, n);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(fmt::format("'thc' reduces {} entries for a tensor of 1000", padded)),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find(fmt::format("not {}", topo::collective_op_name(op))), std::string::npos);
    const Status compact = CompressedCollective::check_scheme(*omni, op, 4, n);
    EXPECT_NE(compact.message().find("whose length each round's plan decides"), std::string::npos)
        << compact.message();
    EXPECT_TRUE(CompressedCollective::check_scheme(*sparse, op, 4, n).ok());
    EXPECT_TRUE(CompressedCollective::check_scheme(*bf16, op, 4, n).ok());
  }
}

// THC rotates its whole tensor before the collective: even where nothing is padded, a shard of the
// rotated vector means nothing alone (a reduce-scatter or all-gather gave vNMSE > 20), so only an
// all-reduce may run it. TLq-HS's 32-entry Hadamard blocks stay within a shard and are allowed.
TEST(Lowering, OnlyAnAllReduceTakesAMixingPrepare) {
  const uint64_t n = 4096;
  auto thc = make("thc");
  ASSERT_EQ(thc->reduced_elements(n), n);
  auto tlq_hs = make("sdp4bit_tlq", {{"hadamard", true}});
  EXPECT_TRUE(CompressedCollective::check_scheme(*thc, topo::CollectiveOp::kAllReduce, 4, n).ok());
  for (const auto op : kNotAllReduce) {
    SCOPED_TRACE(topo::collective_op_name(op));
    const Status st = CompressedCollective::check_scheme(*thc, op, 4, n);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("'thc' mixes the tensor's entries"), std::string::npos) << st.message();
    EXPECT_TRUE(CompressedCollective::check_scheme(*tlq_hs, op, 4, n).ok());
  }
}

// THC's aggregation fields must hold the sum of every rank's codes: the scheme's own limit, found
// before any data exists, at its parameter.
TEST(Lowering, SchemeLimitsOnTheGroupNameTheirParameter) {
  auto thc = make("thc", {{"bits", "8"}});
  EXPECT_TRUE(CompressedCollective::check_scheme(*thc, topo::CollectiveOp::kAllReduce, 8, 4096).ok());
  const Status st = CompressedCollective::check_scheme(*thc, topo::CollectiveOp::kAllReduce, 64, 4096);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.pointer(), "/params/bits");
  EXPECT_NE(st.detail().find("overflow on 64 ranks"), std::string::npos) << st.detail();
}

// The round's phases in the order of algorithms/compressor.hpp, only those the scheme has; the
// metadata all-reduce carries the plan's bytes as fp32 words (at least one per rank).
TEST(Lowering, PhasesFollowTheRoundOrder) {
  const auto& ring = collective("allreduce", "ring");
  const uint64_t n = 1 << 14;
  auto bf16 = make("bf16");
  CompressedCollective plain(*bf16, ring, 4, n, {});
  ASSERT_TRUE(plain.fix().ok());
  EXPECT_EQ(plain.plan_bytes(), 0u);
  EXPECT_EQ(kinds(plain), std::vector<PhaseKind>{PhaseKind::kCollective});
  EXPECT_EQ(plain.tensor_wire_bytes(), 2 * n);

  auto dq = make("dynamiq");
  CompressedCollective planned(*dq, ring, 4, n, {});
  std::vector<std::vector<float>> data(4, std::vector<float>(n));
  for (uint32_t r = 0; r < 4; ++r)
    for (uint64_t i = 0; i < n; ++i) data[r][i] = std::sin(0.001f * static_cast<float>(i * (r + 1)));
  const std::vector<std::span<const float>> ins(data.begin(), data.end());
  ASSERT_TRUE(planned.plan(ins, {1, 0}).ok());
  // DynamiQ: 64 bits per 256-entry super-group.
  EXPECT_EQ(planned.plan_bytes(), n / 256 * 8);
  std::vector<PhaseKind> want = {PhaseKind::kMetadata, PhaseKind::kCollective};
  const std::vector<topo::KernelKind> round = planned.round_ops();
  if (std::find(round.begin(), round.end(), topo::KernelKind::kPlanLocal) != round.end())
    want.insert(want.begin(), PhaseKind::kPlanLocal);
  if (std::find(round.begin(), round.end(), topo::KernelKind::kPrepare) != round.end())
    want.insert(want.end() - 1, PhaseKind::kPrepare);
  if (std::find(round.begin(), round.end(), topo::KernelKind::kFinish) != round.end())
    want.push_back(PhaseKind::kFinish);
  EXPECT_EQ(kinds(planned), want);
  for (const topo::SchedulePhase& p : planned.phases()) {
    if (p.kind != PhaseKind::kMetadata) continue;
    EXPECT_EQ(p.scheme, "fp32");
    topo::Schedule s = topo::materialize(*p.make());
    EXPECT_EQ(s.elements(), n / 256 * 8 / 4);
  }
  // The numerics run the same schedule: its wire bytes are what the timing phases send.
  std::vector<std::vector<float>> bufs = data;
  std::vector<std::span<float>> views(bufs.begin(), bufs.end());
  const auto run = planned.run(views, {1, 0});
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (const topo::SchedulePhase& p : planned.phases())
    if (p.kind == PhaseKind::kCollective) {
      topo::Schedule timed = topo::materialize(*p.make());
      p.bind(timed, timed.id_base(), timed.id_end());
      EXPECT_EQ(run->stats.wire_bytes, timed.wire_bytes());
    }
}

// Byte-balanced cuts stay on the scheme's blocks whatever the data, so a tensor that is not a whole
// number of blocks always runs (a cut past the last whole block used to make the ring fail).
TEST(Lowering, ByteBalancedCutsNeverLeaveTheAlignment) {
  const auto& ring = collective("allreduce", "ring");
  for (const uint64_t n : {64ull, 300ull, 1000ull, 4096ull + 17}) {
    SCOPED_TRACE(n);
    auto dq = make("dynamiq");
    CompressedCollective c(*dq, ring, 4, n, {});
    ASSERT_TRUE(CompressedCollective::check(*dq, ring, 4, n, {}).ok());
    // All the energy in the last partial block: the balanced cuts would want to cut inside it.
    std::vector<std::vector<float>> data(4, std::vector<float>(n, 0.0f));
    for (auto& d : data)
      for (uint64_t i = n / 256 * 256; i < n; ++i) d[i] = 1.0f;
    const std::vector<std::span<const float>> ins(data.begin(), data.end());
    ASSERT_TRUE(c.plan(ins, {1, 0}).ok());
    const std::vector<uint64_t>& cuts = c.options().cuts;
    ASSERT_EQ(cuts.size(), 5u);
    for (size_t k = 1; k + 1 < cuts.size(); ++k) EXPECT_EQ(cuts[k] % 256, 0u) << cuts[k];
  }
}

// One codec per bucket size unless the scheme re-plans; re-planning codecs plan again every k
// rounds, and their decisions are reported exactly at the rounds that planned.
TEST(BucketCodecs, ShareByBucketSizeAndReplanEveryKRounds) {
  const auto& ring = collective("allreduce", "ring");
  const std::vector<BucketShape> buckets = {{8192, {{0, 8192, 8192, 1}}},
                                            {8192, {{0, 8192, 8192, 1}}},
                                            {4096, {{0, 4096, 4096, 1}}}};
  const SyntheticGradients synthetic(traces::SyntheticGradientSpec{}, 3);
  for (const uint32_t every : {0u, 2u}) {
    SCOPED_TRACE(every);
    BucketCodecs::Config config{"omnireduce", {{"chunk", 256}}, &ring, 4, {}, every};
    auto codecs = BucketCodecs::make(config, buckets, synthetic);
    ASSERT_TRUE(codecs.ok()) << codecs.status().message();
    EXPECT_TRUE(codecs->planned());
    EXPECT_EQ(codecs->replanned(), every > 0);
    std::vector<const CompressedCollective*> of_bucket;
    std::vector<PlanDecision> decisions;
    for (uint32_t round = 0; round < 6; ++round)
      for (uint32_t b = 0; b < buckets.size(); ++b) {
        auto c = codecs->round(round, b, decisions);
        ASSERT_TRUE(c.ok());
        const bool planned_now = round == 0 || (every > 0 && round % every == 0);
        EXPECT_EQ(!decisions.empty(), planned_now) << "round " << round << " bucket " << b;
        if (round == 0) of_bucket.push_back(*c);
        EXPECT_EQ(*c, of_bucket[b]);
      }
    // Shared by size: buckets 0 and 1 have one codec unless the scheme re-plans.
    EXPECT_EQ(of_bucket[0] == of_bucket[1], every == 0);
    uint64_t bytes = 0, plan = 0;
    for (const CompressedCollective* c : of_bucket) {
      bytes += c->tensor_wire_bytes();
      plan += c->plan_bytes();
    }
    EXPECT_EQ(codecs->model_bytes().tensor(), bytes);
    EXPECT_EQ(codecs->model_bytes().plan, plan);
    EXPECT_GT(plan, 0u);
  }
}

// make_all() plans every scheme's codecs from one synthetic draw per bucket size, which must leave
// each codec as make() alone makes it: the same decisions, plan and wire bytes in every round, for
// schemes that plan once (sharing draws) and one that re-plans (drawing its own).
TEST(BucketCodecs, MakeAllPlansEachSchemeAsMakeAloneDoes) {
  const auto& ring = collective("allreduce", "ring");
  const std::vector<BucketShape> buckets = {{8192, {{0, 8192, 8192, 1}}},
                                            {4096, {{0, 4096, 4096, 1}}},
                                            {8192, {{0, 8192, 8192, 1}}},
                                            {2048, {{0, 2048, 2048, 1}}}};
  const SyntheticGradients synthetic(traces::SyntheticGradientSpec{}, 5);
  const std::vector<BucketCodecs::Config> configs = {{"dynamiq", {{"budget", 5}}, &ring, 4, {}, 0},
                                                     {"mxfp8", nlohmann::json::object(), &ring, 4, {}, 0},
                                                     {"dynamiq", {{"budget", 3}}, &ring, 4, {}, 0},
                                                     {"omnireduce", {{"chunk", 256}}, &ring, 4, {}, 2}};
  auto all = BucketCodecs::make_all(configs, std::vector<std::vector<BucketShape>>(configs.size(), buckets), synthetic);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), configs.size());
  for (size_t k = 0; k < configs.size(); ++k) {
    SCOPED_TRACE(configs[k].scheme);
    auto alone = BucketCodecs::make(configs[k], buckets, synthetic);
    ASSERT_TRUE(alone.ok()) << alone.status().message();
    BucketCodecs& shared = (*all)[k];
    EXPECT_TRUE(shared.planned());
    EXPECT_EQ(shared.model_bytes().total(), alone->model_bytes().total());
    EXPECT_EQ(shared.model_bytes().plan, alone->model_bytes().plan);
    std::vector<PlanDecision> a, b;
    for (uint32_t round = 0; round < 4; ++round)
      for (uint32_t bucket = 0; bucket < buckets.size(); ++bucket) {
        auto x = shared.round(round, bucket, a);
        auto y = alone->round(round, bucket, b);
        ASSERT_TRUE(x.ok() && y.ok());
        EXPECT_EQ((*x)->tensor_wire_bytes(), (*y)->tensor_wire_bytes()) << round << " " << bucket;
        EXPECT_EQ((*x)->plan_bytes(), (*y)->plan_bytes()) << round << " " << bucket;
        ASSERT_EQ(a.size(), b.size()) << round << " " << bucket;
        for (size_t d = 0; d < a.size(); ++d) {
          EXPECT_EQ(a[d].quantity, b[d].quantity);
          EXPECT_EQ(a[d].value, b[d].value) << a[d].quantity;
          EXPECT_EQ(a[d].detail, b[d].detail) << a[d].quantity;
        }
      }
  }
}

// Algorithm 2 (EDGC §IV-D4): with η = T_com / r of the first stage's previous sync and T̄ the mean
// micro-batch backward over stages, stage s runs round((η r1 + s T̄) / η), clamped.
TEST(EdgcStageController, StageRanksGrowByTheBackwardTheyHideBehind) {
  EdgcStageController c(4, 64, EdgcAnchor::kFirstStage);
  StageObservations none;
  std::string why;
  EXPECT_EQ(c.decide(8, 0, 1, 3, none, why), 8u);  // round 0: no observation yet
  EXPECT_NE(why.find("no observation"), std::string::npos);
  c.record(0, 0, 8);
  StageObservations seen;
  seen.first_stage_sync_s = 0.01;                      // T_com(8) = 10 ms: η = 1.25 ms per rank
  seen.micro_backward_s = {0.002, 0.003, 0.004};       // T̄ = 3 ms: 2.4 ranks per stage
  EXPECT_EQ(c.decide(8, 1, 0, 3, seen, why), 8u);
  EXPECT_EQ(c.decide(8, 1, 1, 3, seen, why), 10u);     // 8 + 2.4
  EXPECT_EQ(c.decide(8, 1, 2, 3, seen, why), 13u);     // 8 + 4.8
  EXPECT_NE(why.find("eta=0.00125"), std::string::npos) << why;
  seen.micro_backward_s = {0.2, 0.3, 0.4};             // far beyond: clamped to r_max
  EXPECT_EQ(c.decide(8, 1, 2, 3, seen, why), 64u);
  // Anchor mean: the stages' mean rank stays at most the base rank.
  EdgcStageController mean(4, 64, EdgcAnchor::kMean);
  mean.record(0, 0, 8);
  seen.micro_backward_s = {0.002, 0.003, 0.004};
  double sum = 0;
  for (uint32_t s = 0; s < 3; ++s) sum += mean.decide(8, 1, s, 3, seen, why);
  EXPECT_LE(sum / 3, 8.0);
  EXPECT_GE(sum / 3, 8.0 - 1.0);
}

// AQGB §4.3 with TFP: q = max(q̄, min(b Δt / u, 1)) and L_F = ceil(32 q) bits go out in stage 1;
// stage 2 sends the deferred bits at the ratio of the time left to the next forward.
TEST(AqgbController, RatiosFollowTheObservedRateAndDeadline) {
  const AqgbController c(0.125, true);
  // 1e6 entries undelivered (4 MB at 32 bits), 2 ms to the next block at 1 GB/s: q1 = 0.5.
  AqgbController::Choice s1 = c.stage1(1.0, 1e9, false, 1.002, 1000000);
  EXPECT_DOUBLE_EQ(s1.bits, 16);
  EXPECT_DOUBLE_EQ(s1.deferred, 16);
  EXPECT_NE(s1.detail.find("q1 0.5"), std::string::npos) << s1.detail;
  EXPECT_DOUBLE_EQ(c.stage1(1.0, 1e9, true, 0, 1000000).bits, 4);     // last block: the floor
  EXPECT_DOUBLE_EQ(c.stage1(1.0, 1e9, false, 0.9, 1000000).bits, 4);  // deadline passed: the floor
  EXPECT_DOUBLE_EQ(c.stage1(1.0, 1e12, false, 2.0, 10).bits, 32);     // plenty of time: everything
  // Stage 2: 1e6 entries missing 16 bits (2 MB), 1 ms at 1 GB/s: q2 = 0.5, 8 bits per entry.
  const AqgbController::Choice s2 = c.stage2(1.0, 1e9, 1.001, 1000000, 16);
  EXPECT_NEAR(s2.value, 0.5, 1e-9);
  EXPECT_NEAR(s2.bits, 8, 1e-9);
  EXPECT_DOUBLE_EQ(c.floor_bytes(1000), 1000 * 4 * 0.125);
}

}  // namespace
}  // namespace ccsim::algo
