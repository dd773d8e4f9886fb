#pragma once
/// \file
/// CCSIM_VECTOR_ROW marks a CPU kernel's row function (a loop over one block's entries with no
/// call and no branch per entry) to be built twice, for AVX2 and for the baseline ISA, the copy
/// chosen at run time by the machine (GCC's target_clones). Not under clang or the sanitizers,
/// whose run-time start does not support the resolver; there the baseline build is the only one.
/// Rows never contract a*b+c (kernels/ builds with -ffp-contract=off; AVX2 alone enables no FMA).

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define CCSIM_VECTOR_ROW __attribute__((target_clones("avx2", "default")))
#else
#define CCSIM_VECTOR_ROW
#endif
