#pragma once
/// \file
/// int8: block-wise symmetric int8 quantization with one fp32 block maximum as scale and
/// stochastic rounding (unbiased) by default. Wire: 8 bits/element + 32 bits per block.
/// Every hop decodes to fp32, adds, and re-encodes (on the CPU in one pass per block).

#include "algorithms/registry.hpp"
#include "kernels/quant/block_int8_quant.hpp"

namespace ccsim::algo {

/// Block int8 quantizer.
class BlockInt8Compressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/int8/block_int8_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  BlockInt8Compressor(uint32_t block, kern::Rounding rounding) : block_(block), rounding_(rounding) {}

  std::string_view name() const override { return "int8"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::block_int8_bytes(spec.count, block_);
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext&) const override { return spec.count; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop, std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;
  uint64_t alignment() const override { return block_; }
  bool unbiased() const override { return rounding_ == kern::Rounding::kStochastic; }
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

 private:
  uint32_t block_;
  kern::Rounding rounding_;
};

}  // namespace ccsim::algo
