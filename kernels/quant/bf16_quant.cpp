#include "kernels/quant/bf16_quant.hpp"

#include "kernels/parallel.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {
constexpr uint64_t kGrain = 1 << 16;
}

void bf16_encode(const float* x, uint64_t count, uint16_t* out) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] = float_to_bf16_rne(x[i]);
  });
}

CCSIM_VECTOR_ROW void bf16_encode_saturating_row(const float* x, uint64_t count, uint16_t* out) {
  for (uint64_t i = 0; i < count; ++i) {  // float_to_bf16_saturating() with selects for the vectorizer
    const uint32_t u = float_to_bits(x[i]);
    const uint32_t a = u & 0x7FFFFFFFu;
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const uint32_t finite = ((rounded & 0x7FFFu) == 0x7F80u ? (rounded & 0x8000u) | 0x7F7Fu : rounded);
    out[i] = static_cast<uint16_t>(a > 0x7F800000u ? (u >> 16) | 0x0040u : a == 0x7F800000u ? u >> 16 : finite);
  }
}

void bf16_decode(const uint16_t* in, uint64_t count, float* out) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) out[i] = bf16_to_float(in[i]);
  });
}

void bf16_decode_accumulate(const uint16_t* in, uint64_t count, float* acc) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) acc[i] += bf16_to_float(in[i]);
  });
}

}  // namespace ccsim::kern
