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

TEST(Convergence, ModelScalesTheBaselinesCurveByTheFinalRatio) {
  ConvergenceModel m;
  m.baseline = {{0, 100, 200, 300, 400}, {2.0, 1.2, 1.1, 1.04, 1.0}};
  m.all = {0.5, 1.0};
  m.families["mxfp"] = {1.0, 1.0};
  EXPECT_EQ(ConvergenceModel::family("mxfp8"), "mxfp");
  EXPECT_EQ(ConvergenceModel::family("dynamiq"), "dynamiq");
  EXPECT_EQ(ConvergenceModel::family("fp32"), "fp");
  // The baseline's own rounds, interpolated between evaluations: 1.15 lies half way from 1.2 to 1.1.
  EXPECT_DOUBLE_EQ(*m.baseline_rounds(1.15), 150.0);
  EXPECT_DOUBLE_EQ(*m.baseline_rounds(1.0), 400.0);
  EXPECT_FALSE(m.baseline_rounds(0.99).has_value());
  // dynamiq (the fit over all entries) at v = 0.04: f = 1.02; to 105% it needs the baseline's rounds
  // to 1.05 / 1.02, on the segment from (300, 1.04) to (400, 1.0).
  EXPECT_NEAR(m.final_ratio(0.04, "dynamiq"), 1.02, 1e-15);
  const double goal = 1.05 / 1.02;
  EXPECT_NEAR(*m.rounds(0.04, "dynamiq", 0.0, "fp32", 1.05), 300 + 100 * (1.04 - goal) / 0.04, 1e-9);
  // It misses 102%: its final loss is 102% of the baseline's, and 1.02 / 1.02 = 1 is only reached at
  // 400 exactly, while 101.9% is not reached at all.
  EXPECT_NEAR(*m.rounds(0.04, "dynamiq", 0.0, "fp32", 1.02), 400.0, 1e-9);
  EXPECT_FALSE(m.rounds(0.04, "dynamiq", 0.0, "fp32", 1.019).has_value());
  // mxfp8 uses its family's fit: f = 1.04 at the same vNMSE, so it misses 102%.
  EXPECT_NEAR(m.final_ratio(0.04, "mxfp8"), 1.04, 1e-15);
  EXPECT_FALSE(m.rounds(0.04, "mxfp8", 0.0, "fp32", 1.02).has_value());
  // Against a baseline of the same error the entry is the baseline.
  EXPECT_NEAR(*m.rounds(0.04, "dynamiq", 0.04, "dynamiq", 1.0), 400.0, 1e-9);
  // An accuracy model moves the other way: f = 1 - c v^d.
  m.sense = MetricSense::kHigherIsBetter;
  EXPECT_NEAR(m.final_ratio(0.04, "dynamiq"), 0.98, 1e-15);
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
