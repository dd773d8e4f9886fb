#include "algorithms/qsgd/qsgd.hpp"

namespace ccsim::algo {

CompressorInfo QsgdCompressor::info() {
  ParamTable params;
  params.add_int("bucket", "elements sharing one fp32 L2 norm", 512, 8, 1 << 20, true)
      .add_int("bits", "bits per element: 1 sign + (bits-1) level bits, s = 2^(bits-1)-1 levels (4 or 8)", 4, 4, 8,
               true);
  return {
      "qsgd",
      "QSGD: stochastic s-level quantization of |x|/||x||2 per bucket, sign bit, fp32 norm: bits/element + 32/bucket",
      std::move(params), [](const Params& p) {
        return std::make_unique<QsgdCompressor>(static_cast<uint32_t>(p.get_int("bucket")),
                                                static_cast<uint32_t>(p.get_int("bits")));
      }};
}

void QsgdCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&,
                            const kern::RngKey& key, std::span<uint8_t> out) {
  kern::qsgd_encode(x.data(), spec.count, bucket_, bits_, key, spec.offset, out.data());
}

void QsgdCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                            std::span<float> out) {
  kern::qsgd_decode(in.data(), spec.count, bucket_, bits_, out.data());
}

void QsgdCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                       std::span<float> acc) {
  kern::qsgd_decode_accumulate(in.data(), spec.count, bucket_, bits_, acc.data());
}

void QsgdCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                              std::span<float> acc, const HopContext&, const kern::RngKey& key,
                                              std::span<uint8_t> out) {
  kern::qsgd_decode_accumulate_encode(in.data(), spec.count, bucket_, bits_, acc.data(), key, spec.offset, out.data());
}

}  // namespace ccsim::algo
