#pragma once
/// \file
/// The compressors a data-parallel training run keeps for its gradient buckets, and when they
/// plan (the codec cache and re-plan policy of DP and sharded DP rounds; sim/training/ times the
/// rounds, this file decides what each bucket's round is).
///
/// A timing run has no real gradients, so a scheme with a metadata phase plans on synthetic
/// per-rank gradients of the bucket's size (SyntheticGradients; the scenario's generator settings,
/// its seed plus a salt). Policy:
///  * one codec per bucket when the scheme re-plans (replan_every > 0) or factors each bucket's own
///    layer shapes (low-rank schemes), else one per distinct bucket size (its plan depends on the
///    size only), made when its first bucket is (salt: that bucket's index);
///  * a codec plans before round 0; with replan_every = k > 0 it plans again in every round
///    r > 0 with r % k == 0 (salt: bucket + 0x10000 · r), and each of its plans is followed by the
///    planned round run through the numerics on the same synthetic gradients, so controllers that
///    adapt from a whole round (MX's mu, EDGC's rank) move as in a numerics run;
///  * the controllers' decisions are reported at every round that planned;
///  * make_all() makes several schemes' codecs over one run's buckets, and a codec that plans only
///    before round 0 reads the same draw (size and salt) as every other such codec, drawn once: the
///    draw is a pure function of (seed, size, salt, ranks), so each plan sees what make() gives it.

#include <cstdint>
#include <memory>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/compressor.hpp"
#include "sim/base/status.hpp"
#include "sim/base/uninit_vector.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/ddp_buckets.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {

/// Per-rank synthetic gradients for the plans of a timing run.
class SyntheticGradients {
 public:
  SyntheticGradients() = default;
  /// `shape`: the generator's settings (its `elements` is set per draw); `seed`: the run's seed.
  SyntheticGradients(traces::SyntheticGradientSpec shape, uint64_t seed) : shape_(shape), seed_(seed) {}
  /// Bytes of `copies` times `ranks` ranks' `elements`-entry gradients (fp32).
  static double bytes(uint64_t elements, uint32_t ranks, double copies) {
    return copies * 4.0 * static_cast<double>(elements) * ranks;
  }
  /// The run's seed (the plans' random streams are keyed by it).
  uint64_t seed() const { return seed_; }
  /// Each rank's tensor of `elements` entries, seed + `salt`, with at most one layer per 1024 entries.
  RankTensors draw(uint64_t elements, uint32_t ranks, uint32_t salt) const;
  /// draw() into `grads`, resized to `ranks` tensors of `elements` (their memory reused: a draw no
  /// larger than the last one maps no new pages).
  void draw_into(uint64_t elements, uint32_t ranks, uint32_t salt, RankTensors& grads) const;
  /// Entries [offset, offset + views[r].size()) of draw(elements, ranks, salt)'s tensor
  /// first_rank + r into views[r] (the same whatever `ranks`). REQUIRES: offset even.
  void draw_piece(uint64_t elements, uint32_t salt, uint64_t offset, std::span<const std::span<float>> views,
                  uint32_t first_rank = 0) const;
  /// Entries per rank of a piece when plans that can are made from draws generated a piece at a
  /// time (algo::plan_in_pieces); 0: from whole draws.
  uint64_t piece_elements() const { return piece_elements_; }
  void set_piece_elements(uint64_t n) { piece_elements_ = n; }

 private:
  traces::SyntheticGradientSpec spec_for(uint64_t elements) const;

  traces::SyntheticGradientSpec shape_;
  uint64_t seed_ = 0;
  uint64_t piece_elements_ = uint64_t{1} << 20;
};

/// Copies of a bucket's synthetic gradients a codec's plans hold at once: 3 when each plan's round
/// also runs (inputs, buffers reduced in place, messages in flight), else 1.
double synthetic_copies(bool replans);

/// One bucket as the codecs see it: its entries per rank and its layer layout.
struct BucketShape {
  uint64_t elements = 0;
  std::vector<LayerShape> layout;
};

/// Every bucket's shape as `comp` sees it: a low-rank compressor factors each of the bucket's layers
/// (parameters `layer_params[l]`) as a matrix of `rows` rows (layer_matrices; 0: about square);
/// any other, or none (a weight all-gather), sees one flat tensor.
std::vector<BucketShape> bucket_shapes(const Compressor* comp, std::span<const traces::GradientBucket> buckets,
                                       std::span<const uint64_t> layer_params, uint64_t rows);
/// Each pipeline stage's gradient as one of its `tp` tensor-parallel ranks holds it: the stage's
/// parameters (layers [starts[s], starts[s + 1])) / tp, rounded up, its layers as matrices of
/// `rows` rows.
std::vector<BucketShape> stage_shapes(std::span<const uint64_t> layer_params, std::span<const uint32_t> starts,
                                      uint32_t tp, uint64_t rows);

/// The codecs of one scheme over a run's buckets.
class BucketCodecs {
 public:
  struct Config {
    std::string scheme;
    nlohmann::json params = nlohmann::json::object();
    const topo::CollectiveInfo* collective = nullptr;  ///< the bucket collective
    uint32_t ranks = 0;
    topo::CollectiveOptions base;  ///< segments, gpus_per_node
    uint32_t replan_every = 0;     ///< 0: plan once
  };

  /// Makes every codec and plans the planned ones (file comment). REQUIRES: the scheme and params
  /// are valid and CompressedCollective::check passes for every bucket; planned buckets fit in
  /// memory. An error is internal (a validation gap).
  static Result<BucketCodecs> make(Config config, std::vector<BucketShape> buckets, SyntheticGradients synthetic);
  /// make(configs[k], buckets[k], synthetic) for every k, each synthetic draw that several codecs
  /// plan from once (before round 0, no round run on it) made once (file comment). At most one draw
  /// is held at a time, as in make(). REQUIRES: configs.size() == buckets.size(); make()'s.
  static Result<std::vector<BucketCodecs>> make_all(std::vector<Config> configs,
                                                    std::vector<std::vector<BucketShape>> buckets,
                                                    SyntheticGradients synthetic);

  /// Bucket `bucket`'s round `round` (rounds in order per bucket): re-planned first when due.
  /// `decisions` receives the controllers' decisions when the round planned (else it is cleared).
  /// An error is internal (a validation gap).
  Result<const CompressedCollective*> round(uint32_t round, uint32_t bucket, std::vector<PlanDecision>& decisions);

  /// One rank's whole model in a round that plans: the sum over buckets of their codec's round
  /// bytes (payload and metadata encoded once, the metadata phase).
  RoundBytes model_bytes() const;
  /// Whether the scheme has a metadata phase (on the first bucket).
  bool planned() const { return planned_; }
  bool replanned() const { return planned_ && config_.replan_every > 0; }

 private:
  struct Codec {
    std::unique_ptr<Compressor> comp;
    std::unique_ptr<CompressedCollective> lowering;
    std::vector<PlanDecision> decisions;  // of its last plan
  };
  // A plan make_all() runs on a shared draw: codec `codec` of result `set`, its draw's salt.
  struct SharedPlan {
    size_t set = 0, codec = 0;
    uint32_t salt = 0;
  };
  // make() without the plans that can share a draw (those are appended to `shared`).
  static Result<BucketCodecs> prepare(Config config, std::vector<BucketShape> buckets, SyntheticGradients synthetic,
                                      size_t set, std::vector<SharedPlan>& shared);
  Status plan(Codec& codec, uint32_t salt, uint32_t round, bool run);
  // Plans `codec` on `grads` (every rank's draw), then runs the planned round on them when `run`.
  Status plan_on(Codec& codec, RankTensors& grads, uint32_t round, bool run,
                 PlanStatsCache* cache = nullptr);
  // make_all()'s plans `plans` on the one draw they share: those that can from the draw generated a
  // piece at a time, the others from the whole draw, made into `grads`.
  static Status plan_shared_draw(std::vector<BucketCodecs>& sets, std::span<const SharedPlan> plans,
                                 const SyntheticGradients& synthetic, RankTensors& grads);

  Config config_;
  std::vector<BucketShape> buckets_;
  SyntheticGradients synthetic_;
  std::vector<Codec> codecs_;
  std::vector<size_t> codec_of_;  // per bucket
  bool planned_ = false;
};

}  // namespace ccsim::algo
