#include "algorithms/fp16/fp16.hpp"

#include "kernels/quant/fp16_quant.hpp"

namespace ccsim::algo {

CompressorInfo Fp16Compressor::info() {
  return {"fp16", "IEEE FP16 payload (round to nearest even, saturating), fp32 sums at every hop: 16 bits/element",
          ParamTable(), [](const Params&) { return std::make_unique<Fp16Compressor>(); }};
}

void Fp16Compressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey&,
                            std::span<uint8_t> out) {
  kern::fp16_encode(x.data(), spec.count, reinterpret_cast<uint16_t*>(out.data()));
}

void Fp16Compressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                            std::span<float> out) {
  kern::fp16_decode(reinterpret_cast<const uint16_t*>(in.data()), spec.count, out.data());
}

void Fp16Compressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                       std::span<float> acc) {
  kern::fp16_decode_accumulate(reinterpret_cast<const uint16_t*>(in.data()), spec.count, acc.data());
}

void Fp16Compressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                              std::span<float> acc, const HopContext&, const kern::RngKey&,
                                              std::span<uint8_t> out) {
  kern::fp16_decode_accumulate_encode(reinterpret_cast<const uint16_t*>(in.data()), spec.count, acc.data(),
                                      reinterpret_cast<uint16_t*>(out.data()));
}

}  // namespace ccsim::algo
