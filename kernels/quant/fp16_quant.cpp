#include "kernels/quant/fp16_quant.hpp"

#include "kernels/parallel.hpp"
#include "kernels/quant/minifloat_lanes.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

constexpr uint64_t kGrain = 1 << 16;

// The CPU rows: float_to_fp16_rne() and fp16_to_float() as the branch-free lanes of
// minifloat_lanes.hpp (same bits, tested against the element functions), no call or branch per
// entry, for the compiler to vectorize.
CCSIM_VECTOR_ROW void encode_row(const float* x, uint64_t n, uint16_t* out) {
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(minifloat_encode_lane<kFp16, false>(x[i], 0.0f));
}

CCSIM_VECTOR_ROW void decode_row(const uint16_t* in, uint64_t n, bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] = accumulate_lane(out[i], minifloat_decode_lane<kFp16>(in[i]));
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = minifloat_decode_lane<kFp16>(in[i]);
  }
}

// acc[i] += fp16_to_float(in[i]); out[i] = float_to_fp16_rne(acc[i]), in one pass.
CCSIM_VECTOR_ROW void decode_accumulate_encode_row(const uint16_t* in, uint64_t n, float* acc, uint16_t* out) {
  for (uint64_t i = 0; i < n; ++i) {
    const float s = accumulate_lane(acc[i], minifloat_decode_lane<kFp16>(in[i]));
    acc[i] = s;
    out[i] = static_cast<uint16_t>(minifloat_encode_lane<kFp16, false>(s, 0.0f));
  }
}

}  // namespace

void fp16_encode(const float* x, uint64_t count, uint16_t* out) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) { encode_row(x + b, e - b, out + b); });
}

void fp16_decode(const uint16_t* in, uint64_t count, float* out) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) { decode_row(in + b, e - b, false, out + b); });
}

void fp16_decode_accumulate(const uint16_t* in, uint64_t count, float* acc) {
  parallel_for(count, kGrain, [=](uint64_t b, uint64_t e) { decode_row(in + b, e - b, true, acc + b); });
}

void fp16_decode_accumulate_encode(const uint16_t* in, uint64_t count, float* acc, uint16_t* out) {
  parallel_for(count, kGrain,
               [=](uint64_t b, uint64_t e) { decode_accumulate_encode_row(in + b, e - b, acc + b, out + b); });
}

}  // namespace ccsim::kern
