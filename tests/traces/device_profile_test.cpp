// Device cost profiles (traces/device_profile.hpp) and the cost model over them
// (kernels/cost_profile.hpp): the model reproduces measured points exactly and interpolates in
// log(size) between them; files round-trip; bad files are rejected naming the file and JSON path;
// every shipped profile in traces/devices/ loads.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/cost_profile.hpp"
#include "traces/device_profile.hpp"

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

kern::KernelCostCurve curve() {
  kern::KernelCostCurve c;
  c.scheme = "dynamiq";
  c.op = "encode";
  c.params = "{}";
  c.launch_s = 5e-6;
  // 1 ns/byte at 1000 elements, 0.5 ns/byte at 100000 elements (bytes = 8 per element).
  c.points = {{1000, 8000, 5e-6 + 8000e-9}, {100000, 800000, 5e-6 + 400000e-9}};
  return c;
}

TEST(KernelCostCurve, ReproducesMeasuredPointsExactly) {
  const kern::KernelCostCurve c = curve();
  for (const auto& p : c.points) EXPECT_DOUBLE_EQ(c.seconds(p.elements, p.bytes), p.seconds);
}

TEST(KernelCostCurve, InterpolatesPerByteTimeInLogSizeAndHoldsItBeyond) {
  const kern::KernelCostCurve c = curve();
  // 10000 elements is half-way in log(n): 0.75 ns/byte.
  EXPECT_NEAR(c.seconds(10000, 80000), 5e-6 + 80000 * 0.75e-9, 1e-15);
  // Beyond the measured sizes the nearest point's rate holds; zero bytes cost the launch.
  EXPECT_NEAR(c.seconds(10, 80), 5e-6 + 80e-9, 1e-15);
  EXPECT_NEAR(c.seconds(1u << 30, 8ull << 30), 5e-6 + (8ull << 30) * 0.5e-9, 1e-9);
  EXPECT_DOUBLE_EQ(c.seconds(5000, 0), 5e-6);
  // Other parameters than measured (another bit width): the declared bytes at the measured rate.
  EXPECT_DOUBLE_EQ(c.seconds(1000, 4000), 5e-6 + 4000e-9);
  // A point measured below the launch overhead moves its bytes for free (never a negative time).
  kern::KernelCostCurve fast = c;
  fast.points = {{1000, 8000, 1e-6}};
  EXPECT_DOUBLE_EQ(fast.seconds(1000, 8000), 5e-6);
}

kern::DeviceCostProfile profile() {
  kern::DeviceCostProfile p;
  p.kind = "cuda";
  p.name = "Test GPU";
  p.measured = "2026-11-21";
  p.source = "device_profile_test";
  p.copy_bandwidth_Bps = 3e12;
  p.kernels = {curve()};
  p.kernels.push_back(curve());
  p.kernels.back().op = "decode_accumulate_encode";
  p.kernels.back().params = R"({"bits":5})";
  return p;
}

TEST(DeviceProfile, RoundTripsThroughItsFileFormat) {
  const kern::DeviceCostProfile p = profile();
  const json j = device_profile_to_json(p);
  EXPECT_EQ(j["format"], "ccsim-device-profile");
  auto back = device_profile_from_json(json::parse(j.dump()), "mem");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
  EXPECT_NE(back->find("dynamiq", "decode_accumulate_encode", R"({"bits":5})"), nullptr);
  EXPECT_EQ(back->find("dynamiq", "decode_accumulate_encode"), nullptr);  // measured with other params
  EXPECT_EQ(back->find("dynamiq", "decode"), nullptr);
  EXPECT_TRUE(back->covers("dynamiq"));
  EXPECT_FALSE(back->covers("thc"));
}

TEST(DeviceProfile, QuantitiesWithUnitsAreAccepted) {
  json j = device_profile_to_json(profile());
  j["copy_bandwidth"] = "3TBps";
  j["kernels"][0]["launch"] = "5us";
  auto p = device_profile_from_json(j, "mem");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_DOUBLE_EQ(p->copy_bandwidth_Bps, 3e12);
  EXPECT_NEAR(p->kernels[0].launch_s, 5e-6, 1e-18);
}

struct BadCase {
  const char* name;
  const char* pointer;  // JSON Pointer of the value to replace (or remove, with value null)
  json value;
  const char* path;     // expected path in the message
  const char* what;     // expected text
};

TEST(DeviceProfile, BadFilesNameTheFilePathAndWhatWasExpected) {
  const std::vector<BadCase> cases = {
      {"WrongFormat", "/format", "ccsim-compute-trace", "/format", "expected \"ccsim-device-profile\""},
      {"BadKind", "/device/kind", "tpu", "/device/kind", "expected \"cpu\" or \"cuda\""},
      {"BadDate", "/device/measured", "yesterday", "/device/measured", "YYYY-MM-DD"},
      {"BadOp", "/kernels/0/op", "encod", "/kernels/0/op", "expected one of encode, decode"},
      {"NegativeLaunch", "/kernels/0/launch", -1, "/kernels/0/launch", "non-negative"},
      {"ZeroSeconds", "/kernels/0/points/0/seconds", 0, "/kernels/0/points/0/seconds", "positive"},
      {"Descending", "/kernels/0/points/1/elements", 10, "/kernels/0/points/1/elements", "ascending"},
      {"NoPoints", "/kernels/1/points", json::array(), "/kernels/1/points", "non-empty array"},
      {"Typo", "/kernels/0/lanch", 1, "/kernels/0/lanch", "did you mean 'launch'"},
      {"ZeroCopy", "/copy_bandwidth", 0, "/copy_bandwidth", "positive"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    json j = device_profile_to_json(profile());
    j[json::json_pointer(c.pointer)] = c.value;
    auto p = device_profile_from_json(j, "prof.json");
    ASSERT_FALSE(p.ok());
    EXPECT_TRUE(p.status().is_input_error());
    const std::string& m = p.status().message();
    EXPECT_NE(m.find("prof.json"), std::string::npos) << m;
    EXPECT_NE(m.find(c.path), std::string::npos) << m;
    EXPECT_NE(m.find(c.what), std::string::npos) << m;
  }
  // One curve per scheme, op and parameters: the same op under other parameters is another curve.
  json variant = device_profile_to_json(profile());
  variant["kernels"][1]["op"] = "encode";
  auto both = device_profile_from_json(variant, "prof.json");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_NE(both->find("dynamiq", "encode"), nullptr);
  EXPECT_NE(both->find("dynamiq", "encode", R"({"bits":5})"), nullptr);
  EXPECT_EQ(both->find("dynamiq", "encode", R"({"bits":4})"), nullptr);
  json dup = variant;
  dup["kernels"][1]["params"] = json::object();
  auto p = device_profile_from_json(dup, "prof.json");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/kernels/1: duplicate kernel: dynamiq encode is measured twice"),
            std::string::npos)
      << p.status().message();
  dup = variant;
  dup["kernels"][0]["params"] = {{"bits", 5}};
  p = device_profile_from_json(dup, "prof.json");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(R"(duplicate kernel: dynamiq encode is measured twice with params {"bits":5})"),
            std::string::npos)
      << p.status().message();
}

TEST(DeviceProfile, MissingAndBrokenFilesAreInputErrors) {
  auto missing = load_device_profile("/nonexistent/profile.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().is_input_error());
  const fs::path f = fs::temp_directory_path() / "ccsim-device-profile-test.json";
  std::ofstream(f) << "{ not json";
  auto broken = load_device_profile(f);
  fs::remove(f);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("invalid JSON"), std::string::npos);
}

// Every profile shipped in traces/devices/ loads, has round-op curves, and has, per kernel, a launch overhead below every
// measured time, times that grow with the size, and, where a point moves at least 256 MiB (no
// cache holds it), an effective bandwidth below 3x the measured copy bandwidth. "Grow": the
// largest chunk takes more than twice the smallest, and no point is faster than the one before by
// more than 10%: a GPU's small chunks sit on the launch plateau (5 to 15 us on an H200), where CUDA
// events resolve about half a microsecond, so two medians there differ by noise of that size.
TEST(DeviceProfile, ShippedProfilesLoad) {
  const fs::path dir = fs::path(CCSIM_SOURCE_DIR) / "traces" / "devices";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    ++n;
    auto p = load_device_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_FALSE(p->kernels.empty());
    // bench-kernels measures round ops too: a profile without them would leave every round op to
    // the roofline.
    EXPECT_TRUE(std::any_of(p->kernels.begin(), p->kernels.end(), [](const kern::KernelCostCurve& k) {
      return k.op == "plan_local" || k.op == "prepare" || k.op == "finish";
    }));
    for (const auto& k : p->kernels) {
      EXPECT_GT(k.points.back().seconds, 2 * k.points.front().seconds) << k.scheme << " " << k.op;
      for (size_t i = 0; i < k.points.size(); ++i) {
        EXPECT_LE(k.launch_s, k.points[i].seconds * 1.5) << k.scheme << " " << k.op;
        if (i > 0) {
          EXPECT_GE(k.points[i].seconds, 0.9 * k.points[i - 1].seconds) << k.scheme << " " << k.op << " point " << i;
        }
        if (k.points[i].bytes >= 256ull << 20) {
          EXPECT_LT(k.bandwidth_Bps(i), 3 * p->copy_bandwidth_Bps) << k.scheme << " " << k.op;
        }
      }
    }
  }
  EXPECT_GE(n, 1) << "no profile in " << dir;
}

}  // namespace
}  // namespace ccsim::traces
