#include "kernels/linalg/power_iteration.hpp"

#include "kernels/linalg/skinny_product.hpp"
#include "sim/base/uninit_vector.hpp"

#include <Eigen/Core>

#include <cmath>
#include <numbers>
#include <vector>

namespace ccsim::kern {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

Eigen::Index ix(uint64_t n) { return static_cast<Eigen::Index>(n); }

// Eigen blocks a product by the cache sizes it reads from the CPU, and the blocking splits each
// sum and so decides its rounding: on another machine the same product gave other bits (7,558 of
// 8,192 entries of a 2048 x 2048 by 2048 x 4 product with 16 KiB, 256 KiB and 2 MiB against these).
// The sizes are fixed, so that every machine computes what the shipped figures were computed
// with: the ones Eigen read on that machine (a Zen 4 reporting 48 KiB L1, 1 MiB L2 and 384 MiB L3).
constexpr std::ptrdiff_t kL1 = 49152, kL2 = 1048576, kL3 = 402653184;

void fix_cache_sizes() {
  // Set once before any product (a thread-safe static); again if something changed them since.
  static const bool fixed = [] {
    Eigen::setCpuCacheSizes(kL1, kL2, kL3);
    return true;
  }();
  (void)fixed;
  if (Eigen::l1CacheSize() != kL1 || Eigen::l2CacheSize() != kL2 || Eigen::l3CacheSize() != kL3)
    Eigen::setCpuCacheSizes(kL1, kL2, kL3);
}

// One term of a product's sum in double: a b, or |a| |b|.
template <typename A, typename B>
double term(A a, B b, bool absolute) {
  const double x = static_cast<double>(a), y = static_cast<double>(b);
  return absolute ? std::fabs(x) * std::fabs(y) : x * y;
}

}  // namespace

void lowrank_project(const float* m, uint64_t rows, uint64_t cols, const float* q, uint32_t rank, float* p) {
  fix_cache_sizes();
  if (skinny_product(q, rank, m, cols, rows, true, p)) return;
  Map(p, ix(rows), rank).noalias() = ConstMap(m, ix(rows), ix(cols)) * ConstMap(q, ix(cols), rank);
}

void lowrank_project_transposed(const float* m, uint64_t rows, uint64_t cols, const float* p, uint32_t rank, float* q) {
  fix_cache_sizes();
  if (skinny_product(p, rank, m, rows, cols, false, q)) return;
  Map(q, ix(cols), rank).noalias() = ConstMap(m, ix(rows), ix(cols)).transpose() * ConstMap(p, ix(rows), rank);
}

void lowrank_project_sum(const float* x, const float* e, uint64_t rows, uint64_t cols, const float* q, uint32_t rank,
                         float* p) {
  fix_cache_sizes();
  if (skinny_product(q, rank, x, cols, rows, true, p, e)) return;
  UninitVector<float> m(rows * cols);
  for (uint64_t i = 0; i < m.size(); ++i) m[i] = x[i] + e[i];
  lowrank_project(m.data(), rows, cols, q, rank, p);
}

void lowrank_add_project_transposed(const float* x, float* e, uint64_t rows, uint64_t cols, const float* p,
                                    uint32_t rank, float* q) {
  fix_cache_sizes();
  if (skinny_product(p, rank, x, rows, cols, false, q, e, e)) return;
  for (uint64_t i = 0; i < rows * cols; ++i) e[i] = x[i] + e[i];
  lowrank_project_transposed(e, rows, cols, p, rank, q);
}

void lowrank_expand(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t rank, float* out) {
  fix_cache_sizes();
  if (skinny_outer(p, q, rows, cols, rank, false, out)) return;
  Map(out, ix(rows), ix(cols)).noalias() = ConstMap(p, ix(rows), rank) * ConstMap(q, ix(cols), rank).transpose();
}

void lowrank_subtract(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t rank, float* inout) {
  fix_cache_sizes();
  if (skinny_outer(p, q, rows, cols, rank, true, inout)) return;
  Map(inout, ix(rows), ix(cols)).noalias() -= ConstMap(p, ix(rows), rank) * ConstMap(q, ix(cols), rank).transpose();
}

void orthonormalize_columns(float* p, uint64_t rows, uint32_t rank) {
  // Column-major double copy: column k at v[k * rows].
  std::vector<double> v(rows * rank);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint32_t k = 0; k < rank; ++k) v[k * rows + i] = p[i * rank + k];
  for (uint32_t k = 0; k < rank; ++k) {
    double* col = v.data() + k * rows;
    for (int pass = 0; pass < 2; ++pass) {  // Gram-Schmidt twice is enough (Giraud et al. 2005)
      for (uint32_t j = 0; j < k; ++j) {
        const double* prev = v.data() + j * rows;
        double dot = 0;
        for (uint64_t i = 0; i < rows; ++i) dot += prev[i] * col[i];
        for (uint64_t i = 0; i < rows; ++i) col[i] -= dot * prev[i];
      }
    }
    double norm2 = 0;
    for (uint64_t i = 0; i < rows; ++i) norm2 += col[i] * col[i];
    const double norm = std::sqrt(norm2);
    const double scale = norm > 0 && std::isfinite(norm) ? 1.0 / norm : 0.0;
    for (uint64_t i = 0; i < rows; ++i) col[i] = scale > 0 ? col[i] * scale : 0.0;  // 0 · inf would be NaN
  }
  for (uint64_t i = 0; i < rows; ++i)
    for (uint32_t k = 0; k < rank; ++k) p[i * rank + k] = static_cast<float>(v[k * rows + i]);
}

double fp32_gamma(uint64_t k) {
  const double ku = static_cast<double>(k) * 0x1p-24;
  return ku / (1.0 - ku);
}

double fp32_sum_error_bound(double magnitude, uint64_t k) {
  return fp32_gamma(k) * magnitude + static_cast<double>(k) * 0x1p-126;
}

std::vector<double> lowrank_project_f64(const float* m, uint64_t rows, uint64_t cols, const float* q, uint32_t rank,
                                        bool absolute) {
  std::vector<double> out(rows * rank, 0.0);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j)
      for (uint32_t k = 0; k < rank; ++k) out[i * rank + k] += term(m[i * cols + j], q[j * rank + k], absolute);
  return out;
}

std::vector<double> lowrank_project_transposed_f64(const float* m, uint64_t rows, uint64_t cols, const float* p,
                                                   uint32_t rank, bool absolute) {
  std::vector<double> out(cols * rank, 0.0);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j)
      for (uint32_t k = 0; k < rank; ++k) out[j * rank + k] += term(m[i * cols + j], p[i * rank + k], absolute);
  return out;
}

std::vector<double> lowrank_expand_f64(const float* p, const double* w, uint64_t rows, uint64_t cols, uint32_t rank,
                                       bool absolute) {
  std::vector<double> out(rows * cols, 0.0);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j)
      for (uint32_t k = 0; k < rank; ++k) out[i * cols + j] += term(p[i * rank + k], w[j * rank + k], absolute);
  return out;
}

float standard_normal_at(const RngKey& key, uint64_t index) {
  const double u1 = uniform_at(key, 2 * index), u2 = uniform_at(key, 2 * index + 1);
  return static_cast<float>(std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace ccsim::kern
