#pragma once
/// \file
/// CUDA versions of the histogram-entropy statistics of kernels/stats/entropy.hpp (histogram,
/// histogram_entropy, sampled_histogram_entropy: EDGC's gradient data sampler), behind a host API
/// that needs no CUDA header.
///
/// What matches the CPU bit for bit:
///  - the sample: entry i belongs to it iff in_sample(key, index_base + i, fraction) (the same
///    Philox draw; fraction >= 1 takes every entry without drawing, as the CPU does), and only its
///    finite entries count;
///  - the range [lo, hi]: the minimum and maximum of the sampled finite entries, exact in any
///    order (atomics on the floats' order-preserving bit patterns). The one order-dependent detail
///    of the CPU's serial std::min / std::max, which of +0 and -0 a tie keeps, is not reproduced
///    (the kernels take -0 < +0) and does not matter: histogram_bin gives every entry the same bin
///    for either sign of a zero bound (x - lo and hi - lo are the same doubles);
///  - the counts: histogram_bin (the CCSIM_HD function the CPU calls; IEEE double arithmetic, no
///    FMA) per entry, integer atomics in shared memory then in global memory, exact in any order;
///  - the entropy's summation: -Σ p_b log2 p_b over the non-empty bins, p_b = count_b / total, in
///    double, added one bin after another in bin order by one thread, as entropy_bits does.
///
/// What does not: log2. entropy_bits calls glibc's std::log2, which is not correctly rounded (its
/// documented bound is a little over half an ulp) and cannot be called on the device; CUDA's log2
/// is off by up to 1 ulp. The device kernel uses a correctly rounded log2 instead (double-double
/// evaluation, kernels/cuda/cr_math.cuh). On a host with glibc 2.36 (x86-64 with FMA), glibc's log2
/// differed from the correctly rounded value (checked against quad precision) on 19790 of 2 * 10^7
/// probabilities tested (0.1%; counts over totals up to 10^8, and random doubles in (0, 1]); a
/// differing term moves the entropy by about one ulp of that term, which reaches the sum's last bit
/// only sometimes: all of ~670 sampled entropies emulated on the host matched the CPU's bit for
/// bit. So the device entropy equals the CPU's in nearly every case and otherwise differs in the
/// last bits (the tests bound it and count exact matches). Where the exact CPU value is needed,
/// download the counts (the range and counts live in the workspace at entropy_cuda_scratch()) and
/// call entropy_bits() on the host, which is then bit-identical by construction. glibc's own
/// results may differ between x86-64 machines with and without FMA (its ifunc variants), so the CPU
/// value is itself only reproducible per machine at this level.
///
/// Entry points follow CUB's shape (see select_cuda.hpp): device pointers (prefix `d_`), an
/// optional stream, a Status; `d_temp_storage == nullptr` only stores the workspace size in
/// `temp_storage_bytes`. They never allocate and never synchronize. The entropy comes back in
/// device memory (`d_entropy`, one double).
///
/// Memory traffic: two passes over the input (range, then counts: 4 bytes per entry each; with
/// fraction < 1 the Philox draws are made in both passes, one block per four entries, rather than
/// storing the sample), 8 bytes per bin of counts written and read back, one CTA for the entropy.
/// Histograms of up to kEntropyCudaSharedBins bins count in shared memory (one 32-bit counter per
/// bin per CTA, then one 64-bit global atomic per non-empty bin per CTA); larger ones count with
/// global atomics directly.
///
/// Thread safety: the functions hold no state; concurrent calls on different streams are safe.

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// Most bins counted in shared memory (48 KiB of 32-bit counters per CTA).
inline constexpr uint32_t kEntropyCudaSharedBins = 12288;
/// Most entries (and index_base + count) one call accepts: the Philox index range (2^42).
inline constexpr uint64_t kEntropyCudaMaxEntries = uint64_t{1} << 42;

/// histogram(): d_counts[b] = number of finite entries of d_x[0, count) in bin b of `bins` over
/// [lo, hi] (histogram_bin; overwrites the bins counts). When d_total is not null, *d_total is set
/// to the number of entries counted (histogram()'s return value).
/// kInvalidArgument unless bins >= 1, hi > lo, count <= kEntropyCudaMaxEntries and the pointers
/// are set.
Status histogram_cuda(const float* d_x, uint64_t count, uint32_t bins, float lo, float hi, uint64_t* d_counts,
                      uint64_t* d_total = nullptr, CudaStream stream = nullptr);

/// entropy_bits() of device counts: *d_entropy = -Σ p log2 p over the non-empty bins, in bin
/// order; 0 when the counts are all zero. One CTA. See the file comment for log2.
/// kInvalidArgument unless bins >= 1 and the pointers are set.
Status entropy_bits_cuda(const uint64_t* d_counts, uint32_t bins, double* d_entropy, CudaStream stream = nullptr);

/// sampled_histogram_entropy(): *d_entropy = entropy in bits of the `bins`-bin histogram of the
/// sampled finite entries of d_x[0, count) over their [min, max]; 0 when fewer than two distinct
/// values are sampled. Entry i is sampled iff in_sample(key, index_base + i, fraction).
/// kInvalidArgument unless bins >= 1, 0 <= fraction <= 1, index_base + count <=
/// kEntropyCudaMaxEntries and the pointers are set (d_x when count > 0).
Status sampled_histogram_entropy_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x,
                                      uint64_t count, uint32_t bins, float fraction, const RngKey& key,
                                      uint64_t index_base, double* d_entropy, CudaStream stream = nullptr);

/// histogram_entropy(): sampled_histogram_entropy_cuda with fraction 1 (every entry).
Status histogram_entropy_cuda(void* d_temp_storage, size_t& temp_storage_bytes, const float* d_x, uint64_t count,
                              uint32_t bins, double* d_entropy, CudaStream stream = nullptr);

/// Where the entropy ops leave their intermediates inside a workspace: the range {lo, hi} of the
/// sampled finite entries ({+inf, -inf} when none) and the `bins` counts (all zero when
/// !(hi > lo), i.e. when the entropy is 0 without a histogram). Valid once the stream has run the
/// call; read them with cudaMemcpy.
struct EntropyCudaScratch {
  const float* d_range = nullptr;
  const uint64_t* d_counts = nullptr;
};
EntropyCudaScratch entropy_cuda_scratch(const void* d_temp_storage);

}  // namespace ccsim::kern
