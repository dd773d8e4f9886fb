#include "algorithms/lowrank/edgc_controller.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/lowrank/marchenko_pastur.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

EdgcRankController::EdgcRankController(const EdgcControllerConfig& config, std::vector<double> error_by_rank)
    : config_(config),
      error_by_rank_(std::move(error_by_rank)),
      rank_(config.warmup ? 0 : config.max_rank),
      warming_up_(config.warmup) {
  CCSIM_CHECK(config_.min_rank >= 1 && config_.min_rank <= config_.max_rank, "rank bounds [{}, {}]", config_.min_rank,
              config_.max_rank);
  CCSIM_CHECK(config_.window_rounds >= 1 && config_.sample_interval >= 1 && config_.step_limit >= 1);
  CCSIM_CHECK(error_by_rank_.size() == config_.max_rank + 2u, "{} error entries for ranks 0..{}", error_by_rank_.size(),
              config_.max_rank + 1);
}

uint32_t EdgcRankController::inverse_error(double y) const {
  // g is non-increasing: binary search for the first r in [1, max_rank] with g(r) <= y. The
  // relative slack keeps g^-1(g(r)) == r against rounding of y.
  const double bound = y * (1 + 1e-12);
  uint32_t lo = 1, hi = config_.max_rank + 1;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (error_by_rank_[mid] <= bound) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

uint32_t EdgcRankController::target_rank(double entropy_bits) const {
  if (!anchor_) return config_.max_rank;
  return inverse_error(std::exp2(*anchor_ - entropy_bits) * error_by_rank_[config_.max_rank]);
}

uint32_t EdgcRankController::step(uint32_t prev, uint32_t target) const {
  const int64_t p = prev, t = target, s = config_.step_limit;
  int64_t next = t;
  if (std::llabs(t - p) > s) next = t > p ? p + s : p - s;
  return static_cast<uint32_t>(std::clamp<int64_t>(next, config_.min_rank, config_.max_rank));
}

void EdgcRankController::end_round() {
  ++round_;
  if (round_ % config_.window_rounds != 0) return;
  if (samples_.empty()) return;
  const double h = std::accumulate(samples_.begin(), samples_.end(), 0.0) / static_cast<double>(samples_.size());
  samples_.clear();
  if (!anchor_) anchor_ = h;
  const uint32_t target = target_rank(h);
  last_entropy_ = h;
  last_target_ = target;
  if (warming_up_) {
    if (target < config_.max_rank && round_ >= config_.min_warmup_rounds) {
      warming_up_ = false;
      rank_ = step(config_.max_rank, target);
    }
    return;
  }
  rank_ = step(rank_, target);
}

std::vector<double> edgc_error_by_rank(std::span<const LayerShape> layers, uint32_t max_rank) {
  // Layers of one shape share g: evaluate each shape once.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> shapes;
  for (const LayerShape& l : layers)
    if (l.rows > 1 && l.cols > 1) ++shapes[{l.rows, l.cols}];
  std::vector<double> out(max_rank + 2u, 0.0);
  for (uint32_t r = 0; r <= max_rank + 1; ++r) {
    double sq = 0;
    for (const auto& [shape, count] : shapes) {
      // Rank 0 loses everything (g(0) = sqrt(rows cols)), though the engine then sends the layer as is.
      if (r > 0 &&
          !LowRankCompressor::compressed_at(LayerShape{0, shape.first * shape.second, shape.first, shape.second}, r))
        continue;
      const double g = mp_truncation_error(r, shape.first, shape.second);
      sq += static_cast<double>(count) * g * g;
    }
    out[r] = std::sqrt(sq);
  }
  return out;
}

uint32_t edgc_max_rank(std::span<const LayerShape> layers, double bandwidth_bytes_per_s, double flops_per_s,
                       bool error_feedback, uint32_t cap) {
  CCSIM_CHECK(bandwidth_bytes_per_s > 0 && flops_per_s > 0 && cap >= 1);
  uint32_t best = 0;
  for (uint32_t r = 1; r <= cap; ++r) {
    double cost_s = 0, original_s = 0;
    bool any = false;
    for (const LayerShape& l : layers) {
      if (!LowRankCompressor::compressed_at(l, r)) continue;
      any = true;
      const double m = static_cast<double>(l.rows), n = static_cast<double>(l.cols), rr = r;
      const double flops = (error_feedback ? 8 : 6) * m * n * rr + 2 * m * rr * rr;
      cost_s += flops / flops_per_s + 4 * rr * (m + n) / bandwidth_bytes_per_s;
      original_s += 4 * m * n / bandwidth_bytes_per_s;
    }
    if (!any || cost_s > original_s) break;
    best = r;
  }
  return std::max<uint32_t>(best, 1);
}

}  // namespace ccsim::algo
