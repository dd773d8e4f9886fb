#pragma once
/// \file
/// The discrete-event engine: a time-ordered queue of callbacks with deterministic tie-breaking
/// (time, then insertion sequence, as ns-3's (ts, uid)), cancellation and rescheduling, and a hook
/// that runs when every event of the current instant has been processed, just before the clock
/// moves on. Fluid models (the flow network) use that hook to solve once per instant, not once
/// per event.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sim/base/sim_time.hpp"
#include "sim/base/status.hpp"
#include "sim/event_queue.hpp"

namespace ccsim::sim {

/// Handle of a scheduled event (valid until it runs or is cancelled).
struct EventId {
  uint32_t slot = UINT32_MAX;
  uint64_t seq = 0;  ///< the slot's generation when scheduled: stale handles are detected
  bool valid() const { return slot != UINT32_MAX; }
};

/// A single-threaded event loop over simulated time.
class Engine {
 public:
  using Callback = std::function<void()>;

  /// Schedules `cb` at absolute time `t`. REQUIRES: t >= now(). An event at SimTime::infinite()
  /// (a time past the clock's range: see sim_time.hpp) is not scheduled; the engine records that
  /// the simulation passed its horizon instead and returns an invalid handle.
  EventId schedule_at(SimTime t, Callback cb);
  /// Schedules `cb` after `d`. REQUIRES: d >= 0.
  EventId schedule_in(Duration d, Callback cb) { return schedule_at(now_ + d, std::move(cb)); }
  /// Cancels a pending event; returns false if it already ran or was cancelled.
  bool cancel(EventId id);
  /// Moves a pending event to time `t` (>= now()) and gives it a fresh sequence number, so it
  /// orders as if scheduled now. Returns false (and does nothing) if it already ran or was cancelled.
  /// Moving it to SimTime::infinite() cancels it and records that the horizon was passed.
  bool reschedule(EventId id, SimTime t);
  /// Whether `id` is still pending.
  bool pending(EventId id) const;
  /// Time of a pending event. REQUIRES: pending(id).
  SimTime time_of(EventId id) const;

  /// Registers a hook run each time the current instant is exhausted (before the clock advances or
  /// the run ends). A hook may schedule events, including at now().
  void on_instant_end(std::function<void()> hook) { instant_end_hooks_.push_back(std::move(hook)); }

  /// Runs until no events remain, or stops as soon as an event would pass the horizon.
  void run() { run_until(SimTime::infinite()); }
  /// Runs events with time <= `limit` (with limit SimTime::infinite(): as run()).
  void run_until(SimTime limit);
  /// Whether an event was dropped for lying past the end of simulated time (about 106 days): a run
  /// that needed it did not finish, and its results are not to be used.
  bool passed_horizon() const { return passed_horizon_; }

  SimTime now() const { return now_; }
  uint64_t events_processed() const { return processed_; }
  size_t pending() const { return queue_.size(); }

 private:
  struct Slot {
    uint64_t generation = 0;
    Callback cb;
  };
  void run_instant_end_hooks();

  SimTime now_ = SimTime::zero();
  uint64_t next_seq_ = 0;
  uint64_t processed_ = 0;
  bool passed_horizon_ = false;
  EventQueue queue_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<std::function<void()>> instant_end_hooks_;
};

/// The input error of a run that passed the end of simulated time (Engine::passed_horizon): `what`
/// names the run; the message says how far the clock reaches and what brings a run back in range.
Status past_horizon_error(std::string_view what);

}  // namespace ccsim::sim
