#include "sim/training/pipeline_schedule.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <tuple>
#include <utility>

namespace ccsim::sim {
namespace {

using Op = PipelineOp;
constexpr Op F(uint32_t i) { return {Op::kForward, i}; }
constexpr Op B(uint32_t i) { return {Op::kBackward, i}; }

PipelineOrder order_of(PipelineKind kind, uint32_t p, uint32_t m) {
  auto r = pipeline_order(kind, p, m);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

// Independent oracle: the finish time of every op as the longest weighted path ending at it in the
// dependency DAG (node weight = op duration, cross-stage edge weight = d), by memoised recursion
// over predecessors. Shares no code with execute_pipeline's forward sweep.
class LongestPath {
 public:
  LongestPath(const PipelineOrder& order, std::vector<double> tf, std::vector<double> tb, double d)
      : order_(order), tf_(std::move(tf)), tb_(std::move(tb)), d_(d) {
    for (uint32_t s = 0; s < order.size(); ++s)
      for (size_t k = 0; k < order[s].size(); ++k) position_[key(s, order[s][k])] = k;
  }

  double finish(uint32_t s, Op op) {
    const auto k = key(s, op);
    if (auto it = memo_.find(k); it != memo_.end()) return it->second;
    double ready = 0;
    const size_t pos = position_.at(k);
    if (pos > 0) ready = std::max(ready, finish(s, order_[s][pos - 1]));
    const auto p = static_cast<uint32_t>(order_.size());
    if (op.kind == Op::kForward) {
      if (s > 0) ready = std::max(ready, finish(s - 1, op) + d_);
    } else {
      ready = std::max(ready, finish(s, F(op.micro_batch)));
      if (s + 1 < p) ready = std::max(ready, finish(s + 1, op) + d_);
    }
    const double end = ready + (op.kind == Op::kForward ? tf_[s] : tb_[s]);
    memo_[k] = end;
    return end;
  }

  double makespan() {
    double best = 0;
    for (uint32_t s = 0; s < order_.size(); ++s)
      for (const Op& op : order_[s]) best = std::max(best, finish(s, op));
    return best;
  }

 private:
  using Key = std::tuple<uint32_t, int, uint32_t>;
  static Key key(uint32_t s, Op op) { return {s, static_cast<int>(op.kind), op.micro_batch}; }
  const PipelineOrder& order_;
  std::vector<double> tf_, tb_;
  double d_;
  std::map<Key, size_t> position_;
  std::map<Key, double> memo_;
};

const std::vector<std::pair<uint32_t, uint32_t>> kShapes = {{1, 1}, {1, 5}, {2, 1}, {4, 1}, {4, 2}, {4, 3},
                                                             {4, 4}, {3, 8}, {8, 3}, {2, 7}, {6, 16}};
constexpr PipelineKind kKinds[] = {PipelineKind::kGPipe, PipelineKind::k1F1B};

TEST(PipelineSchedule, ParsesKindNames) {
  EXPECT_EQ(*parse_pipeline_kind("gpipe"), PipelineKind::kGPipe);
  EXPECT_EQ(*parse_pipeline_kind("1f1b"), PipelineKind::k1F1B);
  for (PipelineKind k : kKinds) EXPECT_EQ(*parse_pipeline_kind(pipeline_kind_name(k)), k);
  const auto bad = parse_pipeline_kind("pipedream");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'pipedream'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("valid: gpipe, 1f1b"), std::string::npos) << bad.status().message();
}

TEST(PipelineSchedule, RejectsZeroSizes) {
  for (PipelineKind k : kKinds) {
    const auto no_stages = pipeline_order(k, 0, 4);
    ASSERT_FALSE(no_stages.ok());
    EXPECT_EQ(no_stages.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(no_stages.status().message().find("stages: expected >= 1"), std::string::npos);
    const auto no_mb = pipeline_order(k, 4, 0);
    ASSERT_FALSE(no_mb.ok());
    EXPECT_EQ(no_mb.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(no_mb.status().message().find("micro_batches: expected >= 1"), std::string::npos);
  }
  EXPECT_FALSE(pipeline_order(PipelineKind::k1F1B, 1u << 16, 1u << 16).ok());  // 2^32 ops: refused
}

TEST(PipelineSchedule, ExactOrders) {
  using V = std::vector<Op>;
  const PipelineOrder gpipe = order_of(PipelineKind::kGPipe, 2, 3);
  for (const auto& stage : gpipe) EXPECT_EQ(stage, (V{F(0), F(1), F(2), B(2), B(1), B(0)}));
  // 1F1B, p = 3, m = 4: warm-up 2, 1, 0 forwards.
  const PipelineOrder ofob = order_of(PipelineKind::k1F1B, 3, 4);
  EXPECT_EQ(ofob[0], (V{F(0), F(1), F(2), B(0), F(3), B(1), B(2), B(3)}));
  EXPECT_EQ(ofob[1], (V{F(0), F(1), B(0), F(2), B(1), F(3), B(2), B(3)}));
  EXPECT_EQ(ofob[2], (V{F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3)}));
  // m < p: warm-up is capped at m, leaving no steady state on stage 0.
  const PipelineOrder short_pipe = order_of(PipelineKind::k1F1B, 4, 2);
  EXPECT_EQ(short_pipe[0], (V{F(0), F(1), B(0), B(1)}));
  EXPECT_EQ(short_pipe[2], (V{F(0), F(1), B(0), B(1)}));
  EXPECT_EQ(short_pipe[3], (V{F(0), B(0), F(1), B(1)}));
}

TEST(PipelineSchedule, EveryMicroBatchOnceEachWayAndDependenciesHold) {
  for (PipelineKind kind : kKinds) {
    for (auto [p, m] : kShapes) {
      SCOPED_TRACE(fmt::format("{} p={} m={}", pipeline_kind_name(kind), p, m));
      const PipelineOrder order = order_of(kind, p, m);
      ASSERT_EQ(order.size(), p);
      for (uint32_t s = 0; s < p; ++s) {
        ASSERT_EQ(order[s].size(), 2 * size_t{m});
        std::vector<int> nf(m), nb(m);
        std::vector<uint32_t> fwd, bwd;
        for (const Op& op : order[s]) {
          ASSERT_LT(op.micro_batch, m);
          if (op.kind == Op::kForward) {
            ++nf[op.micro_batch];
            fwd.push_back(op.micro_batch);
          } else {
            ++nb[op.micro_batch];
            bwd.push_back(op.micro_batch);
          }
        }
        EXPECT_TRUE(std::all_of(nf.begin(), nf.end(), [](int c) { return c == 1; }));
        EXPECT_TRUE(std::all_of(nb.begin(), nb.end(), [](int c) { return c == 1; }));
        EXPECT_TRUE(std::is_sorted(fwd.begin(), fwd.end()));
        if (kind == PipelineKind::kGPipe) {
          EXPECT_TRUE(std::is_sorted(bwd.rbegin(), bwd.rend()));  // B(m-1) first
          EXPECT_TRUE(std::all_of(order[s].begin(), order[s].begin() + m, [](Op o) { return o.kind == Op::kForward; }));
        } else {
          EXPECT_TRUE(std::is_sorted(bwd.begin(), bwd.end()));
          // Leading forwards: the min(p-s-1, m) warm-up ones plus the first steady-state one.
          const auto first_b =
              std::find_if(order[s].begin(), order[s].end(), [](Op o) { return o.kind == Op::kBackward; });
          const auto lead = first_b - order[s].begin();
          EXPECT_EQ(lead, std::min(p - s, m));
        }
      }
      EXPECT_TRUE(check_pipeline_order(order).ok()) << check_pipeline_order(order).message();
    }
  }
}

TEST(PipelineSchedule, RejectsDeadlockNamingTheStuckOps) {
  // Stage 0 wants B0 before F1, but B0 needs stage 1's B0, which stage 1 runs only after F1,
  // which needs stage 0's F1: a cycle.
  const PipelineOrder cyclic = {{F(0), B(0), F(1), B(1)}, {F(0), F(1), B(0), B(1)}};
  const Status st = check_pipeline_order(cyclic);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("deadlock"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("stage 0 stuck at B0 (waits for B0 on stage 1)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("stage 1 stuck at F1 (waits for F1 on stage 0)"), std::string::npos) << st.message();
  // The same stage-0 order with stage 1 in 1F1B order is fine.
  EXPECT_TRUE(check_pipeline_order({{F(0), B(0), F(1), B(1)}, {F(0), B(0), F(1), B(1)}}).ok());

  const Status local = check_pipeline_order({{B(0), F(0)}});
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.message().find("stage 0 stuck at B0 (waits for F0 on stage 0)"), std::string::npos)
      << local.message();
}

TEST(PipelineSchedule, RejectsMalformedOrders) {
  auto message = [](const PipelineOrder& o) { return check_pipeline_order(o).message(); };
  EXPECT_NE(message({}).find("at least 1 stage"), std::string::npos);
  EXPECT_NE(message({{B(0)}}).find("no forward"), std::string::npos);
  EXPECT_NE(message({{F(0), F(1), B(0), B(1)}, {F(0), F(1), B(0)}}).find("stage 1 never runs B1"), std::string::npos);
  EXPECT_NE(message({{F(0), F(1), B(0), B(1)}, {F(0), F(0), B(0), B(1)}}).find("stage 1 runs F0 twice"),
            std::string::npos);
  EXPECT_NE(message({{F(0), B(0)}, {F(0), B(0), F(1)}}).find("stage 1 runs F1, but there are 1 micro-batches"),
            std::string::npos);
}

// Equal stage times, no transfer delay: both schedules take (m+p-1)(tf+tb), every stage idles
// (p-1)/(m+p-1) of it, stage s ends its backwards s*tb before stage 0, GPipe holds m activations
// and 1F1B min(p-s, m).
TEST(PipelineExecutor, EqualStagesNoDelayClosedForms) {
  const double tf = 1.0, tb = 2.0;
  for (PipelineKind kind : kKinds) {
    for (auto [p, m] : kShapes) {
      SCOPED_TRACE(fmt::format("{} p={} m={}", pipeline_kind_name(kind), p, m));
      const std::vector<double> f(p, tf), b(p, tb);
      const PipelineTimeline tl = execute_pipeline(order_of(kind, p, m), f, b, 0.0);
      const double want = (m + p - 1) * (tf + tb);
      EXPECT_DOUBLE_EQ(tl.makespan_s, want);
      for (uint32_t s = 0; s < p; ++s) {
        EXPECT_DOUBLE_EQ(tl.busy_s[s], m * (tf + tb));
        EXPECT_NEAR(tl.bubble_fraction[s], double(p - 1) / (m + p - 1), 1e-12);
        EXPECT_DOUBLE_EQ(tl.last_backward_end_s[s], want - s * tb);
        EXPECT_EQ(tl.peak_in_flight[s], kind == PipelineKind::kGPipe ? m : std::min(p - s, m));
      }
    }
  }
}

// GPipe with transfer delay d: F(s,i) runs at (s+i)tf + s*d (each stage is one op and one link
// behind its predecessor); the last stage starts its backwards at T0 = (m+p-1)tf + (p-1)d and
// stage s's j-th backward ends at T0 + (p-1-s+j+1)tb + (p-1-s)d. Hence makespan
// (m+p-1)(tf+tb) + 2(p-1)d and stage s's last backward ends s(tb+d) before stage 0's.
TEST(PipelineExecutor, GPipeWithTransferDelayClosedForm) {
  const double tf = 1.5, tb = 2.5, d = 0.25;
  for (auto [p, m] : kShapes) {
    SCOPED_TRACE(fmt::format("p={} m={}", p, m));
    const std::vector<double> f(p, tf), b(p, tb);
    const PipelineTimeline tl = execute_pipeline(order_of(PipelineKind::kGPipe, p, m), f, b, d);
    const double want = (m + p - 1) * (tf + tb) + 2 * (p - 1) * d;
    EXPECT_DOUBLE_EQ(tl.makespan_s, want);
    const double t0 = (m + p - 1) * tf + (p - 1) * d;
    for (uint32_t s = 0; s < p; ++s) {
      for (uint32_t i = 0; i < m; ++i) {
        EXPECT_EQ(tl.ops[s][i].op, F(i));
        EXPECT_DOUBLE_EQ(tl.ops[s][i].start_s, (s + i) * tf + s * d);
      }
      for (uint32_t j = 0; j < m; ++j)
        EXPECT_DOUBLE_EQ(tl.ops[s][m + j].end_s, t0 + (p - s + j) * tb + (p - 1 - s) * d);
      EXPECT_DOUBLE_EQ(tl.last_backward_end_s[s], want - s * (tb + d));
      EXPECT_NEAR(tl.bubble_fraction[s], 1 - m * (tf + tb) / want, 1e-12);
    }
  }
}

// 1F1B with d > 0 also stalls in its steady state. Hand-derived for p = 2, m = 3, tf = 1, tb = 2,
// d = 0.5 (stage 0: F0 F1 B0 F2 B1 B2, stage 1: F0 B0 F1 B1 F2 B2): stage 1 runs F0 [1.5,2.5],
// B0 [2.5,4.5]; stage 0 B0 [5,7] (waits for the gradient), F2 [7,8], B1 [8,10]; stage 1 F2
// [8.5,9.5], B2 [9.5,11.5]; stage 0 B2 [12,14]. GPipe's closed form gives 13.
TEST(PipelineExecutor, OneFOneBWithTransferDelay) {
  const std::vector<double> f = {1, 1}, b = {2, 2};
  const PipelineTimeline tl = execute_pipeline(order_of(PipelineKind::k1F1B, 2, 3), f, b, 0.5);
  EXPECT_DOUBLE_EQ(tl.makespan_s, 14.0);
  EXPECT_DOUBLE_EQ(tl.ops[0][2].start_s, 5.0);
  EXPECT_DOUBLE_EQ(tl.ops[1][4].start_s, 8.5);
  EXPECT_DOUBLE_EQ(tl.last_backward_end_s[1], 11.5);
  EXPECT_DOUBLE_EQ(tl.last_backward_end_s[0], 14.0);
  EXPECT_DOUBLE_EQ(execute_pipeline(order_of(PipelineKind::kGPipe, 2, 3), f, b, 0.5).makespan_s, 13.0);

  // Over many shapes: equal to the DAG's longest path, never shorter than GPipe's, and longer once
  // the steady state interleaves (m >= 3 with these times; p = 4, m = 2 happens to tie).
  const double tf = 1.5, tb = 2.5, d = 0.25;
  for (auto [p, m] : kShapes) {
    SCOPED_TRACE(fmt::format("p={} m={}", p, m));
    const std::vector<double> fs(p, tf), bs(p, tb);
    const PipelineOrder order = order_of(PipelineKind::k1F1B, p, m);
    const PipelineTimeline one = execute_pipeline(order, fs, bs, d);
    EXPECT_NEAR(one.makespan_s, LongestPath(order, fs, bs, d).makespan(), 1e-9);
    const double gpipe = (m + p - 1) * (tf + tb) + 2 * (p - 1) * d;
    EXPECT_GE(one.makespan_s, gpipe - 1e-9);
    if (p == 1 || m == 1) {
      EXPECT_DOUBLE_EQ(one.makespan_s, gpipe);  // nothing to interleave
    } else if (m >= 3) {
      EXPECT_GT(one.makespan_s, gpipe + d);  // steady-state round trips cost extra (here >= 2d)
    }
  }
}

// Random unequal stage times: every op ends exactly when the independent longest-path recursion
// says, busy and bubble follow, and the last backwards end in stage order p-1, ..., 0.
TEST(PipelineExecutor, UnequalStagesMatchLongestPath) {
  for (uint32_t seed : {1u, 7u, 42u, 2024u, 99991u}) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint32_t> stages(1, 5), mbs(1, 7);
    std::uniform_real_distribution<double> time(0.1, 3.0), delay(0.0, 0.5);
    for (int trial = 0; trial < 8; ++trial) {
      const uint32_t p = stages(rng), m = mbs(rng);
      std::vector<double> f(p), b(p);
      for (uint32_t s = 0; s < p; ++s) f[s] = time(rng), b[s] = time(rng);
      const double d = trial % 2 == 0 ? 0.0 : delay(rng);
      for (PipelineKind kind : kKinds) {
        SCOPED_TRACE(fmt::format("seed={} {} p={} m={} d={}", seed, pipeline_kind_name(kind), p, m, d));
        const PipelineOrder order = order_of(kind, p, m);
        const PipelineTimeline tl = execute_pipeline(order, f, b, d);
        LongestPath oracle(order, f, b, d);
        EXPECT_NEAR(tl.makespan_s, oracle.makespan(), 1e-9);
        for (uint32_t s = 0; s < p; ++s) {
          for (const PipelineOpTiming& t : tl.ops[s]) {
            EXPECT_NEAR(t.end_s, oracle.finish(s, t.op), 1e-9) << "stage " << s << " " << t.op.to_string();
            EXPECT_NEAR(t.end_s - t.start_s, t.op.kind == Op::kForward ? f[s] : b[s], 1e-9);
          }
          EXPECT_NEAR(tl.busy_s[s], m * (f[s] + b[s]), 1e-9);
          EXPECT_NEAR(tl.bubble_fraction[s], 1 - tl.busy_s[s] / tl.makespan_s, 1e-12);
          EXPECT_EQ(tl.peak_in_flight[s], kind == PipelineKind::kGPipe ? m : std::min(p - s, m));
          if (s > 0) {
            EXPECT_LT(tl.last_backward_end_s[s], tl.last_backward_end_s[s - 1]);
          }
        }
        EXPECT_DOUBLE_EQ(tl.last_backward_end_s[0], tl.makespan_s);
      }
    }
  }
}

TEST(PipelineExecutor, RunsAHandMadeOrder) {
  // Neither GPipe nor 1F1B: all forwards, then backwards in forward order (B0 first).
  const PipelineOrder order = {{F(0), F(1), B(0), B(1)}, {F(0), F(1), B(0), B(1)}};
  ASSERT_TRUE(check_pipeline_order(order).ok());
  const std::vector<double> f = {1, 1}, b = {1, 1};
  const PipelineTimeline tl = execute_pipeline(order, f, b, 0.0);
  // Stage 0: F0 [0,1] F1 [1,2]; stage 1: F0 [1,2] F1 [2,3] B0 [3,4] B1 [4,5]; stage 0: B0 [4,5]
  // B1 [5,6].
  EXPECT_DOUBLE_EQ(tl.makespan_s, 6.0);
  EXPECT_DOUBLE_EQ(tl.ops[0][2].start_s, 4.0);
  EXPECT_DOUBLE_EQ(tl.ops[1][3].end_s, 5.0);
  EXPECT_DOUBLE_EQ(tl.last_backward_end_s[1], 5.0);
  EXPECT_EQ(tl.peak_in_flight[0], 2u);
  EXPECT_EQ(tl.peak_in_flight[1], 2u);
}

}  // namespace
}  // namespace ccsim::sim
