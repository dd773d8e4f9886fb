// The training model assembled as `ccsim run` assembles it: AQGB's controller (algorithms/) driving
// the broadcast protocol (sim/) through the seam between them (tools/app/seams.hpp).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "algorithms/tfp/aqgb_controller.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/training/broadcast_sync.hpp"
#include "sim/training/training_job.hpp"
#include "tools/app/seams.hpp"
#include "topology/builders/builders.hpp"

namespace ccsim::app {
namespace {

TEST(AqgbBroadcast, NeverGoesBelowTheFloorAndUsesIdleTimeInStageTwo) {
  // AQGB on 4 workers: the first stage picks at least q_floor; when the link is the bottleneck the
  // decisions sit at the floor; the second stage sends extra bits while the next forward has not
  // started, so AQGB moves more bytes than a fixed 4-bit broadcast and finishes its rounds at most
  // a little later.
  const double B = 0.3125e9;  // 2.5 Gbps
  const uint32_t m = 4;
  const topo::Topology topo = topo::make_star(m, B, 1e-6);
  std::vector<sim::TrainingLayer> layers = {
      {"b1", 3000000, 0.229, 0.481}, {"b2", 5600000, 0.085, 0.135}, {"b3", 6000000, 0.090, 0.123},
      {"b4", 11000000, 0.143, 0.213}};
  std::map<std::string, std::pair<double, uint64_t>> result;  // time of 5 rounds, bytes
  for (const std::string mode : {"fixed4", "aqgb"}) {
    sim::Engine engine;
    sim::FlowNetwork net(engine, sim::link_specs(topo));
    const AqgbBroadcastControl aqgb(algo::AqgbController(0.125, true));
    const sim::FixedBroadcastBits fixed("tfp(k=4)", 4);
    sim::BroadcastSync sync(sim::BroadcastOptions{}, mode == "aqgb" ? static_cast<const sim::BroadcastControl&>(aqgb)
                                                                    : fixed);
    const sim::StragglerModel none = *sim::StragglerModel::make({}, 1);
    sim::TrainingOptions opt;
    opt.rounds = 5;
    sim::TrainingJob job(engine, net, topo, {0, 1, 2, 3}, layers, none, opt, sync);
    job.start();
    engine.run();
    ASSERT_TRUE(job.finished());
    uint64_t bytes = 0;
    for (const auto& [r, s] : sync.round_stats()) bytes += s.stage1_bytes + s.stage2_bytes;
    result[mode] = {job.round_completion().back().seconds(), bytes};
    if (mode == "aqgb") {
      size_t stage1 = 0, stage2 = 0;
      for (const sim::ControlDecision& d : job.decisions()) {
        if (d.quantity == "stage1_bits") {
          ++stage1;
          EXPECT_GE(d.value, 4.0);
          EXPECT_LE(d.value, 32.0);
        }
        if (d.quantity == "stage2_q") {
          ++stage2;
          EXPECT_GE(d.value, 0.125);
          EXPECT_LE(d.value, 1.0);
        }
      }
      EXPECT_GT(stage1, 0u);
      EXPECT_GT(stage2, 0u);
    }
  }
  EXPECT_GT(result["aqgb"].second, result["fixed4"].second);
  EXPECT_LT(result["aqgb"].first, result["fixed4"].first * 1.10);
}

}  // namespace
}  // namespace ccsim::app
