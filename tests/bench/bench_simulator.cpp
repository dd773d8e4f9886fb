// Google Benchmark suite for the timing side (built with -DCCSIM_BUILD_BENCHMARKS=ON; not a test).
// Measures:
//   BM_EventQueue/pending:N         engine events per second with N events pending
//   BM_FlowNetwork/flows:N          flow arrivals + completions per second, N concurrent random flows
//                                   on a k=8 fat-tree (incremental max-min with ECMP routes)
//   BM_AllReduce/<topo>/<algo>/n:N  wall time to simulate one 1 GB fp32 all-reduce over N ranks
// Axes are in the names. Counters: items/s = events or flows simulated per wall second.
#include <benchmark/benchmark.h>

#include <random>

#include "sim/engine.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/sim_bench.hpp"
#include "topology/builders/builders.hpp"

namespace ccsim {
namespace {

void BM_EventQueue(benchmark::State& state) {
  const auto pending = static_cast<int64_t>(state.range(0));
  std::mt19937_64 rng(1);
  uint64_t processed = 0;
  for (auto _ : state) {
    sim::Engine e;
    int64_t left = pending * 8;
    std::function<void()> tick;
    tick = [&] {
      if (--left > 0) e.schedule_in(Duration::from_ps(static_cast<int64_t>(rng() % 1'000'000)), tick);
    };
    for (int64_t i = 0; i < pending; ++i) e.schedule_in(Duration::from_ps(static_cast<int64_t>(rng() % 1'000'000)), tick);
    e.run();
    processed += e.events_processed();
  }
  state.SetItemsProcessed(static_cast<int64_t>(processed));
}
BENCHMARK(BM_EventQueue)->ArgName("pending")->Arg(1 << 10)->Arg(1 << 16);

void BM_FlowNetwork(benchmark::State& state) {
  const auto concurrent = static_cast<uint32_t>(state.range(0));
  topo::ClusterSpec spec;
  spec.topology = "fat_tree";
  spec.k = 8;
  spec.nodes = 128;
  const topo::Topology t = *topo::build_topology(spec);
  uint64_t flows = 0;
  for (auto _ : state) {
    sim::Engine e;
    sim::FlowNetwork net(e, sim::link_specs(t));
    std::mt19937_64 rng(42);
    std::vector<topo::LinkId> route;
    uint64_t left = 20 * uint64_t{concurrent};
    std::function<void()> spawn;
    spawn = [&] {
      if (left == 0) return;
      --left;
      const auto a = static_cast<topo::Rank>(rng() % t.num_ranks());
      auto b = static_cast<topo::Rank>(rng() % t.num_ranks());
      if (b == a) b = (b + 1) % t.num_ranks();
      t.route(a, b, rng(), route);
      net.start_flow(route, 1e6 + static_cast<double>(rng() % 1000000), Duration::zero(), spawn);
    };
    for (uint32_t i = 0; i < concurrent; ++i) spawn();
    e.run();
    flows += net.counters().flows_started;
  }
  state.SetItemsProcessed(static_cast<int64_t>(flows));
}
BENCHMARK(BM_FlowNetwork)->ArgName("flows")->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_AllReduce(benchmark::State& state, const char* topology, const char* algorithm) {
  topo::ClusterSpec spec;
  spec.topology = topology;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.nic_Bps = 12.5e9;
  const topo::Topology t = *topo::build_topology(spec);
  sim::BenchCase c;
  c.algorithm = algorithm;
  c.bytes = 1'000'000'000;
  uint64_t flows = 0;
  for (auto _ : state) {
    const auto r = sim::run_bench_case(c, t);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    flows += r->flows;
    state.counters["simulated_s"] = r->simulated_s;
  }
  state.SetItemsProcessed(static_cast<int64_t>(flows));
}
BENCHMARK_CAPTURE(BM_AllReduce, star_ring, "star", "ring")->ArgName("n")->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AllReduce, fat_tree_ring, "fat_tree", "ring")
    ->ArgName("n")->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AllReduce, fat_tree_butterfly, "fat_tree", "butterfly")
    ->ArgName("n")->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ccsim

BENCHMARK_MAIN();
