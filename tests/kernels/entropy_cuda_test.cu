// The CUDA histogram-entropy kernels (kernels/cuda/entropy_cuda.hpp) against the CPU references
// (kernels/stats/entropy.hpp). Exact: the sampled range (as values: the sign of a zero bound may
// differ, see the header), the bin counts (histogram() of the CPU's sample), histogram()'s total.
// The entropy is checked twice: bit for bit against entropy_bits' loop run on the host with the
// correctly rounded log2 the kernel uses (same counts, same order, same operations), and against
// the CPU's sampled_histogram_entropy within a few ulps per non-empty bin, the difference glibc's
// log2 can make (the header explains; the tests report how many entropies matched exactly).
// Inputs: several families (normal, ties on bin edges, constant, two values, denormals, huge,
// non-finite, signed zeros as bounds), bins on either side of the shared-memory limit, sample
// fractions from 0 to 1, index bases off a Philox block, misaligned buffers, and the shipped
// gradient dump as EDGC samples it. GPU tests skip without a device; argument checks run anywhere.

// fmt 9 turns FMT_CONSTEXPR off under nvcc; see dynamiq_cuda_test.cu. Must precede every fmt include.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/cr_math.cuh"
#include "kernels/cuda/entropy_cuda.hpp"
#include "kernels/stats/entropy.hpp"
#include "tests/kernels/cuda_test_support.cuh"
#include "traces/gradient_dump.hpp"

namespace ccsim::kern {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::to_bits;
using testing::case_seed;

// --- inputs --------------------------------------------------------------------------------------

enum class Input { kNormal, kEdges, kConstant, kTwoValues, kDenormals, kHuge, kNonFinite, kSignedZeros, kAllNaN };

const char* input_name(Input in) {
  switch (in) {
    case Input::kNormal: return "normal";
    case Input::kEdges: return "edges";
    case Input::kConstant: return "constant";
    case Input::kTwoValues: return "twovalues";
    case Input::kDenormals: return "denormals";
    case Input::kHuge: return "huge";
    case Input::kNonFinite: return "nonfinite";
    case Input::kSignedZeros: return "signedzeros";
    case Input::kAllNaN: return "allnan";
  }
  return "?";
}

constexpr Input kInputs[] = {Input::kNormal, Input::kEdges,     Input::kConstant,    Input::kTwoValues,
                             Input::kDenormals, Input::kHuge,  Input::kNonFinite, Input::kSignedZeros,
                             Input::kAllNaN};

// kEdges: small integers in [-8, 8], so that many values fall exactly on bin edges for bin counts
// dividing 16; kSignedZeros: non-negative values with +0 and -0 (the minimum, in either order), or
// non-positive ones with both zeros as the maximum.
std::vector<float> make_input(Input kind, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  std::vector<float> x(n);
  const bool negative_side = seed % 2 == 0;
  for (uint64_t i = 0; i < n; ++i) {
    switch (kind) {
      case Input::kNormal: x[i] = normal(rng) * 0.01f; break;
      case Input::kEdges: x[i] = static_cast<float>(static_cast<int>(rng() % 17) - 8); break;
      case Input::kConstant: x[i] = 0.375f; break;
      case Input::kTwoValues: x[i] = rng() % 3 == 0 ? -2.5f : 7.0f; break;
      case Input::kDenormals:
        x[i] = from_bits(static_cast<uint32_t>(rng() % 0x800000u)) * (rng() % 2 ? 1.0f : -1.0f);
        break;
      case Input::kHuge: x[i] = (rng() % 2 ? FLT_MAX : -FLT_MAX) * unit(rng); break;
      case Input::kNonFinite: {
        const uint64_t r = rng() % 6;
        x[i] = r == 0   ? (rng() % 2 ? INFINITY : -INFINITY)
               : r == 1 ? from_bits(0x7FC00000u | static_cast<uint32_t>(rng() & 0x3FFFFF))
               : r == 2 ? from_bits(0xFF800001u | static_cast<uint32_t>(rng() & 0x3FFFFF))
                        : normal(rng);
        break;
      }
      case Input::kSignedZeros: {
        const float v = rng() % 4 == 0 ? (rng() % 2 ? 0.0f : -0.0f) : std::fabs(normal(rng));
        x[i] = negative_side ? -v : v;
        break;
      }
      case Input::kAllNaN: x[i] = from_bits(0x7FC00000u | static_cast<uint32_t>(i & 0xFFFF)); break;
    }
  }
  return x;
}

// --- CPU side ------------------------------------------------------------------------------------

// The CPU's sample: finite x[i] with in_sample(key, index_base + i, fraction) (every entry for
// fraction >= 1, as sampled_entropy skips the draws then), in index order.
std::vector<float> cpu_sample(std::span<const float> x, float fraction, const RngKey& key, uint64_t index_base) {
  std::vector<float> s;
  for (uint64_t i = 0; i < x.size(); ++i) {
    if ((fraction >= 1.0f || in_sample(key, index_base + i, fraction)) && std::isfinite(x[i])) s.push_back(x[i]);
  }
  return s;
}

// entropy_bits() operation for operation, with the kernel's correctly rounded log2.
double entropy_bits_cr(const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0.0;
  double h = 0.0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    h -= p * cr::log2_cr(p);
  }
  return h;
}

// Bound on |entropy with glibc's log2 - entropy with a correctly rounded one|: each non-empty bin's
// log2 may differ by one ulp, moving its term p log2 p by about two ulps of the term and the
// running sum's rounding by an ulp of the sum.
double entropy_tolerance(const std::vector<uint64_t>& counts, double h) {
  uint64_t used = 0;
  for (uint64_t c : counts) used += c != 0;
  return 4.0 * static_cast<double>(used) * std::ldexp(std::max(1.0, h), -52);
}

// How many GPU entropies equaled the CPU's exactly, over the whole test program.
struct EntropyStats {
  uint64_t exact = 0;
  uint64_t total = 0;
  ~EntropyStats() {
    if (total == 0) return;
    std::printf("[entropy_cuda_test] GPU entropy == CPU entropy bit for bit in %llu of %llu cases\n",
                static_cast<unsigned long long>(exact), static_cast<unsigned long long>(total));
  }
};
EntropyStats g_stats;

// --- GPU side ------------------------------------------------------------------------------------

struct Placement {
  uint64_t x = 0;     // bytes, multiple of 4
  uint64_t temp = 0;  // bytes, multiple of 8 (the counts are 64-bit)
};

struct GpuEntropy {
  double entropy = 0;
  float range[2] = {0, 0};
  std::vector<uint64_t> counts;
};

GpuEntropy gpu_sampled_entropy(std::span<const float> x, uint32_t bins, float fraction, const RngKey& key,
                               uint64_t index_base, Placement at = {}) {
  GpuEntropy out;
  DeviceBuffer<float> d_x(std::max<uint64_t>(x.size(), 1), at.x);
  DeviceBuffer<double> d_h(1);
  EXPECT_NE(d_x.get(), nullptr);
  EXPECT_NE(d_h.get(), nullptr);
  EXPECT_EQ(d_x.upload(x), cudaSuccess);
  size_t bytes = 0;
  const Status s = sampled_histogram_entropy_cuda(nullptr, bytes, d_x.get(), x.size(), bins, fraction, key, index_base,
                                            d_h.get());
  EXPECT_TRUE(s.ok()) << s.message();
  DeviceBuffer<uint8_t> d_temp(bytes, at.temp);
  EXPECT_NE(d_temp.get(), nullptr);
  EXPECT_EQ(cudaMemset(d_temp.get(), 0x77, bytes), cudaSuccess);  // garbage: the op must initialize it
  const Status run = sampled_histogram_entropy_cuda(d_temp.get(), bytes, d_x.get(), x.size(), bins, fraction, key,
                                                    index_base, d_h.get());
  EXPECT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&out.entropy, d_h.get(), sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  const EntropyCudaScratch scratch = entropy_cuda_scratch(d_temp.get());
  EXPECT_EQ(cudaMemcpy(out.range, scratch.d_range, sizeof out.range, cudaMemcpyDeviceToHost), cudaSuccess);
  out.counts.resize(bins);
  EXPECT_EQ(cudaMemcpy(out.counts.data(), scratch.d_counts, bins * sizeof(uint64_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

// Every check of one sampled entropy.
void check_sampled(std::span<const float> x, uint32_t bins, float fraction, const RngKey& key, uint64_t index_base,
                   Placement at = {}) {
  const std::vector<float> sample = cpu_sample(x, fraction, key, index_base);
  const double cpu = sampled_histogram_entropy(x.data(), x.size(), bins, fraction, key, index_base);
  const GpuEntropy gpu = gpu_sampled_entropy(x, bins, fraction, key, index_base, at);
  std::vector<uint64_t> counts(bins, 0);
  if (sample.empty()) {
    EXPECT_EQ(to_bits(gpu.range[0]), to_bits(INFINITY));
    EXPECT_EQ(to_bits(gpu.range[1]), to_bits(-INFINITY));
  } else {
    const auto [lo, hi] = std::minmax_element(sample.begin(), sample.end());
    EXPECT_EQ(gpu.range[0], *lo);  // as values: +0 == -0
    EXPECT_EQ(gpu.range[1], *hi);
    if (*hi > *lo) histogram(sample.data(), sample.size(), bins, *lo, *hi, counts.data());
  }
  uint64_t bad = 0;
  for (uint32_t b = 0; b < bins; ++b) {
    if (counts[b] != gpu.counts[b] && ++bad <= 5) {
      ADD_FAILURE() << fmt::format("bin {}: cpu {} gpu {}", b, counts[b], gpu.counts[b]);
    }
  }
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(to_bits(entropy_bits(counts.data(), bins)), to_bits(cpu)) << "the CPU's counts do not explain its entropy";
  const double cr_value = entropy_bits_cr(counts);
  EXPECT_EQ(to_bits(gpu.entropy), to_bits(cr_value))
      << fmt::format("gpu {} host replica with the same log2 {}", gpu.entropy, cr_value);
  EXPECT_LE(std::fabs(gpu.entropy - cpu), entropy_tolerance(counts, cpu))
      << fmt::format("gpu {:.17g} cpu {:.17g}", gpu.entropy, cpu);
  ++g_stats.total;
  g_stats.exact += to_bits(gpu.entropy) == to_bits(cpu);
}

// --- GPU tests -----------------------------------------------------------------------------------

// Every input family by sizes, bin counts (both counting paths) and sample fractions.
TEST(EntropyCuda, SampledEntropyMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const Input in : kInputs) {
    for (const uint64_t n : {1, 5, 1000, 100003}) {
      for (const uint32_t bins : {1u, 2u, 7u, 256u, kEntropyCudaSharedBins, kEntropyCudaSharedBins + 1}) {
        for (const float fraction : {0.0f, 0.25f, 1.0f}) {
          const uint64_t seed = case_seed(n, static_cast<uint64_t>(in), bins, static_cast<uint64_t>(fraction * 4));
          const RngKey key{seed, 3, 1, 7};
          SCOPED_TRACE(fmt::format("input={} n={} bins={} fraction={} seed={:#x}", input_name(in), n, bins, fraction,
                                   seed));
          check_sampled(make_input(in, n, seed), bins, fraction, key, 0);
        }
      }
    }
  }
}

// Index bases off a Philox block (the first and last quads partial), tiny and near-one fractions,
// 65536 bins (EDGC's maximum) and a long vector.
TEST(EntropyCuda, IndexBasesFractionsAndLargeShapes) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> x = make_input(Input::kNormal, 1000003, 5);
  for (const uint64_t base : {uint64_t{1}, uint64_t{3}, uint64_t{6}, (uint64_t{1} << 40) + 5}) {
    for (const float fraction : {1e-4f, 0.25f, 0.999f}) {
      SCOPED_TRACE(fmt::format("index_base={} fraction={}", base, fraction));
      check_sampled(std::span<const float>(x).first(12345), 256, fraction, RngKey{11, 2, 3, 4}, base);
    }
  }
  check_sampled(x, 65536, 1.0f, RngKey{}, 0);
  check_sampled(x, 65536, 0.25f, RngKey{1, 2, 3, 4}, 17);
  const std::vector<float> big = make_input(Input::kNormal, (uint64_t{1} << 23) + 3, 9);
  check_sampled(big, 256, 0.25f, RngKey{9, 9, 9, 9}, 2);
  check_sampled(big, 1000, 1.0f, RngKey{}, 0);
}

TEST(EntropyCuda, MatchesCpuOverSeeds) {
  SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const uint64_t n = 5000 + seed * 977;
    SCOPED_TRACE(fmt::format("seed={} n={}", seed, n));
    const uint32_t bins = 16 + 31 * static_cast<uint32_t>(seed);
    check_sampled(make_input(seed % 3 == 0 ? Input::kEdges : Input::kNormal, n, seed), bins, 0.25f,
                  RngKey{seed, 1, 2, 3}, seed);
  }
}

TEST(EntropyCuda, MatchesCpuWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const Placement at : {Placement{4, 0}, Placement{12, 8}, Placement{8, 24}}) {
    SCOPED_TRACE(fmt::format("x+{} temp+{}", at.x, at.temp));
    check_sampled(make_input(Input::kNormal, 40001, at.x), 256, 0.25f, RngKey{7, 0, 0, 1}, 1, at);
    check_sampled(make_input(Input::kEdges, 40001, at.temp), 16, 1.0f, RngKey{}, 0, at);
  }
}

// histogram(): given bounds (entries outside them go to the edge bins), its total, and the
// entropy of its counts through entropy_bits_cuda.
TEST(EntropyCuda, HistogramAndEntropyBitsMatchCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> x = make_input(Input::kNonFinite, 50000, 3);
  for (const uint32_t bins : {1u, 3u, 256u, 20000u}) {
    for (const auto& [lo, hi] : {std::pair{-1.0f, 1.0f}, std::pair{-0.5f, 3.0f}, std::pair{0.0f, 1e-3f}}) {
      SCOPED_TRACE(fmt::format("bins={} lo={} hi={}", bins, lo, hi));
      std::vector<uint64_t> cpu(bins), gpu(bins);
      const uint64_t total = histogram(x.data(), x.size(), bins, lo, hi, cpu.data());
      DeviceBuffer<float> d_x(x.size(), 4);
      DeviceBuffer<uint64_t> d_counts(bins), d_total(1);
      DeviceBuffer<double> d_h(1);
      ASSERT_CUDA_OK(d_x.upload(x));
      ASSERT_STATUS_OK(histogram_cuda(d_x.get(), x.size(), bins, lo, hi, d_counts.get(), d_total.get()));
      ASSERT_STATUS_OK(entropy_bits_cuda(d_counts.get(), bins, d_h.get()));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      ASSERT_CUDA_OK(d_counts.download(gpu));
      uint64_t gpu_total = 0;
      double h = 0;
      ASSERT_CUDA_OK(cudaMemcpy(&gpu_total, d_total.get(), sizeof gpu_total, cudaMemcpyDeviceToHost));
      ASSERT_CUDA_OK(cudaMemcpy(&h, d_h.get(), sizeof h, cudaMemcpyDeviceToHost));
      EXPECT_EQ(gpu_total, total);
      EXPECT_EQ(gpu, cpu);
      EXPECT_EQ(to_bits(h), to_bits(entropy_bits_cr(cpu)));
      const double cpu_h = entropy_bits(cpu.data(), bins);
      EXPECT_LE(std::fabs(h - cpu_h), entropy_tolerance(cpu, cpu_h));
    }
  }
}

// Crafted counts: huge totals, one non-empty bin (entropy 0), equal counts (log2 of a power of two
// is exact), all empty (0), and counts of every size.
TEST(EntropyCuda, EntropyBitsOfCraftedCounts) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(42);
  std::vector<std::vector<uint64_t>> cases = {
      {0, 0, 0},
      {0, 12345, 0},
      std::vector<uint64_t>(1024, 7),
      std::vector<uint64_t>(3000, uint64_t{1} << 30),
      {uint64_t{1} << 40, 1, 3, (uint64_t{1} << 39) + 7, 0, 99},
  };
  for (int r = 0; r < 20; ++r) {
    std::vector<uint64_t> c(1 + rng() % 5000);
    for (uint64_t& v : c) v = rng() % 3 == 0 ? 0 : rng() % (uint64_t{1} << (rng() % 40));
    cases.push_back(std::move(c));
  }
  uint64_t exact = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<uint64_t>& c = cases[i];
    SCOPED_TRACE(fmt::format("case {} ({} bins)", i, c.size()));
    DeviceBuffer<uint64_t> d_counts(c.size());
    DeviceBuffer<double> d_h(1);
    ASSERT_CUDA_OK(d_counts.upload(c));
    ASSERT_STATUS_OK(entropy_bits_cuda(d_counts.get(), static_cast<uint32_t>(c.size()), d_h.get()));
    double h = 0;
    ASSERT_CUDA_OK(cudaMemcpy(&h, d_h.get(), sizeof h, cudaMemcpyDeviceToHost));
    const double cpu = entropy_bits(c.data(), static_cast<uint32_t>(c.size()));
    EXPECT_EQ(to_bits(h), to_bits(entropy_bits_cr(c)));
    EXPECT_LE(std::fabs(h - cpu), entropy_tolerance(c, cpu));
    exact += to_bits(h) == to_bits(cpu);
  }
  EXPECT_EQ(to_bits(entropy_bits_cr(cases[2])), to_bits(10.0));
  RecordProperty("exact_matches", fmt::format("{} of {}", exact, cases.size()));
}

// The shipped gradient dump (gpt-bpe) sampled as EDGC's GDS does (beta = 0.25, 256 bins, global
// indices), on every worker and step, whole vectors and layer-sized pieces.
TEST(EntropyCuda, MatchesCpuOnTheShippedDump) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";
  auto dump = traces::GradientDump::open(dir);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  for (size_t step = 0; step < dump->steps(); ++step) {
    for (uint32_t w = 0; w < dump->workers(); ++w) {
      auto g = dump->worker(w, step);
      ASSERT_TRUE(g.ok()) << g.status().message();
      const std::span<const float> x = g->values();
      const RngKey key{1234 + step, static_cast<uint32_t>(step), w, 9};
      SCOPED_TRACE(fmt::format("step={} worker={} n={}", step, w, x.size()));
      check_sampled(x, 256, 0.25f, key, 0);
      check_sampled(x, 256, 1.0f, key, 0);
      for (uint64_t offset = 0; offset + 65536 <= x.size(); offset += 100003) {
        check_sampled(x.subspan(offset, 65536), 256, 0.25f, key, offset);
      }
    }
  }
}

// --- arguments (checked before any device work: need no device) --------------------------------

TEST(EntropyCudaArguments, RejectsBadBinsRangesFractionsAndPointers) {
  auto* x = reinterpret_cast<float*>(uintptr_t{256});
  auto* counts = reinterpret_cast<uint64_t*>(uintptr_t{256});
  auto* h = reinterpret_cast<double*>(uintptr_t{256});
  auto* temp = reinterpret_cast<void*>(uintptr_t{4096});
  size_t bytes = 1 << 20;
  EXPECT_EQ(histogram_cuda(x, 10, 0, 0.0f, 1.0f, counts).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(histogram_cuda(x, 10, 4, 1.0f, 1.0f, counts).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(histogram_cuda(x, 10, 4, 0.0f, NAN, counts).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(histogram_cuda(nullptr, 10, 4, 0.0f, 1.0f, counts).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(histogram_cuda(x, 10, 4, 0.0f, 1.0f, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(histogram_cuda(x, kEntropyCudaMaxEntries + 1, 4, 0.0f, 1.0f, counts).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(entropy_bits_cuda(counts, 0, h).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(entropy_bits_cuda(nullptr, 4, h).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(entropy_bits_cuda(counts, 4, nullptr).code(), StatusCode::kInvalidArgument);
  const RngKey key{};
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 0, 0.5f, key, 0, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 4, 1.5f, key, 0, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 4, -0.1f, key, 0, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 4, NAN, key, 0, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 4, 0.5f, key, kEntropyCudaMaxEntries - 5, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, nullptr, 10, 4, 0.5f, key, 0, h).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sampled_histogram_entropy_cuda(temp, bytes, x, 10, 4, 0.5f, key, 0, nullptr).code(),
            StatusCode::kInvalidArgument);
  size_t small = 256 + 8 * 4 - 1;
  const Status s = sampled_histogram_entropy_cuda(temp, small, x, 10, 4, 0.5f, key, 0, h);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.message();
  EXPECT_EQ(histogram_entropy_cuda(temp, bytes, x, 10, 0, h).code(), StatusCode::kInvalidArgument);
}

// The workspace query is host-only: range, then the counts at a fixed offset.
TEST(EntropyCudaArguments, WorkspaceQueryAndLayout) {
  size_t bytes = 0;
  ASSERT_STATUS_OK(sampled_histogram_entropy_cuda(nullptr, bytes, nullptr, 100, 256, 0.25f, RngKey{}, 0, nullptr));
  EXPECT_EQ(bytes, 256u + 256u * 8u);
  size_t again = 0;
  ASSERT_STATUS_OK(histogram_entropy_cuda(nullptr, again, nullptr, 0, 256, nullptr));
  EXPECT_EQ(again, bytes);
  const auto* base = reinterpret_cast<const void*>(uintptr_t{4096});
  const EntropyCudaScratch scratch = entropy_cuda_scratch(base);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(scratch.d_range), 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(scratch.d_counts), 4096u + 256u);
}

// The host replica of the kernel's log2 against glibc and known values (runs anywhere): exact for
// powers of two, and within one ulp of std::log2 everywhere.
TEST(EntropyCudaArguments, CorrectlyRoundedLog2IsWithinAnUlpOfGlibc) {
  for (int e = -60; e <= 0; ++e) EXPECT_EQ(cr::log2_cr(std::ldexp(1.0, e)), static_cast<double>(e));
  std::mt19937_64 rng(3);
  uint64_t differ = 0;
  for (int i = 0; i < 100000; ++i) {
    const double p = static_cast<double>(1 + rng() % 1000000) / 1000003.0;
    const double a = cr::log2_cr(p), b = std::log2(p);
    const double ulp = std::max(std::nextafter(b, INFINITY) - b, b - std::nextafter(b, -INFINITY));
    EXPECT_LE(std::fabs(a - b), ulp) << fmt::format("p={:a}", p);
    differ += a != b;
  }
  RecordProperty("differ_from_glibc", std::to_string(differ) + " of 100000");
}

}  // namespace
}  // namespace ccsim::kern
