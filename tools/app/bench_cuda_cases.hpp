#pragma once
/// \file
/// The CUDA kernels `ccsim bench-kernels --device cuda` times, at the compressors' default
/// parameters and, for round ops only a parameter switch runs, under that switch
/// (round_variants() in tools/app/bench_kernels.hpp).
///
/// Collective ops, for every scheme whose messages have CUDA kernels: the four schedule ops on one
/// chunk: encode of a leaf message, decode of a fully reduced message, decode-accumulate of a leaf
/// message and the fused hop (a leaf message in, a two-rank partial sum out), as the CPU bench runs
/// them (tools/app/bench_kernels.cpp). Inputs are what the collective reduces: the compressor's
/// plan over four ranks and its prepared vectors, made by the CPU compressor and uploaded. The wire
/// size of every message a case uses is checked against the compressor's wire format by comparing
/// the device's leaf message with the CPU compressor's, byte for byte.
///
/// Round ops (topo::is_round_op), every one these schemes run: thc, dynamiq, omnireduce (compact):
/// plan_local, prepare, finish; mxfp8/6/4: plan_local with the default block scaling, and
/// plan_local, prepare and finish made with global_scaling layer (the parameters their curves
/// record); sdp4bit_tlq (made with hadamard on, recorded likewise) and sdp4bit_qwd (in its second
/// round, against the reference the first left): prepare, finish; powersgd (in round 1, after a complete round 0: the
/// warm-start Q and a nonzero error-feedback residual): plan_local, prepare, finish; edgc (warming
/// up, a sampled round): plan_local, prepare. One rank's op on its whole tensor of n elements, laid
/// out as one matrix layer (bench_layer()), under the CPU compressor's plan of the same four-rank
/// round (its keys those of the numerics interpreter). Before it is added, each case runs once and
/// its output is compared with the CPU compressor's, byte for byte: plan_local's statistics
/// (PlanStats entries), prepare's vector, finish's tensor (of kRanks times the rank's prepared
/// vector); cuBLAS products within the bound of their summation order (lowrank_cuda.hpp), EDGC's
/// entropy as the host computes it from the device's sampled range and counts.
///
/// Each case carries the compressor's declared memory bytes (memory_bytes(); a round op's on the
/// whole tensor, hop {1, kRanks}, after the plan). A mismatch is an internal error naming the
/// scheme, op and size: the case would not time the scheme it names.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/bench_cuda.hpp"
#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::app {

/// One timed kernel.
struct CudaCase {
  topo::KernelKind kind = topo::KernelKind::kEncode;
  uint64_t bytes = 0;  ///< the compressor's memory_bytes() of the op
  std::function<Status(kern::CudaStream)> launch;
  std::string params = "{}";  ///< the compressor's parameters (compact JSON; "{}" = defaults)
};

/// Schemes with CUDA kernels in the bench, in the order the bench runs them.
std::vector<std::string> cuda_case_schemes();
/// The (scheme, params) of the round cases made with other than the default parameters: the
/// round_variants() of tools/app/bench_kernels.hpp, which the CPU bench measures too.
std::vector<std::pair<std::string, std::string>> cuda_round_variants();

/// Builds the cases of `scheme` on a chunk of `n` elements (a multiple of the scheme's alignment)
/// made from two synthetic ranks' gradients `x0`, `x1` (at least n each), allocating what it needs
/// from `dev` (the caller releases it after timing): its collective ops' cases, if it has any, then
/// its round ops' in KernelKind order, those of the default parameters first (a round op's chunk is
/// the whole tensor of n elements).
/// REQUIRES: scheme in cuda_case_schemes().
Status cuda_cases(const std::string& scheme, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                  uint64_t seed, kern::CudaBench& dev, std::vector<CudaCase>& out);

}  // namespace ccsim::app
