// The CUDA THC kernels (kernels/cuda/thc_cuda.hpp) against the CPU references: the Hadamard
// transforms (kernels/transform/hadamard.hpp) and max |x| (parallel_max_abs) bit for bit, the wire
// ops against kernels/quant/thc_quant.hpp byte for byte, and whole THC rounds against the CPU compressor
// (algorithms/thc/thc.hpp): every rank's plan_local entry, prepare's codes, a reduce along a chain
// of ranks (pack, fused hops, decode-accumulate: every message and accumulator), and finish. Cases
// cover block sizes 1 .. 2^24 (one, two and three passes), sizes that end in partial tiles, index
// bases off a Philox block, in-place and out-of-place calls, misaligned buffers, adversarial
// inputs (zeros, denormals, values near FLT_MAX, ±inf, quiet and signalling NaNs of both signs)
// and the shipped gradient dump; every case logs its parameters. Device outputs are pre-filled with
// garbage, so an element a kernel fails to write shows up. GPU tests skip when no device is
// present; the argument checks run on any machine.

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
#include <deque>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/numerics.hpp"
#include "algorithms/thc/thc.hpp"
#include "kernels/cuda/thc_cuda.hpp"
#include "kernels/quant/thc_quant.hpp"
#include "kernels/stats/entropy.hpp"
#include "kernels/transform/hadamard.hpp"
#include "traces/gradient_dump.hpp"
#include "tests/kernels/cuda_test_support.cuh"

namespace ccsim::kern {
namespace {

using algo::HopContext;
using algo::ThcCompressor;
using algo::TensorSpec;
using testing::case_seed;
using testing::expect_same_bytes;
using testing::expect_same_floats;
using testing::DeviceBuffer;
using testing::from_bits;
using testing::to_bits;

// --- inputs --------------------------------------------------------------------------------------

enum class Input { kNormal, kZeros, kDenormals, kHuge, kNonFinite, kMixed };

std::string input_name(Input in) {
  switch (in) {
    case Input::kNormal: return "normal";
    case Input::kZeros: return "zeros";
    case Input::kDenormals: return "denormals";
    case Input::kHuge: return "huge";
    case Input::kNonFinite: return "nonfinite";
    case Input::kMixed: return "mixed";
  }
  return "?";
}

// Seeded inputs of one family. kNormal spans 9 decades entry by entry; kNonFinite mixes ±inf, quiet
// NaNs of both signs and signalling NaNs into normal values; kMixed puts ±inf, ±FLT_MAX and the
// smallest denormal among values near 1e30.
std::vector<float> make_input(Input kind, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  std::vector<float> x(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float sign = (rng() & 1) != 0 ? -1.0f : 1.0f;
    switch (kind) {
      case Input::kNormal:
        x[i] = normal(rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(rng() % 9) - 4));
        break;
      case Input::kZeros: x[i] = sign * 0.0f; break;
      case Input::kDenormals: x[i] = sign * (i % 7 == 0 ? from_bits(1) : 1e-40f * unit(rng)); break;
      case Input::kHuge: x[i] = sign * (i % 5 == 0 ? FLT_MAX : 3e38f * unit(rng)); break;
      case Input::kNonFinite: {
        const uint64_t r = rng() % 8;
        const uint32_t payload = static_cast<uint32_t>(rng() & 0x3FFFFF);
        x[i] = r == 0   ? sign * INFINITY
               : r == 1 ? sign * from_bits(0x7FC00000u | payload)  // quiet NaN
               : r == 2 ? from_bits(0xFF800001u | payload)         // signalling NaN, negative
               : r == 3 ? from_bits(0x7F800001u | payload)         // signalling NaN, positive
                        : normal(rng);
        break;
      }
      case Input::kMixed: {
        const uint64_t r = rng() % 16;
        x[i] = r == 0 ? sign * INFINITY : r == 1 ? sign * FLT_MAX : r == 2 ? sign * from_bits(1) : normal(rng) * 1e30f;
        break;
      }
    }
  }
  return x;
}

// --- comparisons and buffers ---------------------------------------------------------------------



// Fills `bytes` bytes at p with garbage, so that an element a kernel does not write is seen.
::testing::AssertionResult fill_garbage(void* p, uint64_t bytes) {
  if (cudaMemset(p, 0xA7, bytes) != cudaSuccess) return ::testing::AssertionFailure() << "cudaMemset failed";
  return ::testing::AssertionSuccess();
}

template <class T>
std::vector<T> download(const T* d, uint64_t n) {
  std::vector<T> v(n);
  if (cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) v.clear();
  return v;
}

// Byte offsets of the device buffers: floats by multiples of 4 (scalar paths), wire buffers by any.
struct Placement {
  uint64_t in = 0;
  uint64_t out = 0;
};

// --- transforms ----------------------------------------------------------------------------------

enum class Kind { kPlain, kRandomized, kInverse };

std::string kind_name(Kind k) {
  return k == Kind::kPlain ? "plain" : k == Kind::kRandomized ? "randomized" : "inverse";
}

// One transform of `count` elements in blocks of `block` on both sides, out of place (with the
// input checked untouched) or in place.
void check_transform(uint64_t block, uint64_t count, Kind kind, Input input, uint64_t index_base, bool in_place,
                     const Placement& at, uint64_t seed) {
  SCOPED_TRACE(fmt::format("block={} count={} kind={} input={} index_base={} in_place={} offsets={}/{} seed={:#x}",
                           block, count, kind_name(kind), input_name(input), index_base, in_place, at.in, at.out,
                           seed));
  const std::vector<float> x = make_input(input, count, seed);
  const RngKey key{seed, 3, 5, 11};
  std::vector<float> cpu = x;
  switch (kind) {
    case Kind::kPlain: hadamard_transform(cpu.data(), count, block); break;
    case Kind::kRandomized: randomized_hadamard_transform(cpu.data(), count, block, key, index_base); break;
    case Kind::kInverse: randomized_hadamard_inverse(cpu.data(), count, block, key, index_base); break;
  }
  DeviceBuffer<float> d_in(count, at.in), d_out(count, at.out);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_in.upload(x));
  float* dst = in_place ? d_in.get() : d_out.get();
  if (!in_place) ASSERT_TRUE(fill_garbage(dst, count * sizeof(float)));
  switch (kind) {
    case Kind::kPlain: ASSERT_STATUS_OK(hadamard_transform_cuda(d_in.get(), count, block, dst)); break;
    case Kind::kRandomized:
      ASSERT_STATUS_OK(randomized_hadamard_transform_cuda(d_in.get(), count, block, key, index_base, dst));
      break;
    case Kind::kInverse:
      ASSERT_STATUS_OK(randomized_hadamard_inverse_cuda(d_in.get(), count, block, key, index_base, dst));
      break;
  }
  const std::vector<float> gpu = download(dst, count);
  expect_same_floats(cpu, gpu);
  if (!in_place) {
    SCOPED_TRACE("input untouched");
    expect_same_floats(x, download(d_in.get(), count));
  }
}

// Every block size from 1 to 2^20 that changes the pass structure or the register layout, every
// kind and input family; sizes of 1 and 3 blocks (and, for blocks below a tile, counts that end in
// a partial tile of 8192 elements), index bases on and off a Philox block, in and out of place.
class ThcCudaHadamard : public ::testing::TestWithParam<std::tuple<uint64_t, Kind, Input>> {};

TEST_P(ThcCudaHadamard, MatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [block, kind, input] = GetParam();
  const uint64_t blocks_for_partial_tile = block < 8192 ? 8192 / block + 3 : 1;
  for (const uint64_t blocks : {uint64_t{1}, uint64_t{3}, blocks_for_partial_tile}) {
    const uint64_t count = block * blocks;
    for (const bool in_place : {false, true}) {
      const uint64_t seed = case_seed(count, block, static_cast<uint64_t>(kind) * 8 + static_cast<uint64_t>(input),
                                      in_place);
      const uint64_t index_base = kind == Kind::kPlain ? 0 : in_place ? 0 : seed % 1000003;
      check_transform(block, count, kind, input, index_base, in_place, {}, seed);
    }
  }
}

std::string hadamard_case_name(const ::testing::TestParamInfo<ThcCudaHadamard::ParamType>& info) {
  const auto& [block, kind, input] = info.param;
  return fmt::format("b{}_{}_{}", block, kind_name(kind), input_name(input));
}

INSTANTIATE_TEST_SUITE_P(All, ThcCudaHadamard,
                         ::testing::Combine(::testing::Values<uint64_t>(1, 2, 4, 32, 1024, 2048, 4096, 8192, 16384,
                                                                        uint64_t{1} << 16, uint64_t{1} << 20),
                                            ::testing::Values(Kind::kPlain, Kind::kRandomized, Kind::kInverse),
                                            ::testing::Values(Input::kNormal, Input::kZeros, Input::kDenormals,
                                                              Input::kHuge, Input::kNonFinite, Input::kMixed)),
                         hadamard_case_name);

// The three-pass blocks (2^22 .. 2^24) and the largest two-pass one (2^21); then arrays of more
// than 4096 tiles, where a CTA runs several tiles (the grid-stride loop and the barrier that
// guards the shared-memory exchange between two tiles).
TEST(ThcCudaHadamardLarge, MatchesCpuForTheLargestBlocksAndArrays) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t block : {uint64_t{1} << 21, uint64_t{1} << 22, uint64_t{1} << 24}) {
    check_transform(block, block, Kind::kRandomized, Input::kNormal, 6, false, {}, case_seed(block, 1, 2, 3));
    check_transform(block, block, Kind::kInverse, Input::kNonFinite, 0, true, {}, case_seed(block, 4, 5, 6));
    check_transform(block, 2 * block, Kind::kPlain, Input::kMixed, 0, false, {}, case_seed(block, 7, 8, 9));
  }
  check_transform(8192, 8192 * 4099, Kind::kPlain, Input::kNonFinite, 0, false, {}, 41);
  check_transform(8192, 8192 * 4099, Kind::kInverse, Input::kNormal, 5, true, {}, 42);
  check_transform(uint64_t{1} << 16, (uint64_t{1} << 16) * 513, Kind::kRandomized, Input::kNormal, 0, false, {}, 43);
}

// Buffers off their 16-byte alignment take the scalar paths, for every pass structure.
TEST(ThcCudaHadamardUnaligned, MatchesCpuWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const Placement at : {Placement{4, 0}, Placement{0, 8}, Placement{12, 4}}) {
    for (const uint64_t block : {uint64_t{1}, uint64_t{4}, uint64_t{1024}, uint64_t{1} << 16, uint64_t{1} << 22}) {
      const uint64_t count = block < 8192 ? block * (8192 / block + 5) : block;
      const uint64_t seed = case_seed(count, at.in, at.out, 1);
      check_transform(block, count, Kind::kRandomized, Input::kNormal, 1, false, at, seed);
      check_transform(block, count, Kind::kInverse, Input::kNonFinite, 0, false, at, seed + 1);
    }
  }
}

// --- max |x| -------------------------------------------------------------------------------------

void check_max_abs(const std::vector<float>& x, uint64_t offset) {
  const float cpu = parallel_max_abs(x.data(), x.size());
  DeviceBuffer<float> d_x(x.size(), offset);
  DeviceBuffer<uint8_t> d_temp(max_abs_cuda_temp_bytes());
  DeviceBuffer<float> d_out(1);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_temp.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_TRUE(fill_garbage(d_out.get(), sizeof(float)));
  ASSERT_STATUS_OK(max_abs_cuda(d_x.get(), x.size(), d_temp.get(), max_abs_cuda_temp_bytes(), d_out.get()));
  const std::vector<float> gpu = download(d_out.get(), 1);
  expect_same_floats(std::span<const float>(&cpu, 1), gpu);
}

// Every input family over sizes around the vector width and the CPU's pieces, on aligned and
// misaligned buffers; NaNs at chosen places return the first one, payload and sign included.
TEST(ThcCudaMaxAbs, MatchesCpuBitwise) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{5}, uint64_t{1000},
                           uint64_t{65537}, uint64_t{1'000'003}, uint64_t{3'000'017}}) {
    for (const Input in : {Input::kNormal, Input::kZeros, Input::kDenormals, Input::kHuge, Input::kNonFinite,
                           Input::kMixed}) {
      for (const uint64_t offset : {uint64_t{0}, uint64_t{4}, uint64_t{12}}) {
        SCOPED_TRACE(fmt::format("n={} input={} offset={}", n, input_name(in), offset));
        check_max_abs(make_input(in, n, case_seed(n, static_cast<uint64_t>(in), offset, 0)), offset);
      }
    }
  }
  for (const uint64_t at : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{65535}, uint64_t{65536},
                            uint64_t{299'999}}) {
    SCOPED_TRACE(fmt::format("first NaN at {}", at));
    std::vector<float> x = make_input(Input::kNormal, 300'000, at);
    x[at] = from_bits(0xFF800123u);  // signalling, negative
    if (at + 7 < x.size()) x[at + 7] = from_bits(0x7FC00777u);
    x[x.size() / 2 + at / 2] = INFINITY;
    check_max_abs(x, 4);
  }
}

// --- the wire ------------------------------------------------------------------------------------

// Pack, unpack, unpack-accumulate and the fused hop of `count` fields of `bits` bits on both sides.
void check_wire(uint64_t count, uint32_t bits, const Placement& at, uint64_t seed) {
  SCOPED_TRACE(fmt::format("count={} bits={} offsets={}/{} seed={:#x}", count, bits, at.in, at.out, seed));
  std::mt19937_64 rng(seed);
  const uint32_t half = (1u << (bits - 1)) - 1;
  std::vector<float> x(count), acc(count);
  for (float& v : x) v = static_cast<float>(rng() % (half + 1));
  for (float& v : acc) v = static_cast<float>(rng() % (half + 1));
  const uint64_t bytes = thc_bytes(count, bits);
  DeviceBuffer<float> d_x(count, 4 * (at.in % 4)), d_acc(count, 4 * (at.out % 4));
  DeviceBuffer<uint8_t> d_msg(bytes, at.in), d_out(bytes, at.out);
  DeviceBuffer<uint64_t> d_overflows(1);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_acc.get(), nullptr);
  ASSERT_NE(d_msg.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_NE(d_overflows.get(), nullptr);
  ASSERT_CUDA_OK(cudaMemset(d_overflows.get(), 0, sizeof(uint64_t)));

  std::vector<uint8_t> cpu_msg(bytes);
  thc_pack(x.data(), count, bits, cpu_msg.data());
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_TRUE(fill_garbage(d_msg.get(), bytes));
  ASSERT_STATUS_OK(thc_pack_cuda(d_x.get(), count, bits, d_msg.get(), d_overflows.get()));
  {
    SCOPED_TRACE("pack");
    expect_same_bytes(cpu_msg, download(d_msg.get(), bytes));
  }

  std::vector<float> cpu_dec(count);
  thc_unpack(cpu_msg.data(), count, bits, cpu_dec.data());
  ASSERT_TRUE(fill_garbage(d_acc.get(), count * sizeof(float)));
  ASSERT_STATUS_OK(thc_unpack_cuda(d_msg.get(), count, bits, d_acc.get()));
  {
    SCOPED_TRACE("unpack");
    expect_same_floats(cpu_dec, download(d_acc.get(), count));
  }

  std::vector<float> cpu_acc = acc;
  thc_unpack_accumulate(cpu_msg.data(), count, bits, cpu_acc.data());
  ASSERT_CUDA_OK(d_acc.upload(acc));
  ASSERT_STATUS_OK(thc_unpack_accumulate_cuda(d_msg.get(), count, bits, d_acc.get()));
  {
    SCOPED_TRACE("unpack_accumulate");
    expect_same_floats(cpu_acc, download(d_acc.get(), count));
  }

  std::vector<uint8_t> cpu_out(bytes);
  thc_pack(cpu_acc.data(), count, bits, cpu_out.data());
  ASSERT_CUDA_OK(d_acc.upload(acc));
  ASSERT_TRUE(fill_garbage(d_out.get(), bytes));
  ASSERT_STATUS_OK(thc_unpack_accumulate_pack_cuda(d_msg.get(), count, bits, d_acc.get(), d_out.get(),
                                                   d_overflows.get()));
  {
    SCOPED_TRACE("unpack_accumulate_pack: acc");
    expect_same_floats(cpu_acc, download(d_acc.get(), count));
  }
  {
    SCOPED_TRACE("unpack_accumulate_pack: message");
    expect_same_bytes(cpu_out, download(d_out.get(), bytes));
  }
  EXPECT_EQ(download(d_overflows.get(), 1), std::vector<uint64_t>{0});
}

class ThcCudaWire : public ::testing::TestWithParam<std::tuple<uint32_t, uint64_t>> {};

TEST_P(ThcCudaWire, MatchesCpuBytewise) {
  SKIP_WITHOUT_GPU();
  const auto [bits, count] = GetParam();
  for (const Placement at : {Placement{0, 0}, Placement{1, 3}, Placement{4, 8}, Placement{6, 12}, Placement{8, 1}})
    check_wire(count, bits, at, case_seed(count, bits, at.in, at.out));
}

INSTANTIATE_TEST_SUITE_P(All, ThcCudaWire,
                         ::testing::Combine(::testing::Values(8u, 12u, 16u),
                                            ::testing::Values<uint64_t>(1, 5, 8, 9, 13, 64, 4099, 1'000'001)),
                         [](const ::testing::TestParamInfo<ThcCudaWire::ParamType>& info) {
                           return fmt::format("bits{}_n{}", std::get<0>(info.param), std::get<1>(info.param));
                         });

// Values the CPU's pack rejects (it aborts) are counted, and their fields saturate; the others are
// packed as usual.
TEST(ThcCudaWireOverflow, CountsAndSaturatesValuesThatDoNotFit) {
  SKIP_WITHOUT_GPU();
  for (const uint32_t bits : {8u, 12u, 16u}) {
    SCOPED_TRACE(fmt::format("bits={}", bits));
    const uint64_t count = 10'007;
    const float top = static_cast<float>((1u << bits) - 1u);
    std::vector<float> x(count);
    std::vector<uint32_t> want(count);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < count; ++i) {
      x[i] = static_cast<float>(i % (1u << bits));
      want[i] = static_cast<uint32_t>(x[i]);
      if (i % 13 != 0) continue;
      const std::pair<float, uint32_t> cases[] = {{-1.0f, 0u},
                                                  {top + 1.0f, static_cast<uint32_t>(top)},
                                                  {2.5f, 2u},
                                                  {NAN, 0u},
                                                  {INFINITY, static_cast<uint32_t>(top)},
                                                  {-INFINITY, 0u}};
      std::tie(x[i], want[i]) = cases[(i / 13) % 6];
      ++bad;
    }
    const uint64_t bytes = thc_bytes(count, bits);
    DeviceBuffer<float> d_x(count), d_acc(count);
    DeviceBuffer<uint8_t> d_in(bytes), d_out(bytes);
    DeviceBuffer<uint64_t> d_overflows(1);
    ASSERT_NE(d_x.get(), nullptr);
    ASSERT_NE(d_acc.get(), nullptr);
    ASSERT_NE(d_in.get(), nullptr);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_NE(d_overflows.get(), nullptr);
    ASSERT_CUDA_OK(d_x.upload(x));
    ASSERT_CUDA_OK(cudaMemset(d_overflows.get(), 0, sizeof(uint64_t)));
    ASSERT_STATUS_OK(thc_pack_cuda(d_x.get(), count, bits, d_out.get(), d_overflows.get()));
    EXPECT_EQ(download(d_overflows.get(), 1), std::vector<uint64_t>{bad});
    const std::vector<uint8_t> packed = download(d_out.get(), bytes);
    for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(thc_field_get(packed.data(), i, bits), want[i]) << "field " << i;
    // The fused hop checks the sums: zero fields in, the same values in acc.
    ASSERT_CUDA_OK(cudaMemset(d_in.get(), 0, bytes));
    ASSERT_CUDA_OK(d_acc.upload(x));
    ASSERT_CUDA_OK(cudaMemset(d_overflows.get(), 0, sizeof(uint64_t)));
    ASSERT_STATUS_OK(
        thc_unpack_accumulate_pack_cuda(d_in.get(), count, bits, d_acc.get(), d_out.get(), d_overflows.get()));
    EXPECT_EQ(download(d_overflows.get(), 1), std::vector<uint64_t>{bad});
    EXPECT_EQ(download(d_out.get(), bytes), packed);
    // Without a counter the fields are the same.
    ASSERT_STATUS_OK(thc_pack_cuda(d_x.get(), count, bits, d_out.get()));
    EXPECT_EQ(download(d_out.get(), bytes), packed);
  }
}

// --- whole THC rounds ----------------------------------------------------------------------------

struct ThcConfig {
  const char* name;
  uint32_t q;
  uint32_t bits;  // 0 = auto
  uint64_t rotation_block;
};

const std::vector<ThcConfig>& configs() {
  static const std::vector<ThcConfig> c = {
      {"default", 4, 0, uint64_t{1} << 20},  // one pass up to 8192 elements, two above
      {"q3_b12_r1024", 3, 12, 1024},
      {"q2_b16_r16384", 2, 16, 16384},
      {"q8_b12_r4096", 8, 12, 4096},
      {"q5_b8_r1", 5, 8, 1},
      {"q4_b8_r2", 4, 8, 2},
  };
  return c;
}

// THC's finish of the chain's sum (`sum` on the host, `d_sum` on the device) on both sides: into its
// own buffer (the sum is the workspace), then in place on a fresh copy.
void check_finish(ThcCompressor& cpu, const std::vector<float>& sum, float* d_sum, uint64_t count,
                  const ThcLattice& lattice, uint32_t ranks, const RngKey& sign_key, const Placement& at) {
  const uint64_t block = cpu.rotation_block_for(count), padded = sum.size();
  std::vector<float> cpu_out(count);
  cpu.finish(sum, cpu_out, ranks - 1, ranks);
  {
    SCOPED_TRACE("finish");
    DeviceBuffer<float> d_out(count, at.in);
    ASSERT_NE(d_out.get(), nullptr);
    ASSERT_TRUE(fill_garbage(d_out.get(), count * sizeof(float)));
    ASSERT_STATUS_OK(thc_finish_cuda(d_sum, count, block, lattice, ranks, sign_key, d_out.get()));
    expect_same_floats(cpu_out, download(d_out.get(), count));
  }
  {
    SCOPED_TRACE("finish in place");
    DeviceBuffer<float> d_work(padded, at.out);
    ASSERT_NE(d_work.get(), nullptr);
    ASSERT_CUDA_OK(d_work.upload(sum));
    ASSERT_STATUS_OK(thc_finish_cuda(d_work.get(), count, block, lattice, ranks, sign_key, d_work.get()));
    expect_same_floats(cpu_out, download(d_work.get(), count));
  }
}

// A whole round on `xs` (one vector per rank) on both sides, keys {seed, round} as the numerics
// interpreter draws them: plan_local of every rank, plan_commit on the CPU, prepare of every rank,
// a reduce along the chain of ranks 0 -> 1 -> ... -> n-1 (rank 0 packs, the middle ranks run the
// fused hop on their own codes, the last decode-accumulates), unpack of the last message, and
// finish of the sum (into a separate buffer and in place).
void check_round(const ThcConfig& cfg, const std::vector<std::vector<float>>& xs, uint64_t seed, const Placement& at) {
  const uint32_t ranks = static_cast<uint32_t>(xs.size()), round = 4;
  const uint64_t count = xs[0].size();
  ThcCompressor cpu(cfg.q, cfg.bits, cfg.rotation_block);
  const uint64_t block = cpu.rotation_block_for(count), padded = cpu.reduced_elements(count);
  SCOPED_TRACE(fmt::format("config={} count={} ranks={} block={} padded={} seed={:#x} offsets={}/{}", cfg.name, count,
                           ranks, block, padded, seed, at.in, at.out));
  ASSERT_EQ(padded, thc_padded_elements(count, block));

  // plan_local, every rank
  std::deque<DeviceBuffer<float>> d_x;  // DeviceBuffer does not move
  for (uint32_t r = 0; r < ranks; ++r) {
    d_x.emplace_back(count, at.in);
    ASSERT_NE(d_x.back().get(), nullptr);
    ASSERT_CUDA_OK(d_x.back().upload(xs[r]));
  }
  const uint64_t temp_bytes = thc_plan_local_cuda_temp_bytes(count, block);
  DeviceBuffer<uint8_t> d_temp(temp_bytes);
  DeviceBuffer<float> d_entry(1);
  ASSERT_NE(d_temp.get(), nullptr);
  ASSERT_NE(d_entry.get(), nullptr);
  for (uint32_t r = 0; r < ranks; ++r) {
    SCOPED_TRACE(fmt::format("plan_local, rank {}", r));
    const RngKey key{seed, round, r, algo::kPlanStream};
    algo::PlanStats stats;
    stats.max.assign(1, 0.0f);
    cpu.plan_local(xs[r], r, key, stats);
    ASSERT_TRUE(fill_garbage(d_entry.get(), sizeof(float)));
    ASSERT_STATUS_OK(thc_plan_local_cuda(d_x[r].get(), count, block, ThcCompressor::shared_key(key), d_temp.get(),
                                         temp_bytes, d_entry.get()));
    expect_same_floats(stats.max, download(d_entry.get(), 1));
  }
  std::vector<std::span<const float>> spans(xs.begin(), xs.end());
  const auto plan = algo::plan_round(cpu, spans, {seed, round});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const ThcLattice lattice = cpu.committed_lattice();
  const RngKey sign_key = ThcCompressor::shared_key({seed, round, 0, 0});

  // prepare, every rank
  std::vector<std::vector<float>> codes(ranks, std::vector<float>(padded));
  std::deque<DeviceBuffer<float>> d_codes;
  for (uint32_t r = 0; r < ranks; ++r) {
    SCOPED_TRACE(fmt::format("prepare, rank {}", r));
    const RngKey key{seed, round, r, algo::kPrepareStream};
    cpu.prepare(xs[r], codes[r], r, ranks, key);
    d_codes.emplace_back(padded, at.out);
    ASSERT_NE(d_codes.back().get(), nullptr);
    ASSERT_TRUE(fill_garbage(d_codes.back().get(), padded * sizeof(float)));
    ASSERT_STATUS_OK(thc_prepare_cuda(d_x[r].get(), count, block, lattice, sign_key, key, d_codes.back().get()));
    expect_same_floats(codes[r], download(d_codes.back().get(), padded));
  }

  // the reduce chain
  const uint32_t bits = cpu.aggregation_bits(ranks);
  const uint64_t bytes = thc_bytes(padded, bits);
  const HopContext hop{1, ranks};
  const TensorSpec spec{0, padded};
  DeviceBuffer<uint8_t> d_msg_a(bytes, at.in), d_msg_b(bytes, at.out);
  DeviceBuffer<uint64_t> d_overflows(1);
  ASSERT_NE(d_msg_a.get(), nullptr);
  ASSERT_NE(d_msg_b.get(), nullptr);
  ASSERT_NE(d_overflows.get(), nullptr);
  ASSERT_CUDA_OK(cudaMemset(d_overflows.get(), 0, sizeof(uint64_t)));
  uint8_t* d_a = d_msg_a.get();  // the message in flight
  uint8_t* d_b = d_msg_b.get();  // the next one
  std::vector<uint8_t> cpu_msg(bytes), cpu_next(bytes);
  cpu.encode(codes[0], spec, hop, RngKey{}, cpu_msg);
  ASSERT_STATUS_OK(thc_pack_cuda(d_codes[0].get(), padded, bits, d_a, d_overflows.get()));
  {
    SCOPED_TRACE("pack, rank 0");
    expect_same_bytes(cpu_msg, download(d_a, bytes));
  }
  std::vector<float> sum = codes[0];
  float* d_sum = d_codes[0].get();
  for (uint32_t r = 1; r < ranks; ++r) {
    SCOPED_TRACE(fmt::format("hop at rank {}", r));
    sum = codes[r];
    d_sum = d_codes[r].get();
    if (r + 1 < ranks) {
      cpu.decode_accumulate_encode(cpu_msg, spec, {r, ranks}, sum, {r + 1, ranks}, RngKey{}, cpu_next);
      ASSERT_STATUS_OK(thc_unpack_accumulate_pack_cuda(d_a, padded, bits, d_sum, d_b, d_overflows.get()));
      expect_same_bytes(cpu_next, download(d_b, bytes));
      std::swap(cpu_msg, cpu_next);
      std::swap(d_a, d_b);
    } else {
      cpu.decode_accumulate(cpu_msg, spec, {r, ranks}, sum);
      ASSERT_STATUS_OK(thc_unpack_accumulate_cuda(d_a, padded, bits, d_sum));
    }
    expect_same_floats(sum, download(d_sum, padded));
  }
  EXPECT_EQ(download(d_overflows.get(), 1), std::vector<uint64_t>{0});
  {
    SCOPED_TRACE("unpack of the last message");
    std::vector<float> cpu_dec(padded);
    cpu.decode(cpu_msg, spec, hop, cpu_dec);
    DeviceBuffer<float> d_dec(padded, at.out);
    ASSERT_NE(d_dec.get(), nullptr);
    ASSERT_TRUE(fill_garbage(d_dec.get(), padded * sizeof(float)));
    ASSERT_STATUS_OK(thc_unpack_cuda(d_a, padded, bits, d_dec.get()));
    expect_same_floats(cpu_dec, download(d_dec.get(), padded));
  }

  check_finish(cpu, sum, d_sum, count, lattice, ranks, sign_key, at);
}

std::vector<std::vector<float>> rank_inputs(Input input, uint64_t count, uint32_t ranks, uint64_t seed) {
  std::vector<std::vector<float>> xs;
  for (uint32_t r = 0; r < ranks; ++r) xs.push_back(make_input(input, count, seed + r));
  return xs;
}

// Every configuration over sizes that take one, two and three... passes of the rotation (up to
// the configuration's block), partial blocks and padding, and 1, 2 and 4 ranks.
class ThcCudaRound : public ::testing::TestWithParam<std::tuple<size_t, uint64_t>> {};

TEST_P(ThcCudaRound, MatchesCpuCompressorBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [config, count] = GetParam();
  for (const uint32_t ranks : {1u, 2u, 4u}) {
    const uint64_t seed = case_seed(count, config, ranks, 0);
    check_round(configs()[config], rank_inputs(Input::kNormal, count, ranks, seed), seed, {});
  }
}

INSTANTIATE_TEST_SUITE_P(All, ThcCudaRound,
                         ::testing::Combine(::testing::Range<size_t>(0, 6),
                                            ::testing::Values<uint64_t>(1, 7, 1000, 8192, 10'000, 70'001, 300'000)),
                         [](const ::testing::TestParamInfo<ThcCudaRound::ParamType>& info) {
                           return fmt::format("{}_n{}", configs()[std::get<0>(info.param)].name,
                                              std::get<1>(info.param));
                         });

// Adversarial tensors: all zero (a zero lattice), non-finite (NaN everywhere after finish), huge,
// denormal and mixed-magnitude ones, on every rank or on one rank among normal ones.
TEST(ThcCudaAdversarial, MatchesCpuCompressorBitwise) {
  SKIP_WITHOUT_GPU();
  for (const Input input : {Input::kZeros, Input::kDenormals, Input::kHuge, Input::kNonFinite, Input::kMixed}) {
    for (const size_t config : {size_t{0}, size_t{3}}) {
      const uint64_t count = 5'000, seed = case_seed(count, static_cast<uint64_t>(input), config, 1);
      SCOPED_TRACE(fmt::format("input={} everywhere", input_name(input)));
      std::vector<std::vector<float>> xs = rank_inputs(input, count, 4, seed);
      check_round(configs()[config], xs, seed, {});
      SCOPED_TRACE(fmt::format("input={} on rank 0 only", input_name(input)));
      for (uint32_t r = 1; r < 4; ++r) xs[r] = make_input(Input::kNormal, count, seed + 10 + r);
      check_round(configs()[config], xs, seed + 1, {});
    }
  }
}

// Misaligned float and wire buffers.
TEST(ThcCudaUnaligned, MatchesCpuCompressorWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const Placement at : {Placement{4, 0}, Placement{0, 8}, Placement{12, 4}}) {
    for (const size_t config : {size_t{0}, size_t{1}, size_t{4}}) {
      const uint64_t count = 20'003, seed = case_seed(count, at.in, at.out, config);
      check_round(configs()[config], rank_inputs(Input::kNormal, count, 3, seed), seed, at);
    }
  }
}

// Seeds: the same case under many keys (signs and rounding draws).
TEST(ThcCudaSeeds, MatchesCpuCompressorOverSeeds) {
  SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const uint32_t ranks = 2 + static_cast<uint32_t>(seed % 7);
    check_round(configs()[seed % 2 == 0 ? 0 : 3], rank_inputs(Input::kNormal, 9'000 + seed, ranks, seed), seed, {});
  }
}

// The largest rotation block (2^24: three passes) on a tensor just above 2^22.
TEST(ThcCudaLarge, MatchesCpuCompressorWithTheLargestBlock) {
  SKIP_WITHOUT_GPU();
  const ThcConfig cfg{"r2^24", 4, 0, uint64_t{1} << 24};
  const uint64_t count = (uint64_t{1} << 22) + 5;
  check_round(cfg, rank_inputs(Input::kNormal, count, 3, 2024), 2024, {});
}

// The shipped gradient dump (gpt-bpe, 8 workers): a whole round through all 8 ranks at every step,
// with the default rotation block (2^19 for these 366336 entries: two passes) and a smaller one.
TEST(ThcCudaGradient, RoundOverTheShippedDumpMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";
  auto dump = traces::GradientDump::open(dir);
  ASSERT_TRUE(dump.ok()) << dump.status().message();
  for (size_t step = 0; step < dump->steps(); ++step) {
    std::vector<std::vector<float>> xs;
    for (uint32_t w = 0; w < dump->workers(); ++w) {
      auto g = dump->worker(w, step);
      ASSERT_TRUE(g.ok()) << g.status().message();
      xs.emplace_back(g->values().begin(), g->values().end());
    }
    SCOPED_TRACE(fmt::format("step {}", step));
    check_round(configs()[0], xs, 77 + step, {});
    check_round({"q4_b12_r4096", 4, 12, 4096}, xs, 78 + step, {});
  }
}

// --- arguments (checked before any launch: needs no device) --------------------------------------

TEST(ThcCudaArguments, PassesAndPadding) {
  EXPECT_EQ(hadamard_cuda_passes(1), 1u);
  EXPECT_EQ(hadamard_cuda_passes(8192), 1u);
  EXPECT_EQ(hadamard_cuda_passes(16384), 2u);
  EXPECT_EQ(hadamard_cuda_passes(uint64_t{1} << 21), 2u);
  EXPECT_EQ(hadamard_cuda_passes(uint64_t{1} << 22), 3u);
  EXPECT_EQ(hadamard_cuda_passes(uint64_t{1} << 24), 3u);
  EXPECT_EQ(thc_padded_elements(0, 1024), 0u);
  EXPECT_EQ(thc_padded_elements(1, 1024), 1024u);
  EXPECT_EQ(thc_padded_elements(2048, 1024), 2048u);
  EXPECT_EQ(thc_padded_elements(2049, 1024), 3072u);
  // plan_local's scratch: partial maxima, and the rotated tensor only when it takes two passes.
  EXPECT_EQ(thc_plan_local_cuda_temp_bytes(5000, 8192), thc_plan_local_cuda_temp_bytes(1, 1));
  EXPECT_GE(thc_plan_local_cuda_temp_bytes(20000, 16384), thc_plan_local_cuda_temp_bytes(1, 1) + 32768 * 4);
  EXPECT_GE(max_abs_cuda_temp_bytes(), 8u);
  // The padding agrees with the compressor's.
  const ThcCompressor c(4, 0, 4096);
  for (const uint64_t n : {uint64_t{1}, uint64_t{100}, uint64_t{4096}, uint64_t{10'000}})
    EXPECT_EQ(thc_padded_elements(n, c.rotation_block_for(n)), c.reduced_elements(n)) << n;
}

TEST(ThcCudaArguments, RejectsBadShapesBitsLatticesAndPointers) {
  // Non-null dummies: the checks never dereference them.
  auto* x = reinterpret_cast<float*>(uintptr_t{256});
  auto* bytes = reinterpret_cast<uint8_t*>(uintptr_t{256});
  void* temp = reinterpret_cast<void*>(uintptr_t{256});
  const RngKey key{};
  EXPECT_TRUE(hadamard_cuda_can_implement(3 * 1024, 1024).ok());
  EXPECT_TRUE(hadamard_cuda_can_implement(0, 1).ok());
  EXPECT_TRUE(hadamard_cuda_can_implement(uint64_t{1} << 24, uint64_t{1} << 24).ok());
  EXPECT_EQ(hadamard_cuda_can_implement(1000, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hadamard_cuda_can_implement(3 * 1000, 1000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hadamard_cuda_can_implement(1000, 1024).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hadamard_cuda_can_implement(uint64_t{1} << 25, uint64_t{1} << 25).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hadamard_transform_cuda(x, 1000, 1024, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(randomized_hadamard_transform_cuda(x, 1024, 3, key, 0, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(randomized_hadamard_inverse_cuda(x, 100, 64, key, 0, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hadamard_transform_cuda(nullptr, 1024, 1024, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(randomized_hadamard_inverse_cuda(x, 1024, 1024, key, 0, nullptr).code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(thc_cuda_can_implement(1000, 1024).ok());
  EXPECT_EQ(thc_cuda_can_implement(1000, 1000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_cuda_can_implement(1000, uint64_t{1} << 25).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(thc_wire_cuda_can_implement(10, 12).ok());
  for (const uint32_t bits : {0u, 4u, 10u, 24u, 32u}) {
    EXPECT_EQ(thc_wire_cuda_can_implement(10, bits).code(), StatusCode::kInvalidArgument) << bits;
    EXPECT_EQ(thc_pack_cuda(x, 10, bits, bytes).code(), StatusCode::kInvalidArgument) << bits;
    EXPECT_EQ(thc_unpack_cuda(bytes, 10, bits, x).code(), StatusCode::kInvalidArgument) << bits;
    EXPECT_EQ(thc_unpack_accumulate_cuda(bytes, 10, bits, x).code(), StatusCode::kInvalidArgument) << bits;
    EXPECT_EQ(thc_unpack_accumulate_pack_cuda(bytes, 10, bits, x, bytes).code(), StatusCode::kInvalidArgument) << bits;
  }
  EXPECT_EQ(thc_pack_cuda(nullptr, 10, 8, bytes).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_pack_cuda(x, 10, 8, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_unpack_cuda(nullptr, 10, 12, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_unpack_accumulate_cuda(bytes, 10, 16, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_unpack_accumulate_pack_cuda(bytes, 10, 8, x, nullptr).code(), StatusCode::kInvalidArgument);

  ThcLattice valid;
  valid.kind = ThcLattice::Kind::kValid;
  valid.k = -3;
  valid.m = 1.5f;
  valid.levels = 15;
  valid.step = (2.0f * valid.m) / 15.0f;
  valid.inv_step = 15.0f / (2.0f * valid.m);
  for (const auto& mutate : std::vector<void (*)(ThcLattice&)>{
           [](ThcLattice& l) { l.m = 0.0f; }, [](ThcLattice& l) { l.m = INFINITY; }, [](ThcLattice& l) { l.m = NAN; },
           [](ThcLattice& l) { l.step = 0.0f; }, [](ThcLattice& l) { l.inv_step = -1.0f; },
           [](ThcLattice& l) { l.levels = 0; }, [](ThcLattice& l) { l.levels = 1u << 16; },
           [](ThcLattice& l) { l.k = 251; }}) {
    ThcLattice bad = valid;
    mutate(bad);
    EXPECT_EQ(thc_prepare_cuda(x, 100, 128, bad, key, key, x).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(thc_finish_cuda(x, 100, 128, bad, 2, key, x).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(thc_prepare_cuda(x, 100, 100, valid, key, key, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_finish_cuda(x, 100, 96, valid, 2, key, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_prepare_cuda(nullptr, 100, 128, valid, key, key, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_prepare_cuda(x, 100, 128, valid, key, key, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_finish_cuda(nullptr, 100, 128, valid, 2, key, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_finish_cuda(x, 100, 128, valid, 2, key, nullptr).code(), StatusCode::kInvalidArgument);

  // Scratch: too small or misaligned.
  const uint64_t need = thc_plan_local_cuda_temp_bytes(100'000, 1 << 17);
  EXPECT_EQ(thc_plan_local_cuda(x, 100'000, 1 << 17, key, temp, need - 1, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_plan_local_cuda(x, 100'000, 1 << 17, key, bytes + 4, need, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_plan_local_cuda(x, 100'000, 1000, key, temp, need, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_plan_local_cuda(nullptr, 100'000, 1 << 17, key, temp, need, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(thc_plan_local_cuda(x, 100'000, 1 << 17, key, temp, need, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(max_abs_cuda(x, 10, temp, max_abs_cuda_temp_bytes() - 1, x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(max_abs_cuda(x, 10, bytes + 8, max_abs_cuda_temp_bytes(), x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(max_abs_cuda(nullptr, 10, temp, max_abs_cuda_temp_bytes(), x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(max_abs_cuda(x, 10, temp, max_abs_cuda_temp_bytes(), nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(ThcCudaArguments, EmptyIsANoOp) {
  const ThcLattice zero{};
  EXPECT_TRUE(hadamard_transform_cuda(nullptr, 0, 1024, nullptr).ok());
  EXPECT_TRUE(randomized_hadamard_transform_cuda(nullptr, 0, 1, RngKey{}, 0, nullptr).ok());
  EXPECT_TRUE(randomized_hadamard_inverse_cuda(nullptr, 0, 8, RngKey{}, 0, nullptr).ok());
  EXPECT_TRUE(thc_prepare_cuda(nullptr, 0, 1024, zero, RngKey{}, RngKey{}, nullptr).ok());
  EXPECT_TRUE(thc_finish_cuda(nullptr, 0, 1024, zero, 2, RngKey{}, nullptr).ok());
  EXPECT_TRUE(thc_pack_cuda(nullptr, 0, 8, nullptr).ok());
  EXPECT_TRUE(thc_unpack_cuda(nullptr, 0, 12, nullptr).ok());
  EXPECT_TRUE(thc_unpack_accumulate_cuda(nullptr, 0, 16, nullptr).ok());
  EXPECT_TRUE(thc_unpack_accumulate_pack_cuda(nullptr, 0, 8, nullptr, nullptr).ok());
}

// An empty tensor's maximum and plan entry are +0 (written: the output is always set).
TEST(ThcCudaEmpty, MaximaOfAnEmptyTensorAreZero) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer<float> d_out(2);
  DeviceBuffer<uint8_t> d_temp(thc_plan_local_cuda_temp_bytes(0, 1));
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_NE(d_temp.get(), nullptr);
  ASSERT_TRUE(fill_garbage(d_out.get(), 2 * sizeof(float)));
  ASSERT_STATUS_OK(max_abs_cuda(nullptr, 0, nullptr, 0, d_out.get()));
  ASSERT_STATUS_OK(thc_plan_local_cuda(nullptr, 0, 1, RngKey{}, nullptr, 0, d_out.get() + 1));
  EXPECT_EQ(download(d_out.get(), 2), (std::vector<float>{0.0f, 0.0f}));
}

}  // namespace
}  // namespace ccsim::kern
