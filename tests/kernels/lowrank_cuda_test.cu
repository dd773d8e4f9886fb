// The CUDA PowerSGD kernels (kernels/cuda/lowrank_cuda.hpp) against the CPU references
// (kernels/linalg/power_iteration.hpp).
//  - GEMMs (cuBLAS): not bit-identical by design (summation order). Each element is checked
//    against the exact value (in double) within fp32_sum_error_bound: gamma_n (Σ|a||b| + |c|) +
//    n 2^-126, gamma_n = n u / (1 - n u), u = 2^-24, n the number of terms; and against the CPU's
//    within twice that. The share of elements equal to the CPU's is recorded.
//  - Gram-Schmidt: bit for bit on identical input (a column holding NaN or inf becomes +0).
//  - Normals: bit for bit against a host replica of the kernel's arithmetic (same correctly rounded
//    log and cos), and against standard_normal_at (glibc's log and cos) exactly, with every
//    mismatch reported (the header explains why one is possible but expected never to show).
// Shapes from 1 x 1 to thousands of rows, ranks 1 to 32 (rank > rows too), empty dimensions,
// rank-deficient, scaled, subnormal and non-finite inputs, misaligned buffers, and matrices from the
// shipped gradient dump. GPU tests skip without a device; argument checks and the host replica run
// anywhere.

// fmt 9 turns FMT_CONSTEXPR off under nvcc; see dynamiq_cuda_test.cu. Must precede every fmt include.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/cr_math.cuh"
#include "kernels/cuda/lowrank_cuda.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "tests/kernels/cuda_test_support.cuh"
#include "traces/gradient_dump.hpp"

namespace ccsim::kern {
namespace {

using testing::DeviceBuffer;

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> random_matrix(uint64_t rows, uint64_t cols, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> m(rows * cols);
  for (float& v : m) v = normal(rng) * scale;
  return m;
}

// A cuBLAS handle for one test, made and destroyed through the kernels' own functions (which open
// cuBLAS on first use; this test does not link it).
class Cublas {
 public:
  Cublas() {
    if (auto h = cublas_create(); h.ok()) handle_ = *h;
  }
  ~Cublas() { cublas_destroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  bool ok() const { return handle_ != nullptr; }
  CublasHandle get() const { return handle_; }

 private:
  CublasHandle handle_ = nullptr;
};

// --- GEMM ----------------------------------------------------------------------------------------

enum class Op { kProject, kProjectTransposed, kExpand, kSubtract };

const char* op_name(Op op) {
  switch (op) {
    case Op::kProject: return "project";
    case Op::kProjectTransposed: return "project_transposed";
    case Op::kExpand: return "expand";
    case Op::kSubtract: return "subtract";
  }
  return "?";
}

// Exact value (double) and Σ|a||b| (+|c|) of every output element, row-major like the output, from
// the double references of kernels/linalg/power_iteration.hpp, and the number of terms.
struct Reference {
  std::vector<double> exact;
  std::vector<double> magnitude;
  uint64_t terms = 0;
};

Reference reference(Op op, const std::vector<float>& m, const std::vector<float>& p, const std::vector<float>& q,
                    const std::vector<float>& c, uint64_t rows, uint64_t cols, uint32_t rank) {
  switch (op) {
    case Op::kProject:  // P = M Q
      return {lowrank_project_f64(m.data(), rows, cols, q.data(), rank, false),
              lowrank_project_f64(m.data(), rows, cols, q.data(), rank, true), cols};
    case Op::kProjectTransposed:  // Q = M^T P
      return {lowrank_project_transposed_f64(m.data(), rows, cols, p.data(), rank, false),
              lowrank_project_transposed_f64(m.data(), rows, cols, p.data(), rank, true), rows};
    case Op::kExpand:
    case Op::kSubtract: {  // O = (c) -/+ P Q^T
      const std::vector<double> w(q.begin(), q.end());
      Reference r{lowrank_expand_f64(p.data(), w.data(), rows, cols, rank, false),
                  lowrank_expand_f64(p.data(), w.data(), rows, cols, rank, true), rank};
      if (op == Op::kSubtract) {
        r.terms = rank + 1;
        for (uint64_t e = 0; e < rows * cols; ++e) {
          r.exact[e] = c[e] - r.exact[e];
          r.magnitude[e] += std::fabs(c[e]);
        }
      }
      return r;
    }
  }
  return {};
}

// Runs `op` on the CPU and the GPU and checks both against the bound (see the file comment).
// `offset`: byte offset of every device buffer (a multiple of 4).
void check_gemm(Op op, uint64_t rows, uint64_t cols, uint32_t rank, uint64_t seed, uint64_t offset = 0,
                float scale = 1.0f) {
  SCOPED_TRACE(fmt::format("{} rows={} cols={} rank={} seed={} offset={}", op_name(op), rows, cols, rank, seed,
                           offset));
  Cublas blas;
  ASSERT_TRUE(blas.ok());
  const std::vector<float> m = random_matrix(rows, cols, seed, scale);
  const std::vector<float> p = random_matrix(rows, rank, seed + 1, scale);
  const std::vector<float> q = random_matrix(cols, rank, seed + 2, scale);
  const std::vector<float> c = random_matrix(rows, cols, seed + 3, scale);
  const uint64_t out_size = op == Op::kProject ? rows * rank : op == Op::kProjectTransposed ? cols * rank : rows * cols;
  std::vector<float> cpu(out_size, 0.0f);
  if (op == Op::kSubtract) cpu = c;
  switch (op) {
    case Op::kProject: lowrank_project(m.data(), rows, cols, q.data(), rank, cpu.data()); break;
    case Op::kProjectTransposed: lowrank_project_transposed(m.data(), rows, cols, p.data(), rank, cpu.data()); break;
    case Op::kExpand: lowrank_expand(p.data(), q.data(), rows, cols, rank, cpu.data()); break;
    case Op::kSubtract: lowrank_subtract(p.data(), q.data(), rows, cols, rank, cpu.data()); break;
  }
  DeviceBuffer<float> d_m(m.size(), offset), d_p(p.size(), offset), d_q(q.size(), offset), d_out(out_size, offset);
  ASSERT_CUDA_OK(d_m.upload(m));
  ASSERT_CUDA_OK(d_p.upload(p));
  ASSERT_CUDA_OK(d_q.upload(q));
  if (op == Op::kSubtract) {
    ASSERT_CUDA_OK(d_out.upload(c));
  } else {
    ASSERT_CUDA_OK(cudaMemset(d_out.get(), 0xFF, out_size * sizeof(float)));  // NaN garbage: must be overwritten
  }
  switch (op) {
    case Op::kProject:
      ASSERT_STATUS_OK(lowrank_project_cuda(blas.get(), d_m.get(), rows, cols, d_q.get(), rank, d_out.get()));
      break;
    case Op::kProjectTransposed:
      ASSERT_STATUS_OK(
          lowrank_project_transposed_cuda(blas.get(), d_m.get(), rows, cols, d_p.get(), rank, d_out.get()));
      break;
    case Op::kExpand:
      ASSERT_STATUS_OK(lowrank_expand_cuda(blas.get(), d_p.get(), d_q.get(), rows, cols, rank, d_out.get()));
      break;
    case Op::kSubtract:
      ASSERT_STATUS_OK(lowrank_subtract_cuda(blas.get(), d_p.get(), d_q.get(), rows, cols, rank, d_out.get()));
      break;
  }
  std::vector<float> gpu(out_size);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(d_out.download(gpu));
  const Reference ref = reference(op, m, p, q, c, rows, cols, rank);
  uint64_t bad = 0, equal = 0;
  for (uint64_t e = 0; e < out_size; ++e) {
    const double g = gpu[e], cp = cpu[e], x = ref.exact[e];
    const double bound = fp32_sum_error_bound(ref.magnitude[e], ref.terms);
    const bool ok = std::fabs(g - x) <= bound && std::fabs(g - cp) <= 2 * bound;
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << fmt::format("element {}: gpu {} cpu {} exact {} |gpu-exact| {} |gpu-cpu| {} bound {}", e, g,
                                   cp, x, std::fabs(g - x), std::fabs(g - cp), bound);
    }
    equal += to_bits(gpu[e]) == to_bits(cpu[e]);
  }
  EXPECT_EQ(bad, 0u);
  ::testing::Test::RecordProperty(fmt::format("{}_{}x{}x{}_equal_to_cpu", op_name(op), rows, cols, rank),
                 fmt::format("{} of {}", equal, out_size));
}

constexpr Op kOps[] = {Op::kProject, Op::kProjectTransposed, Op::kExpand, Op::kSubtract};

TEST(LowrankCudaGemm, WithinTheErrorBoundOfTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    uint64_t rows, cols;
    uint32_t rank;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{64, 48, 4}, Shape{300, 257, 8}, Shape{1024, 768, 16},
                        Shape{33, 4097, 2}, Shape{5000, 3, 1}, Shape{3, 5000, 32}}) {
    for (const Op op : kOps) check_gemm(op, s.rows, s.cols, s.rank, s.rows * 31 + s.cols);
  }
}

TEST(LowrankCudaGemm, ScaledAndMisalignedOperands) {
  SKIP_WITHOUT_GPU();
  for (const Op op : kOps) {
    check_gemm(op, 129, 65, 5, 1, 4);
    check_gemm(op, 77, 300, 3, 2, 12);
    check_gemm(op, 100, 100, 4, 3, 0, 1e-20f);  // products of about 1e-40: subnormal in fp32
    check_gemm(op, 100, 100, 4, 4, 0, 1e15f);   // products of about 1e30
  }
}

// Empty dimensions: nothing to write, or zeros where the inner dimension is empty (as Eigen), or
// nothing subtracted.
TEST(LowrankCudaGemm, EmptyDimensions) {
  SKIP_WITHOUT_GPU();
  Cublas blas;
  ASSERT_TRUE(blas.ok());
  DeviceBuffer<float> d_a(64), d_b(64), d_out(64);
  const std::vector<float> garbage(64, 5.0f);
  std::vector<float> out(64);
  auto expect_out = [&](float v, uint64_t n) {
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_CUDA_OK(d_out.download(out));
    for (uint64_t e = 0; e < n; ++e) EXPECT_EQ(out[e], v) << "element " << e;
  };
  ASSERT_CUDA_OK(d_out.upload(garbage));
  ASSERT_STATUS_OK(lowrank_project_cuda(blas.get(), d_a.get(), 8, 0, d_b.get(), 4, d_out.get()));  // cols = 0
  expect_out(0.0f, 32);
  ASSERT_CUDA_OK(d_out.upload(garbage));
  ASSERT_STATUS_OK(lowrank_project_transposed_cuda(blas.get(), d_a.get(), 0, 8, d_b.get(), 4, d_out.get()));
  expect_out(0.0f, 32);
  ASSERT_CUDA_OK(d_out.upload(garbage));
  ASSERT_STATUS_OK(lowrank_expand_cuda(blas.get(), d_a.get(), d_b.get(), 4, 8, 0, d_out.get()));  // rank = 0
  expect_out(0.0f, 32);
  ASSERT_CUDA_OK(d_out.upload(garbage));
  ASSERT_STATUS_OK(lowrank_subtract_cuda(blas.get(), d_a.get(), d_b.get(), 4, 8, 0, d_out.get()));
  expect_out(5.0f, 64);
  ASSERT_STATUS_OK(lowrank_project_cuda(blas.get(), d_a.get(), 8, 8, d_b.get(), 0, d_out.get()));  // rank = 0
  expect_out(5.0f, 64);
}

// --- Gram-Schmidt --------------------------------------------------------------------------------

// orthonormalize on both sides from the same P; floats equal bit for bit (non-finite columns become
// +0 on both sides, so no NaN is left to excuse).
void check_orthonormalize(const std::vector<float>& p, uint64_t rows, uint32_t rank, uint64_t offset = 0,
                          uint64_t temp_offset = 0) {
  std::vector<float> cpu = p;
  orthonormalize_columns(cpu.data(), rows, rank);
  DeviceBuffer<float> d_p(p.size(), offset);
  ASSERT_CUDA_OK(d_p.upload(p));
  size_t bytes = 0;
  ASSERT_STATUS_OK(orthonormalize_columns_cuda(nullptr, bytes, d_p.get(), rows, rank));
  EXPECT_EQ(bytes, rows * rank == 0 ? 1 : rows * rank * sizeof(double) + alignof(double) - 1);
  DeviceBuffer<uint8_t> d_temp(bytes, temp_offset);
  ASSERT_STATUS_OK(orthonormalize_columns_cuda(d_temp.get(), bytes, d_p.get(), rows, rank));
  std::vector<float> gpu(p.size());
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(d_p.download(gpu));
  uint64_t bad = 0;
  for (uint64_t e = 0; e < p.size(); ++e) {
    if (to_bits(cpu[e]) != to_bits(gpu[e]) && ++bad <= 5) {
      ADD_FAILURE() << fmt::format("row {} column {}: cpu {:#010x} ({}) gpu {:#010x} ({})", e / rank, e % rank,
                                   to_bits(cpu[e]), cpu[e], to_bits(gpu[e]), gpu[e]);
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(LowrankCudaOrthonormalize, BitIdenticalOnRandomMatrices) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    uint64_t rows;
    uint32_t rank;
  };
  for (const Shape s : {Shape{1, 1}, Shape{5, 1}, Shape{7, 3}, Shape{64, 4}, Shape{3, 5}, Shape{1000, 8},
                        Shape{4099, 16}, Shape{600, 32}, Shape{20000, 4}}) {
    for (uint64_t seed = 0; seed < 3; ++seed) {
      SCOPED_TRACE(fmt::format("rows={} rank={} seed={}", s.rows, s.rank, seed));
      check_orthonormalize(random_matrix(s.rows, s.rank, seed * 1000 + s.rows), s.rows, s.rank);
    }
  }
}

// Rank-deficient P (zero, repeated and dependent columns), all-zero P, wide scales, subnormals,
// and non-finite entries (their columns become +0 on both sides).
TEST(LowrankCudaOrthonormalize, BitIdenticalOnAdversarialMatrices) {
  SKIP_WITHOUT_GPU();
  const uint64_t rows = 257;
  const uint32_t rank = 6;
  std::vector<float> base = random_matrix(rows, rank, 99);
  auto column_op = [&](auto&& f) {
    std::vector<float> p = base;
    for (uint64_t i = 0; i < rows; ++i) f(p.data() + i * rank, i);
    return p;
  };
  const std::vector<std::pair<const char*, std::vector<float>>> cases = {
      {"zero column", column_op([](float* r, uint64_t) { r[2] = 0.0f; })},
      {"repeated column", column_op([](float* r, uint64_t) { r[3] = r[1]; })},
      {"dependent column", column_op([](float* r, uint64_t) { r[4] = 0.5f * r[0] - 3.0f * r[2]; })},
      {"all zero", std::vector<float>(rows * rank, 0.0f)},
      {"huge", column_op([](float* r, uint64_t) { r[0] *= 1e30f; r[5] *= 3e37f; })},
      {"tiny", column_op([](float* r, uint64_t) { r[1] *= 1e-30f; r[2] *= 1e-42f; })},
      {"nan", column_op([](float* r, uint64_t i) { if (i == 17) r[2] = NAN; })},
      {"inf", column_op([](float* r, uint64_t i) { if (i == 40) r[4] = -INFINITY; })},
  };
  for (const auto& [name, p] : cases) {
    SCOPED_TRACE(name);
    check_orthonormalize(p, rows, rank);
  }
}

TEST(LowrankCudaOrthonormalize, MisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  check_orthonormalize(random_matrix(333, 5, 7), 333, 5, 4, 8);
  check_orthonormalize(random_matrix(64, 3, 8), 64, 3, 12, 3);
}

// P = M Q from matrices of the shipped dump (rows x cols slices of a worker's gradient, Q of
// standard normals as PowerSGD draws it), orthonormalized on both sides from the CPU's P.
TEST(LowrankCudaOrthonormalize, BitIdenticalOnTheShippedDump) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";
  auto dump = traces::GradientDump::open(dir);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  auto g = dump->worker(0, 0);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::span<const float> x = g->values();
  struct Shape {
    uint64_t rows, cols;
    uint32_t rank;
  };
  for (const Shape s : {Shape{256, 256, 4}, Shape{768, 128, 8}, Shape{96, 1024, 16}}) {
    ASSERT_LE(s.rows * s.cols, x.size());
    SCOPED_TRACE(fmt::format("rows={} cols={} rank={}", s.rows, s.cols, s.rank));
    std::vector<float> q(s.cols * s.rank), p(s.rows * s.rank);
    for (uint64_t e = 0; e < q.size(); ++e) q[e] = standard_normal_at(RngKey{5, 1, 0, 2}, e);
    lowrank_project(x.data(), s.rows, s.cols, q.data(), s.rank, p.data());
    check_orthonormalize(p, s.rows, s.rank);
  }
}

// --- normals -------------------------------------------------------------------------------------

// The kernel's arithmetic on the host: standard_normal_at with the correctly rounded log and cos.
float normal_replica(const RngKey& key, uint64_t index) {
  const double u1 = uniform_at(key, 2 * index), u2 = uniform_at(key, 2 * index + 1);
  const double radius = std::sqrt(-2.0 * cr::log_cr(1.0 - u1));
  return static_cast<float>(radius * cr::cos_cr(0x1.921fb54442d18p+2 * u2));
}

// Compares normals with standard_normal_at (exact, mismatches reported and bounded by one ulp) and
// with the replica (exact).
void expect_normals(const RngKey& key, const std::vector<float>& gpu, auto&& index_of) {
  uint64_t differ = 0, replica_bad = 0;
  for (uint64_t e = 0; e < gpu.size(); ++e) {
    const uint64_t index = index_of(e);
    const float cpu = standard_normal_at(key, index), rep = normal_replica(key, index);
    if (to_bits(gpu[e]) != to_bits(rep) && ++replica_bad <= 5) {
      ADD_FAILURE() << fmt::format("index {}: gpu {:#010x} replica {:#010x}", index, to_bits(gpu[e]), to_bits(rep));
    }
    if (to_bits(gpu[e]) != to_bits(cpu)) {
      ++differ;
      const float ulp = std::max(std::nextafter(cpu, INFINITY) - cpu, cpu - std::nextafter(cpu, -INFINITY));
      EXPECT_LE(std::fabs(gpu[e] - cpu), ulp) << "index " << index;
      ADD_FAILURE() << fmt::format("index {}: gpu {:#010x} cpu {:#010x} (glibc log/cos misrounded across an fp32 "
                                   "boundary; see lowrank_cuda.hpp)",
                                   index, to_bits(gpu[e]), to_bits(cpu));
    }
  }
  EXPECT_EQ(replica_bad, 0u);
  ::testing::Test::RecordProperty("normals_differing_from_cpu", fmt::format("{} of {}", differ, gpu.size()));
}

TEST(LowrankCudaNormals, MatchCpu) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t base : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, (uint64_t{1} << 41) - (uint64_t{1} << 20)}) {
    for (const RngKey key : {RngKey{}, RngKey{0xDEADBEEFCAFEull, 7, 3, 11}}) {
      SCOPED_TRACE(fmt::format("index_base={} seed={:#x}", base, key.seed));
      const uint64_t n = uint64_t{1} << 20;
      DeviceBuffer<float> d_out(n, 4);
      ASSERT_STATUS_OK(standard_normal_cuda(key, base, n, d_out.get()));
      std::vector<float> gpu(n);
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      ASSERT_CUDA_OK(d_out.download(gpu));
      expect_normals(key, gpu, [base](uint64_t e) { return base + e; });
    }
  }
}

// PowerSGD's Q layout (LowRankCompressor::ensure_q): columns from first_column on drawn at
// index_base + k * cols + j, the others untouched.
TEST(LowrankCudaNormals, InitQMatchesEnsureQ) {
  SKIP_WITHOUT_GPU();
  const uint64_t cols = 301, base = 5000;
  const uint32_t rank = 8;
  const RngKey key{77, 4, 0xFFFFFFFFu, 2};
  for (const uint32_t first : {0u, 3u, 8u}) {
    SCOPED_TRACE(fmt::format("first_column={}", first));
    std::vector<float> q(cols * rank, 42.0f);
    DeviceBuffer<float> d_q(q.size());
    ASSERT_CUDA_OK(d_q.upload(q));
    ASSERT_STATUS_OK(lowrank_init_q_cuda(key, base, cols, rank, first, d_q.get()));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_CUDA_OK(d_q.download(q));
    std::vector<float> drawn;
    std::vector<uint64_t> index;
    for (uint64_t j = 0; j < cols; ++j) {
      for (uint32_t k = 0; k < rank; ++k) {
        if (k < first) {
          EXPECT_EQ(q[j * rank + k], 42.0f);
        } else {
          drawn.push_back(q[j * rank + k]);
          index.push_back(base + k * cols + j);
        }
      }
    }
    expect_normals(key, drawn, [&index](uint64_t e) { return index[e]; });
  }
}

// --- host-only checks (no device needed) ---------------------------------------------------------

// The replica of the kernel's normals against standard_normal_at on the host, over many indices:
// the evidence behind the header's claim, run on every build.
TEST(LowrankCudaHost, NormalReplicaMatchesStandardNormalAt) {
  uint64_t differ = 0;
  const RngKey key{2024, 1, 2, 3};
  for (uint64_t i = 0; i < 2000000; ++i) {
    differ += to_bits(normal_replica(key, i)) != to_bits(standard_normal_at(key, i));
  }
  EXPECT_EQ(differ, 0u);
}

TEST(LowrankCudaHost, CorrectlyRoundedLogAndCosAreWithinAnUlpOfGlibc) {
  auto ulp = [](double v) { return std::max(std::nextafter(v, INFINITY) - v, v - std::nextafter(v, -INFINITY)); };
  uint64_t log_differ = 0, cos_differ = 0;
  for (uint32_t j = 0; j < (1u << 24); j += 101) {
    const double u = static_cast<double>(static_cast<float>(j) * 0x1.0p-24f);
    const double l = cr::log_cr(1.0 - u), lg = std::log(1.0 - u);
    const double c = cr::cos_cr(0x1.921fb54442d18p+2 * u), cg = std::cos(0x1.921fb54442d18p+2 * u);
    EXPECT_LE(std::fabs(l - lg), ulp(lg)) << "u " << u;
    EXPECT_LE(std::fabs(c - cg), ulp(cg)) << "u " << u;
    log_differ += l != lg;
    cos_differ += c != cg;
  }
  EXPECT_EQ(cr::log_cr(1.0), 0.0);
  EXPECT_EQ(cr::cos_cr(0.0), 1.0);
  RecordProperty("log_differ_from_glibc", std::to_string(log_differ));
  RecordProperty("cos_differ_from_glibc", std::to_string(cos_differ));
}

// cuBLAS is found and every function resolved on first use: making a handle succeeds, or fails
// with cuBLAS's own status (no device, here), never because the library could not be opened.
TEST(LowrankCudaHost, CublasOpensOnFirstUse) {
  Result<CublasHandle> h = cublas_create();
  if (h.ok()) {
    cublas_destroy(*h);
    return;
  }
  EXPECT_NE(h.status().message().find("cublasCreate: CUBLAS_STATUS_"), std::string::npos) << h.status().message();
}

TEST(LowrankCudaArguments, RejectsBadShapesAndPointers) {
  auto* a = reinterpret_cast<float*>(uintptr_t{256});
  const uint64_t big = kLowrankCudaMaxDim + 1;
  CublasHandle none = nullptr;  // never reached: the checks fail first
  EXPECT_EQ(lowrank_project_cuda(none, a, big, 4, a, 2, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_project_transposed_cuda(none, a, 4, big, a, 2, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_expand_cuda(none, a, a, big, 4, 2, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_subtract_cuda(none, a, a, 4, big, 2, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_project_cuda(none, nullptr, 4, 4, a, 2, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_project_cuda(none, a, 4, 4, a, 2, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_expand_cuda(none, a, nullptr, 4, 4, 2, a).code(), StatusCode::kInvalidArgument);
  // Empty outputs are no-ops (the handle is never used).
  EXPECT_TRUE(lowrank_project_cuda(none, nullptr, 0, 4, nullptr, 2, nullptr).ok());
  EXPECT_TRUE(lowrank_project_transposed_cuda(none, nullptr, 4, 4, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(lowrank_expand_cuda(none, nullptr, nullptr, 4, 0, 2, nullptr).ok());
  EXPECT_TRUE(lowrank_subtract_cuda(none, a, a, 4, 4, 0, a).ok());  // rank 0: nothing subtracted

  size_t bytes = 0;
  ASSERT_STATUS_OK(orthonormalize_columns_cuda(nullptr, bytes, nullptr, 100, 4));
  const size_t needed = 100 * 4 * 8 + 7;  // the double copy and the slack to align it
  EXPECT_EQ(bytes, needed);
  ASSERT_STATUS_OK(orthonormalize_columns_cuda(nullptr, bytes, nullptr, 0, 4));
  EXPECT_EQ(bytes, 1u);
  size_t small = needed - 1;
  EXPECT_EQ(orthonormalize_columns_cuda(a, small, a, 100, 4).code(), StatusCode::kInvalidArgument);
  size_t enough = needed;
  EXPECT_EQ(orthonormalize_columns_cuda(a, enough, nullptr, 100, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(orthonormalize_columns_cuda(a, enough, a, UINT64_MAX / 2, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(orthonormalize_columns_cuda(a, enough, nullptr, 100, 0).ok());

  const RngKey key{};
  EXPECT_EQ(standard_normal_cuda(key, uint64_t{1} << 41, 1, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(standard_normal_cuda(key, 0, 10, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(standard_normal_cuda(key, 0, 0, nullptr).ok());
  EXPECT_EQ(lowrank_init_q_cuda(key, 0, 10, 4, 5, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_init_q_cuda(key, (uint64_t{1} << 41) - 10, 10, 4, 0, a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lowrank_init_q_cuda(key, 0, 10, 4, 0, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(lowrank_init_q_cuda(key, 0, 10, 4, 4, nullptr).ok());
}

}  // namespace
}  // namespace ccsim::kern
