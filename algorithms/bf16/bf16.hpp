#pragma once
/// \file
/// bf16: payload in BF16 (round to nearest even), sums in fp32 at every hop; 16 bits/element.

#include "algorithms/registry.hpp"

namespace ccsim::algo {

/// BF16 on the wire, fp32 accumulation.
class Bf16Compressor final : public UnfusedHopCompressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/bf16/bf16_device.cpp, compiled only then.
  static const DeviceOps& device_ops();

  std::string_view name() const override { return "bf16"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override { return 2 * spec.count; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop, std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  bool unbiased() const override { return false; }
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }
};

}  // namespace ccsim::algo
