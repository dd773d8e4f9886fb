#pragma once
/// \file
/// CUDA versions of DynamiQ's per-round ops (algorithms/dynamiq/dynamiq.hpp), behind a host API
/// that needs no CUDA header: the metadata phase's per-super-group statistics (plan_local), and,
/// under a committed plan, encode, decode, decode-accumulate and the fused decode-accumulate-encode
/// of an intermediate hop.
///
/// Every op is bit-identical to the CPU compressor: the kernels call the per-group and per-entry
/// CCSIM_HD steps that the CPU's dynamiq_encode_sg / dynamiq_decode_sg are made of
/// (kernels/quant/dynamiq_quant.hpp), write the same wire layout, draw the same Philox numbers at the same
/// indices, and the target is compiled with --fmad=false. The statistics sum each super-group in
/// double, entry by entry in index order, as plan_local does. The one exception is the payload of a
/// NaN produced by arithmetic in the statistics (a NaN or inf input): the GPU's double sums return
/// the canonical NaN, the CPU one of the operands'. NaN-ness matches; decode-accumulate reproduces
/// the CPU's NaN (the accumulator's, quieted) exactly.
///
/// The plan. The kernels read a committed plan from device arrays in the order the chunk's
/// super-groups travel on the wire (DynamiqCompressor reorders them by width; "position" k below is
/// the k-th super-group of the reduced vector, which is what prepare() hands the collective):
/// the width of each position, the byte offset of each position's block, and the magnitude grids.
/// dynamiq_cuda_layout() and dynamiq_cuda_levels() build those arrays on the host from the widths
/// the CPU plan committed (DynamiqCompressor::width_of) and the compressor's options; the caller
/// uploads them (once per round) and points a DynamiqCudaPlan at them.
///
/// Chunks. A chunk is `count` entries at entry `offset` of the reduced vector, on super-group
/// boundaries as DynamiqCompressor::can_implement() requires; its wire bytes are
/// block_offset[k1] - block_offset[k0] for its positions [k0, k1) (dynamiq_cuda_wire_bytes()).
/// Entry i of the chunk draws its rounding number at index offset + i of `key`, and correlated
/// rounding uses the shared key {key.seed, key.round, kSharedRank, 0}, rank key.rank of `ranks`,
/// exactly as DynamiqCompressor::encode does with hop.ranks.
///
/// Entry points follow CUB's shape: device pointers (prefix `d_`), an optional stream, a Status.
/// They never allocate (no workspace is needed) and never synchronize: they check the arguments,
/// enqueue one kernel on `stream` and return. A non-OK Status from a launch means the launch
/// itself failed; errors raised while the kernel runs surface at the caller's next synchronization.
/// `count == 0` is a no-op.
///
/// Thread safety: the functions hold no state; concurrent calls on different streams are safe.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// Floats of the magnitude grids a plan carries: Q for q = 2, 4, 8 and 16 (2^(q-1) levels each),
/// back to back in that order (q = 1 has no grid).
inline constexpr uint64_t kDynamiqCudaLevels = 2 + 8 + 128 + 32768;

/// Index of Q_q's first level in the grid array. REQUIRES: q in {2, 4, 8, 16}.
CCSIM_HD constexpr uint64_t dynamiq_cuda_levels_offset(uint32_t q) {
  return q == 2 ? 0 : q == 4 ? 2 : q == 8 ? 10 : 138;
}

/// A committed DynamiQ plan as the kernels read it: the options that shape the wire format and
/// device pointers to the plan's arrays (see the file comment). Plain data; copy it freely.
struct DynamiqCudaPlan {
  uint64_t elements = 0;       ///< d: entries of the reduced vector the plan was made for
  uint32_t super_group = 256;  ///< S: entries per super-group (a multiple of 4)
  uint32_t group = 16;         ///< s: entries per group (a power of two)
  bool hierarchical = true;    ///< uint8 group scales under a bf16 super-group scale
  bool correlated = true;      ///< correlated rounding across ranks
  /// Width q (1, 2, 4, 8 or 16) of the super-group at position k, for k < ceil(d / S).
  const uint8_t* d_widths = nullptr;
  /// Bytes before position k's block in the stream of the whole vector; ceil(d / S) + 1 entries.
  const uint64_t* d_block_offset = nullptr;
  /// The grids, kDynamiqCudaLevels floats (dynamiq_cuda_levels()).
  const float* d_levels = nullptr;
};

/// Host copies of a plan's per-position arrays.
struct DynamiqCudaLayout {
  std::vector<uint8_t> widths;         ///< width of position k
  std::vector<uint64_t> block_offset;  ///< bytes before position k's block; widths.size() + 1 entries
};

/// The per-position arrays of DynamiqCompressor's committed plan, from the width of every original
/// super-group j (`widths`, width_of(j)): with `reorder`, the full super-groups sorted by width
/// (stable, by index) and the partial last one, if any, last, as plan_commit orders them; block k
/// takes dynamiq_sg_bytes() of its super-group's entries at its width.
/// kInvalidArgument unless super_group >= 1, group >= 1, widths.size() == ceil(elements / S) >= 1
/// and every width is 1, 2, 4, 8 or 16.
Result<DynamiqCudaLayout> dynamiq_cuda_layout(std::span<const uint8_t> widths, uint64_t elements, uint32_t super_group,
                                              uint32_t group, bool hierarchical, bool reorder);

/// The kDynamiqCudaLevels grid floats of DynamiqCompressor with these options: Q_2 = {0, 1}, and Q_4,
/// Q_8, Q_16 from geometric_grid_levels() with ε = eps4, eps8, eps16 (0 when not `nonuniform`).
std::vector<float> dynamiq_cuda_levels(bool nonuniform, double eps4, double eps8, double eps16);

/// Wire bytes of the chunk [offset, offset + count) under `layout` (0 for an empty chunk).
/// REQUIRES: the chunk passes dynamiq_cuda_can_implement() for the plan the layout belongs to.
uint64_t dynamiq_cuda_wire_bytes(const DynamiqCudaLayout& layout, uint32_t super_group, uint64_t offset,
                                 uint64_t count);

/// Checks that the kernels can serve the chunk [offset, offset + count) under `plan`:
/// kInvalidArgument unless the plan has entries, its group is a power of two, its super-group a
/// multiple of 4, its arrays are set, and the chunk falls on super-group boundaries of the planned
/// entries (DynamiqCompressor::can_implement()). Called by every coding entry point.
Status dynamiq_cuda_can_implement(const DynamiqCudaPlan& plan, uint64_t offset, uint64_t count);

/// The metadata phase's statistics of one rank's whole vector (DynamiqCompressor::plan_local):
/// d_sums[j] = Σx and d_sums[n + j] = Σx² (in double, in index order) over super-group j of
/// `super_group` entries, n = ceil(count / super_group).
/// REQUIRES: d_x holds `count` floats and d_sums 2n doubles; super_group >= 1.
Status dynamiq_statistics_cuda(const float* d_x, uint64_t count, uint32_t super_group, double* d_sums,
                               CudaStream stream = nullptr);

/// Encodes the chunk d_x[0, count) (entries offset .. offset + count of the reduced vector) into
/// d_out, as DynamiqCompressor::encode with key `key` and hop.ranks = `ranks`.
/// REQUIRES: d_out holds the chunk's wire bytes (any alignment) and overlaps nothing else.
Status dynamiq_encode_cuda(const float* d_x, uint64_t offset, uint64_t count, const DynamiqCudaPlan& plan,
                           const RngKey& key, uint32_t ranks, uint8_t* d_out, CudaStream stream = nullptr);

/// Decodes an encoded chunk into d_out[0, count) (overwrites).
/// REQUIRES: d_in holds the chunk's wire bytes; d_out `count` floats, not overlapping d_in.
Status dynamiq_decode_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count, const DynamiqCudaPlan& plan,
                           float* d_out, CudaStream stream = nullptr);

/// Decode-accumulate: d_acc[i] += decoded value of entry i, the sum in fp32.
/// REQUIRES: as dynamiq_decode_cuda(), with d_acc for d_out.
Status dynamiq_decode_accumulate_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count,
                                      const DynamiqCudaPlan& plan, float* d_acc, CudaStream stream = nullptr);

/// The fused intermediate hop, one pass over memory: d_acc += decode(d_in), then d_out =
/// encode(d_acc) with `key` and `ranks`; equal, bit for bit, to DynamiqCompressor's
/// decode_accumulate_encode (decode_accumulate followed by encode).
/// REQUIRES: d_in and d_out hold the chunk's wire bytes, d_acc `count` floats; no two overlap.
Status dynamiq_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count,
                                             const DynamiqCudaPlan& plan, float* d_acc, const RngKey& key,
                                             uint32_t ranks, uint8_t* d_out, CudaStream stream = nullptr);

}  // namespace ccsim::kern
