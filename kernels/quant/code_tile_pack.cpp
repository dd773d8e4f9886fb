#include "kernels/quant/code_tile_pack.hpp"

#include <cstring>

#include "kernels/pack/bitpack.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

// Whole units by rows the compiler vectorizes: a byte holds two 4-bit, four 2-bit or eight 1-bit
// codes, three bytes four 6-bit codes.
CCSIM_VECTOR_ROW void pack4_row(const uint8_t* q, uint64_t pairs, uint8_t* out) {
  for (uint64_t j = 0; j < pairs; ++j) out[j] = static_cast<uint8_t>(q[2 * j] | (q[2 * j + 1] << 4));
}

CCSIM_VECTOR_ROW void pack2_row(const uint8_t* q, uint64_t quads, uint8_t* out) {
  for (uint64_t j = 0; j < quads; ++j)
    out[j] = static_cast<uint8_t>(q[4 * j] | (q[4 * j + 1] << 2) | (q[4 * j + 2] << 4) | (q[4 * j + 3] << 6));
}

CCSIM_VECTOR_ROW void pack1_row(const uint8_t* q, uint64_t octets, uint8_t* out) {
  for (uint64_t j = 0; j < octets; ++j) {
    uint32_t b = 0;
    for (uint32_t k = 0; k < 8; ++k) b |= static_cast<uint32_t>(q[8 * j + k]) << k;
    out[j] = static_cast<uint8_t>(b);
  }
}

CCSIM_VECTOR_ROW void unpack4_row(const uint8_t* in, uint64_t pairs, uint8_t* q) {
  for (uint64_t j = 0; j < pairs; ++j) {
    q[2 * j] = static_cast<uint8_t>(in[j] & 15u);
    q[2 * j + 1] = static_cast<uint8_t>(in[j] >> 4);
  }
}

CCSIM_VECTOR_ROW void pack6_row(const uint8_t* q, uint64_t quads, uint8_t* out) {
  for (uint64_t j = 0; j < quads; ++j) {
    const uint32_t c0 = q[4 * j], c1 = q[4 * j + 1], c2 = q[4 * j + 2], c3 = q[4 * j + 3];
    out[3 * j] = static_cast<uint8_t>(c0 | (c1 << 6));
    out[3 * j + 1] = static_cast<uint8_t>((c1 >> 2) | (c2 << 4));
    out[3 * j + 2] = static_cast<uint8_t>((c2 >> 4) | (c3 << 2));
  }
}

CCSIM_VECTOR_ROW void unpack6_row(const uint8_t* in, uint64_t quads, uint8_t* q) {
  for (uint64_t j = 0; j < quads; ++j) {
    const uint32_t b0 = in[3 * j], b1 = in[3 * j + 1], b2 = in[3 * j + 2];
    q[4 * j] = static_cast<uint8_t>(b0 & 63u);
    q[4 * j + 1] = static_cast<uint8_t>((b0 >> 6) | ((b1 & 15u) << 2));
    q[4 * j + 2] = static_cast<uint8_t>((b1 >> 4) | ((b2 & 3u) << 4));
    q[4 * j + 3] = static_cast<uint8_t>(b2 >> 2);
  }
}

// Widths that divide a byte (1, 2): no code straddles a byte.
void unpack_within_bytes(const uint8_t* in, uint64_t n, uint32_t bits, uint8_t* q) {
  const uint32_t mask = (1u << bits) - 1u;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t bit = i * bits;
    q[i] = static_cast<uint8_t>((in[bit >> 3] >> (bit & 7u)) & mask);
  }
}

// Codes a row packs a whole unit of (0: none): two 4-bit codes a byte, four 6-bit codes in three
// bytes, four 2-bit or eight 1-bit codes a byte.
uint64_t per_unit(uint32_t bits) {
  switch (bits) {
    case 1: return 8;
    case 2: case 6: return 4;
    case 4: return 2;
    default: return 0;
  }
}

}  // namespace

void pack_code_tile(const uint8_t* q, uint64_t n, uint32_t bits, uint8_t* out) {
  if (n == 0) return;  // an empty tile's pointers may be null, which memcpy and memset must not get
  if (bits == 8) {
    std::memcpy(out, q, n);
    return;
  }
  const uint64_t unit = per_unit(bits), done = unit == 0 ? 0 : n / unit * unit;
  if (bits == 1) pack1_row(q, done / 8, out);
  if (bits == 2) pack2_row(q, done / 4, out);
  if (bits == 4) pack4_row(q, done / 2, out);
  if (bits == 6) pack6_row(q, done / 4, out);
  // Every code of another width, or the last partial unit (only at a message's end), one at a time.
  uint8_t* rest = out + done * bits / 8;
  std::memset(rest, 0, packed_bytes(n - done, bits));
  for (uint64_t i = done; i < n; ++i) bitpack_put(rest, i - done, bits, q[i]);
}

const uint8_t* unpack_code_tile(const uint8_t* in, uint64_t n, uint32_t bits, uint8_t* buf) {
  if (bits == 8) return in;
  if (bits == 1 || bits == 2) {
    unpack_within_bytes(in, n, bits, buf);
    return buf;
  }
  const uint64_t unit = per_unit(bits), done = unit == 0 ? 0 : n / unit * unit;
  if (bits == 4) unpack4_row(in, done / 2, buf);
  if (bits == 6) unpack6_row(in, done / 4, buf);
  const uint8_t* rest = in + done * bits / 8;
  for (uint64_t i = done; i < n; ++i) buf[i] = static_cast<uint8_t>(bitpack_get(rest, i - done, bits));
  return buf;
}

}  // namespace ccsim::kern
