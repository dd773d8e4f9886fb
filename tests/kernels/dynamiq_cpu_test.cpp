#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "kernels/quant/dynamiq_cpu.hpp"
#include "kernels/quant/grid.hpp"

namespace ccsim::kern {
namespace {

struct Case {
  uint32_t width;
  bool hierarchical, correlated;
  uint32_t ranks;
  uint32_t group = 16;
  bool geometric = false;  // DynamiQ's non-uniform grid instead of the uniform one
};

// Gradient-like entries over five decades, with zeros, a zero group, signed zeros, infinities and
// NaN in some super-groups.
std::vector<float> entries(uint64_t m, uint32_t seed, bool specials) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::uniform_real_distribution<float> decade(-5.0f, 0.0f);
  std::vector<float> x(m);
  for (uint64_t i = 0; i < m; ++i) x[i] = std::pow(10.0f, decade(gen)) * z(gen);
  for (uint64_t i = 16; i < 32 && i < m; ++i) x[i] = 0.0f;
  if (m > 40) x[40] = -0.0f;
  if (specials && m > 70) {
    x[50] = std::numeric_limits<float>::infinity();
    x[70] = std::numeric_limits<float>::quiet_NaN();
    x[87] = 50.0f;  // its group's maximum, in the lane a NaN in the group's last eight entries shares
    x[95] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

class DynamiqBatched : public ::testing::TestWithParam<Case> {};

// Two implementations of the same super-group coding, byte for byte: the reference draws one Philox
// block per entry (as a CUDA thread does), the CPU encoder a super-group's draws at once; and the
// table decoder against the reference decoder.
TEST_P(DynamiqBatched, BytesEqualTheReferenceEncoder) {
  const Case k = GetParam();
  std::vector<float> levels(k.width > 1 ? (1u << (k.width - 1)) : 1);
  for (size_t j = 0; j < levels.size(); ++j)
    levels[j] = levels.size() > 1 ? static_cast<float>(j) / static_cast<float>(levels.size() - 1) : 1.0f;
  levels.back() = 1.0f;
  if (k.geometric && levels.size() > 1) geometric_grid_levels(0.3, static_cast<uint32_t>(levels.size()), levels.data());
  // 1-bit codes have no grid: their levels are null, as the compressor passes them.
  const DynamiqSgCoding c{k.width, k.group, k.hierarchical, k.width > 1 ? levels.data() : nullptr, k.correlated};
  // Native (AVX-512 where the machine has it), AVX2 forced, then the portable loops.
  for (const int mode : {0, 1, 2}) {
    const bool portable = mode == 2;
    const bool before = philox_batch_force_portable(portable), before_avx2 = philox_batch_force_avx2(mode == 1);
    for (uint64_t m : {uint64_t{256}, uint64_t{100}, uint64_t{7}}) {
      for (uint32_t rank = 0; rank < k.ranks; rank += (k.ranks > 4 ? std::max(3u, k.ranks / 9) : 1)) {
        std::vector<float> x = entries(m, 11 * rank + static_cast<uint32_t>(m), m == 100);
        // Entries exactly on the grid (a group whose maximum is 1): the rounding may not move them.
        if (m == 256 && k.width > 1)
          for (uint64_t i = 0; i < 16; ++i)
            x[128 + i] = i == 0 ? 1.0f : levels[(i * 5) % levels.size()] * (i % 2 ? -1.0f : 1.0f);
        const RngKey key{0xC0FFEEull << 20, 3, rank, 17};
        const RngKey shared = dynamiq_shared_key(key);
        const uint64_t first = (uint64_t{1} << 33) - 512 + m, first_group = first / k.group;
        const uint64_t bytes = dynamiq_sg_bytes(m, c.width, c.group, c.hierarchical);
        std::vector<uint8_t> want(bytes, 0xAB), got(bytes, 0xCD);
        dynamiq_encode_sg(x.data(), m, c, key, shared, rank, k.ranks, first, first_group, want.data());
        dynamiq_encode_sg_batched(x.data(), m, c, key, shared, rank, k.ranks, first, first_group, got.data());
        ASSERT_EQ(got, want) << "m " << m << " rank " << rank
                             << (portable ? " portable" : mode == 1 ? " avx2" : " native");
        // The table decoder against the reference, overwriting and accumulating.
        for (bool accumulate : {false, true}) {
          std::vector<float> ref(m, 0.25f), tab(m, 0.25f);
          if (m > 3) ref[3] = tab[3] = -0.0f;
          dynamiq_decode_sg(want.data(), m, c, accumulate, ref.data());
          dynamiq_decode_sg_table(want.data(), m, c, accumulate, tab.data());
          ASSERT_EQ(std::memcmp(ref.data(), tab.data(), 4 * m), 0) << "decode, m " << m << " rank " << rank;
        }
      }
    }
    philox_batch_force_portable(before);
    philox_batch_force_avx2(before_avx2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codings, DynamiqBatched,
    ::testing::Values(Case{1, true, true, 4}, Case{2, true, true, 3}, Case{4, true, true, 8}, Case{4, true, false, 8},
                      Case{4, false, true, 32}, Case{8, true, true, 7}, Case{8, false, false, 1},
                      Case{16, true, true, 2}, Case{4, true, true, 1}, Case{4, true, true, 1000, 16, true},
                      Case{8, true, true, 4099, 32, true}, Case{2, false, true, 5, 16, true},
                      Case{4, true, false, 3, 12, true}, Case{1, false, true, 65536, 8},
                      // 16, 32 and 64 levels: one coarse level a step, then searched by halves
                      Case{5, true, true, 4}, Case{6, false, true, 3, 16, true}, Case{7, true, false, 9}),
    [](const auto& param) {
      const Case& k = param.param;
      return fmt::format("q{}_{}_{}_n{}_g{}{}", k.width, k.hierarchical ? "hier" : "flat",
                         k.correlated ? "corr" : "indep", k.ranks, k.group, k.geometric ? "_geometric" : "");
    });

// The encoder's uniforms drawn at once (AVX-512 and AVX2 lanes, the portable loop) equal the element
// functions, bit for bit, at rank counts from 1 to 2^31 (Feistel domains of 2 to 32 bits, cycle
// walks of every length; the AVX-512 walk in lock step at 2, 3 and 65536 ranks, compacted at the
// others, its second multiply in 16-bit lanes up to 64 ranks and not from 100), at every rank
// position and across a 2^32 entry-index boundary. Two lengths: 331 entries (AVX-512: twenty
// vectors, then 8 entries in AVX2 lanes and 3 alone; AVX2: batches of 64 and 8, and 3) and 2085,
// whose compacted walk queues hundreds of entries and re-queues them over several steps.
TEST(DynamiqUniforms, EqualTheElementFunctions) {
  const RngKey key{0x5EEDull << 40 | 77, 9, 0, 3};
  const RngKey shared = dynamiq_shared_key(key);
  for (const uint64_t m : {uint64_t{331}, uint64_t{2085}})
  for (const char* path : {"widest", "avx2", "portable"}) {
    const uint64_t first = (uint64_t{1} << 32) - 37;
    const bool portable = path[0] == 'p';
    const bool before = philox_batch_force_portable(portable);
    const bool before_avx2 = philox_batch_force_avx2(path[0] == 'a');
    for (const uint32_t ranks :
         {1u, 2u, 3u, 5u, 8u, 17u, 100u, 1000u, 4099u, 65536u, 16777217u, 2147483647u, 2147483648u}) {
      for (const uint32_t rank : {0u, 1u, ranks / 2, ranks - 1}) {
        RngKey own = key;
        own.rank = rank;
        for (const bool correlated : {true, false}) {
          std::vector<float> u(m);
          dynamiq_uniforms(own, shared, correlated, rank, ranks, first, m, u.data());
          for (uint64_t j = 0; j < m; ++j) {
            const float want = correlated ? correlated_uniform(shared, own, first + j, rank, ranks)
                                          : uniform_at(own, first + j);
            ASSERT_EQ(std::memcmp(&u[j], &want, 4), 0)
                << "ranks " << ranks << " rank " << rank << " entry " << j << " of " << m << " path " << path;
          }
        }
      }
    }
    philox_batch_force_avx2(before_avx2);
    philox_batch_force_portable(before);
  }
}

// The table follows the grid's values, not its address: a grid rewritten in place (as when a
// scheme with other levels is made where a freed one lived) decodes with its new values.
TEST(DynamiqTable, FollowsTheGridsValuesNotItsAddress) {
  std::vector<float> levels = {0.0f, 0.1f, 0.3f, 0.45f, 0.6f, 0.75f, 0.9f, 1.0f};
  const DynamiqSgCoding c{4, 16, true, levels.data(), false};
  const uint64_t m = 64;
  std::vector<float> x(m);
  for (uint64_t i = 0; i < m; ++i) x[i] = std::sin(static_cast<float>(i)) * (1.0f + static_cast<float>(i % 7));
  const RngKey key{5, 1, 0, 3};
  std::vector<uint8_t> msg(dynamiq_sg_bytes(m, 4, 16, true));
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1)
      for (size_t j = 1; j + 1 < levels.size(); ++j) levels[j] = static_cast<float>(j) / 7.0f;  // uniform, same address
    dynamiq_encode_sg(x.data(), m, c, key, dynamiq_shared_key(key), 0, 1, 0, 0, msg.data());
    std::vector<float> ref(m), tab(m);
    dynamiq_decode_sg(msg.data(), m, c, false, ref.data());
    dynamiq_decode_sg_table(msg.data(), m, c, false, tab.data());
    ASSERT_EQ(std::memcmp(ref.data(), tab.data(), 4 * m), 0) << "pass " << pass;
  }
}

}  // namespace
}  // namespace ccsim::kern
