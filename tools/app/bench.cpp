#include "tools/app/bench.hpp"

#include <sys/resource.h>

#include <chrono>

#include "sim/engine.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::app {

Result<BenchResult> run_bench_case(const BenchCase& c, const topo::Topology& topology) {
  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* info, topo::find_collective(c.operation, c.algorithm));
  const uint32_t ranks = topology.num_ranks();
  const uint64_t elements = c.bytes / 4;
  topo::CollectiveOptions options;
  options.gpus_per_node = topology.gpus_per_node();
  CCSIM_RETURN_IF_ERROR(info->check(ranks, elements, options));

  const auto t0 = std::chrono::steady_clock::now();
  auto generator = info->make(ranks, elements, options);
  sim::Engine engine;
  sim::FlowNetwork network(engine, sim::link_specs(topology));
  // Uncompressed fp32: 4 bytes per element on the wire, kernels free.
  auto binder = [](topo::Schedule& s, topo::OpId first, topo::OpId end) {
    for (topo::OpId id = first; id < end; ++id) {
      topo::Op& op = s.mutable_op(id);
      op.bytes = op.kind == topo::OpKind::kTransfer ? 4 * s.op_elements(op) : 0;
    }
  };
  sim::ScheduleRunner runner(engine, network, topology, *generator, binder, sim::KernelCostModel{});
  runner.start();
  engine.run();
  const auto t1 = std::chrono::steady_clock::now();

  BenchResult r;
  r.name = c.name;
  r.ranks = ranks;
  r.topology = topology.description().empty() ? topology.kind() : topology.description();
  const sim::ScheduleTiming& t = runner.timing();
  r.flows = t.transfers;
  r.ops = t.ops;
  r.events = engine.events_processed();
  r.solves = network.counters().solves;
  r.simulated_s = t.duration().seconds();
  r.wall_s = std::chrono::duration<double>(t1 - t0).count();
  r.peak_active_flows = network.counters().peak_active_flows;
  r.peak_window_ops = t.peak_window_ops;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return r;
}

}  // namespace ccsim::app
