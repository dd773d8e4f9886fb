#pragma once
/// \file
/// tfp: Truncation of Floating-Point numbers (AQGB §4.4, Eq. 5). Each element is sent as the
/// first k bits of its bit pattern in a base format (fp32, or fp16 / FP8 E4M3 / FP8 E5M2 after
/// conversion, the paper's choice for small k), optionally with random rounding between the
/// truncated value and the value one unit up at bit k (unbiased). Every hop decodes to fp32, adds
/// in fp32 and re-encodes. Element rules, worked example and edge cases: kernels/quant/tfp_quant.hpp.
///
/// Wire: ceil(count * k / 8) bytes, the k-bit codes packed as a little-endian bit stream (code i
/// in bits [i*k, i*k + k)), no metadata.
///
/// Parameters (ParamTable, see info()):
///   k                bits kept per element, default 16; valid per base: fp32 10..32, fp16 7..16,
///                    fp8e4m3 6..8, fp8e5m2 7..8 (sign, all exponent bits, >= 1 mantissa bit);
///                    the table admits 6..32 and can_implement() rejects a k outside its base's range
///   base             fp32 | fp16 | fp8e4m3 | fp8e5m2, default fp32
///   random_rounding  Eq. 5 random rounding (unbiased), default false (plain truncation, the
///                    paper's default for large k)

#include "algorithms/registry.hpp"
#include "kernels/quant/tfp_quant.hpp"

namespace ccsim::algo {

/// TFP quantizer.
class TfpCompressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/tfp/tfp_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  TfpCompressor(kern::TfpFormat format, bool random_rounding) : format_(format), random_rounding_(random_rounding) {}

  std::string_view name() const override { return "tfp"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::tfp_bytes(spec.count, format_.bits);
  }
  /// REQUIRES: can_implement() is OK (k valid for the base); checked.
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// One pass a tile at a time (kern::tfp_decode_accumulate_encode).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;
  /// Random rounding is unbiased for |x| up to the largest finite k-bit value; truncation is not.
  bool unbiased() const override { return random_rounding_; }
  /// Integer bit manipulation and one exact product per element: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }
  /// kInvalidArgument when k is outside the range of the base format.
  Status can_implement(const TensorSpec& spec) const override;

 private:
  kern::TfpFormat format_;
  bool random_rounding_;
};

}  // namespace ccsim::algo
