#pragma once
/// \file
/// A reader of one Philox stream that serves uniform_at(key, index) (and random_bits_at) for increasing
/// indices while computing each Philox block (four consecutive indices) only once. The values are
/// exactly uniform_at()'s, so a CPU loop using it draws the same numbers as a CUDA thread calling
/// uniform_at() directly, whatever the loop order or thread split.
///
/// Thread safety: one instance per thread (it caches the last block).

#include <cstdint>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// Cached uniform_at() for one stream.
class UniformStream {
 public:
  CCSIM_HD explicit UniformStream(const RngKey& key) : key_(key) {}

  /// uniform_at(key, index): a float uniform on [0, 1) with 24 bits of resolution.
  CCSIM_HD float at(uint64_t index) { return u32_to_unit_float(bits_at(index)); }

  /// random_bits_at(key, index): the raw 32 Philox bits.
  CCSIM_HD uint32_t bits_at(uint64_t index) {
    if ((index >> 2) != cached_) {
      cached_ = index >> 2;
      bits_ = philox_block(key_, cached_);
    }
    return bits_.v[index & 3u];
  }

 private:
  RngKey key_;
  uint64_t cached_ = UINT64_MAX;
  U32x4 bits_{};
};

}  // namespace ccsim::kern
