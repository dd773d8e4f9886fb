#include "kernels/quant/tfp_quant.hpp"

#include <algorithm>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

// Pieces of the parallel loops are runs of whole groups of 8 codes, which fill exactly k bytes.
constexpr uint64_t kGroupGrain = 1 << 13;

void check_format(const TfpFormat& f) {
  CCSIM_CHECK(f.valid(), "TFP: {} bits not in [{}, {}] for this base", f.bits, f.min_bits(), f.base_bits());
}

template <class Fn>
void for_code_groups(uint64_t count, Fn&& fn) {
  parallel_for((count + 7) / 8, kGroupGrain, [&](uint64_t g0, uint64_t g1) { fn(g0 * 8, std::min(count, g1 * 8)); });
}

template <class Op>
void decode_with(const uint8_t* in, uint64_t count, const TfpFormat& f, Op&& op) {
  check_format(f);
  for_code_groups(count, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) op(i, tfp_decode_element(bitpack_get_wide(in, i, f.bits), f));
  });
}

}  // namespace

void tfp_encode(const float* x, uint64_t count, const TfpFormat& f, bool random_rounding, const RngKey& key,
                uint64_t index_base, uint8_t* out) {
  check_format(f);
  const uint32_t k = f.bits;
  for_code_groups(count, [&](uint64_t begin, uint64_t end) {
    float uniforms[kUniformTile];      // uniform_at(key, index_base + i), a tile at a time
    uint8_t* p = out + begin / 8 * k;  // begin is a multiple of 8: the piece starts on a byte
    uint64_t acc = 0;                  // pending stream bits, at most 7 + 32
    uint32_t pending = 0;
    uint64_t in_tile = kUniformTile;  // the next entry's place in `uniforms`
    for (uint64_t i = begin; i < end; ++i) {
      float u = 0.0f;
      if (random_rounding) {
        if (in_tile == kUniformTile) {
          uniform_fill(key, index_base + i, std::min(kUniformTile, end - i), uniforms);
          in_tile = 0;
        }
        u = uniforms[in_tile++];
      }
      acc |= static_cast<uint64_t>(tfp_encode_element(x[i], f, random_rounding, u)) << pending;
      pending += k;
      for (; pending >= 8; pending -= 8, acc >>= 8) *p++ = static_cast<uint8_t>(acc);
    }
    if (pending > 0) *p = static_cast<uint8_t>(acc);  // the last byte of the chunk, zero padded
  });
}

void tfp_decode(const uint8_t* in, uint64_t count, const TfpFormat& f, float* out) {
  decode_with(in, count, f, [out](uint64_t i, float v) { out[i] = v; });
}

void tfp_decode_accumulate(const uint8_t* in, uint64_t count, const TfpFormat& f, float* acc) {
  decode_with(in, count, f, [acc](uint64_t i, float v) { acc[i] += v; });
}

}  // namespace ccsim::kern
