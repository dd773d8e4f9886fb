#include "algorithms/bucket_codecs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

RankTensors SyntheticGradients::draw(uint64_t elements, uint32_t ranks, uint32_t salt) const {
  RankTensors grads;
  draw_into(elements, ranks, salt, grads);
  return grads;
}

traces::SyntheticGradientSpec SyntheticGradients::spec_for(uint64_t elements) const {
  traces::SyntheticGradientSpec spec = shape_;
  spec.elements = elements;
  spec.layers = static_cast<uint32_t>(std::min<uint64_t>(shape_.layers, std::max<uint64_t>(1, elements / 1024)));
  return spec;
}

void SyntheticGradients::draw_into(uint64_t elements, uint32_t ranks, uint32_t salt,
                                   RankTensors& grads) const {
  grads.resize(ranks);
  for (auto& g : grads) g.resize(elements);  // unset: the generator's parallel writes map the memory
  std::vector<std::span<float>> views(grads.begin(), grads.end());
  traces::generate_synthetic_gradients(spec_for(elements), seed_ + salt, views);
}

void SyntheticGradients::draw_piece(uint64_t elements, uint32_t salt, uint64_t offset,
                                    std::span<const std::span<float>> views, uint32_t first_rank) const {
  traces::generate_synthetic_range(spec_for(elements), seed_ + salt, offset, views, first_rank);
}

double synthetic_copies(bool replans) { return replans ? 3.0 : 1.0; }

Status BucketCodecs::plan(Codec& codec, uint32_t salt, uint32_t round, bool run) {
  RankTensors grads = synthetic_.draw(codec.lowering->elements(), config_.ranks, salt);
  return plan_on(codec, grads, round, run);
}

Status BucketCodecs::plan_on(Codec& codec, RankTensors& grads, uint32_t round, bool run,
                             PlanStatsCache* cache) {
  CompressedCollective& lowering = *codec.lowering;
  const NumericsOptions keyed{synthetic_.seed(), round, false};
  {
    std::vector<std::span<const float>> ins(grads.begin(), grads.end());
    CCSIM_RETURN_IF_ERROR(lowering.plan(ins, keyed, run ? nullptr : cache).status());
  }
  codec.decisions = codec.comp->plan_decisions();
  if (!run) return ok_status();
  std::vector<std::span<float>> views(grads.begin(), grads.end());
  return lowering.run(views, keyed).status();
}

Result<BucketCodecs> BucketCodecs::make(Config config, std::vector<BucketShape> buckets, SyntheticGradients synthetic) {
  std::vector<Config> configs;
  configs.push_back(std::move(config));
  std::vector<std::vector<BucketShape>> shapes;
  shapes.push_back(std::move(buckets));
  CCSIM_ASSIGN_OR_RETURN(std::vector<BucketCodecs> made, make_all(std::move(configs), std::move(shapes), synthetic));
  return std::move(made.front());
}

Result<std::vector<BucketCodecs>> BucketCodecs::make_all(std::vector<Config> configs,
                                                         std::vector<std::vector<BucketShape>> buckets,
                                                         SyntheticGradients synthetic) {
  CCSIM_CHECK(configs.size() == buckets.size(), "{} configs for {} bucket lists", configs.size(), buckets.size());
  std::vector<BucketCodecs> out;
  std::vector<SharedPlan> shared;
  for (size_t k = 0; k < configs.size(); ++k) {
    CCSIM_ASSIGN_OR_RETURN(BucketCodecs made,
                           prepare(std::move(configs[k]), std::move(buckets[k]), synthetic, k, shared));
    out.push_back(std::move(made));
  }
  // One draw per (size, ranks, salt), the largest first so that each later draw reuses its memory;
  // the plans on one draw in the order make() would run them, sharing the statistics of schemes
  // whose plan_local() is the same (DynamiQ at several budgets).
  auto key = [&](const SharedPlan& p) {
    const BucketCodecs& owner = out[p.set];
    return std::tuple(owner.codecs_[p.codec].lowering->elements(), owner.config_.ranks, p.salt);
  };
  std::stable_sort(shared.begin(), shared.end(), [&](const SharedPlan& a, const SharedPlan& b) {
    const auto ka = key(a), kb = key(b);
    return std::get<0>(ka) != std::get<0>(kb) ? std::get<0>(ka) > std::get<0>(kb) : ka < kb;
  });
  RankTensors grads;
  for (size_t i = 0; i < shared.size();) {
    size_t end = i;
    while (end < shared.size() && key(shared[end]) == key(shared[i])) ++end;
    CCSIM_RETURN_IF_ERROR(plan_shared_draw(out, std::span(shared).subspan(i, end - i), synthetic, grads));
    i = end;
  }
  return out;
}

Status BucketCodecs::plan_shared_draw(std::vector<BucketCodecs>& sets, std::span<const SharedPlan> plans,
                                      const SyntheticGradients& synthetic, RankTensors& grads) {
  const BucketCodecs& first = sets[plans.front().set];
  const uint64_t elements = first.codecs_[plans.front().codec].lowering->elements();
  const uint32_t ranks = first.config_.ranks, salt = plans.front().salt;
  const NumericsOptions keyed{synthetic.seed(), 0, false};
  std::vector<std::unique_ptr<PlanAccumulator>> pieced(plans.size());
  if (synthetic.piece_elements() > 0 && synthetic.piece_elements() < elements) {
    std::vector<Compressor*> comps;
    for (const SharedPlan& p : plans) comps.push_back(sets[p.set].codecs_[p.codec].comp.get());
    const PieceSource source = [&](uint64_t offset, std::span<const std::span<float>> views) {
      synthetic.draw_piece(elements, salt, offset, views);
    };
    pieced = plan_in_pieces(comps, elements, ranks, keyed, source, 2, synthetic.piece_elements());
  }
  PlanStatsCache cache;  // of this draw only
  bool drawn = false;
  for (size_t k = 0; k < plans.size(); ++k) {
    BucketCodecs& owner = sets[plans[k].set];
    Codec& codec = owner.codecs_[plans[k].codec];
    if (pieced[k]) {
      CCSIM_RETURN_IF_ERROR(codec.lowering->commit_plan(*pieced[k]).status());
      codec.decisions = codec.comp->plan_decisions();
      continue;
    }
    if (!drawn) synthetic.draw_into(elements, ranks, salt, grads);
    drawn = true;
    CCSIM_RETURN_IF_ERROR(owner.plan_on(codec, grads, 0, false, &cache));
  }
  return ok_status();
}

Result<BucketCodecs> BucketCodecs::prepare(Config config, std::vector<BucketShape> buckets,
                                           SyntheticGradients synthetic, size_t set,
                                           std::vector<SharedPlan>& shared) {
  CCSIM_CHECK(!buckets.empty() && config.collective != nullptr, "bucket codecs without buckets or a collective");
  BucketCodecs out;
  out.config_ = std::move(config);
  out.buckets_ = std::move(buckets);
  out.synthetic_ = synthetic;
  const Config& c = out.config_;
  const auto& registry = CompressorRegistry::global();
  std::map<uint64_t, size_t> by_size;
  bool share = true;
  for (size_t b = 0; b < out.buckets_.size(); ++b) {
    const BucketShape& shape = out.buckets_[b];
    if (share && by_size.count(shape.elements)) {
      out.codec_of_.push_back(by_size.at(shape.elements));
      continue;
    }
    Codec codec;
    CCSIM_ASSIGN_OR_RETURN(codec.comp, registry.create(c.scheme, c.params));
    codec.comp->set_layout(shape.layout);
    if (b == 0) {
      out.planned_ = !codec.comp->plan_format(shape.elements, c.ranks).empty();
      const bool matrices = dynamic_cast<const LowRankCompressor*>(codec.comp.get()) != nullptr;
      share = !(out.replanned() || matrices);
    }
    codec.lowering =
        std::make_unique<CompressedCollective>(*codec.comp, *c.collective, c.ranks, shape.elements, c.base);
    if (codec.lowering->plan_bytes() > 0 && out.replanned()) {
      CCSIM_RETURN_IF_ERROR(out.plan(codec, static_cast<uint32_t>(b), 0, true));
    } else if (codec.lowering->plan_bytes() > 0) {
      shared.push_back({set, out.codecs_.size(), static_cast<uint32_t>(b)});
    } else {
      CCSIM_RETURN_IF_ERROR(codec.lowering->fix());
    }
    out.codec_of_.push_back(out.codecs_.size());
    by_size.emplace(shape.elements, out.codecs_.size());
    out.codecs_.push_back(std::move(codec));
  }
  return out;
}

Result<const CompressedCollective*> BucketCodecs::round(uint32_t round, uint32_t bucket,
                                                        std::vector<PlanDecision>& decisions) {
  Codec& codec = codecs_[codec_of_.at(bucket)];
  const bool replan_now = replanned() && round > 0 && round % config_.replan_every == 0;
  if (replan_now) CCSIM_RETURN_IF_ERROR(plan(codec, bucket + 0x10000u * round, round, true));
  decisions.clear();
  if (codec.lowering->plan_bytes() > 0 && (round == 0 || replan_now)) decisions = codec.decisions;
  return codec.lowering.get();
}

RoundBytes BucketCodecs::model_bytes() const {
  RoundBytes bytes;
  for (size_t b = 0; b < buckets_.size(); ++b) bytes += codecs_[codec_of_[b]].lowering->round_bytes();
  return bytes;
}

std::vector<BucketShape> bucket_shapes(const Compressor* comp, std::span<const traces::GradientBucket> buckets,
                                       std::span<const uint64_t> layer_params, uint64_t rows) {
  const bool matrices = dynamic_cast<const LowRankCompressor*>(comp) != nullptr;
  std::vector<BucketShape> out;
  for (const traces::GradientBucket& b : buckets) {
    if (!matrices) {
      out.push_back({b.params, {{0, b.params, b.params, 1}}});
      continue;
    }
    std::vector<uint64_t> params;
    for (uint32_t l : b.layers) params.push_back(layer_params[l]);
    out.push_back({b.params, layer_matrices(params, 1, rows, b.params)});
  }
  return out;
}

std::vector<BucketShape> stage_shapes(std::span<const uint64_t> layer_params, std::span<const uint32_t> starts,
                                      uint32_t tp, uint64_t rows) {
  std::vector<BucketShape> out;
  for (size_t st = 0; st < starts.size(); ++st) {
    const size_t end = st + 1 < starts.size() ? starts[st + 1] : layer_params.size();
    const std::span<const uint64_t> params = layer_params.subspan(starts[st], end - starts[st]);
    uint64_t total = 0;
    for (uint64_t p : params) total += p;
    const uint64_t share = (total + tp - 1) / tp;
    out.push_back({share, layer_matrices(params, tp, rows, share)});
  }
  return out;
}

}  // namespace ccsim::algo
