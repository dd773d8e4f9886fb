// The CUDA BF16 and block-int8 codecs against their CPU references (kernels/quant/*.cpp): encoded
// bytes must match exactly (memcmp), decoded floats bit for bit. Seeded inputs over sizes, block
// sizes, rounding modes and input families; every case logs its parameters. GPU tests skip when
// no device is present, so the suite passes on CPU-only machines.

// fmt 9 turns FMT_CONSTEXPR off under nvcc (a workaround for old nvcc), which breaks its C++20
// consteval format-string check; nvcc 13 compiles the constexpr path, as g++ does (same value as
// in the g++-compiled libraries, so no ODR difference). Must precede every fmt include.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/block_int8_quant.hpp"
#include "tests/kernels/cuda_test_support.cuh"

namespace ccsim::kern {
namespace {

using namespace ::ccsim::kern::testing;

// --- BF16 ----------------------------------------------------------------------------------------

// Runs the three BF16 ops on both sides and compares. The offsets shift the device float and bf16
// buffers off their vector alignment (multiples of 4 and 2 bytes respectively).
void check_bf16(const std::vector<float>& x, uint64_t seed, uint64_t float_offset, uint64_t bf16_offset,
                bool nan_payload_may_differ) {
  const uint64_t n = x.size();
  std::vector<uint16_t> cpu_enc(n), gpu_enc(n);
  bf16_encode(x.data(), n, cpu_enc.data());
  DeviceBuffer<float> d_x(n, float_offset);
  DeviceBuffer<uint16_t> d_enc(n, bf16_offset);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_enc.get(), nullptr);
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_STATUS_OK(bf16_encode_cuda(d_x.get(), n, d_enc.get()));
  ASSERT_CUDA_OK(d_enc.download(gpu_enc));
  expect_same_bytes(cpu_enc.data(), gpu_enc.data(), n * sizeof(uint16_t));

  std::vector<float> cpu_dec(n), gpu_dec(n);
  bf16_decode(cpu_enc.data(), n, cpu_dec.data());
  DeviceBuffer<float> d_dec(n, float_offset);
  ASSERT_NE(d_dec.get(), nullptr);
  ASSERT_CUDA_OK(d_enc.upload(cpu_enc));
  ASSERT_STATUS_OK(bf16_decode_cuda(d_enc.get(), n, d_dec.get()));
  ASSERT_CUDA_OK(d_dec.download(gpu_dec));
  {
    SCOPED_TRACE("decode");
    expect_same_floats(cpu_dec, gpu_dec, false);  // a pure bit copy: exact even for NaN
  }

  std::vector<float> cpu_acc = make_input(Input::kNormal, n, seed + 1), gpu_acc(n);
  ASSERT_CUDA_OK(d_dec.upload(cpu_acc));
  bf16_decode_accumulate(cpu_enc.data(), n, cpu_acc.data());
  ASSERT_STATUS_OK(bf16_decode_accumulate_cuda(d_enc.get(), n, d_dec.get()));
  ASSERT_CUDA_OK(d_dec.download(gpu_acc));
  {
    SCOPED_TRACE("decode_accumulate");
    expect_same_floats(cpu_acc, gpu_acc, nan_payload_may_differ);
  }

  // Fused hop: decode_accumulate then encode on the CPU; the GPU output starts as garbage.
  std::vector<float> cpu_fused = make_input(Input::kNormal, n, seed + 2), gpu_fused(n);
  std::vector<uint16_t> cpu_out(n), gpu_out(n);
  DeviceBuffer<uint16_t> d_out(n, bf16_offset);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_dec.upload(cpu_fused));
  ASSERT_CUDA_OK(d_out.fill(0xA5));
  bf16_decode_accumulate(cpu_enc.data(), n, cpu_fused.data());
  bf16_encode(cpu_fused.data(), n, cpu_out.data());
  ASSERT_STATUS_OK(bf16_decode_accumulate_encode_cuda(d_enc.get(), n, d_dec.get(), d_out.get()));
  ASSERT_CUDA_OK(d_dec.download(gpu_fused));
  ASSERT_CUDA_OK(d_out.download(gpu_out));
  {
    SCOPED_TRACE("decode_accumulate_encode");
    expect_same_floats(cpu_fused, gpu_fused, nan_payload_may_differ);
    // Codes compared through their exact expansion to fp32, so that NaN codes follow the same rule.
    std::vector<float> cpu_codes(n), gpu_codes(n);
    bf16_decode(cpu_out.data(), n, cpu_codes.data());
    bf16_decode(gpu_out.data(), n, gpu_codes.data());
    expect_same_floats(cpu_codes, gpu_codes, nan_payload_may_differ);
  }
}

class Bf16Cuda : public ::testing::TestWithParam<std::tuple<uint64_t, Input>> {};

TEST_P(Bf16Cuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, input] = GetParam();
  const uint64_t seed = case_seed(n, static_cast<uint64_t>(input), 0, 0);
  SCOPED_TRACE(fmt::format("n={} input={} seed={:#x}", n, input_name(input), seed));
  check_bf16(make_input(input, n, seed), seed, 0, 0, input == Input::kNonFinite);
}

std::string bf16_case_name(const ::testing::TestParamInfo<Bf16Cuda::ParamType>& info) {
  const auto& [n, input] = info.param;
  return fmt::format("n{}_{}", n, input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Bf16Cuda,
                         ::testing::Combine(::testing::Values(1u, 31u, 32u, 33u, 4097u, 1u << 20),
                                            ::testing::Values(Input::kNormal, Input::kZeros, Input::kDenormals,
                                                              Input::kHuge, Input::kMixed, Input::kNonFinite)),
                         bf16_case_name);

TEST(Bf16CudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  // (float, bf16) byte offsets: off vector alignment for floats, for bf16, for both; both shifted but
  // still aligned (the vector path on non-base pointers).
  for (const auto& [float_offset, bf16_offset] : {std::pair<uint64_t, uint64_t>{4, 0}, {0, 2}, {8, 6}, {16, 8}}) {
    const uint64_t n = 4097, seed = case_seed(n, float_offset, bf16_offset, 1);
    SCOPED_TRACE(fmt::format("n={} float_offset={} bf16_offset={} seed={:#x}", n, float_offset, bf16_offset, seed));
    check_bf16(make_input(Input::kMixed, n, seed), seed, float_offset, bf16_offset, false);
  }
}

// --- block int8 ----------------------------------------------------------------------------------


// Runs encode, decode and decode-accumulate on both sides and compares. The offsets shift the
// device float buffers (by multiples of 4 bytes) and the wire buffer (by any byte count).
void check_block_int8(const std::vector<float>& x, uint32_t block, Rounding rounding, uint64_t seed,
                      uint64_t float_offset, uint64_t wire_offset, bool nan_payload_may_differ) {
  const uint64_t n = x.size(), wire = block_int8_bytes(n, block);
  const RngKey key{seed, 3, 5, 7};
  const uint64_t index_base = 1'000'003;  // not a multiple of 4: chunks start mid Philox block
  std::vector<uint8_t> cpu_enc(wire), gpu_enc(wire);
  block_int8_encode(x.data(), n, block, rounding, key, index_base, cpu_enc.data());
  DeviceBuffer<float> d_x(n, float_offset);
  DeviceBuffer<uint8_t> d_enc(wire, wire_offset);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_enc.get(), nullptr);
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_STATUS_OK(block_int8_encode_cuda(d_x.get(), n, block, rounding, key, index_base, d_enc.get()));
  ASSERT_CUDA_OK(d_enc.download(gpu_enc));
  expect_same_bytes(cpu_enc.data(), gpu_enc.data(), wire);

  std::vector<float> cpu_dec(n), gpu_dec(n);
  block_int8_decode(cpu_enc.data(), n, block, cpu_dec.data());
  DeviceBuffer<float> d_dec(n, float_offset);
  ASSERT_NE(d_dec.get(), nullptr);
  ASSERT_CUDA_OK(d_enc.upload(cpu_enc));
  ASSERT_STATUS_OK(block_int8_decode_cuda(d_enc.get(), n, block, d_dec.get()));
  ASSERT_CUDA_OK(d_dec.download(gpu_dec));
  {
    SCOPED_TRACE("decode");
    expect_same_floats(cpu_dec, gpu_dec, nan_payload_may_differ);  // 0 * inf in an inf block is NaN
  }

  std::vector<float> cpu_acc = make_input(Input::kNormal, n, seed + 1), gpu_acc(n);
  ASSERT_CUDA_OK(d_dec.upload(cpu_acc));
  block_int8_decode_accumulate(cpu_enc.data(), n, block, cpu_acc.data());
  ASSERT_STATUS_OK(block_int8_decode_accumulate_cuda(d_enc.get(), n, block, d_dec.get()));
  ASSERT_CUDA_OK(d_dec.download(gpu_acc));
  {
    SCOPED_TRACE("decode_accumulate");
    expect_same_floats(cpu_acc, gpu_acc, nan_payload_may_differ);
  }
}

class BlockInt8Cuda : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t, Rounding, Input>> {};

TEST_P(BlockInt8Cuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, block, rounding, input] = GetParam();
  const uint64_t seed = case_seed(n, block, static_cast<uint64_t>(rounding), static_cast<uint64_t>(input));
  SCOPED_TRACE(fmt::format("n={} block={} rounding={} input={} seed={:#x}", n, block, rounding_name(rounding),
                           input_name(input), seed));
  check_block_int8(make_input(input, n, seed), block, rounding, seed, 0, 0, input == Input::kNonFinite);
}

std::string block_int8_case_name(const ::testing::TestParamInfo<BlockInt8Cuda::ParamType>& info) {
  const auto& [n, block, rounding, input] = info.param;
  return fmt::format("n{}_block{}_{}_{}", n, block, rounding_name(rounding), input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, BlockInt8Cuda,
                         ::testing::Combine(::testing::Values(1u, 31u, 32u, 33u, 4097u, 1u << 20),
                                            ::testing::Values(32u, 64u, 256u),
                                            ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                                            ::testing::Values(Input::kNormal, Input::kZeros, Input::kDenormals,
                                                              Input::kHuge, Input::kMixed, Input::kNonFinite)),
                         block_int8_case_name);

// Block sizes that take the other kernel shapes: sub-warp groups, a warp looping, the whole CTA.
TEST(BlockInt8CudaShapes, MatchesReferenceForEveryGroupShape) {
  SKIP_WITHOUT_GPU();
  for (const uint32_t block : {1u, 3u, 8u, 17u, 1000u, 2049u, 65536u}) {
    for (const Rounding rounding : {Rounding::kNearest, Rounding::kStochastic}) {
      const uint64_t n = 200'003, seed = case_seed(n, block, static_cast<uint64_t>(rounding), 9);
      SCOPED_TRACE(
          fmt::format("n={} block={} rounding={} input=mixed seed={:#x}", n, block, rounding_name(rounding), seed));
      check_block_int8(make_input(Input::kMixed, n, seed), block, rounding, seed, 0, 0, false);
    }
  }
}

TEST(BlockInt8CudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  // (float, wire) byte offsets: the wire buffer, hence its fp32 maxima, may start at any byte.
  for (const auto& [float_offset, wire_offset] : {std::pair<uint64_t, uint64_t>{0, 1}, {4, 2}, {8, 3}, {12, 4}}) {
    const uint64_t n = 4097, seed = case_seed(n, float_offset, wire_offset, 2);
    SCOPED_TRACE(
        fmt::format("n={} block=64 float_offset={} wire_offset={} seed={:#x}", n, float_offset, wire_offset, seed));
    check_block_int8(make_input(Input::kNormal, n, seed), 64, Rounding::kStochastic, seed, float_offset, wire_offset,
                     false);
  }
}

// --- arguments (checked before any launch: needs no device) -------------------------------------

TEST(QuantCudaArguments, RejectsBadBlockSizeAndNullPointers) {
  float* d_x = nullptr;
  uint8_t* d_out = nullptr;
  for (const uint32_t block : {0u, kBlockInt8CudaMaxBlock + 1}) {
    SCOPED_TRACE(fmt::format("block={}", block));
    EXPECT_EQ(block_int8_encode_cuda(d_x, 10, block, Rounding::kNearest, RngKey{}, 0, d_out).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(block_int8_decode_cuda(d_out, 10, block, d_x).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(block_int8_decode_accumulate_cuda(d_out, 10, block, d_x).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(block_int8_encode_cuda(d_x, 10, 32, Rounding::kNearest, RngKey{}, 0, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bf16_encode_cuda(d_x, 10, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bf16_decode_cuda(nullptr, 10, d_x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bf16_decode_accumulate_cuda(nullptr, 10, d_x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bf16_decode_accumulate_encode_cuda(nullptr, 10, d_x, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(QuantCudaArguments, EmptyChunkIsANoOp) {
  EXPECT_TRUE(bf16_encode_cuda(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(bf16_decode_accumulate_cuda(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(block_int8_encode_cuda(nullptr, 0, 32, Rounding::kStochastic, RngKey{}, 0, nullptr).ok());
  EXPECT_TRUE(block_int8_decode_cuda(nullptr, 0, 32, nullptr).ok());
}

TEST(QuantCudaArguments, CudaStatusMapsErrors) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "op").ok());
  const Status s = cuda_status(cudaErrorInvalidValue, "op");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("op: cudaErrorInvalidValue"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ccsim::kern
