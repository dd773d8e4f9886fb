#pragma once
/// \file
/// qsgd: QSGD stochastic quantization (Alistarh et al. 2017), the fixed-precision baseline of AQGB.
/// Per bucket, |x_i| / ‖x‖₂ is rounded stochastically to s + 1 uniform levels and sent with a
/// separate sign bit; the bucket's L2 norm travels as fp32 (rounded up). Unbiased. Every hop
/// decodes to fp32, adds in fp32 and re-encodes. Element rules and edge cases:
/// kernels/quant/qsgd_quant.hpp.
///
/// Codes: `bits` bits per element = 1 sign bit + (bits - 1) level bits, level in [0, s] with
/// s = 2^(bits-1) - 1: bits = 4 gives s = 7 levels (QSGD "4-bit"), bits = 8 gives s = 127.
///
/// Wire: [ceil(count / bucket) fp32 norms | count codes of `bits` bits packed LSB-first]
///   = 4 * ceil(count / bucket) + ceil(count * bits / 8) bytes.
///
/// Parameters: bucket (elements per norm, default 512, power of two in [8, 2^20]);
///             bits (4 or 8, default 4).

#include "algorithms/registry.hpp"
#include "kernels/quant/qsgd_quant.hpp"

namespace ccsim::algo {

/// QSGD quantizer.
class QsgdCompressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/qsgd/qsgd_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  QsgdCompressor(uint32_t bucket, uint32_t bits) : bucket_(bucket), bits_(bits) {}

  std::string_view name() const override { return "qsgd"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::qsgd_bytes(spec.count, bucket_, bits_);
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::packed_bytes(spec.count, bits_);
  }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// The fused hop in one pass per bucket (kern::qsgd_decode_accumulate_encode).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;
  uint64_t alignment() const override { return bucket_; }
  /// Stochastic rounding onto levels that span [0, norm]: unbiased (buckets whose norm exceeds
  /// FLT_MAX excepted).
  bool unbiased() const override { return true; }
  /// Plain IEEE operations in a documented order (the norm sums squares in double in element
  /// order): bitwise CPU/GPU for a CUDA kernel that keeps that order.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

 private:
  uint32_t bucket_;
  uint32_t bits_;
};

}  // namespace ccsim::algo
