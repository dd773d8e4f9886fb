// The CUDA OmniReduce selection kernels (kernels/cuda/select_cuda.hpp) against the CPU compressor
// (algorithms/omnireduce/omnireduce.hpp): chunk norms equal plan_local's keys bit for bit, and the
// bitmap equals plan_local's word for word. plan_local picks k = local_k(n_chunks) itself (k_0 =
// round(n_chunks * bits / 16), at least 1), so bits 1, 8 and 16 give k = 1 (few chunks), about
// half, and all; other k (0 among them) are checked against a replica of plan_local's selection
// (its keys and its nth_element order), which is itself checked against plan_local where their k
// agree. Inputs: several families (normal, chunks that are permutations of one another so that
// their keys differ only through the summation order, exact ties, zero chunks, NaN and inf chunks,
// mixed scales, denormals), partial last chunks, seeds, misaligned buffers, and the shipped
// gradient dump. GPU tests skip without a device; argument checks run anywhere.

// fmt 9 turns FMT_CONSTEXPR off under nvcc; see dynamiq_cuda_test.cu. Must precede every fmt include.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "algorithms/omnireduce/omnireduce.hpp"
#include "kernels/cuda/select_cuda.hpp"
#include "kernels/stats/entropy.hpp"
#include "tests/kernels/cuda_test_support.cuh"
#include "traces/gradient_dump.hpp"

namespace ccsim::kern {
namespace {

using algo::OmniReduceCompressor;
using algo::PlanStats;
using testing::DeviceBuffer;
using testing::from_bits;
using testing::to_bits;

// --- inputs --------------------------------------------------------------------------------------

enum class Input { kNormal, kPermuted, kTies, kZeroChunks, kNonFinite, kMixedScales, kDenormals };

const char* input_name(Input in) {
  switch (in) {
    case Input::kNormal: return "normal";
    case Input::kPermuted: return "permuted";
    case Input::kTies: return "ties";
    case Input::kZeroChunks: return "zerochunks";
    case Input::kNonFinite: return "nonfinite";
    case Input::kMixedScales: return "mixedscales";
    case Input::kDenormals: return "denormals";
  }
  return "?";
}

constexpr Input kInputs[] = {Input::kNormal,     Input::kPermuted,    Input::kTies,     Input::kZeroChunks,
                             Input::kNonFinite, Input::kMixedScales, Input::kDenormals};

// n values in chunks of `chunk`. kPermuted: every full chunk is a shuffle of the same values
// (spanning 12 decades, so the double sums depend on the order); kTies: chunks copied from three
// prototypes; kZeroChunks: three chunks in four are all zeros (of either sign); kNonFinite: some
// chunks hold a NaN (quiet or signalling, either sign), some +-inf, some both; kMixedScales: each
// chunk its own scale from 1e-30 to 1e30 (some near FLT_MAX); kDenormals: subnormal values.
std::vector<float> make_input(Input kind, uint64_t n, uint64_t chunk, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> decade(-6, 6), wide(-30, 30);
  std::vector<float> x(n);
  std::vector<float> proto(chunk);
  for (float& v : proto) v = normal(rng) * std::pow(10.0f, static_cast<float>(decade(rng)));
  std::vector<std::vector<float>> protos(3, std::vector<float>(chunk));
  for (auto& p : protos)
    for (float& v : p) v = normal(rng);
  for (uint64_t c0 = 0; c0 < n; c0 += chunk) {
    const uint64_t len = std::min(chunk, n - c0), c = c0 / chunk;
    float* out = x.data() + c0;
    switch (kind) {
      case Input::kNormal:
        for (uint64_t i = 0; i < len; ++i) out[i] = normal(rng);
        break;
      case Input::kPermuted: {
        std::vector<float> v = proto;
        std::shuffle(v.begin(), v.end(), rng);
        std::copy(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(len), out);
        break;
      }
      case Input::kTies: {
        const auto& p = protos[rng() % 3];
        std::copy(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(len), out);
        break;
      }
      case Input::kZeroChunks:
        for (uint64_t i = 0; i < len; ++i) out[i] = c % 4 != 0 ? (rng() % 2 ? -0.0f : 0.0f) : normal(rng);
        break;
      case Input::kNonFinite: {
        for (uint64_t i = 0; i < len; ++i) out[i] = normal(rng);
        const uint64_t r = rng() % 6;
        if (r == 0) out[rng() % len] = from_bits(0x7FC00000u | static_cast<uint32_t>(rng() & 0x3FFFFF));
        if (r == 1) out[rng() % len] = from_bits(0xFF800001u | static_cast<uint32_t>(rng() & 0x3FFFFF));
        if (r == 2) out[rng() % len] = rng() % 2 ? INFINITY : -INFINITY;
        if (r == 3) {
          out[rng() % len] = INFINITY;
          out[rng() % len] = from_bits(0x7FC00001u);
        }
        break;
      }
      case Input::kMixedScales: {
        const float scale = rng() % 8 == 0 ? 1e38f : std::pow(10.0f, static_cast<float>(wide(rng)));
        for (uint64_t i = 0; i < len; ++i) out[i] = normal(rng) * scale;
        break;
      }
      case Input::kDenormals:
        for (uint64_t i = 0; i < len; ++i) {
          out[i] = (rng() % 2 ? 1e-40f : -1e-42f) * (1.0f + static_cast<float>(i % 7));
        }
        break;
    }
  }
  return x;
}

// --- CPU references ------------------------------------------------------------------------------

// plan_local's bitmap for `bits` (k = local_k(n_chunks)); `k` receives that k.
std::vector<uint64_t> cpu_plan_local(std::span<const float> x, uint64_t chunk, uint32_t bits, uint64_t& k) {
  const OmniReduceCompressor c(chunk, bits, 0.8, true);
  PlanStats stats;
  stats.bits.assign(c.plan_format(x.size(), 1).bit_words, 0);
  c.plan_local(x, 0, RngKey{}, stats);
  k = c.local_k(c.chunks_of(x.size()));
  return stats.bits;
}

// plan_local's keys: the same double sum (kern::sum_squares is its loop) and NaN -> +inf.
std::vector<double> cpu_keys(std::span<const float> x, uint64_t chunk) {
  std::vector<double> key((x.size() + chunk - 1) / chunk);
  for (uint64_t c = 0; c < key.size(); ++c) {
    const double s = sum_squares(x.data() + c * chunk, std::min(chunk, x.size() - c * chunk));
    key[c] = std::isnan(s) ? std::numeric_limits<double>::infinity() : s;
  }
  return key;
}

// plan_local's selection for any k <= n (its order and its nth_element), as a bitmap.
std::vector<uint64_t> cpu_topk(const std::vector<double>& key, uint64_t k) {
  const uint64_t n = key.size();
  std::vector<uint64_t> bits(topk_bitmap_words(n), 0);
  if (k == 0) return bits;
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  auto before = [&key](uint64_t a, uint64_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(), before);
  for (uint64_t j = 0; j < k; ++j) bits[order[j] / 64] |= uint64_t{1} << (order[j] % 64);
  return bits;
}

// --- GPU runners ---------------------------------------------------------------------------------

// Byte offsets of the device buffers: floats (multiples of 4), bitmap (multiples of 8), workspace
// (any).
struct Placement {
  uint64_t x = 0;
  uint64_t bitmap = 0;
  uint64_t temp = 0;
};

std::vector<double> gpu_norms(std::span<const float> x, uint64_t chunk, uint64_t x_offset = 0) {
  const uint64_t n = (x.size() + chunk - 1) / chunk;
  DeviceBuffer<float> d_x(x.size(), x_offset);
  DeviceBuffer<double> d_norms(n);
  EXPECT_NE(d_x.get(), nullptr);
  EXPECT_NE(d_norms.get(), nullptr);
  EXPECT_EQ(d_x.upload(x), cudaSuccess);
  const Status s = omnireduce_chunk_norms_cuda(d_x.get(), x.size(), chunk, d_norms.get());
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<double> out(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_norms.download(out), cudaSuccess);
  return out;
}

// The workspace buffer for `bytes`, at byte offset `offset`.
std::unique_ptr<DeviceBuffer<uint8_t>> workspace(size_t bytes, uint64_t offset) {
  auto ws = std::make_unique<DeviceBuffer<uint8_t>>(bytes, offset);
  EXPECT_NE(ws->get(), nullptr);
  return ws;
}

std::vector<uint64_t> gpu_select(std::span<const float> x, uint64_t chunk, uint64_t k, Placement at = {}) {
  const uint64_t n = (x.size() + chunk - 1) / chunk;
  DeviceBuffer<float> d_x(x.size(), at.x);
  DeviceBuffer<uint64_t> d_bitmap(topk_bitmap_words(n), at.bitmap);
  EXPECT_NE(d_x.get(), nullptr);
  EXPECT_NE(d_bitmap.get(), nullptr);
  EXPECT_EQ(d_x.upload(x), cudaSuccess);
  // Garbage in the bitmap: the kernels must overwrite every word.
  EXPECT_EQ(cudaMemset(d_bitmap.get(), 0xA5, topk_bitmap_words(n) * sizeof(uint64_t)), cudaSuccess);
  size_t bytes = 0;
  const Status s = omnireduce_select_cuda(nullptr, bytes, d_x.get(), x.size(), chunk, k, d_bitmap.get());
  EXPECT_TRUE(s.ok()) << s.message();
  auto ws = workspace(bytes, at.temp);
  const Status run = omnireduce_select_cuda(ws->get(), bytes, d_x.get(), x.size(), chunk, k, d_bitmap.get());
  EXPECT_TRUE(run.ok()) << run.message();
  std::vector<uint64_t> out(topk_bitmap_words(n));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_bitmap.download(out), cudaSuccess);
  return out;
}

std::vector<uint64_t> gpu_topk(const std::vector<double>& keys, uint64_t k) {
  const uint64_t n = keys.size();
  DeviceBuffer<double> d_keys(n);
  DeviceBuffer<uint64_t> d_bitmap(topk_bitmap_words(n));
  EXPECT_NE(d_keys.get(), nullptr);
  EXPECT_NE(d_bitmap.get(), nullptr);
  EXPECT_EQ(d_keys.upload(keys), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_bitmap.get(), 0x5A, topk_bitmap_words(n) * sizeof(uint64_t)), cudaSuccess);
  size_t bytes = 0;
  const Status s = topk_bitmap_cuda(nullptr, bytes, d_keys.get(), n, k, d_bitmap.get());
  EXPECT_TRUE(s.ok()) << s.message();
  auto ws = workspace(bytes, 0);
  const Status run = topk_bitmap_cuda(ws->get(), bytes, d_keys.get(), n, k, d_bitmap.get());
  EXPECT_TRUE(run.ok()) << run.message();
  std::vector<uint64_t> out(topk_bitmap_words(n));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_bitmap.download(out), cudaSuccess);
  return out;
}

// --- comparisons ---------------------------------------------------------------------------------

void expect_same_keys(const std::vector<double>& cpu, const std::vector<double>& gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  uint64_t mismatches = 0;
  for (uint64_t c = 0; c < cpu.size(); ++c) {
    if (to_bits(cpu[c]) != to_bits(gpu[c]) && ++mismatches <= 5) {
      ADD_FAILURE() << fmt::format("chunk {}: cpu {:#018x} ({}) gpu {:#018x} ({})", c, to_bits(cpu[c]), cpu[c],
                                   to_bits(gpu[c]), gpu[c]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

uint64_t popcount(const std::vector<uint64_t>& bits) {
  uint64_t n = 0;
  for (uint64_t w : bits) n += static_cast<uint64_t>(__builtin_popcountll(w));
  return n;
}

void expect_same_bitmap(const std::vector<uint64_t>& cpu, const std::vector<uint64_t>& gpu, uint64_t k) {
  ASSERT_EQ(cpu.size(), gpu.size());
  EXPECT_EQ(popcount(cpu), k);
  uint64_t mismatches = 0;
  for (uint64_t w = 0; w < cpu.size(); ++w) {
    if (cpu[w] != gpu[w] && ++mismatches <= 5) {
      ADD_FAILURE() << fmt::format("word {}: cpu {:#018x} gpu {:#018x}", w, cpu[w], gpu[w]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

uint64_t case_seed(uint64_t n, uint64_t chunk, uint64_t input) {
  return 0x9E3779B97F4A7C15ull ^ (n * 0x100000001B3ull) ^ (chunk << 32) ^ (input << 8);
}

// Every check on one input: norms, plan_local at bits 1, 8 and 16, and the replica at other k.
void check_all(std::span<const float> x, uint64_t chunk, Placement at = {}) {
  const uint64_t n = (x.size() + chunk - 1) / chunk;
  const std::vector<double> keys = cpu_keys(x, chunk);
  expect_same_keys(keys, gpu_norms(x, chunk, at.x));
  // OmniReduce's chunks are powers of two (its constructor checks); other chunks use the replica.
  for (const uint32_t bits : {1u, 8u, 16u}) {
    if (!std::has_single_bit(chunk)) break;
    SCOPED_TRACE(fmt::format("plan_local bits={}", bits));
    uint64_t k = 0;
    const std::vector<uint64_t> cpu = cpu_plan_local(x, chunk, bits, k);
    ASSERT_EQ(cpu_topk(keys, k), cpu) << "the replica disagrees with plan_local";
    expect_same_bitmap(cpu, gpu_select(x, chunk, k, at), k);
  }
  for (const uint64_t k : {uint64_t{0}, uint64_t{1}, n / 3, n - 1, n}) {
    if (k > n) continue;
    SCOPED_TRACE(fmt::format("k={}", k));
    const std::vector<uint64_t> cpu = cpu_topk(keys, k);
    expect_same_bitmap(cpu, gpu_select(x, chunk, k, at), k);
    expect_same_bitmap(cpu, gpu_topk(keys, k), k);
  }
}

// --- GPU tests -----------------------------------------------------------------------------------

// Chunk sizes (OmniReduce's powers of two, and others the kernels also serve) by chunk counts
// around the bitmap's word boundaries, each with a partial last chunk and without.
TEST(SelectCuda, MatchesPlanLocalOverShapesAndInputs) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t chunk : {1, 4, 32, 33, 256, 1000, 4096}) {
    for (const uint64_t chunks : {1, 2, 63, 64, 65, 300}) {
      for (const uint64_t partial : {uint64_t{0}, chunk / 2 + 1}) {
        if (partial >= chunk) continue;
        const uint64_t n = (partial == 0 ? chunks : chunks - 1) * chunk + partial;
        for (const Input in : kInputs) {
          const uint64_t seed = case_seed(n, chunk, static_cast<uint64_t>(in));
          SCOPED_TRACE(fmt::format("chunk={} n={} input={} seed={:#x}", chunk, n, input_name(in), seed));
          check_all(make_input(in, n, chunk, seed), chunk);
        }
      }
    }
  }
}

// Many chunks: the norm kernel's wide CTAs (65536 chunks and more), and a multi-pass sort.
TEST(SelectCuda, MatchesPlanLocalWithManyChunks) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t chunk : {1, 4, 64}) {
    for (const Input in : {Input::kNormal, Input::kTies, Input::kNonFinite}) {
      const uint64_t n = 70001 * chunk - chunk / 2, seed = case_seed(n, chunk, static_cast<uint64_t>(in));
      SCOPED_TRACE(fmt::format("chunk={} n={} input={} seed={:#x}", chunk, n, input_name(in), seed));
      check_all(make_input(in, n, chunk, seed), chunk);
    }
  }
}

TEST(SelectCuda, MatchesPlanLocalOverSeeds) {
  SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const uint64_t chunk = uint64_t{1} << (seed % 9), n = chunk * (100 + seed * 37) + seed;
    SCOPED_TRACE(fmt::format("chunk={} n={} seed={}", chunk, n, seed));
    check_all(make_input(seed % 2 == 0 ? Input::kNormal : Input::kPermuted, n, chunk, seed), chunk);
  }
}

// Buffers off their natural alignment: floats by 4 and 12 bytes, the bitmap by 8, the workspace by
// any byte count.
TEST(SelectCuda, MatchesPlanLocalWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const Placement at : {Placement{4, 0, 0}, Placement{12, 8, 1}, Placement{0, 8, 77}, Placement{4, 0, 255}}) {
    const uint64_t chunk = 256, n = chunk * 97 + 13, seed = case_seed(n, at.x, at.temp);
    SCOPED_TRACE(fmt::format("x+{} bitmap+{} temp+{} seed={:#x}", at.x, at.bitmap, at.temp, seed));
    check_all(make_input(Input::kPermuted, n, chunk, seed), chunk, at);
  }
}

// Keys given directly: -0 ties with +0, NaN ranks as +inf (ties with it, lower index first),
// negative keys below zero, huge and subnormal keys.
TEST(SelectCuda, TopkOfAdversarialKeysMatchesTheCpuOrder) {
  SKIP_WITHOUT_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> keys = {0.0, -0.0, 1.0, inf, -1.0, 1.0, 4.9e-324, -4.9e-324, 1e308, inf, 0.0, -inf, 2.0};
  for (uint64_t k = 0; k <= keys.size(); ++k) {
    SCOPED_TRACE(fmt::format("k={}", k));
    expect_same_bitmap(cpu_topk(keys, k), gpu_topk(keys, k), k);
  }
  // A NaN key ranks as +inf: replace it by +inf for the CPU order (whose comparison would not be
  // a strict weak order with a NaN).
  std::vector<double> with_nan = keys;
  with_nan[5] = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> as_inf = keys;
  as_inf[5] = inf;
  for (uint64_t k = 0; k <= keys.size(); ++k) {
    SCOPED_TRACE(fmt::format("NaN key, k={}", k));
    expect_same_bitmap(cpu_topk(as_inf, k), gpu_topk(with_nan, k), k);
  }
  // All keys equal: the first k indices.
  const std::vector<double> flat(200, 3.0);
  for (const uint64_t k : {1, 63, 64, 65, 199}) expect_same_bitmap(cpu_topk(flat, k), gpu_topk(flat, k), k);
}

// The shipped gradient dump (gpt-bpe): every worker and step at the default chunk (256) and two
// others, as plan_local selects with bits 8 (k = K) and the replica at a few other k.
TEST(SelectCuda, MatchesPlanLocalOnTheShippedDump) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";
  auto dump = traces::GradientDump::open(dir);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  for (size_t step = 0; step < dump->steps(); ++step) {
    for (uint32_t w = 0; w < dump->workers(); ++w) {
      auto g = dump->worker(w, step);
      ASSERT_TRUE(g.ok()) << g.status().message();
      const std::vector<float> x(g->values().begin(), g->values().end());
      for (const uint64_t chunk : {64, 256, 2048}) {
        SCOPED_TRACE(fmt::format("step={} worker={} chunk={} n={}", step, w, chunk, x.size()));
        const std::vector<double> keys = cpu_keys(x, chunk);
        expect_same_keys(keys, gpu_norms(x, chunk));
        uint64_t k = 0;
        const std::vector<uint64_t> cpu = cpu_plan_local(x, chunk, 8, k);
        expect_same_bitmap(cpu, gpu_select(x, chunk, k), k);
        const uint64_t n = keys.size();
        for (const uint64_t kk : {uint64_t{1}, n / 10, n - 1}) {
          expect_same_bitmap(cpu_topk(keys, kk), gpu_select(x, chunk, kk), kk);
        }
      }
    }
  }
}

// --- arguments (checked before any device work: need no device) --------------------------------

TEST(SelectCudaArguments, RejectsBadChunksKeysAndPointers) {
  auto* x = reinterpret_cast<float*>(uintptr_t{256});
  auto* keys = reinterpret_cast<double*>(uintptr_t{256});
  auto* bitmap = reinterpret_cast<uint64_t*>(uintptr_t{256});
  auto* temp = reinterpret_cast<void*>(uintptr_t{4096});
  size_t bytes = 1 << 20;
  EXPECT_EQ(omnireduce_chunk_norms_cuda(x, 10, 0, keys).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_chunk_norms_cuda(nullptr, 10, 4, keys).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_chunk_norms_cuda(x, 10, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_select_cuda(temp, bytes, x, 10, 0, 1, bitmap).code(), StatusCode::kInvalidArgument);
  // 10 elements in chunks of 4: 3 chunks, so k <= 3.
  const Status too_many = omnireduce_select_cuda(temp, bytes, x, 10, 4, 4, bitmap);
  EXPECT_EQ(too_many.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.message().find("k = 4 > 3"), std::string::npos) << too_many.message();
  EXPECT_EQ(omnireduce_select_cuda(nullptr, bytes, x, 10, 4, 4, bitmap).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_select_cuda(temp, bytes, nullptr, 10, 4, 1, bitmap).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_select_cuda(temp, bytes, x, 10, 4, 1, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(omnireduce_select_cuda(temp, bytes, x, kTopkCudaMaxKeys + 1, 1, 1, bitmap).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(topk_bitmap_cuda(temp, bytes, keys, 5, 6, bitmap).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(topk_bitmap_cuda(temp, bytes, nullptr, 5, 2, bitmap).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(topk_bitmap_cuda(temp, bytes, keys, 5, 2, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(topk_bitmap_cuda(temp, bytes, keys, kTopkCudaMaxKeys + 1, 2, bitmap).code(),
            StatusCode::kInvalidArgument);
}

TEST(SelectCudaArguments, EmptyInputsAreNoOps) {
  size_t bytes = 0;
  EXPECT_TRUE(omnireduce_chunk_norms_cuda(nullptr, 0, 256, nullptr).ok());
  EXPECT_TRUE(omnireduce_select_cuda(nullptr, bytes, nullptr, 0, 256, 0, nullptr).ok());
  EXPECT_EQ(bytes, 1u);
  void* temp = reinterpret_cast<void*>(uintptr_t{4096});
  EXPECT_TRUE(omnireduce_select_cuda(temp, bytes, nullptr, 0, 256, 0, nullptr).ok());
  bytes = 0;
  EXPECT_TRUE(topk_bitmap_cuda(nullptr, bytes, nullptr, 0, 0, nullptr).ok());
  EXPECT_EQ(bytes, 1u);
  EXPECT_EQ(topk_bitmap_words(0), 0u);
  EXPECT_EQ(topk_bitmap_words(64), 1u);
  EXPECT_EQ(topk_bitmap_words(65), 2u);
}

// The workspace query for a non-empty selection (asks CUB, so it needs a device) and the size
// check against it.
TEST(SelectCudaArguments, WorkspaceQueryAndSizeCheck) {
  SKIP_WITHOUT_GPU();
  size_t bytes = 0;
  ASSERT_STATUS_OK(omnireduce_select_cuda(nullptr, bytes, nullptr, 1000, 10, 5, nullptr));
  EXPECT_GE(bytes, 100 * (8 + 4) * 2u);
  size_t again = 0;
  ASSERT_STATUS_OK(topk_bitmap_cuda(nullptr, again, nullptr, 100, 5, nullptr));
  EXPECT_EQ(again, bytes);  // depends on the key count only
  DeviceBuffer<float> d_x(1000);
  DeviceBuffer<uint64_t> d_bitmap(2);
  DeviceBuffer<uint8_t> d_temp(bytes);
  size_t small = bytes - 1;
  const Status s = omnireduce_select_cuda(d_temp.get(), small, d_x.get(), 1000, 10, 5, d_bitmap.get());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ccsim::kern
