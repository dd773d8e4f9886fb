#include "sim/base/units.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace ccsim {
namespace {

struct UnitEntry {
  std::string_view suffix;
  double factor;
};

// Bandwidth: lowercase b = bits (divide by 8), B = bytes.
constexpr std::array kBandwidthUnits = {
    UnitEntry{"bps", 1.0 / 8},       UnitEntry{"Kbps", 1e3 / 8},      UnitEntry{"kbps", 1e3 / 8},
    UnitEntry{"Mbps", 1e6 / 8},      UnitEntry{"Gbps", 1e9 / 8},      UnitEntry{"Tbps", 1e12 / 8},
    UnitEntry{"Bps", 1.0},           UnitEntry{"KBps", 1e3},          UnitEntry{"kBps", 1e3},
    UnitEntry{"MBps", 1e6},          UnitEntry{"GBps", 1e9},          UnitEntry{"TBps", 1e12},
    UnitEntry{"B/s", 1.0},           UnitEntry{"KB/s", 1e3},          UnitEntry{"kB/s", 1e3},
    UnitEntry{"MB/s", 1e6},          UnitEntry{"GB/s", 1e9},          UnitEntry{"TB/s", 1e12},
    UnitEntry{"KiB/s", 1024.0},      UnitEntry{"MiB/s", 1048576.0},   UnitEntry{"GiB/s", 1073741824.0},
    UnitEntry{"TiB/s", 1099511627776.0}, UnitEntry{"b/s", 1.0 / 8},   UnitEntry{"Gb/s", 1e9 / 8},
    UnitEntry{"Mb/s", 1e6 / 8},      UnitEntry{"Tb/s", 1e12 / 8},
};
constexpr std::array kByteUnits = {
    UnitEntry{"B", 1.0},           UnitEntry{"KB", 1e3},         UnitEntry{"kB", 1e3},
    UnitEntry{"MB", 1e6},          UnitEntry{"GB", 1e9},         UnitEntry{"TB", 1e12},
    UnitEntry{"KiB", 1024.0},      UnitEntry{"MiB", 1048576.0},  UnitEntry{"GiB", 1073741824.0},
    UnitEntry{"TiB", 1099511627776.0}, UnitEntry{"b", 1.0 / 8},  UnitEntry{"Kb", 1e3 / 8},
    UnitEntry{"Mb", 1e6 / 8},      UnitEntry{"Gb", 1e9 / 8},
};
constexpr std::array kTimeUnits = {
    UnitEntry{"ps", 1e-12}, UnitEntry{"ns", 1e-9}, UnitEntry{"us", 1e-6}, UnitEntry{"\u00b5s", 1e-6},
    UnitEntry{"ms", 1e-3},  UnitEntry{"s", 1.0},   UnitEntry{"min", 60.0}, UnitEntry{"h", 3600.0},
};

template <size_t N>
const UnitEntry* find_unit(const std::array<UnitEntry, N>& table, std::string_view suffix) {
  for (const auto& e : table)
    if (e.suffix == suffix) return &e;
  return nullptr;
}

const UnitEntry* lookup(UnitKind kind, std::string_view suffix) {
  switch (kind) {
    case UnitKind::kTime: return find_unit(kTimeUnits, suffix);
    case UnitKind::kBytes: return find_unit(kByteUnits, suffix);
    case UnitKind::kBandwidth: return find_unit(kBandwidthUnits, suffix);
  }
  return nullptr;
}

}  // namespace

std::string_view base_unit_name(UnitKind kind) {
  switch (kind) {
    case UnitKind::kTime: return "s";
    case UnitKind::kBytes: return "bytes";
    case UnitKind::kBandwidth: return "bytes/s";
  }
  return "";
}

std::string unit_examples(UnitKind kind) {
  switch (kind) {
    case UnitKind::kTime: return "a number of seconds or a string such as \"1.5us\", \"200ns\", \"2ms\"";
    case UnitKind::kBytes: return "a number of bytes or a string such as \"25MB\", \"25MiB\", \"1GB\"";
    case UnitKind::kBandwidth:
      return "a number of bytes/s or a string such as \"100Gbps\", \"12.5GBps\", \"25GB/s\"";
  }
  return "";
}

Result<double> parse_quantity(std::string_view text, UnitKind kind) {
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr == s.data())
    return invalid_argument(fmt::format("expected {}, got \"{}\"", unit_examples(kind), text));
  std::string_view suffix(ptr, static_cast<size_t>(s.data() + s.size() - ptr));
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  if (!std::isfinite(value))
    return invalid_argument(fmt::format("expected a finite quantity, got \"{}\"", text));
  if (suffix.empty()) return value;
  const UnitEntry* unit = lookup(kind, suffix);
  if (unit == nullptr)
    return invalid_argument(fmt::format("unknown unit \"{}\" in \"{}\"; expected {}", suffix, text, unit_examples(kind)));
  return value * unit->factor;
}

std::string format_quantity(double value, UnitKind kind) {
  struct Step { double factor; const char* name; };
  auto pick = [&](std::initializer_list<Step> steps) {
    const Step* best = steps.begin();
    for (const Step& st : steps)
      if (std::fabs(value) >= st.factor) best = &st;
    return fmt::format("{:.4g} {}", value / best->factor, best->name);
  };
  switch (kind) {
    case UnitKind::kTime: return pick({{1e-12, "ps"}, {1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1.0, "s"}});
    case UnitKind::kBytes: {
      // A whole number of KiB, MiB, GiB or TiB that is no whole number of the decimal unit (a
      // power-of-two setting such as 8 GiB) prints in the binary unit: "8 GiB", not "8.59 GB".
      static constexpr Step kBinary[] = {{1099511627776.0, "TiB"}, {1073741824.0, "GiB"}, {1048576.0, "MiB"},
                                         {1024.0, "KiB"}};
      static constexpr double kDecimal[] = {1e12, 1e9, 1e6, 1e3};
      for (size_t k = 0; k < 4; ++k)
        if (std::fabs(value) >= kBinary[k].factor) {
          if (std::fmod(value, kBinary[k].factor) == 0 && std::fmod(value, kDecimal[k]) != 0)
            return fmt::format("{:.4g} {}", value / kBinary[k].factor, kBinary[k].name);
          break;
        }
      return pick({{1.0, "B"}, {1e3, "KB"}, {1e6, "MB"}, {1e9, "GB"}, {1e12, "TB"}});
    }
    case UnitKind::kBandwidth:
      return pick({{1.0, "B/s"}, {1e3, "KB/s"}, {1e6, "MB/s"}, {1e9, "GB/s"}, {1e12, "TB/s"}});
  }
  return fmt::format("{}", value);
}

}  // namespace ccsim
