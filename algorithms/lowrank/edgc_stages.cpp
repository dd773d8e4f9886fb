#include "algorithms/lowrank/edgc_stages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

uint32_t EdgcStageController::clamp(double r) const {
  return static_cast<uint32_t>(std::clamp(std::lround(r), static_cast<long>(r_min_), static_cast<long>(r_max_)));
}

std::optional<uint32_t> EdgcStageController::used(uint32_t round, uint32_t stage) const {
  const auto it = used_.find({round, stage});
  if (it == used_.end()) return std::nullopt;
  return it->second;
}

uint32_t EdgcStageController::decide(uint32_t base, uint32_t round, uint32_t stage, uint32_t stages,
                                     const StageObservations& seen, std::string& detail) {
  const std::optional<uint32_t> prev = round == 0 ? std::nullopt : used(round - 1, 0);
  if (round == 0 || !seen.first_stage_sync_s || !prev || *prev == 0) {
    detail = "no observation yet: every stage at the base rank";
    return clamp(base);
  }
  const double t_com = *seen.first_stage_sync_s;
  const double eta = t_com / *prev;
  double mb = 0;
  for (uint32_t s = 0; s < stages; ++s) mb += seen.micro_backward_s[s];
  mb /= stages;
  // Algorithm 2: stage s may take s·T̄_microBack more sync time than the first stage.
  const double step = mb / eta;
  double r1 = base;
  if (anchor_ == EdgcAnchor::kMean) {
    // The largest r1 whose clamped stage ranks average at most the scheme's rank (bisection: the
    // mean is non-decreasing in r1).
    auto mean_rank = [&](double x) {
      double sum = 0;
      for (uint32_t i = 0; i < stages; ++i) sum += clamp(x + i * step);
      return sum / stages;
    };
    double lo = static_cast<double>(r_min_) - (stages - 1) * step, hi = r_max_;
    for (int it = 0; it < 100; ++it) {
      const double mid = 0.5 * (lo + hi);
      (mean_rank(mid) <= base ? lo : hi) = mid;
    }
    r1 = lo;
  }
  detail = fmt::format("eta={} t_com_stage0={} r_stage0_prev={} t_micro_back={} r1={}", eta, t_com, *prev, mb, r1);
  return clamp(r1 + stage * step);
}

namespace {

bool is_matrix(const LayerShape& l) { return l.rows > 1 && l.cols > 1; }

// A rank's piece of the draw holding any matrix layer: + 1, as a piece starts at an even entry.
uint64_t layer_piece(const BucketShape& stage) {
  const uint64_t most = RoundEntropies::largest_matrix_layer(stage);
  return most == 0 ? 0 : most + 1;
}
}  // namespace

uint64_t RoundEntropies::largest_matrix_layer(const BucketShape& stage) {
  uint64_t most = 0;
  for (const LayerShape& l : stage.layout)
    if (is_matrix(l)) most = std::max(most, l.count);
  return most;
}

uint32_t RoundEntropies::ranks_at_once(const BucketShape& stage, uint32_t dp, double budget) {
  const double layer = SyntheticGradients::bytes(layer_piece(stage), 1, 1.0);
  if (layer <= 0) return std::max<uint32_t>(dp, 1);
  return static_cast<uint32_t>(std::clamp<double>(std::floor(budget / layer), 1, std::max<uint32_t>(dp, 1)));
}

double RoundEntropies::bytes(const BucketShape& stage, uint32_t dp, double budget) {
  return SyntheticGradients::bytes(layer_piece(stage), ranks_at_once(stage, dp, budget), 1.0);
}

std::optional<double> RoundEntropies::mean(const EdgcCompressor& alg1, uint32_t round) {
  auto& known = known_[{alg1.options().beta, alg1.options().entropy_bins}];
  if (auto it = known.find(round); it != known.end()) return it->second;
  // This round and every later one of the run that alg1 samples and no computation has covered.
  std::vector<uint32_t> todo{round};
  for (uint32_t r = round + 1; r < rounds_; ++r)
    if (alg1.controller().samples(r) && !known.contains(r)) todo.push_back(r);
  const std::vector<std::optional<double>> means = compute(alg1, todo);
  for (size_t i = 0; i < todo.size(); ++i) known.emplace(todo[i], means[i]);
  return means.front();
}

std::vector<std::optional<double>> RoundEntropies::compute(const EdgcCompressor& alg1,
                                                           std::span<const uint32_t> rounds) const {
  std::vector<LayerShape> layers;
  for (const LayerShape& l : alg1.layers_for(stage_.elements))
    if (is_matrix(l)) layers.push_back(l);
  const size_t nr = rounds.size();
  // Per (rank, round): the sum of the layers' terms and the layers that had one.
  std::vector<double> sums(dp_ * nr, 0.0);
  std::vector<uint64_t> counted(dp_ * nr, 0);
  const uint64_t most = layer_piece(stage_);
  const uint32_t group = ranks_at_once(stage_, dp_, budget_);
  UninitVector<float> drawn(group * most);
  const uint64_t slots = std::min<uint64_t>(kern::worker_threads(), uint64_t{group} * nr);
  std::vector<EdgcCompressor::EntropyScratch> scratch(slots);
  for (uint32_t k0 = 0; k0 < dp_; k0 += group) {
    const uint32_t g = std::min(group, dp_ - k0);
    for (const LayerShape& l : layers) {
      const uint64_t first = l.offset & ~uint64_t{1};
      std::vector<std::span<float>> views;
      for (uint32_t w = 0; w < g; ++w) views.emplace_back(drawn.data() + w * most, l.offset + l.count - first);
      synthetic_.draw_piece(stage_.elements, kSalt, first, views, k0);
      // Slot s takes jobs s, s + slots, ...; a job is one rank and round, its terms its own.
      const uint64_t jobs = uint64_t{g} * nr;
      kern::parallel_for(slots, 1, [&](uint64_t s0, uint64_t s1) {
        for (uint64_t s = s0; s < s1; ++s)
          for (uint64_t j = s; j < jobs; j += slots) {
            const auto w = static_cast<uint32_t>(j / nr);
            const size_t at = (k0 + w) * nr + j % nr;
            const kern::RngKey key{synthetic_.seed(), rounds[j % nr], k0 + w, kPlanStream};
            if (auto h = alg1.layer_entropy(views[w].subspan(l.offset - first), l, key, scratch[s]))
              sums[at] += *h, ++counted[at];
          }
      });
    }
  }
  std::vector<std::optional<double>> means(nr);
  for (size_t r = 0; r < nr; ++r) {
    double sum = 0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < dp_; ++k)
      if (counted[k * nr + r] > 0) sum += sums[k * nr + r] / static_cast<double>(counted[k * nr + r]), ++n;
    if (n > 0) means[r] = sum / n;
  }
  return means;
}

Result<StageCodecs::Made> StageCodecs::make_stage(const std::string& scheme, const nlohmann::json& params,
                                                  uint32_t stage) const {
  Made m;
  CCSIM_ASSIGN_OR_RETURN(m.comp, CompressorRegistry::global().create(scheme, params));
  m.comp->set_layout(config_.stages[stage].layout);
  m.lowering = std::make_unique<CompressedCollective>(*m.comp, *config_.collective, config_.dp, config_.stages[stage].elements,
                                                      config_.base);
  return m;
}

Result<StageCodecs> StageCodecs::make(Config config, SyntheticGradients synthetic,
                                      std::shared_ptr<RoundEntropies> entropies) {
  StageCodecs out;
  out.config_ = std::move(config);
  const Config& c = out.config_;
  CCSIM_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> probe, CompressorRegistry::global().create(c.scheme, c.params));
  out.low_rank_ = dynamic_cast<const LowRankCompressor*>(probe.get()) != nullptr;
  out.entropy_ = c.scheme == "edgc";
  out.base_rank_ = static_cast<uint32_t>(c.params.value("rank", 4));
  out.controller_ = EdgcStageController(c.r_min, c.r_max, c.anchor);
  if (out.entropy_) {
    out.alg1_ = dynamic_cast<EdgcCompressor*>(probe.get());
    CCSIM_CHECK(out.alg1_ != nullptr, "edgc is an EdgcCompressor");
    out.alg1_owner_ = std::move(probe);
    out.alg1_->set_layout(c.stages[0].layout);
    out.entropies_ = entropies ? std::move(entropies)
                               : std::make_shared<RoundEntropies>(synthetic, c.stages[0], c.dp, c.rounds);
    return out;
  }
  for (uint32_t st = 0; st < c.stages.size(); ++st) {
    if (out.low_rank_ || c.stages[st].elements == 0 || c.dp <= 1 || probe->plan_format(c.stages[st].elements, c.dp).empty()) continue;
    Made m;
    CCSIM_ASSIGN_OR_RETURN(m.comp, CompressorRegistry::global().create(c.scheme, c.params));
    m.comp->set_layout(std::vector<LayerShape>{{0, c.stages[st].elements, c.stages[st].elements, 1}});
    m.lowering = std::make_unique<CompressedCollective>(*m.comp, *c.collective, c.dp, c.stages[st].elements, c.base);
    const RankTensors grads = synthetic.draw(c.stages[st].elements, c.dp, st);
    const std::vector<std::span<const float>> ins(grads.begin(), grads.end());
    CCSIM_RETURN_IF_ERROR(m.lowering->plan(ins, NumericsOptions{synthetic.seed(), 0, false}).status());
    out.planned_.emplace(st, std::move(m));
  }
  return out;
}

uint32_t StageCodecs::algorithm1(uint32_t round, std::vector<StageDecision>& decisions) {
  if (auto it = alg1_rank_.find(round); it != alg1_rank_.end()) return it->second;
  CCSIM_CHECK(alg1_rank_.size() == round, "rounds in order");
  const uint32_t r = alg1_->rank();
  std::string state = alg1_->plan_decisions().front().detail;
  std::optional<double> h;
  if (alg1_->controller().samples_round()) {
    h = entropies_->mean(*alg1_, round);
    if (h) state += fmt::format(" H_round={}", *h);
  }
  alg1_->observe_round(h);
  decisions.push_back({round, 0, "alg1_rank", static_cast<double>(r), state});
  return alg1_rank_[round] = r;
}

std::pair<std::string, nlohmann::json> StageCodecs::choose(uint32_t round, uint32_t stage,
                                                          const StageObservations& seen,
                                                          std::vector<StageDecision>& decisions) {
  const Config& c = config_;
  if (!c.edgc_controller && !entropy_) return {c.scheme, c.params};
  const uint32_t stages = static_cast<uint32_t>(c.stages.size());
  std::string why;
  uint32_t r = 0;
  std::pair<std::string, nlohmann::json> out{c.scheme, c.params};
  if (entropy_) {
    // Algorithm 1's rank for this round; 0 while warming up (every stage uncompressed).
    base_rank_ = algorithm1(round, decisions);
    if (base_rank_ == 0) {
      why = "Algorithm 1 warming up: uncompressed";
    } else if (c.edgc_controller) {
      r = controller_.decide(base_rank_, round, stage, stages, seen, why);
    } else {
      r = base_rank_;
      why = "Algorithm 1's rank";
    }
    // EDGC's engine is PowerSGD's: the stages run it at the decided rank (fp32 when warming up).
    nlohmann::json engine = nlohmann::json::object();
    for (const char* key : {"error_feedback", "warm_start"})
      if (c.params.contains(key)) engine[key] = c.params[key];
    if (r > 0) engine["rank"] = r;
    out = r > 0 ? std::pair{std::string("powersgd"), engine} : std::pair{std::string("fp32"), nlohmann::json::object()};
  } else {
    r = controller_.decide(base_rank_, round, stage, stages, seen, why);
    out.second["rank"] = r;
  }
  controller_.record(round, stage, r);
  decisions.push_back({round, stage, "rank", static_cast<double>(r), fmt::format("stage={} {}", stage, why)});
  return out;
}

Result<const CompressedCollective*> StageCodecs::stage(uint32_t round, uint32_t stage, const StageObservations& seen,
                                                       std::vector<StageDecision>& decisions) {
  if (auto it = planned_.find(stage); it != planned_.end()) return it->second.lowering.get();
  if (auto it = per_round_.find({round, stage}); it != per_round_.end()) return it->second.lowering.get();
  const auto [scheme, params] = choose(round, stage, seen, decisions);
  CCSIM_ASSIGN_OR_RETURN(Made made, make_stage(scheme, params, stage));
  CCSIM_RETURN_IF_ERROR(made.lowering->fix());
  return per_round_.emplace(std::pair{round, stage}, std::move(made)).first->second.lowering.get();
}

int64_t StageCodecs::rank_used(uint32_t round, uint32_t stage) const {
  if (!low_rank_) return -1;
  if (const auto r = controller_.used(round, stage)) return *r;
  return config_.params.value("rank", 4);
}

}  // namespace ccsim::algo
