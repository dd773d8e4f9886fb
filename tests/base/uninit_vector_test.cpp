#include "sim/base/uninit_vector.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <type_traits>

namespace ccsim {
namespace {

static_assert(std::is_same_v<std::allocator_traits<UninitAllocator<float>>::rebind_alloc<int>, UninitAllocator<int>>);

// Values given to the vector are constructed from them, as std::vector's: only a plain resize()
// leaves trivial entries unset.
TEST(UninitVector, ConstructsFromGivenValues) {
  UninitVector<float> filled(5, 1.5f);
  for (float x : filled) EXPECT_EQ(x, 1.5f);
  const std::vector<float> from{1.0f, -2.0f, 3.5f};
  UninitVector<float> copied(from.begin(), from.end());
  EXPECT_EQ(std::vector<float>(copied.begin(), copied.end()), from);
  copied.push_back(7.0f);
  copied.emplace_back(8.0f);
  EXPECT_EQ(copied.back(), 8.0f);
  EXPECT_EQ(copied[3], 7.0f);
}

// Growing keeps every entry already there (they move to the new storage); shrinking keeps the prefix.
TEST(UninitVector, ResizeKeepsExistingEntries) {
  UninitVector<float> v(1000);
  std::iota(v.begin(), v.end(), 0.0f);
  v.resize(1 << 20);
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], static_cast<float>(i));
  v.resize(10);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(v[i], static_cast<float>(i));
}

// Default-initialization runs a class's constructor: only types with nothing to initialize stay unset.
TEST(UninitVector, ClassTypesAreStillConstructed) {
  struct WithDefault {
    int x = 7;
  };
  UninitVector<WithDefault> v(4);
  v.resize(9);
  for (const auto& e : v) EXPECT_EQ(e.x, 7);
}

}  // namespace
}  // namespace ccsim
