#pragma once
/// \file
/// logf and sincosf with the C library's exact results, as rows that vectorize.
///
/// The synthetic gradients are Box–Muller normals of fp32 uniforms: a logf and a sincosf per pair
/// of entries, which in the C library cost more than everything else the generator does. These
/// functions compute the table-driven single-precision log and sine/cosine that glibc has shipped
/// since 2.28 (written by Arm, in their optimized-routines), in the form glibc selects on x86-64
/// machines with AVX2 and FMA: the polynomial's a·b + c steps are fused multiply-adds. So on such
/// a machine they return the C library's logf and sincosf bit for bit (tests/kernels/
/// float_libm_test.cpp checks every argument the generator can pass, 2^24 of each); on any other
/// machine they return the same bits as on such a machine, which the C library itself does not
/// (its baseline x86-64 build rounds the unfused products).
///
/// The rows take the AVX2 + FMA path where the machine has both (and hand_avx2() allows it), the
/// scalar functions elsewhere; both compute the same operations on the same values. The
/// constants (a 16-entry table and a degree-3 polynomial for log; π/2, 2/π and two sets of
/// degree-4 polynomials for sine and cosine) are those of the Arm routines, which are MIT
/// licensed; they are the specification of the results, not tuning.
///
/// Domain: logf is computed here for every positive finite argument (subnormals scaled first, as
/// the C library does); zero, negatives, infinities and NaN return std::log's value. sincosf is
/// computed here for |x| < 120; larger or non-finite arguments return ::sincosf's values (its
/// large-argument reduction is not reproduced).

#include <cstdint>

namespace ccsim::kern {

/// The natural logarithm of x, rounded as glibc's FMA logf rounds it.
float libm_logf(float x);

/// sin(x) and cos(x), rounded as glibc's FMA sincosf rounds them.
void libm_sincosf(float x, float* sine, float* cosine);

/// y[i] = libm_logf(x[i]) for i < n. x and y may be the same array (not otherwise overlapping).
void libm_logf_row(const float* x, float* y, uint64_t n);

/// libm_sincosf(x[i], &sine[i], &cosine[i]) for i < n. The output arrays must not overlap x.
void libm_sincosf_row(const float* x, float* sine, float* cosine, uint64_t n);

/// Whether the rows take their AVX2 + FMA path on this machine now.
bool libm_rows_vectorized();

}  // namespace ccsim::kern
