#include <gtest/gtest.h>

#include <limits>

#include "sim/base/sim_time.hpp"
#include "sim/base/units.hpp"

namespace ccsim {
namespace {

double parse_ok(std::string_view s, UnitKind k) {
  auto r = parse_quantity(s, k);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

TEST(Units, BandwidthBitsAndBytes) {
  EXPECT_DOUBLE_EQ(parse_ok("100Gbps", UnitKind::kBandwidth), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_ok("2.5Gbps", UnitKind::kBandwidth), 312.5e6);
  EXPECT_DOUBLE_EQ(parse_ok("12.5GBps", UnitKind::kBandwidth), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_ok("25GB/s", UnitKind::kBandwidth), 25e9);
  EXPECT_DOUBLE_EQ(parse_ok("1GiB/s", UnitKind::kBandwidth), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_ok("800", UnitKind::kBandwidth), 800.0);
}

TEST(Units, SizesDecimalAndBinary) {
  EXPECT_DOUBLE_EQ(parse_ok("25MB", UnitKind::kBytes), 25e6);
  EXPECT_DOUBLE_EQ(parse_ok("25MiB", UnitKind::kBytes), 26214400.0);
  EXPECT_DOUBLE_EQ(parse_ok("1 GiB", UnitKind::kBytes), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_ok("256MB", UnitKind::kBytes), 256e6);
  EXPECT_DOUBLE_EQ(parse_ok("8b", UnitKind::kBytes), 1.0);
}

TEST(Units, Times) {
  EXPECT_DOUBLE_EQ(parse_ok("1.5us", UnitKind::kTime), 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_ok("200ns", UnitKind::kTime), 200e-9);
  EXPECT_DOUBLE_EQ(parse_ok("2ms", UnitKind::kTime), 2e-3);
  EXPECT_DOUBLE_EQ(parse_ok("3", UnitKind::kTime), 3.0);
  EXPECT_DOUBLE_EQ(parse_ok("1e-6s", UnitKind::kTime), 1e-6);
}

TEST(Units, RejectsUnknownUnitsAndGarbage) {
  for (auto s : {"100Gbsp", "fast", "", "12 parsecs", "1.5 us s"}) {
    auto r = parse_quantity(s, UnitKind::kBandwidth);
    EXPECT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto r = parse_quantity("100Gbsp", UnitKind::kBandwidth);
  EXPECT_NE(r.status().message().find("unknown unit \"Gbsp\""), std::string::npos) << r.status().message();
  // A time unit is not a size unit.
  EXPECT_FALSE(parse_quantity("5us", UnitKind::kBytes).ok());
}

TEST(Units, FormatPicksReadableUnit) {
  EXPECT_EQ(format_quantity(12.5e9, UnitKind::kBandwidth), "12.5 GB/s");
  EXPECT_EQ(format_quantity(1.28e-3, UnitKind::kTime), "1.28 ms");
  EXPECT_EQ(format_quantity(256e6, UnitKind::kBytes), "256 MB");
  // Whole binary units print as such; anything else in decimal units.
  EXPECT_EQ(format_quantity(8.0 * (1 << 30), UnitKind::kBytes), "8 GiB");
  EXPECT_EQ(format_quantity(25.0 * (1 << 20), UnitKind::kBytes), "25 MiB");
  EXPECT_EQ(format_quantity(4096, UnitKind::kBytes), "4 KiB");
  EXPECT_EQ(format_quantity(1.5 * (1 << 30), UnitKind::kBytes), "1.611 GB");
  EXPECT_EQ(format_quantity(1024000, UnitKind::kBytes), "1.024 MB");
  EXPECT_EQ(format_quantity(2e9, UnitKind::kBytes), "2 GB");
}

TEST(SimTime, PicosecondArithmeticIsExact) {
  // 10^6 additions of 1 ps stay exact (a double seconds counter would not be).
  SimTime t = SimTime::zero();
  for (int i = 0; i < 1000000; ++i) t = t + Duration::from_ps(1);
  EXPECT_EQ(t.ps(), 1000000);
  EXPECT_EQ(Duration::from_seconds(1.5e-6).ps(), 1500000);
  EXPECT_EQ(Duration::from_seconds_ceil(1.0000000000001e-12).ps(), 2);
  EXPECT_EQ((SimTime::from_ps(10) - SimTime::from_ps(4)).ps(), 6);
}

TEST(SimTime, ArithmeticSaturatesAtTheEndsOfTheClock) {
  const int64_t top = std::numeric_limits<int64_t>::max(), bottom = std::numeric_limits<int64_t>::min();
  // Wrapping would make these negative (an event "in the past"): they stop at the clock's end.
  EXPECT_EQ((SimTime::from_ps(top - 5) + Duration::from_ps(10)).ps(), top);
  EXPECT_EQ((SimTime::from_ps(top - 5) + Duration::from_ps(5)).ps(), top);
  EXPECT_EQ(SimTime::from_ps(top - 5) + Duration::from_ps(10), SimTime::infinite());
  EXPECT_EQ((Duration::from_ps(top) + Duration::from_ps(1)).ps(), top);
  EXPECT_EQ((Duration::from_ps(bottom) - Duration::from_ps(1)).ps(), bottom);
  EXPECT_EQ((Duration::from_ps(bottom + 1) + Duration::from_ps(-2)).ps(), bottom);
  EXPECT_EQ((Duration::from_ps(1) - Duration::from_ps(bottom)).ps(), top);
  EXPECT_EQ((SimTime::from_ps(top) - SimTime::from_ps(-1)).ps(), top);
  Duration d = Duration::from_ps(top - 1);
  d += Duration::from_ps(3);
  EXPECT_EQ(d, Duration::max());
  // Seconds past 2^63 ps (9.22e6 s), infinities and NaN saturate; the last exact values do not.
  EXPECT_EQ(Duration::from_seconds(1e7), Duration::max());
  EXPECT_EQ(Duration::from_seconds_ceil(1e300), Duration::max());
  EXPECT_EQ(Duration::from_seconds(std::numeric_limits<double>::infinity()), Duration::max());
  EXPECT_EQ(Duration::from_seconds(std::numeric_limits<double>::quiet_NaN()), Duration::max());
  EXPECT_EQ(Duration::from_seconds(-1e7), Duration::min());
  EXPECT_EQ(Duration::from_seconds(9.2e6).ps(), 9200000000000000000);
  EXPECT_EQ(Duration::from_seconds(-9.2e6).ps(), -9200000000000000000);
  // Nearest picosecond, halves away from zero (as llround did).
  EXPECT_EQ(Duration::from_seconds(2.5e-12).ps(), 3);
  EXPECT_EQ(Duration::from_seconds(-2.5e-12).ps(), -3);
}

}  // namespace
}  // namespace ccsim
