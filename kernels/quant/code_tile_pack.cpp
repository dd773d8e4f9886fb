#include "kernels/quant/code_tile_pack.hpp"

#include <cstring>

#include "kernels/pack/bitpack.hpp"
#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

CCSIM_VECTOR_ROW void pack4_row(const uint8_t* q, uint64_t pairs, uint8_t* out) {
  for (uint64_t j = 0; j < pairs; ++j) out[j] = static_cast<uint8_t>(q[2 * j] | (q[2 * j + 1] << 4));
}

CCSIM_VECTOR_ROW void unpack4_row(const uint8_t* in, uint64_t pairs, uint8_t* q) {
  for (uint64_t j = 0; j < pairs; ++j) {
    q[2 * j] = static_cast<uint8_t>(in[j] & 15u);
    q[2 * j + 1] = static_cast<uint8_t>(in[j] >> 4);
  }
}

}  // namespace

void pack_code_tile(const uint8_t* q, uint64_t n, uint32_t bits, uint8_t* out) {
  if (bits == 8) {
    std::memcpy(out, q, n);
  } else if (bits == 4) {
    pack4_row(q, n / 2, out);
    if (n % 2 != 0) out[n / 2] = q[n - 1];
  } else {
    std::memset(out, 0, packed_bytes(n, bits));
    for (uint64_t i = 0; i < n; ++i) bitpack_put(out, i, bits, q[i]);
  }
}

const uint8_t* unpack_code_tile(const uint8_t* in, uint64_t n, uint32_t bits, uint8_t* buf) {
  if (bits == 8) return in;
  if (bits == 4) {
    unpack4_row(in, n / 2, buf);
    if (n % 2 != 0) buf[n - 1] = static_cast<uint8_t>(in[n / 2] & 15u);
  } else {
    for (uint64_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(bitpack_get(in, i, bits));
  }
  return buf;
}

}  // namespace ccsim::kern
