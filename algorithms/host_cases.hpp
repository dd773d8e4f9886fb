#pragma once
/// \file
/// The CPU kernels of a scheme as `ccsim bench-kernels --device cpu` times them (the host side of
/// device_ops.hpp's CUDA cases): on a chunk of n entries made from two synthetic workers' tensors,
/// under the compressor's plan of a kDeviceRanks-rank round (ranks 0 .. 3 hold x0, x1, x0, x1).
///
/// Collective ops run on what the collective reduces, the prepared vectors (reduced_elements() of
/// them): encode of rank 0's as a leaf message, decode of a fully reduced message (kDeviceRanks
/// times rank 1's), decode-accumulate of rank 0's leaf message into rank 1's, and the fused hop
/// (a leaf in, a two-rank partial sum out). Round ops run on rank 0's whole tensor: its metadata
/// statistics, its prepare, and finish of the fully reduced vector, those the scheme runs at this
/// size (at the launch point, every one it can run). Each case carries the compressor's declared
/// memory traffic, so a profile's curves reproduce the measured times at measured sizes.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/compressor.hpp"
#include "kernels/cost_profile.hpp"
#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::algo {

/// One timed CPU kernel.
struct HostCase {
  topo::KernelKind kind = topo::KernelKind::kEncode;
  uint64_t elements = 0;         ///< the op's chunk (collective ops: the prepared vector; round ops: the tensor)
  uint64_t bytes = 0;            ///< the compressor's memory_bytes() of the op
  std::function<void()> reset;   ///< run untimed before each timed run (restores an accumulator)
  std::function<void()> run;
};

/// A scheme's CPU kernels at one chunk size; owns the buffers they work on.
struct HostCases {
  std::vector<HostCase> cases;
  std::string skipped;  ///< why the scheme cannot be measured at this size ("": it can)
  std::shared_ptr<void> buffers;
};

/// Median wall time in seconds of `repeats` calls of `op`, after one untimed call; `reset` runs
/// untimed before each.
double median_seconds(uint32_t repeats, const std::function<void()>& reset, const std::function<void()>& op);

/// The measured kernels of `scheme` made with `params` ("{}": its defaults) on the CPU, one curve
/// per kernel kind it runs (kern::KernelCostCurve, the launch overhead at a 256-entry chunk, then a
/// point per size of `sizes`, each rounded down to the scheme's alignment, at least one block): its
/// collective ops unless `round_only` (a round_variants switch, whose collective ops are the
/// defaults'), and its round ops. Empty, with `skipped` saying why, when the scheme cannot run at
/// some size.
Result<std::vector<kern::KernelCostCurve>> measure_host_kernels(const std::string& scheme, std::string_view params,
                                                                bool round_only, std::span<const uint64_t> sizes,
                                                                std::span<const float> x0, std::span<const float> x1,
                                                                uint64_t seed, uint32_t repeats, std::string& skipped);

/// The cases of `comp` (its layout is set here: one matrix layer, bench_layer()) on a chunk of `n`
/// entries of `x0`, `x1` (at least n each), with random streams keyed by `seed`: its collective ops
/// when `collective_ops`, then its round ops (every one it can run when `launch_point`).
Result<HostCases> host_cases(Compressor& comp, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                             uint64_t seed, bool collective_ops, bool launch_point);

}  // namespace ccsim::algo
