// CUDA kernels for THC and the Hadamard transforms (kernels/cuda/thc_cuda.hpp). Bit identity with
// the CPU references rests on:
//  - the butterflies: stage h = 2^b pairs elements j and j + h (bit b of j clear) into
//    (a + b, a - b), stages in increasing b, each on the operands the CPU's fwht_unnormalized()
//    sees; a pass groups consecutive stages and passes run in stage order, so every element goes
//    through the same operations in the same order as on the CPU;
//  - the canonical NaN after the butterflies (hadamard_quiet), the NaN rules of x86-64 for every
//    other fp32 operation whose NaN can reach an output (block_cuda_common.cuh), signs applied as a
//    flip of the sign bit (the CPU's x = -x), and the
//    CCSIM_HD element functions of kernels/quant/thc_quant.hpp;
//  - maxima as exact 64-bit keys: |x|'s bits for a number, and above every number a key that
//    prefers the smaller index for a NaN, so the combined key names max_abs()'s result whatever the
//    order: the largest magnitude or the first NaN.
//
// The tile of a transform pass: 8192 elements of one CTA (256 threads, 32 elements each, as 8
// groups of 4 consecutive elements: one float4, one Philox block when the global index is a
// multiple of 4). Tile index t, 13 bits, in two register layouts:
//   A: t = j + 4 lane + 128 k + 1024 warp   (j < 4 in the group, k < 8 the group, lane, warp)
//   B: t = j + 4 tid + 1024 k
// Stages on tile bits 0-1 run within a group, 2-6 across lanes (shuffles), 7-9 across a thread's
// groups in layout A; bits 10-12 across a thread's groups in layout B, reached through shared
// memory (one exchange, float4 rows, conflict-free). A pass whose stages all sit below bit 10
// never leaves layout A; one whose stages all sit at 10 or above loads straight into layout B.
// Tile index t maps to the array as base + (t mod C) + (t div C) S: C contiguous columns (C = 8192
// in the first pass, 8192 / 2^r in a pass of r stages starting at stage s, with row stride S = 2^s),
// so every warp access covers whole 32-float rows at least (128 contiguous bytes or more).
#include "kernels/cuda/thc_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/block_cuda_common.cuh"
#include "kernels/quant/minifloat.hpp"
#include "kernels/quant/thc_quant.hpp"
#include "kernels/transform/hadamard.hpp"

namespace ccsim::kern {
namespace {

using namespace cuda_detail;

static_assert(kThreads == 256, "the tile layouts assume 256 threads");

constexpr uint32_t kTileBits = 13;                // tile of 8192 elements
constexpr uint64_t kTile = uint64_t{1} << kTileBits;
constexpr uint32_t kSplitBit = 10;                // tile bits >= this run in layout B
constexpr uint32_t kMaxPassStages = 8;            // stages of a pass after the first (C >= 32)
constexpr int kGroups = 8;                        // float4 groups per thread
constexpr unsigned kPartials = 1024;              // per-CTA partial maxima (max grid of a max pass)
constexpr uint64_t kPartialBytes = kPartials * sizeof(uint64_t);
constexpr uint64_t kPlanScalarBytes = 256;        // plan_local's max |x| slot, padded for alignment

using Group = float[4];

// --- element operations ----------------------------------------------------------------------

__device__ __forceinline__ float flip_sign(float v) { return __uint_as_float(__float_as_uint(v) ^ 0x80000000u); }

// thc_scale_pow2(x, e) with the CPU's NaN: (x * 2^(e/2)) * 2^(e - e/2).
__device__ __forceinline__ float scale_pow2_x86(float x, int e) {
  const int e1 = e / 2;
  return x86_mul(x86_mul(x, exact_pow2(e1)), exact_pow2(e - e1));
}

// The four Philox words of global elements idx .. idx + 3 (one block when idx is a multiple of 4).
__device__ __forceinline__ void philox_words4(const RngKey& key, uint64_t idx, uint32_t (&w)[4]) {
  const U32x4 a = philox_block(key, idx >> 2);
  const uint32_t s = static_cast<uint32_t>(idx & 3u);
  if (s == 0) {
    w[0] = a.v[0], w[1] = a.v[1], w[2] = a.v[2], w[3] = a.v[3];
    return;
  }
  const U32x4 b = philox_block(key, (idx >> 2) + 1);
  if (s == 1) {
    w[0] = a.v[1], w[1] = a.v[2], w[2] = a.v[3], w[3] = b.v[0];
  } else if (s == 2) {
    w[0] = a.v[2], w[1] = a.v[3], w[2] = b.v[0], w[3] = b.v[1];
  } else {
    w[0] = a.v[3], w[1] = b.v[0], w[2] = b.v[1], w[3] = b.v[2];
  }
}

// v[j] = -v[j] where hadamard_sign_at(key, idx + j) is -1.
__device__ __forceinline__ void apply_signs4(const RngKey& key, uint64_t idx, Group& v) {
  uint32_t w[4];
  philox_words4(key, idx, w);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if ((w[j] >> 31) != 0u) v[j] = flip_sign(v[j]);
}

// v[0, n) = p[g, g + n), the rest 0; one float4 when `vec` (p 16-byte aligned) and n == 4.
__device__ __forceinline__ void load4(const float* p, uint64_t g, uint32_t n, bool vec, Group& v) {
  if (vec && n == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p + g);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    return;
  }
#pragma unroll
  for (uint32_t j = 0; j < 4; ++j) v[j] = j < n ? p[g + j] : 0.0f;
}

__device__ __forceinline__ void store4(float* p, uint64_t g, uint32_t n, bool vec, const Group& v) {
  if (vec && n == 4) {
    *reinterpret_cast<float4*>(p + g) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
#pragma unroll
  for (uint32_t j = 0; j < 4; ++j)
    if (j < n) p[g + j] = v[j];
}

__device__ __forceinline__ uint32_t valid_of(uint64_t g, uint64_t limit) {
  return g >= limit ? 0u : limit - g >= 4 ? 4u : static_cast<uint32_t>(limit - g);
}

// --- maxima as keys (abs_key, key_max, key_value: block_cuda_common.cuh) -----------------------

// The key combined over the CTA (every thread calls it; thread 0 gets the result).
__device__ uint64_t cta_key_max(uint64_t key) {
  __shared__ uint64_t warp_key[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) key = key_max(key, __shfl_xor_sync(kFullMask, key, off));
  if (threadIdx.x % 32 == 0) warp_key[threadIdx.x / 32] = key;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kThreads / 32; ++w) key = key_max(key, warp_key[w]);
  return key;
}

// --- the transform pass ------------------------------------------------------------------------

// One pass: tiles of kTile elements, the stages on tile bits [lo, hi).
struct PassGeom {
  uint64_t count;        // elements of the array (only a first pass may end in a partial tile)
  uint64_t tiles;
  uint32_t col_bits;     // log2 C
  uint32_t stride_bits;  // log2 S
  uint32_t lo, hi;
};

__device__ __forceinline__ uint64_t tile_base(const PassGeom& p, uint64_t tile) {
  const uint32_t chunk_bits = p.stride_bits - p.col_bits;  // log2(S / C): column chunks of a row
  const uint32_t span_bits = p.stride_bits + (kTileBits - p.col_bits);  // log2(S R)
  return ((tile & ((uint64_t{1} << chunk_bits) - 1)) << p.col_bits) + ((tile >> chunk_bits) << span_bits);
}

__device__ __forceinline__ uint64_t element_of(const PassGeom& p, uint64_t base, uint32_t t) {
  return base + (t & ((1u << p.col_bits) - 1)) + (static_cast<uint64_t>(t >> p.col_bits) << p.stride_bits);
}

// (a, b) <- (a + b, a - b), as the CPU computes them.
__device__ __forceinline__ void butterfly(float& a, float& b) {
  const float x = a, y = b;
  a = x86_add(x, y);
  b = x86_sub(x, y);
}

__device__ __forceinline__ bool active(uint32_t bit, uint32_t lo, uint32_t hi) { return lo <= bit && bit < hi; }

// Stages on tile bits [lo, hi) below kSplitBit, in layout A.
__device__ __forceinline__ void stages_a(Group (&v)[kGroups], uint32_t lo, uint32_t hi) {
#pragma unroll
  for (uint32_t b = 0; b < 2; ++b) {
    if (!active(b, lo, hi)) continue;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
#pragma unroll
      for (uint32_t j = 0; j < 4; ++j)
        if ((j & (1u << b)) == 0) butterfly(v[k][j], v[k][j | (1u << b)]);
    }
  }
  const uint32_t lane = threadIdx.x % 32;
#pragma unroll
  for (uint32_t b = 2; b < 7; ++b) {
    if (!active(b, lo, hi)) continue;
    const uint32_t bit = 1u << (b - 2);
    const bool upper = (lane & bit) != 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float other = __shfl_xor_sync(kFullMask, v[k][j], static_cast<int>(bit));
        v[k][j] = upper ? x86_sub(other, v[k][j]) : x86_add(v[k][j], other);
      }
    }
  }
#pragma unroll
  for (uint32_t b = 7; b < kSplitBit; ++b) {
    if (!active(b, lo, hi)) continue;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      if ((k & (1 << (b - 7))) != 0) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) butterfly(v[k][j], v[k | (1 << (b - 7))][j]);
    }
  }
}

// Stages on tile bits [lo, hi) at kSplitBit and above, in layout B.
__device__ __forceinline__ void stages_b(Group (&v)[kGroups], uint32_t lo, uint32_t hi) {
#pragma unroll
  for (uint32_t b = kSplitBit; b < kTileBits; ++b) {
    if (!active(b, lo, hi)) continue;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      if ((k & (1 << (b - kSplitBit))) != 0) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) butterfly(v[k][j], v[k | (1 << (b - kSplitBit))][j]);
    }
  }
}

// One pass of a transform. `load` fills a group from the array (what precedes the butterflies in
// a first pass, a plain read after), `store` disposes of one (what follows them in a last pass).
// With `gate` set, the pass runs only if *gate is positive and finite (plan_local's max |x|), and
// the load takes its scale from it. Every thread runs the same tiles, so barriers and full-mask
// shuffles are safe.
template <class Load, class Store>
__global__ void __launch_bounds__(kThreads, 2) transform_pass_kernel(PassGeom p, const float* gate, Load load,
                                                                  Store store) {
  __shared__ float4 exchange[kTile / 4];
  if (gate != nullptr) {
    const float a = *gate;
    if (!(a > 0.0f) || !(a <= FLT_MAX)) return;
    load.set_gate(a);
  }
  const uint32_t tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const bool in_a = p.lo < kSplitBit, in_b = p.hi > kSplitBit;
  for (uint64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    const uint64_t base = tile_base(p, tile);
    Group v[kGroups];
    if (in_a) {
#pragma unroll
      for (int k = 0; k < kGroups; ++k) {
        const uint64_t g = element_of(p, base, 4 * lane + 128 * k + 1024 * warp);
        load(g, valid_of(g, p.count), v[k]);
      }
      stages_a(v, p.lo, p.hi);
      if (in_b) {
#pragma unroll
        for (int k = 0; k < kGroups; ++k)
          exchange[lane + 32 * k + 256 * warp] = make_float4(v[k][0], v[k][1], v[k][2], v[k][3]);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kGroups; ++k) {
          const float4 q = exchange[tid + 256 * k];
          v[k][0] = q.x, v[k][1] = q.y, v[k][2] = q.z, v[k][3] = q.w;
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kGroups; ++k) {
        const uint64_t g = element_of(p, base, 4 * tid + 1024 * k);
        load(g, valid_of(g, p.count), v[k]);
      }
    }
    if (in_b) stages_b(v, p.lo, p.hi);
    // The transforms' canonical NaN (hadamard_quiet): needed after the last pass only, harmless
    // after the others (a NaN's payload never decides whether a butterfly's result is a NaN).
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[k][j] = hadamard_quiet(v[k][j]);
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const uint32_t t = in_b ? 4 * tid + 1024 * k : 4 * lane + 128 * k + 1024 * warp;
      const uint64_t g = element_of(p, base, t);
      store(g, valid_of(g, p.count), v[k]);
    }
    if (in_a && in_b) __syncthreads();  // the exchange is rewritten by the next tile
  }
  store.finish();
}

// --- loads: what precedes the butterflies --------------------------------------------------------

// A plain read, optionally with the signs D of a forward randomized transform.
struct LoadArray {
  const float* in;
  bool vec;
  bool signs;
  RngKey key;
  uint64_t index_base;
  __device__ void set_gate(float) {}
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) const {
    load4(in, g, n, vec, v);
    if (signs) apply_signs4(key, index_base + g, v);
  }
};

// THC's load_scaled + signs: x_i 2^exponent for i < elements, 0 for the padding, then D (index i).
// With a gate, exponent = -floor_log2(max |x|) (plan_local's frame).
struct LoadScaled {
  const float* x;
  uint64_t elements;
  bool vec;
  int exponent;
  RngKey key;
  __device__ void set_gate(float a) { exponent = -floor_log2(a); }
  __device__ void operator()(uint64_t g, uint32_t, Group& v) const {
    load4(x, g, valid_of(g, elements), vec, v);
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j)
      if (g + j < elements) v[j] = scale_pow2_x86(v[j], exponent);
    apply_signs4(key, g, v);
  }
};

// THC's finish: the lattice value sum * step - ranks * m of each integer sum.
struct LoadLatticeValue {
  const float* sums;
  bool vec;
  float step;
  float ranks_m;  // fl(ranks * m), as thc_lattice_value() computes it
  __device__ void set_gate(float) {}
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) const {
    load4(sums, g, n, vec, v);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = x86_sub(x86_mul(v[j], step), ranks_m);
  }
};

// --- stores: what follows the butterflies -------------------------------------------------------

// A pass that is not the last: the butterflies' results as they are.
struct StoreArray {
  float* out;
  bool vec;
  __device__ void finish() {}
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) const { store4(out, g, n, vec, v); }
};

// The last pass of a transform: the scale, then (inverse randomized) the signs D.
struct StoreScaled {
  float* out;
  bool vec;
  float scale;
  bool signs;
  RngKey key;
  uint64_t index_base;
  __device__ void finish() {}
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = x86_mul(v[j], scale);
    if (signs) apply_signs4(key, index_base + g, v);
    store4(out, g, n, vec, v);
  }
};

// The last pass of THC's prepare: the scale, then the lattice code of each element (rounding draw
// uniform_at(key, i)), stored as an fp32 integer.
struct StoreCodes {
  float* out;
  bool vec;
  float scale;
  float m;
  float inv_step;
  uint32_t levels;
  RngKey key;
  __device__ void finish() {}
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) const {
    uint32_t w[4];
    philox_words4(key, g, w);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float y = x86_mul(v[j], scale);
      v[j] = static_cast<float>(thc_lattice_code(y, m, inv_step, levels, u32_to_unit_float(w[j])));
    }
    store4(out, g, n, vec, v);
  }
};

// The last pass of THC's finish: the scale, the signs D (index i), 2^k, and only i < elements kept.
struct StoreFinish {
  float* out;
  uint64_t elements;
  bool vec;
  float scale;
  int k;
  RngKey key;
  __device__ void finish() {}
  __device__ void operator()(uint64_t g, uint32_t, Group& v) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = x86_mul(v[j], scale);
    apply_signs4(key, g, v);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = scale_pow2_x86(v[j], k);
    store4(out, g, valid_of(g, elements), vec, v);
  }
};

// The last pass of plan_local's rotation: the scale, then the maximum instead of a store; each CTA
// leaves its key in partials[blockIdx.x].
struct StoreMax {
  uint64_t* partials;
  float scale;
  uint64_t key = 0;
  __device__ void operator()(uint64_t g, uint32_t n, Group& v) {
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j)
      if (j < n) key = key_max(key, abs_key(x86_mul(v[j], scale), g + j));
  }
  __device__ void finish() {
    const uint64_t k = cta_key_max(key);
    if (threadIdx.x == 0) partials[blockIdx.x] = k;
  }
};

// --- max |x| -----------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    max_abs_partial_kernel(const float* __restrict__ x, uint64_t count, bool vec, uint64_t* __restrict__ partials) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t key = 0, head = 0;
  if (vec) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
    head = count / 4 * 4;
    for (uint64_t i = tid; i < count / 4; i += stride) {
      const float4 q = x4[i];
      key = key_max(key, key_max(key_max(abs_key(q.x, 4 * i), abs_key(q.y, 4 * i + 1)),
                                 key_max(abs_key(q.z, 4 * i + 2), abs_key(q.w, 4 * i + 3))));
    }
  }
  for (uint64_t i = head + tid; i < count; i += stride) key = key_max(key, abs_key(x[i], i));
  key = cta_key_max(key);
  if (threadIdx.x == 0) partials[blockIdx.x] = key;
}

// *out = the value of the largest of partials[0, n) (a NaN read from x).
__global__ void __launch_bounds__(kThreads)
    max_abs_final_kernel(const uint64_t* __restrict__ partials, unsigned n, const float* __restrict__ x,
                         float* __restrict__ out) {
  uint64_t key = 0;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) key = key_max(key, partials[i]);
  key = cta_key_max(key);
  if (threadIdx.x == 0) *out = key_value(key, x);
}

// plan_local's entry from max |x| (*amax) and the rotated maximum (partials[0, n)), as the CPU
// computes it in double: rotated max 2^e / divisor, rounded to fp32 and then up.
__global__ void __launch_bounds__(kThreads)
    thc_entry_kernel(const uint64_t* __restrict__ partials, unsigned n, const float* __restrict__ amax,
                     double divisor, float* __restrict__ entry) {
  const float a = *amax;
  const bool rotated = a > 0.0f && a <= FLT_MAX;
  uint64_t key = 0;
  if (rotated)
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) key = key_max(key, partials[i]);
  key = cta_key_max(key);
  if (threadIdx.x != 0) return;
  if (!rotated) {
    *entry = a;
    return;
  }
  const double value = ldexp(static_cast<double>(key_value(key, nullptr)), floor_log2(a)) / divisor;
  float f = __double2float_rn(value);
  if (static_cast<double>(f) < value) f = nextafterf(f, INFINITY);
  *entry = f;
}

__global__ void __launch_bounds__(kThreads) fill_kernel(float* __restrict__ out, uint64_t count, float value) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = value;
}

// --- the wire ----------------------------------------------------------------------------------

// Up to 16 bytes at p, little-endian, into (lo, hi); word loads where p's alignment allows.
__device__ __forceinline__ void load_le(const uint8_t* p, uint32_t n, uint64_t& lo, uint64_t& hi) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  lo = 0;
  hi = 0;
  if (n == 16 && a % 16 == 0) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    lo = q.x | static_cast<uint64_t>(q.y) << 32;
    hi = q.z | static_cast<uint64_t>(q.w) << 32;
  } else if (n == 8 && a % 8 == 0) {
    lo = *reinterpret_cast<const uint64_t*>(p);
  } else if (n % 4 == 0 && a % 4 == 0) {
    for (uint32_t w = 0; w < n / 4; ++w) {
      const uint64_t word = reinterpret_cast<const uint32_t*>(p)[w];
      if (w < 2) {
        lo |= word << (32 * w);
      } else {
        hi |= word << (32 * (w - 2));
      }
    }
  } else {
    for (uint32_t b = 0; b < n; ++b) {
      if (b < 8) {
        lo |= static_cast<uint64_t>(p[b]) << (8 * b);
      } else {
        hi |= static_cast<uint64_t>(p[b]) << (8 * (b - 8));
      }
    }
  }
}

__device__ __forceinline__ void store_le(uint8_t* p, uint32_t n, uint64_t lo, uint64_t hi) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 16 && a % 16 == 0) {
    *reinterpret_cast<uint4*>(p) = make_uint4(static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                                              static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32));
  } else if (n == 8 && a % 8 == 0) {
    *reinterpret_cast<uint64_t*>(p) = lo;
  } else if (n % 4 == 0 && a % 4 == 0) {
    for (uint32_t w = 0; w < n / 4; ++w)
      reinterpret_cast<uint32_t*>(p)[w] = static_cast<uint32_t>(w < 2 ? lo >> (32 * w) : hi >> (32 * (w - 2)));
  } else {
    for (uint32_t b = 0; b < n; ++b) p[b] = static_cast<uint8_t>(b < 8 ? lo >> (8 * b) : hi >> (8 * (b - 8)));
  }
}

// Field j (< 8) of `bits` bits of the 128-bit stream (lo, hi).
__device__ __forceinline__ uint32_t field_of(uint64_t lo, uint64_t hi, uint32_t j, uint32_t bits) {
  const uint32_t at = j * bits;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  if (at >= 64) return static_cast<uint32_t>((hi >> (at - 64)) & mask);
  if (at + bits <= 64) return static_cast<uint32_t>((lo >> at) & mask);
  return static_cast<uint32_t>(((lo >> at) | (hi << (64 - at))) & mask);
}

__device__ __forceinline__ void put_field(uint64_t& lo, uint64_t& hi, uint32_t j, uint32_t bits, uint32_t field) {
  const uint32_t at = j * bits;
  const uint64_t f = field;
  if (at < 64) lo |= f << at;
  if (at + bits > 64) hi |= at >= 64 ? f << (at - 64) : f >> (64 - at);
}

// The field of x as thc_pack() stores it; a value it would reject saturates and is counted.
__device__ __forceinline__ uint32_t field_for(float v, float top, uint32_t& bad) {
  if (v >= 0.0f && v <= top && v == floorf(v)) return static_cast<uint32_t>(v);
  ++bad;
  return !(v >= 0.0f) ? 0u : v > top ? static_cast<uint32_t>(top) : static_cast<uint32_t>(v);
}

enum class WireOp { kPack, kUnpack, kUnpackAccumulate, kUnpackAccumulatePack };

struct WireArgs {
  const float* x;    // kPack: the values
  const uint8_t* in; // the fields read
  float* f;          // kUnpack: the output; accumulating ops: the accumulator
  uint8_t* out;      // the fields written
  uint64_t count;
  uint32_t bits;
  bool float_vec;    // the float array is 16-byte aligned
  uint64_t* overflows;
};

// One thread per unit of 8 fields (`bits` whole bytes of the stream), grid-stride.
template <WireOp kOp>
__global__ void __launch_bounds__(kThreads) thc_wire_kernel(const WireArgs a) {
  const uint32_t bits = a.bits;
  const uint64_t units = ceil_div(a.count, 8), total = thc_bytes(a.count, bits);
  const float top = static_cast<float>((1u << bits) - 1u);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  uint32_t bad = 0;
  for (uint64_t u = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const uint64_t first = 8 * u, byte0 = u * bits;
    const uint32_t n = a.count - first < 8 ? static_cast<uint32_t>(a.count - first) : 8u;
    const uint32_t nbytes = total - byte0 < bits ? static_cast<uint32_t>(total - byte0) : bits;
    Group v[2];
    if constexpr (kOp == WireOp::kPack) {
      load4(a.x, first, n, a.float_vec, v[0]);
      load4(a.x, first + 4, n > 4 ? n - 4 : 0, a.float_vec, v[1]);
    } else {
      uint64_t lo, hi;
      load_le(a.in + byte0, nbytes, lo, hi);
      if constexpr (kOp != WireOp::kUnpack) {
        load4(a.f, first, n, a.float_vec, v[0]);
        load4(a.f, first + 4, n > 4 ? n - 4 : 0, a.float_vec, v[1]);
      }
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j) {
        const float d = static_cast<float>(field_of(lo, hi, j, bits));
        if constexpr (kOp == WireOp::kUnpack) {
          v[j / 4][j % 4] = d;
        } else {
          v[j / 4][j % 4] = accumulate(v[j / 4][j % 4], d);
        }
      }
      store4(a.f, first, n, a.float_vec, v[0]);
      store4(a.f, first + 4, n > 4 ? n - 4 : 0, a.float_vec, v[1]);
    }
    if constexpr (kOp == WireOp::kPack || kOp == WireOp::kUnpackAccumulatePack) {
      uint64_t lo = 0, hi = 0;
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j)
        if (j < n) put_field(lo, hi, j, bits, field_for(v[j / 4][j % 4], top, bad));
      store_le(a.out + byte0, nbytes, lo, hi);
    }
  }
  if (bad != 0 && a.overflows != nullptr) atomicAdd(reinterpret_cast<unsigned long long*>(a.overflows), bad);
}

// --- host side ---------------------------------------------------------------------------------

uint32_t log2_of(uint64_t pow2) {
  uint32_t l = 0;
  while ((uint64_t{1} << l) < pow2) ++l;
  return l;
}

// The passes of a transform of `count` elements in blocks of `block`.
struct PassPlan {
  uint32_t passes = 0;
  PassGeom geom[3];
};

PassPlan plan_passes(uint64_t count, uint64_t block) {
  const uint32_t l = log2_of(block);
  PassPlan plan;
  plan.geom[0] = {count, ceil_div(count, kTile), kTileBits, kTileBits, 0, l < kTileBits ? l : kTileBits};
  plan.passes = 1;
  if (l <= kTileBits) return plan;
  const uint32_t high = l - kTileBits;
  const uint32_t first = high <= kMaxPassStages ? high : (high + 1) / 2;
  uint32_t s = kTileBits;
  for (const uint32_t r : {first, high - first}) {
    if (r == 0) continue;
    plan.geom[plan.passes++] = {count, count / kTile, kTileBits - r, s, kTileBits - r, kTileBits};
    s += r;
  }
  return plan;
}

unsigned pass_grid(const PassGeom& g, unsigned max_grid) {
  return static_cast<unsigned>(std::clamp<uint64_t>(g.tiles, 1, max_grid));
}

template <class Load, class Store>
void launch_pass(const PassGeom& g, const float* gate, const Load& load, const Store& store, unsigned max_grid,
                 CudaStream stream) {
  transform_pass_kernel<<<pass_grid(g, max_grid), kThreads, 0, stream>>>(g, gate, load, store);
}

// Runs the passes of `plan`: the first loads with `first`, later ones read `work` (in place); the
// last stores with `last`, earlier ones into `work`. The last pass's grid is at most `last_grid`.
template <class First, class Last>
void run_passes(const PassPlan& plan, const float* gate, const First& first, float* work, const Last& last,
                unsigned last_grid, CudaStream stream) {
  const bool vec = aligned(work, 16);
  const LoadArray plain{work, vec, false, RngKey{}, 0};
  const StoreArray keep{work, vec};
  for (uint32_t i = 0; i < plan.passes; ++i) {
    const bool is_first = i == 0, is_last = i + 1 == plan.passes;
    if (is_first && is_last) {
      launch_pass(plan.geom[i], gate, first, last, last_grid, stream);
    } else if (is_first) {
      launch_pass(plan.geom[i], gate, first, keep, static_cast<unsigned>(kMaxGrid), stream);
    } else if (is_last) {
      launch_pass(plan.geom[i], gate, plain, last, last_grid, stream);
    } else {
      launch_pass(plan.geom[i], gate, plain, keep, static_cast<unsigned>(kMaxGrid), stream);
    }
  }
}

Status check_block(uint64_t block, const char* what) {
  if (!is_power_of_two(block) || block > kHadamardCudaMaxBlock) {
    return invalid_argument(std::string(what) + " block " + std::to_string(block) +
                            " is not a power of two in [1, 2^24]");
  }
  return ok_status();
}

enum class Transform { kPlain, kRandomized, kInverse };

Status launch_transform(const float* d_in, uint64_t count, uint64_t block, Transform kind, const RngKey& key,
                        uint64_t index_base, float* d_out, CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(hadamard_cuda_can_implement(count, block).with_context(name));
  if (count == 0) return ok_status();
  if (d_in == nullptr || d_out == nullptr) return null_pointer(name);
  const PassPlan plan = plan_passes(count, block);
  const LoadArray first{d_in, aligned(d_in, 16), kind == Transform::kRandomized, key, index_base};
  const StoreScaled last{d_out, aligned(d_out, 16), hadamard_scale(block), kind == Transform::kInverse, key,
                         index_base};
  run_passes(plan, nullptr, first, d_out, last, static_cast<unsigned>(kMaxGrid), stream);
  return launch_status(name);
}

Status check_lattice(const ThcLattice& l, const char* name) {
  if (l.kind != ThcLattice::Kind::kValid) return ok_status();
  if (!(l.m > 0.0f) || !(l.m <= FLT_MAX) || !(l.step > 0.0f) || !(l.inv_step > 0.0f) || l.levels < 1 ||
      l.levels > 65535 || l.k < -250 || l.k > 250) {
    return invalid_argument(std::string(name) + ": not a committed THC lattice");
  }
  return ok_status();
}

template <WireOp kOp>
Status run_wire(WireArgs args, CudaStream stream, const char* name) {
  CCSIM_RETURN_IF_ERROR(thc_wire_cuda_can_implement(args.count, args.bits).with_context(name));
  if (args.count == 0) return ok_status();
  const bool reads_x = kOp == WireOp::kPack, reads_in = kOp != WireOp::kPack;
  const bool writes_f = kOp != WireOp::kPack, writes_out = kOp == WireOp::kPack || kOp == WireOp::kUnpackAccumulatePack;
  if ((reads_x && args.x == nullptr) || (reads_in && args.in == nullptr) || (writes_f && args.f == nullptr) ||
      (writes_out && args.out == nullptr)) {
    return null_pointer(name);
  }
  args.float_vec = aligned(reads_x ? static_cast<const void*>(args.x) : args.f, 16);
  thc_wire_kernel<kOp><<<grid_for(ceil_div(args.count, 8), kThreads), kThreads, 0, stream>>>(args);
  return launch_status(name);
}

}  // namespace

uint32_t hadamard_cuda_passes(uint64_t block) { return plan_passes(block, block).passes; }

Status hadamard_cuda_can_implement(uint64_t count, uint64_t block) {
  CCSIM_RETURN_IF_ERROR(check_block(block, "Hadamard"));
  if (count % block != 0) {
    return invalid_argument("Hadamard: " + std::to_string(count) + " elements is not a multiple of the block " +
                            std::to_string(block));
  }
  return ok_status();
}

Status hadamard_transform_cuda(const float* d_in, uint64_t count, uint64_t block, float* d_out, CudaStream stream) {
  return launch_transform(d_in, count, block, Transform::kPlain, RngKey{}, 0, d_out, stream, "hadamard_transform_cuda");
}

Status randomized_hadamard_transform_cuda(const float* d_in, uint64_t count, uint64_t block, const RngKey& key,
                                          uint64_t index_base, float* d_out, CudaStream stream) {
  return launch_transform(d_in, count, block, Transform::kRandomized, key, index_base, d_out, stream,
                          "randomized_hadamard_transform_cuda");
}

Status randomized_hadamard_inverse_cuda(const float* d_in, uint64_t count, uint64_t block, const RngKey& key,
                                        uint64_t index_base, float* d_out, CudaStream stream) {
  return launch_transform(d_in, count, block, Transform::kInverse, key, index_base, d_out, stream,
                          "randomized_hadamard_inverse_cuda");
}

uint64_t max_abs_cuda_temp_bytes() { return kPartialBytes; }

Status max_abs_cuda(const float* d_x, uint64_t count, void* d_temp, uint64_t temp_bytes, float* d_out,
                    CudaStream stream) {
  constexpr const char* kName = "max_abs_cuda";
  if (d_out == nullptr) return null_pointer(kName);
  if (count == 0) return cuda_status(cudaMemsetAsync(d_out, 0, sizeof(float), stream), kName);
  if (d_x == nullptr || d_temp == nullptr) return null_pointer(kName);
  if (temp_bytes < max_abs_cuda_temp_bytes() || !aligned(d_temp, 16)) {
    return invalid_argument(std::string(kName) + ": d_temp must hold max_abs_cuda_temp_bytes() bytes, 16-aligned");
  }
  auto* partials = static_cast<uint64_t*>(d_temp);
  const bool vec = aligned(d_x, 16);
  const unsigned grid = grid_for(vec ? count / 4 + count % 4 : count, kThreads * 4);
  const unsigned g = grid < kPartials ? grid : kPartials;
  max_abs_partial_kernel<<<g, kThreads, 0, stream>>>(d_x, count, vec, partials);
  max_abs_final_kernel<<<1, kThreads, 0, stream>>>(partials, g, d_x, d_out);
  return launch_status(kName);
}

Status thc_cuda_can_implement(uint64_t /*count*/, uint64_t block) { return check_block(block, "THC rotation"); }

uint64_t thc_plan_local_cuda_temp_bytes(uint64_t count, uint64_t block) {
  const uint64_t work = hadamard_cuda_passes(block) > 1 ? thc_padded_elements(count, block) * sizeof(float) : 0;
  return kPartialBytes + kPlanScalarBytes + work;
}

Status thc_plan_local_cuda(const float* d_x, uint64_t count, uint64_t block, const RngKey& sign_key, void* d_temp,
                           uint64_t temp_bytes, float* d_entry, CudaStream stream) {
  constexpr const char* kName = "thc_plan_local_cuda";
  CCSIM_RETURN_IF_ERROR(thc_cuda_can_implement(count, block).with_context(kName));
  if (d_entry == nullptr) return null_pointer(kName);
  if (count == 0) return cuda_status(cudaMemsetAsync(d_entry, 0, sizeof(float), stream), kName);
  if (d_x == nullptr || d_temp == nullptr) return null_pointer(kName);
  if (temp_bytes < thc_plan_local_cuda_temp_bytes(count, block) || !aligned(d_temp, 16)) {
    return invalid_argument(std::string(kName) +
                            ": d_temp must hold thc_plan_local_cuda_temp_bytes() bytes, 16-aligned");
  }
  auto* partials = static_cast<uint64_t*>(d_temp);
  auto* amax = reinterpret_cast<float*>(static_cast<uint8_t*>(d_temp) + kPartialBytes);
  auto* work = reinterpret_cast<float*>(static_cast<uint8_t*>(d_temp) + kPartialBytes + kPlanScalarBytes);
  CCSIM_RETURN_IF_ERROR(max_abs_cuda(d_x, count, d_temp, kPartialBytes, amax, stream).with_context(kName));
  const uint64_t padded = thc_padded_elements(count, block);
  const PassPlan plan = plan_passes(padded, block);
  const LoadScaled first{d_x, count, aligned(d_x, 16), 0, sign_key};
  const StoreMax last{partials, hadamard_scale(block)};
  run_passes(plan, amax, first, work, last, kPartials, stream);
  const unsigned n = pass_grid(plan.geom[plan.passes - 1], kPartials);
  // ThcCompressor::entry_divisor: 2^(ceil(log2(B) / 2) + 1).
  const double divisor = std::ldexp(1.0, static_cast<int>((log2_of(block) + 1) / 2 + 1));
  thc_entry_kernel<<<1, kThreads, 0, stream>>>(partials, n, amax, divisor, d_entry);
  return launch_status(kName);
}

Status thc_prepare_cuda(const float* d_x, uint64_t count, uint64_t block, const ThcLattice& lattice,
                        const RngKey& sign_key, const RngKey& code_key, float* d_out, CudaStream stream) {
  constexpr const char* kName = "thc_prepare_cuda";
  CCSIM_RETURN_IF_ERROR(thc_cuda_can_implement(count, block).with_context(kName));
  CCSIM_RETURN_IF_ERROR(check_lattice(lattice, kName));
  if (count == 0) return ok_status();
  const uint64_t padded = thc_padded_elements(count, block);
  if (d_out == nullptr) return null_pointer(kName);
  if (lattice.kind != ThcLattice::Kind::kValid) {
    return cuda_status(cudaMemsetAsync(d_out, 0, padded * sizeof(float), stream), kName);
  }
  if (d_x == nullptr) return null_pointer(kName);
  const bool vec = aligned(d_out, 16);
  const LoadScaled first{d_x, count, aligned(d_x, 16), -lattice.k, sign_key};
  const StoreCodes last{d_out, vec, hadamard_scale(block), lattice.m, lattice.inv_step, lattice.levels, code_key};
  run_passes(plan_passes(padded, block), nullptr, first, d_out, last, static_cast<unsigned>(kMaxGrid), stream);
  return launch_status(kName);
}

Status thc_finish_cuda(float* d_reduced, uint64_t count, uint64_t block, const ThcLattice& lattice, uint32_t ranks,
                       const RngKey& sign_key, float* d_out, CudaStream stream) {
  constexpr const char* kName = "thc_finish_cuda";
  CCSIM_RETURN_IF_ERROR(thc_cuda_can_implement(count, block).with_context(kName));
  CCSIM_RETURN_IF_ERROR(check_lattice(lattice, kName));
  if (count == 0) return ok_status();
  if (d_out == nullptr) return null_pointer(kName);
  if (lattice.kind == ThcLattice::Kind::kZero) {
    return cuda_status(cudaMemsetAsync(d_out, 0, count * sizeof(float), stream), kName);
  }
  if (lattice.kind == ThcLattice::Kind::kNonFinite) {
    fill_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(d_out, count, bits_to_float(0x7FC00000u));
    return launch_status(kName);
  }
  if (d_reduced == nullptr) return null_pointer(kName);
  const uint64_t padded = thc_padded_elements(count, block);
  const float ranks_m = static_cast<float>(ranks) * lattice.m;
  const LoadLatticeValue first{d_reduced, aligned(d_reduced, 16), lattice.step, ranks_m};
  const StoreFinish last{d_out, count, aligned(d_out, 16), hadamard_scale(block), lattice.k, sign_key};
  run_passes(plan_passes(padded, block), nullptr, first, d_reduced, last, static_cast<unsigned>(kMaxGrid), stream);
  return launch_status(kName);
}

Status thc_wire_cuda_can_implement(uint64_t /*count*/, uint32_t bits) {
  if (bits != 8 && bits != 12 && bits != 16) {
    return invalid_argument("THC aggregation fields of " + std::to_string(bits) + " bits (8, 12 or 16)");
  }
  return ok_status();
}

Status thc_pack_cuda(const float* d_x, uint64_t count, uint32_t bits, uint8_t* d_out, uint64_t* d_overflows,
                     CudaStream stream) {
  return run_wire<WireOp::kPack>({d_x, nullptr, nullptr, d_out, count, bits, false, d_overflows}, stream,
                                 "thc_pack_cuda");
}

Status thc_unpack_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_out, CudaStream stream) {
  return run_wire<WireOp::kUnpack>({nullptr, d_in, d_out, nullptr, count, bits, false, nullptr}, stream,
                                   "thc_unpack_cuda");
}

Status thc_unpack_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_acc,
                                  CudaStream stream) {
  return run_wire<WireOp::kUnpackAccumulate>({nullptr, d_in, d_acc, nullptr, count, bits, false, nullptr}, stream,
                                             "thc_unpack_accumulate_cuda");
}

Status thc_unpack_accumulate_pack_cuda(const uint8_t* d_in, uint64_t count, uint32_t bits, float* d_acc,
                                       uint8_t* d_out, uint64_t* d_overflows, CudaStream stream) {
  return run_wire<WireOp::kUnpackAccumulatePack>({nullptr, d_in, d_acc, d_out, count, bits, false, d_overflows},
                                                 stream, "thc_unpack_accumulate_pack_cuda");
}

}  // namespace ccsim::kern
