#include "kernels/quant/block_int8_quant.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/quant/uniform_stream.hpp"

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

float load_scale(const uint8_t* in, uint64_t b) {
  float s;
  std::memcpy(&s, in + 4 * b, sizeof s);
  return s;
}

}  // namespace

void block_int8_encode(const float* x, uint64_t count, uint32_t block, Rounding rounding, const RngKey& key,
                       uint64_t index_base, uint8_t* out) {
  const uint64_t blocks = (count + block - 1) / block;
  auto* codes = reinterpret_cast<int8_t*>(out + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    float maxabs = 0.0f;
    for (uint64_t i = begin; i < end; ++i) maxabs = std::max(maxabs, std::fabs(x[i]));
    std::memcpy(out + 4 * b, &maxabs, sizeof maxabs);
    if (rounding == Rounding::kNearest) {
      for (uint64_t i = begin; i < end; ++i) codes[i] = int8_quantize(x[i], maxabs, rounding, 0.0f);
      return;
    }
    UniformStream uniform(key);
    for (uint64_t i = begin; i < end; ++i)
      codes[i] = int8_quantize(x[i], maxabs, rounding, uniform.at(index_base + i));
  });
}

void block_int8_decode(const uint8_t* in, uint64_t count, uint32_t block, float* out) {
  const uint64_t blocks = (count + block - 1) / block;
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    const float maxabs = load_scale(in, b);
    for (uint64_t i = begin; i < end; ++i) out[i] = int8_dequantize(codes[i], maxabs);
  });
}

void block_int8_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t block, float* acc) {
  const uint64_t blocks = (count + block - 1) / block;
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    const float maxabs = load_scale(in, b);
    for (uint64_t i = begin; i < end; ++i) acc[i] += int8_dequantize(codes[i], maxabs);
  });
}

}  // namespace ccsim::kern
