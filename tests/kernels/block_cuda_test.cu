// The CUDA MX and group-quantization codecs (kernels/cuda/block_cuda.hpp: MXFP8/6/4, EQuARX
// int8/FP8 blocks, SDP4Bit int4/int8 groups with the Hadamard smoother, block int8's fused hop)
// against their CPU references (kernels/quant/mx_quant.cpp, group_quant.cpp, block_int8.cpp): encoded
// bytes must match exactly (memcmp, NaN codes included), decoded floats and accumulators bit for
// bit, for encode, decode, decode-accumulate and the fused hop. Seeded inputs over sizes (most not
// multiples of the block), formats, rounding modes and input families (a real gradient included);
// every case logs its parameters. GPU tests skip when no device is present.

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
#include "kernels/quant/block_int8_quant.hpp"
#include "kernels/quant/group_quant.hpp"
#include "kernels/quant/mx_quant.hpp"
#include "kernels/stats/entropy.hpp"
#include "tests/kernels/block_cuda_test_util.cuh"

namespace ccsim::kern::cuda_test {
namespace {

constexpr uint64_t kIndexBase = 1'000'003;  // not a multiple of 4: chunks start mid Philox block

RngKey key_for(uint64_t seed) { return RngKey{seed, 3, 5, 7}; }

// --- MX ------------------------------------------------------------------------------------------

std::string element_name(MinifloatKind e) {
  switch (e) {
    case MinifloatKind::kFp16: return "fp16";
    case MinifloatKind::kFp8E4M3: return "e4m3";
    case MinifloatKind::kFp8E5M2: return "e5m2";
    case MinifloatKind::kFp6E3M2: return "e3m2";
    case MinifloatKind::kFp6E2M3: return "e2m3";
    case MinifloatKind::kFp4E2M1: return "e2m1";
  }
  return "?";
}

std::string scale_name(MxScaleKind s) { return s == MxScaleKind::kBf16 ? "bf16" : "e8m0"; }

MxFormat mx_format(MinifloatKind element, uint32_t block, MxScaleKind scale, Rounding rounding) {
  MxFormat f;
  f.element = element;
  f.block = block;
  f.scale = scale;
  f.rounding = rounding;
  return f;
}

// MX with per-block scales from each message's block maxima (mx_encode), range = the element
// maximum as MxCompressor passes it; or, with `d_scale_codes`, the agreed codes `scale_codes`
// (mx_encode_with_scales, FP8-LM block scaling).
Codec mx_codec(uint64_t n, const MxFormat& f, const RngKey& key, const std::vector<uint32_t>* scale_codes = nullptr,
               const uint32_t* d_scale_codes = nullptr) {
  const float range = f.element_format().max_finite();
  Codec c;
  c.wire_bytes = mx_bytes(n, f);
  if (scale_codes == nullptr) {
    c.cpu_encode = [=](const float* x, uint8_t* out) { return mx_encode(x, n, f, key, kIndexBase, range, out); };
    c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t* d_count) {
      return mx_encode_cuda(d_x, n, f, key, kIndexBase, range, d_out, d_count);
    };
  } else {
    c.cpu_encode = [=](const float* x, uint8_t* out) {
      return mx_encode_with_scales(x, n, f, scale_codes->data(), key, kIndexBase, out);
    };
    c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t* d_count) {
      return mx_encode_with_scales_cuda(d_x, n, f, d_scale_codes, key, kIndexBase, d_out, d_count);
    };
  }
  c.cpu_decode = [=](const uint8_t* in, float* out) { mx_decode(in, n, f, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { mx_decode_accumulate(in, n, f, acc); };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) { return mx_decode_cuda(d_in, n, f, d_out); };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return mx_decode_accumulate_cuda(d_in, n, f, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t* d_count) {
    return mx_decode_accumulate_encode_cuda(d_in, n, f, d_acc, d_scale_codes, key, kIndexBase, range, d_out, d_count);
  };
  return c;
}

class MxCuda
    : public ::testing::TestWithParam<std::tuple<uint64_t, MinifloatKind, MxScaleKind, Rounding, Input>> {};

TEST_P(MxCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, element, scale, rounding, input] = GetParam();
  const uint64_t seed = case_seed(n, static_cast<uint64_t>(element) * 4 + static_cast<uint64_t>(scale),
                                  static_cast<uint64_t>(rounding), static_cast<uint64_t>(input));
  SCOPED_TRACE(fmt::format("n={} element={} block=32 scale={} rounding={} input={} seed={:#x}", n,
                           element_name(element), scale_name(scale), rounding_name(rounding), input_name(input),
                           seed));
  const MxFormat f = mx_format(element, 32, scale, rounding);
  check_codec(mx_codec(n, f, key_for(seed)), make_input(input, n, seed), make_accumulator(input, n, seed),
              input == Input::kNonFinite);
}

std::string mx_case_name(const ::testing::TestParamInfo<MxCuda::ParamType>& info) {
  const auto& [n, element, scale, rounding, input] = info.param;
  return fmt::format("n{}_{}_{}_{}_{}", n, element_name(element), scale_name(scale), rounding_name(rounding),
                     input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, MxCuda,
                         ::testing::Combine(::testing::Values(1u, 33u, 4097u, 100'003u),
                                            ::testing::Values(MinifloatKind::kFp8E4M3, MinifloatKind::kFp6E3M2,
                                                              MinifloatKind::kFp4E2M1),
                                            ::testing::Values(MxScaleKind::kBf16, MxScaleKind::kE8M0),
                                            ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                                            ::testing::ValuesIn(all_inputs())),
                         mx_case_name);

// Block sizes that take every kernel shape (sub-warp groups, a warp looping, the whole CTA), every
// packing unit (1, 2, 4, 8 elements) and every element format of at most 8 bits.
TEST(MxCudaShapes, MatchesReferenceForEveryBlockShapeAndElement) {
  SKIP_WITHOUT_GPU();
  const uint32_t blocks[] = {1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 64, 100, 2048, 2056, 4096, 65536};
  const MinifloatKind elements[] = {MinifloatKind::kFp8E4M3, MinifloatKind::kFp8E5M2, MinifloatKind::kFp6E3M2,
                                    MinifloatKind::kFp6E2M3, MinifloatKind::kFp4E2M1};
  uint64_t variant = 0;
  for (const MinifloatKind element : elements) {
    for (const uint32_t block : blocks) {
      ++variant;
      const MxScaleKind scale = variant % 2 == 0 ? MxScaleKind::kBf16 : MxScaleKind::kE8M0;
      const Rounding rounding = variant % 3 == 0 ? Rounding::kNearest : Rounding::kStochastic;
      const MxFormat f = mx_format(element, block, scale, rounding);
      if (!mx_cuda_can_implement(1, f).ok()) continue;  // block * bits not whole bytes
      const uint64_t n = 200'003, seed = case_seed(n, block, static_cast<uint64_t>(element), 11);
      SCOPED_TRACE(fmt::format("n={} element={} block={} scale={} rounding={} input=mixed seed={:#x}", n,
                               element_name(element), block, scale_name(scale), rounding_name(rounding), seed));
      check_codec(mx_codec(n, f, key_for(seed)), make_input(Input::kMixed, n, seed),
                  make_accumulator(Input::kMixed, n, seed), false);
    }
  }
}

// FP8-LM block scaling: every block's scale code agreed beforehand, as MxCompressor::plan_commit
// fixes it (mx_scale_code(mu * global block maximum)); mu < 1 makes elements saturate (counted).
TEST(MxCudaWithScales, MatchesReferenceWithAgreedScaleCodes) {
  SKIP_WITHOUT_GPU();
  for (const MinifloatKind element : {MinifloatKind::kFp8E4M3, MinifloatKind::kFp6E3M2, MinifloatKind::kFp4E2M1}) {
    for (const MxScaleKind scale : {MxScaleKind::kBf16, MxScaleKind::kE8M0}) {
      for (const float mu : {0.25f, 4.0f}) {
        for (const Input input : {Input::kNormal, Input::kGradient, Input::kNonFinite}) {
          const Rounding rounding = mu < 1.0f ? Rounding::kNearest : Rounding::kStochastic;
          const uint64_t n = 100'003, seed = case_seed(n, static_cast<uint64_t>(element),
                                                       static_cast<uint64_t>(scale) * 2 + (mu < 1.0f ? 1 : 0),
                                                       static_cast<uint64_t>(input));
          SCOPED_TRACE(fmt::format("n={} element={} block=32 scale={} mu={} rounding={} input={} seed={:#x}", n,
                                   element_name(element), scale_name(scale), mu, rounding_name(rounding),
                                   input_name(input), seed));
          const MxFormat f = mx_format(element, 32, scale, rounding);
          const std::vector<float> x = make_input(input, n, seed);
          // The "global" maxima: this rank's block maxima, scaled (another rank's would do).
          std::vector<float> block_max((n + 31) / 32);
          block_max_abs(x.data(), n, 32, block_max.data());
          std::vector<uint32_t> codes(block_max.size());
          for (size_t b = 0; b < codes.size(); ++b) codes[b] = mx_scale_code(mu * block_max[b], f);
          DeviceBuffer<uint32_t> d_codes(codes.size());
          ASSERT_NE(d_codes.get(), nullptr);
          ASSERT_CUDA_OK(d_codes.upload(codes));
          check_codec(mx_codec(n, f, key_for(seed), &codes, d_codes.get()), x, make_accumulator(input, n, seed),
                      input == Input::kNonFinite);
        }
      }
    }
  }
}

TEST(MxCudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  // (float, wire) byte offsets: the wire buffer, hence its scales and code units, may start anywhere.
  for (const auto& [float_offset, wire_offset] : {std::pair<uint64_t, uint64_t>{0, 1}, {4, 2}, {8, 3}, {12, 4}}) {
    for (const MinifloatKind element : {MinifloatKind::kFp8E4M3, MinifloatKind::kFp4E2M1}) {
      const uint64_t n = 4097, seed = case_seed(n, float_offset, wire_offset, static_cast<uint64_t>(element));
      SCOPED_TRACE(fmt::format("n={} element={} block=32 float_offset={} wire_offset={} seed={:#x}", n,
                               element_name(element), float_offset, wire_offset, seed));
      const MxFormat f = mx_format(element, 32, MxScaleKind::kBf16, Rounding::kStochastic);
      check_codec(mx_codec(n, f, key_for(seed)), make_input(Input::kNormal, n, seed),
                  make_accumulator(Input::kNormal, n, seed), false, float_offset, wire_offset);
    }
  }
}

// --- group quantization --------------------------------------------------------------------------

std::string group_element_name(GroupElement e) {
  return e == GroupElement::kInt ? "int" : e == GroupElement::kE4M3 ? "e4m3" : "e5m2";
}

std::string group_format_name(const GroupQuantFormat& f) {
  return fmt::format("{}{} group={} rounding={} hadamard={}", group_element_name(f.element), f.bits, f.group,
                     rounding_name(f.rounding), f.hadamard);
}

GroupQuantFormat group_format(GroupElement element, uint32_t bits, uint32_t group, Rounding rounding,
                              bool hadamard) {
  GroupQuantFormat f;
  f.element = element;
  f.bits = bits;
  f.group = group;
  f.rounding = rounding;
  f.hadamard = hadamard;
  return f;
}

// Group quantization; the fused hop decodes `in_f` messages and encodes `f` ones (the same format
// unless given).
Codec group_codec(uint64_t n, const GroupQuantFormat& f, const RngKey& key) {
  Codec c;
  c.wire_bytes = group_quant_bytes(n, f);
  c.cpu_encode = [=](const float* x, uint8_t* out) {
    group_quant_encode(x, n, f, key, kIndexBase, out);
    return uint64_t{0};
  };
  c.cpu_decode = [=](const uint8_t* in, float* out) { group_quant_decode(in, n, f, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { group_quant_decode_accumulate(in, n, f, acc); };
  c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t*) {
    return group_quant_encode_cuda(d_x, n, f, key, kIndexBase, d_out);
  };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) { return group_quant_decode_cuda(d_in, n, f, d_out); };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return group_quant_decode_accumulate_cuda(d_in, n, f, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t*) {
    return group_quant_decode_accumulate_encode_cuda(d_in, n, f, d_acc, f, key, kIndexBase, d_out);
  };
  return c;
}

// EQuARX: int8, E4M3 and E5M2 elements in blocks of 64 with fp32 block maxima.
class EquarxCuda : public ::testing::TestWithParam<std::tuple<uint64_t, GroupElement, Rounding, Input>> {};

TEST_P(EquarxCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, element, rounding, input] = GetParam();
  const uint64_t seed =
      case_seed(n, static_cast<uint64_t>(element), static_cast<uint64_t>(rounding), static_cast<uint64_t>(input));
  const GroupQuantFormat f = group_format(element, 8, 64, rounding, false);
  SCOPED_TRACE(fmt::format("n={} {} input={} seed={:#x}", n, group_format_name(f), input_name(input), seed));
  check_codec(group_codec(n, f, key_for(seed)), make_input(input, n, seed), make_accumulator(input, n, seed),
              input == Input::kNonFinite);
}

std::string equarx_case_name(const ::testing::TestParamInfo<EquarxCuda::ParamType>& info) {
  const auto& [n, element, rounding, input] = info.param;
  return fmt::format("n{}_{}_{}_{}", n, group_element_name(element), rounding_name(rounding), input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, EquarxCuda,
                         ::testing::Combine(::testing::Values(1u, 33u, 4097u, 100'003u),
                                            ::testing::Values(GroupElement::kInt, GroupElement::kE4M3,
                                                              GroupElement::kE5M2),
                                            ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                                            ::testing::ValuesIn(all_inputs())),
                         equarx_case_name);

// SDP4Bit / ZeRO++: int4 and int8 groups of 128 (gradients) and 2048 (weights), with and without
// the Hadamard smoother. Sizes not multiples of 32 leave an untransformed tail; huge and mixed
// inputs take the flagged (negated-scale) path of groups beyond kGroupHadamardMaxInput.
class Sdp4bitCuda
    : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t, uint32_t, bool, Rounding, Input>> {};

TEST_P(Sdp4bitCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, bits, group, hadamard, rounding, input] = GetParam();
  const uint64_t seed = case_seed(n, bits * 2 + (hadamard ? 1 : 0), group + static_cast<uint64_t>(rounding),
                                  static_cast<uint64_t>(input));
  const GroupQuantFormat f = group_format(GroupElement::kInt, bits, group, rounding, hadamard);
  SCOPED_TRACE(fmt::format("n={} {} input={} seed={:#x}", n, group_format_name(f), input_name(input), seed));
  check_codec(group_codec(n, f, key_for(seed)), make_input(input, n, seed), make_accumulator(input, n, seed),
              input == Input::kNonFinite);
}

std::string sdp4bit_case_name(const ::testing::TestParamInfo<Sdp4bitCuda::ParamType>& info) {
  const auto& [n, bits, group, hadamard, rounding, input] = info.param;
  return fmt::format("n{}_int{}_group{}_{}_{}_{}", n, bits, group, hadamard ? "hadamard" : "plain",
                     rounding_name(rounding), input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Sdp4bitCuda,
                         ::testing::Combine(::testing::Values(33u, 4097u, 100'003u), ::testing::Values(4u, 8u),
                                            ::testing::Values(128u, 2048u), ::testing::Bool(),
                                            ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                                            ::testing::ValuesIn(all_inputs())),
                         sdp4bit_case_name);

// Group sizes and code widths that take every kernel shape and packing unit, the smoother with a
// warp looping (96, 2048) and with the whole CTA (4096, 65536), and FP8 elements with the smoother.
TEST(GroupQuantCudaShapes, MatchesReferenceForEveryGroupShape) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    GroupElement element;
    uint32_t bits;
    uint32_t group;
    bool hadamard;
  };
  const Shape shapes[] = {
      {GroupElement::kInt, 8, 1, false},     {GroupElement::kInt, 8, 3, false},    {GroupElement::kInt, 4, 2, false},
      {GroupElement::kInt, 2, 4, false},     {GroupElement::kInt, 3, 8, false},    {GroupElement::kInt, 5, 16, false},
      {GroupElement::kInt, 7, 24, false},    {GroupElement::kInt, 6, 12, false},   {GroupElement::kInt, 8, 17, false},
      {GroupElement::kInt, 4, 1000, false},  {GroupElement::kInt, 4, 4096, false}, {GroupElement::kE4M3, 8, 8, false},
      {GroupElement::kE5M2, 8, 4096, false}, {GroupElement::kInt, 4, 32, true},    {GroupElement::kInt, 8, 96, true},
      {GroupElement::kInt, 2, 2048, true},   {GroupElement::kInt, 4, 4096, true},  {GroupElement::kInt, 8, 65536, true},
      {GroupElement::kE4M3, 8, 64, true},    {GroupElement::kE5M2, 8, 8192, true},
  };
  // Mixed inputs put a value beyond kGroupHadamardMaxInput in almost every group (sent untransformed,
  // flagged); normal ones never do (transformed).
  uint64_t variant = 0;
  for (const Shape& s : shapes) {
    for (const auto& [n, input] : {std::pair<uint64_t, Input>{200'003, Input::kMixed},
                                   std::pair<uint64_t, Input>{65536 + 32 * 7 + 5, Input::kNormal}}) {
      ++variant;
      const Rounding rounding = variant % 2 == 0 ? Rounding::kNearest : Rounding::kStochastic;
      const GroupQuantFormat f = group_format(s.element, s.bits, s.group, rounding, s.hadamard);
      const uint64_t seed = case_seed(n, s.group, s.bits, variant);
      SCOPED_TRACE(fmt::format("n={} {} input={} seed={:#x}", n, group_format_name(f), input_name(input), seed));
      check_codec(group_codec(n, f, key_for(seed)), make_input(input, n, seed), make_accumulator(input, n, seed),
                  false);
    }
  }
}

// The fused hop between two formats of the same group: SDP4Bit TLq's int8 intra-node messages
// re-encoded as int4, a smoothed message re-encoded plain and back, FP8 to int8.
TEST(GroupQuantCudaFused, MatchesReferenceAcrossFormats) {
  SKIP_WITHOUT_GPU();
  const std::pair<GroupQuantFormat, GroupQuantFormat> pairs[] = {
      {group_format(GroupElement::kInt, 8, 128, Rounding::kNearest, false),
       group_format(GroupElement::kInt, 4, 128, Rounding::kNearest, false)},
      {group_format(GroupElement::kInt, 8, 128, Rounding::kStochastic, false),
       group_format(GroupElement::kInt, 4, 128, Rounding::kStochastic, false)},
      {group_format(GroupElement::kInt, 4, 128, Rounding::kNearest, true),
       group_format(GroupElement::kInt, 4, 128, Rounding::kStochastic, false)},
      {group_format(GroupElement::kInt, 4, 2048, Rounding::kNearest, false),
       group_format(GroupElement::kInt, 8, 2048, Rounding::kNearest, true)},
      {group_format(GroupElement::kE4M3, 8, 64, Rounding::kNearest, false),
       group_format(GroupElement::kInt, 8, 64, Rounding::kStochastic, false)},
  };
  for (const auto& [in_f, out_f] : pairs) {
    for (const Input input : {Input::kNormal, Input::kMixed, Input::kGradient}) {
      const uint64_t n = 100'003;
      const uint64_t seed = case_seed(n, in_f.bits * 16 + out_f.bits, in_f.group, static_cast<uint64_t>(input));
      SCOPED_TRACE(fmt::format("n={} in: {} out: {} input={} seed={:#x}", n, group_format_name(in_f),
                               group_format_name(out_f), input_name(input), seed));
      const RngKey in_key = key_for(seed), out_key = key_for(seed + 99);
      const uint64_t in_wire = group_quant_bytes(n, in_f), out_wire = group_quant_bytes(n, out_f);
      const std::vector<float> x = make_input(input, n, seed), acc0 = make_accumulator(input, n, seed);
      std::vector<uint8_t> msg(in_wire), cpu_out(out_wire, 0x5A), gpu_out(out_wire);
      group_quant_encode(x.data(), n, in_f, in_key, kIndexBase, msg.data());
      std::vector<float> cpu_acc = acc0, gpu_acc(n);
      group_quant_decode_accumulate(msg.data(), n, in_f, cpu_acc.data());
      group_quant_encode(cpu_acc.data(), n, out_f, out_key, kIndexBase, cpu_out.data());

      DeviceBuffer<uint8_t> d_in(in_wire), d_out(out_wire);
      DeviceBuffer<float> d_acc(n);
      ASSERT_NE(d_in.get(), nullptr);
      ASSERT_NE(d_out.get(), nullptr);
      ASSERT_NE(d_acc.get(), nullptr);
      ASSERT_CUDA_OK(d_in.upload(msg));
      ASSERT_CUDA_OK(d_acc.upload(acc0));
      ASSERT_CUDA_OK(d_out.fill(0xA5));
      ASSERT_STATUS_OK(group_quant_decode_accumulate_encode_cuda(d_in.get(), n, in_f, d_acc.get(), out_f, out_key,
                                                                  kIndexBase, d_out.get()));
      ASSERT_CUDA_OK(d_acc.download(gpu_acc));
      ASSERT_CUDA_OK(d_out.download(gpu_out));
      expect_same_floats(cpu_acc, gpu_acc, false);
      expect_same_bytes(cpu_out, gpu_out);
    }
  }
}

TEST(GroupQuantCudaUnaligned, MatchesReferenceWithMisalignedBuffers) {
  SKIP_WITHOUT_GPU();
  for (const auto& [float_offset, wire_offset] : {std::pair<uint64_t, uint64_t>{0, 1}, {4, 2}, {8, 3}, {12, 4}}) {
    for (const uint32_t bits : {4u, 8u}) {
      const uint64_t n = 4097, seed = case_seed(n, float_offset, wire_offset, bits);
      const GroupQuantFormat f = group_format(GroupElement::kInt, bits, 128, Rounding::kStochastic, true);
      SCOPED_TRACE(fmt::format("n={} {} float_offset={} wire_offset={} seed={:#x}", n, group_format_name(f),
                               float_offset, wire_offset, seed));
      check_codec(group_codec(n, f, key_for(seed)), make_input(Input::kNormal, n, seed),
                  make_accumulator(Input::kNormal, n, seed), false, float_offset, wire_offset);
    }
  }
}

// --- block int8 (EQuARX int8): the fused hop ---------------------------------------------------

// Encode, decode and decode-accumulate are quant_cuda's (tested in quant_cuda_test.cu); here they
// serve the harness, whose fused step tests block_int8_decode_accumulate_encode_cuda.
Codec block_int8_codec(uint64_t n, uint32_t block, Rounding rounding, const RngKey& key) {
  Codec c;
  c.wire_bytes = block_int8_bytes(n, block);
  c.cpu_encode = [=](const float* x, uint8_t* out) {
    block_int8_encode(x, n, block, rounding, key, kIndexBase, out);
    return uint64_t{0};
  };
  c.cpu_decode = [=](const uint8_t* in, float* out) { block_int8_decode(in, n, block, out); };
  c.cpu_decode_accumulate = [=](const uint8_t* in, float* acc) { block_int8_decode_accumulate(in, n, block, acc); };
  c.gpu_encode = [=](const float* d_x, uint8_t* d_out, uint64_t*) {
    return block_int8_encode_cuda(d_x, n, block, rounding, key, kIndexBase, d_out);
  };
  c.gpu_decode = [=](const uint8_t* d_in, float* d_out) { return block_int8_decode_cuda(d_in, n, block, d_out); };
  c.gpu_decode_accumulate = [=](const uint8_t* d_in, float* d_acc) {
    return block_int8_decode_accumulate_cuda(d_in, n, block, d_acc);
  };
  c.gpu_fused = [=](const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t*) {
    return block_int8_decode_accumulate_encode_cuda(d_in, n, block, d_acc, rounding, key, kIndexBase, d_out);
  };
  return c;
}

class BlockInt8FusedCuda : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t, Rounding, Input>> {};

TEST_P(BlockInt8FusedCuda, MatchesReferenceBitwise) {
  SKIP_WITHOUT_GPU();
  const auto [n, block, rounding, input] = GetParam();
  const uint64_t seed = case_seed(n, block, static_cast<uint64_t>(rounding), static_cast<uint64_t>(input) + 40);
  SCOPED_TRACE(fmt::format("n={} block={} rounding={} input={} seed={:#x}", n, block, rounding_name(rounding),
                           input_name(input), seed));
  // quant_cuda's int8 kernels return the canonical NaN (quant_cuda.hpp): payloads may differ.
  check_codec(block_int8_codec(n, block, rounding, key_for(seed)), make_input(input, n, seed),
              make_accumulator(input, n, seed), input == Input::kNonFinite);
}

std::string block_int8_case_name(const ::testing::TestParamInfo<BlockInt8FusedCuda::ParamType>& info) {
  const auto& [n, block, rounding, input] = info.param;
  return fmt::format("n{}_block{}_{}_{}", n, block, rounding_name(rounding), input_name(input));
}

INSTANTIATE_TEST_SUITE_P(Sizes, BlockInt8FusedCuda,
                         ::testing::Combine(::testing::Values(33u, 100'003u), ::testing::Values(3u, 64u, 1000u, 4096u),
                                            ::testing::Values(Rounding::kNearest, Rounding::kStochastic),
                                            ::testing::ValuesIn(all_inputs())),
                         block_int8_case_name);

// --- arguments (checked before any launch: needs no device) -------------------------------------

TEST(BlockCudaArguments, RejectsInvalidFormats) {
  float* d_x = nullptr;
  uint8_t* d_out = nullptr;
  const RngKey key{};
  // MX: FP16 elements (16 bits), blocks that are not whole bytes, block out of range.
  for (const MxFormat& f : {mx_format(MinifloatKind::kFp16, 32, MxScaleKind::kBf16, Rounding::kNearest),
                            mx_format(MinifloatKind::kFp4E2M1, 3, MxScaleKind::kBf16, Rounding::kNearest),
                            mx_format(MinifloatKind::kFp6E3M2, 6, MxScaleKind::kE8M0, Rounding::kNearest),
                            mx_format(MinifloatKind::kFp8E4M3, 0, MxScaleKind::kE8M0, Rounding::kNearest),
                            mx_format(MinifloatKind::kFp8E4M3, kBlockCudaMaxBlock * 2, MxScaleKind::kE8M0,
                                      Rounding::kNearest)}) {
    SCOPED_TRACE(fmt::format("element={} block={}", element_name(f.element), f.block));
    EXPECT_EQ(mx_cuda_can_implement(10, f).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(mx_encode_cuda(d_x, 10, f, key, 0, 1.0f, d_out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(mx_decode_cuda(d_out, 10, f, d_x).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(mx_decode_accumulate_encode_cuda(d_out, 10, f, d_x, nullptr, key, 0, 1.0f, d_out).code(),
              StatusCode::kInvalidArgument);
  }
  // Group quantization: bad widths, FP8 of 4 bits, Hadamard with a group not a multiple of 32, groups
  // not whole bytes, differing groups in the fused op.
  for (const GroupQuantFormat& f : {group_format(GroupElement::kInt, 1, 64, Rounding::kNearest, false),
                                    group_format(GroupElement::kInt, 9, 64, Rounding::kNearest, false),
                                    group_format(GroupElement::kE4M3, 4, 64, Rounding::kNearest, false),
                                    group_format(GroupElement::kInt, 4, 48, Rounding::kNearest, true),
                                    group_format(GroupElement::kInt, 4, 3, Rounding::kNearest, false),
                                    group_format(GroupElement::kInt, 8, 0, Rounding::kNearest, false)}) {
    SCOPED_TRACE(group_format_name(f));
    EXPECT_EQ(group_quant_cuda_can_implement(10, f).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(group_quant_encode_cuda(d_x, 10, f, key, 0, d_out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(group_quant_decode_accumulate_cuda(d_out, 10, f, d_x).code(), StatusCode::kInvalidArgument);
  }
  const GroupQuantFormat g64 = group_format(GroupElement::kInt, 8, 64, Rounding::kNearest, false);
  const GroupQuantFormat g128 = group_format(GroupElement::kInt, 8, 128, Rounding::kNearest, false);
  EXPECT_EQ(group_quant_decode_accumulate_encode_cuda(d_out, 10, g64, d_x, g128, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(block_int8_decode_accumulate_encode_cuda(d_out, 10, 0, d_x, Rounding::kNearest, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
}

TEST(BlockCudaArguments, RejectsNullPointers) {
  const RngKey key{};
  const MxFormat mx = mx_format(MinifloatKind::kFp8E4M3, 32, MxScaleKind::kBf16, Rounding::kNearest);
  const GroupQuantFormat g = group_format(GroupElement::kInt, 4, 128, Rounding::kNearest, true);
  float* d_x = nullptr;
  uint8_t* d_out = nullptr;
  EXPECT_EQ(mx_encode_cuda(d_x, 10, mx, key, 0, 1.0f, d_out).code(), StatusCode::kInvalidArgument);
  // with_scales needs its codes even when the buffers are given.
  const auto* fake = reinterpret_cast<const float*>(uintptr_t{256});
  auto* fake_out = reinterpret_cast<uint8_t*>(uintptr_t{256});
  EXPECT_EQ(mx_encode_with_scales_cuda(fake, 10, mx, nullptr, key, 0, fake_out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mx_decode_accumulate_cuda(nullptr, 10, mx, d_x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mx_decode_accumulate_encode_cuda(d_out, 10, mx, d_x, nullptr, key, 0, 1.0f, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(group_quant_encode_cuda(d_x, 10, g, key, 0, d_out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group_quant_decode_cuda(nullptr, 10, g, d_x).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group_quant_decode_accumulate_encode_cuda(d_out, 10, g, d_x, g, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(block_int8_decode_accumulate_encode_cuda(d_out, 10, 64, d_x, Rounding::kNearest, key, 0, d_out).code(),
            StatusCode::kInvalidArgument);
}

TEST(BlockCudaArguments, EmptyChunkIsANoOp) {
  const RngKey key{};
  const MxFormat mx = mx_format(MinifloatKind::kFp4E2M1, 32, MxScaleKind::kE8M0, Rounding::kStochastic);
  const GroupQuantFormat g = group_format(GroupElement::kInt, 4, 128, Rounding::kStochastic, true);
  EXPECT_TRUE(mx_encode_cuda(nullptr, 0, mx, key, 0, 6.0f, nullptr).ok());
  EXPECT_TRUE(mx_encode_with_scales_cuda(nullptr, 0, mx, nullptr, key, 0, nullptr).ok());
  EXPECT_TRUE(mx_decode_cuda(nullptr, 0, mx, nullptr).ok());
  EXPECT_TRUE(mx_decode_accumulate_encode_cuda(nullptr, 0, mx, nullptr, nullptr, key, 0, 6.0f, nullptr).ok());
  EXPECT_TRUE(group_quant_encode_cuda(nullptr, 0, g, key, 0, nullptr).ok());
  EXPECT_TRUE(group_quant_decode_accumulate_cuda(nullptr, 0, g, nullptr).ok());
  EXPECT_TRUE(group_quant_decode_accumulate_encode_cuda(nullptr, 0, g, nullptr, g, key, 0, nullptr).ok());
  EXPECT_TRUE(block_int8_decode_accumulate_encode_cuda(nullptr, 0, 64, nullptr, Rounding::kNearest, key, 0, nullptr)
                  .ok());
}

}  // namespace
}  // namespace ccsim::kern::cuda_test
