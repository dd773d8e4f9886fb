// The CUDA DynamiQ kernels (kernels/cuda/dynamiq_cuda.hpp) against the CPU compressor
// (algorithms/dynamiq/dynamiq.hpp): statistics equal plan_local's bit for bit, encoded bytes match
// exactly (memcmp), decoded and accumulated floats bit for bit, and the fused hop matches
// decode_accumulate_encode in both acc and message. Cases cover every ablation switch, group and
// super-group shapes (one-tile and multi-tile super-groups and groups), sizes with partial super-
// groups, ranks, seeds, input families and a real gradient; every case logs its parameters. GPU
// tests skip when no device is present; the host-side plan helpers are checked on any machine.

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
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/cuda/dynamiq_cuda.hpp"
#include "kernels/quant/dynamiq_quant.hpp"
#include "traces/gradient_dump.hpp"
#include "tests/kernels/cuda_test_support.cuh"

namespace ccsim::kern {
namespace {

using algo::DynamiqCompressor;
using algo::HopContext;
using algo::TensorSpec;

using testing::case_seed;
using testing::expect_same_floats;
using testing::DeviceBuffer;
using testing::from_bits;
using testing::to_bits;

// --- inputs (DynamiQ's own families: regimes per super-group) ---------------------------------

enum class Input { kNormal, kZeros, kDenormals, kHuge, kMixedScales, kNonFinite };

std::string input_name(Input in) {
  switch (in) {
    case Input::kNormal: return "normal";
    case Input::kZeros: return "zeros";
    case Input::kDenormals: return "denormals";
    case Input::kHuge: return "huge";
    case Input::kMixedScales: return "mixedscales";
    case Input::kNonFinite: return "nonfinite";
  }
  return "?";
}

// Seeded inputs of one family. kNormal spans 16 decades entry by entry. kMixedScales gives every
// run of `sg` entries (a super-group) its own regime: all zero, denormal, near FLT_MAX, or a scale
// between 1e-30 and 1e30, with a few exact zeros inside. kNonFinite mixes ±inf, quiet and
// signalling NaNs of both signs into normal values.
std::vector<float> make_input(Input kind, uint64_t n, uint64_t seed, uint64_t sg) {
  // The families shared with the other GPU suites come from cuda_test_support.cuh (same values).
  using Shared = testing::Input;
  switch (kind) {
    case Input::kNormal: return testing::make_input(Shared::kNormal, n, seed);
    case Input::kZeros: return testing::make_input(Shared::kZeros, n, seed);
    case Input::kDenormals: return testing::make_input(Shared::kDenormals, n, seed);
    case Input::kHuge: return testing::make_input(Shared::kHuge, n, seed);
    default: break;
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  std::uniform_int_distribution<int> wide_decade(-30, 30);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> x(n);
  uint64_t regime = 0;
  float scale = 1.0f;
  for (uint64_t i = 0; i < n; ++i) {
    const float sign = negative(rng) ? -1.0f : 1.0f;
    switch (kind) {
      case Input::kNormal:
      case Input::kZeros:
      case Input::kDenormals:
      case Input::kHuge: break;  // above
      case Input::kMixedScales: {
        if (i % sg == 0) {
          regime = rng() % 8;
          scale = std::pow(10.0f, static_cast<float>(wide_decade(rng)));
        }
        if (rng() % 16 == 0) {
          x[i] = sign * 0.0f;
          break;
        }
        switch (regime) {
          case 0: x[i] = sign * 0.0f; break;
          case 1: x[i] = sign * (i % 5 == 0 ? from_bits(1) : 1e-39f * unit(rng)); break;
          case 2: x[i] = sign * (i % 9 == 0 ? FLT_MAX : 3e38f * unit(rng)); break;
          default: x[i] = normal(rng) * scale; break;
        }
        break;
      }
      case Input::kNonFinite: {
        const uint64_t r = rng() % 8;
        x[i] = r == 0   ? sign * INFINITY
               : r == 1 ? from_bits(0x7FC00000u | static_cast<uint32_t>(rng() & 0x3FFFFF))  // quiet NaN
               : r == 2 ? from_bits(0xFF800001u | static_cast<uint32_t>(rng() & 0x3FFFFF))  // signalling NaN
                        : normal(rng);
        break;
      }
    }
  }
  return x;
}

// --- comparisons ---------------------------------------------------------------------------------


// Double arrays equal bit for bit, except that a NaN matches any NaN: the GPU's double arithmetic
// returns the canonical NaN, the CPU's an operand's payload (see dynamiq_cuda.hpp).
void expect_same_doubles(std::span<const double> cpu, std::span<const double> gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(cpu[i]) && std::isnan(gpu[i])) continue;
    if (to_bits(cpu[i]) != to_bits(gpu[i]) && ++mismatches <= 5) {
      ADD_FAILURE() << fmt::format("entry {}: cpu {:#018x} ({}) gpu {:#018x} ({})", i, to_bits(cpu[i]), cpu[i],
                                   to_bits(gpu[i]), gpu[i]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

void expect_same_bytes(std::span<const uint8_t> cpu, std::span<const uint8_t> gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  if (std::memcmp(cpu.data(), gpu.data(), cpu.size()) == 0) return;
  uint64_t i = 0;
  while (cpu[i] == gpu[i]) ++i;
  ADD_FAILURE() << fmt::format("encoded bytes differ, first at byte {} of {}: cpu {:#04x} gpu {:#04x}", i, cpu.size(),
                               cpu[i], gpu[i]);
}

// --- compressor variants -------------------------------------------------------------------------

struct Variant {
  const char* name;
  std::function<void(DynamiqCompressor::Options&)> set;
};

// Every ablation switch on its own, and combinations that reach widths 1 and 16.
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"default", [](DynamiqCompressor::Options&) {}},
      {"flat", [](DynamiqCompressor::Options& o) { o.hierarchical = false; }},
      {"uniform", [](DynamiqCompressor::Options& o) { o.nonuniform = false; }},
      {"fixed", [](DynamiqCompressor::Options& o) { o.variable = false; }},
      {"independent", [](DynamiqCompressor::Options& o) { o.correlated = false; }},
      {"noreorder_nomean",
       [](DynamiqCompressor::Options& o) {
         o.reorder = false;
         o.subtract_mean = false;
       }},
      {"budget3", [](DynamiqCompressor::Options& o) { o.budget = 3.0; }},
      {"w1to16_b2", [](DynamiqCompressor::Options& o) {
         o.widths = {1, 2, 4, 8, 16};
         o.budget = 2.0;
       }},
      {"w1to16_b20", [](DynamiqCompressor::Options& o) {
         o.widths = {1, 2, 4, 8, 16};
         o.budget = 20.0;
         o.eps16 = 0.002;
       }},
      {"w1to16_b9_flat_uniform_independent", [](DynamiqCompressor::Options& o) {
         o.widths = {1, 2, 4, 8, 16};
         o.budget = 9.0;
         o.hierarchical = false;
         o.nonuniform = false;
         o.correlated = false;
       }},
      {"fixed16", [](DynamiqCompressor::Options& o) {
         o.widths = {1, 2, 4, 8, 16};
         o.budget = 18.0;
         o.variable = false;
       }},
      {"fixed1_flat", [](DynamiqCompressor::Options& o) {
         o.widths = {1, 2, 4, 8, 16};
         o.budget = 1.5;
         o.variable = false;
         o.hierarchical = false;
       }},
  };
  return v;
}

// The CPU compressor and the GPU plan of one round.
struct Round {
  DynamiqCompressor::Options options;
  std::unique_ptr<DynamiqCompressor> cpu;
  DynamiqCudaLayout layout;
  std::vector<float> levels;
  std::unique_ptr<DeviceBuffer<uint8_t>> d_widths;
  std::unique_ptr<DeviceBuffer<uint64_t>> d_offsets;
  std::unique_ptr<DeviceBuffer<float>> d_levels;
  DynamiqCudaPlan plan;
};

// Plans a round on the CPU from `inputs` (one vector per rank) and builds the layout (and, with
// `upload`, the device plan) from the committed widths.
void plan_both(const DynamiqCompressor::Options& o, const std::vector<std::vector<float>>& inputs, uint64_t seed,
               bool upload, Round& r) {
  r.options = o;
  r.cpu = std::make_unique<DynamiqCompressor>(o);
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  const auto report = algo::plan_round(*r.cpu, spans, {seed, 3});
  ASSERT_TRUE(report.ok()) << report.status().message();
  const uint64_t d = inputs[0].size();
  std::vector<uint8_t> widths(r.cpu->super_groups());
  for (uint64_t j = 0; j < widths.size(); ++j) widths[j] = static_cast<uint8_t>(r.cpu->width_of(j));
  auto layout = dynamiq_cuda_layout(widths, d, o.super_group, o.group, o.hierarchical, o.reorder);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  r.layout = std::move(layout).value();
  r.levels = dynamiq_cuda_levels(o.nonuniform, o.eps4, o.eps8, o.eps16);
  // The layout's offsets are the CPU's wire sizes of every prefix of whole super-groups.
  const uint64_t S = o.super_group, n = widths.size();
  for (uint64_t k = 0; k <= n; ++k) {
    const uint64_t count = std::min(k * S, d);
    ASSERT_EQ(r.layout.block_offset[k], count == 0 ? 0 : r.cpu->wire_bytes({0, count}, {1, 2})) << "position " << k;
  }
  if (!upload) return;
  r.d_widths = std::make_unique<DeviceBuffer<uint8_t>>(n);
  r.d_offsets = std::make_unique<DeviceBuffer<uint64_t>>(n + 1);
  r.d_levels = std::make_unique<DeviceBuffer<float>>(kDynamiqCudaLevels);
  ASSERT_NE(r.d_widths->get(), nullptr);
  ASSERT_NE(r.d_offsets->get(), nullptr);
  ASSERT_NE(r.d_levels->get(), nullptr);
  ASSERT_CUDA_OK(r.d_widths->upload(r.layout.widths));
  ASSERT_CUDA_OK(r.d_offsets->upload(r.layout.block_offset));
  ASSERT_CUDA_OK(r.d_levels->upload(r.levels));
  r.plan = DynamiqCudaPlan{.elements = d,
                           .super_group = o.super_group,
                           .group = o.group,
                           .hierarchical = o.hierarchical,
                           .correlated = o.correlated,
                           .d_widths = r.d_widths->get(),
                           .d_block_offset = r.d_offsets->get(),
                           .d_levels = r.d_levels->get()};
}

// Chunks of a d-entry vector: the whole, and the compressor's three byte-balanced shards.
std::vector<TensorSpec> chunks_of(const DynamiqCompressor& c, uint64_t d) {
  std::vector<TensorSpec> out = {{0, d}};
  const std::vector<uint64_t> cuts = c.shard_cuts(d, 3);
  for (size_t k = 0; k + 1 < cuts.size(); ++k)
    if (cuts[k + 1] > cuts[k]) out.push_back({cuts[k], cuts[k + 1] - cuts[k]});
  return out;
}

// Buffer placement: byte offsets of the device float buffers (multiples of 4) and wire buffers.
struct Placement {
  uint64_t float_offset = 0;
  uint64_t wire_offset = 0;
};

// Statistics of every rank's vector against plan_local.
void check_statistics(const DynamiqCompressor& c, const std::vector<std::vector<float>>& inputs, uint32_t S) {
  for (uint32_t r = 0; r < inputs.size(); ++r) {
    SCOPED_TRACE(fmt::format("statistics, rank {}", r));
    const std::vector<float>& x = inputs[r];
    algo::PlanStats cpu;
    cpu.sum.assign(c.plan_format(x.size(), 1).sum_entries, 0.0);
    c.plan_local(x, r, RngKey{}, cpu);
    std::vector<double> gpu(cpu.sum.size());
    DeviceBuffer<float> d_x(x.size());
    DeviceBuffer<double> d_sums(gpu.size());
    ASSERT_NE(d_x.get(), nullptr);
    ASSERT_NE(d_sums.get(), nullptr);
    ASSERT_CUDA_OK(d_x.upload(x));
    ASSERT_STATUS_OK(dynamiq_statistics_cuda(d_x.get(), x.size(), S, d_sums.get()));
    ASSERT_CUDA_OK(d_sums.download(gpu));
    expect_same_doubles(cpu.sum, gpu);
  }
}

// Encode, decode, decode-accumulate and the fused hop of one chunk on both sides. `x` is what the
// encoder sees (the chunk of a prepared vector), `acc` what the decoders accumulate into.
void check_chunk(Round& r, const TensorSpec& spec, std::span<const float> x, std::span<const float> acc, uint64_t seed,
                 uint32_t ranks, const Placement& at) {
  SCOPED_TRACE(fmt::format("chunk [{}, {})", spec.offset, spec.offset + spec.count));
  DynamiqCompressor& c = *r.cpu;
  const uint64_t n = spec.count, bytes = c.wire_bytes(spec, {1, ranks});
  ASSERT_EQ(bytes, dynamiq_cuda_wire_bytes(r.layout, r.options.super_group, spec.offset, n));
  const RngKey key0{seed, 3, 0, 7}, key1{seed, 3, ranks > 1 ? 1u : 0u, 7};

  // encode
  std::vector<uint8_t> cpu_msg(bytes), gpu_msg(bytes);
  c.encode(x, spec, {1, ranks}, key0, cpu_msg);
  DeviceBuffer<float> d_x(n, at.float_offset), d_acc(n, at.float_offset);
  DeviceBuffer<uint8_t> d_msg(bytes, at.wire_offset), d_out(bytes, at.wire_offset);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_acc.get(), nullptr);
  ASSERT_NE(d_msg.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_STATUS_OK(dynamiq_encode_cuda(d_x.get(), spec.offset, n, r.plan, key0, ranks, d_msg.get()));
  ASSERT_CUDA_OK(d_msg.download(gpu_msg));
  {
    SCOPED_TRACE("encode");
    expect_same_bytes(cpu_msg, gpu_msg);
  }

  // decode (of the CPU's message, so that a decode mismatch is not an encode one)
  std::vector<float> cpu_dec(n), gpu_dec(n);
  c.decode(cpu_msg, spec, {1, ranks}, cpu_dec);
  ASSERT_CUDA_OK(d_msg.upload(cpu_msg));
  ASSERT_STATUS_OK(dynamiq_decode_cuda(d_msg.get(), spec.offset, n, r.plan, d_acc.get()));
  ASSERT_CUDA_OK(d_acc.download(gpu_dec));
  {
    SCOPED_TRACE("decode");
    expect_same_floats(cpu_dec, gpu_dec);
  }

  // decode-accumulate
  std::vector<float> cpu_acc(acc.begin(), acc.end()), gpu_acc(n);
  c.decode_accumulate(cpu_msg, spec, {1, ranks}, cpu_acc);
  ASSERT_CUDA_OK(d_acc.upload(acc));
  ASSERT_STATUS_OK(dynamiq_decode_accumulate_cuda(d_msg.get(), spec.offset, n, r.plan, d_acc.get()));
  ASSERT_CUDA_OK(d_acc.download(gpu_acc));
  {
    SCOPED_TRACE("decode_accumulate");
    expect_same_floats(cpu_acc, gpu_acc);
  }

  // the fused hop: acc += decode(msg); out = encode(acc) at the next rank
  std::vector<float> cpu_facc(acc.begin(), acc.end()), gpu_facc(n);
  std::vector<uint8_t> cpu_out(bytes), gpu_out(bytes);
  c.decode_accumulate_encode(cpu_msg, spec, {1, ranks}, cpu_facc, {2, ranks}, key1, cpu_out);
  ASSERT_CUDA_OK(d_acc.upload(acc));
  ASSERT_STATUS_OK(dynamiq_decode_accumulate_encode_cuda(d_msg.get(), spec.offset, n, r.plan, d_acc.get(), key1, ranks,
                                                         d_out.get()));
  ASSERT_CUDA_OK(d_acc.download(gpu_facc));
  ASSERT_CUDA_OK(d_out.download(gpu_out));
  {
    SCOPED_TRACE("decode_accumulate_encode: acc");
    expect_same_floats(cpu_facc, gpu_facc);
  }
  {
    SCOPED_TRACE("decode_accumulate_encode: message");
    expect_same_bytes(cpu_out, gpu_out);
  }
}

// A whole round on `ranks` vectors of `input`: statistics, the plan, then every op on every chunk
// of rank 0's prepared vector (rank 1's as the accumulator). kNonFinite vectors are coded under a
// plan made from normal vectors, without prepare() (the plan of a NaN tensor is meaningless).
void check_round(const DynamiqCompressor::Options& o, uint64_t d, uint32_t ranks, Input input, uint64_t seed,
                 const Placement& at = {}) {
  std::vector<std::vector<float>> inputs;
  for (uint32_t r = 0; r < std::max(ranks, 2u); ++r) inputs.push_back(make_input(input, d, seed + r, o.super_group));
  const bool nonfinite = input == Input::kNonFinite;
  std::vector<std::vector<float>> plan_inputs = inputs;
  if (nonfinite) {
    for (uint32_t r = 0; r < plan_inputs.size(); ++r)
      plan_inputs[r] = make_input(Input::kNormal, d, seed + 100 + r, o.super_group);
  }
  ASSERT_NO_FATAL_FAILURE(check_statistics(DynamiqCompressor(o), inputs, o.super_group));
  plan_inputs.resize(ranks);
  Round round;
  ASSERT_NO_FATAL_FAILURE(plan_both(o, plan_inputs, seed, true, round));
  std::vector<std::vector<float>> y = inputs;
  if (!nonfinite) {
    for (uint32_t r = 0; r < 2; ++r) round.cpu->prepare(inputs[r], y[r], r, ranks, RngKey{});
  }
  for (const TensorSpec& spec : chunks_of(*round.cpu, d)) {
    ASSERT_NO_FATAL_FAILURE(check_chunk(round, spec, std::span<const float>(y[0]).subspan(spec.offset, spec.count),
                                        std::span<const float>(y[1]).subspan(spec.offset, spec.count), seed, ranks,
                                        at));
  }
}

DynamiqCompressor::Options with(const Variant& v, uint32_t group = 16, uint32_t super_group = 256) {
  DynamiqCompressor::Options o;
  o.group = group;
  o.super_group = super_group;
  v.set(o);
  return o;
}

// --- GPU tests -----------------------------------------------------------------------------------

// Every variant, sizes around the super-group (partial last ones included), every input family,
// at the default shape (s = 16, S = 256: one tile per super-group, two lanes per group).
class DynamiqCudaVariants : public ::testing::TestWithParam<std::tuple<size_t, uint64_t, Input>> {};

TEST_P(DynamiqCudaVariants, MatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [variant, d, input] = GetParam();
  const Variant& v = variants()[variant];
  for (const uint32_t ranks : {1u, 4u}) {
    const uint64_t seed = case_seed(d, variant, static_cast<uint64_t>(input), ranks);
    SCOPED_TRACE(
        fmt::format("variant={} d={} input={} ranks={} seed={:#x}", v.name, d, input_name(input), ranks, seed));
    check_round(with(v), d, ranks, input, seed);
  }
}

std::string variants_case_name(const ::testing::TestParamInfo<DynamiqCudaVariants::ParamType>& info) {
  const auto& [variant, d, input] = info.param;
  return fmt::format("{}_d{}_{}", variants()[variant].name, d, input_name(input));
}

INSTANTIATE_TEST_SUITE_P(All, DynamiqCudaVariants,
                         ::testing::Combine(::testing::Range<size_t>(0, 12),
                                            ::testing::Values(1u, 200u, 256u, 257u, 256u * 7 + 100, 256u * 64),
                                            ::testing::Values(Input::kNormal, Input::kZeros, Input::kDenormals,
                                                              Input::kHuge, Input::kMixedScales, Input::kNonFinite)),
                         variants_case_name);

// Group and super-group shapes that take the kernels' other paths: groups inside an octet (s < 8),
// groups spanning lanes, a whole tile, several tiles (s > 256), super-groups of several tiles, and
// super-groups smaller than an octet.
class DynamiqCudaShapes : public ::testing::TestWithParam<std::tuple<std::pair<uint32_t, uint32_t>, size_t, Input>> {
};

TEST_P(DynamiqCudaShapes, MatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [shape, variant, input] = GetParam();
  const auto [group, super_group] = shape;
  const Variant& v = variants()[variant];
  for (const uint64_t d : {uint64_t{super_group} * 5 + 3, uint64_t{super_group} * 3, uint64_t{50'001}}) {
    const uint32_t ranks = 3;
    const uint64_t seed = case_seed(d, group * 131 + super_group, variant, static_cast<uint64_t>(input));
    SCOPED_TRACE(fmt::format("group={} super_group={} variant={} d={} input={} ranks={} seed={:#x}", group,
                             super_group, v.name, d, input_name(input), ranks, seed));
    check_round(with(v, group, super_group), d, ranks, input, seed);
  }
}

std::string shapes_case_name(const ::testing::TestParamInfo<DynamiqCudaShapes::ParamType>& info) {
  const auto& [shape, variant, input] = info.param;
  return fmt::format("s{}_S{}_{}_{}", shape.first, shape.second, variants()[variant].name, input_name(input));
}

INSTANTIATE_TEST_SUITE_P(
    All, DynamiqCudaShapes,
    ::testing::Combine(::testing::Values(std::pair<uint32_t, uint32_t>{2, 4}, std::pair<uint32_t, uint32_t>{2, 64},
                                         std::pair<uint32_t, uint32_t>{4, 8}, std::pair<uint32_t, uint32_t>{8, 128},
                                         std::pair<uint32_t, uint32_t>{32, 512},
                                         std::pair<uint32_t, uint32_t>{256, 1024},
                                         std::pair<uint32_t, uint32_t>{16, 2048},
                                         std::pair<uint32_t, uint32_t>{512, 4096},
                                         std::pair<uint32_t, uint32_t>{4096, 16384}),
                       ::testing::Values<size_t>(0, 1, 2, 4, 7, 9),
                       ::testing::Values(Input::kNormal, Input::kMixedScales)),
    shapes_case_name);

// Buffers off their vector alignment: floats by 4 bytes (scalar octets), wire buffers by any byte
// count (byte-wise code and scale stores).
TEST(DynamiqCudaUnaligned, MatchesCpuWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const Placement at : {Placement{4, 0}, Placement{0, 1}, Placement{8, 3}, Placement{12, 6}, Placement{0, 8}}) {
    for (const size_t variant : {size_t{0}, size_t{8}, size_t{9}}) {
      const uint64_t d = 256 * 9 + 77, seed = case_seed(d, at.float_offset, at.wire_offset, variant);
      SCOPED_TRACE(fmt::format("float_offset={} wire_offset={} variant={} seed={:#x}", at.float_offset, at.wire_offset,
                               variants()[variant].name, seed));
      check_round(with(variants()[variant]), d, 4, Input::kMixedScales, seed, at);
    }
  }
}

// Seeds: the same case under many keys (rounding draws and correlated permutations).
TEST(DynamiqCudaSeeds, MatchesCpuOverSeeds) {
  SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const uint32_t ranks = 1 + static_cast<uint32_t>(seed % 9);
    SCOPED_TRACE(fmt::format("seed={} ranks={}", seed, ranks));
    check_round(with(variants()[seed % 2 == 0 ? 0 : 7]), 256 * 33 + 5, ranks, Input::kNormal, seed);
  }
}

// The shipped gradient dump (gpt-bpe, 8 workers): statistics of every worker, then a reduce chain
// through every rank on each shard (rank 0 encodes, ranks 1..n-2 run the fused hop, rank n-1
// decode-accumulates), CPU and GPU side by side; every message and accumulator must match.
TEST(DynamiqCudaGradient, ReduceChainOverTheShippedDumpMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";
  auto dump = traces::GradientDump::open(dir);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  const uint32_t ranks = dump->workers();
  for (const size_t variant : {size_t{0}, size_t{1}, size_t{8}}) {
    for (size_t step = 0; step < dump->steps(); ++step) {
      SCOPED_TRACE(fmt::format("variant={} step={} ranks={}", variants()[variant].name, step, ranks));
      const DynamiqCompressor::Options o = with(variants()[variant]);
      std::vector<std::vector<float>> x;
      for (uint32_t w = 0; w < ranks; ++w) {
        auto g = dump->worker(w, step);
        ASSERT_TRUE(g.ok()) << g.status().message();
        x.emplace_back(g->values().begin(), g->values().end());
      }
      const uint64_t d = x[0].size();
      ASSERT_NO_FATAL_FAILURE(check_statistics(DynamiqCompressor(o), x, o.super_group));
      Round round;
      ASSERT_NO_FATAL_FAILURE(plan_both(o, x, 77 + step, true, round));
      std::vector<std::vector<float>> y = x;
      for (uint32_t r = 0; r < ranks; ++r) round.cpu->prepare(x[r], y[r], r, ranks, RngKey{});
      for (const TensorSpec& spec : chunks_of(*round.cpu, d)) {
        SCOPED_TRACE(fmt::format("chunk [{}, {})", spec.offset, spec.offset + spec.count));
        const uint64_t n = spec.count, bytes = round.cpu->wire_bytes(spec, {1, ranks});
        DeviceBuffer<float> d_acc(n);
        DeviceBuffer<uint8_t> d_msg_a(bytes), d_msg_b(bytes);
        ASSERT_NE(d_acc.get(), nullptr);
        ASSERT_NE(d_msg_a.get(), nullptr);
        ASSERT_NE(d_msg_b.get(), nullptr);
        uint8_t* d_a = d_msg_a.get();  // the message in flight
        uint8_t* d_b = d_msg_b.get();  // the next one
        std::vector<uint8_t> cpu_msg(bytes), cpu_next(bytes), gpu_msg(bytes);
        std::vector<float> acc(n), gpu_acc(n);
        auto chunk_of = [&](uint32_t r) { return std::span<const float>(y[r]).subspan(spec.offset, n); };
        const RngKey key0{123 + step, 3, 0, 5};
        round.cpu->encode(chunk_of(0), spec, {1, ranks}, key0, cpu_msg);
        ASSERT_CUDA_OK(d_acc.upload(chunk_of(0)));
        ASSERT_STATUS_OK(dynamiq_encode_cuda(d_acc.get(), spec.offset, n, round.plan, key0, ranks, d_a));
        ASSERT_CUDA_OK(cudaMemcpy(gpu_msg.data(), d_a, bytes, cudaMemcpyDeviceToHost));
        expect_same_bytes(cpu_msg, gpu_msg);
        for (uint32_t r = 1; r < ranks; ++r) {
          SCOPED_TRACE(fmt::format("rank {}", r));
          const auto in = chunk_of(r);
          acc.assign(in.begin(), in.end());
          ASSERT_CUDA_OK(d_acc.upload(acc));
          if (r + 1 < ranks) {
            const RngKey key{123 + step, 3, r, 5};
            round.cpu->decode_accumulate_encode(cpu_msg, spec, {r, ranks}, acc, {r + 1, ranks}, key, cpu_next);
            ASSERT_STATUS_OK(dynamiq_decode_accumulate_encode_cuda(d_a, spec.offset, n, round.plan, d_acc.get(), key,
                                                                   ranks, d_b));
            ASSERT_CUDA_OK(cudaMemcpy(gpu_msg.data(), d_b, bytes, cudaMemcpyDeviceToHost));
            expect_same_bytes(cpu_next, gpu_msg);
            std::swap(cpu_msg, cpu_next);
            std::swap(d_a, d_b);
          } else {
            round.cpu->decode_accumulate(cpu_msg, spec, {r, ranks}, acc);
            ASSERT_STATUS_OK(dynamiq_decode_accumulate_cuda(d_a, spec.offset, n, round.plan, d_acc.get()));
          }
          ASSERT_CUDA_OK(d_acc.download(gpu_acc));
          expect_same_floats(acc, gpu_acc);
        }
      }
    }
  }
}

// --- host-side plan helpers (no device needed) ---------------------------------------------------

// The layout helper reproduces the CPU plan's order and block sizes (its offsets equal the CPU's
// wire sizes of every prefix, checked inside plan_both()), and the grids decode CPU messages
// exactly as the compressor does, through the CPU's own super-group decoder.
TEST(DynamiqCudaPlanHelpers, LayoutAndLevelsReproduceTheCpuPlan) {
  for (size_t variant = 0; variant < variants().size(); ++variant) {
    for (const auto& [group, super_group] : {std::pair<uint32_t, uint32_t>{16, 256}, {4, 64}, {512, 2048}}) {
      const DynamiqCompressor::Options o = with(variants()[variant], group, super_group);
      const uint64_t d = uint64_t{super_group} * 37 + super_group / 2;
      const uint32_t ranks = 3;
      const uint64_t seed = case_seed(d, variant, group, super_group);
      SCOPED_TRACE(fmt::format("variant={} group={} super_group={} seed={:#x}", variants()[variant].name, group,
                               super_group, seed));
      std::vector<std::vector<float>> x;
      for (uint32_t r = 0; r < ranks; ++r) x.push_back(make_input(Input::kMixedScales, d, seed + r, super_group));
      Round round;
      ASSERT_NO_FATAL_FAILURE(plan_both(o, x, seed, false, round));
      std::vector<float> y(d);
      round.cpu->prepare(x[0], y, 0, ranks, RngKey{});
      std::vector<uint8_t> msg(round.cpu->wire_bytes({0, d}, {1, ranks}));
      round.cpu->encode(y, {0, d}, {1, ranks}, RngKey{seed, 1, 0, 2}, msg);
      std::vector<float> cpu(d), mine(d);
      round.cpu->decode(msg, {0, d}, {1, ranks}, cpu);
      for (uint64_t k = 0; k < round.layout.widths.size(); ++k) {
        const uint32_t q = round.layout.widths[k];
        const DynamiqSgCoding coding{q, group, o.hierarchical,
                                     q == 1 ? nullptr : round.levels.data() + dynamiq_cuda_levels_offset(q),
                                     o.correlated};
        const uint64_t m = std::min<uint64_t>(super_group, d - k * super_group);
        dynamiq_decode_sg(msg.data() + round.layout.block_offset[k], m, coding, false, mine.data() + k * super_group);
      }
      expect_same_floats(cpu, mine);
    }
  }
}

TEST(DynamiqCudaPlanHelpers, LayoutRejectsBadWidthsAndCounts) {
  const std::vector<uint8_t> widths = {2, 4, 8};
  EXPECT_TRUE(dynamiq_cuda_layout(widths, 256 * 2 + 1, 256, 16, true, true).ok());
  EXPECT_EQ(dynamiq_cuda_layout(widths, 256 * 3 + 1, 256, 16, true, true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_cuda_layout(std::vector<uint8_t>{2, 3, 8}, 256 * 3, 256, 16, true, true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_cuda_layout({}, 0, 256, 16, true, true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_cuda_layout(widths, 256 * 3, 0, 16, true, true).status().code(), StatusCode::kInvalidArgument);
}

// --- arguments (checked before any launch: needs no device) -------------------------------------

TEST(DynamiqCudaArguments, RejectsUnsupportedPlansChunksAndNullPointers) {
  // Non-null dummies: the checks never dereference them.
  const auto* widths = reinterpret_cast<const uint8_t*>(uintptr_t{16});
  const auto* offsets = reinterpret_cast<const uint64_t*>(uintptr_t{16});
  const auto* levels = reinterpret_cast<const float*>(uintptr_t{16});
  auto* x = reinterpret_cast<float*>(uintptr_t{16});
  auto* bytes = reinterpret_cast<uint8_t*>(uintptr_t{16});
  const DynamiqCudaPlan plan{1000, 256, 16, true, true, widths, offsets, levels};
  EXPECT_TRUE(dynamiq_cuda_can_implement(plan, 0, 1000).ok());
  EXPECT_TRUE(dynamiq_cuda_can_implement(plan, 256, 512).ok());
  EXPECT_TRUE(dynamiq_cuda_can_implement(plan, 768, 232).ok());
  for (const auto& [offset, count] : {std::pair<uint64_t, uint64_t>{100, 256}, {0, 300}, {768, 300}, {1024, 256}}) {
    const Status s = dynamiq_cuda_can_implement(plan, offset, count);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << offset << " " << count;
    EXPECT_NE(s.message().find("super-group boundaries"), std::string::npos) << s.message();
  }
  DynamiqCudaPlan bad = plan;
  bad.group = 12;
  EXPECT_NE(dynamiq_cuda_can_implement(bad, 0, 1000).message().find("power-of-two group"), std::string::npos);
  bad = plan;
  bad.super_group = 250;
  EXPECT_NE(dynamiq_cuda_can_implement(bad, 0, 1000).message().find("multiple of 4"), std::string::npos);
  bad = plan;
  bad.d_levels = nullptr;
  EXPECT_EQ(dynamiq_cuda_can_implement(bad, 0, 1000).code(), StatusCode::kInvalidArgument);
  bad = plan;
  bad.elements = 0;
  EXPECT_EQ(dynamiq_cuda_can_implement(bad, 0, 1000).code(), StatusCode::kInvalidArgument);

  const RngKey key{};
  EXPECT_EQ(dynamiq_encode_cuda(x, 100, 256, plan, key, 2, bytes).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_decode_cuda(bytes, 100, 256, plan, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_decode_accumulate_cuda(bytes, 100, 256, plan, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_decode_accumulate_encode_cuda(bytes, 100, 256, plan, x, key, 2, bytes).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_encode_cuda(nullptr, 0, 256, plan, key, 2, bytes).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_decode_cuda(bytes, 0, 256, plan, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_decode_accumulate_encode_cuda(bytes, 0, 256, plan, x, key, 2, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_statistics_cuda(nullptr, 10, 256, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dynamiq_statistics_cuda(x, 10, 0, reinterpret_cast<double*>(x)).code(), StatusCode::kInvalidArgument);
}

TEST(DynamiqCudaArguments, EmptyChunkIsANoOp) {
  const DynamiqCudaPlan plan{};
  EXPECT_TRUE(dynamiq_encode_cuda(nullptr, 0, 0, plan, RngKey{}, 1, nullptr).ok());
  EXPECT_TRUE(dynamiq_decode_cuda(nullptr, 0, 0, plan, nullptr).ok());
  EXPECT_TRUE(dynamiq_decode_accumulate_cuda(nullptr, 0, 0, plan, nullptr).ok());
  EXPECT_TRUE(dynamiq_decode_accumulate_encode_cuda(nullptr, 0, 0, plan, nullptr, RngKey{}, 1, nullptr).ok());
  EXPECT_TRUE(dynamiq_statistics_cuda(nullptr, 0, 256, nullptr).ok());
}

}  // namespace
}  // namespace ccsim::kern
