// Fuzz target: the scenario loader (tools/app/scenario_io.hpp) on any bytes as a scenario file: the
// JSON reader, every field's declaration and every cross-field and cross-file check. It must
// answer with a scenario or an input error that names the file, never crash or hang. Scenarios may
// name the helper files of fuzz_files.hpp (trace.json, profile.json, cdf.json, g0.npy ...).

#include "tests/fuzz/fuzz_files.hpp"
#include "tools/app/scenario_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = ccsim::fuzz::fuzz_dir();
  const std::string file = dir.write("scenario.json", std::string(ccsim::fuzz::as_text(data, size))).string();
  ccsim::app::Overrides limits;
  limits.max_flows = 1000000;  // a run's size is checked, not simulated: keep the plan small
  const auto loaded = ccsim::app::load_scenario(file, limits);
  if (!loaded.ok() && (!loaded.status().is_input_error() || loaded.status().message().find(file) == std::string::npos))
    __builtin_trap();  // a refusal is an input error about this file
  return 0;
}
