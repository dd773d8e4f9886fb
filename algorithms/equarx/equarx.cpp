#include "algorithms/equarx/equarx.hpp"

#include <cstring>

#include "kernels/parallel.hpp"

namespace ccsim::algo {

CompressorInfo EquarxCompressor::info() {
  ParamTable params;
  params.add_int("block", "elements sharing one fp32 scale (the block maximum)", 64, 8, 65536, true)
      .add_choice("format", "element format: int8 (127 levels), FP8 e4m3 or FP8 e5m2", "int8", {"int8", "e4m3", "e5m2"})
      .add_choice("phases",
                  "which phase is quantized: reduce-scatter (summed < ranks), all-gather (summed == ranks) "
                  "or both; the other travels as fp32",
                  "both", {"rs", "ag", "both"})
      .add_choice("rounding", "nearest (ties to even, as the paper) or stochastic (unbiased)", "nearest",
                  {"nearest", "stochastic"});
  return {
      "equarx",
      "EQuARX dynamic block-wise int8/FP8 quantization with fp32 block scales, RS/AG phase selection: "
      "8 bits/element + 32/block (fp32 in an unquantized phase)",
      std::move(params), [](const Params& p) {
        const std::string format = p.get_string("format"), phases = p.get_string("phases");
        kern::GroupQuantFormat f;
        f.element = format == "e4m3"   ? kern::GroupElement::kE4M3
                    : format == "e5m2" ? kern::GroupElement::kE5M2
                                       : kern::GroupElement::kInt;
        f.bits = 8;
        f.group = static_cast<uint32_t>(p.get_int("block"));
        f.rounding = p.get_string("rounding") == "stochastic" ? kern::Rounding::kStochastic : kern::Rounding::kNearest;
        const Phases ph = phases == "rs" ? Phases::kReduceScatter : phases == "ag" ? Phases::kAllGather : Phases::kBoth;
        return std::make_unique<EquarxCompressor>(f, ph);
      }};
}

void EquarxCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop,
                              const kern::RngKey& key, std::span<uint8_t> out) {
  if (quantized(hop)) {
    kern::group_quant_encode(x.data(), spec.count, format_, key, spec.offset, out.data());
  } else {
    if (spec.count != 0) std::memcpy(out.data(), x.data(), 4 * spec.count);  // empty spans may be null
  }
}

void EquarxCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                              std::span<float> out) {
  if (quantized(hop)) {
    kern::group_quant_decode(in.data(), spec.count, format_, out.data());
  } else {
    if (spec.count != 0) std::memcpy(out.data(), in.data(), 4 * spec.count);  // empty spans may be null
  }
}

void EquarxCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                                         std::span<float> acc) {
  if (quantized(hop)) {
    kern::group_quant_decode_accumulate(in.data(), spec.count, format_, acc.data());
    return;
  }
  const uint8_t* src = in.data();
  float* dst = acc.data();
  kern::parallel_for(spec.count, 1 << 16, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      float v;
      std::memcpy(&v, src + 4 * i, sizeof v);
      dst[i] += v;
    }
  });
}

}  // namespace ccsim::algo
