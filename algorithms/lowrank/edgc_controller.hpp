#pragma once
/// \file
/// EDGC's rank controller (§IV-B to IV-D, Algorithm 1, App. A): the gradient data sampler's
/// schedule (GDS), the entropy-to-rank model (CQM, Theorem 3) and the dynamic alignment
/// compressor's rank bounds, warm-up and per-window step limit (DAC). It sees one entropy value
/// per sampled round and decides the rank of the rounds that follow; it moves no data.
///
/// Rounds are grouped in windows of w rounds; inside a window, rounds at positions 0, 1/α, 2/α,
/// ... are sampled. At the end of each window the controller averages the window's samples, H_w,
/// and (Theorem 3, with Constraint 1's fixed error anchored at the first window) computes
///   r_new = g^-1(2^(H_0 - H_w) · g(r_max))
/// with H in bits (so 2^ΔH is the paper's e^ΔH with H in nats: the σ ratio of Lemma 2), g the
/// layout's truncation error (edgc_error_by_rank) and g^-1(y) the smallest rank r >= 1 with
/// g(r) <= y (r_max + 1 when even r_max errs more: the rank would rise past the bound).
///
/// Warm-up (§IV-D2): nothing is compressed (rank 0) until a window ends with r_new < r_max and at
/// least `min_warmup_rounds` rounds done (the paper's 10 % floor, taken at the first window end
/// past it). The anchor H_0 stays the first window's entropy (ε_ini is "calculated based on the
/// initial gradients"): compression starts where the constant-error rank has already fallen to.
/// Without warm-up, compression starts at r_max in round 0.
///
/// Algorithm 1 at each later window end (and at the end of warm-up, with r_prev = r_max): a move
/// by more than s is cut to r_prev ± s, then the rank is clamped to [r_min, r_max]. Windows
/// without a sample leave the rank unchanged.
///
/// Algorithm 2 (stage-aligned ranks across pipeline stages) is the pipeline-parallel training
/// run's (tools/app/parallel_training): one rank serves every layer here, as the paper's Stage 1
/// rank, from which that run derives the other stages' ranks.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/compressor.hpp"

namespace ccsim::algo {

/// The controller's fixed settings.
struct EdgcControllerConfig {
  uint32_t max_rank = 64;          ///< r_max (DAC bound)
  uint32_t min_rank = 16;          ///< r_min, in [1, max_rank]
  uint32_t step_limit = 8;         ///< s: largest rank change per window
  uint64_t window_rounds = 1000;   ///< w
  uint64_t sample_interval = 10;   ///< 1/α: rounds between entropy samples inside a window
  bool warmup = true;              ///< start uncompressed (§IV-D2)
  uint64_t min_warmup_rounds = 0;  ///< the warm-up floor (10 % of the training's rounds)
};

/// Window-based dynamic rank adjustment (Algorithm 1) driven by entropy samples.
class EdgcRankController {
 public:
  /// `error_by_rank[r]` = g(r) for r = 0 .. max_rank + 1, non-increasing.
  /// REQUIRES: error_by_rank.size() == config.max_rank + 2; 1 <= min_rank <= max_rank;
  /// window_rounds, sample_interval, step_limit >= 1.
  EdgcRankController(const EdgcControllerConfig& config, std::vector<double> error_by_rank);

  /// The rank of the current round; 0 while warming up (nothing compressed).
  uint32_t rank() const { return rank_; }
  bool warming_up() const { return warming_up_; }
  /// Rounds completed.
  uint64_t round() const { return round_; }
  /// Whether the current round's entropy is sampled (GDS: every 1/α rounds of a window).
  bool samples_round() const { return samples(round_); }
  /// Whether round `round` (counted from 0) samples its entropy: a pure function of the round.
  bool samples(uint64_t round) const { return (round % config_.window_rounds) % config_.sample_interval == 0; }
  /// Records the current round's entropy sample (bits; the mean over the ranks).
  void add_entropy(double entropy_bits) { samples_.push_back(entropy_bits); }
  /// Completes the current round; at a window's end, updates rank() for the rounds that follow.
  void end_round();

  /// g^-1(y): the smallest r in [1, max_rank] with g(r) <= y, or max_rank + 1 if there is none.
  uint32_t inverse_error(double y) const;
  /// r_new = g^-1(2^(H_0 - entropy_bits) g(r_max)); r_max before any window has ended.
  uint32_t target_rank(double entropy_bits) const;
  /// H_0, the first window's mean entropy, once known.
  std::optional<double> anchor_entropy() const { return anchor_; }
  /// The last completed window's mean entropy and r_new (unset before the first window end).
  std::optional<double> last_window_entropy() const { return last_entropy_; }
  std::optional<uint32_t> last_target_rank() const { return last_target_; }
  const EdgcControllerConfig& config() const { return config_; }

 private:
  /// Algorithm 1 lines 3-10: step limit, then bounds.
  uint32_t step(uint32_t prev, uint32_t target) const;

  EdgcControllerConfig config_;
  std::vector<double> error_by_rank_;
  uint32_t rank_;
  bool warming_up_;
  uint64_t round_ = 0;
  std::vector<double> samples_;
  std::optional<double> anchor_;
  std::optional<double> last_entropy_;
  std::optional<uint32_t> last_target_;
};

/// CQM over a layout: g(r) = sqrt(Σ_l g(r; rows_l, cols_l)²) over the matrix layers compressed at
/// rank r (LowRankCompressor::compressed_at; the others contribute no error), i.e. the expected
/// total truncation error at unit entry standard deviation; entries r = 0 .. max_rank + 1, entry 0
/// counting every matrix layer (sqrt(Σ rows cols)). Non-increasing in r.
std::vector<double> edgc_error_by_rank(std::span<const LayerShape> layers, uint32_t max_rank);

/// Cost model of DAC's bound (Eq. 2), per compressed rows x cols layer at rank r:
///   T_compress   = (4 rows cols r [P = MQ, Q = M^T P^] + 2 rows r² [orthonormalization]
///                   + 2 rows cols r [residual M - P^ Q^T, with error feedback]) / flops_per_s
///   T_decompress = 2 rows cols r / flops_per_s                      [P^ (Σ Q)^T]
///   D_compressed = 4 r (rows + cols) bytes,  D_original = 4 rows cols bytes.
/// Returns the largest r_max in [1, cap] such that every r <= r_max compresses at least one layer
/// and satisfies Σ_l (T_compress + D_compressed / B + T_decompress) <= Σ_l D_original / B over the
/// layers compressed at r; 1 when even r = 1 does not (compression never pays).
uint32_t edgc_max_rank(std::span<const LayerShape> layers, double bandwidth_bytes_per_s, double flops_per_s,
                       bool error_feedback, uint32_t cap);

}  // namespace ccsim::algo
