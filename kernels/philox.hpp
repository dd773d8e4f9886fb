#pragma once
/// \file
/// Philox4x32-10 (Salmon et al., SC'11), the one counter-based generator behind every random
/// decision ccsim makes. It is a pure function of (counter, key), usable from host and device
/// code, so the CPU references and the CUDA kernels draw bit-identical numbers, whatever the
/// thread count or launch shape.
///
/// ccsim keys every draw by (seed, round, rank, stream, element index):
///   key     = {seed[31:0], seed[63:32]}
///   counter = {(index/4)[31:0], (index/4)[39:32] | stream << 8, rank, round}
/// and element `index` takes lane index % 4 of that block. Streams separate independent uses
/// (each kernel op of a schedule gets its own); up to 2^24 streams and 2^42 elements per stream.

#include <cstdint>

#if defined(__CUDACC__)
#define CCSIM_HD __host__ __device__ __forceinline__
#else
#define CCSIM_HD inline
#endif

namespace ccsim::kern {

/// Four 32-bit words: a Philox counter or output block.
struct U32x4 {
  uint32_t v[4];
};

/// Philox4x32 with `kRounds` rounds (10 is the standard, crush-resistant choice).
template <int kRounds = 10>
CCSIM_HD U32x4 philox4x32(U32x4 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = U32x4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

/// Identifies one stream of random numbers; see the file comment for the mapping.
struct RngKey {
  uint64_t seed = 0;
  uint32_t round = 0;
  uint32_t rank = 0;
  uint32_t stream = 0;  ///< < 2^24
};

/// The Philox block holding element `index4 * 4 .. index4 * 4 + 3` of stream `k`.
CCSIM_HD U32x4 philox_block(const RngKey& k, uint64_t index4) {
  const U32x4 ctr{{static_cast<uint32_t>(index4),
                   static_cast<uint32_t>((index4 >> 32) & 0xFFu) | (k.stream << 8), k.rank, k.round}};
  return philox4x32<10>(ctr, static_cast<uint32_t>(k.seed), static_cast<uint32_t>(k.seed >> 32));
}

/// Maps 32 random bits to a float uniform on [0, 1) with 24 bits of resolution (exact in fp32).
CCSIM_HD float u32_to_unit_float(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1.0p-24f; }

/// The 32 random bits of element `index` of stream `k`.
CCSIM_HD uint32_t random_bits_at(const RngKey& k, uint64_t index) {
  return philox_block(k, index >> 2).v[index & 3u];
}

/// A uniform [0, 1) float for element `index` of stream `k`.
CCSIM_HD float uniform_at(const RngKey& k, uint64_t index) { return u32_to_unit_float(random_bits_at(k, index)); }

}  // namespace ccsim::kern
