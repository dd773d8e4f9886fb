#pragma once
/// \file
/// edgc: EDGC, entropy-driven dynamic gradient compression (Yi et al., §IV and App. A). The
/// compression engine is PowerSGD's (algorithms/lowrank/low_rank.hpp: power iteration with warm
/// start, orthonormalization and error feedback; P and Q are what is all-reduced); EDGC chooses its
/// rank from the gradient entropy (algorithms/lowrank/edgc_controller.hpp: GDS, CQM, DAC).
///
/// GDS: in a sampled round (every 1/α rounds within windows of w rounds) each rank estimates the
/// entropy of its gradient x on a β-fraction of the entries: per matrix layer, the entries with
/// kern::in_sample(key, offset + i, β) (key = the rank's plan key), histogrammed in `entropy_bins`
/// bins over their [min, max] (kern::histogram_entropy); the differential entropy, which the
/// paper's Definition 1 and Lemma 2 use, is that histogram entropy + log2(bin width); the rank's
/// estimate is the mean over its matrix layers that have two distinct sampled values. A range-
/// normalized histogram entropy alone would not see the gradient's scale, which is what Theorem 3
/// turns into a rank.
///
/// Lag: the entropy travels in the metadata phase of round t, whose P all-reduce plan_format()
/// has already sized with round t's rank, so a rank the controller picks at the end of round t's
/// window applies from round t + 1 on.
///
/// Wire format (per round): the engine's (P in the metadata phase, [Q | uncompressed layers] in
/// the collective, fp32; nothing compressed and no P during warm-up), plus, in a sampled round,
/// two metadata sum entries after the P entries, fp32 on the wire: [the rank's entropy estimate in
/// bits, 1] or [0, 0] when it has none; the controller sees sum[0] / sum[1].
///
/// DAC: r_max = edgc_max_rank(layout, B, compute rate) capped by max_rank; r_min = ceil(r_max /
/// min_rank_divisor) with the divisor in [4, 6] (footnote 1: r_min in [r_max/6, r_max/4]).
/// Defaults from the paper's Cluster 1 (GPT2-2.5B): B = 32 Gbps inter-node Ethernet; the compute
/// rate, 0.56 TFLOP/s, is an effective rate for the thin, memory-bound factor products, chosen so
/// that the bound gives the r_max = 64 the paper measured (§V-C2: rank 64 barely beats no
/// compression) on GPT2-2.5B's 1920 x 1920 MLP weight shards under TP4 (63 on a whole TP4 block
/// or a GPT2-345M block); a V100's fp32 peak, 15.7 TFLOP/s, is far from what these products reach.
/// s = 8 per window (the value of s is missing from the paper's text; 8 crosses [16, 64] in
/// six windows); warm-up floor 10 % of total_rounds (230,000, the paper's runs).
///
/// Algorithm 2's stage alignment (pipeline-parallel stages get different ranks) belongs to the
/// pipeline-parallel training run (tools/app/parallel_training), which drives this compressor's
/// Algorithm 1 for the first stage through observe_round(); one rank serves every layer here.

#include <memory>

#include "algorithms/lowrank/edgc_controller.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "sim/base/uninit_vector.hpp"

namespace ccsim::algo {

/// EDGC's settings (the registered parameters, resolved).
struct EdgcOptions {
  uint32_t max_rank = 256;         ///< cap on r_max
  double min_rank_divisor = 4;     ///< r_min = ceil(r_max / divisor), divisor in [4, 6]
  uint32_t step_limit = 8;         ///< s
  uint64_t window_rounds = 1000;   ///< w
  double alpha = 0.1;              ///< iteration sampling rate: a sample every round(1/α) rounds
  double beta = 0.25;              ///< gradient sampling rate: fraction of entries sampled
  uint32_t entropy_bins = 256;     ///< histogram bins of the entropy estimate
  double bandwidth_gbps = 32;      ///< B of DAC's bound
  double compute_tflops = 0.56;    ///< effective rate of the compression products in DAC's bound
  bool warmup = true;              ///< start uncompressed (adaptive warm-up, §IV-D2)
  uint64_t total_rounds = 230000;  ///< training length the warm-up floor refers to
  double warmup_fraction = 0.1;    ///< warm-up floor as a fraction of total_rounds
  bool error_feedback = true;
  bool warm_start = true;
};

/// EDGC: PowerSGD engine with the entropy-driven rank controller.
class EdgcCompressor final : public LowRankCompressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/lowrank/lowrank_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  explicit EdgcCompressor(const EdgcOptions& options);

  std::string_view name() const override { return "edgc"; }

  /// "rank": the rank of the current round (0 while warming up: nothing compressed), which the
  /// controller fixed at the end of the previous round. Detail: warming_up (0/1), r_min, r_max,
  /// rounds (completed), and once a window has ended, H_w (its mean entropy, bits), H0 (the anchor)
  /// and r_target (Theorem 3's rank before the step limit and bounds).
  std::vector<PlanDecision> plan_decisions() const override;
  /// The controller moves the rank from round to round (0 while warming up).
  bool plan_changes_length() const override { return true; }

  /// The controller (rank bounds, warm-up state, window entropies).
  const EdgcRankController& controller() const { return *controller_; }
  /// The options it was made with (GDS's sampling rate and bins, for GPU callers).
  const EdgcOptions& options() const { return options_; }
  /// Rank `rank`'s entropy estimate of `x` in bits (see the file comment), or nothing when no
  /// matrix layer has two distinct sampled values.
  std::optional<double> entropy_estimate(std::span<const float> x, const kern::RngKey& key) const;
  /// Buffers layer_entropy() reuses from call to call.
  struct EntropyScratch {
    UninitVector<float> sample;
    std::vector<uint64_t> counts;
  };
  /// Matrix layer `l`'s term of entropy_estimate() (its sample's histogram entropy plus log2 of the
  /// bin width): `values` holds the layer's entries (values[i] is entry l.offset + i of the
  /// tensor), or nothing when its sample has not two distinct values. entropy_estimate() is the
  /// mean of the terms over the layout's matrix layers, in order.
  std::optional<double> layer_entropy(std::span<const float> values, const LayerShape& l, const kern::RngKey& key,
                                      EntropyScratch& scratch) const;
  /// Runs Algorithm 1 on a round this compressor does not compress (a pipeline run whose stages'
  /// ranks derive from this one, Algorithm 2): `entropy_bits` is the ranks' mean entropy_estimate()
  /// when controller().samples_round(), ignored otherwise; then the round ends as after the last
  /// rank's finish(), and rank() is the next round's.
  void observe_round(std::optional<double> entropy_bits);

 protected:
  uint64_t extra_plan_entries() const override;
  /// In a sampled round, GDS reads the matrix layers twice (their sampled range, then the
  /// histogram, as kernels/cuda/entropy_cuda.hpp does): 8 bytes per matrix-layer entry.
  uint64_t extra_plan_local_bytes(uint64_t elements) const override;
  void extra_plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key,
                        std::span<double> out) const override;
  void extra_plan_commit(std::span<const double> combined, uint32_t ranks) override;
  void on_round_end() override;
  void on_layout() override;

 private:
  EdgcOptions options_;
  std::unique_ptr<EdgcRankController> controller_;
  bool has_matrices_ = false;  ///< whether the layout has a matrix layer (else nothing to control)
};

}  // namespace ccsim::algo
