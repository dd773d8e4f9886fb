#pragma once
// Inputs and one-message round trips shared by the compression scheme tests.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "algorithms/registry.hpp"

namespace ccsim::algo::testing {

// Inputs no scheme may turn into NaN or inf: zeros, constants, denormals, values near the float
// maximum, and the maximum next to tiny values.
struct EdgeInput {
  const char* what;
  std::vector<float> x;
};

inline std::vector<EdgeInput> edge_inputs(uint64_t n) {
  constexpr float kMax = std::numeric_limits<float>::max();
  const float denorm = std::numeric_limits<float>::denorm_min();
  std::vector<EdgeInput> in = {{"zeros", std::vector<float>(n, 0.0f)},
                               {"negative zeros", std::vector<float>(n, -0.0f)},
                               {"constant", std::vector<float>(n, 0.3f)},
                               {"large constant", std::vector<float>(n, -7e20f)},
                               {"denormals", {}},
                               {"huge", {}},
                               {"huge and tiny", {}}};
  for (uint64_t i = 0; i < n; ++i) {
    in[4].x.push_back((i % 2 ? -1.0f : 1.0f) * denorm * static_cast<float>(1 + i % 97));
    in[5].x.push_back(i % 3 == 0 ? kMax : (i % 3 == 1 ? -3e38f : 3e38f));
    in[6].x.push_back(i % 64 == 0 ? -kMax : 1e-30f * static_cast<float>(i));
  }
  return in;
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/// The registered scheme `name` with `params` (a failed creation fails the test and gives null).
inline std::unique_ptr<Compressor> make(const char* name, const nlohmann::json& params = nlohmann::json::object()) {
  auto made = CompressorRegistry::global().create(name, params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

/// Values spanning five decades with both signs.
inline std::vector<float> test_vector(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = std::sin(static_cast<float>(i) * 0.7f) * std::pow(10.0f, static_cast<float>(i % 5) - 3);
  return x;
}

/// n i.i.d. N(0, sigma²) values from std::mt19937(seed).
inline std::vector<float> normal_vector(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(gen);
  return x;
}

/// decode(encode(x)) of x as one chunk at offset 0, randomness from RngKey{seed, 0, 0, 0}.
inline std::vector<float> round_trip(Compressor& c, const std::vector<float>& x, const HopContext& hop,
                                     uint64_t seed = 1) {
  const TensorSpec spec{0, x.size()};
  std::vector<uint8_t> msg(c.wire_bytes(spec, hop));
  c.encode(x, spec, hop, kern::RngKey{seed, 0, 0, 0}, msg);
  std::vector<float> d(x.size());
  c.decode(msg, spec, hop, d);
  return d;
}

/// ‖exact − got‖² / ‖exact‖², in double.
inline double relative_mse(const std::vector<float>& exact, const std::vector<float>& got) {
  double se = 0, sn = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double d = static_cast<double>(exact[i]) - got[i];
    se += d * d;
    sn += static_cast<double>(exact[i]) * exact[i];
  }
  return se / sn;
}

}  // namespace ccsim::algo::testing
