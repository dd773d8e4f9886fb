// The vectorized CPU kernels against the element functions the CUDA kernels share (one scalar call
// per entry, uniform_at() per entry), bit for bit, on data with every special value.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/quant/mx_quant.hpp"
#include "kernels/quant/tfp_quant.hpp"
#include "kernels/stats/block_sums.hpp"
#include "kernels/quant/thc_quant.hpp"
#include "tests/kernels/adversarial_floats.hpp"

namespace ccsim::kern {
namespace {

class Int8Rows : public ::testing::TestWithParam<std::tuple<Rounding, uint32_t, int>> {};

TEST_P(Int8Rows, EncodeAndDecodeEqualTheElementFunctions) {
  const auto [rounding, block, threads] = GetParam();
  const int threads_before = worker_threads();
  set_worker_threads(threads);
  const uint64_t n = 5000 + block / 3;  // a short last block
  const std::vector<float> x = adversarial_floats(n, block);
  const RngKey key{99, 2, 5, 77};
  const uint64_t base = (uint64_t{1} << 32) - 1001;  // draws cross a 2^32 index boundary
  std::vector<uint8_t> msg(block_int8_bytes(n, block));
  block_int8_encode(x.data(), n, block, rounding, key, base, msg.data());
  const uint64_t blocks = (n + block - 1) / block;
  const auto* codes = reinterpret_cast<const int8_t*>(msg.data() + 4 * blocks);
  std::vector<float> dec(n), acc(n, 0.5f);
  block_int8_decode(msg.data(), n, block, dec.data());
  block_int8_decode_accumulate(msg.data(), n, block, acc.data());
  for (uint64_t b = 0; b < blocks; ++b) {
    float maxabs = 0.0f;
    for (uint64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) maxabs = std::max(maxabs, std::fabs(x[i]));
    float stored;
    std::memcpy(&stored, msg.data() + 4 * b, 4);
    ASSERT_EQ(std::memcmp(&stored, &maxabs, 4), 0) << "block " << b;
    for (uint64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      const float u = rounding == Rounding::kStochastic ? uniform_at(key, base + i) : 0.0f;
      ASSERT_EQ(codes[i], int8_quantize(x[i], maxabs, rounding, u)) << "entry " << i << " x " << x[i];
      const float want = int8_dequantize(codes[i], maxabs);
      ASSERT_EQ(std::memcmp(&dec[i], &want, 4), 0) << "entry " << i;
      const float want_acc = 0.5f + want;
      ASSERT_EQ(std::memcmp(&acc[i], &want_acc, 4), 0) << "entry " << i;
    }
  }
  set_worker_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8Rows,
                         ::testing::Combine(::testing::Values(Rounding::kStochastic, Rounding::kNearest),
                                            ::testing::Values(32u, 256u, 4096u), ::testing::Values(1, 3)));

class MxRows : public ::testing::TestWithParam<std::tuple<MinifloatKind, MxScaleKind>> {};

// The table decoder against mx_dequantize() of each code, on messages the encoder made from
// adversarial data (NaN, infinities, saturating blocks) and on random bytes.
TEST_P(MxRows, DecodeEqualsTheElementFunction) {
  const auto [element, scale_kind] = GetParam();
  const MxFormat f{element, 32, scale_kind, Rounding::kNearest};
  const uint64_t n = 4000 + 16;  // a short last block
  const uint64_t bytes = mx_bytes(n, f), blocks = (n + f.block - 1) / f.block;
  std::vector<uint8_t> msg(bytes);
  const std::vector<float> x = adversarial_floats(n, 5);
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 0) {
      mx_encode(x.data(), n, f, RngKey{1, 0, 0, 0}, 0, f.element_format().max_finite(), msg.data());
    } else {
      std::mt19937 gen(17);
      for (auto& b : msg) b = static_cast<uint8_t>(gen());
    }
    std::vector<float> dec(n), acc(n, -0.0f);
    mx_decode(msg.data(), n, f, dec.data());
    mx_decode_accumulate(msg.data(), n, f, acc.data());
    const uint8_t* codes = msg.data() + f.scale_bytes() * blocks;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t b = i / f.block;
      const uint32_t sc = f.scale == MxScaleKind::kE8M0 ? msg[b] : (msg[2 * b] | uint32_t{msg[2 * b + 1]} << 8);
      const float want = mx_dequantize(bitpack_get(codes, i, f.element_bits()), mx_scale_value(sc, f), f);
      const float want_acc = -0.0f + want;
      ASSERT_EQ(std::memcmp(&dec[i], &want, 4), 0) << "entry " << i << " variant " << variant << ": " << dec[i] << " vs " << want;
      ASSERT_EQ(std::memcmp(&acc[i], &want_acc, 4), 0) << "entry " << i << " variant " << variant;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MxRows,
                         ::testing::Combine(::testing::Values(MinifloatKind::kFp8E4M3, MinifloatKind::kFp8E5M2,
                                                              MinifloatKind::kFp6E3M2, MinifloatKind::kFp6E2M3,
                                                              MinifloatKind::kFp4E2M1),
                                            ::testing::Values(MxScaleKind::kE8M0, MxScaleKind::kBf16)));

// A tile of codes packed and unpacked by rows (every width 1..8, lengths around whole units and
// odd tails) equals the bit stream's definition: bitpack_put into zeroed bytes, bitpack_get.
TEST(CodeTileRows, PackAndUnpackEqualTheBitStreamDefinition) {
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    for (const uint64_t n : {0ull, 1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 8ull, 13ull, 511ull, 512ull}) {
      SCOPED_TRACE(fmt::format("bits {} n {}", bits, n));
      std::mt19937 gen(bits * 1000 + static_cast<uint32_t>(n));
      std::vector<uint8_t> q(n);
      for (auto& c : q) c = static_cast<uint8_t>(gen() & ((1u << bits) - 1u));
      std::vector<uint8_t> want(packed_bytes(n, bits), 0), got(packed_bytes(n, bits), 0xA5);
      for (uint64_t i = 0; i < n; ++i) bitpack_put(want.data(), i, bits, q[i]);
      pack_code_tile(q.data(), n, bits, got.data());
      ASSERT_EQ(got, want);
      std::vector<uint8_t> buf(n, 0xEE);
      const uint8_t* back = unpack_code_tile(want.data(), n, bits, buf.data());
      ASSERT_EQ(std::vector<uint8_t>(back, back + n), q);
    }
  }
}

// THC's aggregation fields: packing, unpacking (and accumulating) and the fused hop against the
// layout's definition (bitpack_put / bitpack_get_wide one field at a time), at 8, 12 and 16 bits,
// at lengths around whole groups and tiles, on 1 and 3 threads, the fused hop also between widths.
TEST(ThcRows, FieldsEqualTheBitStreamDefinition) {
  const int saved = worker_threads();
  for (const int threads : {1, 3}) {
    set_worker_threads(threads);
    for (const uint32_t bits : {8u, 12u, 16u}) {
      for (const uint64_t n : {0ull, 1ull, 2ull, 7ull, 8ull, 9ull, 511ull, 512ull, 513ull, 1001ull, 70001ull}) {
        SCOPED_TRACE(fmt::format("threads {} bits {} n {}", threads, bits, n));
        std::mt19937 gen(static_cast<uint32_t>(bits * 100003 + n));
        std::vector<float> x(n), acc(n);
        for (uint64_t i = 0; i < n; ++i) {
          x[i] = static_cast<float>(gen() >> (32 - bits));
          acc[i] = static_cast<float>(gen() >> 20);
        }
        std::vector<uint8_t> want(thc_bytes(n, bits), 0), got(thc_bytes(n, bits), 0xAB);
        for (uint64_t i = 0; i < n; ++i) bitpack_put(want.data(), i, bits, static_cast<uint32_t>(x[i]));
        thc_pack(x.data(), n, bits, got.data());
        ASSERT_EQ(got, want);
        std::vector<float> out(n, -1.0f), sum = acc;
        thc_unpack(want.data(), n, bits, out.data());
        thc_unpack_accumulate(want.data(), n, bits, sum.data());
        for (uint64_t i = 0; i < n; ++i) {
          const auto field = static_cast<float>(bitpack_get_wide(want.data(), i, bits));
          ASSERT_EQ(out[i], field) << i;
          ASSERT_EQ(sum[i], acc[i] + field) << i;
        }
        // The fused hop into 16-bit fields (accumulators chosen so that every sum fits) equals the
        // two passes.
        std::vector<float> fused_acc(n, 0.0f), two_acc(n, 0.0f);
        for (uint64_t i = 0; i < n; ++i)
          fused_acc[i] = two_acc[i] = static_cast<float>(gen() % (65536u - bitpack_get_wide(want.data(), i, bits)));
        std::vector<uint8_t> fused(thc_bytes(n, 16), 0xCD), two(thc_bytes(n, 16), 0x11);
        thc_unpack_accumulate_pack(want.data(), n, bits, fused_acc.data(), 16, fused.data());
        thc_unpack_accumulate(want.data(), n, bits, two_acc.data());
        thc_pack(two_acc.data(), n, 16, two.data());
        ASSERT_EQ(fused_acc, two_acc);
        ASSERT_EQ(fused, two);
      }
    }
  }
  set_worker_threads(saved);
}

// THC's lattice codes as a row (a tile of draws at a time, in parallel) against the element
// function one entry at a time, on both sides of the lattice's span, at its points and at -0.
TEST(ThcRows, LatticeCodesEqualTheElementFunction) {
  const int saved = worker_threads();
  const RngKey key{11, 2, 0, 4};
  for (const int threads : {1, 3}) {
    set_worker_threads(threads);
    for (const uint32_t levels : {1u, 15u, 255u, 4095u}) {
      for (const uint64_t n : {0ull, 1ull, 513ull, 70001ull}) {
        SCOPED_TRACE(fmt::format("threads {} levels {} n {}", threads, levels, n));
        const float m = 1.5f, inv_step = static_cast<float>(levels) / (2.0f * m);
        std::mt19937 gen(static_cast<uint32_t>(levels + n));
        std::uniform_real_distribution<float> span(-1.3f * m, 1.3f * m);
        std::vector<float> v(n);
        for (uint64_t i = 0; i < n; ++i) v[i] = span(gen);
        for (uint64_t i = 0; i < n && i < 40; ++i)  // the lattice's points and -0
          v[i] = i % 4 == 0 ? -0.0f : -m + static_cast<float>(i % levels) / inv_step;
        std::vector<float> got = v;
        thc_lattice_codes(got.data(), n, m, inv_step, levels, key, 9);
        for (uint64_t i = 0; i < n; ++i) {
          const auto want = static_cast<float>(thc_lattice_code(v[i], m, inv_step, levels, uniform_at(key, 9 + i)));
          ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << "entry " << i << ": " << got[i] << " vs " << want;
        }
      }
    }
  }
  set_worker_threads(saved);
}

// TFP's rows (fp32 codes and values as rows; 8/16/24/32-bit codes as bytes, 12-bit codes as pairs,
// other widths through the accumulator; 64-bit loads when unpacking) against the element functions
// and the stream's definition (bit b of code i is stream bit i·k + b), for every base, widths
// around whole bytes, both roundings, lengths around tiles and 1 or 3 threads; and the fused hop.
TEST(TfpRows, EncodeAndDecodeEqualTheElementFunctions) {
  const int saved = worker_threads();
  const RngKey key{7, 3, 1, 9};
  const uint64_t base = (uint64_t{1} << 32) - 700;
  std::vector<TfpFormat> formats;
  for (const uint32_t k : {10u, 11u, 12u, 13u, 16u, 17u, 23u, 24u, 31u, 32u}) formats.push_back({TfpBase::kFloat32, k});
  formats.push_back({TfpBase::kFloat16, 9});
  formats.push_back({TfpBase::kFloat16, 16});
  formats.push_back({TfpBase::kFloat8E4M3, 7});
  formats.push_back({TfpBase::kFloat8E5M2, 8});
  for (const int threads : {1, 3}) {
    set_worker_threads(threads);
    for (const TfpFormat& f : formats) {
      for (const bool rr : {false, true}) {
        for (const uint64_t n : {0ull, 1ull, 7ull, 8ull, 9ull, 511ull, 513ull, 4099ull, 70001ull}) {
          SCOPED_TRACE(fmt::format("threads {} base {} k {} rr {} n {}", threads, static_cast<int>(f.base), f.bits,
                                   rr, n));
          std::vector<float> x = adversarial_floats(n, f.bits + (rr ? 100 : 0));
          if (n > 3) x[3] = bits_to_float(0x7F7FFFFFu);  // the largest finite: never rounds up to inf
          if (n > 5) x[5] = -bits_to_float(0x7F7FFFFFu);
          std::vector<uint8_t> want(tfp_bytes(n, f.bits), 0), got(tfp_bytes(n, f.bits), 0xC3);
          std::vector<uint32_t> code(n);
          for (uint64_t i = 0; i < n; ++i) {
            code[i] = tfp_encode_element(x[i], f, rr, rr ? uniform_at(key, base + i) : 0.0f);
            for (uint32_t b = 0; b < f.bits; ++b)
              if (code[i] >> b & 1u) want[(i * f.bits + b) / 8] |= static_cast<uint8_t>(1u << ((i * f.bits + b) % 8));
          }
          tfp_encode(x.data(), n, f, rr, key, base, got.data());
          ASSERT_EQ(got, want);
          std::vector<float> dec(n, -1.0f), acc(x.begin(), x.end());
          tfp_decode(want.data(), n, f, dec.data());
          tfp_decode_accumulate(want.data(), n, f, acc.data());
          for (uint64_t i = 0; i < n; ++i) {
            const float v = tfp_decode_element(code[i], f), sum = x[i] + v;
            ASSERT_EQ(std::memcmp(&dec[i], &v, 4), 0) << "entry " << i;
            if (std::isnan(x[i]) && std::isnan(v)) {  // which NaN a NaN + NaN carries is unspecified
              ASSERT_TRUE(std::isnan(acc[i])) << "entry " << i;
            } else {
              ASSERT_EQ(std::memcmp(&acc[i], &sum, 4), 0) << "entry " << i;
            }
          }
          // The fused hop (a tile at a time) against decode-accumulate then encode over the whole
          // chunk, onto accumulators without NaN.
          std::vector<float> fused_acc = adversarial_floats(n, 5), two_acc;
          for (float& a : fused_acc) a = std::isnan(a) ? 1.5f : a;
          two_acc = fused_acc;
          std::vector<uint8_t> fused(want.size(), 0x3C), two(want.size(), 0x99);
          const RngKey hop_key{7, 4, 2, 9};
          tfp_decode_accumulate_encode(want.data(), n, f, fused_acc.data(), rr, hop_key, base, fused.data());
          tfp_decode_accumulate(want.data(), n, f, two_acc.data());
          tfp_encode(two_acc.data(), n, f, rr, hop_key, base, two.data());
          if (n > 0) {  // no null to memcmp
            ASSERT_EQ(std::memcmp(fused_acc.data(), two_acc.data(), 4 * n), 0);
          }
          ASSERT_EQ(fused, two);
        }
      }
    }
  }
  set_worker_threads(saved);
}

// Per-block double sums in lanes (eight blocks at a time) against the sequential loop, bit for bit,
// on data with every special value, at block sizes around the lane count, with short last blocks,
// with the AVX2 path and the portable loop.
TEST(BlockSums, EqualTheSequentialLoop) {
  for (const bool portable : {false, true}) {
    const bool before = philox_batch_force_portable(portable);
    for (const uint64_t block : {1ull, 7ull, 16ull, 256ull, 1000ull}) {
      for (const uint64_t n : std::vector<uint64_t>{0, 5, 8 * block, 8 * block + 3, 17 * block - 1, 2100, 40000}) {
        SCOPED_TRACE(fmt::format("block {} n {}{}", block, n, portable ? " portable" : ""));
        std::vector<float> x = adversarial_floats(n, static_cast<uint32_t>(block + n));
        if (n > 30) x[30] = 3.0e38f;  // sums that overflow to inf, and inf + (-inf)
        if (n > 31) x[31] = 3.0e38f;
        if (n > 33) x[33] = -std::numeric_limits<float>::infinity();
        const uint64_t blocks = (n + block - 1) / block;
        std::vector<double> sum(blocks, -1.0), sq(blocks, -1.0);
        block_sums(x.data(), n, block, sum.data(), sq.data());
        for (uint64_t b = 0; b < blocks; ++b) {
          double s = 0.0, q = 0.0;
          for (uint64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
            s += static_cast<double>(x[i]);
            q += static_cast<double>(x[i]) * static_cast<double>(x[i]);
          }
          // Which NaN a NaN + NaN carries depends on the operand order the compiler picks for the
          // loop; every other result is bit for bit.
          if (std::isnan(s)) {
            ASSERT_TRUE(std::isnan(sum[b])) << "block " << b;
          } else {
            ASSERT_EQ(std::memcmp(&sum[b], &s, 8), 0) << "block " << b << ": " << sum[b] << " vs " << s;
          }
          if (std::isnan(q)) {
            ASSERT_TRUE(std::isnan(sq[b])) << "block " << b;
          } else {
            ASSERT_EQ(std::memcmp(&sq[b], &q, 8), 0) << "block " << b << ": " << sq[b] << " vs " << q;
          }
        }
      }
    }
    philox_batch_force_portable(before);
  }
}

}  // namespace
}  // namespace ccsim::kern
