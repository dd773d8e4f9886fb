#include "kernels/pack/bitpack.hpp"

#include <algorithm>

#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {
// Groups of 8 codes are k whole bytes; a piece of the parallel loop is a run of groups.
constexpr uint64_t kGroupGrain = 1 << 13;
}  // namespace

void bitpack_pack(const uint8_t* codes, uint64_t count, uint32_t bits, uint8_t* out) {
  CCSIM_CHECK(bits >= 1 && bits <= kBitpackMaxBits, "bitpack: code width {} not in [1, 8]", bits);
  const uint64_t groups = (count + 7) / 8, total_bytes = packed_bytes(count, bits);
  const uint64_t mask = (uint64_t{1} << bits) - 1u;
  parallel_for(groups, kGroupGrain, [=](uint64_t g0, uint64_t g1) {
    for (uint64_t g = g0; g < g1; ++g) {
      const uint64_t first = g * 8, n = std::min<uint64_t>(8, count - first);
      uint64_t stream = 0;  // at most 64 bits: 8 codes of 8 bits
      for (uint64_t j = 0; j < n; ++j) stream |= (codes[first + j] & mask) << (j * bits);
      const uint64_t byte0 = g * bits, nbytes = std::min<uint64_t>(bits, total_bytes - byte0);
      for (uint64_t b = 0; b < nbytes; ++b) out[byte0 + b] = static_cast<uint8_t>(stream >> (8 * b));
    }
  });
}

void bitpack_unpack(const uint8_t* packed, uint64_t count, uint32_t bits, uint8_t* codes) {
  CCSIM_CHECK(bits >= 1 && bits <= kBitpackMaxBits, "bitpack: code width {} not in [1, 8]", bits);
  const uint64_t groups = (count + 7) / 8, total_bytes = packed_bytes(count, bits);
  const uint64_t mask = (uint64_t{1} << bits) - 1u;
  parallel_for(groups, kGroupGrain, [=](uint64_t g0, uint64_t g1) {
    for (uint64_t g = g0; g < g1; ++g) {
      const uint64_t byte0 = g * bits, nbytes = std::min<uint64_t>(bits, total_bytes - byte0);
      uint64_t stream = 0;
      for (uint64_t b = 0; b < nbytes; ++b) stream |= static_cast<uint64_t>(packed[byte0 + b]) << (8 * b);
      const uint64_t first = g * 8, n = std::min<uint64_t>(8, count - first);
      for (uint64_t j = 0; j < n; ++j) codes[first + j] = static_cast<uint8_t>((stream >> (j * bits)) & mask);
    }
  });
}

}  // namespace ccsim::kern
