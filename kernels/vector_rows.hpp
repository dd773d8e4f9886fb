#pragma once
/// \file
/// CCSIM_VECTOR_ROW marks a CPU kernel's row function (a loop over one block's entries with no
/// call and no branch per entry) to be built three times, for x86-64-v4 (AVX-512 F, VL, BW, DQ and
/// CD), for AVX2 and for the baseline ISA, the copy chosen at run time by the machine (GCC's
/// target_clones). Every copy computes the same IEEE operations entry by entry, so the bits do not
/// depend on the copy; the AVX-512 one has mask registers, byte and dword permutes and twice the
/// registers, which the rows' selects, byte codes and tables use. Not under clang or the sanitizers,
/// whose run-time start does not support the resolver; there the baseline build is the only one.
/// Rows never contract a*b+c: kernels/ builds with -ffp-contract=off, so no copy does, although
/// x86-64-v4 has FMA.

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define CCSIM_VECTOR_ROW __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#define CCSIM_STREAM_ROW __attribute__((target_clones("avx2", "default")))
#else
#define CCSIM_VECTOR_ROW
#define CCSIM_STREAM_ROW
#endif

/// CCSIM_STREAM_ROW marks a row that does next to nothing per entry but move it (a shift, a byte
/// copy), built for AVX2 and the baseline only: on Zen 4 such rows streaming a buffer larger than
/// the cache ran up to 1.5x slower with 512-bit vectors than with 256-bit ones (bench_kernels,
/// TFP's fp32 encode and its byte packing).

/// CCSIM_HAND_AVX2 is defined where kernels/ may hold hand-written AVX2 paths (x86-64 under GCC or
/// clang, <immintrin.h> included): each such function carries __attribute__((target("avx2"))) and
/// runs only where hand_avx2() (kernels/philox_batch.hpp) says the machine has AVX2.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CCSIM_HAND_AVX2 1
#endif
