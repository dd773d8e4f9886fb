#pragma once
/// \file
/// `ccsim bench`: wall-clock cost of simulating large collectives with the timing interpreter
/// (streaming schedule generation, incremental max-min flow network), one case at a time.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/topology.hpp"

namespace ccsim::app {

/// One benchmark case: a collective of `bytes` (fp32, uncompressed) over all ranks of a topology.
struct BenchCase {
  std::string name;
  std::string operation = "allreduce";
  std::string algorithm = "ring";
  uint64_t bytes = 1ull << 30;
};

/// What one case measured.
struct BenchResult {
  std::string name;
  uint32_t ranks = 0;
  std::string topology;
  uint64_t flows = 0;          ///< transfers simulated
  uint64_t ops = 0;            ///< schedule ops executed (transfers + kernels)
  uint64_t events = 0;         ///< engine events processed
  uint64_t solves = 0;         ///< max-min re-solves (instants with changes)
  double simulated_s = 0;      ///< collective time in simulated seconds
  double wall_s = 0;           ///< wall time of generation + simulation
  size_t peak_active_flows = 0;
  size_t peak_window_ops = 0;  ///< most schedule ops held at once
  double peak_rss_mib = 0;     ///< process peak resident set after the case
};

/// Runs one case on `topology` (single-threaded). Errors: unknown collective, bad shape.
Result<BenchResult> run_bench_case(const BenchCase& c, const topo::Topology& topology);

}  // namespace ccsim::app
