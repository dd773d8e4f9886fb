#pragma once
/// \file
/// Packing of k-bit unsigned codes (1 <= k <= 8) into bytes, the wire layout of every sub-byte
/// payload (FP4/FP6 elements, int4 groups, DynamiQ's 2/4-bit indices, THC lattice points).
///
/// Bit order: the packed buffer is a little-endian bit stream. Code i occupies stream bits
/// [i*k, i*k + k), its least significant bit first, and stream bit b is bit (b % 8) of byte b / 8.
/// For example, with k = 3 the codes {1, 2, 3, 4, 5, 6, 7, 0} are the 24-bit number
/// 0x1F58D1 = sum c_i << 3i, i.e. the bytes {0xD1, 0x58, 0x1F}. A code therefore spans at most
/// two bytes, and every group of 8 codes fills exactly k whole bytes, which is how a parallel
/// packer (CPU or CUDA) splits the work without sharing a byte. The padding bits after the last
/// code of a packed buffer are zero.
///
/// Thread safety: functions are pure apart from writes to their output; bitpack_put() modifies
/// the byte(s) holding one code, so concurrent puts must target codes in disjoint bytes (for
/// instance, each thread owns whole groups of 8 codes).

#include <cstdint>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// Largest code width the packer supports.
inline constexpr uint32_t kBitpackMaxBits = 8;

/// Bytes holding `count` codes of `bits` bits each: ceil(count * bits / 8).
CCSIM_HD constexpr uint64_t packed_bytes(uint64_t count, uint32_t bits) { return (count * bits + 7) / 8; }

/// Code `index` of a packed buffer of `bits`-bit codes.
/// REQUIRES: 1 <= bits <= 8; the buffer holds packed_bytes(index + 1, bits) bytes (the function
/// reads only the one or two bytes holding the code).
CCSIM_HD uint32_t bitpack_get(const uint8_t* packed, uint64_t index, uint32_t bits) {
  const uint64_t bit = index * bits;
  const uint64_t byte = bit >> 3;
  const uint32_t shift = static_cast<uint32_t>(bit & 7u);
  uint32_t word = packed[byte];
  if (shift + bits > 8) word |= static_cast<uint32_t>(packed[byte + 1]) << 8;
  return (word >> shift) & ((1u << bits) - 1u);
}

/// Code `index` of a packed stream of wider codes, 1 <= bits <= 32 (same bit order), reading only
/// the bytes that hold it (used by TFP's k-bit float prefixes).
CCSIM_HD uint32_t bitpack_get_wide(const uint8_t* packed, uint64_t index, uint32_t bits) {
  const uint64_t bit = index * bits;
  const uint8_t* p = packed + (bit >> 3);
  const uint32_t shift = static_cast<uint32_t>(bit & 7u);
  const uint32_t nbytes = (shift + bits + 7u) / 8u;
  uint64_t word = 0;
  for (uint32_t b = 0; b < nbytes; ++b) word |= static_cast<uint64_t>(p[b]) << (8u * b);
  return static_cast<uint32_t>((word >> shift) & ((uint64_t{1} << bits) - 1u));
}

/// Stores `code` (bits above `bits` ignored) as code `index`, leaving every other code intact.
/// REQUIRES: as bitpack_get(); not atomic (see the file comment).
CCSIM_HD void bitpack_put(uint8_t* packed, uint64_t index, uint32_t bits, uint32_t code) {
  const uint64_t bit = index * bits;
  const uint64_t byte = bit >> 3;
  const uint32_t shift = static_cast<uint32_t>(bit & 7u);
  const uint32_t mask = ((1u << bits) - 1u) << shift;
  const uint32_t value = (code << shift) & mask;
  packed[byte] = static_cast<uint8_t>((packed[byte] & ~mask) | value);
  if (shift + bits > 8) packed[byte + 1] = static_cast<uint8_t>((packed[byte + 1] & ~(mask >> 8)) | (value >> 8));
}

/// Packs codes[0, count) into `out` (packed_bytes(count, bits) bytes, fully overwritten, padding
/// bits zero). Bits of a code above `bits` are ignored. Parallel over groups of 8 codes; the
/// result does not depend on the thread count.
/// REQUIRES: 1 <= bits <= 8 (checked); `codes` and `out` do not overlap.
void bitpack_pack(const uint8_t* codes, uint64_t count, uint32_t bits, uint8_t* out);

/// Unpacks `count` codes from `packed` into codes[0, count) (one code per byte, high bits zero).
/// REQUIRES: 1 <= bits <= 8 (checked); `packed` holds packed_bytes(count, bits) bytes.
void bitpack_unpack(const uint8_t* packed, uint64_t count, uint32_t bits, uint8_t* codes);

}  // namespace ccsim::kern
