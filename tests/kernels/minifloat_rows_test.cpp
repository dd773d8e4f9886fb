// The branch-free minifloat lanes and the FP16 rows built on them against the scalar element
// functions the CUDA kernels share, bit for bit: every code, fp32 special values, exact ties,
// saturation edges, random bit patterns, odd lengths and offsets, one and three threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/quant/fp16_quant.hpp"
#include "kernels/quant/minifloat_lanes.hpp"

namespace ccsim::kern {
namespace {

uint32_t bits_of(float x) { return float_to_bits(x); }

// The scalar `acc += v` of the element kernels on x86-64, NaN payloads included: a NaN accumulator
// propagates quieted, otherwise the IEEE sum (whose NaN, if any, does not depend on operand order).
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

}  // namespace
}  // namespace ccsim::kern
