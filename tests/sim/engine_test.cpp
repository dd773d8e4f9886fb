#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "sim/engine.hpp"

namespace ccsim::sim {
namespace {

TEST(Engine, RunsInTimeOrderThenInsertionOrder) {
  Engine e;
  std::vector<int> order;
  e.schedule_at(SimTime::from_ps(20), [&] { order.push_back(3); });
  e.schedule_at(SimTime::from_ps(10), [&] { order.push_back(1); });
  e.schedule_at(SimTime::from_ps(10), [&] { order.push_back(2); });
  e.schedule_at(SimTime::from_ps(20), [&] { order.push_back(4); });
  e.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(e.now().ps(), 20);
  EXPECT_EQ(e.events_processed(), 4u);
}

TEST(Engine, CancelledEventsDoNotRun) {
  Engine e;
  int ran = 0;
  const EventId a = e.schedule_in(Duration::from_ps(5), [&] { ran += 1; });
  e.schedule_in(Duration::from_ps(6), [&] { ran += 10; });
  EXPECT_TRUE(e.cancel(a));
  EXPECT_FALSE(e.cancel(a));
  e.run();
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(e.pending(), 0u);
}

TEST(Engine, EventsScheduledFromCallbacksAtNowRunInTheSameInstant) {
  Engine e;
  std::vector<int64_t> times;
  int hook_calls = 0;
  e.on_instant_end([&] { ++hook_calls; });
  e.schedule_at(SimTime::from_ps(7), [&] {
    e.schedule_in(Duration::zero(), [&] { times.push_back(e.now().ps()); });
    e.schedule_in(Duration::from_ps(3), [&] { times.push_back(e.now().ps()); });
  });
  e.run();
  EXPECT_EQ(times, (std::vector<int64_t>{7, 10}));
  // Hooks run each time an instant is exhausted: at t=0 (no events yet), after t=7 and after t=10.
  EXPECT_EQ(hook_calls, 3);
}

TEST(Engine, RunUntilStopsAtTheLimit) {
  Engine e;
  int ran = 0;
  e.schedule_at(SimTime::from_ps(5), [&] { ++ran; });
  e.schedule_at(SimTime::from_ps(50), [&] { ++ran; });
  e.run_until(SimTime::from_ps(10));
  EXPECT_EQ(ran, 1);
  e.run();
  EXPECT_EQ(ran, 2);
}

TEST(Engine, AnEventPastTheEndOfTheClockStopsTheRunAndIsReported) {
  Engine e;
  std::vector<int> order;
  e.schedule_at(SimTime::from_ps(10), [&] {
    order.push_back(1);
    // 2^63 ps later than now: the sum saturates at the clock's end instead of wrapping.
    const EventId far = e.schedule_in(Duration::max(), [&] { order.push_back(99); });
    EXPECT_FALSE(far.valid());
    EXPECT_TRUE(e.passed_horizon());
  });
  e.schedule_at(SimTime::from_ps(20), [&] { order.push_back(2); });
  e.run();
  // The run stops as soon as the horizon is passed: later events are left unrun.
  EXPECT_EQ(order, (std::vector<int>{1}));
  EXPECT_EQ(e.now().ps(), 10);
  EXPECT_TRUE(e.passed_horizon());
  EXPECT_EQ(past_horizon_error("the test").code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past_horizon_error("the test").message().find("the test runs past the end of simulated time"),
            std::string::npos);
}

TEST(Engine, ABoundedRunIgnoresEventsPastTheEndOfTheClock) {
  Engine e;
  int ran = 0;
  e.schedule_at(SimTime::from_ps(10), [&] {
    ++ran;
    e.schedule_at(SimTime::infinite(), [&] { ran += 100; });
  });
  e.schedule_at(SimTime::from_ps(20), [&] { ++ran; });
  const EventId moved = e.schedule_at(SimTime::from_ps(30), [&] { ran += 1000; });
  EXPECT_TRUE(e.reschedule(moved, SimTime::infinite()));  // moved past the end: cancelled
  EXPECT_FALSE(e.pending(moved));
  e.run_until(SimTime::from_ps(1000));  // a duration-bounded run never reaches those events anyway
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(e.now().ps(), 20);
  EXPECT_TRUE(e.passed_horizon());
}

TEST(Engine, RescheduleMovesAnEventAndOrdersItAsNew) {
  Engine e;
  std::vector<int> order;
  const EventId a = e.schedule_at(SimTime::from_ps(5), [&] { order.push_back(1); });
  e.schedule_at(SimTime::from_ps(10), [&] { order.push_back(2); });
  EXPECT_TRUE(e.reschedule(a, SimTime::from_ps(10)));  // same time as the second, but newer
  EXPECT_EQ(e.time_of(a).ps(), 10);
  e.run();
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
  EXPECT_FALSE(e.reschedule(a, SimTime::from_ps(20)));  // already ran
  EXPECT_FALSE(e.pending(a));
}

TEST(Engine, StaleHandlesDoNotTouchReusedSlots) {
  Engine e;
  int ran = 0;
  const EventId a = e.schedule_at(SimTime::from_ps(1), [&] { ran += 1; });
  EXPECT_TRUE(e.cancel(a));
  const EventId b = e.schedule_at(SimTime::from_ps(2), [&] { ran += 10; });  // reuses a's slot
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_FALSE(e.cancel(a));
  EXPECT_FALSE(e.reschedule(a, SimTime::from_ps(3)));
  e.run();
  EXPECT_EQ(ran, 10);
}

// The indexed heap against a sorted reference under random pushes, cancels and reschedules.
TEST(Engine, RandomOperationsRunInKeyOrder) {
  std::mt19937_64 rng(7);
  Engine e;
  std::map<uint64_t, std::pair<int64_t, uint64_t>> expect;  // token -> (time, order key)
  std::map<uint64_t, EventId> handle;
  std::vector<uint64_t> ran;
  uint64_t order = 0;
  for (uint64_t token = 0; token < 3000; ++token) {
    const auto t = static_cast<int64_t>(rng() % 500);
    handle[token] = e.schedule_at(SimTime::from_ps(t), [&ran, token] { ran.push_back(token); });
    expect[token] = {t, order++};
    if (rng() % 4 == 0) {
      const uint64_t victim = rng() % (token + 1);
      if (expect.count(victim) && e.cancel(handle[victim])) expect.erase(victim);
    }
    if (rng() % 4 == 0) {
      const uint64_t moved = rng() % (token + 1);
      const auto nt = static_cast<int64_t>(rng() % 500);
      if (expect.count(moved) && e.reschedule(handle[moved], SimTime::from_ps(nt))) expect[moved] = {nt, order++};
    }
  }
  std::vector<std::pair<std::pair<int64_t, uint64_t>, uint64_t>> sorted;
  for (const auto& [tok, key] : expect) sorted.push_back({key, tok});
  std::sort(sorted.begin(), sorted.end());
  e.run();
  ASSERT_EQ(ran.size(), sorted.size());
  for (size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], sorted[i].second) << "position " << i;
}

}  // namespace
}  // namespace ccsim::sim
