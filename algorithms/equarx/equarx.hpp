#pragma once
/// \file
/// equarx: EQuARX's dynamic block-wise quantized all-reduce (Ahmed et al. 2025, §III–IV). Each
/// message is quantized per block of `block` elements with one fp32 scale (the block's largest
/// magnitude) into int8, FP8 E4M3 or FP8 E5M2 codes (symmetric: the block maximum maps to 127,
/// 448 or 57344); every receiver dequantizes to fp32 before adding (kernels/quant/group_quant.hpp).
///
/// Phases: a message with hop.summed < hop.ranks carries a partial sum, so it belongs to the
/// reduce-scatter phase; hop.summed == hop.ranks (the complete sum) belongs to the all-gather
/// phase. `phases` picks which of the two are quantized; a message of an unquantized phase is sent
/// in BF16 (round to nearest even, as the `bf16` scheme), the format of the paper's tensor and of
/// its baseline all-reduce, and is added in fp32 (magnitudes past BF16's range round to ±inf, as
/// in bf16). (A hop with summed > ranks, which no schedule
/// produces, counts as all-gather.)
/// EQuARX is an all-reduce scheme: the rule reads a standalone all-gather collective, whose
/// messages carry one rank's shard (summed = 1), as reduce-scatter traffic.
///
/// Wire, quantized phase:   4 * ceil(count / block) + count bytes
///                          [ceil(count / block) fp32 block maxima | count 8-bit codes]
///                          (int8 is two's complement; FP8 codes are OCP E4M3 / E5M2);
///       unquantized phase: 2 * count bytes (BF16 values, little-endian).
///
/// Parameters: block (default 64, power of two in [8, 65536]); format int8 | e4m3 | e5m2
/// (default int8); phases rs | ag | both (default both); rounding nearest | stochastic (default
/// nearest, as the paper).

#include "algorithms/registry.hpp"
#include "kernels/quant/group_quant.hpp"

namespace ccsim::algo {

/// EQuARX block quantizer with phase selection.
class EquarxCompressor final : public Compressor {
 public:
  /// Which all-reduce phases are quantized.
  enum class Phases : uint8_t { kReduceScatter, kAllGather, kBoth };

  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/equarx/equarx_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  EquarxCompressor(kern::GroupQuantFormat format, Phases phases) : format_(format), phases_(phases) {}

  std::string_view name() const override { return "equarx"; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const override {
    return quantized(hop) ? kern::group_quant_bytes(spec.count, format_) : 2 * spec.count;
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext& hop) const override {
    return quantized(hop) ? kern::packed_bytes(spec.count, format_.bits) : 2 * spec.count;
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
  /// Stochastic rounding is unbiased; nearest is not, and neither is the BF16 rounding of an
  /// unquantized phase, so only stochastic rounding in both phases is.
  bool unbiased() const override {
    return format_.rounding == kern::Rounding::kStochastic && phases_ == Phases::kBoth;
  }
  /// Integer rounding decisions, plain IEEE products and quotients, BF16 by integer rounding of the
  /// fp32 bits: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

  /// Whether a message at `hop` is quantized (see the file comment for the phase rule).
  bool quantized(const HopContext& hop) const {
    const bool reduce_scatter = hop.summed < hop.ranks;
    return phases_ == Phases::kBoth || (phases_ == Phases::kReduceScatter) == reduce_scatter;
  }

 private:
  kern::GroupQuantFormat format_;
  Phases phases_;
};

}  // namespace ccsim::algo
