#pragma once
/// \file
/// SDP4Bit's (Jia et al. 2024, §2-3) and ZeRO++'s quantized sharded data-parallel pipelines, built
/// on the symmetric linear group quantizer of kernels/quant/group_quant.hpp (x_int = round(x / s *
/// (2^(k-1) - 1)), s = max |x| per group, fp32 scale; every hop dequantizes to fp32 before adding).
///
/// sdp4bit_tlq: gradient reduce-scatter for the two_level collective (topology/collectives/
/// two_level.cpp): intra-node all-to-all messages carry one rank's values (hop.summed == 1),
/// inter-node ones a node's sum (summed = G).
///   - mode tlq (SDP4Bit TLq, §3.2.1): a message with summed == 1 is int8, any other int4.
///   - mode ulq (ZeRO++ qgZ, "ULq"): int4 on both levels.
///   - hadamard (TLq-HS, §3.2.2, Algorithm 3 as simplified there): H, the 32x32 orthonormal
///     Hadamard matrix, is applied ONCE before the pipeline and once after it, never per hop:
///     prepare() transforms every complete 32-element block [32j, 32j + 32) of the rank's tensor,
///     finish() applies the same transform to what the rank ends with (H = H^T = H^-1, and
///     sum_i H g_i = H sum_i g_i). The last size % 32 elements are left untransformed. Blocks must
///     not straddle shard boundaries, which alignment() (the group, a multiple of 32) guarantees.
///     The transform is kernels/transform/hadamard.hpp's (float butterflies, then one multiply by
///     hadamard_scale(32)); a block whose largest magnitude exceeds kGroupHadamardMaxInput (2^116,
///     never a gradient) is transformed in double precision and saturated to +-FLT_MAX instead, so
///     it stays finite (and is then not exactly inverted).
///   The rule reads only hop.summed. In a flat ring reduce-scatter (summed 1, 2, 3, ...) every hop
///   after the first is therefore int4; with one GPU per node (G = 1) the two_level collective's
///   inter-node messages carry summed == 1 and travel as int8.
///   Wire: 4 * ceil(count / group) + ceil(count * bits / 8) bytes, bits = 8 or 4 as above
///         ([fp32 group maxima | codes], group_quant.hpp's layout). Group default 128 (the paper's
///         gradient group).
///
/// sdp4bit_qw (ZeRO++ qW) and sdp4bit_qwd (SDP4Bit qWD, §3.1): int4 group quantization (group
/// default 2048) for the weight all-gather (ring, p2p, butterfly allgather collectives).
///   - qw quantizes the weights themselves.
///   - qwd quantizes weight differences. The instance keeps the reference R, the values the
///     previous round's all-gather ended with (zero before the first round, so round 0 equals qw
///     bit for bit): prepare() sends x - R, finish() returns reduced + R, and the finish() of rank
///     ranks - 1 (the last, as run_numerics orders them) makes that result the new R. One R
///     serves every rank: this assumes every rank ends an all-gather with identical values, which
///     holds because all of them (the owner included) decode the same messages, as SDP4Bit's
///     model weights are identical on every GPU. R restarts at zero when the tensor's size
///     changes. In an all-reduce this would subtract R from every rank and add it back once, so
///     qwd is meant for all-gathers only.
///   Wire: 4 * ceil(count / group) + ceil(count / 2) bytes at every hop.
///
/// Rounding: nearest (ties to even, the paper's round(); default) or stochastic (unbiased; draws
/// uniform_at(key, spec.offset + i)).

#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/quant/group_quant.hpp"

namespace ccsim::algo {

/// SDP4Bit TLq / TLq-HS and ZeRO++ ULq (qgZ) gradient quantization by aggregation level.
class Sdp4bitTlqCompressor final : public Compressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/int4/sdp4bit_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  /// `intra` codes messages with summed == 1, `inter` all others; both kInt with the same group
  /// and rounding, without group_quant's per-group Hadamard (this scheme applies H in prepare()
  /// and finish() when `hadamard`).
  Sdp4bitTlqCompressor(kern::GroupQuantFormat intra, kern::GroupQuantFormat inter, bool hadamard)
      : intra_(intra), inter_(inter), hadamard_(hadamard) {}

  std::string_view name() const override { return "sdp4bit_tlq"; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const override {
    return kern::group_quant_bytes(spec.count, format(hop));
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext& hop) const override {
    return kern::packed_bytes(spec.count, format(hop).bits);
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
  /// With `hadamard`: out = x with H_32 applied to every complete 32-element block (out may alias x).
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  /// With `hadamard`: the same transform again (H·H = I).
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;
  uint64_t alignment() const override { return intra_.group; }
  /// Round ops: with `hadamard`, prepare and finish read and write the tensor once (H_32); none
  /// without. Collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  /// Stochastic rounding is unbiased at every hop (and H is linear); nearest is not.
  bool unbiased() const override { return intra_.rounding == kern::Rounding::kStochastic; }
  /// Plain IEEE float operations in a fixed order and integer rounding decisions.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

  /// The format of a message at `hop`: int8 (tlq) or int4 (ulq) when hop.summed == 1, else int4.
  const kern::GroupQuantFormat& format(const HopContext& hop) const { return hop.summed == 1 ? intra_ : inter_; }

 private:
  kern::GroupQuantFormat intra_, inter_;
  bool hadamard_;
};

/// ZeRO++ qW (weights) and SDP4Bit qWD (weight differences) int4 all-gather quantization.
class Sdp4bitWeightCompressor final : public Compressor {
 public:
  static CompressorInfo qw_info();
  static CompressorInfo qwd_info();
  /// The CUDA kernels of qW and qWD (algorithms/device_ops.hpp), registered with qw_info() and
  /// qwd_info() where the build has CUDA; defined in algorithms/int4/sdp4bit_device.cpp, compiled
  /// only then.
  static const DeviceOps& qw_device_ops();
  static const DeviceOps& qwd_device_ops();
  /// `differences`: qWD (keep the reference R; see the file comment), else qW.
  Sdp4bitWeightCompressor(kern::GroupQuantFormat format, bool differences)
      : format_(format), differences_(differences) {}

  std::string_view name() const override { return differences_ ? "sdp4bit_qwd" : "sdp4bit_qw"; }
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
  /// qWD: out = x - R (out may alias x); qW: copy.
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  /// qWD: out = reduced + R, and R = out after rank ranks - 1; qW: copy.
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;
  uint64_t alignment() const override { return format_.group; }
  /// Round ops: qWD's prepare reads x and R and writes x - R (12 bytes per entry), its finish
  /// reads the sum and R and writes the weights and the new R (16); qW has none (copies). Collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  bool unbiased() const override { return format_.rounding == kern::Rounding::kStochastic; }
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

  /// qWD's reference R (empty before the first round).
  std::span<const float> reference() const { return reference_; }

 private:
  kern::GroupQuantFormat format_;
  bool differences_;
  std::vector<float> reference_;  ///< qWD: what the last all-gather ended with
};

}  // namespace ccsim::algo
