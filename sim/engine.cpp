#include "sim/engine.hpp"

#include "sim/base/check.hpp"

namespace ccsim::sim {

EventId Engine::schedule_at(SimTime t, Callback cb) {
  CCSIM_CHECK(t >= now_, "event scheduled in the past: {} ps < now {} ps", t.ps(), now_.ps());
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  const uint64_t seq = next_seq_++;
  slots_[slot] = Slot{seq, std::move(cb)};
  queue_.push(Entry{t.ps(), seq, slot});
  ++live_;
  return EventId{slot, seq};
}

bool Engine::cancel(EventId id) {
  if (!id.valid() || id.slot >= slots_.size()) return false;
  Slot& s = slots_[id.slot];
  if (s.seq != id.seq || !s.cb) return false;
  s.cb = nullptr;  // the queue entry is skipped when popped
  --live_;
  return true;
}

void Engine::run_instant_end_hooks() {
  for (auto& hook : instant_end_hooks_) hook();
}

void Engine::run_until(SimTime limit) {
  for (;;) {
    // Drop cancelled entries at the head.
    while (!queue_.empty()) {
      const Entry& top = queue_.top();
      const Slot& s = slots_[top.slot];
      if (s.seq == top.seq && s.cb) break;
      if (s.seq == top.seq) free_slots_.push_back(top.slot);
      queue_.pop();
    }
    if (queue_.empty() || queue_.top().time_ps > now_.ps()) {
      // The current instant is exhausted: let fluid models settle before time moves.
      const uint64_t before = next_seq_;
      run_instant_end_hooks();
      if (next_seq_ != before) continue;  // hooks scheduled something; re-examine the queue
      if (queue_.empty() || queue_.top().time_ps > limit.ps()) return;
    }
    const Entry e = queue_.top();
    queue_.pop();
    Slot& s = slots_[e.slot];
    Callback cb = std::move(s.cb);
    s.cb = nullptr;
    free_slots_.push_back(e.slot);
    --live_;
    now_ = SimTime::from_ps(e.time_ps);
    ++processed_;
    cb();
  }
}

}  // namespace ccsim::sim
