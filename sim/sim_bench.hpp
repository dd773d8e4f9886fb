#pragma once
/// \file
/// The simulator's own cost (`ccsim bench`): wall-clock time of simulating large uncompressed
/// collectives with the timing interpreter (streaming schedule generation, incremental max-min
/// flow network), one case at a time, single-threaded.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// One case: a collective of `bytes` per rank (fp32, uncompressed) over every rank of a
/// single-GPU-per-node cluster of `ranks` nodes.
struct BenchCase {
  std::string topology = "fat_tree";
  uint32_t ranks = 64;
  std::string operation = "allreduce";
  std::string algorithm = "ring";
  uint64_t bytes = 1ull << 30;
  double nic_Bps = 12.5e9;
  double latency_s = 1e-6;
};

/// What one case measured.
struct BenchResult {
  uint32_t ranks = 0;
  std::string topology;
  uint64_t flows = 0;          ///< transfers simulated
  uint64_t ops = 0;            ///< schedule ops executed (transfers + kernels)
  uint64_t events = 0;         ///< engine events processed
  uint64_t solves = 0;         ///< max-min re-solves (instants with changes)
  uint64_t filled_flows = 0;   ///< flows the re-solves filled, summed over them
  double simulated_s = 0;      ///< collective time in simulated seconds
  double wall_s = 0;           ///< wall time of generation + simulation
  size_t peak_active_flows = 0;
  size_t peak_window_ops = 0;  ///< most schedule ops held at once
  double peak_rss_mib = 0;     ///< process peak resident set after the case
};

/// The cases of a suite, each shaped like `shape` (bytes, bandwidth, latency): "standard" (ring
/// all-reduce on one switch at 1024 and 2048 ranks; ring and butterfly all-reduce on a fat-tree at
/// 64, 256, 1024 and 4096 ranks) or "quick" (the fat-tree cases at 64 and 256 ranks). Errors: an
/// unknown suite.
Result<std::vector<BenchCase>> bench_suite(const std::string& suite, const BenchCase& shape);

/// Runs one case on `topology` (its ranks; c.topology, ranks, bandwidth and latency unused).
/// Errors: unknown collective, a shape it cannot run.
Result<BenchResult> run_bench_case(const BenchCase& c, const topo::Topology& topology);
/// Builds the case's cluster and runs it.
Result<BenchResult> run_bench_case(const BenchCase& c);

}  // namespace ccsim::sim
