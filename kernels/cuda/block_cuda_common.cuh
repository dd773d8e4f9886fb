#pragma once
// Internal to kernels/cuda/block_cuda_*.cu: launch helpers, the CPU's NaN rules for fp32
// arithmetic, group reductions, the 32-point Hadamard butterflies of a warp, and the packing of
// sub-byte codes by groups of lanes. Not part of the public API (kernels/cuda/block_cuda.hpp).
//
// Thread layout shared by the block kernels (MX blocks, quantization groups, QSGD buckets): a
// "group" of kGroup threads (a power of two: 1..32 lanes of one warp, or the whole CTA of
// kThreads) owns one block at a time; groups stride over the blocks. Element k of a block
// (0 <= k < block) belongs to lane k % kGroup at step t = k / kGroup, so a warp reads 32
// consecutive floats per step (coalesced). Every loop that contains a shuffle or a barrier runs
// the same trip count on every thread of the CTA (blocks past the end and elements past a block's
// end take part with neutral values), so full-mask shuffles and __syncthreads are safe.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/float_bits.hpp"
#include "kernels/pack/bitpack.hpp"
#include "kernels/transform/hadamard.hpp"

namespace ccsim::kern::cuda_detail {

inline constexpr int kThreads = 256;        // threads per CTA for every kernel here
inline constexpr uint64_t kMaxGrid = 4096;  // grid-stride loops cover the rest
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
// Steps of a block whose values a lane keeps in registers between the passes of an encoder
// (block maximum, then codes); later steps re-read them from global memory (L2).
inline constexpr uint32_t kCacheSteps = 8;

CCSIM_HD uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Elements of the block starting at `begin` of a chunk of `count`: min(count - begin, block).
CCSIM_HD uint32_t block_length(uint64_t count, uint64_t begin, uint32_t block) {
  return count - begin < block ? static_cast<uint32_t>(count - begin) : block;
}

// Steps of kGroup elements that cover the longest block of a chunk (a chunk shorter than one
// block needs fewer than the block size suggests). The same for every thread of a launch.
template <int kGroup>
CCSIM_HD uint32_t block_steps(uint64_t count, uint32_t block) {
  return static_cast<uint32_t>(ceil_div(count < block ? count : block, kGroup));
}

inline unsigned grid_for(uint64_t work_items, uint64_t items_per_cta) {
  return static_cast<unsigned>(std::clamp<uint64_t>(ceil_div(work_items, items_per_cta), 1, kMaxGrid));
}

inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
// A pointer an op does not use (nullptr) does not stand in the way of vector access.
inline bool aligned_or_null(const void* p, uintptr_t bytes) { return p == nullptr || aligned(p, bytes); }

inline Status launch_status(const char* op) { return cuda_status(cudaGetLastError(), op); }

inline Status null_pointer(const char* op) { return invalid_argument(std::string(op) + ": null device pointer"); }

// Threads per block: the next power of two up to a warp; a warp up to 2048 elements (64 steps);
// the whole CTA above (as quant_cuda.cu's block-int8 encoder).
inline int group_threads(uint32_t block) {
  if (block > 2048) return kThreads;
  int g = 1;
  while (g < 32 && static_cast<uint32_t>(g) < block) g *= 2;
  return g;
}

// Elements per packing unit: the largest power of two <= 8 dividing `block`. When block * bits is
// a multiple of 8 (every format here requires it), a unit's codes fill whole bytes and start on a
// byte, so the lanes of one unit write bytes no other unit touches.
CCSIM_HD uint32_t unit_elements(uint32_t block) {
  return block % 8 == 0 ? 8u : block % 4 == 0 ? 4u : block % 2 == 0 ? 2u : 1u;
}

// Calls launch(std::integral_constant<int, kGroup>{}) with kGroup = group_threads(block).
template <class Launch>
void dispatch_group(uint32_t block, Launch&& launch) {
  switch (group_threads(block)) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    case 8: launch(std::integral_constant<int, 8>{}); break;
    case 16: launch(std::integral_constant<int, 16>{}); break;
    case 32: launch(std::integral_constant<int, 32>{}); break;
    default: launch(std::integral_constant<int, kThreads>{}); break;
  }
}

// uniform_at(key, index), the same bits, selecting the Philox word with compares: indexing the
// block by `index & 3` would put it in local memory.
__device__ __forceinline__ float philox_uniform(const RngKey& key, uint64_t index) {
  const U32x4 r = philox_block(key, index >> 2);
  const uint32_t j = static_cast<uint32_t>(index & 3u);
  return u32_to_unit_float(j == 0 ? r.v[0] : j == 1 ? r.v[1] : j == 2 ? r.v[2] : r.v[3]);
}

// --- fp32 arithmetic with the CPU references' NaN results ----------------------------------------
//
// Non-NaN results are IEEE round-to-nearest on both sides (the _rn intrinsics are never contracted
// into an FMA). A NaN result differs: the GPU returns the canonical NaN 0x7FFFFFFF, while x86-64
// SSE, where the CPU references run, returns the first NaN operand (quieted), or the "default NaN"
// 0xFFC00000 (sign set) when an invalid operation (inf - inf, 0 * inf, inf / inf, 0 / 0) makes one
// from non-NaN operands. The sign of that NaN reaches the wire where a format keeps it (E4M3, E5M2
// and FP16 NaN codes), so every fp32 operation whose result can be encoded goes through these.
// When both operands are NaN, which one x86 returns is the compiler's operand order; the callers
// pass them in the order GCC emits (see the call sites).

__device__ __forceinline__ bool is_nan(float x) { return (__float_as_uint(x) & 0x7FFFFFFFu) > 0x7F800000u; }

__device__ __forceinline__ float x86_nan(float r, float a, float b) {
  if (!is_nan(r)) return r;
  if (is_nan(a)) return __uint_as_float(__float_as_uint(a) | 0x00400000u);
  if (is_nan(b)) return __uint_as_float(__float_as_uint(b) | 0x00400000u);
  return __uint_as_float(0xFFC00000u);
}

__device__ __forceinline__ float x86_add(float a, float b) { return x86_nan(__fadd_rn(a, b), a, b); }
__device__ __forceinline__ float x86_sub(float a, float b) { return x86_nan(__fsub_rn(a, b), a, b); }
__device__ __forceinline__ float x86_mul(float a, float b) { return x86_nan(__fmul_rn(a, b), a, b); }
__device__ __forceinline__ float x86_div(float a, float b) { return x86_nan(__fdiv_rn(a, b), a, b); }

// acc + v as the CPU's `acc[i] += v` computes it: GCC -O3 emits v as the first operand (checked
// on every decode-accumulate of kernels/quant/: acc = NaN_1 plus v = NaN_2 gives NaN_2).
__device__ __forceinline__ float accumulate(float acc, float v) { return x86_add(v, acc); }

// --- group reductions ----------------------------------------------------------------------------

// Combines `v` (a float, or a 64-bit key or count) over the kGroup threads of a group with the
// associative, commutative `op` (all threads get the result). Called by every thread of the CTA.
template <int kGroup, class Op, class T>
__device__ __forceinline__ T group_reduce(T v, Op op) {
  constexpr int kWidth = kGroup < 32 ? kGroup : 32;
  for (int off = kWidth / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, off));
  if constexpr (kGroup > 32) {
    static_assert(kGroup == kThreads, "a group larger than a warp is the whole CTA");
    __shared__ T warp_value[kThreads / 32];
    if (threadIdx.x % 32 == 0) warp_value[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_value[0];
    for (int w = 1; w < kThreads / 32; ++w) v = op(v, warp_value[w]);
    __syncthreads();  // warp_value is rewritten by the next block
  }
  return v;
}

// std::max(m, |v|) of the CPU loops, written as std::max is, (m < a) ? a : m: a NaN (quiet or
// signaling) leaves m unchanged, as a compare-and-select on both sides, so m is never NaN. The
// maximum of non-NaN values is exact, so any reduction order gives the CPU's value.
__device__ __forceinline__ float max_abs_step(float m, float v) {
  const float a = fabsf(v);
  return m < a ? a : m;
}

// Combines two partial maxima of max_abs_step (never NaN).
struct MaxOp {
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

// --- maxima as exact keys ------------------------------------------------------------------------
//
// max_abs() (kernels/stats/entropy.hpp) returns the largest |x|, or the first NaN in index order
// with its bits. As 64-bit keys, that result is the largest key whatever the reduction order:
// |x|'s bits (ordered as the magnitudes) for a number, and for a NaN a key above every number that
// is larger for a smaller index (the NaN itself is read back from the input by key_value).

inline constexpr uint64_t kNaNKeyBit = uint64_t{1} << 63;

// The key of x_i, element i of the array key_value() will read a NaN from.
__device__ __forceinline__ uint64_t abs_key(float x, uint64_t i) {
  const uint32_t u = __float_as_uint(x) & 0x7FFFFFFFu;
  return u > 0x7F800000u ? kNaNKeyBit | (~i & (kNaNKeyBit - 1)) : u;
}

__device__ __forceinline__ uint64_t key_max(uint64_t a, uint64_t b) { return a < b ? b : a; }

// The float a key stands for; a NaN key reads the NaN from x (nullptr: the canonical quiet NaN).
__device__ __forceinline__ float key_value(uint64_t key, const float* x) {
  if ((key & kNaNKeyBit) == 0) return __uint_as_float(static_cast<uint32_t>(key));
  return x != nullptr ? x[~key & (kNaNKeyBit - 1)] : __uint_as_float(0x7FC00000u);
}

// --- Hadamard ------------------------------------------------------------------------------------

// The operand order of the sum a + b of a butterfly (a = x[j], b = x[j + h], bit h of j clear) in
// the CPU loop a kernel matches, as its compiler emitted it: b_first(h, j) says whether element j
// of stage h is computed as b + a. The sum is the same number either way; the order decides which
// NaN a sum of two NaNs returns. The default: a + b throughout.
struct ButterflyAFirst {
  __device__ static constexpr bool b_first(unsigned /*h*/, unsigned /*j*/) { return false; }
};

// H_32 · (the values of the warp's 32 lanes, lane j holding element j): the butterflies of
// fwht_unnormalized(v, 32), stage h = 1, 2, ..., 16 pairing elements j and j + h (bit h of j
// clear) into (a + b, a - b) with a = x[j], b = x[j + h] (the sum's operands in the order `Order`
// gives), then one multiply by hadamard_scale(32). Each lane computes exactly the CPU's operation
// on the same operands, so the result is the same bit for bit. Called by all 32 lanes of the warp.
template <class Order = ButterflyAFirst>
__device__ __forceinline__ float warp_hadamard32(float v) {
  const unsigned lane = threadIdx.x % 32;
  for (unsigned h = 1; h < 32; h <<= 1) {
    const float other = __shfl_xor_sync(kFullMask, v, static_cast<int>(h));
    if ((lane & h) != 0) {
      v = x86_sub(other, v);
    } else {
      v = Order::b_first(h, lane) ? x86_add(other, v) : x86_add(v, other);
    }
  }
  return x86_mul(v, hadamard_scale(32));
}

// --- sub-byte code packing -----------------------------------------------------------------------

// The codes of a unit of `unit` consecutive lanes (unit a power of two dividing the group, lane l
// holding element l of the unit in the low bits first, as kernels/pack/bitpack.hpp orders them),
// OR-ed into one little-endian word held by every lane of the unit. Called by all lanes of the
// warp with the same `unit`.
__device__ __forceinline__ uint64_t gather_unit(uint32_t code, uint32_t unit, uint32_t bits) {
  const uint32_t slot = (threadIdx.x % 32) % unit;
  uint64_t word = static_cast<uint64_t>(code) << (slot * bits);
  for (uint32_t off = 1; off < unit; off <<= 1) word |= __shfl_xor_sync(kFullMask, word, static_cast<int>(off));
  return word;
}

// Stores the low `n` (1..8) bytes of `word` at p, little-endian, in one store when p is aligned.
__device__ __forceinline__ void store_bytes(uint8_t* p, uint64_t word, uint32_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 8 && a % 8 == 0) {
    *reinterpret_cast<uint64_t*>(p) = word;
  } else if (n == 4 && a % 4 == 0) {
    *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(word);
  } else if (n == 2 && a % 2 == 0) {
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(word);
  } else {
    for (uint32_t j = 0; j < n; ++j) p[j] = static_cast<uint8_t>(word >> (8 * j));
  }
}

// Stores the word of the packing unit whose first element is element `first` of the chunk (a
// multiple of the unit): min(rest, unit) codes of `bits` bits, i.e. their packed bytes, from bit
// first * bits (a byte boundary). `rest` counts the block's elements from `first` on.
__device__ __forceinline__ void store_unit(uint8_t* codes, uint64_t first, uint64_t word, uint32_t rest, uint32_t unit,
                                           uint32_t bits) {
  const uint32_t valid = rest < unit ? rest : unit;
  store_bytes(codes + first * bits / 8, word, static_cast<uint32_t>(packed_bytes(valid, bits)));
}

// An fp32 stored at any byte address (a block's scale in a wire buffer).
__device__ __forceinline__ float load_f32(const uint8_t* p) {
  if (reinterpret_cast<uintptr_t>(p) % 4 == 0) return *reinterpret_cast<const float*>(p);
  uint32_t u = 0;
  for (int j = 0; j < 4; ++j) u |= static_cast<uint32_t>(p[j]) << (8 * j);
  return __uint_as_float(u);
}

__device__ __forceinline__ void store_f32(uint8_t* p, float v) { store_bytes(p, __float_as_uint(v), 4); }

// --- elementwise 16-bit codecs (BF16, FP16) ------------------------------------------------------

enum class Elem16Op : uint8_t { kEncode, kDecode, kDecodeAccumulate, kFused };

// A codec is a type with static __device__ `uint16_t encode(float)` and `float decode(uint16_t)`.
// One element: `f` is the float (x, the decoded output or acc), `h` the code (in; out for encode
// and fused). Decoded values are added as the CPU's `acc[i] += v` (accumulate(), its NaN rules).
template <class Codec, Elem16Op kOp>
__device__ __forceinline__ void elem16_apply(float& f, uint16_t& h) {
  if constexpr (kOp == Elem16Op::kEncode) {
    h = Codec::encode(f);
  } else if constexpr (kOp == Elem16Op::kDecode) {
    f = Codec::decode(h);
  } else if constexpr (kOp == Elem16Op::kDecodeAccumulate) {
    f = accumulate(f, Codec::decode(h));
  } else {
    f = accumulate(f, Codec::decode(h));
    h = Codec::encode(f);
  }
}

// Elementwise, grid-stride; with kVec four elements per step through float4/ushort4 (the pointers
// used are aligned to them). Pointers: x (encode input), in (codes read), acc (floats written, and
// read by the accumulating ops), out (codes written).
template <class Codec, Elem16Op kOp, bool kVec>
__global__ void __launch_bounds__(kThreads)
    elem16_kernel(const float* __restrict__ x, const uint16_t* __restrict__ in, float* __restrict__ acc,
                uint16_t* __restrict__ out, uint64_t n) {
  constexpr bool kReadsCodes = kOp != Elem16Op::kEncode;
  constexpr bool kReadsAcc = kOp == Elem16Op::kDecodeAccumulate || kOp == Elem16Op::kFused;
  constexpr bool kWritesFloats = kOp != Elem16Op::kEncode;
  constexpr bool kWritesCodes = kOp == Elem16Op::kEncode || kOp == Elem16Op::kFused;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t head = 0;
  if constexpr (kVec) {
    head = n / 4 * 4;
    for (uint64_t v = tid; v < n / 4; v += stride) {
      float4 f{};
      ushort4 h{};
      if constexpr (kOp == Elem16Op::kEncode) f = reinterpret_cast<const float4*>(x)[v];
      if constexpr (kReadsAcc) f = reinterpret_cast<const float4*>(acc)[v];
      if constexpr (kReadsCodes) h = reinterpret_cast<const ushort4*>(in)[v];
      elem16_apply<Codec, kOp>(f.x, h.x);
      elem16_apply<Codec, kOp>(f.y, h.y);
      elem16_apply<Codec, kOp>(f.z, h.z);
      elem16_apply<Codec, kOp>(f.w, h.w);
      if constexpr (kWritesFloats) reinterpret_cast<float4*>(acc)[v] = f;
      if constexpr (kWritesCodes) reinterpret_cast<ushort4*>(out)[v] = h;
    }
  }
  for (uint64_t i = head + tid; i < n; i += stride) {
    float f = 0.0f;
    uint16_t h = 0;
    if constexpr (kOp == Elem16Op::kEncode) f = x[i];
    if constexpr (kReadsAcc) f = acc[i];
    if constexpr (kReadsCodes) h = in[i];
    elem16_apply<Codec, kOp>(f, h);
    if constexpr (kWritesFloats) acc[i] = f;
    if constexpr (kWritesCodes) out[i] = h;
  }
}

template <class Codec, Elem16Op kOp>
Status launch_elem16(const float* x, const uint16_t* in, float* acc, uint16_t* out, uint64_t count,
                     CudaStream stream, const char* name) {
  if (count == 0) return ok_status();
  const bool missing = kOp == Elem16Op::kEncode  ? x == nullptr || out == nullptr
                       : kOp == Elem16Op::kFused ? in == nullptr || acc == nullptr || out == nullptr
                                                 : in == nullptr || acc == nullptr;
  if (missing) return null_pointer(name);
  if (aligned_or_null(x, 16) && aligned_or_null(acc, 16) && aligned_or_null(in, 8) && aligned_or_null(out, 8)) {
    elem16_kernel<Codec, kOp, true>
        <<<grid_for(count / 4 + count % 4, kThreads), kThreads, 0, stream>>>(x, in, acc, out, count);
  } else {
    elem16_kernel<Codec, kOp, false><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x, in, acc, out, count);
  }
  return launch_status(name);
}

}  // namespace ccsim::kern::cuda_detail
