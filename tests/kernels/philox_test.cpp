#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"

namespace ccsim::kern {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    U32x4 ctr;
    uint32_t k0, k1;
    U32x4 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const auto& k : kats) {
    const U32x4 got = philox4x32<10>(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
  }
}

TEST(Philox, KeyFieldsSelectIndependentStreams) {
  const RngKey base{42, 3, 5, 7};
  RngKey other = base;
  other.stream = 8;
  RngKey other_rank = base;
  other_rank.rank = 6;
  int same_stream = 0, same_rank = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_stream += random_bits_at(base, i) == random_bits_at(other, i);
    same_rank += random_bits_at(base, i) == random_bits_at(other_rank, i);
  }
  EXPECT_LE(same_stream, 1);
  EXPECT_LE(same_rank, 1);
}

TEST(Philox, UniformMomentsMatchU01) {
  const RngKey key{7, 0, 0, 1};
  const int n = 1 << 20;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_at(key, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  // Standard error of the mean is sqrt(1/12/n) ≈ 2.8e-4; allow 5 sigma.
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(var, 1.0 / 12, 1e-3);
}

TEST(ParallelFor, CoversRangeExactlyOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    set_worker_threads(threads);
    std::vector<int> hits(100003, 0);
    parallel_for(hits.size(), 1000, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int h : hits) ASSERT_EQ(h, 1) << threads << " threads";
  }
  set_worker_threads(2);
}

// Under a SerialScope a parallel_for runs its whole range in one call on the calling thread, nested
// scopes restore what they found, and other threads are not affected.
TEST(ParallelFor, SerialScopeRunsInlineOnItsThread) {
  const int saved = worker_threads();
  set_worker_threads(4);
  auto calls = [](std::vector<std::thread::id>* ids) {
    std::mutex m;
    std::vector<std::pair<uint64_t, uint64_t>> pieces;
    parallel_for(1000, 10, [&](uint64_t b, uint64_t e) {
      const std::lock_guard lock(m);
      pieces.emplace_back(b, e);
      if (ids) ids->push_back(std::this_thread::get_id());
    });
    return pieces.size();
  };
  EXPECT_EQ(calls(nullptr), 4u);
  {
    const SerialScope outer;
    std::vector<std::thread::id> ids;
    EXPECT_EQ(calls(&ids), 1u);
    EXPECT_EQ(ids, std::vector<std::thread::id>{std::this_thread::get_id()});
    {
      const SerialScope inner;
      EXPECT_EQ(calls(nullptr), 1u);
    }
    EXPECT_EQ(calls(nullptr), 1u);
    size_t elsewhere = 0;
    std::thread other([&] { elsewhere = calls(nullptr); });
    other.join();
    EXPECT_EQ(elsewhere, 4u);
  }
  EXPECT_EQ(calls(nullptr), 4u);
  set_worker_threads(saved);
}

}  // namespace
}  // namespace ccsim::kern
