#include "algorithms/equarx/equarx.hpp"

#include "kernels/quant/bf16_quant.hpp"

namespace ccsim::algo {

CompressorInfo EquarxCompressor::info() {
  ParamTable params;
  params.add_int("block", "elements sharing one fp32 scale (the block maximum)", 64, 8, 65536, true)
      .add_choice("format", "element format: int8 (127 levels), FP8 e4m3 or FP8 e5m2", "int8", {"int8", "e4m3", "e5m2"})
      .add_choice("phases",
                  "which phase is quantized: reduce-scatter (summed < ranks), all-gather (summed == ranks) "
                  "or both; the other travels as BF16 (the paper's baseline format)",
                  "both", {"rs", "ag", "both"})
      .add_choice("rounding", "nearest (ties to even, as the paper) or stochastic (unbiased)", "nearest",
                  {"nearest", "stochastic"});
  return {
      "equarx",
      "EQuARX dynamic block-wise int8/FP8 quantization with fp32 block scales, RS/AG phase selection: "
      "8 bits/element + 32/block (BF16, 16 bits/element, in an unquantized phase)",
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
    kern::bf16_encode(x.data(), spec.count, reinterpret_cast<uint16_t*>(out.data()));
  }
}

void EquarxCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                              std::span<float> out) {
  if (quantized(hop)) {
    kern::group_quant_decode(in.data(), spec.count, format_, out.data());
  } else {
    kern::bf16_decode(reinterpret_cast<const uint16_t*>(in.data()), spec.count, out.data());
  }
}

void EquarxCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                                         std::span<float> acc) {
  if (quantized(hop)) {
    kern::group_quant_decode_accumulate(in.data(), spec.count, format_, acc.data());
    return;
  }
  kern::bf16_decode_accumulate(reinterpret_cast<const uint16_t*>(in.data()), spec.count, acc.data());
}

void EquarxCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec,
                                                const HopContext& hop_in, std::span<float> acc,
                                                const HopContext& hop_out, const kern::RngKey& key,
                                                std::span<uint8_t> out) {
  if (!quantized(hop_in) || !quantized(hop_out)) {  // a BF16 side: the two passes
    decode_accumulate(in, spec, hop_in, acc);
    encode(acc, spec, hop_out, key, out);
    return;
  }
  kern::group_quant_decode_accumulate_encode(in.data(), spec.count, format_, acc.data(), format_, key, spec.offset,
                                             out.data());
}

}  // namespace ccsim::algo
