#pragma once
/// \file
/// The CUDA kernels `ccsim bench-kernels --device cuda` times. For every scheme with CUDA kernels,
/// at the compressor's default parameters, the four schedule ops on one chunk: encode of a leaf
/// message, decode of a fully reduced message, decode-accumulate of a leaf message and the fused
/// hop (a leaf message in, a two-rank partial sum out), as the CPU bench runs them
/// (tools/app/bench_kernels.cpp). Inputs are what the collective reduces: the compressor's plan
/// over four ranks and its prepared vectors, made by the CPU compressor and uploaded. Each case
/// carries the compressor's declared memory bytes, and the wire size of every message it uses is
/// checked against the compressor's wire format (a mismatch is an internal error: the case would
/// not time the scheme it names).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
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
};

/// Schemes with CUDA kernels in the bench, in the order the bench runs them.
std::vector<std::string> cuda_case_schemes();

/// Builds the cases of `scheme` on a chunk of `n` elements (a multiple of the scheme's alignment)
/// made from two synthetic ranks' gradients `x0`, `x1` (at least n each), allocating what it needs
/// from `dev` (the caller releases it after timing). REQUIRES: scheme in cuda_case_schemes().
Status cuda_cases(const std::string& scheme, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                  uint64_t seed, kern::CudaBench& dev, std::vector<CudaCase>& out);

}  // namespace ccsim::app
