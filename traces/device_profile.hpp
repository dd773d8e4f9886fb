#pragma once
/// \file
/// Device cost profiles: the measured cost of compression kernels on one device, written by
/// `ccsim bench-kernels` and read by scenarios (cluster.gpu.profile). Format (docs/kernel-costs.md):
///
///   {
///     "format": "ccsim-device-profile", "version": 1,
///     "device": { "kind": "cpu" | "cuda", "name": "...", "threads": 2,
///                 "measured": "2026-11-21", "source": "ccsim bench-kernels --device cpu ..." },
///     "copy_bandwidth": 2.62e10,           (bytes read + written per second; or "26.2GBps")
///     "kernels": [
///       { "scheme": "dynamiq", "op": "decode_accumulate_encode", "params": { },
///         "launch": 1.17e-5,               (seconds, or "11.7us")
///         "points": [ { "elements": 16384, "bytes": 150400, "seconds": 8.95e-4 }, ... ] }, ...
///     ]
///   }
///
/// The model over these numbers is kernels/cost_profile.hpp. Every reading error names the file
/// and the JSON path, what was expected and what was found (exit code 2).

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kernels/cost_profile.hpp"
#include "sim/base/status.hpp"

namespace ccsim::traces {

/// Reads and validates a profile file.
Result<kern::DeviceCostProfile> load_device_profile(const std::filesystem::path& path);
/// Validates a parsed profile; `file` names it in error messages.
Result<kern::DeviceCostProfile> device_profile_from_json(const nlohmann::json& root, std::string_view file);
/// The profile in its file format (numbers in base units): from_json(to_json(p)) == p.
nlohmann::json device_profile_to_json(const kern::DeviceCostProfile& profile);

}  // namespace ccsim::traces
