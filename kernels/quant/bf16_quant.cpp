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
  for (uint64_t i = 0; i < count; ++i) out[i] = float_to_bf16_saturating(x[i]);
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
