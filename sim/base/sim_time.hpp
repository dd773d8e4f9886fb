#pragma once
/// \file
/// Simulated time as strong types over int64 picoseconds (STYLE: no double time). `SimTime` is a
/// point on the simulated clock, `Duration` a span; sums of integers accumulate no rounding error.
/// Range: ±2^63 ps ≈ ±106 days of simulated time.

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace ccsim {

/// A span of simulated time in picoseconds.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ps(int64_t ps) { return Duration(ps); }
  /// Rounds to the nearest picosecond. REQUIRES: |s| < 9.2e6 (about 106 days).
  static Duration from_seconds(double s) { return Duration(static_cast<int64_t>(std::llround(s * 1e12))); }
  /// Rounds up to the next picosecond (used for completion times: never early).
  static Duration from_seconds_ceil(double s) { return Duration(static_cast<int64_t>(std::ceil(s * 1e12))); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr Duration operator+(Duration o) const { return Duration(ps_ + o.ps_); }
  constexpr Duration operator-(Duration o) const { return Duration(ps_ - o.ps_); }
  constexpr Duration& operator+=(Duration o) { ps_ += o.ps_; return *this; }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

/// A point on the simulated clock, picoseconds since the start of the simulation.
class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_ps(int64_t ps) { return SimTime(ps); }
  static constexpr SimTime zero() { return SimTime(0); }
  static constexpr SimTime infinite() { return SimTime(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr SimTime operator+(Duration d) const { return SimTime(ps_ + d.ps()); }
  constexpr Duration operator-(SimTime o) const { return Duration::from_ps(ps_ - o.ps_); }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

}  // namespace ccsim
