#pragma once
/// \file
/// Bit-level views of fp32 values shared by the element functions (host and device): the IEEE-754
/// pattern of a float and back, and exact powers of two.

#include <cstdint>
#include <cstring>

#include "kernels/philox.hpp"

namespace ccsim::kern {

/// The IEEE-754 bit pattern of `x`.
CCSIM_HD uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The float whose IEEE-754 bit pattern is `u`.
CCSIM_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// The IEEE-754 bit pattern of the double `x`.
CCSIM_HD uint64_t double_to_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The double whose IEEE-754 bit pattern is `u`.
CCSIM_HD double bits_to_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// 2^e as a float for -149 <= e <= 127, built from its bits (exact, subnormals included).
CCSIM_HD float exact_pow2(int e) {
  return e >= -126 ? bits_to_float(static_cast<uint32_t>(e + 127) << 23) : bits_to_float(1u << (e + 149));
}

}  // namespace ccsim::kern
