#pragma once
/// \file
/// Collective algorithms: pure functions from (group size, tensor size, options) to a Schedule
/// (STYLE rule 8: schedules are data, one algorithm per file, no simulation here).

#include <functional>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::topo {

/// Options every algorithm understands.
struct CollectiveOptions {
  uint64_t align = 1;  ///< chunk boundaries are multiples of this many elements (compressor block size)
};

/// Ring all-reduce: reduce-scatter then all-gather, each n−1 steps, chunk c starting at rank c.
/// Intermediate reduce hops are fused decode-accumulate-encode kernels; the chunk owner encodes
/// the reduced chunk once and the message is forwarded around the ring for the all-gather. The
/// owner also decodes its own message so every rank ends with identical values.
Schedule make_allreduce_ring(uint32_t ranks, uint64_t elements, const CollectiveOptions& options);

/// A registered (operation, algorithm) pair.
struct CollectiveInfo {
  std::string operation;  ///< "allreduce", ...
  std::string algorithm;  ///< "ring", ...
  std::string description;
  std::function<Schedule(uint32_t, uint64_t, const CollectiveOptions&)> build;
};
const std::vector<CollectiveInfo>& known_collectives();
/// Looks up an (operation, algorithm) pair; kNotFound lists the valid ones.
Result<const CollectiveInfo*> find_collective(const std::string& operation, const std::string& algorithm);

}  // namespace ccsim::topo
