#pragma once
/// \file
/// The compressors of a 3D-parallel (tensor x pipeline x data) run's stage syncs, round by round,
/// with EDGC's controllers (EDGC §IV-D4): which compressor each pipeline stage's data-parallel
/// all-reduce runs in each round, and the lowering of that sync (sim/training/parallel_job.hpp
/// times it; the caller passes what the run observed).
///
/// Per scheme:
///  * a scheme with a metadata phase that is not low-rank plans once per stage on synthetic
///    gradients of the stage's share (salt: the stage index) and keeps that plan;
///  * otherwise each (round, stage) gets a fresh compressor, shared by the stage's TP indices;
///  * controller edgc (Algorithm 2) sets powersgd's or edgc's rank per stage and round:
///    η = T_com / r of the first stage's previous sync (Eq. 3, T_com(r) = η r), T̄_microBack the mean
///    over stages of their mean micro-batch backward so far, and
///    r_s = clamp(round((η r_1 + s · T̄_microBack) / η), r_min, r_max) for stage s (0-based; stage
///    0, the paper's "Stage 1", starts its sync last). r_1 is the scheme's rank (anchor
///    first_stage: Algorithm 2 with Algorithm 1's rank given) or the largest r_1 whose clamped
///    stage ranks average at most the scheme's rank (anchor mean: the volume of one shared rank).
///    A round without an observation (round 0, or the first stage's previous sync unfinished) runs
///    r_1 everywhere;
///  * scheme edgc (Algorithm 1) sets r_1 every round from the entropy of the first stage's
///    gradients (synthetic, one draw for the whole run: stationary statistics; RoundEntropies) in
///    the rounds its gradient-descent sampling samples; while it warms up every stage runs uncompressed
///    (fp32). The stages run PowerSGD at the decided rank (EDGC's engine), with the scheme's
///    error_feedback and warm_start.
/// Every decision is reported with its inputs.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/bucket_codecs.hpp"
#include "algorithms/compressed_collective.hpp"
#include "algorithms/lowrank/edgc.hpp"
#include "sim/base/enum_names.hpp"
#include "sim/base/uninit_vector.hpp"

namespace ccsim::algo {

/// Where Algorithm 2 anchors the stages' ranks.
enum class EdgcAnchor : uint8_t { kFirstStage, kMean };
/// Their names, in the order scenario files list them.
inline constexpr EnumName<EdgcAnchor> kEdgcAnchors[] = {{EdgcAnchor::kFirstStage, "first_stage"},
                                                        {EdgcAnchor::kMean, "mean"}};

/// What the pipeline run observed by a stage sync's start, as Algorithm 2 reads it.
struct StageObservations {
  /// Duration of the first stage's sync in the previous round, once it has completed.
  std::optional<double> first_stage_sync_s;
  /// Per stage: the mean duration of its micro-batch backward ops so far (0 before any).
  std::vector<double> micro_backward_s;
};

/// A controller's decision for one round and stage.
struct StageDecision {
  uint32_t round = 0;
  uint32_t stage = 0;
  std::string quantity;  ///< "rank" (the stage's), "alg1_rank" (Algorithm 1's r_1)
  double value = 0;
  std::string detail;
};

/// Algorithm 2: stage-aligned ranks from the observed timings.
class EdgcStageController {
 public:
  EdgcStageController(uint32_t r_min, uint32_t r_max, EdgcAnchor anchor) : r_min_(r_min), r_max_(r_max), anchor_(anchor) {}
  /// The rank of `stage` (of `stages`) in `round` around the base rank `base` (r_1's anchor),
  /// recording it as used; `detail` receives the inputs it was decided from.
  uint32_t decide(uint32_t base, uint32_t round, uint32_t stage, uint32_t stages, const StageObservations& seen,
                  std::string& detail);
  /// The rank `stage` used in `round`, if one was decided.
  std::optional<uint32_t> used(uint32_t round, uint32_t stage) const;
  void record(uint32_t round, uint32_t stage, uint32_t rank) { used_[{round, stage}] = rank; }

 private:
  uint32_t clamp(double r) const;
  uint32_t r_min_, r_max_;
  EdgcAnchor anchor_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> used_;
};

/// Algorithm 1's entropy samples in a 3D-parallel run: per round, the DP ranks' mean
/// EdgcCompressor::entropy_estimate() of the first stage's synthetic gradients (one draw for the
/// whole run). Shared by the run's edgc schemes: a round's mean is computed once per sampling
/// setting (beta, entropy_bins) whatever the number of schemes asking, and one computation covers
/// every round the asking scheme samples from there to the run's end, generating the draw a matrix
/// layer at a time for as many ranks at once as bytes() allows: the whole draw is never held.
/// Values are those of entropy_estimate() on the whole draw, bit for bit, whatever the threads.
class RoundEntropies {
 public:
  /// The salt of the draw (SyntheticGradients::draw(stage.elements, dp, kSalt)).
  static constexpr uint32_t kSalt = 0x3D0000u;
  /// Bytes of synthetic gradients a computation may hold for several ranks at once.
  static constexpr double kRanksAtOnceBytes = 256.0 * (1 << 20);
  /// `stage`: the first stage's share (its entries and layout); `rounds`: the run's; `budget`:
  /// bytes the draw may take for several ranks at once (one rank's largest layer at least).
  RoundEntropies(SyntheticGradients synthetic, BucketShape stage, uint32_t dp, uint32_t rounds,
                 double budget = kRanksAtOnceBytes)
      : synthetic_(std::move(synthetic)), stage_(std::move(stage)), dp_(dp), rounds_(rounds), budget_(budget) {}
  /// The ranks' mean entropy in `round` by `alg1`'s settings; nothing when no rank's
  /// entropy_estimate() has a value. REQUIRES: alg1's layout is the stage's; alg1 samples `round`.
  std::optional<double> mean(const EdgcCompressor& alg1, uint32_t round);
  /// Bytes of synthetic gradients a computation holds: its ranks' largest matrix layer.
  static double bytes(const BucketShape& stage, uint32_t dp, double budget = kRanksAtOnceBytes);
  /// Entries of the largest matrix layer of `stage`'s layout (0 if none).
  static uint64_t largest_matrix_layer(const BucketShape& stage);
  /// Ranks whose draw a computation generates at once.
  static uint32_t ranks_at_once(const BucketShape& stage, uint32_t dp, double budget = kRanksAtOnceBytes);

 private:
  // The means of `rounds` (each rank's terms summed in layer order, as entropy_estimate() sums).
  std::vector<std::optional<double>> compute(const EdgcCompressor& alg1, std::span<const uint32_t> rounds) const;

  SyntheticGradients synthetic_;
  BucketShape stage_;
  uint32_t dp_ = 1, rounds_ = 0;
  double budget_ = kRanksAtOnceBytes;
  std::map<std::pair<double, uint32_t>, std::map<uint32_t, std::optional<double>>> known_;  // (beta, bins) -> round
};

/// The stage syncs' compressors and lowerings of one scheme.
class StageCodecs {
 public:
  struct Config {
    std::string scheme;
    nlohmann::json params = nlohmann::json::object();
    bool edgc_controller = false;  ///< Algorithm 2 sets the stages' ranks
    uint32_t r_min = 16, r_max = 256;
    EdgcAnchor anchor = EdgcAnchor::kFirstStage;
    const topo::CollectiveInfo* collective = nullptr;  ///< the stages' all-reduce
    uint32_t dp = 1;
    topo::CollectiveOptions base;                      ///< segments
    std::vector<BucketShape> stages;                   ///< per stage: one TP rank's gradient (stage_shapes)
    uint32_t rounds = 0;                               ///< the run's rounds
  };

  /// Makes the per-stage plans. Scheme edgc reads Algorithm 1's samples from `entropies` (shared
  /// by the run's schemes; made here when null). REQUIRES: a valid scheme and params,
  /// CompressedCollective::check passing for every stage share, the synthetic gradients fitting in
  /// memory, and `entropies` made for config.stages[0], config.dp and `synthetic`. An error is
  /// internal (a validation gap).
  static Result<StageCodecs> make(Config config, SyntheticGradients synthetic,
                                  std::shared_ptr<RoundEntropies> entropies = nullptr);

  /// The lowering of `stage`'s sync in `round` (rounds in order), made at the sync's start from what
  /// the run observed; the decisions taken for it are appended to `decisions`.
  Result<const CompressedCollective*> stage(uint32_t round, uint32_t stage, const StageObservations& seen,
                                            std::vector<StageDecision>& decisions);
  /// Whether the scheme factors matrices (its stages report ranks).
  bool low_rank() const { return low_rank_; }
  /// The rank `stage` used in `round` (low-rank schemes: the decided one, else the scheme's; -1 otherwise).
  int64_t rank_used(uint32_t round, uint32_t stage) const;

 private:
  struct Made {
    std::unique_ptr<Compressor> comp;
    std::unique_ptr<CompressedCollective> lowering;
  };
  Result<Made> make_stage(const std::string& scheme, const nlohmann::json& params, uint32_t stage) const;
  uint32_t algorithm1(uint32_t round, std::vector<StageDecision>& decisions);
  std::pair<std::string, nlohmann::json> choose(uint32_t round, uint32_t stage, const StageObservations& seen,
                                               std::vector<StageDecision>& decisions);

  Config config_;
  bool low_rank_ = false;
  bool entropy_ = false;  // scheme edgc: Algorithm 1 drives the first stage's rank
  uint32_t base_rank_ = 4;
  EdgcStageController controller_{16, 256, EdgcAnchor::kFirstStage};
  std::map<uint32_t, Made> planned_;                           // per stage
  std::map<std::pair<uint32_t, uint32_t>, Made> per_round_;    // per (round, stage)
  std::unique_ptr<Compressor> alg1_owner_;
  EdgcCompressor* alg1_ = nullptr;
  std::shared_ptr<RoundEntropies> entropies_;
  std::map<uint32_t, uint32_t> alg1_rank_;  // round -> Algorithm 1's rank
};

}  // namespace ccsim::algo
