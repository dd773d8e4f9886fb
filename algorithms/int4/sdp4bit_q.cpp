#include "algorithms/int4/sdp4bit_q.hpp"

namespace ccsim::algo {

CompressorInfo Sdp4bitQuantCompressor::info() {
  ParamTable params;
  params.add_int("bits", "code width k: 4 or 8 (2^(k-1)-1 levels each side)", 4, 4, 8, true)
      .add_int("group", "elements sharing one fp32 scale (group maximum): 128 for gradients, 2048 for weights", 128, 32,
               65536, true)
      .add_choice("rounding", "nearest (ties to even, the paper's round) or stochastic (unbiased)", "nearest",
                  {"nearest", "stochastic"})
      .add_bool("hadamard",
                "TLq-HS smoother: 32x32 orthonormal Hadamard per 32-element block before quantization, "
                "inverted after dequantization",
                false);
  return {"sdp4bit_q",
          "SDP4Bit/ZeRO++ symmetric group quantization (int4/int8, fp32 group max), optional Hadamard "
          "smoother: bits/element + 32/group",
          std::move(params), [](const Params& p) {
            kern::GroupQuantFormat f;
            f.element = kern::GroupElement::kInt;
            f.bits = static_cast<uint32_t>(p.get_int("bits"));
            f.group = static_cast<uint32_t>(p.get_int("group"));
            f.rounding =
                p.get_string("rounding") == "stochastic" ? kern::Rounding::kStochastic : kern::Rounding::kNearest;
            f.hadamard = p.get_bool("hadamard");
            return std::make_unique<Sdp4bitQuantCompressor>(f);
          }};
}

void Sdp4bitQuantCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&,
                                    const kern::RngKey& key, std::span<uint8_t> out) {
  kern::group_quant_encode(x.data(), spec.count, format_, key, spec.offset, out.data());
}

void Sdp4bitQuantCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                    std::span<float> out) {
  kern::group_quant_decode(in.data(), spec.count, format_, out.data());
}

void Sdp4bitQuantCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                               std::span<float> acc) {
  kern::group_quant_decode_accumulate(in.data(), spec.count, format_, acc.data());
}

void Sdp4bitQuantCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec,
                                                      const HopContext& /*hop_in*/, std::span<float> acc,
                                                      const HopContext& /*hop_out*/, const kern::RngKey& key,
                                                      std::span<uint8_t> out) {
  kern::group_quant_decode_accumulate_encode(in.data(), spec.count, format_, acc.data(), format_, key, spec.offset,
                                             out.data());
}

}  // namespace ccsim::algo
