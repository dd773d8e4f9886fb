#pragma once
/// \file
/// Packing and unpacking a tile of codes, one code a byte, to and from the bit stream of
/// kernels/pack/bitpack.hpp, a whole row at a time (8-bit codes as bytes, 4-bit codes two a byte,
/// 6-bit codes four in three bytes, 2- and 1-bit codes four and eight a byte; other widths and a
/// last partial unit through bitpack_put/get). The CPU group quantizers, QSGD, MX and
/// DynamiQ code a tile into bytes with a vectorized row, then pack it with these (or unpack
/// before decoding).
///
/// Thread safety: pure apart from writes to the output.

#include <cstdint>

namespace ccsim::kern {

/// Writes codes q[0, n) (each already below 2^bits) as packed_bytes(n, bits) bytes at `out`,
/// exactly the bytes bitpack_put() of each code into zeroed bytes gives (padding bits zero).
/// REQUIRES: 1 <= bits <= 8; `out` starts on the stream's code 0 or on a code whose first bit is
/// bit 0 of a byte. n may be 0 (nothing written; q and out may then be null).
void pack_code_tile(const uint8_t* q, uint64_t n, uint32_t bits, uint8_t* out);

/// The n codes of `bits` bits starting at byte `in` (same REQUIRES), one a byte, high bits zero:
/// `in` itself for 8-bit codes, else unpacked into buf[0, n) and buf returned.
const uint8_t* unpack_code_tile(const uint8_t* in, uint64_t n, uint32_t bits, uint8_t* buf);

}  // namespace ccsim::kern
