// Time-to-accuracy arithmetic (algorithms/convergence.hpp): first crossings of a target on a curve,
// the calibrated model's final metric and rounds ratio, and the time and ratios against a baseline.

#include "algorithms/convergence.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ccsim::algo {
namespace {

TEST(Convergence, RoundsToTargetIsTheFirstCrossing) {
  const Curve loss{{0, 10, 20, 30, 40}, {4.0, 3.0, 2.5, 2.6, 2.4}};
  EXPECT_EQ(rounds_to_target(loss, 2.55, MetricSense::kLowerIsBetter), 20u);  // 2.6 later does not undo it
  EXPECT_EQ(rounds_to_target(loss, 2.4, MetricSense::kLowerIsBetter), 40u);    // exactly the last value
  EXPECT_FALSE(rounds_to_target(loss, 2.39, MetricSense::kLowerIsBetter).has_value());
  const Curve acc{{0, 5, 10}, {0.1, std::nan(""), 0.95}};
  EXPECT_EQ(rounds_to_target(acc, 0.9, MetricSense::kHigherIsBetter), 10u);   // NaN points never count
  EXPECT_FALSE(rounds_to_target(acc, 0.96, MetricSense::kHigherIsBetter).has_value());
  EXPECT_DOUBLE_EQ(target_value(1.02, 2.5), 2.55);
}

TEST(Convergence, ModelPredictsTheFinalMetricAndTheRoundsRatio) {
  ConvergenceModel m;
  m.c = 0.5;
  m.d = 1.0;
  m.targets = {{1.05, 2.0, 0.5, 100}, {1.0, 4.0, 1.0, 300}};
  // v = 0.01: final 1 + 0.5 * 0.01 = 1.005: reaches 105% (ratio 1 + 2 * 0.1 = 1.2), misses 100%.
  EXPECT_DOUBLE_EQ(m.final_ratio(0.01), 1.005);
  ASSERT_TRUE(m.rounds_ratio(0.01, 1.05).has_value());
  EXPECT_NEAR(*m.rounds_ratio(0.01, 1.05), 1.2, 1e-12);
  EXPECT_FALSE(m.rounds_ratio(0.01, 1.0).has_value());
  // v = 0 is the baseline itself: ratio 1 at every target.
  EXPECT_DOUBLE_EQ(*m.rounds_ratio(0.0, 1.0), 1.0);
  // v = 0.2: final 1.1 misses 105%.
  EXPECT_FALSE(m.rounds_ratio(0.2, 1.05).has_value());
  // Against a baseline of vNMSE 0.01 the same entry is at ratio 1 and reaches 100%.
  EXPECT_DOUBLE_EQ(*m.rounds_ratio(0.01, 1.0, 0.01), 1.0);
  EXPECT_NEAR(*m.rounds_ratio(0.04, 1.05, 0.01), (1 + 2 * 0.2) / 1.2, 1e-12);
  // An accuracy model moves the other way: 1 - c v^d.
  m.sense = MetricSense::kHigherIsBetter;
  EXPECT_DOUBLE_EQ(m.final_ratio(0.01), 0.995);
  EXPECT_FALSE(m.rounds_ratio(0.01, 1.0).has_value());
}

TEST(Convergence, TimeToAccuracyIsRoundsTimesRoundTimeAgainstTheBaseline) {
  std::vector<TtaRow> rows = {{"base", 1.02, 2.55, 200.0, 0.5},
                              {"q", 1.02, 2.55, 240.0, 0.25},
                              {"slow", 1.02, 2.55, std::nullopt, 0.1}};
  finish_tta(rows, "base");
  EXPECT_DOUBLE_EQ(rows[0].time_s, 100.0);
  EXPECT_DOUBLE_EQ(rows[0].ratio, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].time_s, 60.0);
  EXPECT_DOUBLE_EQ(rows[1].ratio, 0.6);          // 1.2x the rounds at half the round time
  EXPECT_DOUBLE_EQ(rows[1].rounds_ratio, 1.2);
  EXPECT_EQ(rows[2].time_s, 0.0);                // not reached: no time, no ratio
  EXPECT_EQ(rows[2].ratio, 0.0);
}

}  // namespace
}  // namespace ccsim::algo
