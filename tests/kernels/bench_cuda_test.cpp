// The CUDA kernel bench's cases (tools/app/bench_cuda_cases.hpp): every scheme it names is a
// registered compressor, and on a GPU every case builds (which checks the device's leaf message,
// and each round op's output, against the CPU compressor's, byte for byte) and launches cleanly,
// with the collective ops and the round ops each scheme has kernels for. Without a device the GPU
// cases skip and opening the bench fails with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cuda/bench_cuda.hpp"
#include "tools/app/bench_cuda_cases.hpp"
#include "tools/app/bench_kernels.hpp"
#include "topology/schedule.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

TEST(CudaBenchCases, EverySchemeIsARegisteredCompressor) {
  const std::vector<std::string> all = algo::CompressorRegistry::global().names();
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

// The round ops with CUDA kernels in the bench, per scheme (none for the others), and the parameters
// the bench's round cases use (the switch that gives sdp4bit_tlq its round ops).
struct RoundKernels {
  std::vector<KernelKind> ops;
  nlohmann::json params = nlohmann::json::object();
};
const std::map<std::string, RoundKernels>& round_kernels() {
  static const std::map<std::string, RoundKernels> kRound = {
      {"thc", {kAllRound}},
      {"dynamiq", {kAllRound}},
      {"omnireduce", {kAllRound}},
      {"mxfp8", {{KernelKind::kPlanLocal}}},
      {"mxfp6", {{KernelKind::kPlanLocal}}},
      {"mxfp4", {{KernelKind::kPlanLocal}}},
      {"sdp4bit_tlq", {{KernelKind::kPrepare, KernelKind::kFinish}, {{"hadamard", true}}}},
      {"sdp4bit_qwd", {{KernelKind::kPrepare, KernelKind::kFinish}}},
      {"powersgd", {kAllRound}},
      {"edgc", {{KernelKind::kPlanLocal, KernelKind::kPrepare}}},  // warming up: nothing to finish
  };
  return kRound;
}

std::vector<KernelKind> expected_round_ops(const std::string& scheme) {
  const auto it = round_kernels().find(scheme);
  return it == round_kernels().end() ? std::vector<KernelKind>{} : it->second.ops;
}

TEST(CudaBenchCases, SchemesWithRoundKernelsAreInTheBench) {
  const std::vector<std::string> cuda = cuda_case_schemes();
  for (const auto& [s, k] : round_kernels()) EXPECT_NE(std::find(cuda.begin(), cuda.end(), s), cuda.end()) << s;
}

// The bench's round cases cover every round op these schemes run (algo::round_ops after a planned
// four-rank round), so a CUDA profile charges none of them by the roofline.
TEST(CudaBenchCases, RoundCasesCoverEveryRoundOpOfTheirSchemes) {
  constexpr uint64_t kN = 1 << 16;
  const auto [x0, x1] = two_workers(kN);
  for (const auto& [scheme, k] : round_kernels()) {
    SCOPED_TRACE(scheme);
    auto comp = algo::CompressorRegistry::global().create(scheme, k.params);
    ASSERT_TRUE(comp.ok()) << comp.status().message();
    const algo::LayerShape layer = bench_layer(kN);  // the round cases' layout
    (*comp)->set_layout(std::span<const algo::LayerShape>(&layer, 1));
    if (!(*comp)->plan_format(kN, 4).empty()) {
      const std::vector<std::span<const float>> ins = {x0, x1, x0, x1};
      ASSERT_TRUE(algo::plan_round(**comp, ins, algo::NumericsOptions{7, 0, false}).ok());
    }
    EXPECT_EQ(algo::round_ops(**comp, kN, 4), k.ops);
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
    std::vector<CudaCase> cases;
    const Status built = cuda_cases(GetParam(), n, x0, x1, 7, **dev, cases);
    ASSERT_TRUE(built.ok()) << built.message();
    // The collective ops (all four, except for the schemes whose collective sends fp32, which has
    // no CUDA codec), then the round ops the scheme has kernels for, in KernelKind order.
    std::vector<topo::KernelKind> kinds, expected;
    for (const CudaCase& c : cases) kinds.push_back(c.kind);
    if (GetParam() != "omnireduce" && GetParam() != "powersgd" && GetParam() != "edgc") {
      expected = {topo::KernelKind::kEncode, topo::KernelKind::kDecode, topo::KernelKind::kDecodeAccumulate,
                  topo::KernelKind::kDecodeAccumulateEncode};
    }
    for (topo::KernelKind k : expected_round_ops(GetParam())) expected.push_back(k);
    EXPECT_EQ(kinds, expected);
    ASSERT_TRUE((*dev)->synchronize().ok());
    for (const CudaCase& c : cases) {
      SCOPED_TRACE(topo::kernel_kind_name(c.kind));
      // Every op moves bytes: a round op in the bench is one its scheme declares (algo::round_ops).
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
}  // namespace ccsim::app
