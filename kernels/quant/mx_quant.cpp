#include "kernels/quant/mx_quant.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/quant/minifloat_lanes.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

// Entries per tile of the row loops (codes, scales and uniforms of a tile stay in L1).
constexpr uint64_t kTile = 512;

void check_format(const MxFormat& f) {
  CCSIM_CHECK(f.block >= 1 && (uint64_t{f.block} * f.element_bits()) % 8 == 0,
              "MX: a block of {} {}-bit elements is not whole bytes", f.block, f.element_bits());
}

uint32_t load_scale(const uint8_t* in, uint64_t b, const MxFormat& f) {
  if (f.scale == MxScaleKind::kE8M0) return in[b];
  return static_cast<uint32_t>(in[2 * b]) | static_cast<uint32_t>(in[2 * b + 1]) << 8;
}

void store_scale(uint8_t* out, uint64_t b, uint32_t code, const MxFormat& f) {
  if (f.scale == MxScaleKind::kE8M0) {
    out[b] = static_cast<uint8_t>(code);
  } else {
    out[2 * b] = static_cast<uint8_t>(code);
    out[2 * b + 1] = static_cast<uint8_t>(code >> 8);
  }
}

// ---- element rows: mx_quantize() / mx_dequantize() over a tile, one scale per entry ----------

// mx_dequantize() with the element decode as its branch-free lane. A NaN element keeps its own
// (quiet) NaN, as the scalar product element * scale gives with the element first, whatever order
// the vectorized product takes its operands in.
template <MinifloatFormat F>
[[gnu::always_inline]] inline float mx_value(uint32_t code, float scale) {
  const float element = minifloat_decode_lane<F>(code);
  const float v = element != element ? element : element * scale;
  return (fabsf(v) == INFINITY && fabsf(scale) < INFINITY) ? copysignf(FLT_MAX, v) : v;
}

template <MinifloatFormat F>
[[gnu::always_inline]] inline void decode_body(const uint8_t* q, const float* s, uint64_t n, bool accumulate,
                                               float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] = accumulate_lane(out[i], mx_value<F>(q[i], s[i]));
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = mx_value<F>(q[i], s[i]);
  }
}

// q[i] = mx_quantize(x[i], s[i], u[i]); returns how many entries fail t <= bound, t being
// |x[i]| / s[i] when `scaled` (written as copysign(|x[i] / s[i]|, s[i]): division rounds
// symmetrically in sign, so the same value) and |x[i]| otherwise.
template <MinifloatFormat F, bool kStochastic>
[[gnu::always_inline]] inline uint64_t encode_body(const float* x, const float* s, const float* u, uint64_t n,
                                                   float bound, bool scaled, uint8_t* q) {
  uint32_t outside = 0;
  const uint32_t pick_scaled = scaled ? ~0u : 0u;  // a mask, not a branch, for the vectorizer
  for (uint64_t i = 0; i < n; ++i) {
    const float v = x[i] / s[i];
    const uint32_t t_scaled = (float_to_bits(v) & 0x7FFFFFFFu) | (float_to_bits(s[i]) & 0x80000000u);
    const uint32_t t_plain = float_to_bits(x[i]) & 0x7FFFFFFFu;
    const float t = bits_to_float((t_scaled & pick_scaled) | (t_plain & ~pick_scaled));
    outside += t <= bound ? 0u : 1u;
    q[i] = static_cast<uint8_t>(minifloat_encode_lane<F, kStochastic>(v, kStochastic ? u[i] : 0.0f));
  }
  return outside;
}

// The rows over whole blocks of kRowBlock entries, the common MX block, with block b's scale
// sb[b] broadcast once a block instead of read per entry: the same operations, entry by entry, as
// decode_body() and encode_body() with s[i] = sb[i / kRowBlock].
constexpr uint32_t kRowBlock = 32;

// Blocks go in pairs: the vectorizer sizes its vectors by the narrowest type, the code bytes, so
// a loop of 32 codes gets 256-bit vectors and one of 64 (two blocks, the scale picked by the
// half, which it resolves at compile time) 512-bit ones. decode_span() is n entries (64, or 32 for
// a last single block) with scales s0 then s1.
template <MinifloatFormat F>
[[gnu::always_inline]] inline void decode_span(const uint8_t* q, float s0, float s1, uint32_t n, bool accumulate,
                                               float* out) {
  if (accumulate) {
    for (uint32_t j = 0; j < n; ++j) out[j] = accumulate_lane(out[j], mx_value<F>(q[j], j < kRowBlock ? s0 : s1));
  } else {
    for (uint32_t j = 0; j < n; ++j) out[j] = mx_value<F>(q[j], j < kRowBlock ? s0 : s1);
  }
}

template <MinifloatFormat F>
[[gnu::always_inline]] inline void decode_blocks_body(const uint8_t* q, const float* sb, uint64_t blocks,
                                                      bool accumulate, float* out) {
  uint64_t b = 0;
  for (; b + 2 <= blocks; b += 2)
    decode_span<F>(q + b * kRowBlock, sb[b], sb[b + 1], 2 * kRowBlock, accumulate, out + b * kRowBlock);
  if (b < blocks) decode_span<F>(q + b * kRowBlock, sb[b], sb[b], kRowBlock, accumulate, out + b * kRowBlock);
}

// encode_body() over pairs of blocks (a 64-entry loop, as decode_span(), for 512-bit vectors),
// then a last single block.
template <MinifloatFormat F, bool kStochastic>
[[gnu::always_inline]] inline uint32_t encode_span(const float* x, float s0, float s1, const float* u, float bound,
                                                   uint32_t pick_scaled, uint8_t* q, uint32_t n) {
  uint32_t outside = 0;
  for (uint32_t j = 0; j < n; ++j) {
    const float sc = j < kRowBlock ? s0 : s1;
    const float v = x[j] / sc;
    const uint32_t t_scaled = (float_to_bits(v) & 0x7FFFFFFFu) | (float_to_bits(sc) & 0x80000000u);
    const uint32_t t_plain = float_to_bits(x[j]) & 0x7FFFFFFFu;
    const float t = bits_to_float((t_scaled & pick_scaled) | (t_plain & ~pick_scaled));
    outside += t <= bound ? 0u : 1u;
    q[j] = static_cast<uint8_t>(minifloat_encode_lane<F, kStochastic>(v, kStochastic ? u[j] : 0.0f));
  }
  return outside;
}

template <MinifloatFormat F, bool kStochastic>
[[gnu::always_inline]] inline uint64_t encode_blocks_body(const float* x, const float* sb, const float* u,
                                                          uint64_t blocks, float bound, bool scaled, uint8_t* q) {
  const uint32_t pick_scaled = scaled ? ~0u : 0u;
  uint64_t outside = 0, b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const uint64_t o = b * kRowBlock;
    outside += encode_span<F, kStochastic>(x + o, sb[b], sb[b + 1], u + o, bound, pick_scaled, q + o, 2 * kRowBlock);
  }
  if (b < blocks) {
    const uint64_t o = b * kRowBlock;
    outside += encode_span<F, kStochastic>(x + o, sb[b], sb[b], u + o, bound, pick_scaled, q + o, kRowBlock);
  }
  return outside;
}

using EncodeRow = uint64_t (*)(const float*, const float*, const float*, uint64_t, float, bool, uint8_t*);
using DecodeRow = void (*)(const uint8_t*, const float*, uint64_t, bool, float*);
// The block rows have the same signatures, their length in blocks and their scales one a block.

// One format's rows, each built for AVX-512, AVX2 and the baseline (CCSIM_VECTOR_ROW).
#define CCSIM_MX_ELEMENT_ROWS(NAME, FORMAT)                                                                     \
  CCSIM_VECTOR_ROW uint64_t encode_nearest_##NAME(const float* x, const float* s, const float* u, uint64_t n,   \
                                                  float bound, bool scaled, uint8_t* q) {                      \
    return encode_body<FORMAT, false>(x, s, u, n, bound, scaled, q);                                            \
  }                                                                                                             \
  CCSIM_VECTOR_ROW uint64_t encode_stochastic_##NAME(const float* x, const float* s, const float* u, uint64_t n, \
                                                     float bound, bool scaled, uint8_t* q) {                   \
    return encode_body<FORMAT, true>(x, s, u, n, bound, scaled, q);                                             \
  }                                                                                                             \
  CCSIM_VECTOR_ROW void decode_##NAME(const uint8_t* q, const float* s, uint64_t n, bool accumulate, float* out) { \
    decode_body<FORMAT>(q, s, n, accumulate, out);                                                              \
  }                                                                                                             \
  CCSIM_VECTOR_ROW uint64_t encode_nearest_blocks_##NAME(const float* x, const float* sb, const float* u,       \
                                                         uint64_t blocks, float bound, bool scaled, uint8_t* q) { \
    return encode_blocks_body<FORMAT, false>(x, sb, u, blocks, bound, scaled, q);                               \
  }                                                                                                             \
  CCSIM_VECTOR_ROW uint64_t encode_stochastic_blocks_##NAME(const float* x, const float* sb, const float* u,    \
                                                            uint64_t blocks, float bound, bool scaled, uint8_t* q) { \
    return encode_blocks_body<FORMAT, true>(x, sb, u, blocks, bound, scaled, q);                                \
  }                                                                                                             \
  CCSIM_VECTOR_ROW void decode_blocks_##NAME(const uint8_t* q, const float* sb, uint64_t blocks, bool accumulate, \
                                             float* out) {                                                      \
    decode_blocks_body<FORMAT>(q, sb, blocks, accumulate, out);                                                 \
  }

CCSIM_MX_ELEMENT_ROWS(e4m3, kFp8E4M3)
CCSIM_MX_ELEMENT_ROWS(e5m2, kFp8E5M2)
CCSIM_MX_ELEMENT_ROWS(e3m2, kFp6E3M2)
CCSIM_MX_ELEMENT_ROWS(e2m3, kFp6E2M3)
CCSIM_MX_ELEMENT_ROWS(e2m1, kFp4E2M1)
#undef CCSIM_MX_ELEMENT_ROWS

struct ElementRows {
  EncodeRow encode = nullptr;  // null: no row for this format (FP16 elements), the scalar path
  DecodeRow decode = nullptr;
  DecodeRow decode_blocks = nullptr;  // the rows over whole blocks of kRowBlock entries
  EncodeRow encode_blocks = nullptr;
};

ElementRows rows_for(const MxFormat& f) {
  const bool st = f.rounding == Rounding::kStochastic;
#define CCSIM_MX_ROWS_OF(NAME)                                                                          \
  {st ? encode_stochastic_##NAME : encode_nearest_##NAME, decode_##NAME, decode_blocks_##NAME,           \
   st ? encode_stochastic_blocks_##NAME : encode_nearest_blocks_##NAME}
  switch (f.element) {
    case MinifloatKind::kFp8E4M3: return CCSIM_MX_ROWS_OF(e4m3);
    case MinifloatKind::kFp8E5M2: return CCSIM_MX_ROWS_OF(e5m2);
    case MinifloatKind::kFp6E3M2: return CCSIM_MX_ROWS_OF(e3m2);
    case MinifloatKind::kFp6E2M3: return CCSIM_MX_ROWS_OF(e2m3);
    case MinifloatKind::kFp4E2M1: return CCSIM_MX_ROWS_OF(e2m1);
    case MinifloatKind::kFp16: break;
  }
#undef CCSIM_MX_ROWS_OF
  return {};
}

// ---- the block loops ----------------------------------------------------------------------------

// Per block b of x[0, n) (blocks of `block` entries, the last may be short): the largest |x| as
// fp32 bits reinterpreted, NaN if the block holds one (any NaN: mx_scale_code() maps every NaN
// maximum to the same NaN scale, as it does mx_amax_step()'s first NaN). Magnitude bits order as
// the values do, so the integer maximum is the maximum.
CCSIM_VECTOR_ROW void block_amax_row(const float* x, uint64_t n, uint32_t block, float* amax) {
  for (uint64_t b = 0; b * block < n; ++b) {
    const uint64_t len = n - b * block < block ? n - b * block : block;
    uint32_t m = 0;
    for (uint64_t j = 0; j < len; ++j) {
      const uint32_t a = float_to_bits(x[b * block + j]) & 0x7FFFFFFFu;
      m = a > m ? a : m;
    }
    amax[b] = bits_to_float(m);
  }
}

// Parallel pieces are whole blocks (so every block's scale and code bytes belong to one thread);
// a piece runs in groups of whole blocks of at most kTile entries, or of one block when a block
// is longer: fn(first block, last block + 1, first entry, last entry + 1).
template <class Fn>
void for_groups(uint64_t count, uint32_t block, Fn&& fn) {
  const uint64_t blocks = (count + block - 1) / block;
  const uint64_t per_group = std::max<uint64_t>(1, kTile / block);
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t g = b0; g < b1; g += per_group) {
      const uint64_t g1 = std::min(b1, g + per_group);
      fn(g, g1, g * block, std::min(count, g1 * block));
    }
  });
}

// s[0, n) = the scale values of entries [t, t + n), from the scale codes at the head of `msg`.
void fill_scales(const uint8_t* msg, const MxFormat& f, uint64_t t, uint64_t n, float* s) {
  for (uint64_t i = 0; i < n;) {
    const uint64_t b = (t + i) / f.block;
    const uint64_t stop = std::min(n, (b + 1) * f.block - t);
    std::fill(s + i, s + stop, mx_scale_value(load_scale(msg, b, f), f));
    i = stop;
  }
}

// s[0, blocks) = the scale values of blocks [b0, b0 + blocks), from the scale codes at the head of
// `msg`.
void block_scales(const uint8_t* msg, const MxFormat& f, uint64_t b0, uint64_t blocks, float* s) {
  for (uint64_t b = 0; b < blocks; ++b) s[b] = mx_scale_value(load_scale(msg, b0 + b, f), f);
}

// out[begin, end) (+)= the decoded entries of message `in`, a tile at a time: whole blocks of
// kRowBlock entries through the block row, the rest (other block sizes, a short last block) with
// a scale per entry. Tiles start on a block (groups are whole blocks, kTile a multiple of 32).
void decode_group(const uint8_t* in, const uint8_t* codes, const MxFormat& f, const ElementRows& rows, uint64_t begin,
                  uint64_t end, bool accumulate, float* out) {
  float s[kTile];
  uint8_t buf[kTile];
  const uint32_t bits = f.element_bits();
  for (uint64_t t = begin; t < end; t += kTile) {
    const uint64_t n = std::min(kTile, end - t);
    const uint8_t* q = unpack_code_tile(codes + t * bits / 8, n, bits, buf);
    const uint64_t whole = f.block == kRowBlock ? n / kRowBlock : 0;
    if (whole > 0) {
      block_scales(in, f, t / kRowBlock, whole, s);
      rows.decode_blocks(q, s, whole, accumulate, out + t);
    }
    const uint64_t done = whole * kRowBlock;
    if (done == n) continue;
    fill_scales(in, f, t + done, n - done, s);
    rows.decode(q + done, s, n - done, accumulate, out + t + done);
  }
}

// How an encode picks its scales and counts: block b's scale code is `given[b]` (null: the code
// for the block's own maximum), and an entry counts when it fails t <= bound (see encode_body).
struct EncodeRule {
  const uint32_t* given = nullptr;
  float bound = 0;
  bool scaled = false;
};

// Encodes blocks [g0, g1) = entries [begin, end) of x into `out` (scales) and `codes`; returns the
// count of entries outside.
uint64_t encode_group(const float* x, const MxFormat& f, const ElementRows& rows, const EncodeRule& rule,
                      const RngKey& key, uint64_t index_base, uint64_t g0, uint64_t g1, uint64_t begin, uint64_t end,
                      uint8_t* out, uint8_t* codes) {
  float amax[kTile];
  if (rule.given == nullptr) block_amax_row(x + begin, end - begin, f.block, amax);
  for (uint64_t b = g0; b < g1; ++b)
    store_scale(out, b, rule.given != nullptr ? rule.given[b] : mx_scale_code(amax[b - g0], f), f);
  float s[kTile], u[kTile];
  uint8_t q[kTile];
  const uint32_t bits = f.element_bits();
  uint64_t outside = 0;
  for (uint64_t t = begin; t < end; t += kTile) {  // tiles start on a block, as in decode_group
    const uint64_t n = std::min(kTile, end - t);
    if (f.rounding == Rounding::kStochastic) uniform_fill(key, index_base + t, n, u);
    const uint64_t whole = f.block == kRowBlock ? n / kRowBlock : 0;
    if (whole > 0) {
      block_scales(out, f, t / kRowBlock, whole, s);
      outside += rows.encode_blocks(x + t, s, u, whole, rule.bound, rule.scaled, q);
    }
    const uint64_t done = whole * kRowBlock;
    if (done < n) {
      fill_scales(out, f, t + done, n - done, s);
      outside += rows.encode(x + t + done, s, u + done, n - done, rule.bound, rule.scaled, q + done);
    }
    pack_code_tile(q, n, bits, codes + t * bits / 8);
  }
  return outside;
}

// The per-entry encoder (element formats without rows: FP16): scale, count, mx_quantize(), put.
uint64_t encode_blocks_scalar(const float* x, uint64_t count, const MxFormat& f, const EncodeRule& rule,
                              const RngKey& key, uint64_t index_base, uint8_t* out) {
  const uint64_t blocks = (count + f.block - 1) / f.block;
  uint8_t* codes = out + f.scale_bytes() * blocks;
  const uint32_t bits = f.element_bits();
  std::atomic<uint64_t> outside{0};
  for_groups(count, f.block, [&](uint64_t g0, uint64_t g1, uint64_t, uint64_t) {
    uint64_t piece_outside = 0;
    for (uint64_t b = g0; b < g1; ++b) {
      const uint64_t begin = b * f.block, end = std::min(count, begin + f.block);
      float amax = 0.0f;
      for (uint64_t i = begin; i < end; ++i) amax = mx_amax_step(amax, x[i]);
      const uint32_t code = rule.given != nullptr ? rule.given[b] : mx_scale_code(amax, f);
      store_scale(out, b, code, f);
      const float scale = mx_scale_value(code, f);
      for (uint64_t i = begin; i < end; ++i)
        piece_outside += !((rule.scaled ? fabsf(x[i]) / scale : fabsf(x[i])) <= rule.bound) ? 1u : 0u;
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

// The per-entry decoder (element formats without rows: FP16).
void decode_blocks_scalar(const uint8_t* in, uint64_t count, const MxFormat& f, bool accumulate, float* out) {
  const uint64_t blocks = (count + f.block - 1) / f.block;
  const uint8_t* codes = in + f.scale_bytes() * blocks;
  for_groups(count, f.block, [&](uint64_t g0, uint64_t g1, uint64_t, uint64_t) {
    for (uint64_t b = g0; b < g1; ++b) {
      const float scale = mx_scale_value(load_scale(in, b, f), f);
      for (uint64_t i = b * f.block; i < std::min(count, (b + 1) * f.block); ++i) {
        const float v = mx_dequantize(bitpack_get(codes, i, f.element_bits()), scale, f);
        out[i] = accumulate ? out[i] + v : v;
      }
    }
  });
}

uint64_t encode_blocks(const float* x, uint64_t count, const MxFormat& f, const EncodeRule& rule, const RngKey& key,
                       uint64_t index_base, uint8_t* out) {
  check_format(f);
  const ElementRows rows = rows_for(f);
  if (rows.encode == nullptr) return encode_blocks_scalar(x, count, f, rule, key, index_base, out);
  uint8_t* codes = out + f.scale_bytes() * ((count + f.block - 1) / f.block);
  std::atomic<uint64_t> outside{0};  // an integer sum: the total is independent of the split
  for_groups(count, f.block, [&](uint64_t g0, uint64_t g1, uint64_t begin, uint64_t end) {
    outside.fetch_add(encode_group(x, f, rows, rule, key, index_base, g0, g1, begin, end, out, codes),
                      std::memory_order_relaxed);
  });
  return outside.load(std::memory_order_relaxed);
}

void decode_blocks(const uint8_t* in, uint64_t count, const MxFormat& f, bool accumulate, float* out) {
  check_format(f);
  const ElementRows rows = rows_for(f);
  if (rows.decode == nullptr) return decode_blocks_scalar(in, count, f, accumulate, out);
  const uint8_t* codes = in + f.scale_bytes() * ((count + f.block - 1) / f.block);
  for_groups(count, f.block, [&](uint64_t, uint64_t, uint64_t begin, uint64_t end) {
    decode_group(in, codes, f, rows, begin, end, accumulate, out);
  });
}

EncodeRule rule_for(const MxFormat& f, const uint32_t* scale_codes, float range) {
  if (scale_codes != nullptr) return {scale_codes, f.element_format().max_finite(), true};
  return {nullptr, range, false};
}

}  // namespace

uint64_t mx_encode(const float* x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                   float range, uint8_t* out) {
  return encode_blocks(x, count, f, rule_for(f, nullptr, range), key, index_base, out);
}

uint64_t mx_encode_with_scales(const float* x, uint64_t count, const MxFormat& f, const uint32_t* scale_codes,
                               const RngKey& key, uint64_t index_base, uint8_t* out) {
  return encode_blocks(x, count, f, rule_for(f, scale_codes, 0.0f), key, index_base, out);
}

void mx_decode(const uint8_t* in, uint64_t count, const MxFormat& f, float* out) {
  decode_blocks(in, count, f, false, out);
}

void mx_decode_accumulate(const uint8_t* in, uint64_t count, const MxFormat& f, float* acc) {
  decode_blocks(in, count, f, true, acc);
}

uint64_t mx_decode_accumulate_encode(const uint8_t* in, uint64_t count, const MxFormat& f, float* acc,
                                     const uint32_t* scale_codes, const RngKey& key, uint64_t index_base, float range,
                                     uint8_t* out) {
  check_format(f);
  const EncodeRule rule = rule_for(f, scale_codes, range);
  const ElementRows rows = rows_for(f);
  if (rows.encode == nullptr) {
    decode_blocks_scalar(in, count, f, true, acc);
    return encode_blocks_scalar(acc, count, f, rule, key, index_base, out);
  }
  const uint64_t scale_area = f.scale_bytes() * ((count + f.block - 1) / f.block);
  std::atomic<uint64_t> outside{0};
  for_groups(count, f.block, [&](uint64_t g0, uint64_t g1, uint64_t begin, uint64_t end) {
    decode_group(in, in + scale_area, f, rows, begin, end, true, acc);
    outside.fetch_add(encode_group(acc, f, rows, rule, key, index_base, g0, g1, begin, end, out, out + scale_area),
                      std::memory_order_relaxed);
  });
  return outside.load(std::memory_order_relaxed);
}

}  // namespace ccsim::kern
