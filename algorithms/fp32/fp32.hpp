#pragma once
/// \file
/// fp32: the uncompressed baseline. The wire carries the fp32 values; every hop adds in fp32.

#include "algorithms/registry.hpp"

namespace ccsim::algo {

/// Uncompressed fp32 (4 bytes per element, no metadata).
class Fp32Compressor final : public UnfusedHopCompressor {
 public:
  static CompressorInfo info();

  std::string_view name() const override { return "fp32"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override { return 4 * spec.count; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop, std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  bool unbiased() const override { return true; }
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }
};

}  // namespace ccsim::algo
