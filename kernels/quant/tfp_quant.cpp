#include "kernels/quant/tfp_quant.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

static_assert(std::endian::native == std::endian::little, "the rows move little-endian stream bytes as words");

// Pieces of the parallel loops are runs of whole groups of 8 codes, which fill exactly k bytes.
constexpr uint64_t kGroupGrain = 1 << 13;

void check_format(const TfpFormat& f) {
  CCSIM_CHECK(f.valid(), "TFP: {} bits not in [{}, {}] for this base", f.bits, f.min_bits(), f.base_bits());
}

template <class Fn>
void for_code_groups(uint64_t count, Fn&& fn) {
  parallel_for((count + 7) / 8, kGroupGrain, [&](uint64_t g0, uint64_t g1) { fn(g0 * 8, std::min(count, g1 * 8)); });
}

// tfp_encode_element() of fp32-base entries under truncation, as a row: the top k bits of each
// pattern.
CCSIM_STREAM_ROW void fp32_truncate_row(const float* x, uint64_t n, uint32_t drop, uint32_t* codes) {
  for (uint64_t i = 0; i < n; ++i) codes[i] = float_to_bits(x[i]) >> drop;
}

// tfp_encode_element() of fp32-base entries as a row: the top k bits of each pattern, one unit up
// where random rounding says so (never for inf/NaN, never up to inf). u is read only with `rr`.
CCSIM_VECTOR_ROW void fp32_code_row(const float* x, const float* u, uint64_t n, uint32_t drop, bool rr,
                                    uint32_t* codes) {
  if (!rr) return fp32_truncate_row(x, n, drop, codes);
  const uint32_t low = (1u << drop) - 1u;  // drop < 32 (k >= 10)
  const float unit = exact_pow2(-static_cast<int>(drop));
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t ux = float_to_bits(x[i]), code = ux >> drop, up = code + 1u;
    const bool finite = (ux & 0x7FFFFFFFu) < 0x7F800000u, below_inf = ((up << drop) & 0x7FFFFFFFu) < 0x7F800000u;
    const bool round_up = finite & below_inf & (u[i] < static_cast<float>(ux & low) * unit);
    codes[i] = round_up ? up : code;
  }
}

// fp32-base values of codes as a row: the pattern code << drop; added to out with `accumulate`.
CCSIM_VECTOR_ROW void fp32_value_row(const uint32_t* codes, uint64_t n, uint32_t drop, bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] += bits_to_float(codes[i] << drop);
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = bits_to_float(codes[i] << drop);
  }
}

// Codes of k = 8·bytes bits as their low bytes, little-endian, and back.
CCSIM_STREAM_ROW void pack_bytes_row(const uint32_t* codes, uint64_t n, uint32_t bytes, uint8_t* p) {
  switch (bytes) {
    case 1:
      for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(codes[i]);
      break;
    case 2:
      for (uint64_t i = 0; i < n; ++i) {
        const auto v = static_cast<uint16_t>(codes[i]);
        std::memcpy(p + 2 * i, &v, 2);
      }
      break;
    case 4: std::memcpy(p, codes, 4 * n); break;
    default:
      for (uint64_t i = 0; i < n; ++i)
        for (uint32_t b = 0; b < bytes; ++b) p[i * bytes + b] = static_cast<uint8_t>(codes[i] >> (8 * b));
  }
}

CCSIM_STREAM_ROW void unpack_bytes_row(const uint8_t* p, uint64_t n, uint32_t bytes, uint32_t* codes) {
  switch (bytes) {
    case 1:
      for (uint64_t i = 0; i < n; ++i) codes[i] = p[i];
      break;
    case 2:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        codes[i] = v;
      }
      break;
    case 4: std::memcpy(codes, p, 4 * n); break;
    default:
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t c = 0;
        for (uint32_t b = 0; b < bytes; ++b) c |= static_cast<uint32_t>(p[i * bytes + b]) << (8 * b);
        codes[i] = c;
      }
  }
}

// 12-bit codes two in three bytes, and back.
CCSIM_VECTOR_ROW void pack12_row(const uint32_t* codes, uint64_t pairs, uint8_t* p) {
  for (uint64_t j = 0; j < pairs; ++j) {
    const uint32_t pair = codes[2 * j] | codes[2 * j + 1] << 12;
    p[3 * j] = static_cast<uint8_t>(pair);
    p[3 * j + 1] = static_cast<uint8_t>(pair >> 8);
    p[3 * j + 2] = static_cast<uint8_t>(pair >> 16);
  }
}

CCSIM_VECTOR_ROW void unpack12_row(const uint8_t* p, uint64_t pairs, uint32_t* codes) {
  for (uint64_t j = 0; j < pairs; ++j) {
    const uint32_t b0 = p[3 * j], b1 = p[3 * j + 1], b2 = p[3 * j + 2];
    codes[2 * j] = b0 | (b1 & 15u) << 8;
    codes[2 * j + 1] = b1 >> 4 | b2 << 4;
  }
}

// Packs n k-bit codes into the stream starting at byte `p` (the piece's first code starts a byte);
// the last byte is zero padded. Whole bytes and 12-bit pairs directly, other widths through a
// 64-bit accumulator.
void pack_codes(const uint32_t* codes, uint64_t n, uint32_t k, uint8_t* p) {
  if (k % 8 == 0) return pack_bytes_row(codes, n, k / 8, p);
  uint64_t i = 0;
  if (k == 12) {
    pack12_row(codes, n / 2, p);
    i = n / 2 * 2;
    p += n / 2 * 3;
  }
  uint64_t acc = 0;  // pending stream bits, at most 7 + 32
  uint32_t pending = 0;
  for (; i < n; ++i) {
    acc |= static_cast<uint64_t>(codes[i]) << pending;
    pending += k;
    for (; pending >= 8; pending -= 8, acc >>= 8) *p++ = static_cast<uint8_t>(acc);
  }
  if (pending > 0) *p = static_cast<uint8_t>(acc);
}

// Codes [begin, end) of a stream of `count` k-bit codes into codes[0, end - begin): whole bytes
// and 12-bit pairs by a row, other widths by an unaligned 64-bit load per code where eight bytes
// remain in the stream, bitpack_get_wide() at its end. `begin` is a multiple of 8.
void unpack_codes(const uint8_t* in, uint64_t count, uint32_t k, uint64_t begin, uint64_t end, uint32_t* codes) {
  if (k % 8 == 0) return unpack_bytes_row(in + begin * (k / 8), end - begin, k / 8, codes);
  const uint64_t bytes = tfp_bytes(count, k), mask = (uint64_t{1} << k) - 1u;
  uint64_t i = begin;
  if (k == 12) {
    unpack12_row(in + begin / 2 * 3, (end - begin) / 2, codes);
    i += (end - begin) / 2 * 2;
  }
  for (; i < end && (i * k >> 3) + 8 <= bytes; ++i) {
    uint64_t w;
    std::memcpy(&w, in + (i * k >> 3), 8);
    codes[i - begin] = static_cast<uint32_t>((w >> (i * k & 7u)) & mask);
  }
  for (; i < end; ++i) codes[i - begin] = bitpack_get_wide(in, i, k);
}

// Codes [t, t + n) of the stream (t a multiple of 8, n <= kUniformTile) decoded into out[t, t + n),
// or added to it with `accumulate`.
void decode_tile(const uint8_t* in, uint64_t count, const TfpFormat& f, uint64_t t, uint64_t n, bool accumulate,
                 float* out) {
  uint32_t codes[kUniformTile];
  unpack_codes(in, count, f.bits, t, t + n, codes);
  if (f.base == TfpBase::kFloat32) return fp32_value_row(codes, n, f.dropped_bits(), accumulate, out + t);
  for (uint64_t j = 0; j < n; ++j) {
    const float v = tfp_decode_element(codes[j], f);
    if (accumulate) {
      out[t + j] += v;
    } else {
      out[t + j] = v;
    }
  }
}

// Entries x[t, t + n) (t a multiple of 8, n <= kUniformTile) encoded into their bytes of `out`.
void encode_tile(const float* x, const TfpFormat& f, bool random_rounding, const RngKey& key, uint64_t index_base,
                 uint64_t t, uint64_t n, uint8_t* out) {
  float uniforms[kUniformTile];  // uniform_at(key, index_base + i)
  uint32_t codes[kUniformTile];
  if (random_rounding) uniform_fill(key, index_base + t, n, uniforms);
  if (f.base == TfpBase::kFloat32) {
    fp32_code_row(x + t, uniforms, n, f.dropped_bits(), random_rounding, codes);
  } else {
    for (uint64_t j = 0; j < n; ++j)
      codes[j] = tfp_encode_element(x[t + j], f, random_rounding, random_rounding ? uniforms[j] : 0.0f);
  }
  pack_codes(codes, n, f.bits, out + t / 8 * f.bits);
}

// fn(t, n) for the tiles of every parallel piece.
template <class Fn>
void for_tiles(uint64_t count, Fn&& fn) {
  for_code_groups(count, [&](uint64_t begin, uint64_t end) {
    for (uint64_t t = begin; t < end; t += kUniformTile) fn(t, std::min(kUniformTile, end - t));
  });
}

}  // namespace

void tfp_encode(const float* x, uint64_t count, const TfpFormat& f, bool random_rounding, const RngKey& key,
                uint64_t index_base, uint8_t* out) {
  check_format(f);
  for_tiles(count, [&](uint64_t t, uint64_t n) { encode_tile(x, f, random_rounding, key, index_base, t, n, out); });
}

void tfp_decode(const uint8_t* in, uint64_t count, const TfpFormat& f, float* out) {
  check_format(f);
  for_tiles(count, [&](uint64_t t, uint64_t n) { decode_tile(in, count, f, t, n, false, out); });
}

void tfp_decode_accumulate(const uint8_t* in, uint64_t count, const TfpFormat& f, float* acc) {
  check_format(f);
  for_tiles(count, [&](uint64_t t, uint64_t n) { decode_tile(in, count, f, t, n, true, acc); });
}

void tfp_decode_accumulate_encode(const uint8_t* in, uint64_t count, const TfpFormat& f, float* acc,
                                  bool random_rounding, const RngKey& key, uint64_t index_base, uint8_t* out) {
  check_format(f);
  for_tiles(count, [&](uint64_t t, uint64_t n) {
    decode_tile(in, count, f, t, n, true, acc);
    encode_tile(acc, f, random_rounding, key, index_base, t, n, out);
  });
}

}  // namespace ccsim::kern
