#pragma once
/// \file
/// Busy-time bookkeeping for the round metrics: a set of disjoint half-open intervals built in time
/// order (compute ops, communication activity, compression kernels of one worker), with measures
/// of the set and of the intersection of two sets inside a window. T_overlap, T_wait and the
/// DynamiQ Fig. 6 breakdown are all such measures (sim/training/training_job.hpp).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/base/check.hpp"
#include "sim/base/sim_time.hpp"

namespace ccsim::sim {

/// Disjoint, sorted [begin, end) intervals. Appends must not start before the last interval's begin.
class IntervalSet {
 public:
  struct Interval {
    SimTime begin, end;
  };

  /// Adds [b, e); merges with the last interval when they touch or overlap. Empty intervals are ignored.
  void add(SimTime b, SimTime e) {
    if (e <= b) return;
    if (!v_.empty()) {
      CCSIM_CHECK(b >= v_.back().begin, "intervals must be added in time order");
      if (b <= v_.back().end) {
        v_.back().end = std::max(v_.back().end, e);
        return;
      }
    }
    v_.push_back({b, e});
  }
  const std::vector<Interval>& intervals() const { return v_; }
  bool empty() const { return v_.empty(); }

  /// Total length of the set inside [a, b).
  Duration measure(SimTime a, SimTime b) const {
    int64_t ps = 0;
    for (auto it = first_ending_after(a); it != v_.end() && it->begin < b; ++it)
      ps += std::max<int64_t>(0, (std::min(it->end, b) - std::max(it->begin, a)).ps());
    return Duration::from_ps(ps);
  }

  /// Length of x ∩ y inside [a, b).
  static Duration overlap(const IntervalSet& x, const IntervalSet& y, SimTime a, SimTime b) {
    auto i = x.first_ending_after(a);
    auto j = y.first_ending_after(a);
    int64_t ps = 0;
    while (i != x.v_.end() && j != y.v_.end() && i->begin < b && j->begin < b) {
      const SimTime lo = std::max({i->begin, j->begin, a});
      const SimTime hi = std::min({i->end, j->end, b});
      if (hi > lo) ps += (hi - lo).ps();
      if (i->end < j->end) ++i; else ++j;
    }
    return Duration::from_ps(ps);
  }

 private:
  std::vector<Interval>::const_iterator first_ending_after(SimTime a) const {
    return std::upper_bound(v_.begin(), v_.end(), a, [](SimTime t, const Interval& iv) { return t < iv.end; });
  }
  std::vector<Interval> v_;
};

/// A counter of concurrent activities (flows, collectives, kernels) whose non-zero periods form an
/// IntervalSet: up() and down() in time order.
class ActivityCounter {
 public:
  void up(SimTime t) {
    if (count_++ == 0) since_ = t;
  }
  void down(SimTime t) {
    CCSIM_CHECK(count_ > 0, "activity counter below zero");
    if (--count_ == 0) set_.add(since_, t);
  }
  bool active() const { return count_ > 0; }
  /// The periods so far, with an open period closed at `now`.
  IntervalSet snapshot(SimTime now) const {
    IntervalSet s = set_;
    if (count_ > 0) s.add(since_, now);
    return s;
  }
  const IntervalSet& closed() const { return set_; }

 private:
  uint32_t count_ = 0;
  SimTime since_;
  IntervalSet set_;
};

}  // namespace ccsim::sim
