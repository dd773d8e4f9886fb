#include "kernels/quant/mx_quant.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <atomic>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

void check_format(const MxFormat& f) {
  CCSIM_CHECK(f.block >= 1 && (uint64_t{f.block} * f.element_bits()) % 8 == 0,
              "MX: a block of {} {}-bit elements is not whole bytes", f.block, f.element_bits());
}

// Parallel pieces are whole blocks, so every block (its scale and its code bytes) belongs to one
// thread.
template <class Fn>
void for_blocks(uint64_t count, uint32_t block, Fn&& fn) {
  const uint64_t blocks = (count + block - 1) / block;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t b = b0; b < b1; ++b) fn(b, b * block, std::min(count, (b + 1) * block));
  });
}

uint32_t load_scale(const uint8_t* in, uint64_t b, const MxFormat& f) {
  if (f.scale == MxScaleKind::kE8M0) return in[b];
  return static_cast<uint32_t>(in[2 * b]) | static_cast<uint32_t>(in[2 * b + 1]) << 8;
}

// Rows of a block's decode: the element codes' values from a table of minifloat_decode(code),
// times the scale and saturated as mx_dequantize() does, for the compiler to vectorize.
CCSIM_VECTOR_ROW void decode_row(const uint8_t* codes, uint64_t n, const float* table, float scale, bool accumulate,
                                float* out) {
  const bool finite_scale = fabsf(scale) < INFINITY;
  for (uint64_t i = 0; i < n; ++i) {
    const float v = table[codes[i]] * scale;
    const float w = (fabsf(v) == INFINITY && finite_scale) ? copysignf(FLT_MAX, v) : v;
    out[i] = accumulate ? out[i] + w : w;
  }
}

void decode_blocks(const uint8_t* in, uint64_t count, const MxFormat& f, bool accumulate, float* out) {
  check_format(f);
  const uint64_t blocks = (count + f.block - 1) / f.block;
  const uint8_t* codes = in + f.scale_bytes() * blocks;
  const uint32_t bits = f.element_bits();
  if (bits > 8) {  // FP16 elements: no table
    for_blocks(count, f.block, [&](uint64_t b, uint64_t begin, uint64_t end) {
      const float scale = mx_scale_value(load_scale(in, b, f), f);
      for (uint64_t i = begin; i < end; ++i) {
        const float v = mx_dequantize(bitpack_get(codes, i, bits), scale, f);
        out[i] = accumulate ? out[i] + v : v;
      }
    });
    return;
  }
  float table[256];
  for (uint32_t code = 0; code < (1u << bits); ++code) table[code] = minifloat_decode(code, f.element_format());
  for_blocks(count, f.block, [&](uint64_t b, uint64_t begin, uint64_t end) {
    const float scale = mx_scale_value(load_scale(in, b, f), f);
    uint8_t unpacked[512];
    for (uint64_t a = begin; a < end; a += 512) {
      const uint64_t n = std::min<uint64_t>(512, end - a);
      if (bits == 8) {
        std::memcpy(unpacked, codes + a, n);
      } else {
        for (uint64_t i = 0; i < n; ++i) unpacked[i] = static_cast<uint8_t>(bitpack_get(codes, a + i, bits));
      }
      decode_row(unpacked, n, table, scale, accumulate, out + a);
    }
  });
}

}  // namespace

namespace {

// The encoder of both entry points: `scale_of(b, amax)` picks block b's scale code, `outside(x,
// scale)` says whether an element counts.
template <class ScaleOf, class Outside>
uint64_t encode_blocks(const float* x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                       uint8_t* out, ScaleOf&& scale_of, Outside&& outside_of) {
  check_format(f);
  const uint64_t blocks = (count + f.block - 1) / f.block;
  uint8_t* codes = out + f.scale_bytes() * blocks;
  const uint32_t bits = f.element_bits();
  std::atomic<uint64_t> outside{0};
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / f.block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    uint64_t piece_outside = 0;  // an integer sum: the total is independent of the split
    for (uint64_t b = b0; b < b1; ++b) {
      const uint64_t begin = b * f.block, end = std::min(count, begin + f.block);
      float amax = 0.0f;
      for (uint64_t i = begin; i < end; ++i) amax = mx_amax_step(amax, x[i]);
      const uint32_t code = scale_of(b, amax);
      if (f.scale == MxScaleKind::kE8M0) {
        out[b] = static_cast<uint8_t>(code);
      } else {
        out[2 * b] = static_cast<uint8_t>(code);
        out[2 * b + 1] = static_cast<uint8_t>(code >> 8);
      }
      const float scale = mx_scale_value(code, f);
      for (uint64_t i = begin; i < end; ++i) piece_outside += outside_of(x[i], scale) ? 1u : 0u;
      // The block's code bytes start at begin * bits / 8; clear them so bitpack_put leaves zero
      // padding after a short last block.
      std::memset(codes + begin * bits / 8, 0, packed_bytes(end - begin, bits));
      if (f.rounding == Rounding::kNearest) {
        for (uint64_t i = begin; i < end; ++i) bitpack_put(codes, i, bits, mx_quantize(x[i], scale, f, 0.0f));
      } else {
        for_each_uniform(key, index_base, begin, end,
                         [&](uint64_t i, float u) { bitpack_put(codes, i, bits, mx_quantize(x[i], scale, f, u)); });
      }
    }
    outside.fetch_add(piece_outside, std::memory_order_relaxed);
  });
  return outside.load(std::memory_order_relaxed);
}

}  // namespace

uint64_t mx_encode(const float* x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                   float range, uint8_t* out) {
  return encode_blocks(
      x, count, f, key, index_base, out, [&](uint64_t, float amax) { return mx_scale_code(amax, f); },
      [range](float v, float) { return !(fabsf(v) <= range); });
}

uint64_t mx_encode_with_scales(const float* x, uint64_t count, const MxFormat& f, const uint32_t* scale_codes,
                               const RngKey& key, uint64_t index_base, uint8_t* out) {
  const float max = f.element_format().max_finite();
  return encode_blocks(
      x, count, f, key, index_base, out, [scale_codes](uint64_t b, float) { return scale_codes[b]; },
      [max](float v, float scale) { return !(fabsf(v) / scale <= max); });
}

void mx_decode(const uint8_t* in, uint64_t count, const MxFormat& f, float* out) {
  decode_blocks(in, count, f, false, out);
}

void mx_decode_accumulate(const uint8_t* in, uint64_t count, const MxFormat& f, float* acc) {
  decode_blocks(in, count, f, true, acc);
}

}  // namespace ccsim::kern
