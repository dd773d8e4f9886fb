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
///    gradients (synthetic, one draw kept for the whole run: stationary statistics) in the rounds
///    its gradient-descent sampling samples; while it warms up every stage runs uncompressed
///    (fp32). The stages run PowerSGD at the decided rank (EDGC's engine), with the scheme's
///    error_feedback and warm_start.
/// Every decision is reported with its inputs.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
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
  };

  /// Makes the per-stage plans (and Algorithm 1's gradients for scheme edgc). REQUIRES: a valid
  /// scheme and params, CompressedCollective::check passing for every stage share, and the synthetic
  /// gradients fitting in memory. An error is internal (a validation gap).
  static Result<StageCodecs> make(Config config, SyntheticGradients synthetic);

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
  SyntheticGradients synthetic_;
  bool low_rank_ = false;
  bool entropy_ = false;  // scheme edgc: Algorithm 1 drives the first stage's rank
  uint32_t base_rank_ = 4;
  EdgcStageController controller_{16, 256, EdgcAnchor::kFirstStage};
  std::map<uint32_t, Made> planned_;                           // per stage
  std::map<std::pair<uint32_t, uint32_t>, Made> per_round_;    // per (round, stage)
  std::unique_ptr<Compressor> alg1_owner_;
  EdgcCompressor* alg1_ = nullptr;
  RankTensors alg1_grads_;
  std::map<uint32_t, uint32_t> alg1_rank_;  // round -> Algorithm 1's rank
};

}  // namespace ccsim::algo
