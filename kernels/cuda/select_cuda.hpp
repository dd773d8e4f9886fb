#pragma once
/// \file
/// CUDA version of OmniReduce's local chunk selection (OmniReduceCompressor::plan_local,
/// algorithms/omnireduce/omnireduce.hpp), behind a host API that needs no CUDA header: the squared
/// L2 norm of every chunk, then the bitmap of the k chunks with the largest norms.
///
/// Bit identity with the CPU. The norm of chunk c is Σ x_i² over its elements, each square exact
/// in double, added in element order into a double starting at +0, exactly as plan_local sums it
/// (one thread per chunk adds the squares one after another; the elements reach it through a
/// shared-memory tile so that global loads stay coalesced); a NaN sum becomes +inf. The selection
/// takes the k largest keys with ties going to the lower chunk index, a strict total order, so the
/// chosen set is unique and equals the CPU's (std::nth_element under the same order) whatever the
/// method: here a stable descending radix sort (CUB) of (key, index) pairs, whose first k indices
/// are set in the bitmap. The bitmap's words and bits are plan_local's: bit c % 64 of word c / 64
/// set iff chunk c is chosen; bits past the last chunk are zero. The union of several ranks'
/// bitmaps (an OR) is left to the caller.
///
/// Key order for topk_bitmap_cuda's arbitrary double keys: as the CPU's comparison (`>`, with -0
/// equal to +0), a NaN key ranking as +inf (the norm keys are never NaN).
///
/// Entry points follow CUB's shape: device pointers (prefix `d_`), an optional stream, a Status.
/// Those needing scratch memory take `d_temp_storage` and `temp_storage_bytes`: called with
/// d_temp_storage == nullptr they only store the bytes needed in temp_storage_bytes (no device
/// work); called with a buffer of at least that many bytes (at any address) they run. The size
/// query asks CUB, which reads the current device's properties: without a device it fails
/// (kInternal), except for zero keys (one byte). They never allocate and never synchronize: they
/// check the arguments, enqueue kernels (and cudaMemsetAsync) on `stream` and return. A non-OK
/// Status from a launch means the launch itself failed; errors raised while a kernel runs surface
/// at the caller's next synchronization.
///
/// Memory traffic: the norms read each element once (4 bytes) and write 8 bytes per chunk; the
/// selection sorts 12 bytes per chunk (64-bit keys, 32-bit indices: a CUB radix sort, 8 to 10
/// passes, each reading and writing them), then reads k indices and ORs k bits into the bitmap;
/// with the default chunk of 256 elements that is about 1 byte per element on top of the 4 of the
/// read.
///
/// Thread safety: the functions hold no state; concurrent calls on different streams are safe.

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// Most keys (chunks) one selection accepts: the sort carries 32-bit indices.
inline constexpr uint64_t kTopkCudaMaxKeys = (uint64_t{1} << 31) - 1;

/// 64-bit bitmap words covering `n` chunks: ceil(n / 64).
CCSIM_HD constexpr uint64_t topk_bitmap_words(uint64_t n) { return (n + 63) / 64; }

/// d_norms[c] = Σ x_i² over chunk c = d_x[c * chunk, min(count, (c + 1) * chunk)), summed in double
/// in element order (each square exact), +inf where that sum is NaN: plan_local's keys, bit for
/// bit. ceil(count / chunk) entries; count == 0 is a no-op.
/// REQUIRES: d_x holds `count` floats (4-byte aligned), d_norms ceil(count / chunk) doubles.
/// kInvalidArgument unless chunk >= 1 and the pointers are set (when count > 0).
Status omnireduce_chunk_norms_cuda(const float* d_x, uint64_t count, uint64_t chunk, double* d_norms,
                                   CudaStream stream = nullptr);

/// The bitmap of the k largest of the n keys d_keys[0, n), ties to the lower index (see the file
/// comment): topk_bitmap_words(n) words written to d_bitmap (fully overwritten). The workspace size
/// depends on n only. k == 0 gives an all-zero bitmap and k == n every chunk, without sorting.
/// kInvalidArgument unless k <= n <= kTopkCudaMaxKeys and the pointers are set (when n > 0).
Status topk_bitmap_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const double* d_keys, uint64_t n, uint64_t k,
                        uint64_t* d_bitmap, CudaStream stream = nullptr);

/// OmniReduceCompressor::plan_local on the device: the bitmap of the k chunks (of `chunk` elements,
/// the last possibly short) of d_x[0, count) with the largest squared norms, ties to the lower
/// index. topk_bitmap_words(ceil(count / chunk)) words written to d_bitmap (fully overwritten;
/// plan_local ORs into the zeroed words of a fresh PlanStats, which is the same). The caller passes
/// k = OmniReduceCompressor::local_k(n_chunks) (host state of the compressor). The workspace size
/// depends on count and chunk only.
/// kInvalidArgument unless chunk >= 1, k <= ceil(count / chunk) <= kTopkCudaMaxKeys and the
/// pointers are set (when count > 0).
Status omnireduce_select_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x, uint64_t count,
                              uint64_t chunk, uint64_t k, uint64_t* d_bitmap, CudaStream stream = nullptr);

}  // namespace ccsim::kern
