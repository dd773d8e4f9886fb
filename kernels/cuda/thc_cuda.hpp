#pragma once
/// \file
/// CUDA versions of THC's ops (algorithms/thc/thc.hpp) and of the Hadamard transforms they are made
/// of (kernels/transform/hadamard.hpp), behind a host API that needs no CUDA header:
///  - the plain and randomized Hadamard transforms over power-of-two blocks (1 .. 2^24), forward
///    and inverse;
///  - max |x| (max_abs / parallel_max_abs of kernels/stats/entropy.hpp) into one device float;
///  - ThcCompressor::plan_local (the rank's metadata entry), prepare (pad, scale 2^-k, rotate, code
///    on the lattice) and finish (lattice value of the integer sums, inverse rotation, scale 2^k,
///    drop the padding), each in as few passes over memory as the rotation allows;
///  - the wire: thc_pack, thc_unpack, thc_unpack_accumulate (kernels/quant/thc_quant.hpp) and the fused
///    hop acc += fields(in); out = pack(acc).
///
/// Bit identity. Every op equals its CPU reference bit for bit: the butterflies run the stages of
/// fwht_unnormalized() in its order on the same operands (any grouping of stages into passes gives
/// the same bits, since each butterfly is elementwise), then one multiply by hadamard_scale(block);
/// the signs, the lattice's rounding draws and the element functions (thc_lattice_code,
/// thc_lattice_value, thc_scale_pow2) are the CPU's, and the target is compiled with --fmad=false.
/// A transform of infinities and NaNs matches too: every NaN the butterflies produce becomes the
/// canonical 0x7FC00000 before the scaling on both sides (hadamard_quiet, kernels/transform/
/// hadamard.hpp: the CPU's payload would otherwise depend on the operand order the compiler picks
/// for a + b when both are NaN), and every other operation follows the CPU's x86-64 NaN rules
/// (block_cuda.hpp: the first NaN operand, quieted, or the default NaN 0xFFC00000 from inf - inf).
/// max |x| returns the first NaN in index order with its payload, as max_abs() does.
///
/// Rotation passes. The transform of a block of B = 2^L elements takes 1 pass over memory for
/// L <= 13, 2 for L <= 21 and 3 above (hadamard_cuda_passes()): the first pass runs stages
/// 0 .. min(L, 13) - 1 inside tiles of 8192 consecutive elements (one CTA per tile: registers, warp
/// shuffles and one exchange through shared memory), each further pass up to 8 more stages on
/// tiles of 8192 elements taken as 2^r rows (stride 2^s, the first stage of the pass) of 8192 / 2^r
/// contiguous columns. The first pass also does what precedes the butterflies (padding, scaling,
/// signs, the lattice value), the last what follows them (the scale, signs, lattice codes, 2^k,
/// the padding dropped, the maximum), so each op costs the transform's passes and nothing else.
///
/// Entry points follow CUB's shape and quant_cuda.hpp's conventions: device pointers (prefix
/// `d_`), an optional stream, a Status; they check the arguments, enqueue their kernels and return,
/// never allocate and never synchronize (ops that need device scratch take it as `d_temp`, sized
/// by a `*_temp_bytes` query). `count == 0` is a no-op except where noted. Floats may sit at any
/// 4-byte boundary and wire buffers at any byte; the kernels use 16-byte vectors where addresses
/// allow. Inputs and outputs must not overlap unless a function says they may.
///
/// Thread safety: no state; concurrent calls on different streams are safe.

#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/thc_quant.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// Largest Hadamard block the CUDA kernels accept (THC's largest rotation_block).
inline constexpr uint64_t kHadamardCudaMaxBlock = uint64_t{1} << 24;

/// Passes over memory of the CUDA transform of `block`-element blocks: 1 for blocks up to 2^13,
/// 2 up to 2^21, 3 up to 2^24. REQUIRES: block a power of two <= kHadamardCudaMaxBlock.
uint32_t hadamard_cuda_passes(uint64_t block);

// --- Hadamard transforms (kernels/transform/hadamard.hpp) -----------------------------------------

/// kInvalidArgument unless block is a power of two in [1, kHadamardCudaMaxBlock] and count a
/// multiple of block. Called by every transform entry point.
Status hadamard_cuda_can_implement(uint64_t count, uint64_t block);

/// hadamard_transform(): d_out = H_block · d_in, blockwise. d_out may be d_in (in place); else
/// d_in is only read. Passes after the first work in place on d_out.
/// REQUIRES: d_in and d_out hold `count` floats.
Status hadamard_transform_cuda(const float* d_in, uint64_t count, uint64_t block, float* d_out,
                               CudaStream stream = nullptr);

/// randomized_hadamard_transform(): d_out = H_block · D · d_in, D the signs of `key` at indices
/// index_base + i. Aliasing as hadamard_transform_cuda().
Status randomized_hadamard_transform_cuda(const float* d_in, uint64_t count, uint64_t block, const RngKey& key,
                                          uint64_t index_base, float* d_out, CudaStream stream = nullptr);

/// randomized_hadamard_inverse(): d_out = D · H_block · d_in. Aliasing as hadamard_transform_cuda().
Status randomized_hadamard_inverse_cuda(const float* d_in, uint64_t count, uint64_t block, const RngKey& key,
                                        uint64_t index_base, float* d_out, CudaStream stream = nullptr);

// --- max |x| (kernels/stats/entropy.hpp) -----------------------------------------------------------

/// Bytes of device scratch max_abs_cuda() needs (whatever the count).
uint64_t max_abs_cuda_temp_bytes();

/// *d_out = max_abs(d_x, count) (= parallel_max_abs): the largest |x_i|, or the first NaN in index
/// order, bit for bit; +0 for count == 0 (written: d_out is always set). Two launches (per-CTA
/// partial maxima into d_temp, then one CTA combines them); exact, so the order does not matter.
/// REQUIRES: d_temp holds temp_bytes >= max_abs_cuda_temp_bytes() bytes, 16-byte aligned.
Status max_abs_cuda(const float* d_x, uint64_t count, void* d_temp, uint64_t temp_bytes, float* d_out,
                    CudaStream stream = nullptr);

// --- THC rounds (algorithms/thc/thc.hpp) ---------------------------------------------------------

/// Elements of the reduced (padded) vector of a `count`-element tensor rotated in blocks of
/// `block`: ceil(count / block) * block (ThcCompressor::reduced_elements with block =
/// rotation_block_for(count)).
CCSIM_HD constexpr uint64_t thc_padded_elements(uint64_t count, uint64_t block) {
  return (count + block - 1) / block * block;
}

/// kInvalidArgument unless block is a power of two in [1, kHadamardCudaMaxBlock]. THC's rotation
/// block of a tensor, ThcCompressor::rotation_block_for(count), always is. Called by
/// thc_plan_local_cuda, thc_prepare_cuda and thc_finish_cuda.
Status thc_cuda_can_implement(uint64_t count, uint64_t block);

/// Bytes of device scratch thc_plan_local_cuda() needs: partial maxima, plus the rotated tensor
/// (thc_padded_elements() floats) when the rotation takes more than one pass.
uint64_t thc_plan_local_cuda_temp_bytes(uint64_t count, uint64_t block);

/// ThcCompressor::plan_local on one rank's tensor d_x[0, count): *d_entry = the rank's metadata
/// entry (max[0]), bit for bit, computed on the device without a round trip to the host: max |x|,
/// the rotation in the frame x 2^-floor(log2 max|x|) with the signs of `sign_key`
/// (ThcCompressor::shared_key of the plan key), its maximum, and the entry's scaling and upward
/// rounding (in double). A zero or non-finite max |x| is the entry itself, as on the CPU. `block` is
/// rotation_block_for(count). count == 0 writes +0. REQUIRES: d_temp holds temp_bytes >=
/// thc_plan_local_cuda_temp_bytes(count, block) bytes, 16-byte aligned.
Status thc_plan_local_cuda(const float* d_x, uint64_t count, uint64_t block, const RngKey& sign_key, void* d_temp,
                           uint64_t temp_bytes, float* d_entry, CudaStream stream = nullptr);

/// ThcCompressor::prepare: d_out[0, padded) = the lattice codes (exact fp32 integers) of the rank's
/// d_x[0, count) zero-padded to padded = thc_padded_elements(count, block), scaled by 2^-k and
/// rotated with `sign_key`'s signs; element i draws its rounding number at uniform_at(code_key, i)
/// (code_key: the rank's prepare key). A kZero or kNonFinite lattice gives zeros. d_out may be d_x
/// when padded == count. REQUIRES: d_x holds `count` floats, d_out `padded`.
Status thc_prepare_cuda(const float* d_x, uint64_t count, uint64_t block, const ThcLattice& lattice,
                        const RngKey& sign_key, const RngKey& code_key, float* d_out, CudaStream stream = nullptr);

/// ThcCompressor::finish: d_out[0, count) = 2^k · D · H · (the lattice value of the sums of `ranks`
/// ranks' codes, d_reduced[0, padded)), padding dropped. A kZero lattice gives zeros, kNonFinite
/// quiet NaNs (0x7FC00000). d_reduced is the rotation's workspace: when it takes more than one
/// pass, d_reduced holds unspecified values afterwards. d_out may be d_reduced.
/// REQUIRES: d_reduced holds padded = thc_padded_elements(count, block) floats, d_out `count`.
Status thc_finish_cuda(float* d_reduced, uint64_t count, uint64_t block, const ThcLattice& lattice, uint32_t ranks,
                       const RngKey& sign_key, float* d_out, CudaStream stream = nullptr);

// --- THC wire (kernels/quant/thc_quant.hpp) ------------------------------------------------------------

/// kInvalidArgument unless bits is 8, 12 or 16. Called by every thc_*pack* entry point.
Status thc_wire_cuda_can_implement(uint64_t count, uint32_t bits);

/// thc_pack(): d_out (thc_bytes(count, bits) bytes, fully overwritten) = the `bits`-bit fields of
/// d_x. The CPU aborts on a value that is not an integer in [0, 2^bits - 1]; here such a value is
/// counted into *d_overflows (when not null; the caller zeroes it and reads it after
/// synchronizing) and its field saturates: 0 for NaN and negatives, 2^bits - 1 above it, the
/// integer part of other non-integers. Each thread owns 8 fields, whose `bits` bytes it writes
/// whole (12-bit fields: two per three bytes, no byte shared).
Status thc_pack_cuda(const float* d_x, uint64_t count, uint32_t bits, uint8_t* d_out, uint64_t* d_overflows = nullptr,
                     CudaStream stream = nullptr);

/// thc_unpack(): d_out[i] = field i (overwrites).
Status thc_unpack_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_out, CudaStream stream = nullptr);

/// thc_unpack_accumulate(): d_acc[i] += field i, in fp32.
Status thc_unpack_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_acc,
                                  CudaStream stream = nullptr);

/// The fused hop (ThcCompressor::decode_accumulate_encode): d_acc[i] += field i of d_in, then d_out
/// = thc_pack(d_acc), in one pass; d_overflows as for thc_pack_cuda(). d_in and d_out hold
/// thc_bytes(count, bits) bytes and must not overlap.
Status thc_unpack_accumulate_pack_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_acc,
                                       uint8_t* d_out, uint64_t* d_overflows = nullptr, CudaStream stream = nullptr);

}  // namespace ccsim::kern
