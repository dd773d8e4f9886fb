// Fuzz target: `--set PATH=VALUE` overrides (tools/app/scenario_io.hpp apply_override), one per
// line of the input, applied to a small valid scenario that is then validated as `ccsim run` would.

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_files.hpp"
#include "tools/app/scenario_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = ccsim::fuzz::fuzz_dir();
  nlohmann::json doc = {{"name", "fuzz"},
                        {"cluster", {{"nodes", 4}, {"nic_bandwidth", "100Gbps"}}},
                        {"gradients", {{"size", "64KB"}}},
                        {"compression", nlohmann::json::array({{{"scheme", "int8"}}, {{"scheme", "dynamiq"}}})}};
  const std::string_view text = ccsim::fuzz::as_text(data, size);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const ccsim::Status st = ccsim::app::apply_override(doc, std::string(text.substr(start, end - start)));
    if (!st.ok()) {
      if (!st.is_input_error()) __builtin_trap();
      return 0;
    }
    start = end + 1;
  }
  ccsim::app::Overrides limits;
  limits.max_flows = 1000000;
  const auto loaded = ccsim::app::load_scenario_json(doc, "fuzz.json", dir.path().string(), limits);
  if (!loaded.ok() && !loaded.status().is_input_error()) __builtin_trap();
  return 0;
}
