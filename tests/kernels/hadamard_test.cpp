#include "kernels/transform/hadamard.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/float_bits.hpp"
#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {
namespace {

std::vector<float> random_vector(uint64_t n, uint64_t seed) {
  const RngKey key{seed, 0, 0, 9};
  std::vector<float> x(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = 2.0f * uniform_at(key, i) - 1.0f;
  return x;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(Hadamard, ScaleIsNearestFloatToInverseSqrt) {
  for (int k = 0; k <= 40; ++k) {
    const uint64_t n = uint64_t{1} << k;
    EXPECT_EQ(hadamard_scale(n), static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)))) << n;
  }
  static_assert(hadamard_scale(4) == 0.5f && hadamard_scale(1) == 1.0f);
}

TEST(Hadamard, MatchesSylvesterMatrixOnSmallSizes) {
  // Column j of H_n is H_n e_j: entries (-1)^popcount(i & j) / sqrt(n), exactly the scale times ±1.
  for (uint64_t n : {2u, 4u, 8u}) {
    const float s = hadamard_scale(n);
    for (uint64_t j = 0; j < n; ++j) {
      std::vector<float> e(n, 0.0f);
      e[j] = 1.0f;
      hadamard_transform(e.data(), n, n);
      for (uint64_t i = 0; i < n; ++i) {
        const float want = (std::popcount(i & j) % 2 == 0) ? s : -s;
        EXPECT_EQ(e[i], want) << "n=" << n << " H[" << i << "][" << j << "]";
      }
    }
  }
  // A worked example: H_4 (1, 2, 3, 4) = 0.5 (10, -2, -4, 0).
  std::vector<float> x = {1, 2, 3, 4};
  hadamard_transform(x.data(), 4, 4);
  EXPECT_EQ(x, (std::vector<float>{5.0f, -1.0f, -2.0f, 0.0f}));
  // n = 1 is the identity.
  float one = 3.5f;
  hadamard_transform(&one, 1, 1);
  EXPECT_EQ(one, 3.5f);
}

TEST(Hadamard, IsAnInvolutionAndPreservesInnerProducts) {
  for (uint64_t n : {1u, 2u, 32u, 1024u, 1u << 16}) {
    SCOPED_TRACE(fmt::format("n={}", n));
    const auto x = random_vector(n, 1), y = random_vector(n, 2);
    auto hx = x, hy = y;
    hadamard_transform(hx.data(), n, n);
    hadamard_transform(hy.data(), n, n);
    const double xy = dot(x, y), xx = dot(x, x);
    EXPECT_NEAR(dot(hx, hy), xy, 1e-5 * xx);
    EXPECT_NEAR(dot(hx, hx), xx, 1e-5 * xx);
    auto hhx = hx;
    hadamard_transform(hhx.data(), n, n);  // H·H = I
    const double tol = 1e-6 * std::log2(static_cast<double>(n) + 1) + 1e-7;
    for (uint64_t i = 0; i < n; ++i) ASSERT_NEAR(hhx[i], x[i], tol) << i;
  }
}

TEST(Hadamard, IsLinear) {
  // Σ_g H g = H Σ_g g (SDP4Bit moves the transform past the reduction).
  const uint64_t n = 4096, block = 32;
  std::vector<float> sum_of_h(n, 0.0f), sum(n, 0.0f);
  for (uint64_t g = 0; g < 4; ++g) {
    auto x = random_vector(n, 10 + g);
    for (uint64_t i = 0; i < n; ++i) sum[i] += x[i];
    hadamard_transform(x.data(), n, block);
    for (uint64_t i = 0; i < n; ++i) sum_of_h[i] += x[i];
  }
  hadamard_transform(sum.data(), n, block);
  for (uint64_t i = 0; i < n; ++i) ASSERT_NEAR(sum[i], sum_of_h[i], 1e-5) << i;
  // Scaling passes through exactly by a power of two.
  auto x = random_vector(n, 3), x4 = x;
  for (float& v : x4) v *= 4.0f;
  hadamard_transform(x.data(), n, block);
  hadamard_transform(x4.data(), n, block);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(x4[i], 4.0f * x[i]);
}

TEST(Hadamard, BlocksAreIndependentTransforms) {
  const uint64_t n = 1024, block = 32;
  auto x = random_vector(n, 4);
  auto blocks = x;
  hadamard_transform(blocks.data(), n, block);
  for (uint64_t b = 0; b < n / block; ++b) {
    std::vector<float> one(x.begin() + b * block, x.begin() + (b + 1) * block);
    hadamard_transform(one.data(), block, block);
    for (uint64_t i = 0; i < block; ++i) ASSERT_EQ(blocks[b * block + i], one[i]) << b << ":" << i;
  }
}

// The serial reference of the (randomized) transform: signs by hadamard_sign_at() with `-x`, the
// plain butterflies of fwht_unnormalized() on each block, the scale, (the inverse's signs).
std::vector<float> serial_reference(std::vector<float> x, uint64_t block, const RngKey* key, bool inverse) {
  auto signs = [&] {
    if (key != nullptr)
      for (uint64_t i = 0; i < x.size(); ++i)
        if (hadamard_sign_at(*key, i) < 0) x[i] = -x[i];
  };
  if (!inverse) signs();
  for (uint64_t b = 0; b < x.size(); b += block) fwht_unnormalized(x.data() + b, block);
  for (float& v : x) v *= hadamard_scale(block);
  if (inverse) signs();
  return x;
}

TEST(Hadamard, LargeBlocksMatchTheSerialButterflyOrderExactly) {
  // Blocks above the per-thread size run their later stages in tiled passes of up to 8 stages
  // (2^15: one stage; 2^17: three; 2^23: a pass of 8 and a pass of 1); the result must equal the
  // plain serial butterflies followed by the scale, bit for bit, whatever the thread count, for
  // one block, several blocks, and the randomized transform and its inverse.
  const RngKey key{9, 2, 0, 4};
  struct Case {
    uint64_t n, block;
  };
  for (const Case c : {Case{1u << 15, 1u << 15}, Case{1u << 17, 1u << 17}, Case{1u << 17, 1u << 16},
                       Case{1u << 23, 1u << 23}, Case{1u << 12, 1u << 10}, Case{1u << 14, 1u << 14},
                       Case{64, 8}, Case{64, 16}, Case{64, 4}}) {
    SCOPED_TRACE(fmt::format("n={} block={}", c.n, c.block));
    const auto x = random_vector(c.n, 5 + c.n + c.block);
    const std::vector<float> plain = serial_reference(x, c.block, nullptr, false),
                             forward = serial_reference(x, c.block, &key, false),
                             inverse = serial_reference(x, c.block, &key, true);
    for (const bool portable : {false, true}) {  // the hand-written AVX2 butterflies, then the loops
      const bool before = philox_batch_force_portable(portable);
      for (int threads : {1, 3}) {
        set_worker_threads(threads);
        auto got = x;
        hadamard_transform(got.data(), c.n, c.block);
        ASSERT_EQ(got, plain) << threads << " threads, portable " << portable;
        got = x;
        randomized_hadamard_transform(got.data(), c.n, c.block, key, 0);
        ASSERT_EQ(got, forward) << threads << " threads, portable " << portable;
        got = x;
        randomized_hadamard_inverse(got.data(), c.n, c.block, key, 0);
        ASSERT_EQ(got, inverse) << threads << " threads, portable " << portable;
      }
      philox_batch_force_portable(before);
    }
  }
  set_worker_threads(2);
}

TEST(Hadamard, RandomizedInverseRestoresTheInput) {
  const RngKey key{77, 1, 0, 3};
  for (uint64_t block : {32u, 4096u}) {
    SCOPED_TRACE(fmt::format("block={}", block));
    const uint64_t n = 8192;
    const auto x = random_vector(n, 6);
    auto y = x;
    randomized_hadamard_transform(y.data(), n, block, key, 100);
    // It differs from the plain transform (signs were applied) ...
    auto plain = x;
    hadamard_transform(plain.data(), n, block);
    int differ = 0;
    for (uint64_t i = 0; i < n; ++i) differ += y[i] != plain[i];
    EXPECT_GT(differ, static_cast<int>(n / 2));
    // ... is orthogonal ...
    EXPECT_NEAR(dot(y, y), dot(x, x), 1e-5 * dot(x, x));
    // ... and its inverse restores x.
    randomized_hadamard_inverse(y.data(), n, block, key, 100);
    for (uint64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << i;
    // With the wrong key it does not.
    randomized_hadamard_transform(y.data(), n, block, key, 100);
    randomized_hadamard_inverse(y.data(), n, block, RngKey{78, 1, 0, 3}, 100);
    double err = 0;
    for (uint64_t i = 0; i < n; ++i) err += std::fabs(y[i] - x[i]);
    EXPECT_GT(err, 1.0);
  }
}

TEST(Hadamard, RandomSignsAreBalancedAndKeyedByGlobalIndex) {
  const RngKey key{5, 0, 0, 1};
  int neg = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) neg += hadamard_sign_at(key, static_cast<uint64_t>(i)) < 0;
  EXPECT_NEAR(neg, n / 2, 5 * std::sqrt(n / 4.0));
  // Transforming the second half of a tensor on its own (index_base = its offset) equals the
  // second half of transforming the whole tensor.
  const uint64_t len = 2048, block = 64;
  const auto x = random_vector(len, 8);
  auto whole = x;
  randomized_hadamard_transform(whole.data(), len, block, key, 0);
  std::vector<float> part(x.begin() + len / 2, x.end());
  randomized_hadamard_transform(part.data(), len / 2, block, key, len / 2);
  for (uint64_t i = 0; i < len / 2; ++i) ASSERT_EQ(part[i], whole[len / 2 + i]) << i;
  // The sign applied to element i is hadamard_sign_at(key, index_base + i).
  std::vector<float> e(block, 0.0f);
  e[3] = 1.0f;
  randomized_hadamard_transform(e.data(), block, block, key, 1000);
  EXPECT_EQ(e[0], hadamard_sign_at(key, 1003) * hadamard_scale(block));
}

TEST(Hadamard, SpreadsAnOutlierAcrossItsBlock) {
  // The reason TLq-HS uses it: a single spike becomes a flat block of magnitude spike/sqrt(32).
  std::vector<float> x(32, 0.0f);
  x[17] = 64.0f;
  hadamard_transform(x.data(), 32, 32);
  for (float v : x) EXPECT_FLOAT_EQ(std::fabs(v), 64.0f / std::sqrt(32.0f));
}

TEST(Hadamard, NonFiniteBlocksGiveTheCanonicalNaN) {
  // A block holding NaNs (several payloads, both signs) transforms to NaNs only; one holding +inf
  // twice (entries 7 and 9) to inf - inf = NaN in the rows whose two signs differ, to an infinity
  // in the others. Every NaN is exactly the canonical 0x7FC00000 after the scale (sign-flipped by
  // the inverse's signs where they are -1), on the per-thread path (2^10) and the tiled one (2^16,
  // 2^17), with the hand-written AVX2 kernels and with the loops; a block without a non-finite
  // value is untouched by the rule.
  const RngKey key{3, 1, 0, 4};
  for (const bool portable : {false, true})
  for (const uint64_t block : {uint64_t{1} << 10, uint64_t{1} << 16, uint64_t{1} << 17}) {
    SCOPED_TRACE(fmt::format("block={} portable={}", block, portable));
    const bool before = philox_batch_force_portable(portable);
    auto x = random_vector(3 * block, 11 + block);
    x[5] = bits_to_float(0x7FC12345u);
    x[block / 2] = bits_to_float(0xFFD00001u);
    x[block + 7] = INFINITY;
    x[block + 9] = INFINITY;
    const auto clean = std::vector<float>(x.begin() + 2 * static_cast<std::ptrdiff_t>(block), x.end());
    for (int variant = 0; variant < 3; ++variant) {
      auto got = x;
      if (variant == 0) hadamard_transform(got.data(), got.size(), block);
      if (variant == 1) randomized_hadamard_transform(got.data(), got.size(), block, key, 0);
      if (variant == 2) randomized_hadamard_inverse(got.data(), got.size(), block, key, 0);
      for (uint64_t i = 0; i < 2 * block; ++i) {
        const uint64_t row = i % block;
        // The forward randomized transform's signs D reach the infinities before the butterflies.
        const bool flipped = variant == 1 && hadamard_sign_at(key, block + 7) != hadamard_sign_at(key, block + 9);
        const bool nan = i < block || (std::popcount(row & 7u) % 2 != std::popcount(row & 9u) % 2) != flipped;
        const uint32_t bits = float_to_bits(got[i]);
        if (!nan) {
          ASSERT_TRUE(std::isinf(got[i])) << "variant " << variant << " element " << i;
          continue;
        }
        const uint32_t want = variant == 2 && hadamard_sign_at(key, i) < 0 ? 0xFFC00000u : 0x7FC00000u;
        ASSERT_EQ(bits, want) << "variant " << variant << " element " << i;
      }
      auto third = clean;
      if (variant == 0) hadamard_transform(third.data(), block, block);
      if (variant == 1) randomized_hadamard_transform(third.data(), block, block, key, 2 * block);
      if (variant == 2) randomized_hadamard_inverse(third.data(), block, block, key, 2 * block);
      EXPECT_TRUE(std::equal(third.begin(), third.end(), got.begin() + 2 * static_cast<std::ptrdiff_t>(block)));
    }
    philox_batch_force_portable(before);
  }
}

}  // namespace
}  // namespace ccsim::kern
