#pragma once
/// \file
/// thc: THC homomorphic quantization (Li et al., NSDI'24, Uniform THC) as adapted to multi-hop
/// all-reduce in DynamiQ §5 / §6.1: local values become q-bit integers on one lattice shared by
/// every rank, and the collective adds integers in b-bit fields without ever re-quantizing.
///
/// A round (algorithms/compressor.hpp):
///  1. Metadata phase, one max entry (4 bytes per rank): every rank rotates its tensor with the
///     randomized Hadamard transform the round will use (below) and reports the largest rotated
///     magnitude, divided by 2^(ceil(log2(B) / 2) + 1) (>= 2 sqrt(B), so the entry never overflows
///     fp32) and rounded up; the combined maximum gives M, the global max |rotated value| (up to
///     that rounding). A cheaper bound is not used: ||x||_2 is ~sqrt(B / (2 ln B)) times too loose.
///     can_reduce() (and plan_commit()) reject the round (kInvalidArgument at /bits) when ranks * (2^q - 1) >
///     2^b - 1: a sum of the ranks' codes would not fit the aggregation field.
///  2. prepare(): the tensor is padded with zeros to reduced_elements(), a multiple of the rotation
///     block B = min(rotation_block, the power of two >= the tensor); scaled by 2^-k, with k =
///     floor(log2 M), so that fp32 never over- or underflows whatever the gradients' magnitude
///     (powers of two commute exactly with the transform); rotated blockwise by H_B · D with the
///     signs D shared by every rank (kernels/transform/hadamard.hpp keyed {seed, round,
///     kThcSharedRank, 0}, the same on every rank and independent of the rank's own streams);
///     each value v becomes the lattice code of kernels/quant/thc_quant.hpp with half-width M' = M 2^-k
///     in [1, 2): c = stochastic_round((v + M') (2^q - 1) / (2M')) in [0, 2^q - 1], drawing
///     uniform_at(key, i) from the rank's prepare key. The reduced vector holds these codes as exact
///     fp32 integers, so the collective's fp32 additions are exact integer additions.
///  3. The collective: messages carry each partial sum as a b-bit unsigned field; encode checks
///     (CCSIM_CHECK) that every value is an integer that fits, decode is exact.
///  4. finish(): the integer sum S becomes S (2M' / (2^q - 1)) - ranks M', then the inverse
///     rotation, the scale 2^k, and the padding is dropped.
/// A zero tensor on every rank (M = 0) gives zeros; a non-finite gradient anywhere (M not finite)
/// gives NaN everywhere, since one shared lattice cannot carry it.
///
/// Wire: ceil(count * b / 8) bytes: count unsigned b-bit fields, little-endian bit stream
///       (kernels/quant/thc_quant.hpp). No per-message metadata. The collective reduces the padded
///       tensor, so the padding (up to B - 1 fields per tensor) is sent too.
///
/// Parameters: q (default 4, in [1, 15]); bits auto | 8 | 12 | 16 (default auto: 8 for at most 8
/// ranks, else 12, DynamiQ §6.1; overflow needs b >= ceil(log2(n (2^q - 1) + 1))); rotation_block
/// (default 2^20, power of two in [1, 2^24]).
///
/// Memory traffic: DynamiQ Table 2 charges THC 74 + 2 AR bytes per coordinate, most of it the
/// O(log d) passes of the rotation in prepare() and finish(). The collective's kernel ops keep the
/// default reads and writes; the round ops are charged the rotation's passes over the padded
/// tensor as the tiled CUDA transform makes them (kern::hadamard_tiled_passes, p = 2 for the
/// default block): plan_local 4 bytes per entry (max |x|) + (8 p - 4) per padded entry (its last
/// pass keeps only the maximum), prepare and finish 8 p per padded entry (the steps before and
/// after the butterflies fused into the first and last pass).

#include <cmath>
#include <cstdint>
#include <span>

#include "algorithms/registry.hpp"
#include "kernels/quant/thc_quant.hpp"

namespace ccsim::algo {

/// THC with a shared randomized Hadamard rotation, a global lattice and integer aggregation.
class ThcCompressor final : public Compressor {
 public:
  /// The RngKey rank of the shared rotation signs (no real rank has it).
  static constexpr uint32_t kThcSharedRank = 0xFFFFFFFFu;

  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/thc/thc_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  /// `bits` = 0 selects auto (8 for ranks <= 8, else 12).
  ThcCompressor(uint32_t q, uint32_t bits, uint64_t rotation_block)
      : q_(q), bits_(bits), rotation_block_(rotation_block) {}

  std::string_view name() const override { return "thc"; }
  /// ceil(count * b / 8), b = aggregation_bits(hop.ranks).
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const override;
  /// REQUIRES (checked): every x_i is an integer in [0, 2^b - 1] (a sum of lattice codes).
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// One pass: fields added and re-packed a tile at a time (kern::thc_unpack_accumulate_pack).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;

  PlanFormat plan_format(uint64_t, uint32_t) const override {
    PlanFormat f;
    f.max_entries = 1;
    return f;
  }
  /// The rank's largest rotated magnitude (see the file comment for the entry's scaling).
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key, PlanStats& out) const override;
  /// A chunk of whole rotation blocks at a time (declining, in finish(), a rank whose entries would
  /// leave fp32's normal range in the rank's frame; see thc.cpp).
  std::unique_ptr<PlanPieces> plan_pieces(uint64_t elements, uint32_t rank, const kern::RngKey& key) const override;
  /// A rank whose nonzero magnitudes span more than about 2^126 declines (plan_pieces()).
  bool plan_pieces_may_decline() const override { return true; }
  uint64_t plan_piece_alignment(uint64_t elements) const override;
  /// Checks the aggregation field against `ranks` and fixes the lattice.
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override;
  /// The aggregation fields must hold a sum of `ranks` codes (file comment, step 1).
  Status can_reduce(uint64_t elements, uint32_t ranks) const override;
  /// "scale": the agreed global max |rotated value| M of the round just planned (lattice_max(); 0 for
  /// an all-zero round, +inf when a gradient was not finite). Detail: lattice (valid, zero,
  /// nonfinite), k (prepare() works on x 2^-k) and M' = M 2^-k when valid, q, bits (the aggregation
  /// field width on the planned ranks). Empty before a plan.
  std::vector<PlanDecision> plan_decisions() const override;
  /// The tensor padded to a multiple of rotation_block_for(elements).
  uint64_t reduced_elements(uint64_t elements) const override;
  /// Round ops (plan_local, prepare, finish): the rotation's passes (see the file comment);
  /// collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  /// Pad, scale, rotate, map to lattice codes. REQUIRES (checked): a committed plan for x.size();
  /// `key` has the seed and round the plan's keys had (or M may not bound the rotated values).
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  /// Dequantize the integer sums, rotate back (with the signs of the round's prepare() calls, the
  /// same on every rank), scale back, drop the padding.
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;

  /// Stochastic rounding on the lattice, and a linear rotation.
  bool unbiased() const override { return true; }
  /// The rotation mixes each block of B entries, and the lattice and scale are the whole tensor's:
  /// only an all-reduce runs THC (a reduce-scatter or all-gather of rotated shards gave vNMSE > 20).
  bool prepare_mixes_entries() const override { return true; }
  /// Exactly specified fp32 rotation and lattice map, then integer arithmetic: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

  /// Width b of the aggregation fields on `ranks` ranks (resolves auto).
  uint32_t aggregation_bits(uint32_t ranks) const { return bits_ != 0 ? bits_ : (ranks <= 8 ? 8u : 12u); }
  /// The rotation block for a tensor of `elements`: min(rotation_block, power of two >= elements).
  uint64_t rotation_block_for(uint64_t elements) const;
  /// Lattice levels L = 2^q - 1.
  uint32_t levels() const { return (1u << q_) - 1u; }
  /// The committed global max |rotated value| M (0 before a plan).
  double lattice_max() const { return std::ldexp(static_cast<double>(m_), k_); }
  /// The committed lattice as prepare() and finish() apply it (what the CUDA kernels take).
  /// REQUIRES (checked): a committed plan.
  kern::ThcLattice committed_lattice() const;
  /// The shared sign key of the round whose keys have key's seed and round.
  static kern::RngKey shared_key(const kern::RngKey& key) { return {key.seed, key.round, kThcSharedRank, 0}; }

 private:
  enum class Lattice : uint8_t { kNone, kZero, kNonFinite, kValid };
  /// The power of two the metadata entry divides by, 2^(ceil(log2(B) / 2) + 1).
  static double entry_divisor(uint64_t block);
  /// The metadata entry of a rank whose largest rotated magnitude is m 2^e (rounded up to fp32).
  static float plan_entry(float m, int e, uint64_t block);
  class Pieces;

  uint32_t q_;
  uint32_t bits_;  ///< 0 = auto
  uint64_t rotation_block_;
  // The committed round.
  Lattice lattice_ = Lattice::kNone;
  uint64_t planned_elements_ = 0;
  uint32_t planned_ranks_ = 0;
  int k_ = 0;                 ///< the scale exponent: prepare() works on x 2^-k
  float m_ = 0;               ///< M' = M 2^-k in [1, 2)
  float step_ = 0;            ///< fl(2M' / L)
  float inv_step_ = 0;        ///< fl(L / 2M')
  kern::RngKey round_key_{};  ///< the shared sign key of the round's prepare() calls, for finish()
};

}  // namespace ccsim::algo
