#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ccsim::sim
