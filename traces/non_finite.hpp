#pragma once
/// \file
/// Non-finite gradient values. ccsim's policy for gradients read from files (npy files of a
/// scenario, gradient dumps): a NaN or an infinity is an input error naming the file, the worker,
/// the step, the first index and the count (docs/gradient-dumps.md). A compression error measured
/// on such a gradient would be inf or NaN, and no scheme is specified for non-finite inputs.

#include <cstdint>
#include <cstring>
#include <span>

namespace ccsim::traces {

struct NonFinite {
  uint64_t count = 0;  ///< entries that are NaN or ±inf
  uint64_t first = 0;  ///< index of the first of them (meaningful when count > 0)
  float value = 0;     ///< its value
};

/// The non-finite entries of `values`: one pass that the compiler vectorizes (an exponent of all
/// ones is NaN or ±inf), then a look for the first where there are any.
inline NonFinite find_non_finite(std::span<const float> values) {
  NonFinite out;
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    out.count += (bits & 0x7F800000u) == 0x7F800000u ? 1 : 0;
  }
  if (out.count == 0) return out;
  for (uint64_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u) {
      out.first = i;
      out.value = values[i];
      break;
    }
  }
  return out;
}

}  // namespace ccsim::traces
