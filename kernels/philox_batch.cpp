#include "kernels/philox_batch.hpp"

#include <atomic>
#include <cstring>

#include "kernels/vector_rows.hpp"

namespace ccsim::kern {
namespace {

std::atomic<bool> g_force_portable{false};
std::atomic<bool> g_force_avx2{false};

// Whole blocks [index4, index4 + blocks) with the scalar generator.
void blocks_portable(const RngKey& key, uint64_t index4, uint64_t blocks, uint32_t* out) {
  for (uint64_t b = 0; b < blocks; ++b) std::memcpy(out + 4 * b, philox_block(key, index4 + b).v, 16);
}

#if defined(CCSIM_HAND_AVX2)
// The high halves of the 64-bit products a[l] * m for all eight 32-bit lanes (m the same in every
// lane); the low halves are one _mm256_mullo_epi32.
__attribute__((target("avx2"))) inline __m256i mul_hi(__m256i a, __m256i m) {
  const __m256i even = _mm256_mul_epu32(a, m);                         // lanes 0,2,4,6 as 64-bit
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);  // lanes 1,3,5,7 as 64-bit
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// The ten rounds' keys of Philox4x32-10, broadcast once per batch of calls.
struct RoundKeys {
  __m256i k0[10], k1[10];
};

__attribute__((target("avx2"))) RoundKeys round_keys(uint32_t k0, uint32_t k1) {
  RoundKeys k;
  for (int r = 0; r < 10; ++r) {
    k.k0[r] = _mm256_set1_epi32(static_cast<int>(k0));
    k.k1[r] = _mm256_set1_epi32(static_cast<int>(k1));
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return k;
}

// Philox4x32-10 of N groups of eight counters held word-wise (lane l of c[g][0..3] is counter l
// of group g); the groups' rounds interleave, so that their multiplies overlap.
template <int N>
__attribute__((target("avx2"))) inline void philox8(__m256i (&c)[N][4], const RoundKeys& k) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int r = 0; r < 10; ++r)
    for (int g = 0; g < N; ++g) {
      const __m256i hi0 = mul_hi(c[g][0], m0), lo0 = _mm256_mullo_epi32(c[g][0], m0);
      const __m256i hi1 = mul_hi(c[g][2], m1), lo1 = _mm256_mullo_epi32(c[g][2], m1);
      c[g][0] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[g][1]), k.k0[r]);
      c[g][2] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[g][3]), k.k1[r]);
      c[g][1] = lo1;
      c[g][3] = lo0;
    }
}

// The high and low halves of the 64-bit products a[l] * m for all eight lanes with AVX-512VL: each
// comes out of the two even-lane products by one masked dword shuffle (hi: odd lanes from o, whose
// high dwords sit there, even lanes from e's high dwords, DDBB = dwords 1, 1, 3, 3; lo: even lanes
// from e, odd lanes from o's low dwords, CCAA = dwords 0, 0, 2, 2).
__attribute__((target("avx2,avx512f,avx512vl"))) inline void mul_split_vl(__m256i a, __m256i m, __m256i& hi,
                                                                          __m256i& lo) {
  constexpr __mmask8 kOdd = 0xAA, kEven = 0x55;
  const __m256i e = _mm256_mul_epu32(a, m), o = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_mask_shuffle_epi32(o, kEven, e, _MM_PERM_DDBB);
  lo = _mm256_mask_shuffle_epi32(e, kOdd, o, _MM_PERM_CCAA);
}

// philox8() with AVX-512VL on the same 256-bit registers, in fewer operations: the products split
// by mul_split_vl(), and each word's two exclusive ors one three-input logic operation (0x96:
// a ^ b ^ c).
template <int N>
__attribute__((target("avx2,avx512f,avx512vl"))) inline void philox8_vl(__m256i (&c)[N][4], const RoundKeys& k) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int r = 0; r < 10; ++r)
    for (int g = 0; g < N; ++g) {
      __m256i hi0, lo0, hi1, lo1;
      mul_split_vl(c[g][0], m0, hi0, lo0);
      mul_split_vl(c[g][2], m1, hi1, lo1);
      c[g][0] = _mm256_ternarylogic_epi32(hi1, c[g][1], k.k0[r], 0x96);
      c[g][2] = _mm256_ternarylogic_epi32(hi0, c[g][3], k.k1[r], 0x96);
      c[g][1] = lo1;
      c[g][3] = lo0;
    }
}

// GCC 12 warns "may be used uninitialized" inside its own AVX-512 headers, whose intrinsics start
// from an undefined register (_mm512_undefined_*); the warning is about the header, not this code.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// mul_split_vl() on sixteen lanes of a 512-bit register.
__attribute__((target("avx2,avx512f"))) inline void mul_split_512(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  constexpr __mmask16 kOdd = 0xAAAA, kEven = 0x5555;
  const __m512i e = _mm512_mul_epu32(a, m), o = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_shuffle_epi32(o, kEven, e, _MM_PERM_DDBB);
  lo = _mm512_mask_shuffle_epi32(e, kOdd, o, _MM_PERM_CCAA);
}

// Counter words 0 and 1 of blocks i4 .. i4 + 7: the index's low word plus the lane, and its bits
// 32..39 under the stream; lane by lane where the low word wraps inside the eight.
__attribute__((target("avx2"))) void counters8(const RngKey& key, uint64_t i4, __m256i& c0, __m256i& c1) {
  if (static_cast<uint32_t>(i4) <= 0xFFFFFFFFu - 7u) {
    c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(i4))),
                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>((i4 >> 32) & 0xFFu) | (key.stream << 8)));
    return;
  }
  alignas(32) uint32_t w0[8], w1[8];
  for (int l = 0; l < 8; ++l) {
    const uint64_t il = i4 + static_cast<uint64_t>(l);
    w0[l] = static_cast<uint32_t>(il);
    w1[l] = static_cast<uint32_t>((il >> 32) & 0xFFu) | (key.stream << 8);
  }
  c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w0));
  c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w1));
}

// Eight blocks' words (lanes hold word j of blocks 0..7) stored block-major: 32 consecutive words.
__attribute__((target("avx2"))) void store_blocks8(const __m256i (&c)[4], uint32_t* out) {
  const __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]), t1 = _mm256_unpackhi_epi32(c[0], c[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(c[2], c[3]), t3 = _mm256_unpackhi_epi32(c[2], c[3]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

// The counters of N groups of eight blocks from i4 on.
template <int N>
__attribute__((target("avx2"))) inline void counters(const RngKey& key, uint64_t i4, __m256i (&c)[N][4]) {
  for (int g = 0; g < N; ++g) {
    counters8(key, i4 + 8 * static_cast<uint64_t>(g), c[g][0], c[g][1]);
    c[g][2] = _mm256_set1_epi32(static_cast<int>(key.rank));
    c[g][3] = _mm256_set1_epi32(static_cast<int>(key.round));
  }
}

// N groups of eight blocks from i4 on.
template <int N>
__attribute__((target("avx2"))) void blocks8(const RngKey& key, uint64_t i4, const RoundKeys& rk, uint32_t* out) {
  __m256i c[N][4];
  counters<N>(key, i4, c);
  philox8<N>(c, rk);
  for (int g = 0; g < N; ++g) store_blocks8(c[g], out + 32 * g);
}

// blocks8() by philox8_vl().
template <int N>
__attribute__((target("avx2,avx512f,avx512vl"))) void blocks8_vl(const RngKey& key, uint64_t i4, const RoundKeys& rk,
                                                                 uint32_t* out) {
  __m256i c[N][4];
  counters<N>(key, i4, c);
  philox8_vl<N>(c, rk);
  for (int g = 0; g < N; ++g) store_blocks8(c[g], out + 32 * g);
}

__attribute__((target("avx2,avx512f"))) inline __m512i splat16(uint32_t v) {
  return _mm512_set1_epi32(static_cast<int>(v));
}

// Rounds `first` to 9 of Philox4x32-10 (keys k0, k1 before round 0) on N groups of sixteen counters
// held word-wise in 512-bit registers: philox8_vl()'s operations on sixteen lanes.
template <int N>
__attribute__((target("avx2,avx512f"))) inline void rounds_512(__m512i (&c)[N][4], int first, uint32_t k0,
                                                               uint32_t k1) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int r = first; r < 10; ++r) {
    const __m512i ka = _mm512_set1_epi32(static_cast<int>(k0 + static_cast<uint32_t>(r) * 0x9E3779B9u));
    const __m512i kb = _mm512_set1_epi32(static_cast<int>(k1 + static_cast<uint32_t>(r) * 0xBB67AE85u));
    for (int g = 0; g < N; ++g) {
      __m512i hi0, lo0, hi1, lo1;
      mul_split_512(c[g][0], m0, hi0, lo0);
      mul_split_512(c[g][2], m1, hi1, lo1);
      c[g][0] = _mm512_ternarylogic_epi32(hi1, c[g][1], ka, 0x96);
      c[g][2] = _mm512_ternarylogic_epi32(hi0, c[g][3], kb, 0x96);
      c[g][1] = lo1;
      c[g][3] = lo0;
    }
  }
}

// Rounds 0 and 1 of Philox4x32-10 (keys k0, k1) on N groups of sixteen counters (i0 + lane, w1, w2,
// w3) held word-wise in 512-bit registers, lane l of group g counter i0 + 16 g + l, where those low
// words do not wrap (words 1 to 3 are then the same in every counter). The products of the common
// words are taken once, in scalars: round 0 multiplies the common word 2 and leaves words 0 and 1
// common, round 1 multiplies that common word 0, so each round has one vector product of the usual
// two.
template <int N>
__attribute__((target("avx2,avx512f,avx512vl"))) inline void first_rounds_512(uint32_t i0, uint32_t w1, uint32_t w2,
                                                                            uint32_t w3, uint32_t k0, uint32_t k1,
                                                                            __m512i (&c)[N][4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  const uint64_t p1 = uint64_t{kM1} * w2;  // round 0's common product
  const uint32_t a0 = static_cast<uint32_t>(p1 >> 32) ^ w1 ^ k0, a1 = static_cast<uint32_t>(p1);
  const uint64_t p0 = uint64_t{kM0} * a0;  // round 1's
  const __m512i m0 = splat16(kM0), m1 = splat16(kM1), x2 = splat16(w3 ^ k1), x0 = splat16(a1 ^ (k0 + kW0));
  const __m512i x3 = splat16(static_cast<uint32_t>(p0 >> 32) ^ (k1 + kW1)), l3 = splat16(static_cast<uint32_t>(p0));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int g = 0; g < N; ++g) {
    __m512i hi0, lo0, hi1, lo1;
    mul_split_512(_mm512_add_epi32(splat16(i0 + 16u * static_cast<uint32_t>(g)), lane), m0, hi0, lo0);
    mul_split_512(_mm512_xor_si512(hi0, x2), m1, hi1, lo1);  // after round 0: (a0, a1, hi0 ^ w3 ^ k1, lo0)
    c[g][0] = _mm512_xor_si512(hi1, x0);
    c[g][1] = lo1;
    c[g][2] = _mm512_xor_si512(lo0, x3);
    c[g][3] = l3;
  }
}

// N groups of sixteen blocks from i4 on in 512-bit registers, where the blocks' counter word 0
// does not wrap: first_rounds_512(), then rounds 2 to 9.
template <int N>
__attribute__((target("avx2,avx512f,avx512vl"))) void blocks16_512(const RngKey& key, uint64_t i4, uint32_t* out) {
  const uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  const uint32_t w1 = static_cast<uint32_t>((i4 >> 32) & 0xFFu) | (key.stream << 8);
  __m512i c[N][4];
  first_rounds_512<N>(static_cast<uint32_t>(i4), w1, key.rank, key.round, k0, k1, c);
  rounds_512<N>(c, 2, k0, k1);
  for (int g = 0; g < N; ++g) {  // blocks 0-7 and 8-15 of the group, each from its words' halves
    const __m256i low[4] = {_mm512_castsi512_si256(c[g][0]), _mm512_castsi512_si256(c[g][1]),
                            _mm512_castsi512_si256(c[g][2]), _mm512_castsi512_si256(c[g][3])};
    const __m256i high[4] = {_mm512_extracti64x4_epi64(c[g][0], 1), _mm512_extracti64x4_epi64(c[g][1], 1),
                             _mm512_extracti64x4_epi64(c[g][2], 1), _mm512_extracti64x4_epi64(c[g][3], 1)};
    store_blocks8(low, out + 64 * g);
    store_blocks8(high, out + 64 * g + 32);
  }
}

// philox_counter_words() on [0, returned), sixty-four counters at a time where their low words do
// not wrap.
__attribute__((target("avx2,avx512f,avx512vl"))) uint64_t counter_words_512(uint64_t index, uint32_t w2, uint32_t w3,
                                                                          uint64_t count, uint32_t k0, uint32_t k1,
                                                                          uint32_t* const (&w)[4]) {
  uint64_t l = 0;
  for (; l + 64 <= count && static_cast<uint32_t>(index + l) <= 0xFFFFFFFFu - 63u; l += 64) {
    __m512i c[4][4];
    first_rounds_512<4>(static_cast<uint32_t>(index + l), static_cast<uint32_t>((index + l) >> 32), w2, w3, k0, k1, c);
    rounds_512<4>(c, 2, k0, k1);
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 4; ++j) _mm512_storeu_si512(w[j] + l + 16 * g, c[g][j]);
  }
  return l;
}

// Whole blocks [index4, index4 + returned), sixteen then eight at a time, written as consecutive
// words.
__attribute__((target("avx2"))) uint64_t blocks_avx2(const RngKey& key, uint64_t index4, uint64_t blocks,
                                                     uint32_t* out) {
  const RoundKeys rk = round_keys(static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
  uint64_t b = 0;
  for (; b + 16 <= blocks; b += 16) blocks8<2>(key, index4 + b, rk, out + 4 * b);
  for (; b + 8 <= blocks; b += 8) blocks8<1>(key, index4 + b, rk, out + 4 * b);
  return b;
}

// blocks_avx2() with AVX-512VL's rounds, thirty-two blocks at a time first: its 32 registers hold
// four groups' words.
__attribute__((target("avx2,avx512f,avx512vl"))) uint64_t blocks_avx512vl(const RngKey& key, uint64_t index4,
                                                                         uint64_t blocks, uint32_t* out) {
  const RoundKeys rk = round_keys(static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
  uint64_t b = 0;
  for (; b + 64 <= blocks && static_cast<uint32_t>(index4 + b) <= 0xFFFFFFFFu - 63u; b += 64)
    blocks16_512<4>(key, index4 + b, out + 4 * b);
  for (; b + 32 <= blocks; b += 32)
    if (static_cast<uint32_t>(index4 + b) <= 0xFFFFFFFFu - 31u)
      blocks16_512<2>(key, index4 + b, out + 4 * b);
    else
      blocks8_vl<4>(key, index4 + b, rk, out + 4 * b);
  for (; b + 16 <= blocks; b += 16) blocks8_vl<2>(key, index4 + b, rk, out + 4 * b);
  for (; b + 8 <= blocks; b += 8) blocks8_vl<1>(key, index4 + b, rk, out + 4 * b);
  return b;
}

// Lanes [l, l + 8N) of the words w[0..3] in and out of N groups of registers.
template <int N>
__attribute__((target("avx2"))) inline void load_words(uint32_t* const (&w)[4], uint64_t l, __m256i (&c)[N][4]) {
  for (int g = 0; g < N; ++g)
    for (int j = 0; j < 4; ++j) c[g][j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[j] + l + 8 * g));
}
template <int N>
__attribute__((target("avx2"))) inline void store_words(uint32_t* const (&w)[4], uint64_t l, const __m256i (&c)[N][4]) {
  for (int g = 0; g < N; ++g)
    for (int j = 0; j < 4; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[j] + l + 8 * g), c[g][j]);
}

// philox_words() on lanes [0, returned) of w0..w3, sixteen then eight at a time.
__attribute__((target("avx2"))) uint64_t words_avx2(uint32_t* w0, uint32_t* w1, uint32_t* w2, uint32_t* w3,
                                                    uint64_t count, uint32_t k0, uint32_t k1) {
  const RoundKeys rk = round_keys(k0, k1);
  uint32_t* const w[4] = {w0, w1, w2, w3};
  uint64_t l = 0;
  for (; l + 16 <= count; l += 16) {
    __m256i c[2][4];
    load_words<2>(w, l, c);
    philox8<2>(c, rk);
    store_words<2>(w, l, c);
  }
  for (; l + 8 <= count; l += 8) {
    __m256i c[1][4];
    load_words<1>(w, l, c);
    philox8<1>(c, rk);
    store_words<1>(w, l, c);
  }
  return l;
}

// words_avx2() with AVX-512VL's rounds, thirty-two then eight at a time.
__attribute__((target("avx2,avx512f,avx512vl"))) uint64_t words_avx512vl(uint32_t* w0, uint32_t* w1, uint32_t* w2,
                                                                        uint32_t* w3, uint64_t count, uint32_t k0,
                                                                        uint32_t k1) {
  const RoundKeys rk = round_keys(k0, k1);
  uint32_t* const w[4] = {w0, w1, w2, w3};
  uint64_t l = 0;
  for (; l + 64 <= count; l += 64) {  // four groups of sixteen in 512-bit registers
    __m512i c[4][4];
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 4; ++j) c[g][j] = _mm512_loadu_si512(w[j] + l + 16 * g);
    rounds_512<4>(c, 0, k0, k1);
    for (int g = 0; g < 4; ++g)
      for (int j = 0; j < 4; ++j) _mm512_storeu_si512(w[j] + l + 16 * g, c[g][j]);
  }
  for (; l + 32 <= count; l += 32) {
    __m256i c[4][4];
    load_words<4>(w, l, c);
    philox8_vl<4>(c, rk);
    store_words<4>(w, l, c);
  }
  for (; l + 8 <= count; l += 8) {
    __m256i c[1][4];
    load_words<1>(w, l, c);
    philox8_vl<1>(c, rk);
    store_words<1>(w, l, c);
  }
  return l;
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// F and VL for the Philox lanes; BW too, for the 16-bit lanes of DynamiQ's walk (every machine with VL
// so far has BW).
bool have_avx512() {
  static const bool yes =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  return yes;
}
#endif

bool use_avx2() {
#if defined(CCSIM_HAND_AVX2)
  return have_avx2() && !g_force_portable.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

bool use_avx512vl() {
#if defined(CCSIM_HAND_AVX2)
  return use_avx2() && have_avx512() && !g_force_avx2.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Whole blocks, eight at a time where the machine allows.
void whole_blocks(const RngKey& key, uint64_t index4, uint64_t blocks, uint32_t* out) {
  uint64_t b = 0;
#if defined(CCSIM_HAND_AVX2)
  if (use_avx512vl()) {
    b = blocks_avx512vl(key, index4, blocks, out);
  } else if (use_avx2()) {
    b = blocks_avx2(key, index4, blocks, out);
  }
#endif
  blocks_portable(key, index4 + b, blocks - b, out + 4 * b);
}

}  // namespace

void random_bits_fill(const RngKey& key, uint64_t index, uint64_t count, uint32_t* out) {
  if (count == 0) return;
  // Head: the rest of a partly used block.
  uint64_t done = 0;
  if ((index & 3u) != 0) {
    const U32x4 b = philox_block(key, index >> 2);
    for (uint32_t lane = index & 3u; lane < 4 && done < count; ++lane) out[done++] = b.v[lane];
  }
  const uint64_t whole = (count - done) / 4;
  whole_blocks(key, (index + done) >> 2, whole, out + done);
  done += 4 * whole;
  if (done < count) {  // tail: the first lanes of one more block
    const U32x4 b = philox_block(key, (index + done) >> 2);
    for (uint32_t lane = 0; done < count; ++lane) out[done++] = b.v[lane];
  }
}

void uniform_fill(const RngKey& key, uint64_t index, uint64_t count, float* out) {
  uint32_t bits[kUniformTile];
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = count - done < kUniformTile ? count - done : kUniformTile;
    random_bits_fill(key, index + done, n, bits);
    // u32_to_unit_float(bits): (bits >> 8) * 2^-24, exact in fp32.
    for (uint64_t j = 0; j < n; ++j) out[done + j] = static_cast<float>(static_cast<int32_t>(bits[j] >> 8)) * 0x1.0p-24f;
    done += n;
  }
}

void philox_words(uint32_t* w0, uint32_t* w1, uint32_t* w2, uint32_t* w3, uint64_t count, uint32_t key0,
                  uint32_t key1) {
  uint64_t l = 0;
#if defined(CCSIM_HAND_AVX2)
  if (use_avx512vl()) {
    l = words_avx512vl(w0, w1, w2, w3, count, key0, key1);
  } else if (use_avx2()) {
    l = words_avx2(w0, w1, w2, w3, count, key0, key1);
  }
#endif
  for (; l < count; ++l) {
    const U32x4 r = philox4x32<10>(U32x4{{w0[l], w1[l], w2[l], w3[l]}}, key0, key1);
    w0[l] = r.v[0];
    w1[l] = r.v[1];
    w2[l] = r.v[2];
    w3[l] = r.v[3];
  }
}

void philox_counter_words(uint64_t index, uint32_t w2, uint32_t w3, uint64_t count, uint32_t key0, uint32_t key1,
                          uint32_t* w0_out, uint32_t* w1_out, uint32_t* w2_out, uint32_t* w3_out) {
  uint64_t l = 0;
#if defined(CCSIM_HAND_AVX2)
  if (use_avx512vl()) l = counter_words_512(index, w2, w3, count, key0, key1, {w0_out, w1_out, w2_out, w3_out});
#endif
  for (uint64_t i = l; i < count; ++i) {  // the rest through philox_words()
    w0_out[i] = static_cast<uint32_t>(index + i);
    w1_out[i] = static_cast<uint32_t>((index + i) >> 32);
    w2_out[i] = w2;
    w3_out[i] = w3;
  }
  philox_words(w0_out + l, w1_out + l, w2_out + l, w3_out + l, count - l, key0, key1);
}

const char* philox_batch_isa() { return use_avx512vl() ? "avx512vl" : use_avx2() ? "avx2" : "portable"; }

bool hand_avx2() { return use_avx2(); }

bool hand_avx512() { return use_avx512vl(); }

bool philox_batch_force_portable(bool force) { return g_force_portable.exchange(force); }

bool philox_batch_force_avx2(bool force) { return g_force_avx2.exchange(force); }

}  // namespace ccsim::kern
