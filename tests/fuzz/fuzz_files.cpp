#include "tests/fuzz/fuzz_files.hpp"

#include <fmt/format.h>

#include <vector>

#include "traces/npy.hpp"

namespace ccsim::fuzz {

const testing::TempDir& fuzz_dir() {
  static const testing::TempDir dir("ccsim-fuzz");
  static const bool ready = [](const testing::TempDir& d) {
    d.write("trace.json", R"({"format": "ccsim-compute-trace", "version": 1, "model": "fuzz",
      "provenance": {"kind": "estimated", "device": "none", "source": "tests/fuzz"},
      "layers": [{"name": "a", "params": 48, "forward": "1ms", "backward": "2ms"},
                 {"name": "b", "params": 16, "forward": "1ms", "backward": "2ms"}]})");
    d.write("profile.json", R"({"format": "ccsim-device-profile", "version": 1, "copy_bandwidth": 1e11,
      "device": {"kind": "cpu", "name": "fuzz", "measured": "2026-11-26", "source": "fuzz"},
      "kernels": [{"scheme": "bf16", "op": "encode", "params": {}, "launch": 5e-6,
                   "points": [{"bytes": 96000, "elements": 16000, "seconds": 6e-6},
                              {"bytes": 384000, "elements": 64000, "seconds": 7e-6}]}]})");
    d.write("cdf.json", R"({"format": "ccsim-straggler-cdf", "version": 1, "unit": "s",
      "points": [[1.0, 0.0], [1.1, 0.5], [1.5, 1.0]]})");
    std::vector<float> g(64);
    for (int w = 0; w < 4; ++w) {
      for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 7) - 3.0f + 0.25f * static_cast<float>(w);
      (void)traces::write_npy_f32((d.path() / fmt::format("g{}.npy", w)).string(), {g.size()}, g);
    }
    return true;
  }(dir);
  (void)ready;
  return dir;
}

}  // namespace ccsim::fuzz
