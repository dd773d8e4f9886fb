#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "sim/network/time_index.hpp"

namespace ccsim::sim {
namespace {

// Random inserts, lookups and erases checked against std::unordered_map. Keys come from a small
// range so that probe runs collide, wrap around the table's end and are shifted back on erase.
TEST(TimeIndex, AgreesWithANodeMapUnderRandomUse) {
  for (const int64_t range : {int64_t{40}, int64_t{1000}, int64_t{1} << 40}) {
    std::mt19937_64 rng(static_cast<uint64_t>(range));
    TimeIndex index;
    std::unordered_map<int64_t, uint32_t> ref;
    std::vector<int64_t> keys;
    for (int step = 0; step < 200000; ++step) {
      const int64_t key = static_cast<int64_t>(rng() % static_cast<uint64_t>(range)) - range / 4;
      const auto op = static_cast<uint32_t>(rng() % 3);
      if (op == 0 && !ref.contains(key)) {
        const auto value = static_cast<uint32_t>(rng() % 1000000);
        index.insert(key, value);
        ref.emplace(key, value);
        keys.push_back(key);
      } else if (op == 1) {
        ASSERT_EQ(index.erase(key), ref.erase(key) == 1) << "key " << key;
      } else if (!keys.empty()) {
        // Erase a key known to have been inserted (present or not), so erases often hit.
        const int64_t k = keys[rng() % keys.size()];
        ASSERT_EQ(index.erase(k), ref.erase(k) == 1) << "key " << k;
      }
      ASSERT_EQ(index.size(), ref.size());
      if (step % 97 == 0) {
        for (const auto& [k, v] : ref) ASSERT_EQ(index.find(k), v) << "key " << k;
      }
      ASSERT_EQ(index.find(key), ref.contains(key) ? ref.at(key) : TimeIndex::kNone);
    }
  }
}

TEST(TimeIndex, GrowsAndEmptiesCompletely) {
  TimeIndex index;
  EXPECT_EQ(index.find(5), TimeIndex::kNone);
  EXPECT_FALSE(index.erase(5));
  for (int64_t k = 0; k < 100000; ++k) index.insert(k * 1000, static_cast<uint32_t>(k));
  EXPECT_EQ(index.size(), 100000u);
  for (int64_t k = 0; k < 100000; ++k) ASSERT_EQ(index.find(k * 1000), static_cast<uint32_t>(k));
  EXPECT_EQ(index.find(1), TimeIndex::kNone);
  for (int64_t k = 0; k < 100000; k += 2) ASSERT_TRUE(index.erase(k * 1000));
  for (int64_t k = 0; k < 100000; ++k)
    ASSERT_EQ(index.find(k * 1000), k % 2 ? static_cast<uint32_t>(k) : TimeIndex::kNone);
  for (int64_t k = 1; k < 100000; k += 2) ASSERT_TRUE(index.erase(k * 1000));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.find(3000), TimeIndex::kNone);
}

}  // namespace
}  // namespace ccsim::sim
