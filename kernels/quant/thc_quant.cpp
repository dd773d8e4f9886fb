#include "kernels/quant/thc_quant.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

// Eight fields of `bits` bits fill exactly `bits` whole bytes: a parallel piece is a run of such
// groups, so no byte is shared between threads.
constexpr uint64_t kGroupGrain = 1 << 13;

void check_bits(uint32_t bits) {
  CCSIM_CHECK(bits == 8 || bits == 12 || bits == 16, "THC: aggregation fields of {} bits (8, 12 or 16)", bits);
}

// ---- Rows: one tile's fields with no call and no branch per entry (the layout of the file
// comment of thc_quant.hpp; tests compare them with bitpack_get_wide / bitpack_put).

// Whether every x[i] is an integer in [0, top] (a NaN is not).
CCSIM_VECTOR_ROW bool fields_valid(const float* x, uint64_t n, float top) {
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float v = x[i];
    bad |= (v >= 0.0f && v <= top && v == std::floor(v)) ? 0u : 1u;
  }
  return bad == 0;
}

CCSIM_VECTOR_ROW void pack8_row(const float* x, uint64_t n, uint8_t* out) {
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(static_cast<uint32_t>(x[i]));
}

CCSIM_VECTOR_ROW void pack16_row(const float* x, uint64_t n, uint8_t* out) {
  for (uint64_t i = 0; i < n; ++i) {
    const auto f = static_cast<uint32_t>(x[i]);
    out[2 * i] = static_cast<uint8_t>(f);
    out[2 * i + 1] = static_cast<uint8_t>(f >> 8);
  }
}

// Two 12-bit fields per three bytes; an odd last field fills one byte and a half (its high nibble 0).
void pack12_row(const float* x, uint64_t n, uint8_t* out) {
  uint64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const auto f0 = static_cast<uint32_t>(x[i]), f1 = static_cast<uint32_t>(x[i + 1]);
    uint8_t* o = out + 3 * (i / 2);
    o[0] = static_cast<uint8_t>(f0);
    o[1] = static_cast<uint8_t>((f0 >> 8) | (f1 << 4));
    o[2] = static_cast<uint8_t>(f1 >> 4);
  }
  if (i < n) {
    const auto f0 = static_cast<uint32_t>(x[i]);
    out[3 * (i / 2)] = static_cast<uint8_t>(f0);
    out[3 * (i / 2) + 1] = static_cast<uint8_t>(f0 >> 8);
  }
}

// out[i] = field i, or acc[i] += field i (n fields from the tile's first byte).
CCSIM_VECTOR_ROW void unpack8_row(const uint8_t* in, uint64_t n, bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] += static_cast<float>(in[i]);
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
  }
}

CCSIM_VECTOR_ROW void unpack16_row(const uint8_t* in, uint64_t n, bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] += static_cast<float>(in[2 * i] | (uint32_t{in[2 * i + 1]} << 8));
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[2 * i] | (uint32_t{in[2 * i + 1]} << 8));
  }
}

void unpack12_row(const uint8_t* in, uint64_t n, bool accumulate, float* out) {
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* b = in + 3 * (i / 2);
    const uint32_t f =
        (i & 1) == 0 ? b[0] | ((uint32_t{b[1]} & 0xFu) << 8) : (uint32_t{b[1]} >> 4) | (uint32_t{b[2]} << 4);
    out[i] = accumulate ? out[i] + static_cast<float>(f) : static_cast<float>(f);
  }
}

// Fields [first, first + n) (first a multiple of 8, so of whole bytes) packed from x, after the
// check that they fit; the first bad entry is reported as the scalar check did.
void pack_tile(const float* x, uint64_t first, uint64_t n, uint32_t bits, uint8_t* out) {
  const float top = static_cast<float>((1u << bits) - 1u);
  if (!fields_valid(x + first, n, top)) {
    for (uint64_t j = first; j < first + n; ++j) {
      const float v = x[j];
      CCSIM_CHECK(v >= 0.0f && v <= top && v == floorf(v),
                  "THC: element {} = {} is not an integer in [0, 2^{} - 1]: the aggregation field would overflow", j,
                  v, bits);
    }
  }
  uint8_t* o = out + first * bits / 8;
  if (bits == 8) return pack8_row(x + first, n, o);
  if (bits == 16) return pack16_row(x + first, n, o);
  pack12_row(x + first, n, o);
}

void unpack_tile(const uint8_t* in, uint64_t first, uint64_t n, uint32_t bits, bool accumulate, float* out) {
  const uint8_t* b = in + first * bits / 8;
  if (bits == 8) return unpack8_row(b, n, accumulate, out + first);
  if (bits == 16) return unpack16_row(b, n, accumulate, out + first);
  unpack12_row(b, n, accumulate, out + first);
}

// fn(first, n) over tiles of whole 8-field groups, in parallel pieces of whole groups.
template <class Fn>
void for_tiles(uint64_t count, Fn&& fn) {
  constexpr uint64_t kTile = kUniformTile;  // a tile of draws fits one uniform_fill() buffer
  parallel_for((count + 7) / 8, kGroupGrain, [&](uint64_t g0, uint64_t g1) {
    const uint64_t end = std::min(count, g1 * 8);
    for (uint64_t t = g0 * 8; t < end; t += kTile) fn(t, std::min(kTile, end - t));
  });
}

// thc_lattice_code() of every entry with its drawn uniform, as a float, in place: the clamped
// lattice point is an integer-valued float (below 2^24), which is what the code converts back to
// (-0 included: it clamps to +0).
CCSIM_VECTOR_ROW void lattice_code_row(float* v, const float* u, uint64_t n, float m, float inv_step, float top) {
  for (uint64_t i = 0; i < n; ++i) {
    const float t = (v[i] + m) * inv_step;
    const float lo = std::floor(t);
    const float c = (u[i] < t - lo) ? lo + 1.0f : lo;
    v[i] = c <= 0.0f ? 0.0f : (c > top ? top : c);
  }
}

}  // namespace

void thc_lattice_codes(float* v, uint64_t count, float m, float inv_step, uint32_t levels, const RngKey& key,
                       uint64_t index_base) {
  for_tiles(count, [&](uint64_t first, uint64_t n) {
    float u[kUniformTile];
    uniform_fill(key, index_base + first, n, u);
    lattice_code_row(v + first, u, n, m, inv_step, static_cast<float>(levels));
  });
}

void thc_pack(const float* x, uint64_t count, uint32_t bits, uint8_t* out) {
  check_bits(bits);
  for_tiles(count, [=](uint64_t first, uint64_t n) { pack_tile(x, first, n, bits, out); });
}

void thc_unpack(const uint8_t* in, uint64_t count, uint32_t bits, float* out) {
  check_bits(bits);
  for_tiles(count, [=](uint64_t first, uint64_t n) { unpack_tile(in, first, n, bits, false, out); });
}

void thc_unpack_accumulate(const uint8_t* in, uint64_t count, uint32_t bits, float* acc) {
  check_bits(bits);
  for_tiles(count, [=](uint64_t first, uint64_t n) { unpack_tile(in, first, n, bits, true, acc); });
}

void thc_unpack_accumulate_pack(const uint8_t* in, uint64_t count, uint32_t in_bits, float* acc, uint32_t out_bits,
                                uint8_t* out) {
  check_bits(in_bits);
  check_bits(out_bits);
  for_tiles(count, [=](uint64_t first, uint64_t n) {
    unpack_tile(in, first, n, in_bits, true, acc);
    pack_tile(acc, first, n, out_bits, out);
  });
}

}  // namespace ccsim::kern
