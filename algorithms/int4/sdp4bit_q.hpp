#pragma once
/// \file
/// sdp4bit_q: the symmetric linear group quantizer of SDP4Bit (Jia et al. 2024, §2.2, §3.2) and
/// ZeRO++: x_int = round(x / s * (2^(k-1) - 1)) with s = max |x| per group, k = 4 or 8 bits,
/// optionally with TLq-HS's Hadamard smoother (a 32x32 orthonormal Hadamard transform of every
/// complete 32-element block before quantization, inverted after dequantization). Every hop
/// dequantizes to fp32, adds in fp32 and re-encodes. Element rules, tail handling and layout:
/// kernels/quant/group_quant.hpp.
///
/// This is the quantizer alone, with the same width at every hop. SDP4Bit's pipelines are schemes
/// of their own (algorithms/int4/sdp4bit_pipeline.hpp): sdp4bit_tlq, TLq on the two_level
/// reduce-scatter (int8 for intra-node messages, int4 for inter-node ones; mode ulq gives ZeRO++'s
/// int4 on both), whose hadamard option is TLq-HS as the paper runs it, H applied once before and
/// once after the whole collective (H·H = I, ΣHg = HΣg; this per-hop form equals it up to rounding,
/// at the cost of a transform per hop); and sdp4bit_qw / sdp4bit_qwd, int4 with group 2048 on the
/// weight all-gather, of the weights or of their differences to the previous round's result.
///
/// Wire: [ceil(count / group) fp32 group maxima | count codes of `bits` bits, two's complement,
///        packed LSB-first (two 4-bit codes per byte, element 2j in the low nibble)]
///   = 4 * ceil(count / group) + ceil(count * bits / 8) bytes.
///
/// Parameters: bits (4 or 8, default 4); group (default 128 for gradients, 2048 for weights;
/// power of two in [32, 65536], so always a multiple of the 32-element Hadamard block); rounding
/// nearest | stochastic (default nearest, the paper's round()); hadamard (default false).

#include "algorithms/registry.hpp"
#include "kernels/quant/group_quant.hpp"

namespace ccsim::algo {

/// SDP4Bit / ZeRO++ group quantizer.
class Sdp4bitQuantCompressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/int4/sdp4bit_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  explicit Sdp4bitQuantCompressor(kern::GroupQuantFormat format) : format_(format) {}

  std::string_view name() const override { return "sdp4bit_q"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::group_quant_bytes(spec.count, format_);
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::packed_bytes(spec.count, format_.bits);
  }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// The fused hop in one pass per group (kern::group_quant_decode_accumulate_encode).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;
  uint64_t alignment() const override { return format_.group; }
  /// Stochastic rounding is unbiased (the Hadamard transform is linear, so E[H·Q(Hx)] = x up to
  /// rounding); nearest is not.
  bool unbiased() const override { return format_.rounding == kern::Rounding::kStochastic; }
  /// Plain IEEE adds, products and quotients in a fixed order (kernels/ builds without FMA
  /// contraction) and integer rounding decisions: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

 private:
  kern::GroupQuantFormat format_;
};

}  // namespace ccsim::algo
