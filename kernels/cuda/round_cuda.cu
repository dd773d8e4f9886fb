// CUDA kernels of the simple round phases (kernels/cuda/round_cuda.hpp). Bit identity with the CPU
// references rests on:
//  - elementwise fp32 operations with the CPU's operands and the x86-64 NaN rules of
//    block_cuda_common.cuh (x86_add, x86_sub, x86_mul), in the CPU's operand order: for sums,
//    whose two operands can both be NaN, the order GCC 12 emitted for the CPU loop (read from its
//    x86-64 code, -O3: finish_sum for DynamiQ, TlqButterflyOrder for TLq; qWD adds reduced + R);
//  - exact maxima: 64-bit keys (abs_key: |x|'s bits, or for a NaN a key preferring the lower index)
//    combined by any order of key_max / atomicMax, read back as max_abs() returns them;
//  - exact integer prefix counts (OmniReduce);
//  - TLq's transform: warp_hadamard32 (the butterflies of fwht_unnormalized, as the group
//    quantizer's kernels run them) for blocks up to kGroupHadamardMaxInput, and for larger blocks
//    the CPU's double-precision butterflies with x86's double NaN rules and its float <-> double
//    conversions of NaNs (cvtss2sd / cvtsd2ss: quieted, payload kept in the high bits).
//
// Thread layouts: elementwise ops are grid-stride loops over float4 vectors where every pointer
// they touch with a vector is 16-byte aligned, plus a scalar tail (the scalar loop alone
// otherwise). block_max_abs_cuda gives each block a group of threads (block_cuda_common.cuh's
// layout); layer_max_abs_cuda gives each CTA pieces of 4096 consecutive elements, reduced over the
// CTA when a piece lies in one layer, else element by element into per-thread runs;
// sdp4bit_hadamard_cuda gives each 32-element block one warp, lane j holding element j.
#include "kernels/cuda/round_cuda.hpp"

#include <cuda_runtime.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/quant/group_quant.hpp"

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "atomicMax on 64-bit keys");

constexpr uint64_t kLayerPiece = 4 * 4 * kThreads;  // elements per CTA step of layer_max_kernel
constexpr unsigned kPrefixTiles = 1024;            // most tiles of bitmap words (omnireduce_prefix_cuda)
constexpr uint64_t kPrefixTempBytes = kPrefixTiles * sizeof(uint64_t);

// --- shared device pieces ------------------------------------------------------------------------

__device__ __forceinline__ uint64_t global_thread() {
  return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ uint64_t grid_threads() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

// Elements of the 4-element vector at g below `limit`.
__device__ __forceinline__ uint32_t valid4(uint64_t g, uint64_t limit) {
  return g >= limit ? 0u : limit - g >= 4 ? 4u : static_cast<uint32_t>(limit - g);
}

__device__ __forceinline__ float& lane_of(float4& q, int j) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; }

struct KeyMax {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return key_max(a, b); }
};
struct Sum {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a + b; }
};

// The exclusive prefix sum of `v` over the CTA's threads in thread order; `total` gets the sum of
// all. Called by every thread.
__device__ uint64_t cta_exclusive_sum(uint64_t v, uint64_t& total) {
  __shared__ uint64_t warp_sum[kThreads / 32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t inclusive = v;
  for (unsigned off = 1; off < 32; off *= 2) {
    const uint64_t other = __shfl_up_sync(kFullMask, inclusive, off);
    if (lane >= off) inclusive += other;
  }
  if (lane == 31) warp_sum[warp] = inclusive;
  __syncthreads();
  uint64_t before = 0;
  total = 0;
  for (unsigned w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += warp_sum[w];
    total += warp_sum[w];
  }
  __syncthreads();  // warp_sum is rewritten by the next call
  return before + inclusive - v;
}

// --- DynamiQ -------------------------------------------------------------------------------------

// Position o of the reordered vector as super-group k = o / S and entry i = o % S (a shift when S
// is a power of two).
struct SuperGroups {
  uint64_t size;
  int shift;  // log2(size), or -1
  __device__ __forceinline__ uint64_t index(uint64_t o) const { return shift >= 0 ? o >> shift : o / size; }
};

// finish's in[o] + shift for entry i of a super-group of m entries, with the operand order of the
// CPU loop (`copy[k * S + i] + shift`) as GCC compiles it for x86-64 (SSE2, -O3): its 4-wide and
// 2-wide vector steps and its scalar loop add the reduced value first, but the single element left
// after the vector steps of an odd m >= 3 is computed as shift + value. The order decides which NaN
// a sum of two NaNs returns (a NaN mean meets a NaN sum).
__device__ __forceinline__ float finish_sum(float value, float shift, uint64_t i, uint64_t m) {
  return m % 2 == 1 && m >= 3 && i == m - 1 ? x86_add(shift, value) : x86_add(value, shift);
}

// prepare (kFinish false): out[o] = in[j S + i] - mean[j]; finish: out[j S + i] = in[o] + fl(ranks
// mean[j]), for o = k S + i, j = order[k]. Every o < count is such a position (the partial
// super-group is last). kVec: S % 4 == 0 and in, out 16-byte aligned, so a vector at o stays in
// one super-group and its source (or destination) is a vector too.
template <bool kFinish, bool kVec>
__global__ void __launch_bounds__(kThreads)
    dynamiq_round_kernel(const float* __restrict__ in, uint64_t count, SuperGroups sg,
                         const uint32_t* __restrict__ order, const float* __restrict__ mean, float ranks,
                         float* __restrict__ out) {
  const uint64_t stride = grid_threads(), tid = global_thread();
  uint64_t head = 0;
  if constexpr (kVec) {
    head = count / 4 * 4;
    for (uint64_t v = tid; v < count / 4; v += stride) {
      const uint64_t o = 4 * v, k = sg.index(o), j = order[k], i = o - k * sg.size, t = j * sg.size + i;
      if constexpr (kFinish) {
        float4 q = *reinterpret_cast<const float4*>(in + o);
        const float shift = x86_mul(ranks, mean[j]);
        const uint64_t m = count - j * sg.size < sg.size ? count - j * sg.size : sg.size;
#pragma unroll
        for (int l = 0; l < 4; ++l) lane_of(q, l) = finish_sum(lane_of(q, l), shift, i + l, m);
        *reinterpret_cast<float4*>(out + t) = q;
      } else {
        float4 q = *reinterpret_cast<const float4*>(in + t);
        const float m = mean[j];
        q.x = x86_sub(q.x, m), q.y = x86_sub(q.y, m), q.z = x86_sub(q.z, m), q.w = x86_sub(q.w, m);
        *reinterpret_cast<float4*>(out + o) = q;
      }
    }
  }
  for (uint64_t o = head + tid; o < count; o += stride) {
    const uint64_t k = sg.index(o), j = order[k], i = o - k * sg.size, t = j * sg.size + i;
    if constexpr (kFinish) {
      const uint64_t m = count - j * sg.size < sg.size ? count - j * sg.size : sg.size;
      out[t] = finish_sum(in[o], x86_mul(ranks, mean[j]), i, m);
    } else {
      out[o] = x86_sub(in[t], mean[j]);
    }
  }
}

// --- OmniReduce ----------------------------------------------------------------------------------

__device__ __forceinline__ bool in_union(const uint64_t* bitmap, uint64_t c) {
  return ((bitmap[c >> 6] >> (c & 63)) & 1u) != 0;
}

// Word w of the bitmap without the bits of chunks >= n_chunks.
__device__ __forceinline__ uint64_t union_word(const uint64_t* bitmap, uint64_t w, uint64_t n_chunks) {
  const uint64_t word = bitmap[w], rest = n_chunks - 64 * w;
  return rest < 64 ? word & ((uint64_t{1} << rest) - 1) : word;
}

// tile_count[t] = union chunks in bitmap words [t tile_words, (t + 1) tile_words).
__global__ void __launch_bounds__(kThreads)
    prefix_count_kernel(const uint64_t* __restrict__ bitmap, uint64_t n_chunks, uint64_t words, uint64_t tile_words,
                        uint64_t* __restrict__ tile_count) {
  const uint64_t begin = blockIdx.x * tile_words, end = begin + tile_words < words ? begin + tile_words : words;
  uint64_t ones = 0;
  for (uint64_t w = begin + threadIdx.x; w < end; w += kThreads) ones += __popcll(union_word(bitmap, w, n_chunks));
  ones = group_reduce<kThreads>(ones, Sum{});
  if (threadIdx.x == 0) tile_count[blockIdx.x] = ones;
}

// prefix[c] for the chunks of tile blockIdx.x: chunk * (union chunks before c), all of them full
// chunks; the CTA that holds the last chunk also writes prefix[n_chunks], which counts the last
// chunk's own (possibly short) length.
__global__ void __launch_bounds__(kThreads)
    prefix_scan_kernel(const uint64_t* __restrict__ bitmap, uint64_t count, uint32_t chunk_shift, uint64_t n_chunks,
                       uint64_t words, uint64_t tile_words, const uint64_t* __restrict__ tile_count,
                       uint64_t* __restrict__ prefix) {
  __shared__ uint64_t word_at[kThreads];
  __shared__ uint64_t ones_before[kThreads];
  uint64_t base = 0;  // union chunks in the tiles before this one
  for (uint64_t t = threadIdx.x; t < blockIdx.x; t += kThreads) base += tile_count[t];
  base = group_reduce<kThreads>(base, Sum{});
  const uint64_t begin = blockIdx.x * tile_words, end = begin + tile_words < words ? begin + tile_words : words;
  for (uint64_t w0 = begin; w0 < end; w0 += kThreads) {  // the same trip count on every thread
    const uint64_t w = w0 + threadIdx.x;
    const uint64_t word = w < end ? union_word(bitmap, w, n_chunks) : 0;
    uint64_t total = 0;
    const uint64_t before = cta_exclusive_sum(static_cast<uint64_t>(__popcll(word)), total);
    word_at[threadIdx.x] = word;
    ones_before[threadIdx.x] = base + before;
    __syncthreads();
    // The chunks of these kThreads words, one per thread and step (coalesced stores).
    for (uint64_t e = threadIdx.x; e < 64 * kThreads; e += kThreads) {
      const uint64_t c = 64 * w0 + e;
      if (c >= n_chunks) break;
      const uint64_t local = e / 64, bit = e % 64, mine = word_at[local];
      const uint64_t below = ones_before[local] + __popcll(mine & ((uint64_t{1} << bit) - 1));
      prefix[c] = below << chunk_shift;
      if (c + 1 == n_chunks) {
        prefix[n_chunks] = (below << chunk_shift) + (((mine >> bit) & 1u) != 0 ? count - (c << chunk_shift) : 0);
      }
    }
    base += total;
    __syncthreads();  // word_at and ones_before are rewritten by the next step
  }
}

// prepare, compact: out[prefix[c] + t] = x[c chunk + t] for union chunks c, +0 for those outside
// own when own is not null (send=own). kVec: chunk >= 4 and x, out 16-byte aligned (a vector at g
// lies in one chunk; its destination is a vector when prefix[c] is a multiple of 4, always true of
// a correct prefix, checked anyway).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    omni_gather_kernel(const float* __restrict__ x, uint64_t count, uint32_t shift, const uint64_t* __restrict__ bitmap,
                       const uint64_t* __restrict__ prefix, const uint64_t* __restrict__ own, float* __restrict__ out) {
  const uint64_t stride = grid_threads(), tid = global_thread(), mask = (uint64_t{1} << shift) - 1;
  uint64_t head = 0;
  if constexpr (kVec) {
    head = count / 4 * 4;
    for (uint64_t v = tid; v < count / 4; v += stride) {
      const uint64_t g = 4 * v, c = g >> shift;
      if (!in_union(bitmap, c)) continue;
      const uint64_t p = prefix[c] + (g & mask);
      const float4 q = own == nullptr || in_union(own, c) ? *reinterpret_cast<const float4*>(x + g)
                                                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (p % 4 == 0) {
        *reinterpret_cast<float4*>(out + p) = q;
      } else {
        out[p] = q.x, out[p + 1] = q.y, out[p + 2] = q.z, out[p + 3] = q.w;
      }
    }
  }
  for (uint64_t i = head + tid; i < count; i += stride) {
    const uint64_t c = i >> shift;
    if (in_union(bitmap, c)) out[prefix[c] + (i & mask)] = own == nullptr || in_union(own, c) ? x[i] : 0.0f;
  }
}

// prepare, sparse: out[i] = x[i] in union chunks, +0 elsewhere (out may be x: elementwise).
// finish, compact (kScatter): out[i] = reduced[prefix[c] + (i - c chunk)] in union chunks, +0
// elsewhere. kVec: chunk >= 4 and the float pointers 16-byte aligned.
template <bool kScatter, bool kVec>
__global__ void __launch_bounds__(kThreads)
    omni_mask_kernel(const float* in, uint64_t count, uint32_t shift, const uint64_t* __restrict__ bitmap,
                     const uint64_t* __restrict__ prefix, float* out) {
  const uint64_t stride = grid_threads(), tid = global_thread(), mask = (uint64_t{1} << shift) - 1;
  uint64_t head = 0;
  if constexpr (kVec) {
    head = count / 4 * 4;
    for (uint64_t v = tid; v < count / 4; v += stride) {
      const uint64_t g = 4 * v, c = g >> shift;
      float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (in_union(bitmap, c)) {
        const uint64_t p = kScatter ? prefix[c] + (g & mask) : g;
        if (p % 4 == 0) {
          q = *reinterpret_cast<const float4*>(in + p);
        } else {
          q = make_float4(in[p], in[p + 1], in[p + 2], in[p + 3]);
        }
      }
      *reinterpret_cast<float4*>(out + g) = q;
    }
  }
  for (uint64_t i = head + tid; i < count; i += stride) {
    const uint64_t c = i >> shift;
    out[i] = in_union(bitmap, c) ? in[kScatter ? prefix[c] + (i & mask) : i] : 0.0f;
  }
}

// --- MX: maxima per block and per layer, layer scaling -------------------------------------------

// d_max[b] = max_abs() of block b: the group's keys, combined (the block_cuda_common.cuh layout:
// element k of a block at lane k % kGroup, step k / kGroup).
template <int kGroup>
__global__ void __launch_bounds__(kThreads)
    block_max_kernel(const float* __restrict__ x, uint64_t count, uint32_t block, float* __restrict__ out) {
  constexpr uint64_t kPerCta = kThreads / kGroup;
  const uint64_t blocks = ceil_div(count, block);
  const uint32_t steps = block_steps<kGroup>(count, block), lane = threadIdx.x % kGroup;
  for (uint64_t b0 = blockIdx.x * kPerCta; b0 < blocks; b0 += gridDim.x * kPerCta) {  // uniform over the CTA
    const uint64_t b = b0 + threadIdx.x / kGroup, begin = b * block;
    const uint32_t length = b < blocks ? block_length(count, begin, block) : 0;
    uint64_t key = 0;
    for (uint32_t t = 0; t < steps; ++t) {
      const uint32_t k = lane + t * kGroup;
      if (k < length) key = key_max(key, abs_key(x[begin + k], begin + k));
    }
    key = group_reduce<kGroup>(key, KeyMax{});
    if (lane == 0 && b < blocks) out[b] = key_value(key, x);
  }
}

// The layer l holding element i: offsets[l] <= i < offsets[l + 1] (`hint` tried first, then a
// binary search). REQUIRES: offsets[0] <= i < offsets[layers]; hint < layers.
__device__ __forceinline__ uint64_t layer_of(const uint64_t* offsets, uint64_t layers, uint64_t i, uint64_t hint) {
  if (offsets[hint] <= i && i < offsets[hint + 1]) return hint;
  uint64_t lo = 0, hi = layers;  // offsets[lo] <= i < offsets[hi]
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// keys[l] = the largest key of layer l's elements (keys zeroed before). A piece within one layer
// is reduced over the CTA (one atomic); a piece with layer boundaries goes element by element, each
// thread flushing a layer's key when its elements move on to the next layer.
__global__ void __launch_bounds__(kThreads)
    layer_max_kernel(const float* __restrict__ x, uint64_t count, const uint64_t* __restrict__ offsets,
                     uint64_t layers, bool vec, unsigned long long* __restrict__ keys) {
  uint64_t hint = 0;
  for (uint64_t p0 = blockIdx.x * kLayerPiece; p0 < count; p0 += gridDim.x * kLayerPiece) {
    const uint64_t p1 = count - p0 < kLayerPiece ? count : p0 + kLayerPiece;
    const uint64_t first = layer_of(offsets, layers, p0, hint), last = layer_of(offsets, layers, p1 - 1, first);
    hint = last;
    if (first == last) {  // the same on every thread of the CTA
      uint64_t key = 0;
      for (uint64_t s = 0; s < 4; ++s) {
        const uint64_t g = p0 + 4 * (threadIdx.x + kThreads * s);
        const uint32_t n = valid4(g, p1);
        if (vec && n == 4) {
          const float4 q = *reinterpret_cast<const float4*>(x + g);
          key = key_max(key, key_max(key_max(abs_key(q.x, g), abs_key(q.y, g + 1)),
                                     key_max(abs_key(q.z, g + 2), abs_key(q.w, g + 3))));
        } else {
          for (uint32_t j = 0; j < n; ++j) key = key_max(key, abs_key(x[g + j], g + j));
        }
      }
      key = group_reduce<kThreads>(key, KeyMax{});
      if (threadIdx.x == 0 && key != 0) atomicMax(keys + first, static_cast<unsigned long long>(key));
    } else {
      uint64_t layer = first, key = 0;
      for (uint64_t i = p0 + threadIdx.x; i < p1; i += kThreads) {
        const uint64_t l = layer_of(offsets, layers, i, layer);
        if (l != layer) {
          if (key != 0) atomicMax(keys + layer, static_cast<unsigned long long>(key));
          layer = l;
          key = 0;
        }
        key = key_max(key, abs_key(x[i], i));
      }
      if (key != 0) atomicMax(keys + layer, static_cast<unsigned long long>(key));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    keys_to_max_kernel(const unsigned long long* __restrict__ keys, uint64_t layers, const float* __restrict__ x,
                       float* __restrict__ out) {
  for (uint64_t l = global_thread(); l < layers; l += grid_threads()) out[l] = key_value(keys[l], x);
}

// out[i] = x[i] * factor[layer of i] (the CPU's src[i] * f; out may be x: elementwise).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    scale_layers_kernel(const float* x, uint64_t count, const uint64_t* __restrict__ offsets, uint64_t layers,
                        const float* __restrict__ factor, float* out) {
  const uint64_t stride = grid_threads(), tid = global_thread();
  uint64_t head = 0, layer = 0;
  if constexpr (kVec) {
    head = count / 4 * 4;
    for (uint64_t v = tid; v < count / 4; v += stride) {
      float4 q = reinterpret_cast<const float4*>(x)[v];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        layer = layer_of(offsets, layers, 4 * v + j, layer);
        lane_of(q, j) = x86_mul(lane_of(q, j), factor[layer]);
      }
      reinterpret_cast<float4*>(out)[v] = q;
    }
  }
  for (uint64_t i = head + tid; i < count; i += stride) {
    layer = layer_of(offsets, layers, i, layer);
    out[i] = x86_mul(x[i], factor[layer]);
  }
}

// --- SDP4Bit -------------------------------------------------------------------------------------

// fp64 with the x86-64 NaN results (the fp32 rules of block_cuda_common.cuh: the first NaN
// operand, quieted, or the default NaN 0xFFF8000000000000).
__device__ __forceinline__ bool is_nan64(double x) {
  return (static_cast<uint64_t>(__double_as_longlong(x)) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
}
__device__ __forceinline__ double quiet64(double x) {
  return __longlong_as_double(static_cast<long long>(static_cast<uint64_t>(__double_as_longlong(x)) |
                                                     0x0008000000000000ull));
}
__device__ __forceinline__ double x86_nan64(double r, double a, double b) {
  if (!is_nan64(r)) return r;
  if (is_nan64(a)) return quiet64(a);
  if (is_nan64(b)) return quiet64(b);
  return __longlong_as_double(static_cast<long long>(0xFFF8000000000000ull));
}
__device__ __forceinline__ double x86_add64(double a, double b) { return x86_nan64(__dadd_rn(a, b), a, b); }
__device__ __forceinline__ double x86_sub64(double a, double b) { return x86_nan64(__dsub_rn(a, b), a, b); }
__device__ __forceinline__ double x86_mul64(double a, double b) { return x86_nan64(__dmul_rn(a, b), a, b); }

// static_cast<double>(f) on x86 (cvtss2sd): exact, a NaN quieted with its payload in the high bits.
__device__ __forceinline__ double widen_x86(float f) {
  if (!is_nan(f)) return static_cast<double>(f);
  const uint32_t u = __float_as_uint(f);
  const uint64_t bits = static_cast<uint64_t>(u >> 31) << 63 | 0x7FF8000000000000ull |
                        static_cast<uint64_t>(u & 0x3FFFFFu) << 29;
  return __longlong_as_double(static_cast<long long>(bits));
}

// static_cast<float>(d) on x86 (cvtsd2ss): rounded to nearest, a NaN quieted with the high bits of
// its payload.
__device__ __forceinline__ float narrow_x86(double d) {
  if (!is_nan64(d)) return __double2float_rn(d);
  const uint64_t u = static_cast<uint64_t>(__double_as_longlong(d));
  return __uint_as_float(static_cast<uint32_t>(u >> 63) << 31 | 0x7FC00000u |
                         (static_cast<uint32_t>(u >> 29) & 0x3FFFFFu));
}

// The operand order of the float butterflies' sums in hadamard_blocks (sdp4bit_pipeline.cpp) as
// GCC 12 compiles the loop for x86-64 (SSE2, -O3): stages h = 1 and 2 run as a scalar loop that
// computes b + a; stages h >= 4 as 4-wide vectors, of which the first of each butterfly group
// (j % h < 4) computes b + a and the others a + b.
struct TlqButterflyOrder {
  __device__ static constexpr bool b_first(unsigned h, unsigned j) { return h <= 2 || (j & (h - 1)) < 4; }
};

// Every complete 32-element block through one warp (lane j holding element j): the float
// butterflies of warp_hadamard32 when the block's max |x| (std::max's, NaN ignored) is at most
// kGroupHadamardMaxInput (sums in TlqButterflyOrder), else the CPU's double path: widen, the same
// butterflies in double (a + b throughout, as GCC emits them there), times `scale` (1 / sqrt(32)
// in double), clamped as std::clamp(w, -FLT_MAX, FLT_MAX) = min(max(w, lo), hi) (a NaN passes),
// narrowed. Then the incomplete tail copied. out may be x: each lane reads its element before the
// warp's first shuffle and writes it after the last.
__global__ void __launch_bounds__(kThreads)
    sdp4bit_hadamard_kernel(const float* x, uint64_t count, double scale, float* out) {
  const uint64_t blocks = count / kGroupHadamardBlock;
  const uint64_t warps = grid_threads() / 32;
  const unsigned lane = threadIdx.x % 32;
  for (uint64_t b = global_thread() / 32; b < blocks; b += warps) {  // the same on every lane of a warp
    const uint64_t i = b * kGroupHadamardBlock + lane;
    const float v = x[i];
    const float m = group_reduce<32>(max_abs_step(0.0f, v), MaxOp{});
    float r;
    if (m <= kGroupHadamardMaxInput) {
      r = warp_hadamard32<TlqButterflyOrder>(v);
    } else {
      double w = widen_x86(v);
      for (unsigned h = 1; h < 32; h <<= 1) {
        const double other = __shfl_xor_sync(kFullMask, w, static_cast<int>(h));
        w = (lane & h) == 0 ? x86_add64(w, other) : x86_sub64(other, w);
      }
      w = x86_mul64(w, scale);
      constexpr double kLo = -static_cast<double>(FLT_MAX), kHi = static_cast<double>(FLT_MAX);
      w = w < kLo ? kLo : w;
      w = kHi < w ? kHi : w;
      r = narrow_x86(w);
    }
    out[i] = r;
  }
  if (out != x) {
    for (uint64_t i = blocks * kGroupHadamardBlock + global_thread(); i < count; i += grid_threads()) out[i] = x[i];
  }
}

// What an elementwise op against a second array (qWD's reference R, a low-rank residual e) leaves
// in that array: untouched, the result, or zeros.
enum class RefWrite : int { kKeep, kResult, kZero };

// out = a - ref (kAdd false: qWD's prepare) or a + ref (kAdd true, a first: qWD's finish, the
// low-rank engine's x + e), then ref per `write`. Elementwise; a, ref and out may be the same array
// except with kZero (ref distinct from both, checked by the caller).
template <bool kAdd, bool kVec>
__global__ void __launch_bounds__(kThreads)
    ref_kernel(const float* a, uint64_t count, float* ref, RefWrite write, float* out) {
  const uint64_t stride = grid_threads(), tid = global_thread();
  uint64_t head = 0;
  if constexpr (kVec) {
    head = count / 4 * 4;
    for (uint64_t v = tid; v < head / 4; v += stride) {
      float4 q = reinterpret_cast<const float4*>(a)[v];
      const float4 r = reinterpret_cast<const float4*>(ref)[v];
      if constexpr (kAdd) {
        q.x = x86_add(q.x, r.x), q.y = x86_add(q.y, r.y), q.z = x86_add(q.z, r.z), q.w = x86_add(q.w, r.w);
      } else {
        q.x = x86_sub(q.x, r.x), q.y = x86_sub(q.y, r.y), q.z = x86_sub(q.z, r.z), q.w = x86_sub(q.w, r.w);
      }
      reinterpret_cast<float4*>(out)[v] = q;
      if (write == RefWrite::kResult) reinterpret_cast<float4*>(ref)[v] = q;
      if (write == RefWrite::kZero) reinterpret_cast<float4*>(ref)[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  for (uint64_t i = head + tid; i < count; i += stride) {
    const float r = kAdd ? x86_add(a[i], ref[i]) : x86_sub(a[i], ref[i]);
    out[i] = r;
    if (write == RefWrite::kResult) ref[i] = r;
    if (write == RefWrite::kZero) ref[i] = 0.0f;
  }
}

// --- host side -----------------------------------------------------------------------------------

// Whether float arrays [a, a + an) and [b, b + bn) share memory.
bool overlap(const float* a, uint64_t an, const float* b, uint64_t bn) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bn * sizeof(float) && pb < pa + an * sizeof(float);
}

// Equal or disjoint `count`-float arrays (what elementwise in-place ops allow).
bool same_or_disjoint(const float* a, const float* b, uint64_t count) { return a == b || !overlap(a, count, b, count); }

Status fail(const char* name, const char* what) { return invalid_argument(std::string(name) + ": " + what); }

unsigned elementwise_grid(uint64_t count) { return grid_for(count / 4 + count % 4, kThreads); }

Status check_chunk(uint64_t chunk, const char* name) {
  if (!std::has_single_bit(chunk)) {
    return invalid_argument(std::string(name) + ": chunk " + std::to_string(chunk) + " is not a power of two");
  }
  return ok_status();
}

template <bool kFinish>
Status launch_dynamiq(const float* d_in, uint64_t count, uint32_t super_group, const uint32_t* d_order,
                      const float* d_mean, uint32_t ranks, float* d_out, CudaStream stream, const char* name) {
  if (super_group == 0) return fail(name, "super_group must be at least 1");
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_order == nullptr || d_mean == nullptr || d_out == nullptr) return null_pointer(name);
  if (overlap(d_in, count, d_out, count)) return fail(name, "input and d_out overlap");
  const SuperGroups sg{super_group, std::has_single_bit(super_group) ? std::countr_zero(super_group) : -1};
  const float r = static_cast<float>(ranks);
  if (super_group % 4 == 0 && aligned(d_in, 16) && aligned(d_out, 16)) {
    dynamiq_round_kernel<kFinish, true>
        <<<elementwise_grid(count), kThreads, 0, stream>>>(d_in, count, sg, d_order, d_mean, r, d_out);
  } else {
    dynamiq_round_kernel<kFinish, false>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_in, count, sg, d_order, d_mean, r, d_out);
  }
  return launch_status(name);
}

template <bool kAdd>
Status launch_ref(const float* d_a, uint64_t count, float* d_ref, RefWrite write, float* d_out, CudaStream stream,
                  const char* name) {
  if (count == 0) return ok_status();
  if (d_a == nullptr || d_ref == nullptr || d_out == nullptr) return null_pointer(name);
  if (!same_or_disjoint(d_a, d_out, count) || !same_or_disjoint(d_ref, d_out, count) ||
      !same_or_disjoint(d_a, d_ref, count)) {
    return fail(name, "arrays overlap partially");
  }
  if (write == RefWrite::kZero && (d_ref == d_out || d_ref == d_a)) {
    return fail(name, "the cleared array is also an input or d_out");
  }
  if (aligned(d_a, 16) && aligned(d_ref, 16) && aligned(d_out, 16)) {
    ref_kernel<kAdd, true><<<elementwise_grid(count), kThreads, 0, stream>>>(d_a, count, d_ref, write, d_out);
  } else {
    ref_kernel<kAdd, false><<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_a, count, d_ref, write, d_out);
  }
  return launch_status(name);
}

}  // namespace

// --- DynamiQ -------------------------------------------------------------------------------------

Status dynamiq_prepare_cuda(const float* d_x, uint64_t count, uint32_t super_group, const uint32_t* d_order,
                            const float* d_mean, float* d_out, CudaStream stream) {
  return launch_dynamiq<false>(d_x, count, super_group, d_order, d_mean, 1, d_out, stream, "dynamiq_prepare_cuda");
}

Status dynamiq_finish_cuda(const float* d_reduced, uint64_t count, uint32_t super_group, const uint32_t* d_order,
                           const float* d_mean, uint32_t ranks, float* d_out, CudaStream stream) {
  return launch_dynamiq<true>(d_reduced, count, super_group, d_order, d_mean, ranks, d_out, stream,
                              "dynamiq_finish_cuda");
}

// --- OmniReduce ----------------------------------------------------------------------------------

uint64_t omnireduce_prefix_cuda_temp_bytes() { return kPrefixTempBytes; }

Status omnireduce_prefix_cuda(const uint64_t* d_bitmap, uint64_t count, uint64_t chunk, void* d_temp,
                              uint64_t temp_bytes, uint64_t* d_prefix, CudaStream stream) {
  constexpr const char* kName = "omnireduce_prefix_cuda";
  CCSIM_RETURN_IF_ERROR(check_chunk(chunk, kName));
  if (d_prefix == nullptr) return null_pointer(kName);
  if (count == 0) return cuda_status(cudaMemsetAsync(d_prefix, 0, sizeof(uint64_t), stream), kName);
  if (d_bitmap == nullptr || d_temp == nullptr) return null_pointer(kName);
  if (temp_bytes < kPrefixTempBytes || !aligned(d_temp, 16)) {
    return fail(kName, "d_temp must hold omnireduce_prefix_cuda_temp_bytes() bytes, 16-aligned");
  }
  const uint64_t n_chunks = ceil_div(count, chunk), words = ceil_div(n_chunks, 64);
  // Tiles of a multiple of kThreads words, at most kPrefixTiles of them.
  const uint64_t tile_words = kThreads * ceil_div(ceil_div(words, kThreads), kPrefixTiles);
  const auto tiles = static_cast<unsigned>(ceil_div(words, tile_words));
  auto* tile_count = static_cast<uint64_t*>(d_temp);
  const auto shift = static_cast<uint32_t>(std::countr_zero(chunk));
  prefix_count_kernel<<<tiles, kThreads, 0, stream>>>(d_bitmap, n_chunks, words, tile_words, tile_count);
  prefix_scan_kernel<<<tiles, kThreads, 0, stream>>>(d_bitmap, count, shift, n_chunks, words, tile_words, tile_count,
                                                     d_prefix);
  return launch_status(kName);
}

Status omnireduce_prepare_cuda(const float* d_x, uint64_t count, uint64_t chunk, const uint64_t* d_bitmap,
                               const uint64_t* d_prefix, const uint64_t* d_own, bool compact, float* d_out,
                               CudaStream stream) {
  constexpr const char* kName = "omnireduce_prepare_cuda";
  CCSIM_RETURN_IF_ERROR(check_chunk(chunk, kName));
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_bitmap == nullptr || d_out == nullptr || (compact && d_prefix == nullptr)) {
    return null_pointer(kName);
  }
  const auto shift = static_cast<uint32_t>(std::countr_zero(chunk));
  const bool vec = chunk >= 4 && aligned(d_x, 16) && aligned(d_out, 16);
  const unsigned grid = vec ? elementwise_grid(count) : grid_for(count, kThreads);
  if (compact) {
    // The compact vector's length is on the device; one that starts inside the tensor overlaps it.
    if (overlap(d_x, count, d_out, 1)) return fail(kName, "d_out starts inside d_x (compact layout)");
    if (vec) {
      omni_gather_kernel<true><<<grid, kThreads, 0, stream>>>(d_x, count, shift, d_bitmap, d_prefix, d_own, d_out);
    } else {
      omni_gather_kernel<false><<<grid, kThreads, 0, stream>>>(d_x, count, shift, d_bitmap, d_prefix, d_own, d_out);
    }
  } else {
    if (!same_or_disjoint(d_x, d_out, count)) return fail(kName, "d_x and d_out overlap partially");
    // In place on the tensor: what is sent is the union, or the own chunks (a subset of it).
    const uint64_t* sent = d_own != nullptr ? d_own : d_bitmap;
    if (vec) {
      omni_mask_kernel<false, true><<<grid, kThreads, 0, stream>>>(d_x, count, shift, sent, nullptr, d_out);
    } else {
      omni_mask_kernel<false, false><<<grid, kThreads, 0, stream>>>(d_x, count, shift, sent, nullptr, d_out);
    }
  }
  return launch_status(kName);
}

Status omnireduce_finish_cuda(const float* d_reduced, uint64_t count, uint64_t chunk, const uint64_t* d_bitmap,
                              const uint64_t* d_prefix, bool compact, float* d_out, CudaStream stream) {
  constexpr const char* kName = "omnireduce_finish_cuda";
  CCSIM_RETURN_IF_ERROR(check_chunk(chunk, kName));
  if (count == 0) return ok_status();
  if (d_reduced == nullptr || d_out == nullptr) return null_pointer(kName);
  if (!compact) {  // a copy
    if (!same_or_disjoint(d_reduced, d_out, count)) return fail(kName, "d_reduced and d_out overlap partially");
    if (d_reduced == d_out) return ok_status();
    return cuda_status(cudaMemcpyAsync(d_out, d_reduced, count * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                       kName);
  }
  if (d_bitmap == nullptr || d_prefix == nullptr) return null_pointer(kName);
  if (overlap(d_out, count, d_reduced, 1)) return fail(kName, "d_reduced starts inside d_out (compact layout)");
  const auto shift = static_cast<uint32_t>(std::countr_zero(chunk));
  if (chunk >= 4 && aligned(d_reduced, 16) && aligned(d_out, 16)) {
    omni_mask_kernel<true, true>
        <<<elementwise_grid(count), kThreads, 0, stream>>>(d_reduced, count, shift, d_bitmap, d_prefix, d_out);
  } else {
    omni_mask_kernel<true, false>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_reduced, count, shift, d_bitmap, d_prefix, d_out);
  }
  return launch_status(kName);
}

// --- MX global scaling ---------------------------------------------------------------------------

Status block_max_abs_cuda(const float* d_x, uint64_t count, uint32_t block, float* d_max, CudaStream stream) {
  constexpr const char* kName = "block_max_abs_cuda";
  if (block == 0) return fail(kName, "block must be at least 1");
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_max == nullptr) return null_pointer(kName);
  const uint64_t blocks = ceil_div(count, block);
  dispatch_group(block, [&](auto group) {
    constexpr int kGroup = decltype(group)::value;
    block_max_kernel<kGroup>
        <<<grid_for(blocks, kThreads / kGroup), kThreads, 0, stream>>>(d_x, count, block, d_max);
  });
  return launch_status(kName);
}

uint64_t layer_max_abs_cuda_temp_bytes(uint64_t layers) { return ceil_div(layers * sizeof(uint64_t), 16) * 16; }

Status layer_max_abs_cuda(const float* d_x, uint64_t count, const uint64_t* d_offsets, uint64_t layers, void* d_temp,
                          uint64_t temp_bytes, float* d_max, CudaStream stream) {
  constexpr const char* kName = "layer_max_abs_cuda";
  if (layers == 0) return fail(kName, "layers must be at least 1");
  if (d_max == nullptr) return null_pointer(kName);
  if (count == 0) return cuda_status(cudaMemsetAsync(d_max, 0, layers * sizeof(float), stream), kName);
  if (d_x == nullptr || d_offsets == nullptr || d_temp == nullptr) return null_pointer(kName);
  if (temp_bytes < layer_max_abs_cuda_temp_bytes(layers) || !aligned(d_temp, 16)) {
    return fail(kName, "d_temp must hold layer_max_abs_cuda_temp_bytes(layers) bytes, 16-aligned");
  }
  auto* keys = static_cast<unsigned long long*>(d_temp);
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(keys, 0, layers * sizeof(uint64_t), stream), kName));
  layer_max_kernel<<<grid_for(count, kLayerPiece), kThreads, 0, stream>>>(d_x, count, d_offsets, layers,
                                                                          aligned(d_x, 16), keys);
  keys_to_max_kernel<<<grid_for(layers, kThreads), kThreads, 0, stream>>>(keys, layers, d_x, d_max);
  return launch_status(kName);
}

Status scale_layers_cuda(const float* d_x, uint64_t count, const uint64_t* d_offsets, uint64_t layers,
                         const float* d_factor, float* d_out, CudaStream stream) {
  constexpr const char* kName = "scale_layers_cuda";
  if (layers == 0) return fail(kName, "layers must be at least 1");
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_offsets == nullptr || d_factor == nullptr || d_out == nullptr) return null_pointer(kName);
  if (!same_or_disjoint(d_x, d_out, count)) return fail(kName, "d_x and d_out overlap partially");
  if (aligned(d_x, 16) && aligned(d_out, 16)) {
    scale_layers_kernel<true>
        <<<elementwise_grid(count), kThreads, 0, stream>>>(d_x, count, d_offsets, layers, d_factor, d_out);
  } else {
    scale_layers_kernel<false>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_x, count, d_offsets, layers, d_factor, d_out);
  }
  return launch_status(kName);
}

// --- SDP4Bit -------------------------------------------------------------------------------------

Status sdp4bit_hadamard_cuda(const float* d_x, uint64_t count, float* d_out, CudaStream stream) {
  constexpr const char* kName = "sdp4bit_hadamard_cuda";
  if (count == 0) return ok_status();
  if (d_x == nullptr || d_out == nullptr) return null_pointer(kName);
  if (!same_or_disjoint(d_x, d_out, count)) return fail(kName, "d_x and d_out overlap partially");
  // The CPU's scale of its double path, computed as it does (on the host, in double).
  const double scale = 1.0 / std::sqrt(static_cast<double>(kGroupHadamardBlock));
  const uint64_t blocks = count / kGroupHadamardBlock;
  // One warp per block; the tail (fewer than 32 elements) needs one warp at least.
  const unsigned grid = grid_for(blocks > 0 ? blocks : 1, kThreads / 32);
  sdp4bit_hadamard_kernel<<<grid, kThreads, 0, stream>>>(d_x, count, scale, d_out);
  return launch_status(kName);
}

Status sdp4bit_qwd_prepare_cuda(const float* d_x, uint64_t count, const float* d_reference, float* d_out,
                                CudaStream stream) {
  // The kernel does not write the reference in prepare (RefWrite::kKeep).
  return launch_ref<false>(d_x, count, const_cast<float*>(d_reference), RefWrite::kKeep, d_out, stream,
                           "sdp4bit_qwd_prepare_cuda");
}

Status sdp4bit_qwd_finish_cuda(const float* d_reduced, uint64_t count, float* d_reference, bool update_reference,
                               float* d_out, CudaStream stream) {
  return launch_ref<true>(d_reduced, count, d_reference, update_reference ? RefWrite::kResult : RefWrite::kKeep, d_out,
                          stream, "sdp4bit_qwd_finish_cuda");
}

// --- Low-rank engine (PowerSGD, EDGC) -------------------------------------------------------------

Status lowrank_add_residual_cuda(const float* d_x, uint64_t count, const float* d_residual, float* d_out,
                                 CudaStream stream) {
  return launch_ref<true>(d_x, count, const_cast<float*>(d_residual), RefWrite::kKeep, d_out, stream,
                          "lowrank_add_residual_cuda");
}

Status lowrank_move_uncompressed_cuda(const float* d_x, uint64_t count, float* d_residual, float* d_out,
                                      CudaStream stream) {
  return launch_ref<true>(d_x, count, d_residual, RefWrite::kZero, d_out, stream, "lowrank_move_uncompressed_cuda");
}

}  // namespace ccsim::kern
