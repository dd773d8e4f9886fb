// Every registered scheme (at its defaults and under the parameter switches the kernel benches
// measure) on every registered collective, timed by the roofline and run through the numerics
// interpreter, in process: each combination runs, or is rejected as bad input naming the
// compression entry or the collective. An internal failure (a CCSIM_CHECK) aborts this test; a
// crash fails it. Both happened before: MX with layer scaling read freed runners on 8 ranks, and
// MX on all-to-all blocks that cut its blocks hit an internal check.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/scenario_io.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// Every registered scheme at its defaults, then the registry's round_variants() switches.
std::vector<json> every_scheme() {
  std::vector<json> out;
  for (const std::string& name : algo::CompressorRegistry::global().names())
    out.push_back({{"scheme", name}});
  for (const algo::RoundVariant& v : algo::CompressorRegistry::global().round_variants())
    out.push_back({{"scheme", v.scheme}, {"params", json::parse(v.params)}});
  return out;
}

TEST(EveryCombination, RunsOrIsRejectedAsBadInput) {
  const std::vector<json> schemes = every_scheme();
  int ran = 0, rejected = 0;
  for (const topo::CollectiveInfo& c : topo::known_collectives()) {
    for (const json& scheme : schemes) {
      const std::string what = fmt::format("{}/{} with {}", topo::collective_op_name(c.operation), c.algorithm,
                                           scheme.dump());
      SCOPED_TRACE(what);
      // 8 ranks, 2 per node (what the hierarchical and two-level algorithms need); 2^16 + 64
      // entries, which no power-of-two block size divides evenly over 8 ranks' all-to-all blocks
      // of 8200 entries (a multiple of 8 but not of 16).
      const json doc = {
          {"name", "combination"},
          {"cluster", {{"topology", "star"}, {"nodes", 4}, {"gpus_per_node", 2}, {"nic_bandwidth", "100Gbps"},
                       {"link_latency", "1us"},
                       {"gpu", {{"kernel_cost", "roofline"}, {"memory_bandwidth", "2TBps"},
                                {"kernel_launch", "5us"}}}}},
          {"collective", {{"operation", std::string(topo::collective_op_name(c.operation))},
                          {"algorithm", c.algorithm}}},
          {"gradients", {{"source", "synthetic"}, {"size", fmt::format("{}B", 4 * ((1 << 16) + 64))}}},
          {"compression", json::array({scheme})}};
      auto loaded = load_scenario_json(doc, "combination.json", ".");
      if (!loaded.ok()) {
        ++rejected;
        EXPECT_TRUE(loaded.status().is_input_error()) << loaded.status().message();
        const std::string& m = loaded.status().message();
        EXPECT_TRUE(m.rfind("combination.json: /compression/0", 0) == 0 ||
                    m.rfind("combination.json: /collective", 0) == 0)
            << m;
        continue;
      }
      const Result<RunReport> report = run_scenario(*loaded);
      ASSERT_TRUE(report.ok()) << "loaded, then failed to run: " << report.status().message();
      ASSERT_EQ(report->results.size(), 1u);
      EXPECT_GT(report->results[0].timing.time_s, 0.0);
      ++ran;
    }
  }
  // Most combinations are meaningful and run; some are refused (low-rank factors on a
  // reduce-scatter, metadata schemes on all-to-all blocks that cut their blocks).
  EXPECT_GT(ran, 3 * rejected) << ran << " ran, " << rejected << " rejected";
}

}  // namespace
}  // namespace ccsim::app
