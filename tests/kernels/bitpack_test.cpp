#include "kernels/pack/bitpack.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {
namespace {

std::vector<uint8_t> pack(const std::vector<uint8_t>& codes, uint32_t bits) {
  std::vector<uint8_t> out(packed_bytes(codes.size(), bits), 0xAA);  // garbage: pack must overwrite
  bitpack_pack(codes.data(), codes.size(), bits, out.data());
  return out;
}

std::vector<uint8_t> random_codes(uint64_t count, uint32_t bits, uint64_t seed) {
  const RngKey key{seed, 0, 0, 0};
  std::vector<uint8_t> codes(count);
  for (uint64_t i = 0; i < count; ++i) codes[i] = static_cast<uint8_t>(random_bits_at(key, i) & ((1u << bits) - 1u));
  return codes;
}

TEST(Bitpack, PackedBytesRoundsUp) {
  EXPECT_EQ(packed_bytes(0, 3), 0u);
  EXPECT_EQ(packed_bytes(1, 1), 1u);
  EXPECT_EQ(packed_bytes(8, 1), 1u);
  EXPECT_EQ(packed_bytes(9, 1), 2u);
  EXPECT_EQ(packed_bytes(3, 3), 2u);  // 9 bits
  EXPECT_EQ(packed_bytes(8, 3), 3u);
  EXPECT_EQ(packed_bytes(5, 5), 4u);  // 25 bits
  EXPECT_EQ(packed_bytes(3, 4), 2u);
  EXPECT_EQ(packed_bytes(4, 6), 3u);
  EXPECT_EQ(packed_bytes(7, 8), 7u);
  EXPECT_EQ(packed_bytes(uint64_t{1} << 40, 4), uint64_t{1} << 39);
}

TEST(Bitpack, ExactByteLayout) {
  // k = 1: code i is bit i of byte i / 8.
  EXPECT_EQ(pack({1, 0, 1, 1, 0, 0, 0, 1, 1}, 1), (std::vector<uint8_t>{0x8D, 0x01}));
  // k = 2: {3, 0, 1, 2} -> 0b10'01'00'11.
  EXPECT_EQ(pack({3, 0, 1, 2, 1}, 2), (std::vector<uint8_t>{0x93, 0x01}));
  // k = 3: sum c_i << 3i = 0x1F58D1.
  EXPECT_EQ(pack({1, 2, 3, 4, 5, 6, 7, 0}, 3), (std::vector<uint8_t>{0xD1, 0x58, 0x1F}));
  // k = 4: low nibble first.
  EXPECT_EQ(pack({0x1, 0x2, 0x3}, 4), (std::vector<uint8_t>{0x21, 0x03}));
  // k = 5: 31 | 1 << 5 = 0x3F over 10 bits.
  EXPECT_EQ(pack({31, 1}, 5), (std::vector<uint8_t>{0x3F, 0x00}));
  // k = 6: 0x3F | 0x15 << 12 | 0x2A << 18 = 0xA9503F.
  EXPECT_EQ(pack({0x3F, 0x00, 0x15, 0x2A}, 6), (std::vector<uint8_t>{0x3F, 0x50, 0xA9}));
  // k = 8: identity.
  EXPECT_EQ(pack({7, 200, 0}, 8), (std::vector<uint8_t>{7, 200, 0}));
  // High bits of the codes are ignored.
  EXPECT_EQ(pack({0xF1, 0xE2, 0xD3}, 4), (std::vector<uint8_t>{0x21, 0x03}));
  // Single-code access reads the same layout.
  const std::vector<uint8_t> b = {0xD1, 0x58, 0x1F};
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(bitpack_get(b.data(), i, 3), (i + 1) % 8) << i;
}

TEST(Bitpack, RoundTripsRandomCodesForEveryWidth) {
  for (uint32_t bits = 1; bits <= kBitpackMaxBits; ++bits) {
    for (uint64_t count : {0ull, 1ull, 7ull, 8ull, 9ull, 1000ull, 4097ull, 1ull << 20}) {
      SCOPED_TRACE(fmt::format("bits={} count={}", bits, count));
      const auto codes = random_codes(count, bits, bits * 1000 + count);
      const auto packed = pack(codes, bits);
      ASSERT_EQ(packed.size(), packed_bytes(count, bits));
      std::vector<uint8_t> back(count, 0xEE);
      bitpack_unpack(packed.data(), count, bits, back.data());
      ASSERT_EQ(back, codes);
      for (uint64_t i = 0; i < count; i += 1 + i / 8) ASSERT_EQ(bitpack_get(packed.data(), i, bits), codes[i]) << i;
      // Padding bits after the last code are zero.
      const uint64_t used = count * bits;
      if (used % 8 != 0) {
        ASSERT_EQ(packed.back() >> (used % 8), 0) << "padding";
      }
      // Building the buffer code by code with bitpack_put gives the same bytes.
      std::vector<uint8_t> put(packed.size(), 0);
      for (uint64_t i = 0; i < count; ++i) bitpack_put(put.data(), i, bits, codes[i]);
      ASSERT_EQ(put, packed);
    }
  }
}

TEST(Bitpack, PutChangesOnlyItsOwnCode) {
  for (uint32_t bits = 1; bits <= kBitpackMaxBits; ++bits) {
    SCOPED_TRACE(fmt::format("bits={}", bits));
    const uint64_t count = 64;
    auto codes = random_codes(count, bits, 77 + bits);
    auto packed = pack(codes, bits);
    const RngKey key{5, bits, 0, 0};
    for (uint64_t t = 0; t < 200; ++t) {
      const uint64_t i = random_bits_at(key, 2 * t) % count;
      const uint32_t v = random_bits_at(key, 2 * t + 1);  // high bits must be ignored
      bitpack_put(packed.data(), i, bits, v);
      codes[i] = static_cast<uint8_t>(v & ((1u << bits) - 1u));
      for (uint64_t j = 0; j < count; ++j) ASSERT_EQ(bitpack_get(packed.data(), j, bits), codes[j]) << j;
    }
  }
}

TEST(Bitpack, ResultsIndependentOfThreadCount) {
  const auto codes = random_codes((1 << 20) + 5, 5, 42);
  std::vector<std::vector<uint8_t>> outs;
  for (int threads : {1, 3, 8}) {
    set_worker_threads(threads);
    outs.push_back(pack(codes, 5));
  }
  set_worker_threads(2);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

}  // namespace
}  // namespace ccsim::kern
