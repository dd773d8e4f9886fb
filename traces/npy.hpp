#pragma once
/// \file
/// Reader for NumPy .npy files holding float32 or float16 arrays (C order, little-endian), the
/// format of per-worker gradient dumps. Values are returned as fp32, flattened.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::traces {

/// A loaded array: its shape and its values as fp32 (float16 is widened exactly).
struct NpyArray {
  std::vector<uint64_t> shape;
  std::vector<float> values;
};

/// What a .npy file's header says.
struct NpyHeader {
  std::vector<uint64_t> shape;
  uint64_t elements = 1;      ///< product of the shape
  uint32_t value_bytes = 4;   ///< 4 (float32) or 2 (float16)
  uint64_t data_offset = 0;   ///< where the values start
};

/// The most values a .npy file may announce (2^44, as traces/compute_trace.hpp allows parameters):
/// its byte count stays far inside 64 bits.
inline constexpr uint64_t kMaxNpyValues = uint64_t{1} << 44;

/// The header dictionary of a .npy file (the text after its length field) checked and read: 'descr'
/// '<f4' or '<f2' (little-endian), C order, a shape of at most kMaxNpyValues values. Errors name
/// `name`; data_offset is left 0 (the caller knows where the dictionary ends).
Result<NpyHeader> parse_npy_dict(const std::string& dict, std::string_view name);

/// Reads and checks `path`'s header, and that the file holds every value it announces (without
/// reading them). Errors as read_npy's.
Result<NpyHeader> read_npy_header(const std::string& path);
/// Reads `path`. Errors (kNotFound, kInvalidArgument) name the file and what was wrong.
Result<NpyArray> read_npy(const std::string& path);
/// OK, or an input error naming `path` where `values` (read from it) hold a NaN or an infinity:
/// the count, the first index and its value (traces/non_finite.hpp: ccsim's policy).
Status check_finite_npy(const std::string& path, std::span<const float> values);
/// Writes a float32 .npy file (used by tests and tools); the file is written whole or not at all.
Status write_npy_f32(const std::string& path, const std::vector<uint64_t>& shape, const std::vector<float>& values);

}  // namespace ccsim::traces
