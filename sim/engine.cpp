#include "sim/engine.hpp"

#include "sim/base/check.hpp"

namespace ccsim::sim {

EventId Engine::schedule_at(SimTime t, Callback cb) {
  CCSIM_CHECK(t >= now_, "event scheduled in the past: {} ps < now {} ps", t.ps(), now_.ps());
  if (t == SimTime::infinite()) {
    passed_horizon_ = true;
    return EventId{};
  }
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  ++s.generation;
  s.cb = std::move(cb);
  queue_.push(slot, EventKey{t.ps(), next_seq_++});
  return EventId{slot, s.generation};
}

bool Engine::pending(EventId id) const {
  return id.valid() && id.slot < slots_.size() && slots_[id.slot].generation == id.seq && queue_.contains(id.slot);
}

SimTime Engine::time_of(EventId id) const {
  CCSIM_CHECK(pending(id), "time_of a finished event");
  return SimTime::from_ps(queue_.key(id.slot).time_ps);
}

bool Engine::cancel(EventId id) {
  if (!pending(id)) return false;
  queue_.erase(id.slot);
  slots_[id.slot].cb = nullptr;
  free_slots_.push_back(id.slot);
  return true;
}

bool Engine::reschedule(EventId id, SimTime t) {
  if (!pending(id)) return false;
  CCSIM_CHECK(t >= now_, "event rescheduled into the past: {} ps < now {} ps", t.ps(), now_.ps());
  if (t == SimTime::infinite()) {
    passed_horizon_ = true;
    return cancel(id);
  }
  queue_.update(id.slot, EventKey{t.ps(), next_seq_++});
  return true;
}

void Engine::run_instant_end_hooks() {
  for (auto& hook : instant_end_hooks_) hook();
}

void Engine::run_until(SimTime limit) {
  for (;;) {
    if (passed_horizon_ && limit == SimTime::infinite()) return;  // the run cannot finish: stop now
    if (queue_.empty() || queue_.top_key().time_ps > now_.ps()) {
      // The current instant is exhausted: let fluid models settle before time moves.
      const uint64_t before = next_seq_;
      run_instant_end_hooks();
      if (next_seq_ != before) continue;  // hooks scheduled something; re-examine the queue
      if (queue_.empty() || queue_.top_key().time_ps > limit.ps()) return;
    }
    const int64_t t = queue_.top_key().time_ps;
    const uint32_t slot = queue_.pop();
    Callback cb = std::move(slots_[slot].cb);
    slots_[slot].cb = nullptr;
    free_slots_.push_back(slot);
    now_ = SimTime::from_ps(t);
    ++processed_;
    cb();
  }
}

Status past_horizon_error(std::string_view what) {
  return Status(StatusCode::kInvalidArgument,
                fmt::format("{} runs past the end of simulated time ({:.4g} s, about {:.0f} days, where the "
                            "picosecond clock ends): a transfer or compute step is too long to time; smaller "
                            "gradients, layers or fewer rounds, or faster links, bring it in range",
                            what, SimTime::infinite().seconds(), SimTime::infinite().seconds() / 86400));
}

}  // namespace ccsim::sim
