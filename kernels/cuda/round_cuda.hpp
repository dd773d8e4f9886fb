#pragma once
/// \file
/// CUDA versions of the simple round phases of several compressors (algorithms/compressor.hpp:
/// plan_local, prepare, finish), behind a host API that needs no CUDA header:
///  - DynamiQ (algorithms/dynamiq/dynamiq.hpp): prepare gathers the super-groups in the plan's
///    order and subtracts each one's mean; finish scatters them back and adds ranks x the mean;
///  - OmniReduce (algorithms/omnireduce/omnireduce.hpp): the union's prefix (elements of the union
///    chunks before each chunk) from the union bitmap; prepare (compact: gather the union chunks;
///    sparse: zero the other chunks) and finish (compact: scatter back, zeros elsewhere; sparse: a
///    copy);
///  - MX with FP8-LM global scaling (algorithms/mx/mx.hpp): plan_local's maxima per block
///    (kern::block_max_abs) or per layer (kern::parallel_max_abs of each layer), and prepare /
///    finish of layer scaling (a multiply by one factor per layer);
///  - SDP4Bit (algorithms/int4/sdp4bit_pipeline.hpp): TLq-HS's 32-point Hadamard on every complete
///    32-element block (its prepare and its finish), and qWD's prepare (x - R) and finish
///    (reduced + R, optionally R = the result);
///  - the low-rank engine of PowerSGD and EDGC (algorithms/lowrank/low_rank.hpp): its elementwise
///    steps, M = x + e for a compressed layer and the move of an uncompressed one (x + e, then
///    e = 0); its products are lowrank_cuda.hpp's.
/// The plan data those ops need (DynamiQ's order and means, OmniReduce's bitmap and prefix, MX's
/// layer offsets and factors, qWD's reference R) is fixed by the compressor's plan_commit on the
/// host; the caller uploads it and passes device arrays.
///
/// Bit identity. Every op equals its CPU reference bit for bit, NaN payloads and signs included:
/// copies and zero fills move bits; sums, differences and products go through the x86-64 NaN rules
/// of block_cuda_common.cuh (the first NaN operand, quieted, or the default NaN 0xFFC00000), with
/// the operand order the CPU code has (`a - b` and `a * b` as written; for the additions, where both
/// operands can be NaN, the order GCC 12 emits for the CPU loop on x86-64 at -O3, read from its
/// code and stated at each function: a NaN + NaN returns the first operand's NaN, so a CPU
/// reference built by another compiler or with other flags may differ in such NaNs only); maxima
/// are exact (max |x| is the largest magnitude, or the first NaN in index order with its bits, as
/// kern::max_abs returns it). TLq's transform runs the butterflies of the group quantizer's kernels
/// (warp_hadamard32, the CPU's fwht_unnormalized stage by stage, with the operand order of
/// hadamard_blocks' sums), and the CPU's fallback for blocks beyond kGroupHadamardMaxInput
/// (butterflies in double, scaled by 1/sqrt(32), clamped to +-FLT_MAX) with the x86 rules for
/// double NaNs and conversions. The target is compiled with --fmad=false.
///
/// Entry points follow CUB's shape and quant_cuda.hpp's conventions: device pointers (prefix
/// `d_`), an optional stream, a Status. They check the arguments (null pointers, sizes, overlaps
/// they forbid: kInvalidArgument naming the function, without touching the device), enqueue their
/// kernels (and cudaMemsetAsync / cudaMemcpyAsync) on `stream` and return; they never allocate and
/// never synchronize (ops that need device scratch take it as `d_temp`, sized by a `*_temp_bytes`
/// query that needs no device). A non-OK Status from a launch means the launch itself failed;
/// errors raised while a kernel runs surface at the caller's next synchronization. `count == 0` is
/// a no-op except where noted. Floats may sit at any 4-byte boundary (16-byte vectors are used
/// where the addresses allow); plan arrays must be naturally aligned. Device arrays the host cannot
/// check (orders, offsets, prefixes) must be as the function states; the kernels do not validate
/// them.
///
/// Thread safety: the functions hold no state; concurrent calls on different streams are safe.

#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

// --- DynamiQ (DynamiqCompressor::prepare / finish) -----------------------------------------------

/// DynamiqCompressor::prepare: for every position k of the plan's order and i < m_j (j =
/// d_order[k], m_j = min(super_group, count - j * super_group) the entries of super-group j),
/// d_out[k * S + i] = d_x[j * S + i] - d_mean[j] (S = super_group), in fp32.
/// d_order: the plan's order (DynamiqCompressor::order()), a permutation of the n = ceil(count / S)
/// super-groups with a partial last super-group, if any, at position n - 1 (as every DynamiQ plan
/// has it); d_mean: the n means (DynamiqCompressor::means(), zeros without subtract_mean).
/// REQUIRES: d_x and d_out hold `count` floats and do not overlap (checked); d_order n uint32,
/// d_mean n floats. kInvalidArgument unless super_group >= 1.
Status dynamiq_prepare_cuda(const float* d_x, uint64_t count, uint32_t super_group, const uint32_t* d_order,
                            const float* d_mean, float* d_out, CudaStream stream = nullptr);

/// DynamiqCompressor::finish: d_out[j * S + i] = d_reduced[k * S + i] + shift_j for the positions of
/// dynamiq_prepare_cuda(), shift_j = fl(float(ranks) * d_mean[j]). For the addition, where both
/// operands can be NaN, the operand order of the CPU loop as GCC compiles it for x86-64 is assumed:
/// the reduced value first, except for the last entry of a super-group with an odd number m >= 3
/// of entries (the element GCC's vectorized loop leaves to a scalar step), where shift_j comes first.
/// REQUIRES: as dynamiq_prepare_cuda(), d_reduced in place of d_x (no overlap with d_out).
Status dynamiq_finish_cuda(const float* d_reduced, uint64_t count, uint32_t super_group, const uint32_t* d_order,
                           const float* d_mean, uint32_t ranks, float* d_out, CudaStream stream = nullptr);

// --- OmniReduce (OmniReduceCompressor::plan_commit's prefix, prepare, finish) --------------------

/// Bytes of device scratch omnireduce_prefix_cuda() needs (whatever the count).
uint64_t omnireduce_prefix_cuda_temp_bytes();

/// The union's prefix, OmniReduceCompressor::union_prefix(): for the n = ceil(count / chunk) chunks
/// of a `count`-element tensor and the union bitmap d_bitmap (bit c % 64 of word c / 64 set iff
/// chunk c is in the union; bits of chunks >= n are ignored, as plan_commit clears them),
/// d_prefix[c] = the elements of union chunks before chunk c, for c = 0 .. n (n + 1 entries;
/// d_prefix[n] is the compact layout's reduced_elements()). Integer counts, exact. Two launches (a
/// count per tile of bitmap words into d_temp, then the prefix of each tile); count == 0 writes
/// d_prefix[0] = 0. REQUIRES: d_bitmap holds ceil(n / 64) words, d_prefix n + 1 entries, d_temp
/// temp_bytes >= omnireduce_prefix_cuda_temp_bytes() bytes, 16-byte aligned (checked).
/// kInvalidArgument unless chunk is a power of two.
Status omnireduce_prefix_cuda(const uint64_t* d_bitmap, uint64_t count, uint64_t chunk, void* d_temp,
                              uint64_t temp_bytes, uint64_t* d_prefix, CudaStream stream = nullptr);

/// OmniReduceCompressor::prepare of a `count`-element tensor under the union d_bitmap (as above).
/// compact: d_out[d_prefix[c] + t] = d_x[c * chunk + t] for every union chunk c (the union chunks
/// gathered in order; d_out holds d_prefix[n] floats and must not overlap d_x: a d_out that starts
/// inside d_x is rejected, the rest is not checked since the length is on the device). sparse:
/// d_out[i] = d_x[i] inside union chunks, +0 elsewhere (d_out holds `count` floats and may be d_x;
/// d_prefix is not read and may be null). d_own (send=own): null, or the rank's own top-k bitmap
/// (OmniReduceCompressor::own_bitmap(), the layout of d_bitmap): entries of chunks outside it are
/// sent as +0, in their union places.
/// REQUIRES: d_prefix as omnireduce_prefix_cuda() computes it (compact); d_own a subset of d_bitmap.
/// kInvalidArgument unless chunk is a power of two.
Status omnireduce_prepare_cuda(const float* d_x, uint64_t count, uint64_t chunk, const uint64_t* d_bitmap,
                               const uint64_t* d_prefix, const uint64_t* d_own, bool compact, float* d_out,
                               CudaStream stream = nullptr);

/// OmniReduceCompressor::finish. compact: d_out[c * chunk + t] = d_reduced[d_prefix[c] + t] inside
/// union chunks, +0 elsewhere (d_reduced holds d_prefix[n] floats and must not overlap d_out: a
/// d_reduced that starts inside d_out is rejected). sparse: a copy of `count` floats
/// (cudaMemcpyAsync unless d_out is d_reduced, which must otherwise not overlap it; d_bitmap and
/// d_prefix are not read and may be null).
Status omnireduce_finish_cuda(const float* d_reduced, uint64_t count, uint64_t chunk, const uint64_t* d_bitmap,
                              const uint64_t* d_prefix, bool compact, float* d_out, CudaStream stream = nullptr);

// --- MX global scaling (MxCompressor::plan_local, prepare, finish) -------------------------------

/// kern::block_max_abs (MX block scaling's plan_local): d_max[b] = max_abs() of block b =
/// d_x[b * block, min(count, (b + 1) * block)), ceil(count / block) entries: the largest |x|, or the
/// block's first NaN, bit for bit. One launch; a group of threads per block.
/// kInvalidArgument unless block >= 1.
Status block_max_abs_cuda(const float* d_x, uint64_t count, uint32_t block, float* d_max,
                          CudaStream stream = nullptr);

/// Bytes of device scratch layer_max_abs_cuda() needs for `layers` layers: one 64-bit key each,
/// rounded up to 16 bytes.
uint64_t layer_max_abs_cuda_temp_bytes(uint64_t layers);

/// MX layer scaling's plan_local: d_max[l] = kern::parallel_max_abs of layer l =
/// d_x[d_offsets[l], d_offsets[l + 1]) for l < layers (an empty layer gives +0), bit for bit.
/// d_offsets: layers + 1 non-decreasing entries from 0 to count: the offsets of the layers
/// MxCompressor uses and their end (its layout when that tiles the tensor, else the one layer
/// {0, count}; after a plan, its layer_scales()). Three launches (zero the keys in
/// d_temp, exact maxima as 64-bit keys combined by atomicMax, keys to floats); the result does not
/// depend on the order. count == 0 writes +0 to every layer.
/// REQUIRES: d_temp holds temp_bytes >= layer_max_abs_cuda_temp_bytes(layers) bytes, 16-byte aligned
/// (checked). kInvalidArgument unless layers >= 1.
Status layer_max_abs_cuda(const float* d_x, uint64_t count, const uint64_t* d_offsets, uint64_t layers, void* d_temp,
                          uint64_t temp_bytes, float* d_max, CudaStream stream = nullptr);

/// MxCompressor::prepare / finish with layer scaling (scale_layers): d_out[i] = d_x[i] * d_factor[l]
/// for i in layer l (offsets as for layer_max_abs_cuda()), in fp32. prepare passes every layer's
/// LayerScale::to_fpx, finish its from_fpx. d_out may be d_x (in place); otherwise they must not
/// overlap (checked). kInvalidArgument unless layers >= 1.
Status scale_layers_cuda(const float* d_x, uint64_t count, const uint64_t* d_offsets, uint64_t layers,
                         const float* d_factor, float* d_out, CudaStream stream = nullptr);

// --- SDP4Bit (Sdp4bitTlqCompressor with hadamard; Sdp4bitWeightCompressor qWD) -------------------

/// Sdp4bitTlqCompressor::prepare and ::finish with `hadamard` (the same transform): d_out = d_x with
/// H_32 (orthonormal) applied to every complete 32-element block; the last count % 32 elements are
/// copied unchanged. A block whose largest magnitude (NaNs ignored) exceeds kGroupHadamardMaxInput
/// is transformed in double and clamped to +-FLT_MAX, as the CPU does. One warp per block. d_out
/// may be d_x (in place); otherwise they must not overlap (checked).
Status sdp4bit_hadamard_cuda(const float* d_x, uint64_t count, float* d_out, CudaStream stream = nullptr);

/// Sdp4bitWeightCompressor::prepare of qWD: d_out[i] = d_x[i] - d_reference[i], in fp32. R is zero
/// before the first round (the caller zeroes it, as the compressor starts from R = 0). d_out may be
/// d_x or d_reference; partial overlaps are rejected.
Status sdp4bit_qwd_prepare_cuda(const float* d_x, uint64_t count, const float* d_reference, float* d_out,
                                CudaStream stream = nullptr);

/// Sdp4bitWeightCompressor::finish of qWD: d_out[i] = d_reduced[i] + d_reference[i] (the CPU
/// loop's operand order: reduced value first), and with `update_reference` (the last rank's
/// finish) d_reference[i] = d_out[i] in the same pass. Any two of the three arrays may be the same
/// array; partial overlaps are rejected.
Status sdp4bit_qwd_finish_cuda(const float* d_reduced, uint64_t count, float* d_reference, bool update_reference,
                               float* d_out, CudaStream stream = nullptr);

// --- Low-rank engine (LowRankCompressor: PowerSGD, EDGC) ------------------------------------------

/// LowRankCompressor::add_into for one layer of `count` entries: d_out[i] = d_x[i] + d_residual[i]
/// (M = x + e, which plan_local and prepare form for a compressed layer), in fp32, x first (the
/// operand order of the CPU loop as GCC 12 compiles it for x86-64, in its vector and scalar steps).
/// d_out may be d_x or d_residual; partial overlaps are rejected.
Status lowrank_add_residual_cuda(const float* d_x, uint64_t count, const float* d_residual, float* d_out,
                                 CudaStream stream = nullptr);

/// LowRankCompressor::move_into, an uncompressed layer's prepare with error feedback: d_out[i] =
/// d_x[i] + d_residual[i] (x first, as add_into), then d_residual[i] = 0, in one pass. d_out may be
/// d_x; d_residual must be neither (checked), and partial overlaps are rejected.
Status lowrank_move_uncompressed_cuda(const float* d_x, uint64_t count, float* d_residual, float* d_out,
                                      CudaStream stream = nullptr);

}  // namespace ccsim::kern
