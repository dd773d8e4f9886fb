#include "algorithms/fp32/fp32.hpp"

#include <cstring>

#include "kernels/parallel.hpp"

namespace ccsim::algo {

CompressorInfo Fp32Compressor::info() {
  return {"fp32", "uncompressed fp32 baseline: 32 bits/element, fp32 sums at every hop", ParamTable(),
          [](const Params&) { return std::make_unique<Fp32Compressor>(); }};
}

void Fp32Compressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey&,
                            std::span<uint8_t> out) {
  if (spec.count != 0) std::memcpy(out.data(), x.data(), 4 * spec.count);  // empty spans may be null
}

void Fp32Compressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&, std::span<float> out) {
  if (spec.count != 0) std::memcpy(out.data(), in.data(), 4 * spec.count);  // empty spans may be null
}

void Fp32Compressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                       std::span<float> acc) {
  const auto* src = reinterpret_cast<const float*>(in.data());
  float* dst = acc.data();
  kern::parallel_for(spec.count, 1 << 16, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) dst[i] += src[i];
  });
}

}  // namespace ccsim::algo
