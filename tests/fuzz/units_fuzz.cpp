// Fuzz target: the unit parser (sim/base/units.hpp) on any text, for every kind of quantity. A
// quantity it accepts is a number (never NaN) and formats to text that parses again.

#include <cmath>

#include "sim/base/units.hpp"
#include "tests/fuzz/fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ccsim::UnitKind;
  const std::string_view text = ccsim::fuzz::as_text(data, size);
  for (const UnitKind kind : {UnitKind::kTime, UnitKind::kBytes, UnitKind::kBandwidth}) {
    const auto r = ccsim::parse_quantity(text, kind);
    if (!r.ok()) {
      if (r.status().message().empty()) __builtin_trap();  // every refusal says why
      continue;
    }
    if (std::isnan(*r)) __builtin_trap();
    if (std::isfinite(*r) && !ccsim::parse_quantity(ccsim::format_quantity(*r, kind), kind).ok()) __builtin_trap();
  }
  return 0;
}
