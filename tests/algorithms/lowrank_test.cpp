// Low-rank schemes: the power-iteration kernels, PowerSGD through plan_round + run_numerics on a
// ring all-reduce (exactness on low-rank data, wire sizes, error feedback, rank/error trade-off),
// the Marchenko-Pastur error model against the paper's closed form and empirical SVDs, and EDGC's
// rank controller and its lag through whole rounds.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <Eigen/SVD>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/lowrank/edgc_stages.hpp"
#include "algorithms/lowrank/marchenko_pastur.hpp"
#include "algorithms/lowrank/powersgd.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/linalg/skinny_product.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/parallel.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::unique_ptr<Compressor> make(const char* name, const nlohmann::json& params) {
  auto made = CompressorRegistry::global().create(name, params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

Mat gaussian(uint64_t rows, uint64_t cols, std::mt19937& gen, double sigma = 1.0) {
  std::normal_distribution<double> dist(0.0, sigma);
  Mat m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(gen);
  return m;
}

void put(std::vector<float>& x, const LayerShape& l, const Mat& m) {
  for (uint64_t i = 0; i < l.count; ++i) x[l.offset + i] = static_cast<float>(m.data()[i]);
}

/// Layers in offset order from (rows, cols) pairs.
std::vector<LayerShape> layout_of(std::initializer_list<std::pair<uint64_t, uint64_t>> shapes) {
  std::vector<LayerShape> out;
  uint64_t offset = 0;
  for (const auto& [rows, cols] : shapes) {
    out.push_back({offset, rows * cols, rows, cols});
    offset += rows * cols;
  }
  return out;
}

std::vector<double> exact_sum(const std::vector<std::vector<float>>& inputs) {
  std::vector<double> s(inputs[0].size(), 0.0);
  for (const auto& in : inputs)
    for (size_t i = 0; i < s.size(); ++i) s[i] += in[i];
  return s;
}

double rel_error(const std::vector<double>& exact, std::span<const float> got, uint64_t begin = 0, uint64_t end = 0) {
  if (end == 0) end = exact.size();
  double se = 0, sn = 0;
  for (uint64_t i = begin; i < end; ++i) {
    se += (exact[i] - got[i]) * (exact[i] - got[i]);
    sn += exact[i] * exact[i];
  }
  return std::sqrt(se / sn);
}

/// One round on a ring all-reduce built on reduced_elements(): plan, bind, run. Returns what the
/// ranks end with; `plan_bytes` and `wire_bytes` report the two phases.
struct RoundResult {
  std::vector<std::vector<float>> out;
  uint64_t plan_bytes = 0;
  uint64_t wire_bytes = 0;
  uint64_t expected_wire_bytes = 0;  ///< 4 bytes per reduced element carried by each transfer
  uint64_t reduced = 0;
};

RoundResult run_round(Compressor& comp, const std::vector<std::vector<float>>& inputs, uint64_t seed = 7) {
  const auto n = static_cast<uint32_t>(inputs.size());
  std::vector<std::span<const float>> ins(inputs.begin(), inputs.end());
  RoundResult r;
  auto plan = plan_round(comp, ins, {seed, 0});
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  r.plan_bytes = plan->wire_bytes_per_rank;
  r.reduced = comp.reduced_elements(inputs[0].size());
  topo::Schedule s = topo::make_allreduce_ring(n, r.reduced, {comp.alignment()});
  bind_schedule(s, comp);
  for (const auto& op : s.ops())
    if (op.kind == topo::OpKind::kTransfer) r.expected_wire_bytes += 4 * s.chunks()[op.chunk].count;
  r.out = inputs;
  std::vector<std::span<float>> views(r.out.begin(), r.out.end());
  auto stats = run_numerics(s, comp, views, {seed, 0});
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  r.wire_bytes = stats->wire_bytes;
  return r;
}

// --- kernels --------------------------------------------------------------------------------------

TEST(LowRankKernels, DoubleReferencesOfTheProductsOnAHandExample) {
  // M = [[1, -2], [3, 4]]; Q = [0.5, -1]^T; P = [1, -1]^T; w = [2, -3]^T.
  const std::vector<float> m = {1, -2, 3, 4}, q = {0.5f, -1}, p = {1, -1};
  const std::vector<double> w = {2, -3};
  EXPECT_EQ(kern::lowrank_project_f64(m.data(), 2, 2, q.data(), 1, false), (std::vector<double>{2.5, -2.5}));
  EXPECT_EQ(kern::lowrank_project_f64(m.data(), 2, 2, q.data(), 1, true), (std::vector<double>{2.5, 5.5}));
  EXPECT_EQ(kern::lowrank_project_transposed_f64(m.data(), 2, 2, p.data(), 1, false), (std::vector<double>{-2, -6}));
  EXPECT_EQ(kern::lowrank_project_transposed_f64(m.data(), 2, 2, p.data(), 1, true), (std::vector<double>{4, 6}));
  EXPECT_EQ(kern::lowrank_expand_f64(p.data(), w.data(), 2, 2, 1, false), (std::vector<double>{2, -3, -2, 3}));
  EXPECT_EQ(kern::lowrank_expand_f64(p.data(), w.data(), 2, 2, 1, true), (std::vector<double>{2, 3, 2, 3}));
  EXPECT_EQ(kern::fp32_gamma(1), 0x1p-24 / (1 - 0x1p-24));
  EXPECT_EQ(kern::fp32_gamma(1024), 0x1p-14 / (1 - 0x1p-14));
  EXPECT_EQ(kern::fp32_sum_error_bound(2.0, 1024), 2 * kern::fp32_gamma(1024) + 0x1p-116);
}

// Eigen's fp32 products against the plain double loops: every entry within the bound of a k-term
// fp32 sum, γ_k Σ|a||b| + k 2^-126, on short and long sums and on operands whose rows span 60
// orders of magnitude.
TEST(LowRankKernels, ProductsAreWithinTheFp32SumBoundOfTheDoubleReference) {
  std::mt19937 gen(1);
  struct Shape {
    uint64_t rows, cols;
    uint32_t rank;
  };
  double worst = 0;  // the largest |error| / bound seen
  for (const Shape sh : {Shape{37, 23, 5}, Shape{300, 700, 4}, Shape{1, 5000, 2}, Shape{5000, 1, 3}}) {
    for (const bool wide : {false, true}) {
      SCOPED_TRACE(fmt::format("{} x {} rank {} wide {}", sh.rows, sh.cols, sh.rank, wide));
      const uint64_t rows = sh.rows, cols = sh.cols;
      const uint32_t r = sh.rank;
      Mat md = gaussian(rows, cols, gen);
      if (wide)  // rows scaled by 1e-30, 1e-20, ..., 1e30
        for (Eigen::Index i = 0; i < md.rows(); ++i) md.row(i) *= std::pow(10.0, double(i % 7) * 10 - 30);
      const Mat qd = gaussian(cols, r, gen), pd = gaussian(rows, r, gen);
      const std::vector<float> m(md.data(), md.data() + md.size()), q(qd.data(), qd.data() + qd.size()),
          p(pd.data(), pd.data() + pd.size());
      auto check = [&](const char* what, const std::vector<float>& got, const std::vector<double>& exact,
                       const std::vector<double>& magnitude, uint64_t k) {
        ASSERT_EQ(got.size(), exact.size()) << what;
        for (size_t e = 0; e < got.size(); ++e) {
          const double err = std::fabs(got[e] - exact[e]), bound = kern::fp32_sum_error_bound(magnitude[e], k);
          ASSERT_LE(err, bound) << what << " entry " << e << ": " << got[e] << " vs " << exact[e];
          worst = std::max(worst, err / bound);
        }
      };
      std::vector<float> out(rows * r);
      kern::lowrank_project(m.data(), rows, cols, q.data(), r, out.data());
      check("project", out, kern::lowrank_project_f64(m.data(), rows, cols, q.data(), r, false),
            kern::lowrank_project_f64(m.data(), rows, cols, q.data(), r, true), cols);
      out.assign(cols * r, 0.0f);
      kern::lowrank_project_transposed(m.data(), rows, cols, p.data(), r, out.data());
      check("project_transposed", out, kern::lowrank_project_transposed_f64(m.data(), rows, cols, p.data(), r, false),
            kern::lowrank_project_transposed_f64(m.data(), rows, cols, p.data(), r, true), rows);
      const std::vector<double> w(q.begin(), q.end());
      const std::vector<double> pq = kern::lowrank_expand_f64(p.data(), w.data(), rows, cols, r, false),
                                pq_mag = kern::lowrank_expand_f64(p.data(), w.data(), rows, cols, r, true);
      out.assign(rows * cols, 0.0f);
      kern::lowrank_expand(p.data(), q.data(), rows, cols, r, out.data());
      check("expand", out, pq, pq_mag, r);
      // inout = M − P Q^T: M is one more term.
      std::vector<double> diff(rows * cols), diff_mag(rows * cols);
      for (uint64_t e = 0; e < rows * cols; ++e) {
        diff[e] = m[e] - pq[e];
        diff_mag[e] = std::fabs(m[e]) + pq_mag[e];
      }
      out = m;
      kern::lowrank_subtract(p.data(), q.data(), rows, cols, r, out.data());
      check("subtract", out, diff, diff_mag, r + 1);
    }
  }
  // The bound is not loose beyond use: the long sums come within a factor of 10^4 of it.
  EXPECT_GT(worst, 1e-4);
}

// Eigen splits a product's sums by the cache sizes it reads from the CPU. The products fix them,
// so a machine with other caches computes the same bits: here the sizes are changed between two
// evaluations of each product, on sums long enough to be split, and the bits must not move (while a
// plain Eigen product under the changed sizes does move, so the change reaches the blocking).
TEST(LowRankKernels, ProductsDoNotDependOnTheMachinesCacheSizes) {
  std::mt19937 gen(5);
  const uint64_t rows = 512, cols = 2048;
  const uint32_t r = 4;
  const Mat md = gaussian(rows, cols, gen), qd = gaussian(cols, r, gen), pd = gaussian(rows, r, gen);
  const std::vector<float> m(md.data(), md.data() + md.size()), q(qd.data(), qd.data() + qd.size()),
      p(pd.data(), pd.data() + pd.size());
  auto all = [&] {
    std::vector<float> out(rows * r + cols * r + 2 * rows * cols);
    float* o = out.data();
    kern::lowrank_project(m.data(), rows, cols, q.data(), r, o);
    kern::lowrank_project_transposed(m.data(), rows, cols, p.data(), r, o + rows * r);
    kern::lowrank_expand(p.data(), q.data(), rows, cols, r, o + rows * r + cols * r);
    std::copy(m.begin(), m.end(), o + rows * r + cols * r + rows * cols);
    kern::lowrank_subtract(p.data(), q.data(), rows, cols, r, o + rows * r + cols * r + rows * cols);
    return out;
  };
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto plain = [&] {
    RowMat out = Eigen::Map<const RowMat>(m.data(), rows, cols) * Eigen::Map<const RowMat>(q.data(), cols, r);
    return std::vector<float>(out.data(), out.data() + out.size());
  };
  const std::vector<float> before = all();
  const std::vector<float> plain_before = plain();
  const std::ptrdiff_t l1 = Eigen::l1CacheSize(), l2 = Eigen::l2CacheSize(), l3 = Eigen::l3CacheSize();
  Eigen::setCpuCacheSizes(16 * 1024, 256 * 1024, 2 * 1024 * 1024);
  const std::vector<float> plain_after = plain();
  const std::vector<float> after = all();
  Eigen::setCpuCacheSizes(l1, l2, l3);  // as the products left them, for the tests after this one
  EXPECT_NE(std::memcmp(plain_before.data(), plain_after.data(), 4 * plain_before.size()), 0);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), 4 * before.size()), 0);
}

// The products run through kern::skinny_product and kern::skinny_outer, which add Eigen's products
// in Eigen's orders without packing: equal bits to plain Eigen products, over ranks that reach every
// row case (groups of eight rows, a group of four, one to three rows left; for the reconstruction,
// ranks of eight and more split their sums), depths past Eigen's blocking of the sums (688 terms at
// these cache sizes), and column counts that leave columns out of Eigen's four-column panels; and
// the projections of M = x + e that form the sum as they read it. Summing in the plain order
// instead would change many entries.
TEST(LowRankKernels, SkinnyProductsEqualEigensBitForBit) {
  if (!kern::skinny_product_available()) GTEST_SKIP() << "no AVX2, or Eigen built for other packets";
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const RowMat>;
  std::mt19937 gen(11);
  std::student_t_distribution<float> heavy(3.0f);
  uint64_t shapes = 0, plain_differs = 0;
  auto check = [&](uint64_t rows, uint64_t cols, uint32_t r) {
    std::vector<float> m(rows * cols), q(cols * r), p(rows * r);
    for (float* v : {m.data(), q.data(), p.data()}) {
      const uint64_t len = v == m.data() ? m.size() : v == q.data() ? q.size() : p.size();
      for (uint64_t i = 0; i < len; ++i) v[i] = heavy(gen);
    }
    std::vector<float> got_p(rows * r), got_q(cols * r);
    kern::lowrank_project(m.data(), rows, cols, q.data(), r, got_p.data());  // fixes the cache sizes
    kern::lowrank_project_transposed(m.data(), rows, cols, p.data(), r, got_q.data());
    const RowMat want_p = Map(m.data(), rows, cols) * Map(q.data(), cols, r);
    const RowMat want_q = Map(m.data(), rows, cols).transpose() * Map(p.data(), rows, r);
    ASSERT_EQ(std::memcmp(got_p.data(), want_p.data(), 4 * got_p.size()), 0) << rows << " x " << cols << ", rank " << r;
    ASSERT_EQ(std::memcmp(got_q.data(), want_q.data(), 4 * got_q.size()), 0) << rows << " x " << cols << ", rank " << r;
    std::vector<float> got_e(rows * cols), got_s(m);
    kern::lowrank_expand(p.data(), q.data(), rows, cols, r, got_e.data());
    kern::lowrank_subtract(p.data(), q.data(), rows, cols, r, got_s.data());
    const RowMat want_e = Map(p.data(), rows, r) * Map(q.data(), cols, r).transpose();
    RowMat want_s = Map(m.data(), rows, cols);
    want_s.noalias() -= Map(p.data(), rows, r) * Map(q.data(), cols, r).transpose();
    ASSERT_EQ(std::memcmp(got_e.data(), want_e.data(), 4 * got_e.size()), 0) << rows << " x " << cols << ", rank " << r;
    ASSERT_EQ(std::memcmp(got_s.data(), want_s.data(), 4 * got_s.size()), 0) << rows << " x " << cols << ", rank " << r;
    // The fused forms: M = m + e summed as the products read it (and, transposed, stored in e).
    std::vector<float> e(rows * cols), sum(rows * cols);
    for (uint64_t i = 0; i < e.size(); ++i) e[i] = heavy(gen) * 0.01f;
    for (uint64_t i = 0; i < e.size(); ++i) sum[i] = m[i] + e[i];
    const std::vector<float> e_before = e;
    std::vector<float> got_ps(rows * r), got_qs(cols * r);
    kern::lowrank_project_sum(m.data(), e.data(), rows, cols, q.data(), r, got_ps.data());
    kern::lowrank_add_project_transposed(m.data(), e.data(), rows, cols, p.data(), r, got_qs.data());
    const RowMat want_ps = Map(sum.data(), rows, cols) * Map(q.data(), cols, r);
    const RowMat want_qs = Map(sum.data(), rows, cols).transpose() * Map(p.data(), rows, r);
    ASSERT_EQ(std::memcmp(got_ps.data(), want_ps.data(), 4 * got_ps.size()), 0) << rows << " x " << cols << ", rank " << r;
    ASSERT_EQ(std::memcmp(got_qs.data(), want_qs.data(), 4 * got_qs.size()), 0) << rows << " x " << cols << ", rank " << r;
    ASSERT_EQ(std::memcmp(e.data(), sum.data(), 4 * e.size()), 0) << rows << " x " << cols << ", rank " << r;
    {  // The fused forms where Eigen computes (machines without AVX2): the same bits.
      const bool was = kern::philox_batch_force_portable(true);
      ASSERT_FALSE(kern::skinny_product_available());
      std::vector<float> eigen_ps(rows * r), eigen_qs(cols * r), e2 = e_before;
      kern::lowrank_project_sum(m.data(), e2.data(), rows, cols, q.data(), r, eigen_ps.data());
      kern::lowrank_add_project_transposed(m.data(), e2.data(), rows, cols, p.data(), r, eigen_qs.data());
      kern::philox_batch_force_portable(was);
      ASSERT_EQ(std::memcmp(eigen_ps.data(), want_ps.data(), 4 * eigen_ps.size()), 0);
      ASSERT_EQ(std::memcmp(eigen_qs.data(), want_qs.data(), 4 * eigen_qs.size()), 0);
      ASSERT_EQ(std::memcmp(e2.data(), sum.data(), 4 * e2.size()), 0);
    }
    std::vector<float> direct(rows * r);
    ASSERT_TRUE(kern::skinny_product(q.data(), r, m.data(), cols, rows, true, direct.data()));
    ASSERT_EQ(std::memcmp(direct.data(), want_p.data(), 4 * direct.size()), 0);
    for (uint64_t i = 0; i < rows; ++i)
      for (uint32_t k = 0; k < r; ++k) {
        float s = 0.0f;
        for (uint64_t j = 0; j < cols; ++j) s += m[i * cols + j] * q[j * r + k];
        plain_differs += s != want_p(static_cast<Eigen::Index>(i), k);
      }
    ++shapes;
  };
  for (uint32_t r : {2u, 3u, 4u, 5u, 7u, 8u, 11u, 12u, 13u, 16u, 19u})
    for (uint64_t rows : {9u, 37u, 300u})
      for (uint64_t cols : {13u, 250u, 1500u}) check(rows, cols, r);
  check(2048, 700, 4);
  check(700, 2048, 4);
  check(21, 9000, 5);  // rows too long for eight to be copied whole: P = (x + e) Q a block at a time
  ASSERT_EQ(shapes, 102u);
  EXPECT_GT(plain_differs, 1000u);
}

TEST(LowRankKernels, OrthonormalizeKeepsTheSpanAndZeroesDependentColumns) {
  std::mt19937 gen(2);
  const uint64_t rows = 60;
  const uint32_t rank = 6;
  Mat p = gaussian(rows, rank, gen);
  p.col(4) = 2 * p.col(1) - p.col(0);  // dependent: its remainder is rounding noise at most
  p.col(5).setZero();
  std::vector<float> pf(p.data(), p.data() + p.size());
  Mat in = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(pf.data(), rows, rank)
               .cast<double>();
  kern::orthonormalize_columns(pf.data(), rows, rank);
  const Mat out =
      Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(pf.data(), rows, rank)
          .cast<double>();
  ASSERT_TRUE(out.allFinite());
  EXPECT_EQ(out.col(5).norm(), 0.0);
  // Columns 0..3 are orthonormal and span the input's columns 0..3 (and hence column 4).
  const Mat basis = out.leftCols(4);
  EXPECT_LT((basis.transpose() * basis - Mat::Identity(4, 4)).norm(), 1e-6);
  EXPECT_LT((in.leftCols(5) - basis * (basis.transpose() * in.leftCols(5))).norm(), 1e-5 * in.norm());
}

TEST(LowRankKernels, OrthonormalizeZeroesNonFiniteColumns) {
  // A column holding NaN or inf has no direction: it becomes +0 everywhere, and the columns after
  // it are orthonormalized against the others only (0 · inf and NaN never reach them).
  std::mt19937 gen(3);
  const uint64_t rows = 50;
  const uint32_t rank = 4;
  const Mat p = gaussian(rows, rank, gen);
  std::vector<float> pf(p.data(), p.data() + p.size());
  pf[7 * rank + 1] = NAN;
  pf[20 * rank + 2] = -INFINITY;
  kern::orthonormalize_columns(pf.data(), rows, rank);
  for (uint64_t i = 0; i < rows; ++i)
    for (const uint32_t k : {1u, 2u}) {
      ASSERT_EQ(pf[i * rank + k], 0.0f) << "row " << i << " column " << k;
      ASSERT_FALSE(std::signbit(pf[i * rank + k])) << "row " << i << " column " << k;
    }
  const Mat out =
      Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(pf.data(), rows, rank)
          .cast<double>();
  ASSERT_TRUE(out.allFinite());
  Mat kept(rows, 2);
  kept << out.col(0), out.col(3);
  EXPECT_LT((kept.transpose() * kept - Mat::Identity(2, 2)).norm(), 1e-6);
}

TEST(LowRankKernels, StandardNormalsHaveUnitMomentsAndAreKeyed) {
  const kern::RngKey key{5, 1, 2, 3};
  double s1 = 0, s2 = 0, s4 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = kern::standard_normal_at(key, static_cast<uint64_t>(i));
    ASSERT_TRUE(std::isfinite(z));
    s1 += z;
    s2 += z * z;
    s4 += z * z * z * z;
  }
  EXPECT_NEAR(s1 / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  EXPECT_NEAR(s4 / n, 3.0, 0.1);  // Gaussian kurtosis
  EXPECT_EQ(kern::standard_normal_at(key, 77), kern::standard_normal_at(key, 77));
  EXPECT_NE(kern::standard_normal_at(key, 77), kern::standard_normal_at(kern::RngKey{6, 1, 2, 3}, 77));
}

// --- PowerSGD through plan_round + run_numerics ----------------------------------------------------

// Four ranks whose matrix layers share one rank-4 column space per layer: rank-4 PowerSGD is exact.
// Biases and a matrix too small to gain (4 (3 + 4) >= 12) travel uncompressed and come out exact.
TEST(PowerSgd, ExactOnRankRMatricesThroughARingWithExactWireSizes) {
  const auto layers = layout_of({{64, 48}, {48, 1}, {3, 4}, {40, 100}, {100, 1}});
  const uint64_t d = layers.back().offset + layers.back().count;
  const uint32_t n = 4, r = 4;
  std::mt19937 gen(3);
  const Mat u0 = gaussian(64, r, gen), u3 = gaussian(40, r, gen);
  std::vector<std::vector<float>> inputs(n, std::vector<float>(d));
  for (uint32_t i = 0; i < n; ++i) {
    put(inputs[i], layers[0], u0 * gaussian(48, r, gen).transpose());
    put(inputs[i], layers[1], gaussian(48, 1, gen));
    put(inputs[i], layers[2], gaussian(3, 4, gen));
    put(inputs[i], layers[3], u3 * gaussian(100, r, gen).transpose());
    put(inputs[i], layers[4], gaussian(100, 1, gen, 0.01));
  }
  auto comp = make("powersgd", {{"rank", r}});
  ASSERT_TRUE(comp);
  comp->set_layout(layers);
  EXPECT_EQ(comp->plan_format(d, n).sum_entries, 64u * r + 40u * r);
  const uint64_t reduced = 48u * r + 100u * r + 48 + 12 + 100;
  EXPECT_EQ(comp->reduced_elements(d), reduced);

  const RoundResult res = run_round(*comp, inputs);
  EXPECT_EQ(res.plan_bytes, 4 * (64u * r + 40u * r));
  EXPECT_EQ(res.reduced, reduced);
  EXPECT_EQ(res.wire_bytes, res.expected_wire_bytes);
  EXPECT_EQ(res.wire_bytes, 8 * (n - 1) * reduced);  // a ring moves 2 (n - 1) / n of the vector per rank
  const auto exact = exact_sum(inputs);
  for (uint32_t i = 0; i < n; ++i) {
    SCOPED_TRACE(fmt::format("rank {}", i));
    EXPECT_LT(rel_error(exact, res.out[i]), 1e-5);
    for (size_t l : {1, 2, 4})
      EXPECT_LT(rel_error(exact, res.out[i], layers[l].offset, layers[l].offset + layers[l].count), 1e-6);
    EXPECT_EQ(res.out[i], res.out[0]);
  }
}

TEST(PowerSgd, WithoutALayoutEverythingTravelsUncompressed) {
  auto comp = make("powersgd", nlohmann::json::object());
  ASSERT_TRUE(comp);
  std::mt19937 gen(4);
  std::vector<std::vector<float>> inputs(3, std::vector<float>(1000));
  for (auto& in : inputs) put(in, {0, 1000, 1000, 1}, gaussian(1000, 1, gen));
  EXPECT_TRUE(comp->plan_format(1000, 3).empty());
  EXPECT_EQ(comp->reduced_elements(1000), 1000u);
  const RoundResult res = run_round(*comp, inputs);
  EXPECT_EQ(res.plan_bytes, 0u);
  EXPECT_EQ(res.wire_bytes, 8u * 2 * 1000);
  for (const auto& o : res.out) EXPECT_LT(rel_error(exact_sum(inputs), o), 1e-6);
}

// A residual is all zeros until a round compresses a layer, so it is allocated only then: a round
// with error feedback that compresses nothing sends x + 0 (each -0 made +0, as x + e would), and
// leaves no residual; the first round that compresses allocates the whole tensor's, zero outside
// its compressed layers.
TEST(PowerSgd, ResidualAllocatedAtTheFirstCompressedLayer) {
  auto vectors = make("powersgd", {{"rank", 2}, {"error_feedback", true}});
  ASSERT_TRUE(vectors);
  vectors->set_layout(layout_of({{700, 1}, {1, 300}}));  // 1-D layers only: nothing compressed
  std::vector<float> x(1000);
  for (uint64_t i = 0; i < x.size(); ++i) x[i] = i % 3 == 0 ? -0.0f : static_cast<float>(i) - 500.0f;
  const std::vector<std::span<const float>> ins = {x, x};
  ASSERT_TRUE(plan_round(*vectors, ins, {3, 0}).ok());
  std::vector<float> out(vectors->reduced_elements(x.size()), 7.0f);
  ASSERT_EQ(out.size(), x.size());
  vectors->prepare(x, out, 0, 2, {3, 0, 0, 0});
  for (uint64_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(x[i] + 0.0f)) << i;
  EXPECT_EQ(std::bit_cast<uint32_t>(out[0]), 0u) << "-0 sent as +0";
  EXPECT_TRUE(dynamic_cast<const LowRankCompressor&>(*vectors).residual(0).empty());

  auto mixed = make("powersgd", {{"rank", 2}, {"error_feedback", true}});
  ASSERT_TRUE(mixed);
  mixed->set_layout(layout_of({{20, 30}, {400, 1}}));
  const std::vector<std::span<const float>> both = {x, x};
  ASSERT_TRUE(plan_round(*mixed, both, {3, 0}).ok());
  out.assign(mixed->reduced_elements(x.size()), 7.0f);
  mixed->prepare(x, out, 0, 2, {3, 0, 0, 0});
  const std::span<const float> e = dynamic_cast<const LowRankCompressor&>(*mixed).residual(0);
  ASSERT_EQ(e.size(), x.size());
  EXPECT_TRUE(std::any_of(e.begin(), e.begin() + 600, [](float v) { return v != 0.0f; }));
  EXPECT_TRUE(std::all_of(e.begin() + 600, e.end(), [](float v) { return std::bit_cast<uint32_t>(v) == 0u; }));
}

// Feeding the same gradients T times: Σ_t out_t = T Σ_i x_i - Σ_i e_i (the residuals telescope). The
// residuals stay bounded, so the time-averaged error ‖Σ_i e_i‖ / (T ‖X‖) falls like 1/T, far below
// one round's error; without feedback the same loss repeats every round.
TEST(PowerSgd, ErrorFeedbackTelescopesAndAveragesTheErrorAway) {
  const auto layers = layout_of({{80, 60}, {60, 1}, {50, 30}});
  const uint64_t d = layers.back().offset + layers.back().count;
  const uint32_t n = 3;
  std::mt19937 gen(5);
  // Matrices of rank 6 (one column space per layer) sent at rank 2: no single round carries them.
  std::vector<Mat> bases;
  for (const auto& l : layers) bases.push_back(gaussian(l.rows, 6, gen));
  std::vector<std::vector<float>> inputs(n, std::vector<float>(d));
  for (auto& in : inputs)
    for (size_t l = 0; l < layers.size(); ++l)
      put(in, layers[l],
          layers[l].cols == 1 ? gaussian(layers[l].rows, 1, gen)
                              : Mat(bases[l] * gaussian(layers[l].cols, 6, gen).transpose()));
  const auto exact = exact_sum(inputs);
  double exact_norm = 0;
  for (double v : exact) exact_norm += v * v;
  exact_norm = std::sqrt(exact_norm);

  for (const bool error_feedback : {true, false}) {
    SCOPED_TRACE(fmt::format("error_feedback={}", error_feedback));
    auto comp = make("powersgd", {{"rank", 2}, {"error_feedback", error_feedback}});
    comp->set_layout(layers);
    const auto& engine = dynamic_cast<const LowRankCompressor&>(*comp);
    std::vector<double> total(d, 0.0);
    double first = 0;
    std::vector<double> averaged;  // time-averaged relative error after 30 and 60 rounds
    for (uint32_t t = 1; t <= 60; ++t) {
      const RoundResult res = run_round(*comp, inputs, 11);
      if (t == 1) first = rel_error(exact, res.out[0]);
      for (uint64_t i = 0; i < d; ++i) total[i] += res.out[0][i];
      if (t % 30 != 0) continue;
      double deviation2 = 0, mismatch2 = 0, residual2 = 0;
      for (uint64_t i = 0; i < d; ++i) {
        double residual_sum = 0;
        for (uint32_t r = 0; r < n && error_feedback; ++r) residual_sum += engine.residual(r)[i];
        const double deviation = total[i] - t * exact[i];
        deviation2 += deviation * deviation;
        residual2 += residual_sum * residual_sum;
        mismatch2 += (deviation + residual_sum) * (deviation + residual_sum);
      }
      averaged.push_back(std::sqrt(deviation2) / (t * exact_norm));
      if (error_feedback) {
        EXPECT_LT(std::sqrt(mismatch2), 1e-5 * t * exact_norm) << "Σ_t out_t - T·exact != -Σ_i e_i at T=" << t;
        EXPECT_LT(std::sqrt(residual2), 3 * exact_norm) << "residuals grow, T=" << t;
      }
    }
    EXPECT_GT(first, 0.3);  // rank 2 of rank-6 matrices loses much of the energy
    if (error_feedback) {
      EXPECT_LT(averaged[0], first / 5);
      EXPECT_LT(averaged[1], 0.6 * averaged[0]);  // ~1/T
    } else {
      EXPECT_GT(averaged[1], first / 2);
    }
  }
}

// The error decreases with the rank; with warm start (and no feedback, so the input stays put) the
// power iteration converges to the best rank-r approximation (Eckart-Young, via BDCSVD).
TEST(PowerSgd, ErrorShrinksWithRankAndWarmStartReachesTheSvdOptimum) {
  const uint64_t rows = 90, cols = 70;
  const auto layers = layout_of({{rows, cols}});
  std::mt19937 gen(6);
  // Decaying spectrum σ_k = 0.7^k on random orthonormal bases, split over two ranks.
  const Eigen::HouseholderQR<Mat> qr_u(gaussian(rows, rows, gen)), qr_v(gaussian(cols, cols, gen));
  const Mat u = qr_u.householderQ() * Mat::Identity(rows, cols), v = qr_v.householderQ() * Mat::Identity(cols, cols);
  Eigen::VectorXd sigma(cols);
  for (Eigen::Index k = 0; k < sigma.size(); ++k) sigma(k) = std::pow(0.7, static_cast<double>(k));
  const Mat total = u * sigma.asDiagonal() * v.transpose();
  const Mat part = gaussian(rows, cols, gen, 0.01);
  std::vector<std::vector<float>> inputs(2, std::vector<float>(rows * cols));
  put(inputs[0], layers[0], total - part);
  put(inputs[1], layers[0], part);
  const auto exact = exact_sum(inputs);

  double previous = 1e9;
  for (uint32_t r : {1u, 2u, 4u, 8u, 16u}) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    auto comp = make("powersgd", {{"rank", r}, {"error_feedback", false}});
    comp->set_layout(layers);
    double err = 0;
    for (int t = 0; t < 8; ++t) err = rel_error(exact, run_round(*comp, inputs).out[1]);
    EXPECT_LT(err, previous);
    previous = err;
    double tail = 0, all = 0;
    for (Eigen::Index k = 0; k < sigma.size(); ++k) {
      all += sigma(k) * sigma(k);
      if (k >= r) tail += sigma(k) * sigma(k);
    }
    EXPECT_LT(err, 1.02 * std::sqrt(tail / all) + 1e-5);
  }
}

TEST(PowerSgd, RepeatableAndIndependentOfThreadCount) {
  const auto layers = layout_of({{64, 40}, {40, 1}, {30, 50}});
  const uint64_t d = layers.back().offset + layers.back().count;
  std::mt19937 gen(8);
  std::vector<std::vector<float>> inputs(3, std::vector<float>(d));
  for (auto& in : inputs)
    for (const auto& l : layers) put(in, l, gaussian(l.rows, l.cols, gen));
  auto two_rounds = [&](int threads) {
    kern::set_worker_threads(threads);
    auto comp = make("powersgd", {{"rank", 3}});
    comp->set_layout(layers);
    run_round(*comp, inputs);
    return run_round(*comp, inputs).out;
  };
  const auto a = two_rounds(1), b = two_rounds(3);
  kern::set_worker_threads(2);
  EXPECT_EQ(a, b);
}

TEST(PowerSgd, DeclaresItsParameters) {
  EXPECT_FALSE(CompressorRegistry::global().create("powersgd", {{"rank", 0}}).ok());
  EXPECT_FALSE(CompressorRegistry::global().create("powersgd", {{"rank", 257}}).ok());
  auto comp = make("powersgd", nlohmann::json::object());
  ASSERT_TRUE(comp);
  EXPECT_EQ(dynamic_cast<LowRankCompressor&>(*comp).rank(), 4u);
  EXPECT_FALSE(comp->unbiased());
  EXPECT_EQ(comp->determinism(), Determinism::kRunToRun);
  EXPECT_EQ(comp->wire_bytes({3, 10}, {2, 4}), 40u);
}

// --- Marchenko-Pastur error model (CQM) ----------------------------------------------------------

// EDGC Lemma 1's closed form, F(λ; a, b) / (2π p) with p = min(m, n), written out independently.
double paper_cdf(double lambda, double m, double n) {
  const double p = std::min(m, n), q = std::max(m, n);
  const double a = std::pow(std::sqrt(q) - std::sqrt(p), 2), b = std::pow(std::sqrt(q) + std::sqrt(p), 2);
  const double atan_term = a > 0 ? std::atan(std::sqrt(b * (lambda - a) / (a * (b - lambda)))) : std::numbers::pi / 2;
  const double f = -2 * std::sqrt(a * b) * atan_term + (a + b) * std::asin(std::sqrt((lambda - a) / (b - a))) +
                   std::sqrt((lambda - a) * (b - lambda));
  return f / (2 * std::numbers::pi * p);
}

TEST(MarchenkoPastur, CdfMatchesThePapersClosedForm) {
  for (const auto& [m, n] : {std::pair{100, 200}, std::pair{150, 150}, std::pair{300, 60}, std::pair{1000, 999}}) {
    const double p = std::min(m, n), q = std::max(m, n);
    const double a = std::pow(std::sqrt(q) - std::sqrt(p), 2), b = std::pow(std::sqrt(q) + std::sqrt(p), 2);
    EXPECT_EQ(marchenko_pastur_cdf(a - 1, m, n), 0.0);
    EXPECT_EQ(marchenko_pastur_cdf(b + 1, m, n), 1.0);
    for (double t : {0.001, 0.05, 0.3, 0.5, 0.77, 0.999}) {
      const double lambda = a + t * (b - a);
      SCOPED_TRACE(fmt::format("{} x {} lambda={}", m, n, lambda));
      EXPECT_NEAR(marchenko_pastur_cdf(lambda, m, n), paper_cdf(lambda, m, n), 1e-9);
    }
  }
}

TEST(MarchenkoPastur, TruncationErrorEndpointsMonotoneAndSymmetric) {
  EXPECT_NEAR(mp_truncation_error(0, 120, 80), std::sqrt(120.0 * 80.0), 1e-9);
  EXPECT_NEAR(mp_truncation_error(1e-9, 120, 80), std::sqrt(120.0 * 80.0), 1e-3);
  EXPECT_EQ(mp_truncation_error(80, 120, 80), 0.0);
  double previous = mp_truncation_error(0, 120, 80);
  for (int r = 1; r < 80; ++r) {
    const double g = mp_truncation_error(r, 120, 80);
    ASSERT_LT(g, previous) << r;
    ASSERT_EQ(g, mp_truncation_error(r, 80, 120));
    previous = g;
  }
}

// g(r; m, n) against ‖A - A_r‖_F of Gaussian matrices, from Eigen's BDCSVD (mean over 3 draws).
TEST(MarchenkoPastur, TruncationErrorMatchesEmpiricalSvds) {
  std::mt19937 gen(9);
  for (const auto& [m, n] : {std::pair{120, 240}, std::pair{160, 160}, std::pair{300, 80}}) {
    const int p = std::min(m, n);
    std::vector<Eigen::VectorXd> spectra;
    for (int s = 0; s < 3; ++s) spectra.push_back(Eigen::BDCSVD<Mat>(gaussian(m, n, gen)).singularValues());
    for (int r : {p / 8, p / 4, p / 2, 3 * p / 4}) {
      double empirical = 0;
      for (const auto& sv : spectra) empirical += std::sqrt(sv.tail(p - r).squaredNorm()) / 3;
      SCOPED_TRACE(fmt::format("{} x {} r={}", m, n, r));
      EXPECT_NEAR(mp_truncation_error(r, m, n) / empirical, 1.0, 0.03);
    }
  }
}

// --- EDGC controller -------------------------------------------------------------------------------

EdgcControllerConfig config_of(uint32_t max_rank, uint32_t min_rank, uint32_t step, bool warmup) {
  EdgcControllerConfig c;
  c.max_rank = max_rank;
  c.min_rank = min_rank;
  c.step_limit = step;
  c.window_rounds = 1;
  c.sample_interval = 1;
  c.warmup = warmup;
  return c;
}

TEST(EdgcController, InverseOfTheLayoutErrorIsTheIdentityOnRanks) {
  const auto layers = layout_of({{256, 128}, {128, 1}, {128, 128}, {20, 30}});
  const std::vector<double> g = edgc_error_by_rank(layers, 64);
  ASSERT_EQ(g.size(), 66u);
  EdgcRankController c(config_of(64, 16, 8, false), g);
  for (uint32_t r = 1; r <= 64; ++r) {
    ASSERT_LT(g[r], g[r - 1]) << r;
    EXPECT_EQ(c.inverse_error(g[r]), r);
    EXPECT_EQ(c.inverse_error(0.5 * (g[r] + g[r - 1])), r);  // between two ranks: the larger (error <= target)
  }
  EXPECT_EQ(c.inverse_error(g[64] * 0.999), 65u);  // past r_max
  EXPECT_EQ(c.inverse_error(1e9), 1u);
}

TEST(EdgcController, LowersTheRankWhenEntropyDropsWithinBoundsAndStepLimit) {
  const auto layers = layout_of({{512, 512}, {512, 256}});
  EdgcRankController c(config_of(64, 16, 8, false), edgc_error_by_rank(layers, 64));
  EXPECT_EQ(c.rank(), 64u);
  auto round = [&](double h) {
    ASSERT_TRUE(c.samples_round());
    c.add_entropy(h);
    c.end_round();
  };
  round(5.0);  // the anchor: same entropy, same rank
  EXPECT_EQ(c.anchor_entropy(), 5.0);
  EXPECT_EQ(c.rank(), 64u);
  // A small drop moves the rank by less than s, exactly to the Theorem 3 target.
  round(4.98);
  const uint32_t small = *c.last_target_rank();
  EXPECT_LT(small, 64u);
  EXPECT_GE(small, 64u - 8);
  EXPECT_EQ(c.rank(), small);
  // Halving σ (one bit less) asks for far less: steps of s down to r_min, never below.
  std::vector<uint32_t> seen;
  for (int w = 0; w < 8; ++w) {
    const uint32_t before = c.rank();
    round(4.0);
    EXPECT_LT(*c.last_target_rank(), 16u);
    EXPECT_EQ(c.rank(), std::max<uint32_t>(16, before - 8));
    seen.push_back(c.rank());
  }
  EXPECT_EQ(seen.back(), 16u);
  // Entropy back above the anchor: steps of s up to r_max, never above.
  for (int w = 0; w < 8; ++w) {
    const uint32_t before = c.rank();
    round(5.5);
    EXPECT_EQ(*c.last_target_rank(), 65u);
    EXPECT_EQ(c.rank(), std::min<uint32_t>(64, before + 8));
  }
  EXPECT_EQ(c.rank(), 64u);
}

TEST(EdgcController, SamplesEveryInverseAlphaRoundsAndDecidesAtWindowEnds) {
  const auto layers = layout_of({{256, 256}});
  EdgcControllerConfig cfg = config_of(32, 8, 4, false);
  cfg.window_rounds = 10;
  cfg.sample_interval = 5;
  EdgcRankController c(cfg, edgc_error_by_rank(layers, 32));
  std::vector<uint64_t> sampled;
  for (int t = 0; t < 30; ++t) {
    if (c.samples_round()) {
      sampled.push_back(c.round());
      c.add_entropy(t < 10 ? 3.0 : (t % 10 == 0 ? 1.0 : 2.0));  // second window's mean: 1.5
    }
    const uint32_t before = c.rank();
    c.end_round();
    if ((t + 1) % 10 != 0) {
      EXPECT_EQ(c.rank(), before) << "rank changed inside a window at round " << t;
    }
  }
  EXPECT_EQ(sampled, (std::vector<uint64_t>{0, 5, 10, 15, 20, 25}));
  EXPECT_EQ(c.anchor_entropy(), 3.0);
  EXPECT_EQ(c.last_window_entropy(), 1.5);
  EXPECT_EQ(c.rank(), 32u - 4 - 4);
}

TEST(EdgcController, WarmupLastsUntilTheRankFallsBelowRmaxAndTheFloorIsReached) {
  const auto layers = layout_of({{256, 256}});
  EdgcControllerConfig cfg = config_of(32, 8, 4, true);
  cfg.window_rounds = 2;
  cfg.min_warmup_rounds = 6;
  EdgcRankController c(cfg, edgc_error_by_rank(layers, 32));
  auto window = [&](double h) {
    for (int i = 0; i < 2; ++i) {
      if (c.samples_round()) c.add_entropy(h);
      c.end_round();
    }
  };
  EXPECT_EQ(c.rank(), 0u);
  window(4.0);  // anchor
  window(4.0);  // same entropy: r_new = r_max, warm-up goes on
  EXPECT_TRUE(c.warming_up());
  EXPECT_EQ(c.rank(), 0u);
  window(2.0);  // r_new < r_max, but only 6 rounds... which is the floor: compression starts
  EXPECT_FALSE(c.warming_up());
  EXPECT_EQ(c.round(), 6u);
  EXPECT_EQ(c.rank(), 32u - 4);

  EdgcControllerConfig later = cfg;
  later.min_warmup_rounds = 7;  // the floor falls inside the fourth window: it ends there
  EdgcRankController d(later, edgc_error_by_rank(layers, 32));
  for (double h : {4.0, 4.0, 2.0}) {
    for (int i = 0; i < 2; ++i) {
      if (d.samples_round()) d.add_entropy(h);
      d.end_round();
    }
  }
  EXPECT_TRUE(d.warming_up());
  for (int i = 0; i < 2; ++i) {
    if (d.samples_round()) d.add_entropy(2.0);
    d.end_round();
  }
  EXPECT_FALSE(d.warming_up());
  EXPECT_EQ(d.rank(), 32u - 4);
}

// --- EDGC end to end --------------------------------------------------------------------------------

// The paper's setting: GPT2-2.5B's 1920 x 1920 MLP shards (TP4) at 32 Gbps give r_max = 64, r_min = 16.
TEST(Edgc, DacBoundGivesThePapersRankBoundsOnGpt2Shards) {
  auto comp = make("edgc", nlohmann::json::object());
  ASSERT_TRUE(comp);
  comp->set_layout(layout_of({{1920, 1920}, {1920, 1}, {1920, 1920}}));
  const auto& c = dynamic_cast<EdgcCompressor&>(*comp).controller().config();
  EXPECT_EQ(c.max_rank, 64u);
  EXPECT_EQ(c.min_rank, 16u);
  EXPECT_EQ(c.sample_interval, 10u);
  EXPECT_EQ(c.window_rounds, 1000u);
  EXPECT_EQ(c.min_warmup_rounds, 23000u);
  // A faster network leaves less room for compression; a slower one more.
  EXPECT_LT(edgc_max_rank(layout_of({{1920, 1920}}), 400e9 / 8, 0.56e12, true, 256), 64u);
  EXPECT_GT(edgc_max_rank(layout_of({{1920, 1920}}), 10e9 / 8, 0.56e12, true, 256), 64u);
}

TEST(Edgc, EntropyEstimateSeesTheGradientScale) {
  EdgcOptions o;
  EdgcCompressor comp(o);
  const auto layers = layout_of({{200, 100}, {100, 1}, {100, 100}});
  comp.set_layout(layers);
  std::mt19937 gen(10);
  std::vector<float> x(layers.back().offset + layers.back().count), y(x.size());
  for (const auto& l : layers) put(x, l, gaussian(l.rows, l.cols, gen, 0.01));
  for (size_t i = 0; i < x.size(); ++i) y[i] = 0.5f * x[i];
  const kern::RngKey key{1, 0, 0, kPlanStream};
  const auto hx = comp.entropy_estimate(x, key), hy = comp.entropy_estimate(y, key);
  ASSERT_TRUE(hx && hy);
  EXPECT_NEAR(*hx - *hy, 1.0, 1e-6);  // same sample, half the scale: one bit less
  // Differential entropy of N(0, σ²) in bits: log2(σ sqrt(2πe)).
  EXPECT_NEAR(*hx, std::log2(0.01 * std::sqrt(2 * std::numbers::pi * std::numbers::e)), 0.1);
  EXPECT_FALSE(comp.entropy_estimate(std::vector<float>(x.size(), 0.0f), key));
}

// Window 1, α = 1: the entropy of round t (sent in round t's metadata phase) sets the rank of round
// t + 1. The gradients shrink 4x at round 1: round 1 still runs at r_max, round 2 at r_max - s.
TEST(Edgc, RankFollowsEntropyFromTheNextRound) {
  const auto layers = layout_of({{96, 64}, {64, 1}, {96, 64}});
  const uint64_t d = layers.back().offset + layers.back().count;
  auto comp = make("edgc", {{"warmup", false}, {"window", 1}, {"alpha", 1.0}, {"max_rank", 8}, {"step_limit", 3}});
  ASSERT_TRUE(comp);
  comp->set_layout(layers);
  auto& edgc = dynamic_cast<EdgcCompressor&>(*comp);
  ASSERT_EQ(edgc.controller().config().max_rank, 8u);
  ASSERT_EQ(edgc.controller().config().min_rank, 2u);
  std::mt19937 gen(11);
  std::vector<std::vector<float>> inputs(2, std::vector<float>(d));
  for (auto& in : inputs)
    for (const auto& l : layers) put(in, l, gaussian(l.rows, l.cols, gen));
  auto plan_bytes = [](uint32_t r) { return 4u * (96 * r * 2) + 8; };  // P of two layers + entropy entries
  auto reduced = [](uint32_t r) { return 64u * r * 2 + 64; };

  std::vector<uint32_t> ranks;
  for (int t = 0; t < 5; ++t) {
    if (t == 1)
      for (auto& in : inputs)
        for (float& v : in) v *= 0.25f;
    const uint32_t r = edgc.rank();
    ranks.push_back(r);
    const RoundResult res = run_round(*comp, inputs);
    EXPECT_EQ(res.plan_bytes, plan_bytes(r)) << "round " << t;
    EXPECT_EQ(res.reduced, reduced(r)) << "round " << t;
    EXPECT_EQ(res.wire_bytes, res.expected_wire_bytes);
    for (const auto& o : res.out) EXPECT_EQ(o, res.out[0]);
  }
  EXPECT_EQ(ranks, (std::vector<uint32_t>{8, 8, 5, 2, 2}));
}

// Algorithm 1's samples of a pipeline run, drawn a layer at a time for a few ranks at once and
// every sampled round in one pass, are the ranks' mean entropy_estimate() on the whole draws, bit
// for bit: layers at odd offsets, a 1-D layer, one or every rank at a time, one or two threads, and
// a second sampling setting computed on its own.
TEST(Edgc, RoundEntropiesAreTheEstimatesOfTheWholeDraw) {
  const auto layers = layout_of({{3, 5}, {63, 1}, {40, 30}, {7, 1}, {25, 41}, {1, 9}});
  const BucketShape stage{layers.back().offset + layers.back().count, layers};
  ASSERT_EQ(layers[4].offset % 2, 1u);  // a matrix at 1285: its piece starts one entry early
  const uint32_t dp = 3, rounds = 7;
  const SyntheticGradients synthetic(traces::SyntheticGradientSpec{}, 7);
  const RankTensors draw = synthetic.draw(stage.elements, dp, RoundEntropies::kSalt);
  auto alg1 = [&](double beta) {
    auto c = std::make_unique<EdgcCompressor>(EdgcOptions{.window_rounds = 4, .alpha = 0.5, .beta = beta});
    c->set_layout(layers);
    return c;
  };
  auto expected = [&](const EdgcCompressor& c, uint32_t round) {
    double sum = 0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < dp; ++k)
      if (auto h = c.entropy_estimate(draw[k], kern::RngKey{7, round, k, kPlanStream})) sum += *h, ++n;
    return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
  };
  const auto pa = alg1(0.25), pb = alg1(0.5);
  const EdgcCompressor &a = *pa, &b = *pb;
  const int saved = kern::worker_threads();
  EXPECT_EQ(RoundEntropies::ranks_at_once(stage, dp), dp);
  EXPECT_EQ(RoundEntropies::ranks_at_once(stage, dp, 1.0), 1u);
  for (int threads : {1, 2})
    for (double budget : {RoundEntropies::kRanksAtOnceBytes, 1.0}) {
      kern::set_worker_threads(threads);
      RoundEntropies shared(synthetic, stage, dp, rounds, budget);
      for (uint32_t r : {0u, 2u, 4u, 6u}) {  // window 4, every 2nd round
        ASSERT_TRUE(a.controller().samples(r));
        const std::optional<double> want = expected(a, r), want_b = expected(b, r);
        ASSERT_TRUE(want && want_b);
        EXPECT_EQ(shared.mean(a, r), want) << "round " << r << ", threads " << threads << ", budget " << budget;
        EXPECT_EQ(shared.mean(b, r), want_b) << "round " << r;
        EXPECT_NE(*want, *want_b);
      }
    }
  kern::set_worker_threads(saved);
}

TEST(Edgc, WarmupSendsTheTensorUncompressed) {
  const auto layers = layout_of({{96, 64}, {64, 1}});
  const uint64_t d = layers.back().offset + layers.back().count;
  auto comp = make("edgc", {{"window", 4}, {"alpha", 0.5}});
  ASSERT_TRUE(comp);
  comp->set_layout(layers);
  std::mt19937 gen(12);
  std::vector<std::vector<float>> inputs(3, std::vector<float>(d));
  for (auto& in : inputs)
    for (const auto& l : layers) put(in, l, gaussian(l.rows, l.cols, gen));
  for (int t = 0; t < 4; ++t) {
    const RoundResult res = run_round(*comp, inputs);
    EXPECT_EQ(res.plan_bytes, t % 2 == 0 ? 8u : 0u) << "round " << t;  // only the entropy, every 2 rounds
    EXPECT_EQ(res.reduced, d);
    for (const auto& o : res.out) EXPECT_LT(rel_error(exact_sum(inputs), o), 1e-6);
  }
  EXPECT_TRUE(dynamic_cast<EdgcCompressor&>(*comp).controller().warming_up());
}

}  // namespace
}  // namespace ccsim::algo
