// The CUDA round-phase kernels (kernels/cuda/round_cuda.hpp) against the CPU compressors, created
// through the registry and planned with algo::plan_round on a few ranks' inputs: DynamiQ's prepare
// and finish (default and non-default super-groups, without reordering, without the mean),
// OmniReduce's union prefix, prepare and finish (compact and sparse, chunks 1 .. 256), MX's
// plan_local maxima (block scaling over block sizes 8 .. 65536; layer scaling over layouts of
// several layers, tiny and empty ones included) and layer scaling's prepare and finish, SDP4Bit
// TLq-HS's Hadamard (prepare, finish and their round trip, blocks beyond 2^116 included), qWD's
// prepare and finish (the reference update of the last rank), and the low-rank engine's residual
// add and uncompressed move (PowerSGD, EDGC; its GEMMs are lowrank_cuda_test's). Every op is compared bit for bit,
// on sizes with partial last super-groups, chunks and blocks, on the shared input families
// (zeros, denormals, values near FLT_MAX, ±inf and NaNs of both signs, the shipped gradient), with
// 16-byte aligned and misaligned device buffers and in-place calls where an op allows them. Device
// outputs are pre-filled with garbage, so an element a kernel fails to write shows up. GPU tests
// skip when no device is present; the argument checks run on any machine without touching it.

// fmt 9 turns FMT_CONSTEXPR off under nvcc (a workaround for old nvcc), which breaks its C++20
// consteval format-string check; nvcc 13 compiles the constexpr path, as g++ does (same value as
// in the g++-compiled libraries, so no ODR difference). Must precede every fmt include.
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
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/mx/mx.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cuda/round_cuda.hpp"
#include "kernels/stats/entropy.hpp"
#include "tests/kernels/cuda_test_support.cuh"

namespace ccsim::kern {
namespace {

using testing::all_inputs;
using testing::case_seed;
using testing::DeviceBuffer;
using testing::expect_same_floats;
using testing::from_bits;
using testing::Input;
using testing::input_name;
using testing::make_input;

// Byte offsets of the device buffers: 16-byte aligned (vector paths) and misaligned (scalar paths).
constexpr uint64_t kPlacements[] = {0, 4};

// --- helpers -------------------------------------------------------------------------------------

std::unique_ptr<algo::Compressor> create(const std::string& name, const nlohmann::json& params) {
  auto made = algo::CompressorRegistry::global().create(name, params);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(made).value() : nullptr;
}

// plan_round over the ranks' inputs (round 0, key seed).
void plan(algo::Compressor& c, const std::vector<std::vector<float>>& inputs, uint64_t seed) {
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  const auto report = algo::plan_round(c, spans, {seed, 0});
  ASSERT_TRUE(report.ok()) << report.status().message();
}

std::vector<std::vector<float>> rank_inputs(Input input, uint64_t n, uint32_t ranks, uint64_t seed) {
  std::vector<std::vector<float>> xs;
  for (uint32_t r = 0; r < ranks; ++r) xs.push_back(make_input(input, n, seed + r));
  return xs;
}

// A device copy of `v` at byte offset `offset` (ASSERTs the allocation in the caller).
template <class T>
std::unique_ptr<DeviceBuffer<T>> upload(std::span<const T> v, uint64_t offset = 0) {
  auto d = std::make_unique<DeviceBuffer<T>>(v.size(), offset);
  if (d->get() != nullptr && !v.empty()) EXPECT_EQ(d->upload(v), cudaSuccess);
  return d;
}

// A device buffer of `n` elements filled with garbage.
template <class T>
std::unique_ptr<DeviceBuffer<T>> garbage(uint64_t n, uint64_t offset = 0) {
  auto d = std::make_unique<DeviceBuffer<T>>(n, offset);
  if (d->get() != nullptr) EXPECT_EQ(d->fill(0xA5), cudaSuccess);
  return d;
}

template <class T>
std::vector<T> download(const DeviceBuffer<T>& d, uint64_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (n > 0) EXPECT_EQ(d.download(v), cudaSuccess);
  return v;
}

// --- DynamiQ -------------------------------------------------------------------------------------

struct DynamiqVariant {
  const char* name;
  nlohmann::json params;
  uint32_t super_group;
};

const std::vector<DynamiqVariant>& dynamiq_variants() {
  static const std::vector<DynamiqVariant> v = {
      {"default", nlohmann::json::object(), 256},
      {"sg64", {{"super_group", 64}, {"group", 16}}, 64},
      {"sg1024_noreorder", {{"super_group", 1024}, {"group", 32}, {"reorder", false}}, 1024},
      {"nomean", {{"subtract_mean", false}}, 256},
      {"sg16_w1to16", {{"super_group", 16}, {"group", 4}, {"widths", "1-2-4-8-16"}, {"budget", 9.0}}, 16},
  };
  return v;
}

class RoundCudaDynamiq : public ::testing::TestWithParam<std::tuple<size_t, Input>> {};

// prepare of rank 0's tensor and finish of a reduced vector (NaNs meeting the plan's means
// included), for sizes with and without a partial last super-group, ranks 1 and 3. A plan of
// non-finite inputs has NaN and infinite means.
TEST_P(RoundCudaDynamiq, PrepareAndFinishMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [variant, input] = GetParam();
  const DynamiqVariant& v = dynamiq_variants()[variant];
  for (const uint64_t n : {1ull, 7ull, 255ull, 256ull, 257ull, 1000ull, 2048ull + 77, 20003ull}) {
    for (const uint32_t ranks : {1u, 3u}) {
      const uint64_t seed = case_seed(n, variant, static_cast<uint64_t>(input), ranks);
      SCOPED_TRACE(fmt::format("variant={} n={} input={} ranks={} seed={:#x}", v.name, n, input_name(input), ranks,
                               seed));
      const auto xs = rank_inputs(input, n, ranks, seed);
      auto c = create("dynamiq", v.params);
      ASSERT_NE(c, nullptr);
      ASSERT_NO_FATAL_FAILURE(plan(*c, xs, seed));
      auto& d = dynamic_cast<algo::DynamiqCompressor&>(*c);
      std::vector<float> cpu_prepared(n), cpu_finished(n);
      d.prepare(xs[0], cpu_prepared, 0, ranks, RngKey{});
      const std::vector<float> reduced = make_input(variant % 2 == 0 ? input : Input::kNonFinite, n, seed + 99);
      d.finish(reduced, cpu_finished, 0, ranks);
      const auto d_order = upload(d.order());
      const auto d_mean = upload(d.means());
      ASSERT_NE(d_order->get(), nullptr);
      ASSERT_NE(d_mean->get(), nullptr);
      for (const uint64_t at : kPlacements) {
        SCOPED_TRACE(fmt::format("placement {}", at));
        const auto d_x = upload<float>(xs[0], at), d_reduced = upload<float>(reduced, at);
        const auto d_out = garbage<float>(n, at);
        ASSERT_NE(d_x->get(), nullptr);
        ASSERT_NE(d_reduced->get(), nullptr);
        ASSERT_NE(d_out->get(), nullptr);
        ASSERT_STATUS_OK(
            dynamiq_prepare_cuda(d_x->get(), n, v.super_group, d_order->get(), d_mean->get(), d_out->get()));
        expect_same_floats(cpu_prepared, download(*d_out, n));
        ASSERT_CUDA_OK(d_out->fill(0xA5));
        ASSERT_STATUS_OK(dynamiq_finish_cuda(d_reduced->get(), n, v.super_group, d_order->get(), d_mean->get(),
                                             ranks, d_out->get()));
        expect_same_floats(cpu_finished, download(*d_out, n));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaDynamiq,
                         ::testing::Combine(::testing::Range<size_t>(0, 5), ::testing::ValuesIn(all_inputs())),
                         [](const auto& info) {
                           return fmt::format("{}_{}", dynamiq_variants()[std::get<0>(info.param)].name,
                                              input_name(std::get<1>(info.param)));
                         });

// --- OmniReduce ----------------------------------------------------------------------------------

class RoundCudaOmniReduce : public ::testing::TestWithParam<std::tuple<uint64_t, bool, Input>> {};

// The prefix from the union bitmap (with garbage bits past the last chunk, which plan_commit
// clears), prepare of rank 0's tensor (in place too, sparse; sending the union, and with send=own
// only rank 0's own top-k chunks) and finish of a reduced vector.
TEST_P(RoundCudaOmniReduce, PrefixPrepareAndFinishMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [chunk, compact, input] = GetParam();
  for (const uint64_t n : {1ull, 5ull, 64ull, 1000ull, 4099ull, 70001ull}) {
    for (const uint32_t bits : {1u, 8u, 16u}) {
     for (const bool own : {false, true}) {
      const uint32_t ranks = 3;
      const uint64_t seed = case_seed(n, chunk, 4 * bits + 2 * own + compact, static_cast<uint64_t>(input));
      SCOPED_TRACE(fmt::format("chunk={} layout={} send={} n={} bits={} input={} seed={:#x}", chunk,
                               compact ? "compact" : "sparse", own ? "own" : "union", n, bits, input_name(input),
                               seed));
      const auto xs = rank_inputs(input, n, ranks, seed);
      auto c = create("omnireduce", {{"chunk", chunk},
                                     {"bits", bits},
                                     {"layout", compact ? "compact" : "sparse"},
                                     {"send", own ? "own" : "union"}});
      ASSERT_NE(c, nullptr);
      ASSERT_NO_FATAL_FAILURE(plan(*c, xs, seed));
      auto& o = dynamic_cast<algo::OmniReduceCompressor&>(*c);
      const uint64_t chunks = o.chunks_of(n), reduced_n = o.reduced_elements(n);
      std::vector<uint64_t> bitmap(o.union_bitmap().begin(), o.union_bitmap().end());
      if (chunks % 64 != 0) bitmap.back() |= ~((uint64_t{1} << (chunks % 64)) - 1);
      std::vector<uint64_t> own_bitmap(o.own_bitmap(0).begin(), o.own_bitmap(0).end());
      ASSERT_EQ(own_bitmap.empty(), !own);
      if (own && chunks % 64 != 0) own_bitmap.back() |= ~((uint64_t{1} << (chunks % 64)) - 1);
      std::vector<float> cpu_prepared(reduced_n), cpu_finished(n);
      o.prepare(xs[0], cpu_prepared, 0, ranks, RngKey{});
      const std::vector<float> reduced = make_input(Input::kNonFinite, reduced_n, seed + 7);
      o.finish(reduced, cpu_finished, 0, ranks);

      const auto d_bitmap = upload<uint64_t>(bitmap);
      const auto d_own = upload<uint64_t>(own ? own_bitmap : std::vector<uint64_t>(1, 0));
      const uint64_t* own_words = own ? d_own->get() : nullptr;
      const auto d_prefix = garbage<uint64_t>(chunks + 1);
      DeviceBuffer<uint8_t> d_temp(omnireduce_prefix_cuda_temp_bytes());
      ASSERT_NE(d_bitmap->get(), nullptr);
      ASSERT_NE(d_own->get(), nullptr);
      ASSERT_NE(d_prefix->get(), nullptr);
      ASSERT_NE(d_temp.get(), nullptr);
      ASSERT_STATUS_OK(omnireduce_prefix_cuda(d_bitmap->get(), n, chunk, d_temp.get(),
                                              omnireduce_prefix_cuda_temp_bytes(), d_prefix->get()));
      const std::vector<uint64_t> prefix = download(*d_prefix, chunks + 1);
      EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), o.union_prefix().begin(), o.union_prefix().end()));
      for (const uint64_t at : kPlacements) {
        SCOPED_TRACE(fmt::format("placement {}", at));
        const auto d_x = upload<float>(xs[0], at), d_reduced = upload<float>(reduced, at);
        const auto d_out = garbage<float>(reduced_n, at), d_tensor = garbage<float>(n, at);
        ASSERT_NE(d_x->get(), nullptr);
        ASSERT_NE(d_reduced->get(), nullptr);
        ASSERT_NE(d_out->get(), nullptr);
        ASSERT_NE(d_tensor->get(), nullptr);
        ASSERT_STATUS_OK(omnireduce_prepare_cuda(d_x->get(), n, chunk, d_bitmap->get(), d_prefix->get(), own_words,
                                                 compact, d_out->get()));
        expect_same_floats(cpu_prepared, download(*d_out, reduced_n));
        if (!compact) {
          ASSERT_STATUS_OK(omnireduce_prepare_cuda(d_x->get(), n, chunk, d_bitmap->get(), nullptr, own_words, false,
                                                   d_x->get()));
          expect_same_floats(cpu_prepared, download(*d_x, n));
        }
        ASSERT_STATUS_OK(omnireduce_finish_cuda(d_reduced->get(), n, chunk, d_bitmap->get(), d_prefix->get(), compact,
                                                d_tensor->get()));
        expect_same_floats(cpu_finished, download(*d_tensor, n));
      }
     }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaOmniReduce,
                         ::testing::Combine(::testing::Values(1, 2, 4, 16, 256), ::testing::Bool(),
                                            ::testing::Values(Input::kNormal, Input::kZeros, Input::kNonFinite,
                                                              Input::kGradient)),
                         [](const auto& info) {
                           return fmt::format("chunk{}_{}_{}", std::get<0>(info.param),
                                              std::get<1>(info.param) ? "compact" : "sparse",
                                              input_name(std::get<2>(info.param)));
                         });

// The prefix alone on random bitmaps large enough for several tiles of several steps each.
TEST(RoundCudaOmniReducePrefix, LargeRandomBitmapsMatchTheSerialPrefix) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t chunks : {uint64_t{64} * 256 * 3 + 5, uint64_t{64} * 256 * 1024 + 64 * 300 + 17,
                                uint64_t{64} * 256 * 2049 + 1}) {
    for (const uint64_t chunk : {1ull, 8ull}) {
      const uint64_t count = chunks * chunk - (chunk > 1 ? 3 : 0);
      SCOPED_TRACE(fmt::format("chunks={} chunk={}", chunks, chunk));
      std::mt19937_64 rng(chunks + chunk);
      std::vector<uint64_t> bitmap((chunks + 63) / 64);
      for (uint64_t& w : bitmap) w = rng() & rng();
      std::vector<uint64_t> expected(chunks + 1, 0);
      for (uint64_t c = 0; c < chunks; ++c) {
        const bool in = ((bitmap[c / 64] >> (c % 64)) & 1) != 0;
        expected[c + 1] = expected[c] + (in ? std::min(chunk, count - c * chunk) : 0);
      }
      const auto d_bitmap = upload<uint64_t>(bitmap);
      const auto d_prefix = garbage<uint64_t>(chunks + 1);
      DeviceBuffer<uint8_t> d_temp(omnireduce_prefix_cuda_temp_bytes());
      ASSERT_NE(d_bitmap->get(), nullptr);
      ASSERT_NE(d_prefix->get(), nullptr);
      ASSERT_NE(d_temp.get(), nullptr);
      ASSERT_STATUS_OK(omnireduce_prefix_cuda(d_bitmap->get(), count, chunk, d_temp.get(),
                                              omnireduce_prefix_cuda_temp_bytes(), d_prefix->get()));
      const std::vector<uint64_t> prefix = download(*d_prefix, chunks + 1);
      const auto first = std::mismatch(prefix.begin(), prefix.end(), expected.begin()).first;
      EXPECT_TRUE(first == prefix.end()) << "first difference at chunk " << (first - prefix.begin());
    }
  }
}

// --- MX global scaling ---------------------------------------------------------------------------

class RoundCudaMxBlockMax : public ::testing::TestWithParam<std::tuple<uint32_t, Input>> {};

// Block scaling's plan_local (kern::block_max_abs over MX blocks) for sizes with partial blocks.
TEST_P(RoundCudaMxBlockMax, PlanLocalMatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [block, input] = GetParam();
  for (const uint64_t n : {1ull, 7ull, 33ull, 1000ull, 4097ull, 9000ull, 40003ull}) {
    const uint64_t seed = case_seed(n, block, static_cast<uint64_t>(input), 5);
    SCOPED_TRACE(fmt::format("block={} n={} input={} seed={:#x}", block, n, input_name(input), seed));
    auto c = create("mxfp8", {{"block", block}, {"global_scaling", "block"}});
    ASSERT_NE(c, nullptr);
    const std::vector<float> x = make_input(input, n, seed);
    algo::PlanStats cpu;
    cpu.max.assign(c->plan_format(n, 2).max_entries, 0.0f);
    c->plan_local(x, 0, RngKey{}, cpu);
    for (const uint64_t at : kPlacements) {
      const auto d_x = upload<float>(x, at);
      const auto d_max = garbage<float>(cpu.max.size(), at);
      ASSERT_NE(d_x->get(), nullptr);
      ASSERT_NE(d_max->get(), nullptr);
      ASSERT_STATUS_OK(block_max_abs_cuda(d_x->get(), n, block, d_max->get()));
      expect_same_floats(cpu.max, download(*d_max, cpu.max.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaMxBlockMax,
                         ::testing::Combine(::testing::Values(8u, 32u, 512u, 4096u, 65536u),
                                            ::testing::ValuesIn(all_inputs())),
                         [](const auto& info) {
                           return fmt::format("block{}_{}", std::get<0>(info.param),
                                              input_name(std::get<1>(info.param)));
                         });

// block_max_abs_cuda for block sizes MX does not use (any block >= 1, the CPU's contract).
TEST(RoundCudaMxBlockMaxShapes, OddBlocksMatchTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (const uint32_t block : {1u, 3u, 100u, 3000u, 70000u}) {
    for (const uint64_t n : {1ull, 99ull, 5000ull, 100001ull}) {
      SCOPED_TRACE(fmt::format("block={} n={}", block, n));
      const std::vector<float> x = make_input(Input::kNonFinite, n, n + block);
      std::vector<float> expected((n + block - 1) / block);
      block_max_abs(x.data(), n, block, expected.data());
      const auto d_x = upload<float>(x, 4);
      const auto d_max = garbage<float>(expected.size());
      ASSERT_NE(d_x->get(), nullptr);
      ASSERT_NE(d_max->get(), nullptr);
      ASSERT_STATUS_OK(block_max_abs_cuda(d_x->get(), n, block, d_max->get()));
      expect_same_floats(expected, download(*d_max, expected.size()));
    }
  }
}

// A layout of [0, n): single elements, short layers, layers longer than a CTA's piece (4096) and,
// with `empty`, empty layers (one at the end).
std::vector<algo::LayerShape> random_layout(uint64_t n, uint64_t seed, bool empty) {
  std::mt19937_64 rng(seed);
  std::vector<algo::LayerShape> layers;
  for (uint64_t at = 0; at < n;) {
    uint64_t length = 0;
    switch (rng() % 6) {
      case 0: length = 1; break;
      case 1: length = 1 + rng() % 7; break;
      case 2: length = 4096 + rng() % 9000; break;
      case 3: length = empty ? 0 : 3; break;
      default: length = 1 + rng() % 700; break;
    }
    length = std::min(length, n - at);
    layers.push_back({at, length, length, 1});
    at += length;
  }
  if (empty) layers.push_back({n, 0, 0, 1});
  return layers;
}

class RoundCudaMxLayer : public ::testing::TestWithParam<std::tuple<int, Input>> {};

// Layouts of RoundCudaMxLayer: 0 one layer, 1 random layers, 2 random layers with empty ones.
std::string layout_name(int layout) {
  return layout == 0 ? "one_layer" : layout == 1 ? "layers" : "layers_with_empty";
}

// Layer scaling: plan_local's per-layer maxima, prepare (to_fpx) and finish (from_fpx, in place)
// for one layer and for random layouts.
TEST_P(RoundCudaMxLayer, PlanLocalPrepareAndFinishMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [layout, input] = GetParam();
  for (const uint64_t n : {1ull, 8ull, 1000ull, 4097ull, 40003ull}) {
    const uint32_t ranks = 2;
    const uint64_t seed = case_seed(n, layout, static_cast<uint64_t>(input), 9);
    SCOPED_TRACE(fmt::format("layout={} n={} input={} seed={:#x}", layout, n, input_name(input), seed));
    const std::vector<algo::LayerShape> layers = layout == 0 ? std::vector<algo::LayerShape>{{0, n, n, 1}}
                                                             : random_layout(n, seed, layout == 2);
    auto c = create("mxfp8", {{"global_scaling", "layer"}});
    ASSERT_NE(c, nullptr);
    c->set_layout(layers);
    const auto xs = rank_inputs(input, n, ranks, seed);
    ASSERT_NO_FATAL_FAILURE(plan(*c, xs, seed));
    const auto& mx = dynamic_cast<const algo::MxCompressor&>(*c);
    std::vector<uint64_t> offsets;
    for (const algo::LayerShape& l : layers) offsets.push_back(l.offset);
    offsets.push_back(n);
    std::vector<float> to_fpx, from_fpx;
    for (const auto& s : mx.layer_scales()) {
      to_fpx.push_back(s.to_fpx);
      from_fpx.push_back(s.from_fpx);
    }
    ASSERT_EQ(to_fpx.size(), layers.size());
    algo::PlanStats cpu;
    cpu.max.assign(c->plan_format(n, ranks).max_entries, 0.0f);
    c->plan_local(xs[0], 0, RngKey{}, cpu);
    std::vector<float> cpu_prepared(n), cpu_finished(n);
    c->prepare(xs[0], cpu_prepared, 0, ranks, RngKey{});
    const std::vector<float> reduced = make_input(Input::kNonFinite, n, seed + 5);
    c->finish(reduced, cpu_finished, 0, ranks);

    const uint64_t L = layers.size(), temp_bytes = layer_max_abs_cuda_temp_bytes(L);
    const auto d_offsets = upload<uint64_t>(offsets);
    const auto d_to = upload<float>(to_fpx), d_from = upload<float>(from_fpx);
    DeviceBuffer<uint8_t> d_temp(temp_bytes);
    ASSERT_NE(d_offsets->get(), nullptr);
    ASSERT_NE(d_to->get(), nullptr);
    ASSERT_NE(d_from->get(), nullptr);
    ASSERT_NE(d_temp.get(), nullptr);
    for (const uint64_t at : kPlacements) {
      SCOPED_TRACE(fmt::format("placement {}", at));
      const auto d_x = upload<float>(xs[0], at), d_reduced = upload<float>(reduced, at);
      const auto d_max = garbage<float>(L, at), d_out = garbage<float>(n, at);
      ASSERT_NE(d_x->get(), nullptr);
      ASSERT_NE(d_reduced->get(), nullptr);
      ASSERT_NE(d_max->get(), nullptr);
      ASSERT_NE(d_out->get(), nullptr);
      ASSERT_STATUS_OK(
          layer_max_abs_cuda(d_x->get(), n, d_offsets->get(), L, d_temp.get(), temp_bytes, d_max->get()));
      expect_same_floats(cpu.max, download(*d_max, L));
      ASSERT_STATUS_OK(scale_layers_cuda(d_x->get(), n, d_offsets->get(), L, d_to->get(), d_out->get()));
      expect_same_floats(cpu_prepared, download(*d_out, n));
      ASSERT_STATUS_OK(scale_layers_cuda(d_reduced->get(), n, d_offsets->get(), L, d_from->get(), d_reduced->get()));
      expect_same_floats(cpu_finished, download(*d_reduced, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaMxLayer,
                         ::testing::Combine(::testing::Range(0, 3), ::testing::ValuesIn(all_inputs())),
                         [](const auto& info) {
                           return fmt::format("{}_{}", layout_name(std::get<0>(info.param)),
                                              input_name(std::get<1>(info.param)));
                         });

// --- SDP4Bit -------------------------------------------------------------------------------------

class RoundCudaSdp4bit : public ::testing::TestWithParam<Input> {};

// TLq-HS: prepare and finish (the same transform) out of place and in place, and the round trip
// (finish of prepare), for sizes with incomplete trailing blocks; a second pass puts values beyond
// kGroupHadamardMaxInput (1e36, -inf) and negative NaNs into blocks, the CPU's double path.
TEST_P(RoundCudaSdp4bit, TlqHadamardMatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const Input input = GetParam();
  for (const uint64_t n : {1ull, 31ull, 32ull, 33ull, 100ull, 4096ull + 5, 33333ull}) {
    for (const bool extremes : {false, true}) {
      const uint64_t seed = case_seed(n, 77, static_cast<uint64_t>(input), extremes);
      SCOPED_TRACE(fmt::format("n={} input={} extremes={} seed={:#x}", n, input_name(input), extremes, seed));
      auto c = create("sdp4bit_tlq", {{"hadamard", true}});
      ASSERT_NE(c, nullptr);
      std::vector<float> x = make_input(input, n, seed);
      if (extremes) {
        for (uint64_t i = 0; i < n; i += 37) x[i] = i % 3 == 0 ? 1e36f : i % 3 == 1 ? -INFINITY : x[i];
        for (uint64_t i = 5; i < n; i += 41) x[i] = from_bits(0xFFC01234u + static_cast<uint32_t>(i));
      }
      std::vector<float> cpu_prepared(n), cpu_finished(n), cpu_round_trip(n);
      c->prepare(x, cpu_prepared, 0, 2, RngKey{});
      c->finish(x, cpu_finished, 0, 2);
      c->finish(cpu_prepared, cpu_round_trip, 0, 2);
      expect_same_floats(cpu_prepared, cpu_finished);
      for (const uint64_t at : kPlacements) {
        SCOPED_TRACE(fmt::format("placement {}", at));
        const auto d_x = upload<float>(x, at);
        const auto d_out = garbage<float>(n, at);
        ASSERT_NE(d_x->get(), nullptr);
        ASSERT_NE(d_out->get(), nullptr);
        ASSERT_STATUS_OK(sdp4bit_hadamard_cuda(d_x->get(), n, d_out->get()));
        expect_same_floats(cpu_prepared, download(*d_out, n));
        ASSERT_STATUS_OK(sdp4bit_hadamard_cuda(d_x->get(), n, d_x->get()));
        expect_same_floats(cpu_prepared, download(*d_x, n));
        ASSERT_STATUS_OK(sdp4bit_hadamard_cuda(d_x->get(), n, d_x->get()));
        expect_same_floats(cpu_round_trip, download(*d_x, n));
      }
    }
  }
}

// qWD over two rounds: round 0 against R = 0, then the reference the last rank's finish left;
// finish of a middle rank (R kept) and of the last one (R updated, in place on the reduced vector).
TEST_P(RoundCudaSdp4bit, QwdPrepareAndFinishMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const Input input = GetParam();
  for (const uint64_t n : {1ull, 3ull, 1000ull, 2048ull + 13}) {
    for (const uint32_t ranks : {1u, 3u}) {
      const uint64_t seed = case_seed(n, 78, static_cast<uint64_t>(input), ranks);
      SCOPED_TRACE(fmt::format("n={} input={} ranks={} seed={:#x}", n, input_name(input), ranks, seed));
      auto c = create("sdp4bit_qwd", nlohmann::json::object());
      ASSERT_NE(c, nullptr);
      const auto& w = dynamic_cast<const algo::Sdp4bitWeightCompressor&>(*c);
      const std::vector<float> x0 = make_input(input, n, seed), reduced0 = make_input(Input::kNonFinite, n, seed + 1);
      std::vector<float> cpu_prepared0(n), scratch(n);
      c->prepare(x0, cpu_prepared0, 0, ranks, RngKey{});
      {
        const auto d_x = upload<float>(x0);
        const auto d_ref = upload<float>(std::vector<float>(n, 0.0f));
        const auto d_out = garbage<float>(n);
        ASSERT_NE(d_x->get(), nullptr);
        ASSERT_NE(d_ref->get(), nullptr);
        ASSERT_NE(d_out->get(), nullptr);
        ASSERT_STATUS_OK(sdp4bit_qwd_prepare_cuda(d_x->get(), n, d_ref->get(), d_out->get()));
        expect_same_floats(cpu_prepared0, download(*d_out, n));
      }
      c->finish(reduced0, scratch, ranks - 1, ranks);
      const std::vector<float> reference(w.reference().begin(), w.reference().end());
      const std::vector<float> x1 = make_input(Input::kNonFinite, n, seed + 2);
      const std::vector<float> reduced1 = make_input(input, n, seed + 3);
      std::vector<float> cpu_prepared(n), cpu_first(n), cpu_last(n);
      c->prepare(x1, cpu_prepared, 0, ranks, RngKey{});
      c->finish(reduced1, cpu_first, 0, ranks);
      const std::vector<float> reference_first(w.reference().begin(), w.reference().end());
      c->finish(reduced1, cpu_last, ranks - 1, ranks);
      const std::vector<float> reference_last(w.reference().begin(), w.reference().end());
      for (const uint64_t at : kPlacements) {
        SCOPED_TRACE(fmt::format("placement {}", at));
        const auto d_x = upload<float>(x1, at), d_ref = upload<float>(reference, at);
        const auto d_reduced = upload<float>(reduced1, at);
        const auto d_out = garbage<float>(n, at);
        ASSERT_NE(d_x->get(), nullptr);
        ASSERT_NE(d_ref->get(), nullptr);
        ASSERT_NE(d_reduced->get(), nullptr);
        ASSERT_NE(d_out->get(), nullptr);
        ASSERT_STATUS_OK(sdp4bit_qwd_prepare_cuda(d_x->get(), n, d_ref->get(), d_out->get()));
        expect_same_floats(cpu_prepared, download(*d_out, n));
        const bool last = ranks == 1;  // rank 0 is also the last rank
        ASSERT_STATUS_OK(sdp4bit_qwd_finish_cuda(d_reduced->get(), n, d_ref->get(), last, d_out->get()));
        expect_same_floats(cpu_first, download(*d_out, n));
        expect_same_floats(reference_first, download(*d_ref, n));
        if (!last) {
          ASSERT_STATUS_OK(sdp4bit_qwd_finish_cuda(d_reduced->get(), n, d_ref->get(), true, d_reduced->get()));
          expect_same_floats(cpu_last, download(*d_reduced, n));
          expect_same_floats(reference_last, download(*d_ref, n));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaSdp4bit, ::testing::ValuesIn(all_inputs()),
                         [](const auto& info) { return input_name(info.param); });

// --- Low-rank engine (PowerSGD, EDGC) -------------------------------------------------------------

class RoundCudaLowRank : public ::testing::TestWithParam<Input> {};

// M = x + e (out of place, and in place over e as the bench's prepare forms it) and an uncompressed
// layer's move (x + e into out, e cleared), against the CPU engine's loops, with e drawn from the
// non-finite family so that NaNs meet NaNs.
TEST_P(RoundCudaLowRank, ResidualAddAndMoveMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const Input input = GetParam();
  for (const uint64_t n : {1ull, 3ull, 1000ull, 2048ull + 13}) {
    const uint64_t seed = case_seed(n, 91, static_cast<uint64_t>(input), 0);
    SCOPED_TRACE(fmt::format("n={} input={} seed={:#x}", n, input_name(input), seed));
    const std::vector<float> x = make_input(input, n, seed), e = make_input(Input::kNonFinite, n, seed + 1);
    std::vector<float> cpu_m(n), cpu_moved(n), cpu_e = e;
    algo::LowRankCompressor::add_into(x.data(), e.data(), n, cpu_m.data());
    algo::LowRankCompressor::move_into(x.data(), cpu_e.data(), n, cpu_moved.data());
    for (const uint64_t at : kPlacements) {
      SCOPED_TRACE(fmt::format("placement {}", at));
      const auto d_x = upload<float>(x, at), d_e = upload<float>(e, at);
      const auto d_out = garbage<float>(n, at);
      ASSERT_NE(d_x->get(), nullptr);
      ASSERT_NE(d_e->get(), nullptr);
      ASSERT_NE(d_out->get(), nullptr);
      ASSERT_STATUS_OK(lowrank_add_residual_cuda(d_x->get(), n, d_e->get(), d_out->get()));
      expect_same_floats(cpu_m, download(*d_out, n));
      expect_same_floats(e, download(*d_e, n));
      ASSERT_STATUS_OK(lowrank_add_residual_cuda(d_x->get(), n, d_e->get(), d_e->get()));
      expect_same_floats(cpu_m, download(*d_e, n));
      const auto d_e2 = upload<float>(e, at);
      ASSERT_NE(d_e2->get(), nullptr);
      ASSERT_STATUS_OK(lowrank_move_uncompressed_cuda(d_x->get(), n, d_e2->get(), d_out->get()));
      expect_same_floats(cpu_moved, download(*d_out, n));
      expect_same_floats(cpu_e, download(*d_e2, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RoundCudaLowRank, ::testing::ValuesIn(all_inputs()),
                         [](const auto& info) { return input_name(info.param); });

// --- argument checks (no device needed) ----------------------------------------------------------

// Bad shapes, null pointers, forbidden overlaps and small scratch are rejected before any device
// work; the pointers below are host addresses that must never be dereferenced.
TEST(RoundCudaArguments, RejectsBadArgumentsWithoutTouchingTheDevice) {
  float f[16] = {};
  uint32_t order[4] = {};
  uint64_t words[4] = {};
  const auto invalid = [](const Status& s) { return s.code() == StatusCode::kInvalidArgument; };
  // DynamiQ
  EXPECT_TRUE(invalid(dynamiq_prepare_cuda(f, 8, 0, order, f, f + 8)));
  EXPECT_TRUE(invalid(dynamiq_prepare_cuda(f, 8, 4, order, f, f + 4)));
  EXPECT_TRUE(invalid(dynamiq_prepare_cuda(f, 8, 4, order, f, f)));
  EXPECT_TRUE(invalid(dynamiq_prepare_cuda(f, 8, 4, nullptr, f, f + 8)));
  EXPECT_TRUE(invalid(dynamiq_finish_cuda(nullptr, 8, 4, order, f, 2, f + 8)));
  EXPECT_TRUE(invalid(dynamiq_finish_cuda(f, 8, 4, order, nullptr, 2, f + 8)));
  // OmniReduce
  EXPECT_TRUE(invalid(omnireduce_prefix_cuda(words, 8, 3, f, omnireduce_prefix_cuda_temp_bytes(), words)));
  EXPECT_TRUE(invalid(omnireduce_prefix_cuda(words, 8, 4, f, 8, words)));
  EXPECT_TRUE(invalid(omnireduce_prefix_cuda(words, 8, 4, f, omnireduce_prefix_cuda_temp_bytes(), nullptr)));
  EXPECT_TRUE(invalid(omnireduce_prepare_cuda(f, 8, 0, words, words, nullptr, true, f + 8)));
  EXPECT_TRUE(invalid(omnireduce_prepare_cuda(f, 8, 2, words, nullptr, nullptr, true, f + 8)));
  EXPECT_TRUE(invalid(omnireduce_prepare_cuda(f, 8, 2, words, words, words, true, f + 4)));
  EXPECT_TRUE(invalid(omnireduce_prepare_cuda(f, 8, 2, words, nullptr, nullptr, false, f + 1)));
  EXPECT_TRUE(invalid(omnireduce_prepare_cuda(f, 8, 2, nullptr, nullptr, nullptr, false, f)));
  EXPECT_TRUE(invalid(omnireduce_finish_cuda(f, 8, 2, words, words, true, f)));
  EXPECT_TRUE(invalid(omnireduce_finish_cuda(f, 8, 2, words, nullptr, true, f + 8)));
  EXPECT_TRUE(invalid(omnireduce_finish_cuda(f, 8, 2, nullptr, nullptr, false, f + 1)));
  EXPECT_TRUE(invalid(omnireduce_finish_cuda(f, 8, 6, nullptr, nullptr, false, f + 8)));
  // MX
  EXPECT_TRUE(invalid(block_max_abs_cuda(f, 8, 0, f)));
  EXPECT_TRUE(invalid(block_max_abs_cuda(nullptr, 8, 32, f)));
  EXPECT_TRUE(invalid(layer_max_abs_cuda(f, 8, words, 0, f, 64, f)));
  EXPECT_TRUE(invalid(layer_max_abs_cuda(f, 8, words, 3, f, 16, f)));
  EXPECT_TRUE(invalid(layer_max_abs_cuda(f, 8, nullptr, 1, f, 16, f)));
  EXPECT_TRUE(invalid(layer_max_abs_cuda(f, 8, words, 1, f, 16, nullptr)));
  EXPECT_TRUE(invalid(scale_layers_cuda(f, 8, words, 0, f, f)));
  EXPECT_TRUE(invalid(scale_layers_cuda(f, 8, words, 1, f, f + 2)));
  EXPECT_TRUE(invalid(scale_layers_cuda(f, 8, words, 1, nullptr, f)));
  // SDP4Bit
  EXPECT_TRUE(invalid(sdp4bit_hadamard_cuda(f, 8, f + 1)));
  EXPECT_TRUE(invalid(sdp4bit_hadamard_cuda(nullptr, 8, f)));
  EXPECT_TRUE(invalid(sdp4bit_qwd_prepare_cuda(f, 8, f + 2, f + 8)));
  EXPECT_TRUE(invalid(sdp4bit_qwd_prepare_cuda(f, 8, f + 8, f + 1)));
  EXPECT_TRUE(invalid(sdp4bit_qwd_finish_cuda(f, 4, nullptr, true, f + 8)));
  EXPECT_TRUE(invalid(sdp4bit_qwd_finish_cuda(f, 8, f + 8, true, f + 4)));
  // Low-rank engine: the cleared residual may be neither an input nor the output.
  EXPECT_TRUE(invalid(lowrank_add_residual_cuda(f, 8, f + 4, f + 8)));
  EXPECT_TRUE(invalid(lowrank_add_residual_cuda(nullptr, 8, f, f + 8)));
  EXPECT_TRUE(invalid(lowrank_move_uncompressed_cuda(f, 8, f, f + 8)));
  EXPECT_TRUE(invalid(lowrank_move_uncompressed_cuda(f, 8, f + 8, f + 8)));
  EXPECT_TRUE(invalid(lowrank_move_uncompressed_cuda(f, 8, f + 4, f + 8)));
  // The names of the functions reach the messages.
  EXPECT_NE(dynamiq_prepare_cuda(f, 8, 0, order, f, f + 8).message().find("dynamiq_prepare_cuda"), std::string::npos);
  EXPECT_NE(layer_max_abs_cuda(f, 8, words, 0, f, 64, f).message().find("layer_max_abs_cuda"), std::string::npos);
}

// Empty tensors are no-ops that need no pointers (except the ops that write a result for them:
// the prefix and the layer maxima, which need a device), and the scratch sizes are host queries.
TEST(RoundCudaArguments, EmptyTensorsAndScratchSizes) {
  EXPECT_TRUE(dynamiq_prepare_cuda(nullptr, 0, 256, nullptr, nullptr, nullptr).ok());
  EXPECT_TRUE(dynamiq_finish_cuda(nullptr, 0, 256, nullptr, nullptr, 4, nullptr).ok());
  EXPECT_TRUE(omnireduce_prepare_cuda(nullptr, 0, 256, nullptr, nullptr, nullptr, true, nullptr).ok());
  EXPECT_TRUE(omnireduce_finish_cuda(nullptr, 0, 256, nullptr, nullptr, false, nullptr).ok());
  EXPECT_TRUE(block_max_abs_cuda(nullptr, 0, 32, nullptr).ok());
  EXPECT_TRUE(scale_layers_cuda(nullptr, 0, nullptr, 1, nullptr, nullptr).ok());
  EXPECT_TRUE(sdp4bit_hadamard_cuda(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(sdp4bit_qwd_prepare_cuda(nullptr, 0, nullptr, nullptr).ok());
  EXPECT_TRUE(sdp4bit_qwd_finish_cuda(nullptr, 0, nullptr, true, nullptr).ok());
  EXPECT_TRUE(lowrank_add_residual_cuda(nullptr, 0, nullptr, nullptr).ok());
  EXPECT_TRUE(lowrank_move_uncompressed_cuda(nullptr, 0, nullptr, nullptr).ok());
  EXPECT_EQ(omnireduce_prefix_cuda_temp_bytes() % 16, 0u);
  EXPECT_EQ(layer_max_abs_cuda_temp_bytes(1), 16u);
  EXPECT_EQ(layer_max_abs_cuda_temp_bytes(3), 32u);
}

// The empty results that are written: the prefix of an empty tensor, the maxima of empty layers.
TEST(RoundCudaEmpty, PrefixAndLayerMaximaOfAnEmptyTensor) {
  SKIP_WITHOUT_GPU();
  const auto d_prefix = garbage<uint64_t>(1);
  const auto d_max = garbage<float>(3);
  ASSERT_NE(d_prefix->get(), nullptr);
  ASSERT_NE(d_max->get(), nullptr);
  ASSERT_STATUS_OK(omnireduce_prefix_cuda(nullptr, 0, 256, nullptr, 0, d_prefix->get()));
  ASSERT_STATUS_OK(layer_max_abs_cuda(nullptr, 0, nullptr, 3, nullptr, 0, d_max->get()));
  EXPECT_EQ(download(*d_prefix, 1), std::vector<uint64_t>{0});
  expect_same_floats(std::vector<float>(3, 0.0f), download(*d_max, 3));
}

}  // namespace
}  // namespace ccsim::kern
