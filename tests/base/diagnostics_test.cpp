#include <gtest/gtest.h>

#include "sim/base/diagnostics.hpp"

namespace ccsim {
namespace {

TEST(Diagnostics, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(Diagnostics, ClosestMatchSuggestsOnlyPlausibleKeys) {
  const std::vector<std::string> keys = {"nodes", "nic_bandwidth", "link_latency", "topology"};
  EXPECT_EQ(closest_match("nic_bandwith", keys), "nic_bandwidth");
  EXPECT_EQ(closest_match("node", keys), "nodes");
  EXPECT_EQ(closest_match("completely_unrelated_key_name", keys), "");
}

TEST(Diagnostics, CollectsAllErrorsIntoOneStatus) {
  Diagnostics d;
  EXPECT_TRUE(d.to_status("f.json").ok());
  d.add("/a", "first");
  d.add("/b/0", "second");
  const Status s = d.to_status("f.json");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "f.json: /a: first\nf.json: /b/0: second");
  EXPECT_TRUE(s.is_input_error());
}

TEST(Diagnostics, JsonPointerEscaping) {
  EXPECT_EQ(json_pointer_escape("a/b~c"), "a~1b~0c");
}

}  // namespace
}  // namespace ccsim
