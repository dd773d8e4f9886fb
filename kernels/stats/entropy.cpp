#include "kernels/stats/entropy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

bool is_finite(float v) { return std::isfinite(v); }

// Calls fn(v) for every finite entry of the sample, in index order. One Philox block serves four
// consecutive global indices; fraction >= 1 skips the draws (u < 1 always holds).
template <class Fn>
void for_each_sampled(const float* x, uint64_t count, float fraction, const RngKey& key, uint64_t index_base, Fn&& fn) {
  if (fraction >= 1.0f) {
    for (uint64_t i = 0; i < count; ++i)
      if (is_finite(x[i])) fn(x[i]);
    return;
  }
  for_each_uniform(key, index_base, 0, count, [&](uint64_t i, float u) {  // in_sample(key, index_base + i, fraction)
    if (u < fraction && is_finite(x[i])) fn(x[i]);
  });
}

double sampled_entropy(const float* x, uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                       uint64_t index_base) {
  CCSIM_CHECK(bins >= 1, "histogram needs at least one bin");
  CCSIM_CHECK(fraction >= 0.0f && fraction <= 1.0f, "sample fraction {} not in [0, 1]", fraction);
  float lo = INFINITY, hi = -INFINITY;
  for_each_sampled(x, count, fraction, key, index_base, [&](float v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  });
  if (!(hi > lo)) return 0.0;  // empty sample or a single value
  std::vector<uint64_t> counts(bins, 0);
  for_each_sampled(x, count, fraction, key, index_base, [&](float v) { ++counts[histogram_bin(v, lo, hi, bins)]; });
  return entropy_bits(counts.data(), bins);
}

template <class Fn>
void for_blocks(uint64_t count, uint64_t block, Fn&& fn) {
  CCSIM_CHECK(block >= 1, "block size must be positive");
  const uint64_t blocks = (count + block - 1) / block;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / block);
  parallel_for(blocks, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t b = b0; b < b1; ++b) fn(b, b * block, std::min(count, (b + 1) * block));
  });
}

}  // namespace

double entropy_bits(const uint64_t* counts, uint32_t bins) {
  uint64_t total = 0;
  for (uint32_t b = 0; b < bins; ++b) total += counts[b];
  if (total == 0) return 0.0;
  double h = 0.0;
  for (uint32_t b = 0; b < bins; ++b) {
    if (counts[b] == 0) continue;
    const double p = static_cast<double>(counts[b]) / static_cast<double>(total);
    h -= p * std::log2(p);
  }
  return h;
}

uint64_t histogram(const float* x, uint64_t count, uint32_t bins, float lo, float hi, uint64_t* counts) {
  CCSIM_CHECK(bins >= 1, "histogram needs at least one bin");
  CCSIM_CHECK(hi > lo, "histogram range [{}, {}] is empty", lo, hi);
  std::fill(counts, counts + bins, uint64_t{0});
  uint64_t n = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (!is_finite(x[i])) continue;
    ++counts[histogram_bin(x[i], lo, hi, bins)];
    ++n;
  }
  return n;
}

double histogram_entropy(const float* x, uint64_t count, uint32_t bins) {
  return sampled_entropy(x, count, bins, 1.0f, RngKey{}, 0);
}

double sampled_histogram_entropy(const float* x, uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                                 uint64_t index_base) {
  return sampled_entropy(x, count, bins, fraction, key, index_base);
}

void block_max_abs(const float* x, uint64_t count, uint64_t block, float* out) {
  for_blocks(count, block, [&](uint64_t b, uint64_t begin, uint64_t end) { out[b] = max_abs(x + begin, end - begin); });
}

float parallel_max_abs(const float* x, uint64_t count) {
  constexpr uint64_t kPiece = uint64_t{1} << 16;
  std::vector<float> partial((count + kPiece - 1) / kPiece);
  block_max_abs(x, count, kPiece, partial.data());
  return max_abs(partial.data(), partial.size());
}

void block_sum_squares(const float* x, uint64_t count, uint64_t block, double* out) {
  for_blocks(count, block,
             [&](uint64_t b, uint64_t begin, uint64_t end) { out[b] = sum_squares(x + begin, end - begin); });
}

}  // namespace ccsim::kern
