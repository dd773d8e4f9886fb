#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "sim/network/flow_network.hpp"

namespace ccsim::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MaxMin, ParkingLotGivesEveryFlowHalf) {
  // One long flow over three unit links, one short flow on each link.
  const std::vector<double> cap = {1, 1, 1};
  const std::vector<std::vector<uint32_t>> routes = {{0, 1, 2}, {0}, {1}, {2}};
  const auto r = max_min_rates(cap, routes, std::vector<double>(4, kInf));
  for (double x : r) EXPECT_DOUBLE_EQ(x, 0.5);
}

TEST(MaxMin, UnequalBottlenecksAndCaps) {
  // Link 0 (cap 1) shared by flows a, b; link 1 (cap 10) shared by b, c. b is limited by link 0
  // to 1/2, so c gets the rest of link 1: 9.5. A cap of 0.2 on a gives b 0.8 and c 9.2.
  const std::vector<double> cap = {1, 10};
  const std::vector<std::vector<uint32_t>> routes = {{0}, {0, 1}, {1}};
  auto r = max_min_rates(cap, routes, {kInf, kInf, kInf});
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 9.5);
  r = max_min_rates(cap, routes, {0.2, kInf, kInf});
  EXPECT_DOUBLE_EQ(r[0], 0.2);
  EXPECT_DOUBLE_EQ(r[1], 0.8);
  EXPECT_DOUBLE_EQ(r[2], 9.2);
}

// Max-min fairness characterised independently of progressive filling: an allocation is max-min
// fair iff it is feasible and every flow is either at its cap or crosses a saturated link on which
// no other flow has a larger rate (Bertsekas & Gallager, "bottleneck link" condition).
TEST(MaxMin, RandomInstancesSatisfyTheBottleneckCondition) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int nl = 1 + static_cast<int>(rng() % 12), nf = 1 + static_cast<int>(rng() % 30);
    std::vector<double> cap(nl);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 1000) / 10.0;
    std::vector<std::vector<uint32_t>> routes(nf);
    std::vector<double> caps(nf, kInf);
    for (int f = 0; f < nf; ++f) {
      const int hops = 1 + static_cast<int>(rng() % 4);
      for (int h = 0; h < hops; ++h) {
        const auto l = static_cast<uint32_t>(rng() % nl);
        if (std::find(routes[f].begin(), routes[f].end(), l) == routes[f].end()) routes[f].push_back(l);
      }
      if (rng() % 5 == 0) caps[f] = 0.5 + static_cast<double>(rng() % 100) / 10.0;
    }
    const auto rate = max_min_rates(cap, routes, caps);
    SCOPED_TRACE(fmt::format("trial {} links {} flows {}", trial, nl, nf));
    std::vector<double> load(nl, 0.0), top(nl, 0.0);
    for (int f = 0; f < nf; ++f) {
      ASSERT_GT(rate[f], 0);
      ASSERT_LE(rate[f], caps[f] * (1 + 1e-12));
      for (uint32_t l : routes[f]) {
        load[l] += rate[f];
        top[l] = std::max(top[l], rate[f]);
      }
    }
    for (int l = 0; l < nl; ++l) ASSERT_LE(load[l], cap[l] * (1 + 1e-9)) << "link " << l << " over capacity";
    for (int f = 0; f < nf; ++f) {
      bool bottlenecked = rate[f] >= caps[f] * (1 - 1e-9);
      for (uint32_t l : routes[f])
        bottlenecked |= load[l] >= cap[l] * (1 - 1e-9) && rate[f] >= top[l] * (1 - 1e-9);
      ASSERT_TRUE(bottlenecked) << "flow " << f << " has no bottleneck";
    }
  }
}

TEST(FlowNetwork, RatesChangeWhenFlowsFinish) {
  // Two flows share a 100 B/s link: 100 B and 300 B. Both at 50 B/s until t=2 s; then the second
  // runs alone at 100 B/s for its last 200 B: done at t=4 s. Latency 1 ms is added to each.
  Engine e;
  FlowNetwork net(e, {LinkSpec{100.0}});
  std::vector<double> done(2, -1);
  const Duration lat = Duration::from_seconds(1e-3);
  net.start_flow({0}, 100, lat, [&] { done[0] = e.now().seconds(); });
  net.start_flow({0}, 300, lat, [&] { done[1] = e.now().seconds(); });
  e.run();
  EXPECT_NEAR(done[0], 2.001, 1e-12);
  EXPECT_NEAR(done[1], 4.001, 1e-12);
  EXPECT_NEAR(net.link_stats()[0].bytes, 400, 1e-6);
  EXPECT_NEAR(net.link_stats()[0].busy_s, 4.0, 1e-12);
  EXPECT_LE(net.max_link_load(), 1 + 1e-9);
  EXPECT_EQ(net.link_stats()[0].max_flows, 2u);
}

TEST(FlowNetwork, LateArrivalSharesFromItsStart) {
  // Flow A (200 B) alone at 100 B/s from t=0; flow B (100 B) joins at t=1 s: they split 50/50.
  // A has 100 B left at t=1, B 100 B: both finish at t=3 s.
  Engine e;
  FlowNetwork net(e, {LinkSpec{100.0}});
  double a = -1, b = -1;
  net.start_flow({0}, 200, Duration::zero(), [&] { a = e.now().seconds(); });
  e.schedule_at(SimTime::zero() + Duration::from_seconds(1.0),
                [&] { net.start_flow({0}, 100, Duration::zero(), [&] { b = e.now().seconds(); }); });
  e.run();
  EXPECT_DOUBLE_EQ(a, 3.0);
  EXPECT_DOUBLE_EQ(b, 3.0);
}

TEST(FlowNetwork, ZeroByteFlowTakesOnlyLatency) {
  Engine e;
  FlowNetwork net(e, {LinkSpec{1.0}});
  double t = -1;
  net.start_flow({0}, 0, Duration::from_ps(42), [&] { t = static_cast<double>(e.now().ps()); });
  e.run();
  EXPECT_EQ(t, 42);
}

}  // namespace
}  // namespace ccsim::sim
