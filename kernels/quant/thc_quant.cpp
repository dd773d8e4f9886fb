#include "kernels/quant/thc_quant.hpp"

#include <algorithm>

#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

// Eight fields of `bits` bits fill exactly `bits` whole bytes: a parallel piece is a run of such
// groups, so no byte is shared between threads.
constexpr uint64_t kGroupGrain = 1 << 13;

void check_bits(uint32_t bits) {
  CCSIM_CHECK(bits == 8 || bits == 12 || bits == 16, "THC: aggregation fields of {} bits (8, 12 or 16)", bits);
}

template <class Op>
void unpack_with(const uint8_t* in, uint64_t count, uint32_t bits, Op&& op) {
  check_bits(bits);
  parallel_for((count + 7) / 8, kGroupGrain, [&](uint64_t g0, uint64_t g1) {
    for (uint64_t i = g0 * 8; i < std::min(count, g1 * 8); ++i) op(i, static_cast<float>(thc_field_get(in, i, bits)));
  });
}

}  // namespace

void thc_pack(const float* x, uint64_t count, uint32_t bits, uint8_t* out) {
  check_bits(bits);
  const float top = static_cast<float>((1u << bits) - 1u);
  const uint64_t total = thc_bytes(count, bits);
  parallel_for((count + 7) / 8, kGroupGrain, [=](uint64_t g0, uint64_t g1) {
    for (uint64_t g = g0; g < g1; ++g) {
      const uint64_t first = g * 8, n = std::min<uint64_t>(8, count - first);
      // At most 8 fields of 16 bits: a 128-bit stream in two words.
      uint64_t lo = 0, hi = 0;
      for (uint64_t j = 0; j < n; ++j) {
        const float v = x[first + j];
        CCSIM_CHECK(v >= 0.0f && v <= top && v == floorf(v),
                    "THC: element {} = {} is not an integer in [0, 2^{} - 1]: the aggregation field would overflow",
                    first + j, v, bits);
        const uint64_t field = static_cast<uint64_t>(v), at = j * bits;
        if (at < 64) lo |= field << at;
        if (at + bits > 64) hi |= at >= 64 ? field << (at - 64) : field >> (64 - at);
      }
      const uint64_t byte0 = g * bits, nbytes = std::min<uint64_t>(bits, total - byte0);
      for (uint64_t b = 0; b < nbytes; ++b)
        out[byte0 + b] = static_cast<uint8_t>(b < 8 ? lo >> (8 * b) : hi >> (8 * (b - 8)));
    }
  });
}

void thc_unpack(const uint8_t* in, uint64_t count, uint32_t bits, float* out) {
  unpack_with(in, count, bits, [out](uint64_t i, float v) { out[i] = v; });
}

void thc_unpack_accumulate(const uint8_t* in, uint64_t count, uint32_t bits, float* acc) {
  unpack_with(in, count, bits, [acc](uint64_t i, float v) { acc[i] += v; });
}

}  // namespace ccsim::kern
