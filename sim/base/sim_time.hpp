#pragma once
/// \file
/// Simulated time as strong types over int64 picoseconds (STYLE: no double time). `SimTime` is a
/// point on the simulated clock, `Duration` a span; sums of integers accumulate no rounding error.
/// Range: ±2^63 ps ≈ ±106 days of simulated time. Arithmetic saturates at the ends of that range
/// instead of wrapping: a time past the end is `SimTime::infinite()`, the simulator's horizon, which
/// the engine reports (Engine::passed_horizon) rather than schedule.

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
  /// Rounds to the nearest picosecond; beyond ±9.2e6 s (about 106 days) and NaN saturate to
  /// max() (NaN, +) or min() (-).
  static Duration from_seconds(double s) { return from_ps_double(std::round(s * 1e12)); }
  /// Rounds up to the next picosecond (used for completion times: never early); saturates likewise.
  static Duration from_seconds_ceil(double s) { return from_ps_double(std::ceil(s * 1e12)); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<int64_t>::max()); }
  static constexpr Duration min() { return Duration(std::numeric_limits<int64_t>::min()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) / 1e12; }  // correctly rounded

  constexpr Duration operator+(Duration o) const { return Duration(saturating_add(ps_, o.ps_)); }
  constexpr Duration operator-(Duration o) const { return Duration(saturating_sub(ps_, o.ps_)); }
  constexpr Duration& operator+=(Duration o) { ps_ = saturating_add(ps_, o.ps_); return *this; }
  constexpr auto operator<=>(const Duration&) const = default;

  /// a + b, clamped to the int64 range.
  static constexpr int64_t saturating_add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  /// a - b, clamped to the int64 range.
  static constexpr int64_t saturating_sub(int64_t a, int64_t b) {
    int64_t r = 0;
    if (!__builtin_sub_overflow(a, b, &r)) return r;
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }

 private:
  constexpr explicit Duration(int64_t ps) : ps_(ps) {}
  // 2^63 as a double: the first value past the int64 range.
  static Duration from_ps_double(double ps) {
    constexpr double kEnd = 9223372036854775808.0;
    if (!(ps < kEnd)) return max();  // also NaN
    if (ps < -kEnd) return min();
    return Duration(static_cast<int64_t>(ps));
  }
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
  constexpr double seconds() const { return static_cast<double>(ps_) / 1e12; }  // correctly rounded

  constexpr SimTime operator+(Duration d) const { return SimTime(Duration::saturating_add(ps_, d.ps())); }
  constexpr Duration operator-(SimTime o) const { return Duration::from_ps(Duration::saturating_sub(ps_, o.ps_)); }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

}  // namespace ccsim
