#pragma once
/// \file
/// Physical quantities in scenario files: plain numbers in base units (seconds, bytes, bytes/s) or
/// strings with units ("100Gbps", "12.5GBps", "25MB", "25MiB", "1.5us"). Decimal prefixes are
/// powers of 1000, binary prefixes (Ki, Mi, Gi, Ti) powers of 1024; a lowercase "b" means bits.

#include <string>
#include <string_view>

#include "sim/base/status.hpp"

namespace ccsim {

/// What a quantity measures; selects the accepted unit suffixes.
enum class UnitKind {
  kTime,       ///< seconds: ps, ns, us, ms, s
  kBytes,      ///< bytes: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (and bits: b, Kb, Mb, Gb)
  kBandwidth,  ///< bytes/s: bps, Kbps, Mbps, Gbps, Tbps, Bps, KBps, MBps, GBps, TBps, GB/s, GiB/s, ...
};

/// Name of the base unit ("s", "bytes", "bytes/s").
std::string_view base_unit_name(UnitKind kind);
/// A short description of the accepted forms, for error messages and the JSON Schema.
std::string unit_examples(UnitKind kind);

/// Parses "1.5us", "100Gbps", "25MiB" (a number followed by an optional unit). A bare number in a
/// string is taken in base units. Returns kInvalidArgument naming the accepted units on failure.
Result<double> parse_quantity(std::string_view text, UnitKind kind);

/// Formats a value in base units with a readable unit ("12.5 GB/s", "1.28 ms", "256 MB").
std::string format_quantity(double value, UnitKind kind);

}  // namespace ccsim
