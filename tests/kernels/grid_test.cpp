#include "kernels/quant/grid.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/philox.hpp"

namespace ccsim::kern {
namespace {

TEST(Grid, GeometricLevelsMatchDynamiqFormula) {
  // f(ε, r) = ((1+2ε²)^r − 1) / ((1+2ε²)^(2^(b−1)−1) − 1) with b = 4 bits: 8 levels.
  const double eps = 0.5;  // 1 + 2ε² = 1.5
  std::vector<float> l(8);
  geometric_grid_levels(eps, 8, l.data());
  const double denom = std::pow(1.5, 7) - 1;
  for (uint32_t r = 0; r < 8; ++r) EXPECT_FLOAT_EQ(l[r], static_cast<float>((std::pow(1.5, r) - 1) / denom)) << r;
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_EQ(l[7], 1.0f);
  for (uint32_t r = 1; r < 8; ++r) {
    EXPECT_GT(l[r], l[r - 1]);
    if (r >= 2) {
      EXPECT_GT(l[r] - l[r - 1], l[r - 1] - l[r - 2]);  // denser near zero
    }
  }
  // ε = 0 and a tiny ε give the uniform grid.
  std::vector<float> u(5), t(5);
  geometric_grid_levels(0.0, 5, u.data());
  geometric_grid_levels(1e-7, 5, t.data());
  for (uint32_t r = 0; r < 5; ++r) {
    EXPECT_EQ(u[r], static_cast<float>(r) / 4.0f);
    EXPECT_NEAR(t[r], static_cast<float>(r) / 4.0f, 1e-6);
  }
}

TEST(Grid, ValuesOnTheGridReturnTheirIndex) {
  std::vector<float> l(128);
  geometric_grid_levels(0.05, 128, l.data());
  for (uint32_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(grid_floor_index(l.data(), 128, l[i]), i);
    EXPECT_EQ(grid_round_nearest(l.data(), 128, l[i]), i);
    for (float u : {0.0f, 0.5f, 0x1.fffffep-1f}) EXPECT_EQ(grid_round_stochastic(l.data(), 128, l[i], u), i);
  }
}

TEST(Grid, EndpointsAndOutOfRangeValuesClamp) {
  const float l[4] = {0.0f, 0.25f, 0.5f, 1.0f};
  EXPECT_EQ(grid_round_stochastic(l, 4, 0.0f, 0.0f), 0u);
  EXPECT_EQ(grid_round_stochastic(l, 4, 1.0f, 0.0f), 3u);
  EXPECT_EQ(grid_round_stochastic(l, 4, -0.1f, 0.0f), 0u);
  EXPECT_EQ(grid_round_stochastic(l, 4, 1.5f, 0.0f), 3u);
  EXPECT_EQ(grid_round_nearest(l, 4, -3.0f), 0u);
  EXPECT_EQ(grid_round_nearest(l, 4, 7.0f), 3u);
  EXPECT_EQ(grid_round_nearest(l, 4, std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_EQ(grid_round_stochastic(l, 4, std::numeric_limits<float>::quiet_NaN(), 0.0f), 0u);
  // A one-level grid.
  const float one[1] = {0.5f};
  EXPECT_EQ(grid_round_stochastic(one, 1, 0.7f, 0.0f), 0u);
  EXPECT_EQ(grid_round_nearest(one, 1, 0.2f), 0u);
}

TEST(Grid, NearestPicksTheCloserLevelTiesDown) {
  const float l[4] = {0.0f, 0.25f, 0.5f, 1.0f};
  EXPECT_EQ(grid_round_nearest(l, 4, 0.1f), 0u);
  EXPECT_EQ(grid_round_nearest(l, 4, 0.13f), 1u);
  EXPECT_EQ(grid_round_nearest(l, 4, 0.125f), 0u);  // tie
  EXPECT_EQ(grid_round_nearest(l, 4, 0.75f), 2u);   // tie
  EXPECT_EQ(grid_round_nearest(l, 4, 0.76f), 3u);
  EXPECT_EQ(grid_floor_index(l, 4, 0.49f), 1u);
  EXPECT_EQ(grid_floor_index(l, 4, 0.99f), 2u);
}

TEST(Grid, StochasticThresholdIsTheFractionalPosition) {
  const float l[4] = {0.0f, 0.25f, 0.5f, 1.0f};
  // 0.625 sits at p = 0.25 between 0.5 and 1.
  EXPECT_EQ(grid_round_stochastic(l, 4, 0.625f, 0.0f), 3u);
  EXPECT_EQ(grid_round_stochastic(l, 4, 0.625f, 0.2499f), 3u);
  EXPECT_EQ(grid_round_stochastic(l, 4, 0.625f, 0.25f), 2u);
  EXPECT_EQ(grid_round_stochastic(l, 4, 0.625f, 0.9f), 2u);
}

TEST(Grid, StochasticRoundingIsUnbiased) {
  for (double eps : {0.0, 0.1, 0.3}) {
    std::vector<float> l(8);
    geometric_grid_levels(eps, 8, l.data());
    const RngKey key{21, 0, 0, 0};
    const int draws = 40000;
    for (int k = 0; k < 25; ++k) {
      const float v = (static_cast<float>(k) + 0.37f) / 25.0f;
      const uint32_t i = grid_floor_index(l.data(), 8, v);
      const double width = l[i + 1] - l[i], p = (v - l[i]) / width;
      double sum = 0;
      for (int t = 0; t < draws; ++t) {
        const uint32_t r = grid_round_stochastic(l.data(), 8, v, uniform_at(key, static_cast<uint64_t>(k) * draws + t));
        ASSERT_TRUE(r == i || r == i + 1) << r;
        sum += l[r];
      }
      SCOPED_TRACE(fmt::format("eps={} v={} p={}", eps, v, p));
      EXPECT_NEAR(sum / draws, v, 5 * width * std::sqrt(p * (1 - p) / draws) + width * 0x1p-22);
    }
  }
}

}  // namespace
}  // namespace ccsim::kern
