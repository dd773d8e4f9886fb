#pragma once
/// \file
/// The engine's priority queue: an indexed 4-ary min-heap of (time, sequence) keys over stable
/// slots, so an entry can be removed or re-keyed in O(log n) without tombstones (ns-3's
/// Scheduler with (ts, uid) keys; the index makes SimGrid-style "reschedule this completion" cheap).

#include <cstdint>
#include <vector>

#include "sim/base/check.hpp"

namespace ccsim::sim {

/// Ordering key of an event: time first, then the insertion sequence number.
struct EventKey {
  int64_t time_ps = 0;
  uint64_t seq = 0;
  bool operator<(const EventKey& o) const { return time_ps != o.time_ps ? time_ps < o.time_ps : seq < o.seq; }
};

/// Indexed 4-ary heap over slot numbers 0..capacity-1 (the caller owns slot allocation).
class EventQueue {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  bool contains(uint32_t slot) const { return slot < pos_.size() && pos_[slot] != kAbsent; }
  /// The smallest entry. REQUIRES: !empty().
  uint32_t top_slot() const { return heap_[0].slot; }
  const EventKey& top_key() const { return heap_[0].key; }
  /// Key of a queued slot. REQUIRES: contains(slot).
  const EventKey& key(uint32_t slot) const { return heap_[pos_[slot]].key; }

  /// Inserts `slot` with `key`. REQUIRES: !contains(slot).
  void push(uint32_t slot, EventKey key) {
    if (slot >= pos_.size()) pos_.resize(slot + 1, kAbsent);
    CCSIM_CHECK(pos_[slot] == kAbsent, "slot {} already queued", slot);
    heap_.push_back(Node{key, slot});
    pos_[slot] = static_cast<uint32_t>(heap_.size() - 1);
    sift_up(heap_.size() - 1);
  }
  /// Removes `slot`. REQUIRES: contains(slot).
  void erase(uint32_t slot) {
    const uint32_t i = pos_[slot];
    pos_[slot] = kAbsent;
    const Node last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[last.slot] = i;
    if (i > 0 && last.key < heap_[(i - 1) / kArity].key) {
      sift_up(i);
    } else {
      sift_down(i);
    }
  }
  /// Changes the key of a queued slot.
  void update(uint32_t slot, EventKey key) {
    const uint32_t i = pos_[slot];
    const EventKey old = heap_[i].key;
    heap_[i].key = key;
    if (key < old) {
      sift_up(i);
    } else {
      sift_down(i);
    }
  }
  /// Removes and returns the smallest slot. REQUIRES: !empty().
  uint32_t pop() {
    const uint32_t slot = heap_[0].slot;
    erase(slot);
    return slot;
  }

 private:
  static constexpr size_t kArity = 4;
  struct Node {
    EventKey key;
    uint32_t slot;
  };

  void sift_up(size_t i) {
    const Node n = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!(n.key < heap_[parent].key)) break;
      heap_[i] = heap_[parent];
      pos_[heap_[i].slot] = static_cast<uint32_t>(i);
      i = parent;
    }
    heap_[i] = n;
    pos_[n.slot] = static_cast<uint32_t>(i);
  }
  void sift_down(size_t i) {
    const Node n = heap_[i];
    const size_t size = heap_.size();
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= size) break;
      size_t best = first;
      const size_t last = first + kArity < size ? first + kArity : size;
      for (size_t c = first + 1; c < last; ++c)
        if (heap_[c].key < heap_[best].key) best = c;
      if (!(heap_[best].key < n.key)) break;
      heap_[i] = heap_[best];
      pos_[heap_[i].slot] = static_cast<uint32_t>(i);
      i = best;
    }
    heap_[i] = n;
    pos_[n.slot] = static_cast<uint32_t>(i);
  }

  std::vector<Node> heap_;
  std::vector<uint32_t> pos_;
};

}  // namespace ccsim::sim
