// The CUDA TFP, QSGD and FP16 codecs (kernels/cuda/block_cuda.hpp) against their CPU references
// (kernels/quant/tfp_quant.cpp, qsgd.cpp, fp16.cpp): encoded bytes exactly, decoded floats and
// accumulators bit for bit, for encode, decode, decode-accumulate and the fused hop, over sizes,
// formats, rounding modes, seeds and input families. GPU tests skip when no device is present.

// fmt 9 turns FMT_CONSTEXPR off under nvcc; see quant_cuda_test.cu. Must precede every fmt include.
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/block_cuda.hpp"
#include "kernels/quant/fp16_quant.hpp"
#include "kernels/quant/qsgd_quant.hpp"
#include "kernels/quant/tfp_quant.hpp"
#include "tests/kernels/block_cuda_test_util.cuh"

namespace ccsim::kern::cuda_test {
namespace {

constexpr uint64_t kIndexBase = 2'000'001;  // not a multiple of 4: chunks start mid Philox block

RngKey key_for(uint64_t seed) { return RngKey{seed, 1, 2, 9}; }

// --- TFP -----------------------------------------------------------------------------------------

std::string base_name(TfpBase b) {
  switch (b) {
    case TfpBase::kFloat32: return "fp32";
    case TfpBase::kFloat16: return "fp16";
    case TfpBase::kFloat8E4M3: return "fp8e4m3";
    case TfpBase::kFloat8E5M2: return "fp8e5m2";
  }
  return "?";
}

Codec tfp_codec(uint64_t n, const TfpFormat& f, bool random_rounding, const RngKey& key) {
  Codec c;
  c.wire_bytes = tfp_bytes(n, f.bits);
  c.cpu_encode = [=](const float* x, uint8_t* out) {
    tfp_encode(x, n, f, random_rounding, key, kIndexBase, out);
    return uint64_t{0};
  };
  c.cpu_decode = [=](const uint8_t* in, float* out) { tfp_decode(in, n, f, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { tfp_decode_accumulate(in, n, f, acc); };
  c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t*) {
    return tfp_encode_cuda(d_x, n, f, random_rounding, key, kIndexBase, d_out);
  };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) { return tfp_decode_cuda(d_in, n, f, d_out); };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return tfp_decode_accumulate_cuda(d_in, n, f, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t*) {
    return tfp_decode_accumulate_encode_cuda(d_in, n, f, d_acc, random_rounding, key, kIndexBase, d_out);
  };
  return c;
}

// (base, k): plain TFP widths of every base, its smallest and largest k, and widths whose codes
// straddle bytes (k = 10, 11, 23).
const std::vector<TfpFormat>& tfp_formats() {
  static const std::vector<TfpFormat> formats{
      {TfpBase::kFloat32, 16},   {TfpBase::kFloat32, 10},   {TfpBase::kFloat32, 23},  {TfpBase::kFloat32, 32},
      {TfpBase::kFloat16, 16},   {TfpBase::kFloat16, 11},   {TfpBase::kFloat16, 7},   {TfpBase::kFloat8E4M3, 8},
      {TfpBase::kFloat8E4M3, 6}, {TfpBase::kFloat8E5M2, 8}, {TfpBase::kFloat8E5M2, 7}};
  return formats;
}

class TfpCuda : public ::testing::TestWithParam<std::tuple<uint64_t, TfpFormat, bool, Input>> {};

TEST_P(TfpCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, f, random_rounding, input] = GetParam();
  const uint64_t seed = case_seed(n, static_cast<uint64_t>(f.base) * 64 + f.bits, random_rounding ? 1 : 0,
                                  static_cast<uint64_t>(input));
  SCOPED_TRACE(fmt::format("n={} base={} k={} random_rounding={} input={} seed={:#x}", n, base_name(f.base), f.bits,
                           random_rounding, input_name(input), seed));
  check_codec(tfp_codec(n, f, random_rounding, key_for(seed)), make_input(input, n, seed),
              make_accumulator(input, n, seed), input == Input::kNonFinite);
}

std::string tfp_case_name(const ::testing::TestParamInfo<TfpCuda::ParamType>& info) {
  const auto& [n, f, random_rounding, input] = info.param;
  return fmt::format("n{}_{}_k{}_{}_{}", n, base_name(f.base), f.bits, random_rounding ? "random" : "truncate",
                     input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TfpCuda,
                         ::testing::Combine(::testing::Values(1u, 33u, 4097u, 100'003u),
                                            ::testing::ValuesIn(tfp_formats()), ::testing::Bool(),
                                            ::testing::ValuesIn(all_inputs())),
                         tfp_case_name);

// --- QSGD ----------------------------------------------------------------------------------------

Codec qsgd_codec(uint64_t n, uint32_t bucket, uint32_t bits, const RngKey& key) {
  Codec c;
  c.wire_bytes = qsgd_bytes(n, bucket, bits);
  c.cpu_encode = [=](const float* x, uint8_t* out) {
    qsgd_encode(x, n, bucket, bits, key, kIndexBase, out);
    return uint64_t{0};
  };
  c.cpu_decode = [=](const uint8_t* in, float* out) { qsgd_decode(in, n, bucket, bits, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { qsgd_decode_accumulate(in, n, bucket, bits, acc); };
  c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t*) {
    return qsgd_encode_cuda(d_x, n, bucket, bits, key, kIndexBase, d_out);
  };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) { return qsgd_decode_cuda(d_in, n, bucket, bits, d_out); };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return qsgd_decode_accumulate_cuda(d_in, n, bucket, bits, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t*) {
    return qsgd_decode_accumulate_encode_cuda(d_in, n, bucket, bits, d_acc, key, kIndexBase, d_out);
  };
  return c;
}

class QsgdCuda : public ::testing::TestWithParam<std::tuple<uint64_t, std::pair<uint32_t, uint32_t>, Input>> {};

TEST_P(QsgdCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, shape, input] = GetParam();
  const auto [bucket, bits] = shape;
  const uint64_t seed = case_seed(n, bucket, bits, static_cast<uint64_t>(input));
  SCOPED_TRACE(
      fmt::format("n={} bucket={} bits={} input={} seed={:#x}", n, bucket, bits, input_name(input), seed));
  check_codec(qsgd_codec(n, bucket, bits, key_for(seed)), make_input(input, n, seed),
              make_accumulator(input, n, seed), input == Input::kNonFinite);
}

std::string qsgd_case_name(const ::testing::TestParamInfo<QsgdCuda::ParamType>& info) {
  const auto& [n, shape, input] = info.param;
  return fmt::format("n{}_bucket{}_bits{}_{}", n, shape.first, shape.second, input_name(input));
}

// (bucket, bits): QSGD's default 512 with 4 and 8 bits, then shapes that take every kernel group
// (1 to 32 lanes, a warp looping over 2048 and 65536 elements) and packing unit.
INSTANTIATE_TEST_SUITE_P(Sizes, QsgdCuda,
                         ::testing::Combine(::testing::Values(1u, 33u, 4097u, 100'003u),
                                            ::testing::Values(std::pair<uint32_t, uint32_t>{512, 4},
                                                              std::pair<uint32_t, uint32_t>{512, 8},
                                                              std::pair<uint32_t, uint32_t>{1, 8},
                                                              std::pair<uint32_t, uint32_t>{3, 8},
                                                              std::pair<uint32_t, uint32_t>{4, 2},
                                                              std::pair<uint32_t, uint32_t>{8, 3},
                                                              std::pair<uint32_t, uint32_t>{12, 6},
                                                              std::pair<uint32_t, uint32_t>{2048, 4},
                                                              std::pair<uint32_t, uint32_t>{65536, 4}),
                                            ::testing::ValuesIn(all_inputs())),
                         qsgd_case_name);

TEST(QsgdCudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const auto& [float_offset, wire_offset] : {std::pair<uint64_t, uint64_t>{0, 1}, {4, 2}, {8, 3}, {12, 4}}) {
    const uint64_t n = 4097, seed = case_seed(n, float_offset, wire_offset, 3);
    SCOPED_TRACE(fmt::format("n={} bucket=512 bits=4 float_offset={} wire_offset={} seed={:#x}", n, float_offset,
                             wire_offset, seed));
    check_codec(qsgd_codec(n, 512, 4, key_for(seed)), make_input(Input::kNormal, n, seed),
                make_accumulator(Input::kNormal, n, seed), false, float_offset, wire_offset);
  }
}

// --- FP16 ----------------------------------------------------------------------------------------

// The wire is count uint16 codes; the harness's byte buffers hold them (device buffers are at
// least 2-byte aligned when the wire offset is even).
Codec fp16_codec(uint64_t n) {
  Codec c;
  c.wire_bytes = 2 * n;
  c.cpu_encode = [=](const float* x, uint8_t* out) {
    std::vector<uint16_t> codes(n);
    fp16_encode(x, n, codes.data());
    std::memcpy(out, codes.data(), 2 * n);
    return uint64_t{0};
  };
  const auto codes_of = [n](const uint8_t* in) {
    std::vector<uint16_t> codes(n);
    std::memcpy(codes.data(), in, 2 * n);
    return codes;
  };
  c.cpu_decode = [=](const uint8_t* in, float* out) { fp16_decode(codes_of(in).data(), n, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { fp16_decode_accumulate(codes_of(in).data(), n, acc); };
  c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t*) {
    return fp16_encode_cuda(d_x, n, reinterpret_cast<uint16_t*>(d_out));
  };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) {
    return fp16_decode_cuda(reinterpret_cast<const uint16_t*>(d_in), n, d_out);
  };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return fp16_decode_accumulate_cuda(reinterpret_cast<const uint16_t*>(d_in), n, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t*) {
    return fp16_decode_accumulate_encode_cuda(reinterpret_cast<const uint16_t*>(d_in), n, d_acc,
                                              reinterpret_cast<uint16_t*>(d_out));
  };
  return c;
}

class Fp16Cuda : public ::testing::TestWithParam<std::tuple<uint64_t, Input>> {};

TEST_P(Fp16Cuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, input] = GetParam();
  const uint64_t seed = case_seed(n, static_cast<uint64_t>(input), 16, 0);
  SCOPED_TRACE(fmt::format("n={} input={} seed={:#x}", n, input_name(input), seed));
  check_codec(fp16_codec(n), make_input(input, n, seed), make_accumulator(input, n, seed),
              input == Input::kNonFinite);
}

std::string fp16_case_name(const ::testing::TestParamInfo<Fp16Cuda::ParamType>& info) {
  const auto& [n, input] = info.param;
  return fmt::format("n{}_{}", n, input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Fp16Cuda,
                         ::testing::Combine(::testing::Values(1u, 31u, 33u, 4097u, 1u << 20),
                                            ::testing::ValuesIn(all_inputs())),
                         fp16_case_name);

TEST(Fp16CudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  // (float, wire) byte offsets off the float4 / ushort4 alignment, and both shifted but aligned.
  for (const auto& [float_offset, wire_offset] : {std::pair<uint64_t, uint64_t>{4, 0}, {0, 2}, {8, 6}, {16, 8}}) {
    const uint64_t n = 4097, seed = case_seed(n, float_offset, wire_offset, 5);
    SCOPED_TRACE(fmt::format("n={} float_offset={} wire_offset={} seed={:#x}", n, float_offset, wire_offset, seed));
    check_codec(fp16_codec(n), make_input(Input::kMixed, n, seed), make_accumulator(Input::kMixed, n, seed), false,
                float_offset, wire_offset);
  }
}

// --- arguments (checked before any launch: needs no device) -------------------------------------

TEST(BlockCudaElemArguments, RejectsInvalidFormatsAndNullPointers) {
  const RngKey key{};
  float* d_x = nullptr;
  uint8_t* d_out = nullptr;
  for (const TfpFormat& f : {TfpFormat{TfpBase::kFloat32, 9}, TfpFormat{TfpBase::kFloat32, 33},
                             TfpFormat{TfpBase::kFloat16, 6}, TfpFormat{TfpBase::kFloat8E4M3, 5},
                             TfpFormat{TfpBase::kFloat8E5M2, 9}}) {
    SCOPED_TRACE(fmt::format("base={} k={}", base_name(f.base), f.bits));
    EXPECT_EQ(tfp_cuda_can_implement(10, f).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(tfp_encode_cuda(d_x, 10, f, false, key, 0, d_out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(tfp_decode_cuda(d_out, 10, f, d_x).code(), StatusCode::kInvalidArgument);
  }
  for (const auto& [bucket, bits] : {std::pair<uint32_t, uint32_t>{512, 1}, {512, 9}, {3, 4}, {0, 8}, {1u << 17, 8}}) {
    SCOPED_TRACE(fmt::format("bucket={} bits={}", bucket, bits));
    EXPECT_EQ(qsgd_cuda_can_implement(10, bucket, bits).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(qsgd_encode_cuda(d_x, 10, bucket, bits, key, 0, d_out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(qsgd_decode_accumulate_cuda(d_out, 10, bucket, bits, d_x).code(), StatusCode::kInvalidArgument);
  }
  const TfpFormat tfp{TfpBase::kFloat32, 16};
  EXPECT_EQ(tfp_encode_cuda(d_x, 10, tfp, true, key, 0, d_out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tfp_decode_accumulate_encode_cuda(d_out, 10, tfp, d_x, true, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(qsgd_encode_cuda(d_x, 10, 512, 4, key, 0, d_out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qsgd_decode_accumulate_encode_cuda(d_out, 10, 512, 4, d_x, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(fp16_encode_cuda(d_x, 10, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fp16_decode_cuda(nullptr, 10, d_x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fp16_decode_accumulate_encode_cuda(nullptr, 10, d_x, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(BlockCudaElemArguments, EmptyChunkIsANoOp) {
  const RngKey key{};
  const TfpFormat tfp{TfpBase::kFloat16, 11};
  EXPECT_TRUE(tfp_encode_cuda(nullptr, 0, tfp, true, key, 0, nullptr).ok());
  EXPECT_TRUE(tfp_decode_accumulate_encode_cuda(nullptr, 0, tfp, nullptr, false, key, 0, nullptr).ok());
  EXPECT_TRUE(qsgd_encode_cuda(nullptr, 0, 512, 4, key, 0, nullptr).ok());
  EXPECT_TRUE(qsgd_decode_cuda(nullptr, 0, 512, 4, nullptr).ok());
  EXPECT_TRUE(fp16_encode_cuda(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(fp16_decode_accumulate_encode_cuda(nullptr, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace ccsim::kern::cuda_test
