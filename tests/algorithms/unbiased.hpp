#pragma once
// Statistical unbiasedness check shared by the compressor and numerics tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

namespace ccsim::algo::testing {

/// Accumulates per-element sums and squared sums of repeated estimates of `exact`.
class UnbiasednessSampler {
 public:
  explicit UnbiasednessSampler(std::vector<double> exact)
      : exact_(std::move(exact)), sum_(exact_.size(), 0.0), sq_(exact_.size(), 0.0) {}

  void add(std::span<const float> estimate) {
    for (size_t i = 0; i < exact_.size(); ++i) {
      sum_[i] += estimate[i];
      sq_[i] += static_cast<double>(estimate[i]) * estimate[i];
    }
    ++trials_;
  }

  /// For an unbiased estimator the bias b_i = mean_i − x_i has E[b_i²] = var_i / trials, so Σ b_i²
  /// concentrates around Σ var_i / trials (a chi-square with one degree of freedom per element);
  /// twice that is a many-sigma excursion for hundreds of elements, while a biased estimator
  /// exceeds it by orders of magnitude. Per-element z-scores would be fooled by rare roundings
  /// that never occur in the sample (zero sample variance).
  ::testing::AssertionResult unbiased() const {
    double bias2 = 0, var_sum = 0;
    const auto n = static_cast<double>(trials_);
    for (size_t i = 0; i < exact_.size(); ++i) {
      const double m = sum_[i] / n, var = std::max(0.0, sq_[i] / n - m * m);
      bias2 += (m - exact_[i]) * (m - exact_[i]);
      var_sum += var;
    }
    if (!(var_sum > 0)) return ::testing::AssertionFailure() << "the estimates never varied (deterministic estimator?)";
    if (!(bias2 < 2.0 * var_sum / n))
      return ::testing::AssertionFailure() << "sum of squared biases " << bias2 << " >= 2x its expectation under "
                                           << "unbiasedness " << var_sum / n;
    return ::testing::AssertionSuccess();
  }

 private:
  std::vector<double> exact_;
  std::vector<double> sum_, sq_;
  int trials_ = 0;
};

}  // namespace ccsim::algo::testing
