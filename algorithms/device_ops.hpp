#pragma once
/// \file
/// Device ops: a scheme's CUDA kernels, registered with the scheme (CompressorInfo::device_ops) and
/// timed by `ccsim bench-kernels --device cuda` (tools/app/kernel_table.hpp), which iterates the
/// registry for them. Each op has one host-side entry point, as CUB's Device layer does: a
/// DeviceCase's `launch` enqueues exactly that op on a stream, its inputs already on the device.
///
/// This header is plain C++ (kern::CudaBench needs no CUDA header either). The ops themselves live
/// next to their compressors (algorithms/<family>/<family>_device.cpp, shared pieces in
/// algorithms/device_ops.cpp) and are compiled only where the build has CUDA (CCSIM_HAVE_CUDA); in a
/// build without it no scheme has device ops and device_cases() is not defined.
///
/// What a scheme's cases time, at its default parameters and, for the round ops only a parameter
/// switch runs, under that switch (CompressorInfo::round_variants, which the CPU bench measures too):
///
/// Collective ops (DeviceOps::collective): the four schedule ops on one chunk: encode of a leaf
/// message, decode of a fully reduced message, decode-accumulate of a leaf message and the fused hop
/// (a leaf message in, a two-rank partial sum out), as the CPU bench runs them. Inputs are what the
/// collective reduces: the compressor's plan over kDeviceRanks ranks and its prepared vectors, made
/// by the CPU compressor and uploaded. The wire size of every message a case uses is checked
/// against the compressor's wire format by comparing the device's leaf message with the CPU
/// compressor's, byte for byte.
///
/// Round ops (DeviceOps::rounds, topo::is_round_op): one rank's op (kDeviceTimedRank) on its whole
/// tensor of n elements, laid out as one matrix layer (bench_layer()), under the CPU compressor's
/// plan of the same kDeviceRanks-rank round (its keys those of the numerics interpreter). Before it
/// is added, each case runs once and its output is compared with the CPU compressor's, byte for
/// byte: plan_local's statistics (PlanStats entries), prepare's vector, finish's tensor (of
/// kDeviceRanks times the rank's prepared vector); cuBLAS products within the bound of their
/// summation order (kernels/cuda/lowrank_cuda.hpp), EDGC's entropy as the host computes it from the
/// device's sampled range and counts.
///
/// Each case carries the compressor's declared memory bytes (memory_bytes(); a round op's on the
/// whole tensor, hop {1, kDeviceRanks}, after the plan). A mismatch is an internal error naming the
/// scheme, op and size: the case would not time the scheme it names.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/compressor.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/cost_profile.hpp"
#include "kernels/cuda/bench_cuda.hpp"
#include "kernels/philox.hpp"
#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::algo {

struct CompressorInfo;

/// Ranks of the round the cases plan and of their hop contexts (as the CPU bench: THC's field width
/// depends on it).
inline constexpr uint32_t kDeviceRanks = 4;
/// The rank whose round ops the cases run (not rank 0, whose keys are the closest to a default key:
/// a kernel that ignored the rank could still match there).
inline constexpr uint32_t kDeviceTimedRank = 1;

/// The layout of a round op's tensor of `n` elements in the kernel benches (CPU and CUDA): one
/// near-square matrix layer (what the low-rank schemes factor), rows the largest power of two
/// dividing n with rows^2 <= n.
inline LayerShape bench_layer(uint64_t n) {
  uint64_t rows = 1;
  while (rows * rows * 4 <= n && n % (rows * 2) == 0) rows *= 2;
  return {0, n, rows, n / rows};
}

/// One timed kernel.
struct DeviceCase {
  topo::KernelKind kind = topo::KernelKind::kEncode;
  uint64_t bytes = 0;  ///< the compressor's memory_bytes() of the op
  /// Enqueues the op once on the stream (nullptr: the legacy default stream); never synchronizes.
  /// Repeated launches do the same work on the same bytes (the bench times them back to back).
  std::function<Status(kern::CudaStream)> launch;
  std::string params = "{}";  ///< the compressor's parameters (compact JSON; "{}" = defaults)
};

/// The collective ops of a scheme on a chunk of n elements, one host-side entry point each. Device
/// pointers: `d_x` n floats, messages the compressor's wire_bytes() of their hop.
struct CollectiveKernels {
  /// encode_leaf: d_x as a leaf message (hop {1, kDeviceRanks}); encode_full: as a fully reduced one
  /// (hop {kDeviceRanks, kDeviceRanks}).
  std::function<Status(const float* d_x, uint8_t* d_out, kern::CudaStream)> encode_leaf, encode_full;
  /// decode_full overwrites d_out with a fully reduced message; decode_accumulate_leaf adds a leaf
  /// message to d_out.
  std::function<Status(const uint8_t* d_in, float* d_out, kern::CudaStream)> decode_full, decode_accumulate_leaf;
  /// The fused hop: a leaf message added to d_acc, which is re-encoded as a two-rank partial sum.
  std::function<Status(const uint8_t* d_in, float* d_acc, uint8_t* d_out, kern::CudaStream)> fused;
};

/// What a scheme's builders work on. Made by device_cases(); the builders may allocate from `dev`
/// (released by the bench after timing) and advance `round`.
struct DeviceContext {
  std::string scheme;          ///< the registered name (for messages)
  Compressor* comp = nullptr;  ///< made by the registry with the cases' params; owned by device_cases()
  uint64_t n = 0;              ///< chunk (collective ops) or tensor (round ops) elements
  uint64_t seed = 0;
  std::span<const float> x0, x1;  ///< two synthetic workers' tensors, n elements each
  kern::CudaBench* dev = nullptr;  ///< the device arena
  /// Round ops only: rank kDeviceTimedRank's tensor on the device (n floats).
  const float* d_x = nullptr;
  uint32_t round = 0;    ///< the round the cases run in (0 unless a builder advances it)
  bool planned = false;  ///< whether `round`'s plan was made (detail::plan_once)

  /// Rank r's tensor: ranks 0 .. kDeviceRanks - 1 hold x0, x1, x0, x1.
  std::span<const float> tensor(uint32_t rank) const { return rank % 2 == 0 ? x0 : x1; }
  /// The keys the numerics interpreter draws (algorithms/numerics.cpp) in `round`.
  kern::RngKey plan_key(uint32_t rank) const { return {seed, round, rank, kPlanStream}; }
  kern::RngKey prepare_key(uint32_t rank) const { return {seed, round, rank, kPrepareStream}; }
  /// The key of the collective ops' messages (rank 0's first op of round 0).
  kern::RngKey collective_key() const { return {seed, 0, 0, 1}; }
};

/// Builds the collective ops of `c.comp` at its default parameters (each must match the
/// compressor's defaults: device_cases() checks the leaf message), its round planned.
using CollectiveBuilder = Result<CollectiveKernels> (*)(const DeviceContext& c);
/// Builds round cases, appending them to `out` in KernelKind order, each checked against the CPU
/// compressor before it is added (its bytes and params are filled in by device_cases()).
using RoundBuilder = Status (*)(DeviceContext& c, std::vector<DeviceCase>& out);

/// Round cases on a compressor made with `params`.
struct RoundDeviceOps {
  std::string params = "{}";  ///< "{}" or one of the scheme's round_variants (compact, sorted keys)
  RoundBuilder build = nullptr;
};

/// A scheme's CUDA kernels in the bench, registered with the scheme (CompressorInfo::device_ops,
/// from algorithms/builtin.cpp's list): a static object of its device-ops file, e.g.
/// `DeviceOps{mx_kernels, {{"{}", mx_round_cases}, {R"({"global_scaling":"layer"})", ...}}}`.
struct DeviceOps {
  /// Its collective ops at the default parameters; null where the collective sends what has no CUDA
  /// codec (fp32: OmniReduce's chunks, the low-rank factors).
  CollectiveBuilder collective = nullptr;
  /// Its round cases, in the order the bench runs them (after the collective ops), the defaults'
  /// first; the others' params are exactly the scheme's round_variants (bench_cuda_test checks).
  std::vector<RoundDeviceOps> rounds = {};
};

/// Builds the cases of the registered scheme `info` on a chunk of `n` elements made from two
/// synthetic ranks' gradients `x0`, `x1` (at least n each), allocating what it needs from `dev`
/// (the caller releases it after timing): its collective ops' cases, if it has any, then its round
/// ops' in KernelKind order, those of the default parameters first (a round op's chunk is the whole
/// tensor of n elements). Compressors are made by CompressorRegistry::global().
/// REQUIRES: info.device_ops != nullptr (else kInvalidArgument); n a multiple of the scheme's
/// alignment. Defined only where the build has CUDA.
Status device_cases(const CompressorInfo& info, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                    uint64_t seed, kern::CudaBench& dev, std::vector<DeviceCase>& out);

/// The measured device ops of the registered scheme `info`: its cases at a 256-entry chunk (the
/// launch overheads) and at every size of `sizes`, each the median of `repeats` launches timed with
/// CUDA events after one untimed launch; one curve per kernel kind and params, in the order the
/// cases first produce them, each point's bytes the case's declared memory traffic. Defined only
/// where the build has CUDA.
Result<std::vector<kern::KernelCostCurve>> measure_device_kernels(const CompressorInfo& info,
                                                                  std::span<const uint64_t> sizes,
                                                                  std::span<const float> x0, std::span<const float> x1,
                                                                  uint64_t seed, uint32_t repeats,
                                                                  kern::CudaBench& dev);

}  // namespace ccsim::algo
