// The schemes' device ops (algorithms/device_ops.hpp), which `ccsim bench-kernels --device cuda`
// times: the registry holds them for the schemes with CUDA kernels, and on a GPU every case builds
// (which checks the device's leaf message, and each round op's output, against the CPU
// compressor's, byte for byte) and launches cleanly, with the collective ops and the round ops each
// scheme has kernels for. Without a device the GPU cases skip and opening the bench fails with a
// clear message.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/device_ops.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cuda/bench_cuda.hpp"
#include "topology/schedule.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {
namespace {

// The schemes with device ops, in registration order (the order the bench runs them).
std::vector<std::string> cuda_case_schemes() {
  std::vector<std::string> out;
  for (const CompressorInfo& info : CompressorRegistry::global().all())
    if (info.device_ops != nullptr) out.push_back(info.name);
  return out;
}

// The (scheme, params) of the round cases made with other than the default parameters.
std::vector<std::pair<std::string, std::string>> cuda_round_variants() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CompressorInfo& info : CompressorRegistry::global().all()) {
    if (info.device_ops == nullptr) continue;
    for (const RoundDeviceOps& r : info.device_ops->rounds)
      if (r.params != "{}") out.emplace_back(info.name, r.params);
  }
  return out;
}

TEST(CudaBenchCases, EverySchemeIsARegisteredCompressor) {
  const std::vector<std::string> all = CompressorRegistry::global().names();
  const std::vector<std::string> cuda = cuda_case_schemes();
  EXPECT_GE(cuda.size(), 15u);
  for (const auto& s : cuda) EXPECT_NE(std::find(all.begin(), all.end(), s), all.end()) << s;
}

using topo::KernelKind;

// Two workers' synthetic gradients of n entries (seed 7), as the bench's x0 and x1.
std::pair<std::vector<float>, std::vector<float>> two_workers(uint64_t n) {
  std::vector<float> x0(n), x1(n);
  traces::SyntheticGradientSpec spec;
  spec.elements = n;
  const std::vector<std::span<float>> workers = {x0, x1};
  traces::generate_synthetic_gradients(spec, 7, workers);
  return {std::move(x0), std::move(x1)};
}

const std::vector<KernelKind> kAllRound = {KernelKind::kPlanLocal, KernelKind::kPrepare, KernelKind::kFinish};

// The round ops with CUDA kernels in the bench, per scheme and the parameters its round cases are
// made with (none for the other schemes): the defaults, and the round_variants() switches (TLq's
// Hadamard, MX's layer scaling), in the order the bench runs them.
struct RoundKernels {
  std::string scheme;
  nlohmann::json params;
  std::vector<KernelKind> ops;
};
const std::vector<RoundKernels>& round_kernels() {
  static const std::vector<RoundKernels> kRound = {
      {"sdp4bit_tlq", {{"hadamard", true}}, {KernelKind::kPrepare, KernelKind::kFinish}},
      {"sdp4bit_qwd", nlohmann::json::object(), {KernelKind::kPrepare, KernelKind::kFinish}},
      {"mxfp8", nlohmann::json::object(), {KernelKind::kPlanLocal}},
      {"mxfp8", {{"global_scaling", "layer"}}, kAllRound},
      {"mxfp6", nlohmann::json::object(), {KernelKind::kPlanLocal}},
      {"mxfp6", {{"global_scaling", "layer"}}, kAllRound},
      {"mxfp4", nlohmann::json::object(), {KernelKind::kPlanLocal}},
      {"mxfp4", {{"global_scaling", "layer"}}, kAllRound},
      {"dynamiq", nlohmann::json::object(), kAllRound},
      {"thc", nlohmann::json::object(), kAllRound},
      {"omnireduce", nlohmann::json::object(), kAllRound},
      {"powersgd", nlohmann::json::object(), kAllRound},
      {"edgc", nlohmann::json::object(), {KernelKind::kPlanLocal, KernelKind::kPrepare}},  // warming up
  };
  return kRound;
}

// The round cases of `scheme`, in the order device_cases() produces them.
std::vector<KernelKind> expected_round_ops(const std::string& scheme) {
  std::vector<KernelKind> out;
  for (const auto& k : round_kernels())
    if (k.scheme == scheme) out.insert(out.end(), k.ops.begin(), k.ops.end());
  return out;
}

TEST(CudaBenchCases, SchemesWithRoundKernelsAreInTheBench) {
  const std::vector<std::string> cuda = cuda_case_schemes();
  for (const auto& k : round_kernels())
    EXPECT_NE(std::find(cuda.begin(), cuda.end(), k.scheme), cuda.end()) << k.scheme;
}

// Without a device too: every scheme's device ops have something to build, the collective ops for
// every scheme but those whose collective sends fp32, and round cases where it has round kernels
// (what CasesBuildAndLaunch finds on a GPU).
TEST(CudaBenchCases, DeviceOpsHaveBuilders) {
  for (const std::string& s : cuda_case_schemes()) {
    SCOPED_TRACE(s);
    const DeviceOps& ops = *CompressorRegistry::global().find(s)->device_ops;
    EXPECT_EQ(ops.collective == nullptr, s == "omnireduce" || s == "powersgd" || s == "edgc");
    EXPECT_EQ(ops.rounds.empty(), expected_round_ops(s).empty());
    for (const RoundDeviceOps& r : ops.rounds) EXPECT_NE(r.build, nullptr) << r.params;
  }
}

// The CUDA bench measures the round ops of every parameter switch the CPU bench measures (the
// schemes' round_variants), and no other: the two profiles hold the same curves.
TEST(CudaBenchCases, RoundVariantsAreTheCpuBenchs) {
  std::vector<std::pair<std::string, std::string>> cpu;
  for (const RoundVariant& v : CompressorRegistry::global().round_variants()) cpu.emplace_back(v.scheme, v.params);
  std::vector<std::pair<std::string, std::string>> cuda = cuda_round_variants();
  std::sort(cpu.begin(), cpu.end());
  std::sort(cuda.begin(), cuda.end());
  EXPECT_EQ(cpu, cuda);
  for (const auto& [scheme, params] : cpu)  // recorded as a profile stores them: compact, sorted keys
    EXPECT_EQ(params, nlohmann::json::parse(params).dump()) << scheme;
}

// The bench's round cases cover every round op these schemes run (round_ops after a planned
// four-rank round), so a CUDA profile charges none of them by the roofline.
TEST(CudaBenchCases, RoundCasesCoverEveryRoundOpOfTheirSchemes) {
  constexpr uint64_t kN = 1 << 16;
  const auto [x0, x1] = two_workers(kN);
  for (const auto& k : round_kernels()) {
    SCOPED_TRACE(fmt::format("{} {}", k.scheme, k.params.dump()));
    auto comp = CompressorRegistry::global().create(k.scheme, k.params);
    ASSERT_TRUE(comp.ok()) << comp.status().message();
    const LayerShape layer = bench_layer(kN);  // the round cases' layout
    (*comp)->set_layout(std::span<const LayerShape>(&layer, 1));
    if (!(*comp)->plan_format(kN, 4).empty()) {
      const std::vector<std::span<const float>> ins = {x0, x1, x0, x1};
      ASSERT_TRUE(plan_round(**comp, ins, NumericsOptions{7, 0, false}).ok());
    }
    EXPECT_EQ(round_ops(**comp, kN, 4), k.ops);
  }
}

TEST(CudaBenchCases, OpeningWithoutADeviceFailsClearly) {
  if (kern::cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
  auto dev = kern::CudaBench::open();
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("no CUDA device"), std::string::npos) << dev.status().message();
}

class CudaBenchScheme : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBenchScheme, CasesBuildAndLaunch) {
  if (!kern::cuda_device_available()) GTEST_SKIP() << "no CUDA device: skipping GPU test";
  constexpr uint64_t kMax = 1 << 16;
  const auto [x0, x1] = two_workers(kMax);
  auto dev = kern::CudaBench::open();
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  for (const uint64_t n : {uint64_t{4096}, uint64_t{kMax}}) {
    SCOPED_TRACE(n);
    std::vector<DeviceCase> cases;
    const CompressorInfo* info = CompressorRegistry::global().find(GetParam());
    ASSERT_NE(info, nullptr);
    const Status built = device_cases(*info, n, x0, x1, 7, **dev, cases);
    ASSERT_TRUE(built.ok()) << built.message();
    // The collective ops (all four, except for the schemes whose collective sends fp32, which has
    // no CUDA codec), then the round ops the scheme has kernels for, in KernelKind order.
    std::vector<topo::KernelKind> kinds, expected;
    for (const DeviceCase& c : cases) kinds.push_back(c.kind);
    if (GetParam() != "omnireduce" && GetParam() != "powersgd" && GetParam() != "edgc") {
      expected = {topo::KernelKind::kEncode, topo::KernelKind::kDecode, topo::KernelKind::kDecodeAccumulate,
                  topo::KernelKind::kDecodeAccumulateEncode};
    }
    for (topo::KernelKind k : expected_round_ops(GetParam())) expected.push_back(k);
    EXPECT_EQ(kinds, expected);
    ASSERT_TRUE((*dev)->synchronize().ok());
    for (const DeviceCase& c : cases) {
      SCOPED_TRACE(topo::kernel_kind_name(c.kind));
      // Every op moves bytes: a round op in the bench is one its scheme declares (round_ops).
      EXPECT_GT(c.bytes, 0u);
      double t = 0;
      const Status timed = (*dev)->median_seconds(2, c.launch, t);
      ASSERT_TRUE(timed.ok()) << timed.message();
      EXPECT_GT(t, 0.0);
    }
    (*dev)->release_all();
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, CudaBenchScheme, ::testing::ValuesIn(cuda_case_schemes()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace ccsim::algo
