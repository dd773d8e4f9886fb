#include "kernels/stats/entropy.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "kernels/philox_batch.hpp"

namespace ccsim::kern {
namespace {

TEST(Entropy, ExactSmallCases) {
  // Four bins over [0, 3] (width 0.75): 0 -> 0, 1 -> 1, 2 -> 2, 3 -> 3 (the top edge).
  const std::vector<float> x = {0, 0, 1, 1, 1, 1, 2, 3};
  uint64_t counts[4];
  EXPECT_EQ(histogram(x.data(), x.size(), 4, 0.0f, 3.0f, counts), 8u);
  EXPECT_EQ(counts[0], 2u);
  EXPECT_EQ(counts[1], 4u);
  EXPECT_EQ(counts[2], 1u);
  EXPECT_EQ(counts[3], 1u);
  // p = (1/4, 1/2, 1/8, 1/8): H = 0.5 + 0.5 + 0.375 + 0.375 = 1.75 bits.
  EXPECT_DOUBLE_EQ(entropy_bits(counts, 4), 1.75);
  EXPECT_DOUBLE_EQ(histogram_entropy(x.data(), x.size(), 4), 1.75);
  // Two equally likely values: 1 bit; (1/4, 3/4): 2 - (3/4) log2 3.
  const std::vector<float> coin = {-1, 1, 1, -1};
  EXPECT_DOUBLE_EQ(histogram_entropy(coin.data(), coin.size(), 2), 1.0);
  const std::vector<float> biased = {0, 5, 5, 5};
  EXPECT_DOUBLE_EQ(histogram_entropy(biased.data(), biased.size(), 16), 2.0 - 0.75 * std::log2(3.0));
  const uint64_t c3[3] = {1, 1, 2};
  EXPECT_DOUBLE_EQ(entropy_bits(c3, 3), 1.5);
  const uint64_t empty[2] = {0, 0};
  EXPECT_EQ(entropy_bits(empty, 2), 0.0);
}

TEST(Entropy, ConstantAndEmptyInputsHaveZeroEntropy) {
  const std::vector<float> c(1000, 3.25f);
  EXPECT_EQ(histogram_entropy(c.data(), c.size(), 64), 0.0);
  EXPECT_EQ(histogram_entropy(c.data(), 0, 64), 0.0);
  EXPECT_EQ(sampled_histogram_entropy(c.data(), c.size(), 64, 0.25f, RngKey{1, 0, 0, 0}, 0), 0.0);
  EXPECT_EQ(sampled_histogram_entropy(c.data(), c.size(), 64, 0.0f, RngKey{1, 0, 0, 0}, 0), 0.0);
}

TEST(Entropy, UniformDataReachesLog2Bins) {
  for (uint32_t bins : {2u, 16u, 256u, 1000u}) {
    SCOPED_TRACE(fmt::format("bins={}", bins));
    const uint32_t per_bin = 50;
    // Evenly spread: values b + 0.5 per_bin times each, and the range [0, bins] pinned by
    // replacing one value of the first and last bins with the edges 0 and bins.
    std::vector<uint64_t> counts(bins);
    std::vector<float> y(static_cast<size_t>(bins) * per_bin);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % bins) + 0.5f;
    y[0] = 0.0f;
    y[bins - 1] = static_cast<float>(bins);
    histogram(y.data(), y.size(), bins, 0.0f, static_cast<float>(bins), counts.data());
    for (uint64_t c : counts) ASSERT_EQ(c, per_bin);
    EXPECT_NEAR(histogram_entropy(y.data(), y.size(), bins), std::log2(static_cast<double>(bins)), 1e-12);
    // Random uniform data: the plug-in estimate is below log2(bins) by about (bins-1)/(2 n ln 2).
    const RngKey key{bins, 0, 0, 0};
    std::vector<float> r(1 << 20);
    for (size_t i = 0; i < r.size(); ++i) r[i] = uniform_at(key, i);
    const double h = histogram_entropy(r.data(), r.size(), bins);
    EXPECT_LE(h, std::log2(static_cast<double>(bins)));
    EXPECT_NEAR(h, std::log2(static_cast<double>(bins)), 2.0 * bins / static_cast<double>(r.size()) + 1e-3);
  }
}

TEST(Entropy, GaussianMatchesDifferentialEntropy) {
  // For N(0, σ²) binned with width Δ, H ≈ h(X) − log2 Δ, h = ½ log2(2πe σ²) (EDGC Lemma 2).
  const RngKey key{12, 0, 0, 0};
  std::vector<float> x(1 << 20);
  for (size_t i = 0; i < x.size(); i += 2) {  // Box–Muller
    const double u1 = 1.0 - uniform_at(key, i), u2 = uniform_at(key, i + 1);
    const double r = std::sqrt(-2.0 * std::log(u1));
    x[i] = static_cast<float>(r * std::cos(2 * std::numbers::pi * u2));
    x[i + 1] = static_cast<float>(r * std::sin(2 * std::numbers::pi * u2));
  }
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  const uint32_t bins = 512;
  const double delta = (static_cast<double>(hi) - lo) / bins;
  const double want = 0.5 * std::log2(2 * std::numbers::pi * std::numbers::e) - std::log2(delta);
  EXPECT_NEAR(histogram_entropy(x.data(), x.size(), bins), want, 0.02);
}

TEST(Entropy, SampledEstimateIsDeterministicAndClose) {
  const RngKey key{99, 4, 2, 7};
  std::vector<float> x(1 << 20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.001f) * static_cast<float>(1 + i % 7);
  const double full = histogram_entropy(x.data(), x.size(), 256);
  EXPECT_DOUBLE_EQ(sampled_histogram_entropy(x.data(), x.size(), 256, 1.0f, key, 0), full);
  const double s1 = sampled_histogram_entropy(x.data(), x.size(), 256, 0.25f, key, 0);
  const double s2 = sampled_histogram_entropy(x.data(), x.size(), 256, 0.25f, key, 0);
  EXPECT_EQ(s1, s2);
  EXPECT_NEAR(s1, full, 0.02);
  EXPECT_NE(s1, sampled_histogram_entropy(x.data(), x.size(), 256, 0.25f, RngKey{100, 4, 2, 7}, 0));
  // The sample is Bernoulli(β) per entry: about β·n entries.
  uint64_t taken = 0;
  for (uint64_t i = 0; i < x.size(); ++i) taken += in_sample(key, i, 0.25f);
  const double n = static_cast<double>(x.size());
  EXPECT_NEAR(static_cast<double>(taken), 0.25 * n, 5 * std::sqrt(0.25 * 0.75 * n));
  // The sample is keyed by global index: with index_base 1000 the selected entries are those with
  // in_sample(key, 1000 + i), and the estimate is the plain entropy of exactly those entries.
  std::vector<float> picked;
  for (uint64_t i = 0; i < x.size(); ++i)
    if (in_sample(key, 1000 + i, 0.25f)) picked.push_back(x[i]);
  EXPECT_DOUBLE_EQ(sampled_histogram_entropy(x.data(), x.size(), 64, 0.25f, key, 1000),
                   histogram_entropy(picked.data(), picked.size(), 64));
}

TEST(Entropy, NonFiniteEntriesAreSkipped) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0, 1, nan, inf, -inf, 1, 0};
  EXPECT_DOUBLE_EQ(histogram_entropy(x.data(), x.size(), 2), 1.0);
  uint64_t counts[2];
  EXPECT_EQ(histogram(x.data(), x.size(), 2, 0.0f, 1.0f, counts), 4u);
  // Values outside [lo, hi] clamp into the end bins.
  const std::vector<float> y = {-5, 0.2f, 0.7f, 9};
  EXPECT_EQ(histogram(y.data(), y.size(), 2, 0.0f, 1.0f, counts), 4u);
  EXPECT_EQ(counts[0], 2u);
  EXPECT_EQ(counts[1], 2u);
  EXPECT_EQ(histogram_bin(1.0f, 0.0f, 1.0f, 10), 9u);
  EXPECT_EQ(histogram_bin(0.0f, 0.0f, 1.0f, 10), 0u);
  EXPECT_EQ(histogram_bin(0.1f, 0.0f, 1.0f, 10), 1u);  // 0.1f is just above 0.1
}

// sample_finite() against the definition (every finite x[i] with in_sample(key, base + i, fraction),
// in order, and their range), with the AVX-512, AVX2 and portable paths, at index bases off a
// Philox block and lengths either side of a tile, on data with NaN, infinities, signed zeros and
// subnormals, and at fractions equal to uniforms the sample draws (kept only strictly below).
TEST(SampleFinite, EqualsTheUniformsSelectionAndRange) {
  const RngKey key{23, 4, 1, 9};
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f,
                            -1e-40f, std::numeric_limits<float>::max()};
  uint64_t checked_kept = 0;
  for (const uint64_t base : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 33 | 6}) {
    const float drawn = uniform_at(key, base + 5);  // a fraction some entry's uniform equals
    for (const float fraction : {0.0f, 0x1p-24f, 0.25f, drawn, std::nextafter(drawn, 1.0f), 1.0f}) {
      for (const uint64_t n : {0, 1, 7, 8, 9, 13, 16, 17, 70, 511, 512, 1030}) {
        std::vector<float> x(n);
        for (uint64_t i = 0; i < n; ++i) {
          const uint32_t bits = random_bits_at(RngKey{5, 0, 0, 1}, i);
          x[i] = bits % 6 == 0 ? specials[bits % 8] : std::ldexp(static_cast<float>(bits % 2001) - 1000.0f, -8);
        }
        std::vector<float> want;
        float want_lo = INFINITY, want_hi = -INFINITY;
        for (uint64_t i = 0; i < n; ++i)
          if (in_sample(key, base + i, fraction) && std::isfinite(x[i])) {
            want.push_back(x[i]);
            want_lo = std::min(want_lo, x[i]);
            want_hi = std::max(want_hi, x[i]);
          }
        const uint64_t want_kept = want.size();
        for (const char* path : {"widest", "avx2", "portable"}) {
          SCOPED_TRACE(fmt::format("base {} fraction {} n {} path {}", base, fraction, n, path));
          const bool saved = philox_batch_force_portable(path[0] == 'p');
          const bool saved_avx2 = philox_batch_force_avx2(path[0] == 'a');
          std::vector<float> got(n + 1, 7.0f);
          float lo = INFINITY, hi = -INFINITY;
          const uint64_t kept = sample_finite(key, base, x.data(), n, fraction, got.data(), lo, hi);
          philox_batch_force_avx2(saved_avx2);
          philox_batch_force_portable(saved);
          ASSERT_EQ(kept, want_kept);
          for (uint64_t k = 0; k < kept; ++k)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k])) << "entry " << k;
          EXPECT_EQ(got[n], 7.0f) << "written past count";
          EXPECT_EQ(lo, want_lo);  // equal as numbers: which zero is not fixed
          EXPECT_EQ(hi, want_hi);
          checked_kept += kept;
        }
      }
    }
  }
  EXPECT_GT(checked_kept, 8000u);
  float lo = -1.0f, hi = 1.0f;  // lo and hi only widen
  std::vector<float> one = {0.5f}, out(1);
  EXPECT_EQ(sample_finite(key, 0, one.data(), 1, 1.0f, out.data(), lo, hi), 1u);
  EXPECT_EQ(lo, -1.0f);
  EXPECT_EQ(hi, 1.0f);
}

TEST(BlockStats, MaxAbsAndSumOfSquares) {
  const std::vector<float> x = {1, -3, 2, 0.5f, -0.25f, 4, -4, 1, 7};
  std::vector<float> m(3);
  std::vector<double> s(3);
  block_max_abs(x.data(), x.size(), 4, m.data());
  block_sum_squares(x.data(), x.size(), 4, s.data());
  EXPECT_EQ(m, (std::vector<float>{3, 4, 7}));
  EXPECT_EQ(s, (std::vector<double>{1 + 9 + 4 + 0.25, 0.0625 + 16 + 16 + 1, 49}));
  EXPECT_EQ(max_abs(x.data(), x.size()), 7.0f);
  EXPECT_EQ(max_abs(x.data(), 0), 0.0f);
  EXPECT_EQ(sum_squares(x.data(), 3), 14.0);
  // NaN propagates through max_abs (an MX block with a NaN gets a NaN scale).
  const std::vector<float> bad = {1, std::numeric_limits<float>::quiet_NaN(), 5};
  EXPECT_TRUE(std::isnan(max_abs(bad.data(), bad.size())));
  EXPECT_EQ(max_abs(bad.data(), 1), 1.0f);
  // Infinity is a magnitude like any other.
  const std::vector<float> big = {-std::numeric_limits<float>::infinity(), 1};
  EXPECT_EQ(max_abs(big.data(), big.size()), std::numeric_limits<float>::infinity());
}

// abs_extremes(): its largest is max_abs()'s, its smallest the plain scan's (smallest |x| > 0,
// NaN never taken), on entries that mix zeros of both signs, subnormals, infinities, NaNs and
// normals, at every length up to 40 and some longer (the vectorized row and its tail); host_max_abs()
// gives max_abs()'s bits.
TEST(BlockStats, AbsExtremesAreMaxAbsAndThePlainScan) {
  auto plain = [](const float* x, uint64_t n) {
    float m = std::numeric_limits<float>::infinity();
    for (uint64_t i = 0; i < n; ++i) {
      const float v = std::fabs(x[i]);
      if (v > 0.0f && v < m) m = v;
    }
    return m;
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {0.0f, -0.0f, 1e-45f, -3e-42f, 1.17549435e-38f, -2.5f, 7.0f, inf, -inf, nan, -nan, 3e38f};
  std::mt19937 gen(41);
  for (uint64_t n = 0; n <= 300; n += n < 40 ? 1 : 37)
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = pool[gen() % std::size(pool)];
      float most = 1.0f, least = 1.0f;
      abs_extremes(x.data(), n, most, least);
      EXPECT_EQ(std::bit_cast<uint32_t>(most), std::bit_cast<uint32_t>(max_abs(x.data(), n))) << "length " << n;
      EXPECT_EQ(std::bit_cast<uint32_t>(least), std::bit_cast<uint32_t>(plain(x.data(), n))) << "length " << n;
      EXPECT_EQ(std::bit_cast<uint32_t>(host_max_abs(x.data(), n)), std::bit_cast<uint32_t>(most)) << "length " << n;
    }
  const std::vector<float> some = {0.0f, -4.0f, nan, 0.5f, -inf};
  float most = 0.0f, least = 0.0f;
  abs_extremes(some.data(), some.size(), most, least);
  EXPECT_TRUE(std::isnan(most));
  EXPECT_EQ(least, 0.5f);
  abs_extremes(some.data(), 2, most, least);
  EXPECT_EQ(most, 4.0f);
  EXPECT_EQ(least, 4.0f);
  abs_extremes(some.data(), 0, most, least);
  EXPECT_EQ(most, 0.0f);
  EXPECT_EQ(least, inf);
}

// max_abs() bit for bit against the plain serial scan it replaces (the early-exit loop the CUDA
// kernels' key reductions were written against): |x| by negation, the first NaN as stored.
TEST(BlockStats, MaxAbsMatchesTheSerialScanBitForBit) {
  auto serial = [](const std::vector<float>& x) {
    float m = 0.0f;
    for (const float v : x) {
      const float a = v < 0.0f ? -v : v;
      if (a > m || a != a) m = a;
      if (m != m) break;
    }
    return m;
  };
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  };
  auto from_bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  const float inf = std::numeric_limits<float>::infinity(), denorm = std::numeric_limits<float>::denorm_min();
  const float nan_a = from_bits(0x7FC00123u), nan_b = from_bits(0xFFC00456u), snan = from_bits(0x7F800001u);
  std::vector<std::vector<float>> cases = {
      {}, {-0.0f}, {-0.0f, 0.0f, -0.0f}, {denorm, -2 * denorm}, {-inf, 3}, {inf, -inf},
      {1, nan_b, 5, nan_a}, {nan_a, nan_b}, {-7, snan, inf}, {-1e38f, 3e38f, -3.4e38f}};
  for (uint64_t seed = 0; seed < 20; ++seed) {  // random bit patterns of every kind, lengths 1..199
    std::vector<float> x(1 + seed * 10);
    for (uint64_t i = 0; i < x.size(); ++i) {
      uint32_t u = random_bits_at(RngKey{seed, 0, 0, 1}, i);
      if (seed % 2 == 0) u &= 0xFF7FFFFFu;  // half the arrays without NaN or inf
      x[i] = from_bits(u);
    }
    cases.push_back(std::move(x));
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(bits(max_abs(cases[c].data(), cases[c].size())), bits(serial(cases[c]))) << "case " << c;
    EXPECT_EQ(bits(host_max_abs(cases[c].data(), cases[c].size())), bits(serial(cases[c]))) << "case " << c;
  }
}

TEST(BlockStats, ResultsIndependentOfThreadCount) {
  std::vector<float> x((1 << 20) + 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i));
  std::vector<std::vector<double>> sums;
  std::vector<std::vector<float>> maxes;
  for (int threads : {1, 4}) {
    set_worker_threads(threads);
    sums.emplace_back((x.size() + 255) / 256);
    maxes.emplace_back((x.size() + 255) / 256);
    block_sum_squares(x.data(), x.size(), 256, sums.back().data());
    block_max_abs(x.data(), x.size(), 256, maxes.back().data());
  }
  set_worker_threads(2);
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(maxes[0], maxes[1]);
}

// The rows of finite_range() and histogram() (AVX2 where the machine has it, and the portable
// loops) against the element definitions: the range over finite entries, each finite entry
// counted in histogram_bin(). The entries lie on, next to and a few floats off the bins' edges,
// and near zero, where a run of floats shares one quotient.
TEST(EntropyRows, RangeAndHistogramEqualTheElementDefinitions) {
  std::mt19937 gen(21);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const float big = std::numeric_limits<float>::max();
  for (bool portable : {false, true}) {
    const bool before = philox_batch_force_portable(portable);
    for (uint64_t n : {0u, 1u, 7u, 8u, 9u, 31u, 1000u, 4099u, 20000u, 70001u}) {
      for (uint32_t bins : {1u, 2u, 7u, 49u, 100u, 256u, 1000u, 4096u, 65536u}) {
        if (n > 20000 && bins < 1000) continue;
        std::vector<float> x(n);
        for (uint64_t i = 0; i < n; ++i) {
          const uint32_t kind = gen() % 32;
          x[i] = kind == 0   ? NAN
                 : kind == 1 ? INFINITY
                 : kind == 2 ? -INFINITY
                 : kind == 3 ? (gen() % 2 ? 0.0f : -0.0f)
                 : kind == 4 ? std::ldexp(unit(gen), -static_cast<int>(gen() % 150))
                             : std::ldexp(unit(gen), static_cast<int>(gen() % 9) - 4);
        }
        float want_lo = INFINITY, want_hi = -INFINITY;
        for (float v : x)
          if (std::isfinite(v)) {
            want_lo = std::min(want_lo, v);
            want_hi = std::max(want_hi, v);
          }
        float lo, hi;
        finite_range(x.data(), n, lo, hi);
        EXPECT_EQ(lo, want_lo) << n;  // equal as numbers: which zero is not fixed
        EXPECT_EQ(hi, want_hi) << n;
        // Ranges from the data, one that clamps entries at both ends, [0, bins], whose bin edges
        // are the integers, where the definition's order of operations decides the bin
        // ((k / 49) · 49 < k for some k), one centred on zero, the widest and a subnormal one;
        // every fourth entry on a bin edge, the next up to three floats off one.
        const std::pair<float, float> ranges[] = {{want_lo, want_hi}, {-0.25f, 0.5f}, {0.0f, static_cast<float>(bins)},
                                                  {-4.0f, 4.0f},      {-big, big},    {-1e-39f, 3e-39f}};
        for (auto [a, b] : ranges) {
          if (!(b > a)) continue;
          for (uint64_t i = 0; i + 4 < n; i += 4) {
            const double t = static_cast<double>(gen() % (bins + 1)) / bins;
            x[i] = static_cast<float>(a + (static_cast<double>(b) - a) * t);
            x[i + 1] = x[i];
            for (uint32_t k = gen() % 4; k > 0; --k) x[i + 1] = std::nextafter(x[i + 1], gen() % 2 ? big : -big);
          }
          std::vector<uint64_t> want(bins, 0), got(bins, 7);
          uint64_t want_n = 0;
          for (float v : x)
            if (std::isfinite(v)) {
              ++want[histogram_bin(v, a, b, bins)];
              ++want_n;
            }
          EXPECT_EQ(histogram(x.data(), n, bins, a, b, got.data()), want_n);
          EXPECT_EQ(got, want) << n << " entries, " << bins << " bins over [" << a << ", " << b << "]"
                               << (portable ? " (portable)" : "");
        }
      }
    }
    philox_batch_force_portable(before);
  }
}

}  // namespace
}  // namespace ccsim::kern
