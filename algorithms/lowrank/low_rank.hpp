#pragma once
/// \file
/// The low-rank engine shared by PowerSGD (Vogels et al. 2019, Alg. 1) and EDGC (§IV, whose
/// compression engine it is): one step of distributed power iteration per round, with a shared
/// warm-start factor and per-rank error feedback. Derived classes choose the round's rank and may
/// add metadata entries of their own (EDGC's entropy).
///
/// Layers (set_layout): a layer with rows > 1, cols > 1 and r (rows + cols) < rows cols is
/// compressed at rank r; every other layer (biases, norms, matrices too small to gain) travels
/// uncompressed. Rank 0 compresses nothing. Without a layout the tensor is one 1-D layer.
///
/// A round, for every compressed layer l (rows x cols, rank r), on rank i:
///   metadata phase  M_i = x_i + e_i;  P_i = M_i Q  (Q: the shared cols x r warm start);
///                   the P_i are all-reduced (sum) and plan_commit() orthonormalizes the sum: P^.
///   prepare()       M_i = x_i + e_i;  Q_i = M_i^T P^;  e_i = M_i - P^ Q_i^T (with error feedback).
///   collective      all-reduce (sum) of [Q_i of every compressed layer | uncompressed layers].
///   finish()        layer l = P^ (Σ_i Q_i)^T; uncompressed layers are copied.
/// An uncompressed layer also sends x_i + e_i and clears e_i (a residual left by a round in which
/// it was compressed at another rank).
///
/// Warm start (PowerSGD §3, "reuse of the previous step's Q"): after the last rank's finish(), Q
/// becomes that round's reduced Σ_i Q_i (the reference implementation keeps the all-reduced Q;
/// the sum and the mean span the same columns, and P is orthonormalized, so the scale is
/// immaterial). Q starts as i.i.d. standard normals from Philox key {seed, round counter,
/// kSharedRank, kPlanStream}, which no rank's own draws use, at index offset_l + k cols + j for
/// Q[j][k]: the same on every rank, and column k's draws do not depend on r. Without warm start Q
/// is redrawn every round (the round counter advances). When the rank changes, the first min(r_old,
/// r_new) columns of a warm Q are kept and new columns drawn.
///
/// Wire format:
///   metadata phase  sum entries, fp32 on the wire (4 bytes each): P_i of every compressed layer
///                   (rows x r, row-major, in layer order), then the derived class's entries;
///   collective      reduced_elements() fp32 values, 4 bytes each, plain fp32 encode/decode (every
///                   hop adds in fp32); layout [Q_i (cols x r, row-major) of every compressed layer
///                   in layer order | every uncompressed layer in layer order].
///
/// State: the instance owns the warm-start Q, the round's P^ and one error-feedback residual per
/// rank (ranks x tensor fp32 values once error feedback has run). Calls follow the round order of
/// algorithms/compressor.hpp: plan_local() for the ranks of one round is called serially (it
/// initializes Q on first use), prepare()/finish() once per rank, finish() of rank ranks - 1 last.
/// The scheme is biased (unbiased() is false); Eigen's fp32 products make it kRunToRun.

#include <span>
#include <vector>

#include "algorithms/registry.hpp"

namespace ccsim::algo {

/// PowerSGD-style low-rank compression of the matrix layers of a gradient (see the file comment).
class LowRankCompressor : public UnfusedHopCompressor {
 public:
  /// The rank field of the key that draws the shared Q (no rank uses it).
  static constexpr uint32_t kSharedRank = 0xFFFFFFFFu;

  /// Whether a rows x cols layer is compressed at rank r.
  static bool compressed_at(const LayerShape& layer, uint32_t rank) {
    return rank > 0 && layer.rows > 1 && layer.cols > 1 && rank * (layer.rows + layer.cols) < layer.rows * layer.cols;
  }

  LowRankCompressor(uint32_t rank, bool error_feedback, bool warm_start)
      : rank_(rank), error_feedback_(error_feedback), warm_start_(warm_start) {}

  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override { return 4 * spec.count; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;

  /// sum_entries = Σ rows·r over the compressed layers + extra_plan_entries(); fp32 on the wire.
  PlanFormat plan_format(uint64_t elements, uint32_t ranks) const override;
  /// Writes P_i = (x + e_rank) Q per compressed layer, then the derived entries.
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key, PlanStats& out) const override;
  /// Orthonormalizes each layer's summed P into P^; passes the derived entries on.
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override;
  /// REQUIRES: shapes tile [0, elements) in offset order with count = rows·cols (checked). A new
  /// layout resets Q, P^ and the residuals.
  void set_layout(std::span<const LayerShape> layers) override;
  /// Σ cols·r over the compressed layers + Σ count over the others.
  uint64_t reduced_elements(uint64_t elements) const override;
  /// Round ops, for compressed layers of c entries in all (P and Q the factors), uncompressed ones
  /// of u, fp32 (ef = 1 with error feedback, else 0): plan_local forms M = x + e and P_i = M Q
  /// (reads x and e, writes M, the product reads it: 4 c (3 + ef)) and writes its metadata entries
  /// (plus extra_plan_local_bytes(), EDGC's entropy sampling);
  /// prepare computes Q_i = M^T P^ (reads M, writes Q_i) and, with error feedback, e = M - P^ Q_i^T
  /// (reads M, writes e: 4 c (1 + 2 ef)), and moves the uncompressed layers into the reduced
  /// vector (reads x, e; writes them and clears e: 4 u (2 + 2 ef); nothing when no layer is
  /// compressed and there is no error feedback); finish writes P^ (Σ Q_i)^T (reads Σ Q_i, writes c)
  /// and copies the uncompressed layers back (8 u; nothing when no layer is compressed).
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;
  bool unbiased() const override { return false; }
  Determinism determinism() const override { return Determinism::kRunToRun; }

  /// The rank of the current round (0: nothing compressed).
  uint32_t rank() const { return rank_; }
  /// Rounds completed (finish() of the last rank).
  uint64_t rounds() const { return rounds_; }
  /// Rank `rank`'s error-feedback residual over the whole tensor (empty before its first prepare()
  /// that compresses a layer, since it is all zeros until then, or without error feedback).
  std::span<const float> residual(uint32_t rank) const {
    return rank < residuals_.size() ? std::span<const float>(residuals_[rank]) : std::span<const float>();
  }
  /// Layer `layer`'s Q (cols x rank, row-major) as plan_local() last used it (the warm start after
  /// a round; empty before the layer's first plan_local()), for GPU callers.
  std::span<const float> q(size_t layer) const {
    return layer < q_.size() ? std::span<const float>(q_[layer]) : std::span<const float>();
  }
  /// Layer `layer`'s P^ of the planned round (rows x rank, row-major; empty for an uncompressed
  /// layer or before the first plan_commit()).
  std::span<const float> p_hat(size_t layer) const {
    return layer < p_hat_.size() ? std::span<const float>(p_hat_[layer]) : std::span<const float>();
  }
  /// The elementwise steps of the round ops (public for the GPU kernels' tests): m = x + e over
  /// `count` entries (a compressed layer's M; m may be e), and an uncompressed layer's move with
  /// error feedback, dst = x + e then e = 0 (dst may be x), or dst = x + 0 while the residual is
  /// not yet allocated (all zeros).
  static void add_into(const float* x, const float* e, uint64_t count, float* m);
  static void move_into(const float* x, float* e, uint64_t count, float* dst);
  static void add_zero(const float* x, uint64_t count, float* dst);
  /// The layers in effect for a tensor of `elements` (the layout, or one 1-D layer).
  std::vector<LayerShape> layers_for(uint64_t elements) const;

 protected:
  /// Changes the rank from the next round on (call between rounds).
  void set_rank(uint32_t rank) { rank_ = rank; }
  /// The layout given to set_layout() (empty if none).
  const std::vector<LayerShape>& layout() const { return layout_; }
  /// Extra metadata sum entries of this round, after the P entries.
  virtual uint64_t extra_plan_entries() const { return 0; }
  /// Memory traffic of computing extra_plan_local() on a tensor of `elements` (added to
  /// plan_local's memory_bytes()).
  virtual uint64_t extra_plan_local_bytes(uint64_t /*elements*/) const { return 0; }
  /// Rank `rank`'s extra entries (`out` has extra_plan_entries() zeros).
  virtual void extra_plan_local(std::span<const float> /*x*/, uint32_t /*rank*/, const kern::RngKey& /*key*/,
                                std::span<double> /*out*/) const {}
  /// The extra entries summed over `ranks` ranks.
  virtual void extra_plan_commit(std::span<const double> /*combined*/, uint32_t /*ranks*/) {}
  /// Called once a round is complete (after the last rank's finish()), before the next round.
  virtual void on_round_end() {}
  /// Called by set_layout() after the engine's own reset.
  virtual void on_layout() {}

 private:
  /// Where each layer goes in the round: its P entries, its part of the reduced vector.
  struct Slot {
    LayerShape shape;
    bool compressed = false;
    uint64_t p_offset = 0;        ///< first P entry in the metadata sums (compressed layers)
    uint64_t reduced_offset = 0;  ///< first element in the reduced vector
  };
  std::vector<Slot> slots(uint64_t elements) const;
  /// Makes layer `layer`'s Q (cols x rank_) ready, drawing what is missing from `key`'s seed.
  void ensure_q(size_t layer, const LayerShape& shape, uint64_t seed) const;
  /// One layer's part of rank `rank`'s residual, or nullptr where error feedback has none for it.
  const float* residual(uint32_t rank, const LayerShape& shape) const;

  uint32_t rank_;
  bool error_feedback_;
  bool warm_start_;
  std::vector<LayerShape> layout_;
  uint64_t rounds_ = 0;
  bool planned_ = false;  ///< plan_commit() ran for the current round
  // Shared warm start, per layer index: Q (cols x q_rank_[l]); drawn lazily in plan_local().
  mutable std::vector<std::vector<float>> q_;
  mutable std::vector<uint32_t> q_rank_;
  mutable std::vector<uint64_t> q_round_;
  std::vector<std::vector<float>> p_hat_;      ///< per layer, rows x rank_ (compressed layers)
  std::vector<std::vector<float>> residuals_;  ///< per rank, the whole tensor
};

/// The layout a low-rank scheme factors for a gradient made of layers with `params` parameters
/// each (in order): each layer's 1/tp share (rounded up) as a matrix of `rows` rows (0: about
/// square, rows = floor(sqrt(share))), the rows x floor(share / rows) matrix first and its remainder
/// as a 1-D layer; layers without parameters are skipped; a 1-D layer pads the layout to `total`
/// entries when the shares sum to less.
std::vector<LayerShape> layer_matrices(std::span<const uint64_t> params, uint32_t tp, uint64_t rows, uint64_t total);

}  // namespace ccsim::algo
