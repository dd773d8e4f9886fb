#include "kernels/quant/group_quant.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/quant/minifloat_lanes.hpp"
#include "kernels/transform/hadamard.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

constexpr uint32_t kH = kGroupHadamardBlock;
// Entries a group is coded or decoded in at a time; a multiple of 8 (so a tile of codes is whole
// bytes at any width) and of kH (so a tile holds whole Hadamard blocks).
constexpr uint64_t kTile = kUniformTile;
static_assert(kTile % 8 == 0 && kTile % kH == 0);

void check_format(const GroupQuantFormat& f) {
  if (f.element == GroupElement::kInt) {
    CCSIM_CHECK(f.bits >= 2 && f.bits <= 8, "group quantizer: {} integer bits not in [2, 8]", f.bits);
  } else {
    CCSIM_CHECK(f.bits == 8, "group quantizer: FP8 elements have 8 bits, not {}", f.bits);
  }
  CCSIM_CHECK(f.group >= 1 && (uint64_t{f.group} * f.bits) % 8 == 0,
              "group quantizer: group {} of {}-bit codes is not whole bytes", f.group, f.bits);
  CCSIM_CHECK(!f.hadamard || f.group % kH == 0, "group quantizer: Hadamard needs a group multiple of {}, got {}", kH,
              f.group);
}

// Parallel pieces are whole groups, so every group (and its bytes) belongs to one thread.
template <class Fn>
void for_groups(uint64_t count, uint32_t group, Fn&& fn) {
  const uint64_t groups = (count + group - 1) / group;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / group);
  parallel_for(groups, grain, [&](uint64_t g0, uint64_t g1) {
    for (uint64_t g = g0; g < g1; ++g) fn(g, g * group, std::min(count, (g + 1) * group));
  });
}

// In place H_32 · v, exactly as hadamard_transform(v, 32, 32).
void hadamard32(float* v) {
  constexpr float kScale = hadamard_scale(kH);
  fwht_unnormalized(v, kH);
  for (uint32_t i = 0; i < kH; ++i) v[i] *= kScale;
}

// ---- Rows: loops over a tile's entries with no call and no branch per entry. Every row equals
// the scalar element function of group_quant.hpp on each entry, bit for bit (tests compare them).

// max over i of |v[i]| as `m = std::max(m, |v[i]|)` from m = 0 computes it: NaN entries are
// skipped (the comparison is false) and the maximum of the other, non-negative, values does not
// depend on the order. Non-negative floats order as their bit patterns, so the row takes the
// integer maximum of the patterns of |v[i]|, a NaN's counted as 0 (+0.0f).
CCSIM_VECTOR_ROW float max_abs_row(const float* v, uint64_t n) {
  uint32_t m = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &v[i], sizeof b);
    b &= 0x7FFFFFFFu;
    b &= 0u - static_cast<uint32_t>(b <= 0x7F800000u);  // a NaN counts as 0
    m = std::max(m, b);
  }
  float r;
  std::memcpy(&r, &m, sizeof r);
  return r;
}

// group_quantize() for kInt, nearest rounding, maxabs > 0: codes masked to `mask`. The clamp's
// comparisons send NaN to -levels as fminf(fmaxf(q, -levels), levels) does.
CCSIM_VECTOR_ROW void int_codes_nearest(const float* v, uint64_t n, float maxabs, float levels, uint32_t mask,
                                        uint8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    float r = std::rint((v[i] / maxabs) * levels);
    r = r > -levels ? r : -levels;
    r = r < levels ? r : levels;
    q[i] = static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(r)) & mask);
  }
}

// group_quantize() for kInt, stochastic rounding, maxabs > 0.
CCSIM_VECTOR_ROW void int_codes_stochastic(const float* v, const float* u, uint64_t n, float maxabs, float levels,
                                           uint32_t mask, uint8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    const float x = (v[i] / maxabs) * levels;
    const float lo = std::floor(x);
    float r = lo + ((u[i] < x - lo) ? 1.0f : 0.0f);  // lo + 0 differs from lo only in a zero's sign
    r = r > -levels ? r : -levels;
    r = r < levels ? r : levels;
    q[i] = static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(r)) & mask);
  }
}

// group_quantize() for FP8 format F, maxabs > 0: minifloat_encode((v / maxabs) * max_finite) as
// its branch-free lane (minifloat_lanes.hpp, the same codes).
template <MinifloatFormat F, bool kStochastic>
[[gnu::always_inline]] inline void fp8_codes_body(const float* v, const float* u, uint64_t n, float maxabs,
                                                  uint8_t* q) {
  constexpr float kMax = F.max_finite();
  for (uint64_t i = 0; i < n; ++i)
    q[i] = static_cast<uint8_t>(
        minifloat_encode_lane<F, kStochastic>((v[i] / maxabs) * kMax, kStochastic ? u[i] : 0.0f));
}

using Fp8CodesRow = void (*)(const float*, const float*, uint64_t, float, uint8_t*);

#define CCSIM_GROUP_FP8_ROWS(NAME, FORMAT)                                                                      \
  CCSIM_VECTOR_ROW void fp8_nearest_##NAME(const float* v, const float* u, uint64_t n, float maxabs, uint8_t* q) { \
    fp8_codes_body<FORMAT, false>(v, u, n, maxabs, q);                                                          \
  }                                                                                                             \
  CCSIM_VECTOR_ROW void fp8_stochastic_##NAME(const float* v, const float* u, uint64_t n, float maxabs,         \
                                              uint8_t* q) {                                                     \
    fp8_codes_body<FORMAT, true>(v, u, n, maxabs, q);                                                           \
  }

CCSIM_GROUP_FP8_ROWS(e4m3, kFp8E4M3)
CCSIM_GROUP_FP8_ROWS(e5m2, kFp8E5M2)
#undef CCSIM_GROUP_FP8_ROWS

Fp8CodesRow fp8_codes_row(const GroupQuantFormat& f) {
  const bool st = f.rounding == Rounding::kStochastic;
  if (f.element == GroupElement::kE5M2) return st ? fp8_stochastic_e5m2 : fp8_nearest_e5m2;
  return st ? fp8_stochastic_e4m3 : fp8_nearest_e4m3;
}

// x86 arithmetic on two NaNs returns the first operand's (quieted), so which NaN survives depends
// on the operand order the compiler emits. These helpers make the choice explicit: with a NaN `a`
// the other operand is replaced by a number (1 or 0), so the result is `a` quieted whatever the
// order; otherwise they are the plain product or sum (with a NaN `b`, `b` quieted).
inline float mul_first(float a, float b) { return a * (a != a ? 1.0f : b); }
inline float add_first(float a, float b) { return a + (a != a ? 0.0f : b); }

// group_dequantize() for kInt: (q / levels) * maxabs with q the sign-extended `bits`-bit code;
// written to out[i] or added to it.
CCSIM_VECTOR_ROW void int_values_row(const uint8_t* q, uint64_t n, uint32_t bits, float maxabs, float levels,
                                     bool accumulate, float* out) {
  const uint32_t shift = 8u - bits;
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) {
      const int32_t c = static_cast<int8_t>(static_cast<uint8_t>(q[i] << shift)) >> shift;
      out[i] = add_first((static_cast<float>(c) / levels) * maxabs, out[i]);
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      const int32_t c = static_cast<int8_t>(static_cast<uint8_t>(q[i] << shift)) >> shift;
      out[i] = (static_cast<float>(c) / levels) * maxabs;
    }
  }
}

// FP8's group_dequantize(), (minifloat_decode(c) / max_finite) * maxabs, with the element decode as
// its branch-free lane: a division and a product per entry in lanes, where a 256-entry table of
// the quotients would be a gather. Written to out[i] or added to it.
template <MinifloatFormat F>
[[gnu::always_inline]] inline void fp8_values_body(const uint8_t* q, uint64_t n, float maxabs, bool accumulate,
                                                   float* out) {
  constexpr float kMax = F.max_finite();
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i)
      out[i] = add_first(mul_first(minifloat_decode_lane<F>(q[i]) / kMax, maxabs), out[i]);
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = mul_first(minifloat_decode_lane<F>(q[i]) / kMax, maxabs);
  }
}

CCSIM_VECTOR_ROW void fp8_values_e4m3(const uint8_t* q, uint64_t n, float maxabs, bool accumulate, float* out) {
  fp8_values_body<kFp8E4M3>(q, n, maxabs, accumulate, out);
}

CCSIM_VECTOR_ROW void fp8_values_e5m2(const uint8_t* q, uint64_t n, float maxabs, bool accumulate, float* out) {
  fp8_values_body<kFp8E5M2>(q, n, maxabs, accumulate, out);
}

// acc[i] += v[i]. Entries outside the Hadamard blocks take v first (as every decode-accumulate);
// for the transformed blocks acc first, as the vectorized loop of the scalar code this replaces
// did (its peeled iterations took v first, so there the choice between two NaNs depended on
// acc's alignment and is no function of the data).
CCSIM_VECTOR_ROW void add_row(const float* v, uint64_t n, bool acc_first, float* acc) {
  if (acc_first) {
    for (uint64_t i = 0; i < n; ++i) acc[i] = add_first(acc[i], v[i]);
  } else {
    for (uint64_t i = 0; i < n; ++i) acc[i] = add_first(v[i], acc[i]);
  }
}

// ---- Groups ------------------------------------------------------------------------------------

// The codes of v[0, n) (one group, maximum `maxabs`) packed at `codes` (the group's first byte);
// entry i draws uniform_at(key, index + i) under stochastic rounding.
void code_group(const float* v, uint64_t n, float maxabs, const GroupQuantFormat& f, const RngKey& key, uint64_t index,
                uint8_t* codes) {
  if (!(maxabs > 0.0f)) {  // group_quantize's zero group
    std::memset(codes, 0, packed_bytes(n, f.bits));
    return;
  }
  const bool stochastic = f.rounding == Rounding::kStochastic;
  const float levels = static_cast<float>(f.int_levels());
  const uint32_t mask = (1u << f.bits) - 1u;
  float u[kTile];
  uint8_t q[kTile];
  for (uint64_t t = 0; t < n; t += kTile) {
    const uint64_t m = std::min(kTile, n - t);
    if (stochastic) uniform_fill(key, index + t, m, u);
    if (f.element != GroupElement::kInt) {
      fp8_codes_row(f)(v + t, u, m, maxabs, q);
    } else if (stochastic) {
      int_codes_stochastic(v + t, u, m, maxabs, levels, mask, q);
    } else {
      int_codes_nearest(v + t, m, maxabs, levels, mask, q);
    }
    pack_code_tile(q, m, f.bits, codes + t * f.bits / 8);
  }
}

// Encodes group g = x[begin, end) into `out` (scale) and `codes` (the chunk's code area).
void encode_group(const float* x, uint64_t g, uint64_t begin, uint64_t end, uint64_t transformed_end,
                  const GroupQuantFormat& f, const RngKey& key, uint64_t index_base, uint8_t* out, uint8_t* codes) {
  const uint64_t n = end - begin;
  const float* v = x + begin;
  float maxabs = max_abs_row(v, n);
  float stored = maxabs;
  thread_local std::vector<float> smoothed;
  if (f.hadamard && begin < transformed_end) {
    if (maxabs <= kGroupHadamardMaxInput) {
      smoothed.assign(x + begin, x + end);
      for (uint64_t i = begin; i + kH <= std::min(end, transformed_end); i += kH)
        hadamard32(smoothed.data() + (i - begin));
      v = smoothed.data();
      maxabs = max_abs_row(v, n);
      stored = maxabs;
    } else {
      stored = -maxabs;  // too large to transform without overflow: sent untransformed, flagged
    }
  }
  std::memcpy(out + 4 * g, &stored, sizeof stored);
  code_group(v, n, maxabs, f, key, index_base + begin, codes + begin * f.bits / 8);
}

// Decodes group g (entries [begin, end)) into dst[begin, end), written or added.
void decode_group(const uint8_t* in, const uint8_t* codes, uint64_t g, uint64_t begin, uint64_t end,
                  uint64_t transformed_end, const GroupQuantFormat& f, bool accumulate, float* dst) {
  float maxabs;
  std::memcpy(&maxabs, in + 4 * g, sizeof maxabs);
  // A negative scale flags a group sent untransformed (see group_quant.hpp).
  const bool transformed = f.hadamard && !std::signbit(maxabs) && begin + kH <= std::min(end, transformed_end);
  maxabs = std::fabs(maxabs);
  const float levels = static_cast<float>(f.int_levels());
  uint8_t buf[kTile];
  float vals[kTile];
  for (uint64_t t = begin; t < end; t += kTile) {
    const uint64_t m = std::min(kTile, end - t);
    const uint8_t* q = unpack_code_tile(codes + t * f.bits / 8, m, f.bits, buf);
    // With the transform, the values go through a buffer: H_32 on each complete block first.
    float* to = transformed ? vals : dst + t;
    const bool add = accumulate && !transformed;
    if (f.element == GroupElement::kInt) int_values_row(q, m, f.bits, maxabs, levels, add, to);
    else if (f.element == GroupElement::kE5M2) fp8_values_e5m2(q, m, maxabs, add, to);
    else fp8_values_e4m3(q, m, maxabs, add, to);
    if (!transformed) continue;
    uint64_t blocks_end = 0;  // vals[0, blocks_end) are transformed blocks
    for (; blocks_end + kH <= m && t + blocks_end + kH <= transformed_end; blocks_end += kH)
      hadamard32(vals + blocks_end);
    if (accumulate) {
      add_row(vals, blocks_end, true, dst + t);
      add_row(vals + blocks_end, m - blocks_end, false, dst + t + blocks_end);
    } else {
      std::memcpy(dst + t, vals, 4 * m);
    }
  }
}

void decode_with(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, bool accumulate, float* dst) {
  check_format(f);
  const uint64_t groups = (count + f.group - 1) / f.group;
  const uint8_t* codes = in + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? count / kH * kH : 0;  // complete 32-blocks only
  for_groups(count, f.group, [&](uint64_t g, uint64_t begin, uint64_t end) {
    decode_group(in, codes, g, begin, end, transformed_end, f, accumulate, dst);
  });
}

}  // namespace

void group_quant_encode(const float* x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                        uint64_t index_base, uint8_t* out) {
  check_format(f);
  const uint64_t groups = (count + f.group - 1) / f.group;
  uint8_t* codes = out + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? count / kH * kH : 0;
  for_groups(count, f.group, [&](uint64_t g, uint64_t begin, uint64_t end) {
    encode_group(x, g, begin, end, transformed_end, f, key, index_base, out, codes);
  });
}

void group_quant_decode(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* out) {
  decode_with(in, count, f, false, out);
}

void group_quant_decode_accumulate(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* acc) {
  decode_with(in, count, f, true, acc);
}

void group_quant_decode_accumulate_encode(const uint8_t* in, uint64_t count, const GroupQuantFormat& in_format,
                                          float* acc, const GroupQuantFormat& out_format, const RngKey& key,
                                          uint64_t index_base, uint8_t* out) {
  if (in_format.group != out_format.group) {  // groups do not line up: the two passes
    group_quant_decode_accumulate(in, count, in_format, acc);
    group_quant_encode(acc, count, out_format, key, index_base, out);
    return;
  }
  check_format(in_format);
  check_format(out_format);
  const uint64_t groups = (count + in_format.group - 1) / in_format.group;
  const uint64_t transformed_end = count / kH * kH;  // unused by a format without the transform
  for_groups(count, in_format.group, [&](uint64_t g, uint64_t begin, uint64_t end) {
    decode_group(in, in + 4 * groups, g, begin, end, in_format.hadamard ? transformed_end : 0, in_format, true, acc);
    encode_group(acc, g, begin, end, out_format.hadamard ? transformed_end : 0, out_format, key, index_base, out,
                 out + 4 * groups);
  });
}

}  // namespace ccsim::kern
