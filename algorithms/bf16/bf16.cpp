#include "algorithms/bf16/bf16.hpp"

#include "kernels/quant/bf16_quant.hpp"

namespace ccsim::algo {

CompressorInfo Bf16Compressor::info() {
  return {"bf16", "BF16 payload (round to nearest even), fp32 sums at every hop: 16 bits/element", ParamTable(),
          [](const Params&) { return std::make_unique<Bf16Compressor>(); }};
}

void Bf16Compressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey&,
                            std::span<uint8_t> out) {
  kern::bf16_encode(x.data(), spec.count, reinterpret_cast<uint16_t*>(out.data()));
}

void Bf16Compressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&, std::span<float> out) {
  kern::bf16_decode(reinterpret_cast<const uint16_t*>(in.data()), spec.count, out.data());
}

void Bf16Compressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                       std::span<float> acc) {
  kern::bf16_decode_accumulate(reinterpret_cast<const uint16_t*>(in.data()), spec.count, acc.data());
}

}  // namespace ccsim::algo
