#include "algorithms/int8/block_int8.hpp"

namespace ccsim::algo {

CompressorInfo BlockInt8Compressor::info() {
  ParamTable params;
  params.add_int("block", "elements sharing one fp32 scale (the block maximum)", 256, 8, 65536, true)
      .add_choice("rounding", "stochastic (unbiased) or nearest (round half to even)", "stochastic",
                  {"stochastic", "nearest"});
  return {"int8", "block-wise symmetric int8, fp32 block-max scale, stochastic rounding: 8 bits/element + 32/block",
          std::move(params), [](const Params& p) {
            return std::make_unique<BlockInt8Compressor>(
                static_cast<uint32_t>(p.get_int("block")),
                p.get_string("rounding") == "nearest" ? kern::Rounding::kNearest : kern::Rounding::kStochastic);
          }};
}

void BlockInt8Compressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey& key,
                                 std::span<uint8_t> out) {
  kern::block_int8_encode(x.data(), spec.count, block_, rounding_, key, spec.offset, out.data());
}

void BlockInt8Compressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&, std::span<float> out) {
  kern::block_int8_decode(in.data(), spec.count, block_, out.data());
}

void BlockInt8Compressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                            std::span<float> acc) {
  kern::block_int8_decode_accumulate(in.data(), spec.count, block_, acc.data());
}

void BlockInt8Compressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                                   std::span<float> acc, const HopContext&, const kern::RngKey& key,
                                                   std::span<uint8_t> out) {
  kern::block_int8_decode_accumulate_encode(in.data(), spec.count, block_, acc.data(), rounding_, key, spec.offset,
                                            out.data());
}

}  // namespace ccsim::algo
