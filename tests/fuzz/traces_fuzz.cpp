// Fuzz target: the JSON trace readers. The first byte picks what the rest is: a compute trace
// (traces/compute_trace.hpp), a kernel-cost device profile (traces/device_profile.hpp) or a
// straggler CDF (sim/training/stragglers.hpp). Each must load or refuse with an input error.

#include "sim/training/stragglers.hpp"
#include "tests/fuzz/fuzz_files.hpp"
#include "traces/compute_trace.hpp"
#include "traces/device_profile.hpp"

namespace {
void check(const ccsim::Status& st) {
  if (!st.ok() && (!st.is_input_error() || st.message().empty())) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = ccsim::fuzz::as_text(data + 1, size - 1);
  const auto& dir = ccsim::fuzz::fuzz_dir();
  switch (data[0] % 3) {
    case 0: {
      const auto t = ccsim::traces::ComputeTrace::load(dir.write("t.json", std::string(rest)));
      if (!t.ok()) check(t.status());
      return 0;
    }
    case 1: {
      const auto p = ccsim::traces::load_device_profile(dir.write("p.json", std::string(rest)));
      if (!p.ok()) check(p.status());
      return 0;
    }
    default: {
      const auto c = ccsim::sim::EmpiricalCdf::load(dir.write("c.json", std::string(rest)));
      if (!c.ok()) check(c.status());
      return 0;
    }
  }
}
