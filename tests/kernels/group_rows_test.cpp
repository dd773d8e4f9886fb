// The group quantizers' and QSGD's vectorized CPU kernels against scalar references built from the
// element functions the CUDA kernels share (one scalar call per entry, uniform_at() per entry,
// bitpack_get/put per code), bit for bit: encode, decode, decode-accumulate and the fused hop, on
// data with every special value, random bytes, odd lengths, partial last groups and offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/group_quant.hpp"
#include "kernels/quant/qsgd_quant.hpp"
#include "kernels/transform/hadamard.hpp"
#include "tests/kernels/adversarial_floats.hpp"

namespace ccsim::kern {
namespace {

constexpr uint32_t kH = kGroupHadamardBlock;

std::vector<uint8_t> random_bytes(uint64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = static_cast<uint8_t>(gen());
  return b;
}

void hadamard32(float* v) {
  fwht_unnormalized(v, kH);
  for (uint32_t i = 0; i < kH; ++i) v[i] *= hadamard_scale(kH);
}

// group_quant_encode from the element functions, one group and one entry at a time.
std::vector<uint8_t> reference_encode(const float* x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                                      uint64_t base) {
  std::vector<uint8_t> out(group_quant_bytes(count, f), 0);
  const uint64_t groups = (count + f.group - 1) / f.group;
  uint8_t* codes = out.data() + 4 * groups;
  const uint64_t tend = f.hadamard ? count / kH * kH : 0;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t begin = g * f.group, end = std::min(count, begin + f.group);
    std::vector<float> v(x + begin, x + end);
    float maxabs = 0.0f;
    for (float a : v) maxabs = std::max(maxabs, std::fabs(a));
    float stored = maxabs;
    if (f.hadamard && begin < tend) {
      if (maxabs <= kGroupHadamardMaxInput) {
        for (uint64_t i = begin; i + kH <= std::min(end, tend); i += kH) hadamard32(v.data() + (i - begin));
        maxabs = 0.0f;
        for (float a : v) maxabs = std::max(maxabs, std::fabs(a));
        stored = maxabs;
      } else {
        stored = -maxabs;
      }
    }
    std::memcpy(out.data() + 4 * g, &stored, 4);
    for (uint64_t i = begin; i < end; ++i) {
      const float u = f.rounding == Rounding::kStochastic ? uniform_at(key, base + i) : 0.0f;
      bitpack_put(codes, i, f.bits, group_quantize(v[i - begin], maxabs, f, u));
    }
  }
  return out;
}

// group_quant_decode from the element functions.
std::vector<float> reference_decode(const uint8_t* in, uint64_t count, const GroupQuantFormat& f) {
  std::vector<float> out(count);
  const uint64_t groups = (count + f.group - 1) / f.group;
  const uint8_t* codes = in + 4 * groups;
  const uint64_t tend = f.hadamard ? count / kH * kH : 0;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t begin = g * f.group, end = std::min(count, begin + f.group);
    float maxabs;
    std::memcpy(&maxabs, in + 4 * g, 4);
    const bool transformed = !std::signbit(maxabs);
    maxabs = std::fabs(maxabs);
    for (uint64_t i = begin; i < end; ++i) out[i] = group_dequantize(bitpack_get(codes, i, f.bits), maxabs, f);
    for (uint64_t i = begin; transformed && i + kH <= std::min(end, tend); i += kH) hadamard32(out.data() + i);
  }
  return out;
}

// Bit for bit, except that with `nan_payload_free` a NaN only has to meet a NaN: FP8 codes decode
// to NaNs of both signs, and which sign the Hadamard butterfly a + b of two NaNs keeps depends on
// the operand order the compiler chose (kernels/transform/hadamard.hpp), in the library as before.
void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                        bool nan_payload_free = false) {
  ASSERT_EQ(got.size(), want.size());
  for (uint64_t i = 0; i < got.size(); ++i) {
    if (nan_payload_free && std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " entry " << i << ": " << got[i];
      continue;
    }
    ASSERT_EQ(float_to_bits(got[i]), float_to_bits(want[i])) << what << " entry " << i << ": " << got[i] << " vs "
                                                             << want[i];
  }
}

// acc0[i] + add[i] bit for bit, except that the sum of two NaNs only has to be a NaN: which NaN's
// payload x86 keeps depends on the operand order the compiler picked for the addition (in the
// library and in this reference alike); IEEE leaves it open.
void expect_same_sums(const std::vector<float>& got, const std::vector<float>& acc0, const std::vector<float>& add,
                      const char* what, bool nan_payload_free = false) {
  std::vector<float> want(acc0.size());
  for (uint64_t i = 0; i < want.size(); ++i) want[i] = acc0[i] + add[i];
  std::vector<float> masked = got;
  for (uint64_t i = 0; i < want.size(); ++i) {
    if (std::isnan(acc0[i]) && std::isnan(add[i]) && std::isnan(got[i])) masked[i] = want[i];
  }
  expect_same_floats(masked, want, what, nan_payload_free);
}

void expect_same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (uint64_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << what << " byte " << i << " of " << got.size();
}

struct GroupCase {
  GroupElement element;
  uint32_t bits, group;
  Rounding rounding;
  bool hadamard;
};

class GroupRows : public ::testing::TestWithParam<std::tuple<GroupCase, int>> {};

TEST_P(GroupRows, EncodeDecodeEqualTheElementFunctions) {
  const auto [c, threads] = GetParam();
  const GroupQuantFormat f{c.element, c.bits, c.group, c.rounding, c.hadamard};
  const int threads_before = worker_threads();
  set_worker_threads(threads);
  const RngKey key{7, 3, 11, 5};
  const uint64_t base = (uint64_t{1} << 32) - 777;  // draws cross a 2^32 index boundary
  for (uint64_t n : {uint64_t{1}, uint64_t{31}, uint64_t{c.group}, uint64_t{5000 + c.group / 3 + 1},
                     uint64_t{3 * c.group + 45}}) {
    // Offsets: the input starts 3 floats into its buffer.
    std::vector<float> buf = adversarial_floats(n + 3, c.bits * 1000 + c.group + static_cast<uint32_t>(n));
    const float* x = buf.data() + 3;
    std::vector<uint8_t> msg(group_quant_bytes(n, f));
    group_quant_encode(x, n, f, key, base, msg.data());
    expect_same_bytes(msg, reference_encode(x, n, f, key, base), "encode");
    // Decode the encoder's message and a message of random bytes.
    for (const auto& in : {msg, random_bytes(msg.size(), static_cast<uint32_t>(n))}) {
      std::vector<float> dec(n), acc(buf.begin() + 3, buf.end());
      group_quant_decode(in.data(), n, f, dec.data());
      const std::vector<float> want = reference_decode(in.data(), n, f);
      const bool nan_free = f.hadamard && f.element != GroupElement::kInt;
      expect_same_floats(dec, want, "decode", nan_free);
      group_quant_decode_accumulate(in.data(), n, f, acc.data());
      expect_same_sums(acc, std::vector<float>(buf.begin() + 3, buf.end()), want, "decode_accumulate", nan_free);
    }
  }
  set_worker_threads(threads_before);
}

// The fused hop against the two calls it replaces (and so against the references above), with the
// same format both sides and with a different width or group on the way out.
TEST_P(GroupRows, FusedHopEqualsDecodeAccumulateThenEncode) {
  const auto [c, threads] = GetParam();
  const GroupQuantFormat f{c.element, c.bits, c.group, c.rounding, c.hadamard};
  GroupQuantFormat narrower = f;
  if (f.element == GroupElement::kInt) narrower.bits = f.bits == 8 ? 4 : 8;
  GroupQuantFormat other_group = f;
  other_group.group = f.group * 2;
  const int threads_before = worker_threads();
  set_worker_threads(threads);
  const RngKey key{1, 2, 3, 4};
  const uint64_t base = 12345;
  for (const GroupQuantFormat& g : {f, narrower, other_group}) {
    for (uint64_t n : {uint64_t{7}, uint64_t{4 * c.group + 33}}) {
      std::vector<float> x = adversarial_floats(n, 17u + static_cast<uint32_t>(n));
      std::vector<uint8_t> msg(group_quant_bytes(n, f));
      group_quant_encode(x.data(), n, f, key, base + 99, msg.data());
      for (const auto& in : {msg, random_bytes(msg.size(), 5u + static_cast<uint32_t>(n))}) {
        std::vector<float> acc_fused = adversarial_floats(n, 3u + static_cast<uint32_t>(n)), acc_plain = acc_fused;
        std::vector<uint8_t> out_fused(group_quant_bytes(n, g), 0xA5), out_plain(out_fused.size(), 0x5A);
        group_quant_decode_accumulate_encode(in.data(), n, f, acc_fused.data(), g, key, base, out_fused.data());
        group_quant_decode_accumulate(in.data(), n, f, acc_plain.data());
        group_quant_encode(acc_plain.data(), n, g, key, base, out_plain.data());
        expect_same_floats(acc_fused, acc_plain, "fused sum");
        expect_same_bytes(out_fused, out_plain, "fused codes");
        expect_same_bytes(out_plain, reference_encode(acc_plain.data(), n, g, key, base), "reference codes");
      }
    }
  }
  set_worker_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GroupRows,
    ::testing::Combine(
        ::testing::Values(GroupCase{GroupElement::kInt, 8, 64, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kInt, 8, 64, Rounding::kNearest, false},
                          GroupCase{GroupElement::kInt, 4, 128, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kInt, 4, 128, Rounding::kNearest, false},
                          GroupCase{GroupElement::kInt, 4, 2048, Rounding::kNearest, false},
                          GroupCase{GroupElement::kInt, 4, 128, Rounding::kStochastic, true},
                          GroupCase{GroupElement::kInt, 8, 128, Rounding::kNearest, true},
                          GroupCase{GroupElement::kInt, 4, 1024, Rounding::kNearest, true},
                          GroupCase{GroupElement::kInt, 2, 36, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kInt, 3, 40, Rounding::kNearest, false},
                          GroupCase{GroupElement::kInt, 5, 24, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kInt, 4, 6, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kE4M3, 8, 64, Rounding::kStochastic, false},
                          GroupCase{GroupElement::kE4M3, 8, 64, Rounding::kNearest, false},
                          GroupCase{GroupElement::kE5M2, 8, 96, Rounding::kNearest, true}),
        ::testing::Values(1, 3)));

// qsgd_encode / qsgd_decode from the element functions.
std::vector<uint8_t> reference_qsgd_encode(const float* x, uint64_t count, uint32_t bucket, uint32_t bits,
                                           const RngKey& key, uint64_t base) {
  std::vector<uint8_t> out(qsgd_bytes(count, bucket, bits), 0);
  const uint64_t buckets = (count + bucket - 1) / bucket;
  for (uint64_t b = 0; b < buckets; ++b) {
    const uint64_t begin = b * bucket, end = std::min(count, begin + bucket);
    double sum = 0.0;
    for (uint64_t i = begin; i < end; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    const float norm = qsgd_norm(sum);
    std::memcpy(out.data() + 4 * b, &norm, 4);
    for (uint64_t i = begin; i < end; ++i)
      bitpack_put(out.data() + 4 * buckets, i, bits, qsgd_quantize(x[i], norm, bits, uniform_at(key, base + i)));
  }
  return out;
}

std::vector<float> reference_qsgd_decode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits) {
  std::vector<float> out(count);
  const uint64_t buckets = (count + bucket - 1) / bucket;
  for (uint64_t i = 0; i < count; ++i) {
    float norm;
    std::memcpy(&norm, in + 4 * (i / bucket), 4);
    out[i] = qsgd_dequantize(bitpack_get(in + 4 * buckets, i, bits), norm, bits);
  }
  return out;
}

class QsgdRows : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t, int>> {};

TEST_P(QsgdRows, EncodeDecodeAndFusedHopEqualTheElementFunctions) {
  const auto [bucket, bits, threads] = GetParam();
  const int threads_before = worker_threads();
  set_worker_threads(threads);
  const RngKey key{5, 8, 13, 21};
  const uint64_t base = (uint64_t{1} << 32) - 555;
  for (uint64_t n : {uint64_t{1}, uint64_t{29}, uint64_t{bucket}, uint64_t{5000 + bucket / 3 + 1}}) {
    std::vector<float> buf = adversarial_floats(n + 5, bucket + bits * 7 + static_cast<uint32_t>(n));
    const float* x = buf.data() + 5;  // an offset input
    std::vector<uint8_t> msg(qsgd_bytes(n, bucket, bits));
    qsgd_encode(x, n, bucket, bits, key, base, msg.data());
    expect_same_bytes(msg, reference_qsgd_encode(x, n, bucket, bits, key, base), "qsgd encode");
    for (const auto& in : {msg, random_bytes(msg.size(), 3u + static_cast<uint32_t>(n))}) {
      std::vector<float> dec(n), acc(buf.begin() + 5, buf.end());
      qsgd_decode(in.data(), n, bucket, bits, dec.data());
      const std::vector<float> want = reference_qsgd_decode(in.data(), n, bucket, bits);
      expect_same_floats(dec, want, "qsgd decode");
      const std::vector<float> acc0(buf.begin() + 5, buf.end());
      qsgd_decode_accumulate(in.data(), n, bucket, bits, acc.data());
      expect_same_sums(acc, acc0, want, "qsgd decode_accumulate");
      // The fused hop on the same input: the same sums, then their reference codes.
      std::vector<float> acc_fused = acc0;
      std::vector<uint8_t> out(msg.size(), 0xC3);
      qsgd_decode_accumulate_encode(in.data(), n, bucket, bits, acc_fused.data(), key, base + 3, out.data());
      expect_same_floats(acc_fused, acc, "qsgd fused sum");
      expect_same_bytes(out, reference_qsgd_encode(acc.data(), n, bucket, bits, key, base + 3), "qsgd fused");
    }
  }
  set_worker_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(Shapes, QsgdRows,
                         ::testing::Combine(::testing::Values(8u, 64u, 512u, 1000u), ::testing::Values(2u, 4u, 5u, 8u),
                                            ::testing::Values(1, 3)));

}  // namespace
}  // namespace ccsim::kern
