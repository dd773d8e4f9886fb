#pragma once
/// \file
/// Reader for NumPy .npy files holding float32 or float16 arrays (C order, little-endian), the
/// format of per-worker gradient dumps. Values are returned as fp32, flattened.

#include <string>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::traces {

/// A loaded array: its shape and its values as fp32 (float16 is widened exactly).
struct NpyArray {
  std::vector<uint64_t> shape;
  std::vector<float> values;
};

/// Reads `path`. Errors (kNotFound, kInvalidArgument) name the file and what was wrong.
Result<NpyArray> read_npy(const std::string& path);
/// Writes a float32 .npy file (used by tests and tools); the file is written whole or not at all.
Status write_npy_f32(const std::string& path, const std::vector<uint64_t>& shape, const std::vector<float>& values);

}  // namespace ccsim::traces
