// CUDA kernels for DynamiQ. Bit identity with the CPU compressor rests on four things: the shared
// CCSIM_HD per-group and per-entry steps (kernels/quant/dynamiq_quant.hpp), IEEE division and no FMA
// contraction (nvcc's default -prec-div=true, plus --fmad=false on this target); maxima that equal
// the CPU's running std::fmax in index order, signalling NaNs included (see "maxima" below); and the
// statistics' double sums taken in the CPU's order (one thread per super-group, entry by entry).
//
// Layout of the work: one warp per super-group (grid-stride over the chunk's positions). Lane l
// owns the octets o = 32t + l (entries 8o .. 8o+7 of the super-group, t = 0, 1, ...): the q bytes
// o·q .. o·q+q-1 of the payload hold exactly those 8 codes (8 codes of q bits fill q bytes, for
// every q in {1, 2, 4, 8, 16}), so every lane writes whole bytes of its own and no byte is shared.
// A warp step covers a tile of 256 entries; groups of up to 256 entries (powers of two) lie inside
// one tile and are reduced by shuffles among the lanes that hold them. Super-groups of up to 256
// entries stay in registers from load to store: the fused hop reads the message and acc once and
// writes acc and the new message once. Larger ones take extra passes over the super-group (its
// maximum, then each multi-tile group's maximum) that re-read it, mostly from cache.
#include "kernels/cuda/dynamiq_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "kernels/quant/dynamiq_quant.hpp"

namespace ccsim::kern {
namespace {

constexpr int kThreads = 256;             // threads per CTA for every kernel here
constexpr int kWarps = kThreads / 32;     // super-groups in flight per CTA
constexpr uint64_t kMaxGrid = 4096;       // grid-stride loops cover the rest
constexpr uint32_t kTile = 256;           // entries a warp covers per step: an octet per lane
constexpr uint32_t kSmemLevels = 2 + 8 + 128;  // Q_2, Q_4, Q_8 in shared memory; Q_16 stays global
constexpr uint32_t kStatSlice = 32;       // entries of each super-group staged per statistics step

CCSIM_HD uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

unsigned grid_for(uint64_t work_items, uint64_t items_per_cta) {
  return static_cast<unsigned>(std::clamp<uint64_t>(ceil_div(work_items, items_per_cta), 1, kMaxGrid));
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

Status launch_status(const char* op) { return cuda_status(cudaGetLastError(), op); }

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// What every coding kernel needs: the plan, the chunk, and (encoders) the rounding keys.
struct Params {
  DynamiqCudaPlan plan;
  uint32_t group_shift;  // log2(plan.group)
  uint64_t offset;       // the chunk's first entry in the reduced vector
  uint64_t k0, k1;       // the chunk's positions
  RngKey key;            // the encoding rank's stream (rank = key.rank)
  RngKey shared;         // dynamiq_shared_key(key)
  uint32_t ranks;
  bool vec;              // the chunk's float buffer is 16-byte aligned: octets move as two float4
};

// One super-group of the chunk, as a warp sees it.
struct Sg {
  uint64_t m;            // entries
  uint64_t first;        // its first entry's index in the reduced vector (k·S): keys entry draws
  uint64_t first_group;  // k·(S / s): keys the group-scale draws (as the CPU computes it)
  uint64_t at;           // its first entry's index in the chunk
  uint64_t byte;         // its block's offset in the chunk's bytes
  uint32_t q;
  const float* levels;   // Q_q (nullptr at q = 1)
};

__device__ Sg super_group(const Params& p, uint64_t k, const float* s_levels) {
  const uint64_t S = p.plan.super_group;
  Sg sg;
  sg.first = k * S;
  sg.m = p.plan.elements - sg.first < S ? p.plan.elements - sg.first : S;
  sg.first_group = k * (p.plan.super_group / p.plan.group);
  sg.at = sg.first - p.offset;
  sg.byte = p.plan.d_block_offset[k] - p.plan.d_block_offset[p.k0];
  sg.q = p.plan.d_widths[k];
  sg.levels = sg.q == 1    ? nullptr
              : sg.q == 16 ? p.plan.d_levels + dynamiq_cuda_levels_offset(16)
                           : s_levels + dynamiq_cuda_levels_offset(sg.q);
  return sg;
}

// Copies Q_2, Q_4, Q_8 into shared memory. Called by the whole CTA before any divergence.
__device__ void load_levels(const float* d_levels, float* s_levels) {
  for (uint32_t i = threadIdx.x; i < kSmemLevels; i += blockDim.x) s_levels[i] = d_levels[i];
  __syncthreads();
}

// --- maxima ---------------------------------------------------------------------------------------
//
// The CPU's maxima are running maxima r = std::fmax(r, |x_i|) from r = +0 in index order. std::fmax
// (glibc's fmaxf, like Arm's FMAXNM: IEEE 754-2008 maxNum) skips a quiet NaN but returns a quiet NaN
// for a signalling one, after which the running maximum restarts at the next number, so the result
// depends on the order; CUDA's fmaxf returns the other operand for either kind. To reproduce the CPU
// in any grouping, a run of entries is reduced to a summary of the map r -> result it applies, and
// summaries compose associatively in index order. A summary is a float: with the sign clear,
// r -> maxNum(r, s) (s is the run's maximum, or NaN for a run of quiet NaNs); with the sign set, the
// constant |s| (the run holds a signalling NaN and |s| is the maximum after the last one, NaN if
// there is none). Every NaN in a summary is quiet, on which fmaxf and std::fmax agree. Without
// signalling NaNs all of this is the plain maximum, which is exact and order-independent.

// The summary of one entry x.
__device__ float max_leaf(float x) {
  const uint32_t b = __float_as_uint(x) & 0x7FFFFFFFu;  // |x|
  if (b > 0x7F800000u && (b & 0x00400000u) == 0) return __uint_as_float(0xFFC00000u);  // signalling NaN
  return __uint_as_float(b);
}

// The summary of the run `first` followed by the run `second`.
__device__ float max_then(float first, float second) {
  if (__float_as_uint(second) >> 31) return second;
  const uint32_t f = __float_as_uint(first);
  const float m = fmaxf(__uint_as_float(f & 0x7FFFFFFFu), second);
  return __uint_as_float((__float_as_uint(m) & 0x7FFFFFFFu) | (f & 0x80000000u));
}

// The CPU's running maximum over a run, from r = +0: a magnitude, or NaN (which bf16_ceil
// saturates and no coded group divides by, so its payload does not matter).
__device__ float max_result(float s) {
  const uint32_t b = __float_as_uint(s);
  return b >> 31 ? __uint_as_float(b & 0x7FFFFFFFu) : fmaxf(0.0f, s);
}

// The summary of nothing (entries past the super-group's end): r -> r.
constexpr uint32_t kMaxIdentity = 0x7FC00000u;

// The summary of the first `valid` entries of an octet, in order.
__device__ float octet_summary(const float (&v)[8], uint64_t valid) {
  float s = __uint_as_float(kMaxIdentity);
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (static_cast<uint64_t>(e) < valid) s = max_then(s, max_leaf(v[e]));
  return s;
}

// Entries of octet o that exist in a super-group of m entries (0 to 8).
__device__ uint64_t valid_in(uint64_t m, uint64_t o) { return m <= 8 * o ? 0 : m - 8 * o; }

// Composes the summaries of aligned segments of `lanes` consecutive lanes (a power of two <= 32)
// in lane order, which is index order within a tile; every lane gets its segment's summary. Called
// by all 32 lanes with the same `lanes`. The butterfly runs from the smallest offset up, so each
// step joins two adjacent aligned blocks of lanes, the lower one first.
__device__ float segment_summary(float s, uint32_t lanes) {
  const unsigned lane = threadIdx.x % 32;
  for (uint32_t off = 1; off < lanes; off *= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, s, off);
    s = (lane & off) ? max_then(other, s) : max_then(s, other);
  }
  return s;
}

// --- octet I/O ------------------------------------------------------------------------------------

// Up to 16 bytes as a little-endian 128-bit word.
struct Word128 {
  uint64_t lo = 0, hi = 0;
};

// Reads the n <= 16 bytes at p (any alignment; wide loads where p allows them for a full octet).
__device__ Word128 load_bytes(const uint8_t* p, uint32_t n) {
  Word128 w;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 16 && a % 16 == 0) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w.lo = v.x | static_cast<uint64_t>(v.y) << 32;
    w.hi = v.z | static_cast<uint64_t>(v.w) << 32;
  } else if (n >= 8 && a % 8 == 0 && (n == 8 || n == 16)) {
    w.lo = *reinterpret_cast<const uint64_t*>(p);
    if (n == 16) w.hi = *reinterpret_cast<const uint64_t*>(p + 8);
  } else if (n == 4 && a % 4 == 0) {
    w.lo = *reinterpret_cast<const uint32_t*>(p);
  } else if (n == 2 && a % 2 == 0) {
    w.lo = *reinterpret_cast<const uint16_t*>(p);
  } else {
    for (uint32_t b = 0; b < n; ++b) {
      if (b < 8) {
        w.lo |= static_cast<uint64_t>(p[b]) << (8 * b);
      } else {
        w.hi |= static_cast<uint64_t>(p[b]) << (8 * (b - 8));
      }
    }
  }
  return w;
}

// Writes the low n <= 16 bytes of w at p (any alignment; wide stores where p allows them).
__device__ void store_bytes(uint8_t* p, uint32_t n, const Word128& w) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 16 && a % 16 == 0) {
    *reinterpret_cast<uint4*>(p) = make_uint4(static_cast<uint32_t>(w.lo), static_cast<uint32_t>(w.lo >> 32),
                                              static_cast<uint32_t>(w.hi), static_cast<uint32_t>(w.hi >> 32));
  } else if (n >= 8 && a % 8 == 0 && (n == 8 || n == 16)) {
    *reinterpret_cast<uint64_t*>(p) = w.lo;
    if (n == 16) *reinterpret_cast<uint64_t*>(p + 8) = w.hi;
  } else if (n == 4 && a % 4 == 0) {
    *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(w.lo);
  } else if (n == 2 && a % 2 == 0) {
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(w.lo);
  } else {
    for (uint32_t b = 0; b < n; ++b) p[b] = static_cast<uint8_t>(b < 8 ? w.lo >> (8 * b) : w.hi >> (8 * (b - 8)));
  }
}

// Code e (0..7) of an octet's word: stream bits [e·q, e·q + q), least significant first
// (bitpack_get's order; at q = 16 the CPU's little-endian byte pairs). q divides 64, so no code
// straddles the two halves.
__device__ uint32_t octet_code(const Word128& w, int e, uint32_t q) {
  const uint32_t bit = static_cast<uint32_t>(e) * q;
  const uint64_t word = bit < 64 ? w.lo >> bit : w.hi >> (bit - 64);
  return static_cast<uint32_t>(word) & ((1u << q) - 1u);
}

// Payload bytes of octet o of a super-group: q, or fewer for the last octet (ceil(m·q/8) in all).
__device__ uint32_t octet_bytes(const Sg& sg, uint64_t o) {
  const uint64_t payload = (sg.m * sg.q + 7) / 8;
  return static_cast<uint32_t>(payload - o * sg.q < sg.q ? payload - o * sg.q : sg.q);
}

// Entries 8o .. 8o+7 of a super-group's floats `x` (its first entry) into v; 0 past m.
__device__ void load_octet(const float* x, uint64_t m, uint64_t o, bool vec, float (&v)[8]) {
  const uint64_t i0 = 8 * o;
  if (vec && i0 + 8 <= m) {
    const float4 a = reinterpret_cast<const float4*>(x + i0)[0];
    const float4 b = reinterpret_cast<const float4*>(x + i0)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = i0 + e < m ? x[i0 + e] : 0.0f;
}

// Stores the entries of v that exist (8o + e < m) at x[8o + e].
__device__ void store_octet(float* x, uint64_t m, uint64_t o, bool vec, const float (&v)[8]) {
  const uint64_t i0 = 8 * o;
  if (vec && i0 + 8 <= m) {
    reinterpret_cast<float4*>(x + i0)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(x + i0)[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (i0 + e < m) x[i0 + e] = v[e];
}

// acc + v as the CPU's decode_accumulate computes it. A decoded value is never NaN (scales and
// levels are finite), so a NaN sum comes from acc alone, and the CPU's addition returns that NaN
// quieted (x86 and Arm alike) where the GPU's returns the canonical NaN: return the CPU's.
__device__ float accumulate(float acc, float v) {
  return isnan(acc) ? __uint_as_float(__float_as_uint(acc) | 0x00400000u) : acc + v;
}

// --- decode ----------------------------------------------------------------------------------------

// Entries 8o .. 8o+7 of the super-group block `block` decoded into v (0 past m): the CPU's
// dynamiq_decode_sg, entry by entry.
__device__ void decode_octet(const Params& p, const Sg& sg, const uint8_t* block, uint64_t o, float (&v)[8]) {
  const uint64_t i0 = 8 * o;
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = 0.0f;
  if (i0 >= sg.m) return;
  const bool hier = p.plan.hierarchical;
  const uint8_t* payload = block + dynamiq_meta_bytes(sg.m, p.plan.group, hier);
  const Word128 w = load_bytes(payload + o * sg.q, octet_bytes(sg, o));
  const float sg_scale = hier ? dynamiq_sg_scale(block) : 0.0f;
  float scale = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const uint64_t i = i0 + e;
    if (i >= sg.m) continue;  // (a group past the last holds no scale to read)
    // A new group starts at e = 0 and wherever i is a multiple of the group size (group < 8).
    if (e == 0 || (i & (p.plan.group - 1)) == 0) scale = dynamiq_group_scale(block, i >> p.group_shift, hier, sg_scale);
    v[e] = dynamiq_entry_value(octet_code(w, e, sg.q), scale, sg.q, sg.levels);
  }
}

template <bool kAccumulate>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const uint8_t* __restrict__ in, Params p, float* __restrict__ out) {
  __shared__ float s_levels[kSmemLevels];
  load_levels(p.plan.d_levels, s_levels);
  const unsigned lane = threadIdx.x % 32;
  for (uint64_t k = p.k0 + static_cast<uint64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; k < p.k1;
       k += static_cast<uint64_t>(gridDim.x) * kWarps) {
    const Sg sg = super_group(p, k, s_levels);
    const uint8_t* block = in + sg.byte;
    float* x = out + sg.at;
    for (uint64_t o = lane; 8 * o < sg.m; o += 32) {
      float v[8];
      decode_octet(p, sg, block, o, v);
      if constexpr (kAccumulate) {
        float a[8];
        load_octet(x, sg.m, o, p.vec, a);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = accumulate(a[e], v[e]);
      }
      store_octet(x, sg.m, o, p.vec, v);
    }
  }
}

// --- encode ----------------------------------------------------------------------------------------

// The divisor of group g (its entries are normalized by it) and, by `writer` (the lane holding the
// group's first entry), its scale byte(s): the CPU's dynamiq_encode_sg, one group.
__device__ float group_divisor(const Params& p, const Sg& sg, uint8_t* block, uint64_t g, float gmax, float sg_scale,
                               bool writer) {
  if (p.plan.hierarchical) {
    if (writer) block[2 + g] = dynamiq_group_code(gmax, sg_scale, p.key, sg.first_group + g);
    return gmax;
  }
  const uint16_t h = bf16_ceil(gmax);
  if (writer) {
    block[2 * g] = static_cast<uint8_t>(h);
    block[2 * g + 1] = static_cast<uint8_t>(h >> 8);
  }
  return bf16_to_float(h);
}

// Encodes one super-group into `block` (every byte of its dynamiq_sg_bytes() written once), the
// whole warp together. `load(o, v)` yields octet o's entries (0 past m). With one tile (m <= 256)
// it is called exactly once per lane, with o = lane, which lets the fused hop accumulate inside it;
// larger super-groups are loaded again on every pass.
template <class Load>
__device__ void encode_sg(const Params& p, const Sg& sg, uint8_t* block, const Load& load) {
  const unsigned lane = threadIdx.x % 32;
  const uint32_t group = p.plan.group;
  const bool hier = p.plan.hierarchical;
  const uint64_t m = sg.m, tiles = ceil_div(m, kTile);
  uint8_t* payload = block + dynamiq_meta_bytes(m, group, hier);
  float v[8];
  if (tiles == 1) load(lane, v);

  float sg_scale = 0.0f;
  if (hier) {
    float amax = __uint_as_float(kMaxIdentity);  // summary of the super-group, tile by tile in order
    if (tiles == 1) {
      amax = segment_summary(octet_summary(v, valid_in(m, lane)), 32);
    } else {
      for (uint64_t t = 0; t < tiles; ++t) {
        float w[8];
        load(32 * t + lane, w);
        const float tile = segment_summary(octet_summary(w, valid_in(m, 32 * t + lane)), 32);
        amax = max_then(amax, tile);
      }
    }
    const uint16_t h = bf16_ceil(max_result(amax));
    if (lane == 0) {
      block[0] = static_cast<uint8_t>(h);
      block[1] = static_cast<uint8_t>(h >> 8);
    }
    sg_scale = bf16_to_float(h);
  }

  const bool multi_tile_groups = group > kTile && tiles > 1;  // a group spans several tiles
  const uint32_t lanes_per_group = group >= kTile ? 32 : group >= 8 ? group / 8 : 1;
  float big_gmax = __uint_as_float(kMaxIdentity);  // summary of the current group when it spans tiles
  for (uint64_t t = 0; t < tiles; ++t) {
    if (multi_tile_groups && (t * kTile) % group == 0) {  // the first tile of a group: its max first
      const uint64_t t_end = t + group / kTile < tiles ? t + group / kTile : tiles;
      big_gmax = __uint_as_float(kMaxIdentity);
      for (uint64_t u = t; u < t_end; ++u) {
        float w[8];
        load(32 * u + lane, w);
        const float tile = segment_summary(octet_summary(w, valid_in(m, 32 * u + lane)), 32);
        big_gmax = max_then(big_gmax, tile);
      }
    }
    const uint64_t o = 32 * t + lane, i0 = 8 * o;
    if (tiles > 1) load(o, v);

    // Group summaries: gm[e] summarizes the group starting at entry e of the octet (e a multiple of
    // the group size; groups of >= 8 entries start at e = 0), composed in index order.
    float gm[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) gm[e] = i0 + e < m ? max_leaf(v[e]) : __uint_as_float(kMaxIdentity);
    if (group >= 2) {
#pragma unroll
      for (int e = 0; e < 8; e += 2) gm[e] = max_then(gm[e], gm[e + 1]);
    }
    if (group >= 4) {
#pragma unroll
      for (int e = 0; e < 8; e += 4) gm[e] = max_then(gm[e], gm[e + 2]);
    }
    if (group >= 8) {
      gm[0] = segment_summary(max_then(gm[0], gm[4]), lanes_per_group);
      if (multi_tile_groups) gm[0] = big_gmax;
    }

    // Divisors per entry; each group's first entry's lane writes its scale.
    float divisor[8];
    float d = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const uint64_t i = i0 + e;
      if (e == 0 || (i & (group - 1)) == 0) {
        d = group_divisor(p, sg, block, i >> p.group_shift, max_result(gm[e]), sg_scale,
                          i < m && (i & (group - 1)) == 0);
      }
      divisor[e] = d;
    }

    if (i0 < m) {
      // Entry draws: uniform_at(key, first + i), from the two Philox blocks of the octet (k·S + 8o
      // is a multiple of 4 since S is), made correlated across ranks where the plan says so.
      const uint64_t index0 = sg.first + i0;
      const U32x4 b0 = philox_block(p.key, index0 >> 2), b1 = philox_block(p.key, (index0 >> 2) + 1);
      Word128 w;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (i0 + e >= m || !dynamiq_group_coded(divisor[e])) continue;  // code 0
        float u = u32_to_unit_float(e < 4 ? b0.v[e] : b1.v[e - 4]);
        if (p.plan.correlated) u = correlated_uniform_from(p.shared, u, index0 + e, p.key.rank, p.ranks);
        const uint64_t code = dynamiq_entry_code(v[e], divisor[e], sg.q, sg.levels, u);
        const uint32_t bit = static_cast<uint32_t>(e) * sg.q;
        if (bit < 64) {
          w.lo |= code << bit;
        } else {
          w.hi |= code << (bit - 64);
        }
      }
      store_bytes(payload + o * sg.q, octet_bytes(sg, o), w);
    }
  }
}

// Octets of a float buffer (the encoder's input, or acc re-read by the fused hop's later passes).
struct LoadFloats {
  const float* x;  // the super-group's first entry
  uint64_t m;
  bool vec;
  __device__ void operator()(uint64_t o, float (&v)[8]) const { load_octet(x, m, o, vec, v); }
};

// The fused hop's single load of a one-tile super-group: decode the message's octet, add it to
// acc, store acc, and hand the sums to the encoder.
struct LoadDecodeAccumulate {
  const Params* p;
  const Sg* sg;
  const uint8_t* in_block;
  float* acc;  // the super-group's first entry
  __device__ void operator()(uint64_t o, float (&v)[8]) const {
    float a[8];
    decode_octet(*p, *sg, in_block, o, v);
    load_octet(acc, sg->m, o, p->vec, a);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = 8 * o + e < sg->m ? accumulate(a[e], v[e]) : 0.0f;
    if (8 * o < sg->m) store_octet(acc, sg->m, o, p->vec, v);
  }
};

__global__ void __launch_bounds__(kThreads)
    encode_kernel(const float* __restrict__ x, Params p, uint8_t* __restrict__ out) {
  __shared__ float s_levels[kSmemLevels];
  load_levels(p.plan.d_levels, s_levels);
  for (uint64_t k = p.k0 + static_cast<uint64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; k < p.k1;
       k += static_cast<uint64_t>(gridDim.x) * kWarps) {
    const Sg sg = super_group(p, k, s_levels);
    encode_sg(p, sg, out + sg.byte, LoadFloats{x + sg.at, sg.m, p.vec});
  }
}

// acc is read back after it is written (multi-tile super-groups), so it is neither const nor
// __restrict__: no load of it may go through the non-coherent read-only path.
__global__ void __launch_bounds__(kThreads)
    decode_accumulate_encode_kernel(const uint8_t* __restrict__ in, Params p, float* acc, uint8_t* __restrict__ out) {
  __shared__ float s_levels[kSmemLevels];
  load_levels(p.plan.d_levels, s_levels);
  const unsigned lane = threadIdx.x % 32;
  for (uint64_t k = p.k0 + static_cast<uint64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; k < p.k1;
       k += static_cast<uint64_t>(gridDim.x) * kWarps) {
    const Sg sg = super_group(p, k, s_levels);
    float* a = acc + sg.at;
    if (sg.m <= kTile) {
      encode_sg(p, sg, out + sg.byte, LoadDecodeAccumulate{&p, &sg, in + sg.byte, a});
      continue;
    }
    // Decode-accumulate the whole super-group first; each lane later re-reads only the octets it
    // wrote here (octet 32t + lane on every pass), so program order makes the writes visible.
    for (uint64_t o = lane; 8 * o < sg.m; o += 32) {
      float v[8], s[8];
      decode_octet(p, sg, in + sg.byte, o, v);
      load_octet(a, sg.m, o, p.vec, s);
#pragma unroll
      for (int e = 0; e < 8; ++e) s[e] = accumulate(s[e], v[e]);
      store_octet(a, sg.m, o, p.vec, s);
    }
    encode_sg(p, sg, out + sg.byte, LoadFloats{a, sg.m, p.vec});
  }
}

// --- statistics ------------------------------------------------------------------------------------

// One thread per super-group sums its entries in index order, in double, as plan_local does. The
// CTA's 256 super-groups are staged through shared memory 32 entries each at a time, each warp
// loading whole 128-byte rows, so global reads stay coalesced; the row pitch of 33 floats keeps
// both the row writes and the per-thread column reads free of bank conflicts.
__global__ void __launch_bounds__(kThreads)
    statistics_kernel(const float* __restrict__ x, uint64_t count, uint32_t S, uint64_t n, double* __restrict__ sums) {
  __shared__ float tile[kThreads][kStatSlice + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (uint64_t j0 = static_cast<uint64_t>(blockIdx.x) * kThreads; j0 < n;
       j0 += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const uint64_t j = j0 + threadIdx.x;
    const uint64_t m = j >= n ? 0 : count - j * S < S ? count - j * S : S;
    double sum = 0, sq = 0;
    for (uint64_t s0 = 0; s0 < S; s0 += kStatSlice) {
      for (unsigned r = warp; r < kThreads; r += kWarps) {
        const uint64_t jr = j0 + r;
        if (jr >= n) break;
        const uint64_t mr = count - jr * S < S ? count - jr * S : S;
        if (s0 + lane < mr) tile[r][lane] = x[jr * S + s0 + lane];
      }
      __syncthreads();
      const uint64_t e_end = m <= s0 ? 0 : m - s0 < kStatSlice ? m - s0 : kStatSlice;
      for (uint64_t e = 0; e < e_end; ++e) {
        const float v = tile[threadIdx.x][e];
        sum += v;
        sq += static_cast<double>(v) * v;
      }
      __syncthreads();
    }
    if (j < n) {
      sums[j] = sum;
      sums[n + j] = sq;
    }
  }
}

// --- launch helpers --------------------------------------------------------------------------------

// The launch parameters of a chunk; encoders also pass their key and rank count.
Params make_params(const DynamiqCudaPlan& plan, uint64_t offset, uint64_t count, const void* floats,
                   const RngKey& key = {}, uint32_t ranks = 0) {
  Params p{};
  p.key = key;
  p.shared = dynamiq_shared_key(key);
  p.ranks = ranks;
  p.plan = plan;
  p.group_shift = 0;
  while ((uint64_t{1} << p.group_shift) < plan.group) ++p.group_shift;
  p.offset = offset;
  p.k0 = offset / plan.super_group;
  p.k1 = ceil_div(offset + count, plan.super_group);
  p.vec = aligned(floats, 16);
  return p;
}

Status check_pointers(const void* a, const void* b, const void* c, const char* name) {
  if (a == nullptr || b == nullptr || c == nullptr) {
    return invalid_argument(std::string(name) + ": null device pointer");
  }
  return ok_status();
}

template <bool kAccumulate>
Status launch_decode(const uint8_t* d_in, uint64_t offset, uint64_t count, const DynamiqCudaPlan& plan, float* d_out,
                     CudaStream stream, const char* name) {
  if (count == 0) return ok_status();
  CCSIM_RETURN_IF_ERROR(dynamiq_cuda_can_implement(plan, offset, count).with_context(name));
  CCSIM_RETURN_IF_ERROR(check_pointers(d_in, d_out, d_out, name));
  const Params p = make_params(plan, offset, count, d_out);
  decode_kernel<kAccumulate><<<grid_for(p.k1 - p.k0, kWarps), kThreads, 0, stream>>>(d_in, p, d_out);
  return launch_status(name);
}

}  // namespace

Result<DynamiqCudaLayout> dynamiq_cuda_layout(std::span<const uint8_t> widths, uint64_t elements, uint32_t super_group,
                                              uint32_t group, bool hierarchical, bool reorder) {
  if (super_group == 0 || group == 0) {
    return invalid_argument("dynamiq_cuda_layout: super_group and group must be >= 1");
  }
  const uint64_t S = super_group, n = ceil_div(elements, S);
  if (n == 0 || widths.size() != n) {
    return invalid_argument("dynamiq_cuda_layout: expected one width per super-group, " + std::to_string(n) +
                            " for " + std::to_string(elements) + " entries, got " + std::to_string(widths.size()));
  }
  for (uint64_t j = 0; j < n; ++j) {
    const uint32_t q = widths[j];
    if (q != 1 && q != 2 && q != 4 && q != 8 && q != 16) {
      return invalid_argument("dynamiq_cuda_layout: super-group " + std::to_string(j) + " has width " +
                              std::to_string(q) + ", expected 1, 2, 4, 8 or 16");
    }
  }
  // plan_commit's order: full super-groups stably sorted by width, the partial one last.
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (reorder) {
    std::stable_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(elements / S),
                     [&](uint32_t a, uint32_t b) { return widths[a] < widths[b]; });
  }
  DynamiqCudaLayout layout;
  layout.widths.resize(n);
  layout.block_offset.assign(n + 1, 0);
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t j = order[k];
    layout.widths[k] = widths[j];
    layout.block_offset[k + 1] =
        layout.block_offset[k] + dynamiq_sg_bytes(std::min(S, elements - j * S), widths[j], group, hierarchical);
  }
  return layout;
}

std::vector<float> dynamiq_cuda_levels(bool nonuniform, double eps4, double eps8, double eps16) {
  std::vector<float> levels(kDynamiqCudaLevels);
  levels[dynamiq_cuda_levels_offset(2)] = 0.0f;
  levels[dynamiq_cuda_levels_offset(2) + 1] = 1.0f;
  geometric_grid_levels(nonuniform ? eps4 : 0.0, 8, levels.data() + dynamiq_cuda_levels_offset(4));
  geometric_grid_levels(nonuniform ? eps8 : 0.0, 128, levels.data() + dynamiq_cuda_levels_offset(8));
  geometric_grid_levels(nonuniform ? eps16 : 0.0, 32768, levels.data() + dynamiq_cuda_levels_offset(16));
  return levels;
}

uint64_t dynamiq_cuda_wire_bytes(const DynamiqCudaLayout& layout, uint32_t super_group, uint64_t offset,
                                 uint64_t count) {
  if (count == 0) return 0;
  return layout.block_offset[ceil_div(offset + count, super_group)] - layout.block_offset[offset / super_group];
}

Status dynamiq_cuda_can_implement(const DynamiqCudaPlan& plan, uint64_t offset, uint64_t count) {
  if (plan.elements == 0) return invalid_argument("dynamiq: no plan committed (the plan has no entries)");
  if (!is_power_of_two(plan.group)) {
    return invalid_argument("dynamiq: the CUDA kernels need a power-of-two group size, got " +
                            std::to_string(plan.group));
  }
  if (plan.super_group == 0 || plan.super_group % 4 != 0) {
    return invalid_argument("dynamiq: the CUDA kernels need a super-group size that is a multiple of 4, got " +
                            std::to_string(plan.super_group));
  }
  if (plan.d_widths == nullptr || plan.d_block_offset == nullptr || plan.d_levels == nullptr) {
    return invalid_argument("dynamiq: the plan's device arrays are not set");
  }
  const uint64_t S = plan.super_group;
  if (offset % S != 0 || (count % S != 0 && offset + count != plan.elements) || offset + count > plan.elements ||
      offset + count < offset) {
    return invalid_argument("dynamiq: chunk [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                            ") does not fall on super-group boundaries (S=" + std::to_string(S) + ") of the planned " +
                            std::to_string(plan.elements) + " entries");
  }
  return ok_status();
}

Status dynamiq_statistics_cuda(const float* d_x, uint64_t count, uint32_t super_group, double* d_sums,
                               CudaStream stream) {
  constexpr const char* kName = "dynamiq_statistics_cuda";
  if (super_group == 0) return invalid_argument(std::string(kName) + ": super_group must be >= 1");
  if (count == 0) return ok_status();
  CCSIM_RETURN_IF_ERROR(check_pointers(d_x, d_sums, d_sums, kName));
  const uint64_t n = ceil_div(count, super_group);
  statistics_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(d_x, count, super_group, n, d_sums);
  return launch_status(kName);
}

Status dynamiq_encode_cuda(const float* d_x, uint64_t offset, uint64_t count, const DynamiqCudaPlan& plan,
                           const RngKey& key, uint32_t ranks, uint8_t* d_out, CudaStream stream) {
  constexpr const char* kName = "dynamiq_encode_cuda";
  if (count == 0) return ok_status();
  CCSIM_RETURN_IF_ERROR(dynamiq_cuda_can_implement(plan, offset, count).with_context(kName));
  CCSIM_RETURN_IF_ERROR(check_pointers(d_x, d_out, d_out, kName));
  const Params p = make_params(plan, offset, count, d_x, key, ranks);
  encode_kernel<<<grid_for(p.k1 - p.k0, kWarps), kThreads, 0, stream>>>(d_x, p, d_out);
  return launch_status(kName);
}

Status dynamiq_decode_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count, const DynamiqCudaPlan& plan,
                           float* d_out, CudaStream stream) {
  return launch_decode<false>(d_in, offset, count, plan, d_out, stream, "dynamiq_decode_cuda");
}

Status dynamiq_decode_accumulate_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count,
                                      const DynamiqCudaPlan& plan, float* d_acc, CudaStream stream) {
  return launch_decode<true>(d_in, offset, count, plan, d_acc, stream, "dynamiq_decode_accumulate_cuda");
}

Status dynamiq_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t offset, uint64_t count,
                                             const DynamiqCudaPlan& plan, float* d_acc, const RngKey& key,
                                             uint32_t ranks, uint8_t* d_out, CudaStream stream) {
  constexpr const char* kName = "dynamiq_decode_accumulate_encode_cuda";
  if (count == 0) return ok_status();
  CCSIM_RETURN_IF_ERROR(dynamiq_cuda_can_implement(plan, offset, count).with_context(kName));
  CCSIM_RETURN_IF_ERROR(check_pointers(d_in, d_acc, d_out, kName));
  const Params p = make_params(plan, offset, count, d_acc, key, ranks);
  decode_accumulate_encode_kernel<<<grid_for(p.k1 - p.k0, kWarps), kThreads, 0, stream>>>(d_in, p, d_acc, d_out);
  return launch_status(kName);
}

}  // namespace ccsim::kern
