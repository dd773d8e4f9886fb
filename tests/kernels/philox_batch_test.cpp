#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/philox.hpp"
#include "kernels/philox_batch.hpp"

namespace ccsim::kern {
namespace {

// Restores the implementation choice when a test ends.
struct ForcePortable {
  explicit ForcePortable(bool force) : before(philox_batch_force_portable(force)) {}
  ~ForcePortable() { philox_batch_force_portable(before); }
  bool before;
};

// The implementations under test: the machine's best, its AVX2 rounds (the same as the best where
// the machine lacks AVX-512VL), the portable loop.
enum class Impl { kNative, kAvx2, kPortable };

struct ForceImpl {
  explicit ForceImpl(Impl impl)
      : portable(impl == Impl::kPortable), avx2(philox_batch_force_avx2(impl == Impl::kAvx2)) {}
  ~ForceImpl() { philox_batch_force_avx2(avx2); }
  ForcePortable portable;
  bool avx2;
};

// Every start alignment and length around the 32- and 128-element batches, keys with every field
// set, and indices that cross the 2^32-block boundary of the counter's first word.
class PhiloxBatch : public ::testing::TestWithParam<Impl> {};

TEST_P(PhiloxBatch, BitsEqualThePerElementGenerator) {
  const ForceImpl force(GetParam());
  const RngKey keys[] = {{0, 0, 0, 0}, {0x123456789ABCDEF0ull, 7, 3, 0xFFFFFF}, {42, 0xFFFFFFFFu, 0xFFFFFFFFu, 1}};
  const uint64_t starts[] = {0, 1, 2, 3, 5, 31, 1000, (uint64_t{1} << 34) - 37, (uint64_t{1} << 42) - 100};
  for (const RngKey& key : keys) {
    for (uint64_t start : starts) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{31}, uint64_t{32}, uint64_t{33}, uint64_t{97}, uint64_t{128},
                             uint64_t{161}, uint64_t{1500}}) {
        std::vector<uint32_t> bits(count + 1, 0xDEADBEEFu);
        std::vector<float> uni(count + 1, -1.0f);
        random_bits_fill(key, start, count, bits.data());
        uniform_fill(key, start, count, uni.data());
        for (uint64_t j = 0; j < count; ++j) {
          ASSERT_EQ(bits[j], random_bits_at(key, start + j)) << "start " << start << " j " << j;
          ASSERT_EQ(uni[j], uniform_at(key, start + j)) << "start " << start << " j " << j;
        }
        EXPECT_EQ(bits[count], 0xDEADBEEFu) << "wrote past the end";
        EXPECT_EQ(uni[count], -1.0f) << "wrote past the end";
      }
    }
  }
}

TEST_P(PhiloxBatch, WordsEqualPhilox4x32OfEachCounter) {
  const ForceImpl force(GetParam());
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{9}, uint64_t{16}, uint64_t{25},
                         uint64_t{32}, uint64_t{41}, uint64_t{64}, uint64_t{100}, uint64_t{130}}) {
    std::array<std::vector<uint32_t>, 4> w;
    for (auto& v : w) v.resize(count);
    for (uint64_t l = 0; l < count; ++l)
      for (int j = 0; j < 4; ++j) w[j][l] = static_cast<uint32_t>(l * 0x9E3779B97F4A7C15ull >> (8 * j)) ^ (0xFFFFFFFFu * (l % 3 == 0));
    const auto before = w;
    philox_words(w[0].data(), w[1].data(), w[2].data(), w[3].data(), count, 0xA4093822u, 0x299f31d0u);
    for (uint64_t l = 0; l < count; ++l) {
      const U32x4 want = philox4x32<10>(U32x4{{before[0][l], before[1][l], before[2][l], before[3][l]}}, 0xA4093822u, 0x299f31d0u);
      for (int j = 0; j < 4; ++j) ASSERT_EQ(w[j][l], want.v[j]) << "counter " << l << " word " << j;
    }
  }
}

TEST_P(PhiloxBatch, CounterWordsEqualPhilox4x32OfConsecutiveCounters) {
  const ForceImpl force(GetParam());
  const uint32_t k0 = 0x1BD11BDAu, k1 = 0xA9FC1A22u, w2 = 0x00C0FFEEu, w3 = 7;
  // Starts that put the low word's wrap before, inside and after runs of sixty-four, and plain ones.
  for (uint64_t index : {uint64_t{0}, uint64_t{5}, (uint64_t{3} << 32) - 64, (uint64_t{3} << 32) - 100,
                         (uint64_t{1} << 32) - 1, uint64_t{0xFFFFFFFFFFFFFF00ull}})
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{65}, uint64_t{128},
                           uint64_t{200}, uint64_t{300}}) {
      std::array<std::vector<uint32_t>, 4> w;
      for (auto& v : w) v.assign(count, 0xDEADBEEFu);
      philox_counter_words(index, w2, w3, count, k0, k1, w[0].data(), w[1].data(), w[2].data(), w[3].data());
      for (uint64_t l = 0; l < count; ++l) {
        const uint64_t c = index + l;
        const U32x4 want =
            philox4x32<10>(U32x4{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), w2, w3}}, k0, k1);
        for (int j = 0; j < 4; ++j) ASSERT_EQ(w[j][l], want.v[j]) << "index " << index << " + " << l << " word " << j;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Implementations, PhiloxBatch, ::testing::Values(Impl::kNative, Impl::kAvx2, Impl::kPortable),
                         [](const auto& param) {
                           return param.param == Impl::kNative ? std::string("native")
                                  : param.param == Impl::kAvx2 ? std::string("avx2")
                                                               : std::string("portable");
                         });

TEST(PhiloxBatchIsa, NamesTheImplementation) {
  const std::string isa = philox_batch_isa();
  EXPECT_TRUE(isa == "avx512vl" || isa == "avx2" || isa == "portable") << isa;
  {
    const ForceImpl force(Impl::kAvx2);
    const std::string forced = philox_batch_isa();
    EXPECT_EQ(forced, isa == "avx512vl" ? "avx2" : isa);
  }
  const ForcePortable force(true);
  EXPECT_STREQ(philox_batch_isa(), "portable");
}

}  // namespace
}  // namespace ccsim::kern
