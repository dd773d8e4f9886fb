#include "kernels/stats/error_sums.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/philox_batch.hpp"

namespace ccsim::kern {
namespace {

// The definitions, as plain loops.
std::vector<float> plain_sum(const std::vector<std::vector<float>>& in, uint64_t n) {
  std::vector<float> exact(n);
  for (uint64_t i = 0; i < n; ++i) {
    double acc = 0.0;
    for (const auto& x : in) acc += x[i];
    exact[i] = static_cast<float>(acc);
  }
  return exact;
}

void plain_errors(const std::vector<float>& exact, const std::vector<std::vector<float>>& got, std::vector<double>& se,
                  double& sn) {
  se.assign(got.size(), 0.0);
  for (size_t o = 0; o < got.size(); ++o) {
    double e = 0, s = 0;
    for (uint64_t i = 0; i < exact.size(); ++i) {
      const double x = exact[i], d = x - static_cast<double>(got[o][i]);
      e += d * d;
      s += x * x;
    }
    se[o] = e;
    sn = s;
  }
  if (got.empty()) {
    sn = 0;
    for (float v : exact) sn += static_cast<double>(v) * static_cast<double>(v);
  }
}

// Values over many decades, signed zeros, and entries whose double sums round (so that any change
// of order would show).
std::vector<float> values(uint64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-40, 40);
  std::vector<float> x(n);
  for (auto& v : x) {
    const int kind = static_cast<int>(gen() % 16);
    v = kind == 0 ? 0.0f : kind == 1 ? -0.0f : std::ldexp(mant(gen), exp(gen));
  }
  return x;
}

struct ForcePortable {
  explicit ForcePortable(bool force) : before(philox_batch_force_portable(force)) {}
  ~ForcePortable() { philox_batch_force_portable(before); }
  bool before;
};

TEST(ErrorSums, EqualThePlainLoops) {
  std::mt19937 gen(11);
  for (bool portable : {false, true}) {
    ForcePortable force(portable);
    for (uint32_t count : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 12u, 13u, 16u, 17u}) {
      for (uint64_t n : {0u, 1u, 3u, 4u, 5u, 8u, 1023u, 1024u, 1029u, 4099u}) {
        std::vector<std::vector<float>> in, got;
        for (uint32_t r = 0; r < count; ++r) {
          in.push_back(values(n, gen));
          got.push_back(values(n, gen));
        }
        const std::vector<float> want_exact = plain_sum(in, n);
        std::vector<const float*> ip, gp;
        for (uint32_t r = 0; r < count; ++r) {
          ip.push_back(in[r].data());
          gp.push_back(got[r].data());
        }
        std::vector<float> exact(n, NAN);
        sum_to_float(ip.data(), count, n, exact.data());
        for (uint64_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(exact[i]), std::bit_cast<uint32_t>(want_exact[i]))
              << "sum, " << count << " inputs, entry " << i << " of " << n << (portable ? " (portable)" : "");
        std::vector<double> want_se, se(count, NAN);
        double want_sn = 0, sn = NAN;
        plain_errors(want_exact, got, want_se, want_sn);
        squared_errors(want_exact.data(), gp.data(), count, n, se.data(), &sn);
        EXPECT_EQ(std::bit_cast<uint64_t>(sn), std::bit_cast<uint64_t>(want_sn)) << count << " outputs, n " << n;
        for (uint32_t o = 0; o < count; ++o)
          EXPECT_EQ(std::bit_cast<uint64_t>(se[o]), std::bit_cast<uint64_t>(want_se[o]))
              << "output " << o << " of " << count << ", n " << n << (portable ? " (portable)" : "");
      }
    }
  }
}

TEST(ErrorSums, KnownValues) {
  // exact = 1 + 2 = 3 and 0.5 + 0.25 = 0.75; outputs off by (1, 0) and (0, 0.25).
  const std::vector<float> a = {1.0f, 0.5f}, b = {2.0f, 0.25f}, o1 = {2.0f, 0.75f}, o2 = {3.0f, 0.5f};
  const float* in[2] = {a.data(), b.data()};
  float exact[2];
  sum_to_float(in, 2, 2, exact);
  EXPECT_EQ(exact[0], 3.0f);
  EXPECT_EQ(exact[1], 0.75f);
  const float* got[2] = {o1.data(), o2.data()};
  double se[2], sn;
  squared_errors(exact, got, 2, 2, se, &sn);
  EXPECT_EQ(se[0], 1.0);
  EXPECT_EQ(se[1], 0.0625);
  EXPECT_EQ(sn, 9.5625);
}

}  // namespace
}  // namespace ccsim::kern
