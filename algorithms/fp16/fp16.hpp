#pragma once
/// \file
/// fp16: the IEEE half-precision baseline. Payload: one FP16 code per element, rounded to nearest
/// even and saturating (a finite value beyond ±65504 is sent as ±65504, never as inf; ±inf and NaN
/// stay non-finite), as kernels/quant/fp16_quant.hpp. Every hop decodes to fp32, adds in fp32 and
/// re-encodes (on the CPU in one pass per chunk).
///
/// Wire: 2 * count bytes (count little-endian uint16 codes), no metadata.

#include "algorithms/registry.hpp"

namespace ccsim::algo {

/// FP16 on the wire, fp32 accumulation.
class Fp16Compressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/fp16/fp16_device.cpp, compiled only then.
  static const DeviceOps& device_ops();

  std::string_view name() const override { return "fp16"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override { return 2 * spec.count; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// One pass: every entry decoded, summed and re-encoded (kern::fp16_decode_accumulate_encode).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;
  bool unbiased() const override { return false; }
  /// Integer rounding decisions (minifloat_encode_rne) and exact decodes: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }
};

}  // namespace ccsim::algo
