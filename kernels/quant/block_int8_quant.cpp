#include "kernels/quant/block_int8_quant.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

// Parallel pieces are whole blocks, so every block is handled by exactly one thread.
template <class Fn>
void for_blocks(uint64_t count, uint32_t block, Fn&& fn) {
  const uint64_t blocks = (count + block - 1) / block;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t b = b0; b < b1; ++b) {
      const uint64_t begin = b * block, end = std::min(count, begin + block);
      fn(b, begin, end);
    }
  });
}

// The CPU rows of the kernels: int8_quantize() and int8_dequantize() on a run of one block's
// entries, without calls or per-entry branches so the compiler vectorizes them (CCSIM_VECTOR_ROW).
// The clamp's comparisons send NaN to -127 as fminf(fmaxf(q, -127), 127) does; tests compare
// every row with the scalar functions the CUDA kernels share, bit for bit.
CCSIM_VECTOR_ROW void quantize_row_stochastic(const float* x, const float* u, uint64_t n, float maxabs, int8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    const float v = (x[i] / maxabs) * 127.0f;
    const float lo = std::floor(v);
    float r = lo + ((u[i] < v - lo) ? 1.0f : 0.0f);  // lo + 0 differs from lo only in a zero's sign
    r = r > -127.0f ? r : -127.0f;
    r = r < 127.0f ? r : 127.0f;
    q[i] = static_cast<int8_t>(r);
  }
}

CCSIM_VECTOR_ROW void quantize_row_nearest(const float* x, uint64_t n, float maxabs, int8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    float r = std::rint((x[i] / maxabs) * 127.0f);
    r = r > -127.0f ? r : -127.0f;
    r = r < 127.0f ? r : 127.0f;
    q[i] = static_cast<int8_t>(r);
  }
}

CCSIM_VECTOR_ROW void dequantize_row(const int8_t* q, uint64_t n, float maxabs, bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] += (static_cast<float>(q[i]) / 127.0f) * maxabs;
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = (static_cast<float>(q[i]) / 127.0f) * maxabs;
  }
}

float load_scale(const uint8_t* in, uint64_t b) {
  float s;
  std::memcpy(&s, in + 4 * b, sizeof s);
  return s;
}

// One block's encode of x[begin, end) into `out` (the layout of block_int8_encode).
void encode_block(const float* x, uint64_t b, uint64_t begin, uint64_t end, Rounding rounding, const RngKey& key,
                  uint64_t index_base, uint8_t* out, int8_t* codes) {
  float maxabs = 0.0f;
  for (uint64_t i = begin; i < end; ++i) maxabs = std::max(maxabs, std::fabs(x[i]));
  std::memcpy(out + 4 * b, &maxabs, sizeof maxabs);
  if (!(maxabs > 0.0f)) {  // int8_quantize's zero block
    std::memset(codes + begin, 0, end - begin);
    return;
  }
  if (rounding == Rounding::kNearest) return quantize_row_nearest(x + begin, end - begin, maxabs, codes + begin);
  float u[kUniformTile];
  for (uint64_t t = begin; t < end; t += kUniformTile) {
    const uint64_t n = std::min(kUniformTile, end - t);
    uniform_fill(key, index_base + t, n, u);
    quantize_row_stochastic(x + t, u, n, maxabs, codes + t);
  }
}

}  // namespace

void block_int8_encode(const float* x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                       uint64_t index_base, uint8_t* out) {
  const uint64_t blocks = (count + block - 1) / block;
  auto* codes = reinterpret_cast<int8_t*>(out + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    encode_block(x, b, begin, end, rounding, key, index_base, out, codes);
  });
}

void block_int8_decode_accumulate_encode(const uint8_t* in, uint64_t count, uint32_t block, float* acc,
                                         Rounding rounding, const RngKey& key, uint64_t index_base, uint8_t* out) {
  const uint64_t blocks = (count + block - 1) / block;
  const auto* in_codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  auto* out_codes = reinterpret_cast<int8_t*>(out + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    dequantize_row(in_codes + begin, end - begin, load_scale(in, b), true, acc + begin);
    encode_block(acc, b, begin, end, rounding, key, index_base, out, out_codes);
  });
}

void block_int8_decode(const uint8_t* in, uint64_t count, uint32_t block, float* out) {
  const uint64_t blocks = (count + block - 1) / block;
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    dequantize_row(codes + begin, end - begin, load_scale(in, b), false, out + begin);
  });
}

void block_int8_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t block, float* acc) {
  const uint64_t blocks = (count + block - 1) / block;
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    dequantize_row(codes + begin, end - begin, load_scale(in, b), true, acc + begin);
  });
}

}  // namespace ccsim::kern
