#pragma once
/// \file
/// dynamiq: DynamiQ (Ben Basat et al., §3 and App. A), variable-bit-width non-uniform quantization
/// for multi-hop all-reduce, with every technique its ablation (Table 6) switches.
///
/// Round (algorithms/compressor.hpp):
///  1. Metadata phase: for each super-group j of S entries, every rank contributes Σx and Σx²
///     (2 fp32 sums per super-group); the combined sums give the mean μ_j over ranks and entries and
///     F_j = Σ_i F_ij. Bit widths q_j ∈ W follow from F_j (below), identically on every rank.
///  2. prepare() subtracts μ_j from the rank's entries (subtract_mean) and reorders the full
///     super-groups so that equal widths are contiguous (stable by index; the partial last
///     super-group, if any, stays last); finish() restores the order and adds ranks·μ_j back.
///  3. Every hop decodes to fp32, adds and re-encodes each super-group at its width (the CPU
///     reference composes decode_accumulate and encode; kernels/quant/dynamiq_quant.hpp has the element
///     functions and the wire layout of one super-group).
///
/// Bit allocation (§3.2): consecutive widths a < b of W get thresholds with equal per-bit benefit,
/// T_{a,b} · (4^{b−a} − 1) / (4^b (b − a)) = C, so T_{1,2} = 5/32·T_{2,4}, T_{2,4} = 17/512·T_{4,8},
/// T_{4,8} = 257/2^17·T_{8,16}; super-group j gets the widest b with F_j >= T_{a,b}. The one free
/// parameter C is found by bisection on log2 C (App. A's search on u, z_j = 4/log2(512/17)·log2 F_j
/// + u, is the same search for W = {2,4,8}): the largest total within Σ_j m_j·q_j <= d·b̄, where b̄
/// is the budget minus the metadata bits per entry (scales, and the metadata phase's 64 bits per
/// super-group: "budget including all metadata"). variable = false gives every super-group the
/// widest width of W that fits b̄.
///
/// Magnitudes (§3.3): q bits are a sign and r < 2^(q−1) indexing Q = {f(ε_q, r)},
/// f(ε, r) = ((1+2ε²)^r − 1) / ((1+2ε²)^(2^(q−1)−1) − 1); values = uniform uses ε = 0 (r / (2^(q−1)−1)).
/// q = 2 has Q = {0, 1} whatever ε; q = 1 (W = {1,...,16} only) codes ±scale.
///
/// Wire of a chunk: the blocks of its super-groups in (reordered) order, each
/// dynamiq_sg_bytes(m, q_j, group, hierarchical) bytes; chunk boundaries must fall on super-group
/// boundaries (alignment() = S).
///
/// Bias: every rounding is stochastic and unbiased on its own, scale quantization included, so with
/// correlated = false the all-reduce is exactly unbiased. Correlated rounding keeps each single
/// encoding unbiased (each rank's u is exactly uniform), but along a multi-hop aggregation chain a
/// rank's stratum is conditioned on the strata of the ranks before it, whose roundings shaped the
/// partial sum it now rounds; the result then carries a small bias (tests/algorithms/dynamiq_test.cpp
/// detects it; docs/compression.md gives its size on real gradients), traded for a lower variance.
///
/// Parameters: budget (bits/entry incl. metadata, default 5), group s (16), super_group S (256),
/// widths "2-4-8" | "1-2-4-8-16", values nonuniform | uniform, eps4 / eps8 / eps16 (ε per width,
/// chosen by measurement: docs/compression.md), variable, hierarchical, correlated, subtract_mean,
/// reorder (all default true).

#include <span>
#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/quant/dynamiq_quant.hpp"

namespace ccsim::algo {

/// DynamiQ with its ablation switches.
class DynamiqCompressor final : public Compressor {
 public:
  struct Options {
    double budget = 5.0;
    uint32_t group = 16;
    uint32_t super_group = 256;
    std::vector<uint32_t> widths = {2, 4, 8};
    bool nonuniform = true;
    double eps4 = 0.2, eps8 = 0.04, eps16 = 0.0;
    bool variable = true;
    bool hierarchical = true;
    bool correlated = true;
    bool subtract_mean = true;
    bool reorder = true;
  };

  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/dynamiq/dynamiq_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  explicit DynamiqCompressor(const Options& options);

  /// Bits per entry spent on metadata: scales, plus the metadata phase's 64 bits per super-group.
  static double metadata_bits_per_entry(const Options& o);

  std::string_view name() const override { return "dynamiq"; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const override;
  /// wire_bytes() less the super-groups' scales in front of their codes.
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext& hop) const override;
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// One pass: each super-group decoded into its accumulator and re-encoded while it is in cache
  /// (both messages share the chunk's layout).
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;

  PlanFormat plan_format(uint64_t elements, uint32_t ranks) const override;
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key, PlanStats& out) const override;
  /// A piece of whole super-groups at a time.
  std::unique_ptr<PlanPieces> plan_pieces(uint64_t elements, uint32_t rank, const kern::RngKey& key) const override;
  uint64_t plan_piece_alignment(uint64_t) const override { return options_.super_group; }
  /// plan_local() reads only the super-group size.
  std::string plan_local_identity() const override;
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override;
  /// "log2_C": the bisection's log2 C (only when it ran: variable widths and a nonzero tensor; detail
  /// log2 T_{a,b} of each threshold, and App. A's u for W = {2,4,8}); "bits": the plan's mean
  /// payload bits per entry, Σ m_j q_j / d (detail: the payload budget b̄ per entry it meets, the
  /// budget incl. metadata, and the super-groups at each width, "w<q>=count").
  std::vector<PlanDecision> plan_decisions() const override;
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;

  uint64_t alignment() const override { return options_.super_group; }
  /// Round ops: plan_local reads the tensor and writes two doubles per super-group; prepare
  /// (reorder, subtract the means) and finish (scatter back, add ranks x the means) read and
  /// write it once and read one float mean per super-group. Collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  /// Byte-balanced shards (byte_balanced_cuts): chunk sizes vary with the round's plan.
  std::vector<uint64_t> shard_cuts(uint64_t elements, uint32_t parts) const override {
    return byte_balanced_cuts(*this, elements, parts, {1, parts});
  }
  /// Exactly unbiased without correlated rounding (see the file comment for why it is not with it).
  bool unbiased() const override { return !options_.correlated; }
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }
  Status can_implement(const TensorSpec& spec) const override;

  // ---- the committed plan (for tests and reports) ----
  /// Width of original super-group j.
  uint32_t width_of(uint64_t j) const { return widths_[j]; }
  /// log2 of the thresholds T_{w_i, w_{i+1}} of the last bisection (empty when not variable).
  const std::vector<double>& log2_thresholds() const { return log2_thresholds_; }
  /// b̄: the payload bits per entry the last plan's widths had to fit (the budget minus the exact
  /// metadata bits of the planned tensor, per entry).
  double payload_budget() const { return payload_budget_; }
  /// Payload + scale bits of the whole tensor under the plan (what the budget constrains, without
  /// the metadata phase's own bits).
  uint64_t tensor_bits() const;
  uint64_t super_groups() const { return widths_.size(); }
  /// The plan's order: entry k is the original super-group at reordered position k (what
  /// prepare() gathers there; the partial last super-group, if any, stays last). For GPU callers
  /// (kernels/cuda/round_cuda.hpp: dynamiq_prepare_cuda, dynamiq_finish_cuda).
  std::span<const uint32_t> order() const { return order_; }
  /// The plan's mean μ_j of every original super-group (zeros without subtract_mean), as prepare()
  /// subtracts it and finish() adds ranks · μ_j back.
  std::span<const float> means() const { return mean_; }

 private:
  kern::DynamiqSgCoding coding(uint32_t width) const;
  const float* levels(uint32_t width) const;
  uint64_t sg_count(uint64_t j) const;  // entries of original super-group j
  // The super-groups of a chunk, in runs of up to kSgRun consecutive ones: fn(k0, ka, kb) for the
  // runs [ka, kb) of the chunk's [k0, k1), spread over the worker threads.
  static constexpr uint64_t kSgRun = 16;
  template <typename Fn>
  void for_each_run(const TensorSpec& spec, Fn&& fn) const;
  // fn(k, entry offset in the chunk, entries, coding, byte offset in the message) for each super-group.
  template <typename Fn>
  void for_each_sg(const TensorSpec& spec, Fn&& fn) const;
  // for_each_sg() with the super-group's uniforms as a last argument, drawn for a run of
  // super-groups at once (their entries are consecutive, and an entry's draw depends on its index
  // alone, so the bytes are those of one draw per super-group).
  template <typename Fn>
  void for_each_sg_drawn(const TensorSpec& spec, const kern::RngKey& key, uint32_t ranks, Fn&& fn) const;

  Options options_;
  std::vector<float> levels4_, levels8_, levels16_;
  static constexpr float kLevels2[2] = {0.0f, 1.0f};
  // Plan.
  uint64_t elements_ = 0;
  uint32_t ranks_ = 0;
  std::vector<uint8_t> widths_;       // per original super-group
  std::vector<float> mean_;           // μ_j per original super-group
  std::vector<uint32_t> order_;       // order_[k] = original super-group at reordered position k
  std::vector<uint64_t> block_offset_;  // bytes before reordered super-group k's block; size n + 1
  std::vector<uint64_t> meta_offset_;   // scale bytes before reordered super-group k's block; size n + 1
  std::vector<double> log2_thresholds_;
  double payload_budget_ = 0;  // b̄ of the last plan
  double log2_c_ = 0;          // log2 C found by the last bisection (valid when log2_thresholds_ is not empty)
};

}  // namespace ccsim::algo
