#include "kernels/quant/group_quant.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/transform/hadamard.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

constexpr uint32_t kH = kGroupHadamardBlock;

void check_format(const GroupQuantFormat& f) {
  if (f.element == GroupElement::kInt) {
    CCSIM_CHECK(f.bits >= 2 && f.bits <= 8, "group quantizer: {} integer bits not in [2, 8]", f.bits);
  } else {
    CCSIM_CHECK(f.bits == 8, "group quantizer: FP8 elements have 8 bits, not {}", f.bits);
  }
  CCSIM_CHECK(f.group >= 1 && (uint64_t{f.group} * f.bits) % 8 == 0,
              "group quantizer: group {} of {}-bit codes is not whole bytes", f.group, f.bits);
  CCSIM_CHECK(!f.hadamard || f.group % kH == 0, "group quantizer: Hadamard needs a group multiple of {}, got {}", kH,
              f.group);
}

// Parallel pieces are whole groups, so every group (and its bytes) belongs to one thread.
template <class Fn>
void for_groups(uint64_t count, uint32_t group, Fn&& fn) {
  const uint64_t groups = (count + group - 1) / group;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / group);
  parallel_for(groups, grain, [&](uint64_t g0, uint64_t g1) {
    for (uint64_t g = g0; g < g1; ++g) fn(g, g * group, std::min(count, (g + 1) * group));
  });
}

// In place H_32 · v, exactly as hadamard_transform(v, 32, 32).
void hadamard32(float* v) {
  constexpr float kScale = hadamard_scale(kH);
  fwht_unnormalized(v, kH);
  for (uint32_t i = 0; i < kH; ++i) v[i] *= kScale;
}

template <class Op>
void decode_with(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, Op&& op) {
  check_format(f);
  const uint64_t groups = (count + f.group - 1) / f.group;
  const uint8_t* codes = in + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? count / kH * kH : 0;  // complete 32-blocks only
  for_groups(count, f.group, [&](uint64_t g, uint64_t begin, uint64_t end) {
    float maxabs;
    std::memcpy(&maxabs, in + 4 * g, sizeof maxabs);
    // A negative scale flags a group sent untransformed (see group_quant.hpp).
    const bool transformed = !std::signbit(maxabs);
    maxabs = std::fabs(maxabs);
    uint64_t i = begin;
    for (; transformed && i + kH <= std::min(end, transformed_end); i += kH) {
      float block[kH];
      for (uint32_t j = 0; j < kH; ++j) block[j] = group_dequantize(bitpack_get(codes, i + j, f.bits), maxabs, f);
      hadamard32(block);
      for (uint32_t j = 0; j < kH; ++j) op(i + j, block[j]);
    }
    for (; i < end; ++i) op(i, group_dequantize(bitpack_get(codes, i, f.bits), maxabs, f));
  });
}

}  // namespace

void group_quant_encode(const float* x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                        uint64_t index_base, uint8_t* out) {
  check_format(f);
  const uint64_t groups = (count + f.group - 1) / f.group;
  uint8_t* codes = out + 4 * groups;
  const uint64_t transformed_end = f.hadamard ? count / kH * kH : 0;
  for_groups(count, f.group, [&](uint64_t g, uint64_t begin, uint64_t end) {
    // The values to quantize: x itself, or its transformed copy in a per-thread buffer.
    const uint64_t n = end - begin;
    const float* v = x + begin;
    float maxabs = 0.0f;
    for (uint64_t i = 0; i < n; ++i) maxabs = std::max(maxabs, std::fabs(v[i]));
    float stored = maxabs;
    thread_local std::vector<float> smoothed;
    if (f.hadamard && begin < transformed_end) {
      if (maxabs <= kGroupHadamardMaxInput) {
        smoothed.assign(x + begin, x + end);
        for (uint64_t i = begin; i + kH <= std::min(end, transformed_end); i += kH)
          hadamard32(smoothed.data() + (i - begin));
        v = smoothed.data();
        maxabs = 0.0f;
        for (uint64_t i = 0; i < n; ++i) maxabs = std::max(maxabs, std::fabs(v[i]));
        stored = maxabs;
      } else {
        stored = -maxabs;  // too large to transform without overflow: sent untransformed, flagged
      }
    }
    std::memcpy(out + 4 * g, &stored, sizeof stored);
    // The group's bytes start at begin * bits / 8; clear them so bitpack_put leaves zero padding.
    std::memset(codes + begin * f.bits / 8, 0, packed_bytes(n, f.bits));
    if (f.rounding == Rounding::kNearest) {
      for (uint64_t i = 0; i < n; ++i) bitpack_put(codes, begin + i, f.bits, group_quantize(v[i], maxabs, f, 0.0f));
      return;
    }
    for_each_uniform(key, index_base + begin, 0, n, [&](uint64_t i, float u) {
      bitpack_put(codes, begin + i, f.bits, group_quantize(v[i], maxabs, f, u));
    });
  });
}

void group_quant_decode(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* out) {
  decode_with(in, count, f, [out](uint64_t i, float v) { out[i] = v; });
}

void group_quant_decode_accumulate(const uint8_t* in, uint64_t count, const GroupQuantFormat& f, float* acc) {
  decode_with(in, count, f, [acc](uint64_t i, float v) { acc[i] += v; });
}

}  // namespace ccsim::kern
