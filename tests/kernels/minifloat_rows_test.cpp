// The branch-free minifloat lanes and the FP16 / MX rows built on them against the scalar element
// functions the CUDA kernels share, bit for bit: every code, fp32 special values, exact ties,
// saturation edges, random bit patterns, odd lengths and offsets, one and three threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/pack/bitpack.hpp"
#include "kernels/quant/fp16_quant.hpp"
#include "kernels/quant/minifloat_lanes.hpp"
#include "kernels/quant/mx_quant.hpp"

namespace ccsim::kern {
namespace {

uint32_t bits_of(float x) { return float_to_bits(x); }

// acc + v with the accumulator first (accumulate_lane's contract), NaN payloads included: a NaN
// accumulator propagates quieted, otherwise the IEEE sum (whose NaN does not depend on the order).
float accumulated(float acc, float v) {
  return std::isnan(acc) ? bits_to_float(bits_of(acc) | 0x00400000u) : acc + v;
}

// Values every minifloat encoder must get right: zeros, fp32 denormals and their edges, infinities,
// NaNs with payloads and signs, every code's value of `f` and the midpoints and their neighbours
// between consecutive codes (exact ties), the saturation edges, then random bit patterns and
// random floats over many decades.
std::vector<float> hard_floats(const MinifloatFormat& f, uint64_t random, uint32_t seed) {
  std::vector<uint32_t> b = {0u, 0x80000000u, 1u, 0x80000001u, 0x7FFFFFu, 0x807FFFFFu, 0x800000u, 0x7F800000u,
                             0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu};
  std::vector<float> x;
  for (uint32_t v : b) x.push_back(bits_to_float(v));
  const uint32_t mags = f.max_finite_code() + 1;
  for (uint32_t c = 0; c < mags; ++c) {
    const float lo = minifloat_decode(c, f);
    const float hi = c + 1 < mags ? minifloat_decode(c + 1, f) : 2.0f * f.max_finite();
    const float mid = 0.5f * (lo + hi);  // exact: consecutive codes differ by one quantum
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, hi), std::nextafter(lo, hi)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> decade(-45.0f, 39.0f);
  for (uint64_t i = 0; i < random; ++i) {
    x.push_back(bits_to_float(static_cast<uint32_t>(gen())));
    const float v = std::pow(10.0f, decade(gen)) * (gen() % 2 ? -1.0f : 1.0f);
    x.push_back(v);
  }
  return x;
}

// The lanes against the element functions, nearest and stochastic (u at 0, just below 1, and
// random), and every code's decode, for each format.
template <MinifloatFormat F>
void check_lanes() {
  const std::vector<float> x = hard_floats(F, 20000, F.bits());
  std::mt19937 gen(7);
  for (float v : x) {
    const uint32_t nearest = minifloat_encode_lane<F, false>(v, 0.0f);
    ASSERT_EQ(nearest, minifloat_encode_rne(v, F)) << std::hex << bits_of(v);
    for (float u : {0.0f, 0x1.fffffep-1f, u32_to_unit_float(static_cast<uint32_t>(gen()))}) {
      const uint32_t stochastic = minifloat_encode_lane<F, true>(v, u);
      ASSERT_EQ(stochastic, minifloat_encode_stochastic(v, F, u)) << std::hex << bits_of(v) << " u " << u;
    }
  }
  for (uint32_t c = 0; c < (1u << F.bits()); ++c)
    ASSERT_EQ(bits_of(minifloat_decode_lane<F>(c)), bits_of(minifloat_decode(c, F))) << "code " << c;
}

TEST(MinifloatLanes, EqualTheElementFunctions) {
  check_lanes<kFp16>();
  check_lanes<kFp8E4M3>();
  check_lanes<kFp8E5M2>();
  check_lanes<kFp6E3M2>();
  check_lanes<kFp6E2M3>();
  check_lanes<kFp4E2M1>();
}

// The E4M3 nearest lane is its own algorithm (fp32 pattern rounding above 2^-6, an integer rounding
// by 2^23 below): against the reference on a stride through every fp32 pattern, and on every
// pattern near the normal/subnormal boundary, the saturation edge (448 to 480) and the top of the
// subnormal codes, both signs. (A one-off run compared all 2^32 patterns: no difference.)
TEST(MinifloatLanes, E4M3NearestLaneEqualsTheReferenceOnEveryRegion) {
  auto check = [](uint32_t p) {
    const float x = bits_to_float(p);
    ASSERT_EQ(e4m3_encode_nearest_lane(x), minifloat_encode_rne(x, kFp8E4M3)) << std::hex << p;
  };
  for (uint64_t p = 0; p < (uint64_t{1} << 32); p += 4099) check(static_cast<uint32_t>(p));
  for (const uint32_t centre : {0x3C800000u, 0x43E00000u, 0x43F00000u, 0x3C700000u, 0x3B000000u})
    for (uint32_t d = 0; d < 0x40000u; ++d)
      for (const uint32_t sign : {0u, 0x80000000u}) {
        check(sign | (centre - 0x20000u + d));
      }
}

class Fp16Rows : public ::testing::TestWithParam<int> {};

// The FP16 rows (encode, decode, decode-accumulate, fused hop) at odd offsets and lengths, against
// the element functions per entry.
TEST_P(Fp16Rows, EqualTheElementFunctions) {
  const int threads_before = worker_threads();
  set_worker_threads(GetParam());
  const std::vector<float> x = hard_floats(kFp16, 70000, 3);
  std::mt19937 gen(11);
  std::vector<uint16_t> codes(x.size() + 8);
  for (auto& c : codes) c = static_cast<uint16_t>(gen());  // random codes: every NaN, inf, subnormal
  for (uint64_t off : {0u, 1u, 3u}) {
    const uint64_t n = x.size() - off - (off == 0 ? 0 : 5);
    std::vector<uint16_t> enc(n), fused(n);
    fp16_encode(x.data() + off, n, enc.data());
    std::vector<float> dec(n), acc(x.begin() + off, x.begin() + off + n), acc2 = acc;
    fp16_decode(codes.data() + off, n, dec.data());
    fp16_decode_accumulate(codes.data() + off, n, acc.data());
    fp16_decode_accumulate_encode(codes.data() + off, n, acc2.data(), fused.data());
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(enc[i], float_to_fp16_rne(x[off + i])) << "entry " << i << " x " << std::hex << bits_of(x[off + i]);
      const float d = fp16_to_float(codes[off + i]);
      ASSERT_EQ(bits_of(dec[i]), bits_of(d)) << "code " << std::hex << codes[off + i];
      const float s = accumulated(x[off + i], d);
      ASSERT_EQ(bits_of(acc[i]), bits_of(s)) << "entry " << i;
      ASSERT_EQ(bits_of(acc2[i]), bits_of(s)) << "entry " << i;
      ASSERT_EQ(fused[i], float_to_fp16_rne(s)) << "entry " << i;
    }
  }
  set_worker_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(Threads, Fp16Rows, ::testing::Values(1, 3));

// MX test data, block by block: blocks of ties (the block maximum ±max finite, so the scale is
// 1 or 2^0 and the rest lands exactly on codes, midpoints and their neighbours), of random fp32
// bit patterns (NaN and infinite blocks), of zeros and fp32 denormals, and of random floats over
// all fp32 decades.
std::vector<float> mx_data(const MxFormat& f, uint64_t n, uint32_t seed) {
  const MinifloatFormat e = f.element_format();
  const std::vector<float> ties = hard_floats(e, 0, seed);
  std::vector<float> finite_ties;
  for (float v : ties)
    if (std::fabs(v) <= e.max_finite()) finite_ties.push_back(v);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> decade(-45.0f, 39.0f);
  std::vector<float> x(n);
  uint64_t next_tie = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t kind = (i / f.block) % 5, at = i % f.block;
    if (kind == 0) {
      x[i] = at == 0 ? (gen() % 2 ? -e.max_finite() : e.max_finite()) : finite_ties[next_tie++ % finite_ties.size()];
    } else if (kind == 1) {
      x[i] = bits_to_float(static_cast<uint32_t>(gen()));
    } else if (kind == 2) {
      x[i] = gen() % 3 == 0 ? bits_to_float(static_cast<uint32_t>(gen()) & 0x807FFFFFu) : (gen() % 2 ? -0.0f : 0.0f);
    } else {
      x[i] = std::pow(10.0f, decade(gen)) * (gen() % 2 ? -1.0f : 1.0f);
    }
  }
  return x;
}

// The per-entry reference of mx_encode() / mx_encode_with_scales() (given != null): the NaN-
// propagating block maximum, mx_scale_code(), mx_quantize() with uniform_at(), bitpack_put().
uint64_t mx_encode_reference(const float* x, uint64_t n, const MxFormat& f, const uint32_t* given, const RngKey& key,
                             uint64_t base, float range, std::vector<uint8_t>& out) {
  const uint64_t blocks = (n + f.block - 1) / f.block;
  out.assign(mx_bytes(n, f), 0);
  uint8_t* codes = out.data() + f.scale_bytes() * blocks;
  const float max = f.element_format().max_finite();
  uint64_t outside = 0;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t begin = b * f.block, end = std::min(n, begin + f.block);
    float amax = 0.0f;
    for (uint64_t i = begin; i < end; ++i) amax = mx_amax_step(amax, x[i]);
    const uint32_t code = given != nullptr ? given[b] : mx_scale_code(amax, f);
    if (f.scale == MxScaleKind::kE8M0) {
      out[b] = static_cast<uint8_t>(code);
    } else {
      out[2 * b] = static_cast<uint8_t>(code);
      out[2 * b + 1] = static_cast<uint8_t>(code >> 8);
    }
    const float scale = mx_scale_value(code, f);
    for (uint64_t i = begin; i < end; ++i) {
      outside += given != nullptr ? !(std::fabs(x[i]) / scale <= max) : !(std::fabs(x[i]) <= range);
      const float u = f.rounding == Rounding::kStochastic ? uniform_at(key, base + i) : 0.0f;
      bitpack_put(codes, i, f.element_bits(), mx_quantize(x[i], scale, f, u));
    }
  }
  return outside;
}

class MxCoders : public ::testing::TestWithParam<std::tuple<MinifloatKind, MxScaleKind, Rounding, uint32_t>> {};

// Encode (own scales and given ones), decode, decode-accumulate and the fused hop against the
// per-entry references, at odd lengths, with draws across a 2^32 index boundary, on 1 and 3
// threads.
TEST_P(MxCoders, EqualThePerEntryReference) {
  const auto [element, scale_kind, rounding, block] = GetParam();
  const MxFormat f{element, block, scale_kind, rounding};
  const int threads_before = worker_threads();
  const RngKey key{3, 1, 4, 1};
  const uint64_t base = (uint64_t{1} << 32) - 777;
  for (uint64_t n : {uint64_t{1}, uint64_t{block} * 37 + 8, uint64_t{9000}}) {
    const uint64_t blocks = (n + block - 1) / block;
    const std::vector<float> x = mx_data(f, n, static_cast<uint32_t>(n + block));
    std::mt19937 gen(static_cast<uint32_t>(n));
    std::vector<uint32_t> given(blocks);
    for (auto& g : given) g = static_cast<uint32_t>(gen()) & (scale_kind == MxScaleKind::kE8M0 ? 0xFFu : 0xFFFFu);
    for (int threads : {1, 3}) {
      set_worker_threads(threads);
      const uint32_t* const none = nullptr;
      for (const uint32_t* scales : {none, static_cast<const uint32_t*>(given.data())}) {
        std::vector<uint8_t> want, msg(mx_bytes(n, f));
        const float range = f.element_format().max_finite();
        const uint64_t want_out = mx_encode_reference(x.data(), n, f, scales, key, base, range, want);
        const uint64_t got_out = scales != nullptr
                                     ? mx_encode_with_scales(x.data(), n, f, scales, key, base, msg.data())
                                     : mx_encode(x.data(), n, f, key, base, range, msg.data());
        ASSERT_EQ(got_out, want_out) << "n " << n << " threads " << threads;
        ASSERT_EQ(msg, want) << "n " << n << " threads " << threads;
        // The fused hop on this message against decode-accumulate, then the reference encoder.
        std::vector<float> acc = mx_data(f, n, 99), acc2 = acc;
        mx_decode_accumulate(msg.data(), n, f, acc.data());
        const uint64_t want_fused_out = mx_encode_reference(acc.data(), n, f, scales, key, base, range, want);
        std::vector<uint8_t> fused(mx_bytes(n, f));
        const uint64_t got_fused_out =
            mx_decode_accumulate_encode(msg.data(), n, f, acc2.data(), scales, key, base, range, fused.data());
        ASSERT_EQ(std::memcmp(acc.data(), acc2.data(), 4 * n), 0) << "n " << n;
        ASSERT_EQ(got_fused_out, want_fused_out) << "n " << n;
        ASSERT_EQ(fused, want) << "n " << n;
      }
      // Decode of random bytes (every code, every scale) against mx_dequantize() per entry.
      std::vector<uint8_t> bytes(mx_bytes(n, f));
      for (auto& b : bytes) b = static_cast<uint8_t>(gen());
      std::vector<float> dec(n), acc(x);
      mx_decode(bytes.data(), n, f, dec.data());
      mx_decode_accumulate(bytes.data(), n, f, acc.data());
      const uint8_t* codes = bytes.data() + f.scale_bytes() * blocks;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t b = i / block;
        const uint32_t sc = f.scale == MxScaleKind::kE8M0 ? bytes[b] : (bytes[2 * b] | uint32_t{bytes[2 * b + 1]} << 8);
        const float want = mx_dequantize(bitpack_get(codes, i, f.element_bits()), mx_scale_value(sc, f), f);
        const float want_acc = accumulated(x[i], want);
        ASSERT_EQ(bits_of(dec[i]), bits_of(want)) << "entry " << i << " n " << n;
        ASSERT_EQ(bits_of(acc[i]), bits_of(want_acc)) << "entry " << i << " n " << n;
      }
    }
  }
  set_worker_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, MxCoders,
    ::testing::Combine(::testing::Values(MinifloatKind::kFp8E4M3, MinifloatKind::kFp8E5M2, MinifloatKind::kFp6E3M2,
                                         MinifloatKind::kFp6E2M3, MinifloatKind::kFp4E2M1),
                       ::testing::Values(MxScaleKind::kE8M0, MxScaleKind::kBf16),
                       ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                       ::testing::Values(32u, 20u, 1024u)));

}  // namespace
}  // namespace ccsim::kern
