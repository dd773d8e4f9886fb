#include "sim/sim_bench.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>

#include "sim/engine.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {

Result<std::vector<BenchCase>> bench_suite(const std::string& suite, const BenchCase& shape) {
  if (suite != "standard" && suite != "quick")
    return invalid_argument(fmt::format("--suite: expected standard, quick or custom, got '{}'", suite));
  std::vector<BenchCase> cases;
  auto add = [&](const char* topology, uint32_t ranks, const char* algorithm) {
    BenchCase c = shape;
    c.topology = topology;
    c.ranks = ranks;
    c.algorithm = algorithm;
    cases.push_back(std::move(c));
  };
  if (suite == "standard")
    for (uint32_t n : {1024u, 2048u}) add("star", n, "ring");
  const std::vector<uint32_t> sizes =
      suite == "standard" ? std::vector<uint32_t>{64, 256, 1024, 4096} : std::vector<uint32_t>{64, 256};
  for (const char* algorithm : {"ring", "butterfly"})
    for (uint32_t n : sizes) add("fat_tree", n, algorithm);
  return cases;
}

Result<BenchResult> run_bench_case(const BenchCase& c) {
  topo::ClusterSpec spec;
  spec.topology = c.topology;
  spec.nodes = c.ranks;
  spec.nic_Bps = c.nic_Bps;
  spec.link_latency_s = c.latency_s;
  CCSIM_ASSIGN_OR_RETURN(const topo::Topology topology, topo::build_topology(spec));
  return run_bench_case(c, topology);
}

Result<BenchResult> run_bench_case(const BenchCase& c, const topo::Topology& topology) {
  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* info, topo::find_collective(c.operation, c.algorithm));
  const uint32_t ranks = topology.num_ranks();
  const uint64_t elements = c.bytes / 4;
  topo::CollectiveOptions options;
  options.gpus_per_node = topology.gpus_per_node();
  CCSIM_RETURN_IF_ERROR(info->check(ranks, elements, options));

  const auto t0 = std::chrono::steady_clock::now();
  auto generator = info->make(ranks, elements, options);
  Engine engine;
  FlowNetwork network(engine, link_specs(topology));
  // Uncompressed fp32: 4 bytes per element on the wire, kernels free.
  auto binder = [](topo::Schedule& s, topo::OpId first, topo::OpId end) {
    for (topo::OpId id = first; id < end; ++id) {
      topo::Op& op = s.mutable_op(id);
      op.bytes = op.kind == topo::OpKind::kTransfer ? 4 * s.op_elements(op) : 0;
    }
  };
  ScheduleRunner runner(engine, network, topology, *generator, binder, KernelCostModel{});
  runner.start();
  engine.run();
  const auto t1 = std::chrono::steady_clock::now();

  BenchResult r;
  r.ranks = ranks;
  r.topology = topology.description().empty() ? topology.kind() : topology.description();
  const ScheduleTiming& t = runner.timing();
  r.flows = t.transfers;
  r.ops = t.ops;
  r.events = engine.events_processed();
  r.solves = network.counters().solves;
  r.filled_flows = network.counters().refilled_flows;
  r.simulated_s = t.duration().seconds();
  r.wall_s = std::chrono::duration<double>(t1 - t0).count();
  r.peak_active_flows = network.counters().peak_active_flows;
  r.peak_window_ops = t.peak_window_ops;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return r;
}

}  // namespace ccsim::sim
