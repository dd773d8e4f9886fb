#pragma once
// Test data for the CPU kernel rows: floats with every case a row must get right.

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/float_bits.hpp"

namespace ccsim::kern {

// Heavy-tailed floats; runs of zeros, signed zeros, ±denormals; ±inf and NaN; exact ties of the
// 4- and 8-bit grids; an all-equal run; a run of random bit patterns.
inline std::vector<float> adversarial_floats(uint64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::student_t_distribution<float> t(3.0f);
  std::uniform_real_distribution<float> decade(-8.0f, 0.0f);
  std::vector<float> x(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = std::pow(10.0f, decade(gen)) * t(gen);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float dmin = std::numeric_limits<float>::denorm_min();
  auto run = [&](uint64_t a, uint64_t b, auto fn) {
    for (uint64_t i = a; i < b && i < n; ++i) x[i] = fn(i);
  };
  run(0, 256, [](uint64_t) { return 0.0f; });
  run(256, 512, [&](uint64_t i) { return dmin * static_cast<float>(static_cast<int>(i % 7) - 3); });
  run(512, 768, [](uint64_t i) { return i % 2 ? -0.0f : 0.0f; });
  run(768, 1024, [](uint64_t) { return 0.375f; });  // all equal
  run(1024, 1280, [](uint64_t i) { return static_cast<float>(static_cast<int>(i % 255) - 127) / 254.0f; });
  run(1280, 1536, [](uint64_t i) { return static_cast<float>(static_cast<int>(i % 15) - 7) / 14.0f; });
  run(1536, 1792, [&](uint64_t) { return bits_to_float(static_cast<uint32_t>(gen())); });
  if (n > 1300) x[1300] = -1.0f;
  if (n > 1800) x[1800] = inf;
  if (n > 1900) x[1900] = nan;
  if (n > 2000) x[2000] = -inf;
  if (n > 2100) x[2100] = -nan;
  return x;
}

}  // namespace ccsim::kern
