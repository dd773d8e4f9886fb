// The synthetic gradient generator (traces/synthetic_gradients.hpp): layer boundaries and scales,
// the correlation of two workers' values, the lognormal envelope and how far workers share it
// (envelope_correlation), exact limiting cases, each value against Box–Muller computed here from its
// Philox block, and determinism.

#include "traces/synthetic_gradients.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"

namespace ccsim::traces {
namespace {

std::vector<std::vector<float>> generate(const SyntheticGradientSpec& spec, uint32_t workers, uint64_t seed) {
  std::vector<std::vector<float>> x(workers, std::vector<float>(spec.elements));
  std::vector<std::span<float>> views(x.begin(), x.end());
  generate_synthetic_gradients(spec, seed, views);
  return x;
}

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// log of the root mean square of each run of `span` entries.
std::vector<double> log_rms(const std::vector<float>& x, uint64_t span) {
  std::vector<double> out;
  for (uint64_t b = 0; b < x.size(); b += span) {
    double s = 0;
    for (uint64_t i = b; i < b + span; ++i) s += static_cast<double>(x[i]) * x[i];
    out.push_back(0.5 * std::log(s / static_cast<double>(span)));
  }
  return out;
}

SyntheticGradientSpec flat(uint64_t elements) {
  SyntheticGradientSpec spec;
  spec.elements = elements;
  spec.layers = 1;
  spec.scale_decades = 0;
  return spec;
}

TEST(SyntheticGradients, LayersCoverTheTensorWithSizesWithinFourfold) {
  SyntheticGradientSpec spec;
  spec.elements = 1'000'003;
  spec.layers = 37;
  const std::vector<uint64_t> off = synthetic_layer_offsets(spec, 5);
  ASSERT_EQ(off.size(), 38u);
  EXPECT_EQ(off.front(), 0u);
  EXPECT_EQ(off.back(), spec.elements);
  uint64_t smallest = UINT64_MAX, largest = 0;
  for (size_t l = 0; l + 1 < off.size(); ++l) {
    ASSERT_LT(off[l], off[l + 1]);
    smallest = std::min(smallest, off[l + 1] - off[l]);
    largest = std::max(largest, off[l + 1] - off[l]);
  }
  EXPECT_LE(largest, 4 * smallest + 1);  // weights 4^u, u in [0, 1)
  EXPECT_EQ(synthetic_layer_offsets(spec, 5), off);
  spec.elements = 3;  // fewer entries than layers: one entry each
  EXPECT_EQ(synthetic_layer_offsets(spec, 5), (std::vector<uint64_t>{0, 1, 2, 3}));
}

// Layer l's entries have RMS layer_scale_l * E[env^2]^(1/2): with no envelope, the per-layer RMS
// spans at most scale_decades decades, and a wide span is used.
TEST(SyntheticGradients, LayerScalesSpanTheirDecades) {
  SyntheticGradientSpec spec;
  spec.elements = 1 << 20;
  spec.layers = 16;
  spec.scale_decades = 3;
  spec.envelope_sigma = 0;
  const auto x = generate(spec, 1, 9);
  const std::vector<uint64_t> off = synthetic_layer_offsets(spec, 9);
  double lo = INFINITY, hi = 0;
  for (size_t l = 0; l + 1 < off.size(); ++l) {
    double s = 0;
    for (uint64_t i = off[l]; i < off[l + 1]; ++i) s += static_cast<double>(x[0][i]) * x[0][i];
    const double rms = std::sqrt(s / static_cast<double>(off[l + 1] - off[l]));
    lo = std::min(lo, rms);
    hi = std::max(hi, rms);
  }
  EXPECT_LE(hi, 1.05);
  EXPECT_GE(lo, 0.95e-3);
  EXPECT_GT(hi / lo, 100.0);  // 16 log-uniform draws over 3 decades
}

// Two workers' values at one index have correlation rho (flat data: one layer, no envelope).
TEST(SyntheticGradients, WorkersValuesCorrelateAsAsked) {
  for (const double rho : {0.0, 0.3, 0.8}) {
    SyntheticGradientSpec spec = flat(1 << 18);
    spec.envelope_sigma = 0;
    spec.correlation = rho;
    const auto x = generate(spec, 2, 3);
    const std::vector<double> a(x[0].begin(), x[0].end()), b(x[1].begin(), x[1].end());
    EXPECT_NEAR(correlation(a, b), rho, 0.01) << "rho " << rho;  // standard error 2e-3
    double s = 0;
    for (float v : x[0]) s += static_cast<double>(v) * v;
    EXPECT_NEAR(s / static_cast<double>(spec.elements), 1.0, 0.02);  // unit variance
  }
}

// The log-RMS of a 256-entry run is sigma times the envelope's normal, plus a small sampling term
// (standard deviation about 1/sqrt(512)): across two workers it correlates as envelope_correlation,
// and its spread is sigma.
TEST(SyntheticGradients, EnvelopesAreSharedAsFarAsAsked) {
  for (const double rho_e : {0.0, 0.5, 1.0}) {
    SyntheticGradientSpec spec = flat(uint64_t{256} * 8192);
    spec.envelope_sigma = 2;
    spec.correlation = 0.3;
    spec.envelope_correlation = rho_e;
    const auto x = generate(spec, 2, 4);
    const std::vector<double> a = log_rms(x[0], 256), b = log_rms(x[1], 256);
    EXPECT_NEAR(correlation(a, b), rho_e, 0.04) << "rho_e " << rho_e;  // standard error <= 0.011
    const double mean = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(a.size());
    double var = 0;
    for (double v : a) var += (v - mean) * (v - mean);
    EXPECT_NEAR(std::sqrt(var / static_cast<double>(a.size())), 2.0, 0.06) << "rho_e " << rho_e;
  }
}

// Exact limits: identical values (correlation 1) under one shared envelope are identical workers;
// under independent envelopes they differ by one positive factor per run of envelope_span.
TEST(SyntheticGradients, LimitingCasesAreExact) {
  SyntheticGradientSpec spec = flat(10'000);
  spec.correlation = 1;
  spec.envelope_span = 100;
  const auto same = generate(spec, 3, 8);
  EXPECT_EQ(same[1], same[0]);
  EXPECT_EQ(same[2], same[0]);
  spec.envelope_correlation = 0;
  const auto scaled = generate(spec, 2, 8);
  EXPECT_NE(scaled[1], scaled[0]);
  for (uint64_t b = 0; b < spec.elements; b += spec.envelope_span) {
    const double ratio = static_cast<double>(scaled[1][b]) / scaled[0][b];
    ASSERT_GT(ratio, 0.0) << "run " << b / spec.envelope_span;
    for (uint64_t i = b; i < b + spec.envelope_span; ++i)
      ASSERT_NEAR(static_cast<double>(scaled[1][i]) / scaled[0][i], ratio, 1e-5 * ratio) << "entry " << i;
  }
  // With no envelope (sigma 0) the workers' own envelope factors are exactly 1: the own-envelope
  // path leaves the layer scales and the noise as they are.
  spec.correlation = 0.4;
  spec.envelope_sigma = 0;
  spec.envelope_correlation = 1;
  SyntheticGradientSpec own = spec;
  own.envelope_correlation = 0;
  EXPECT_EQ(generate(own, 2, 8), generate(spec, 2, 8));
}

// With one flat layer, no envelope and no correlation, worker w's entry i is the standard normal of
// Box–Muller on Philox block i / 2 of stream {seed, 0, w + 1, 0xA00003}: z0 = r cos(2 pi u2) for even
// i, z1 = r sin(2 pi u2) for odd i, r = sqrt(-2 log(1 - u1)); computed here one entry at a time and
// compared bit for bit with the batched generator, across tile boundaries and an odd length.
TEST(SyntheticGradients, EachValueIsBoxMullerOfItsPhiloxBlock) {
  SyntheticGradientSpec spec = flat(3 * 16'384 + 4'097);
  spec.correlation = 0;
  spec.envelope_sigma = 0;
  const uint64_t seed = 77;
  const auto x = generate(spec, 2, seed);
  for (uint32_t w = 0; w < 2; ++w) {
    const kern::RngKey key{seed, 0, w + 1, 0xA00003};
    for (uint64_t i = 0; i < spec.elements; ++i) {
      const kern::U32x4 block = kern::philox_block(key, i >> 1);
      const float u1 = 1.0f - kern::u32_to_unit_float(block.v[0]);
      const float u2 = kern::u32_to_unit_float(block.v[1]);
      const float r = std::sqrt(-2.0f * std::log(u1));
      float sine = 0, cosine = 0;
      ::sincosf(6.2831853071795864769f * u2, &sine, &cosine);
      const float want = r * ((i & 1) ? sine : cosine);
      ASSERT_EQ(std::bit_cast<uint32_t>(x[w][i]), std::bit_cast<uint32_t>(want)) << "worker " << w << " entry " << i;
    }
  }
}

TEST(SyntheticGradients, DeterministicAndIndependentOfTheThreadCount) {
  SyntheticGradientSpec spec;
  spec.elements = 300'001;
  spec.envelope_correlation = 0.5;
  const int saved = kern::worker_threads();
  kern::set_worker_threads(1);
  const auto one = generate(spec, 3, 11);
  kern::set_worker_threads(5);
  const auto many = generate(spec, 3, 11);
  kern::set_worker_threads(saved);
  EXPECT_EQ(one, many);
  EXPECT_NE(generate(spec, 3, 12), one);  // another seed
  // Worker w's values do not depend on how many workers are drawn.
  EXPECT_EQ(generate(spec, 2, 11)[1], one[1]);
}

}  // namespace
}  // namespace ccsim::traces
