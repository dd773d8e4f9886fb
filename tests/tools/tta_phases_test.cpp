// Time-to-accuracy of entries whose rounds are timed in phases (convergence.phases): an adaptive
// scheme's rounds take another entry's round time from a given round on. Exact arithmetic on
// hand-made curves.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/app/tta.hpp"

namespace ccsim::app {
namespace {

const std::vector<std::string> kLabels = {"a", "b", "c"};
const std::vector<double> kRoundS = {1.0, 2.0, 0.5};

// Three entries with one curve (4, 3, 2 at rounds 0, 10, 20): each reaches the base's final loss at
// round 20. Round times 1, 2 and 0.5 s.
ConvergenceInputs inputs() {
  ConvergenceInputs in;
  in.targets = {1.05, 1.0};
  in.baseline = kLabels[0];
  in.baseline_index = 0;
  for (const char* l : {"a", "b", "c"}) in.curves[l] = {{0, 10, 20}, {4, 3, 2}};
  return in;
}

const algo::TtaRow& row(const TtaReport& r, const std::string& label, double target) {
  for (const algo::TtaRow& t : r.rows)
    if (t.label == label && t.target == target) return t;
  ADD_FAILURE() << "no row " << label << " " << target;
  return r.rows.front();
}

TEST(TtaPhases, WithoutPhasesEveryRoundTakesTheEntrysOwnTime) {
  const TtaReport r = compute_tta(inputs(), kLabels, kLabels, kRoundS, {}, 0);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).time_s, 10.0);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).ratio, 0.5);
}

TEST(TtaPhases, RoundsAfterAPhaseStartTakeTheTimingEntrysRoundTime) {
  ConvergenceInputs in = inputs();
  in.phases[2] = {{5, 1, 1.0}};                 // c: its own 0.5 s for rounds 0..4, then b's 2 s
  in.phases[1] = {{0, 0, 1.0}, {10, 2, 1.0}};   // b: a's 1 s for rounds 0..9, then c's 0.5 s
  const TtaReport r = compute_tta(in, kLabels, kLabels, kRoundS, {}, 0);
  // To 100% (round 20): c 5 x 0.5 + 15 x 2 = 32.5 s; b 10 x 1 + 10 x 0.5 = 15 s; a 20 s.
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).time_s, 32.5);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).round_time_s, 32.5 / 20);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).ratio, 32.5 / 20);
  EXPECT_DOUBLE_EQ(row(r, "b", 1.0).time_s, 15.0);
  EXPECT_DOUBLE_EQ(row(r, "a", 1.0).time_s, 20.0);
  // To 105% (2.1: 19 rounds, interpolated between 10 and 20 on 3 -> 2, rounded up to a whole round
  // or kept fractional as the curve gives it): whatever the rounds R, c's time is 2.5 + (R - 5) x 2.
  const algo::TtaRow& c105 = row(r, "c", 1.05);
  ASSERT_TRUE(c105.rounds.has_value());
  EXPECT_DOUBLE_EQ(c105.time_s, 2.5 + (*c105.rounds - 5) * 2.0);
  // The curve's time axis follows the phases: c at round 10 is 5 x 0.5 + 5 x 2 = 12.5 s.
  for (const TtaCurvePoint& p : r.curve) {
    if (p.label == "c" && p.round == 10) {
      EXPECT_DOUBLE_EQ(p.time_s, 12.5);
    } else if (p.label == "b" && p.round == 20) {
      EXPECT_DOUBLE_EQ(p.time_s, 15.0);
    } else if (p.label == "a") {
      EXPECT_DOUBLE_EQ(p.time_s, static_cast<double>(p.round));
    }
  }
}

TEST(TtaPhases, APhaseBeyondTheTargetChangesNothing) {
  ConvergenceInputs in = inputs();
  in.phases[2] = {{50, 1, 1.0}};
  const TtaReport r = compute_tta(in, kLabels, kLabels, kRoundS, {}, 0);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).time_s, 10.0);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).round_time_s, 0.5);
}

TEST(TtaPhases, AShareOfAPhasesRoundsTakesItsTimingTheRestThePrevious) {
  ConvergenceInputs in = inputs();
  in.phases[2] = {{5, 1, 0.25}};  // c: 0.5 s, then a quarter of the rounds at b's 2 s: 0.875 s a round
  const TtaReport r = compute_tta(in, kLabels, kLabels, kRoundS, {}, 0);
  EXPECT_DOUBLE_EQ(row(r, "c", 1.0).time_s, 5 * 0.5 + 15 * 0.875);
}

}  // namespace
}  // namespace ccsim::app
