#include "algorithms/lowrank/edgc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "kernels/stats/entropy.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

CompressorInfo EdgcCompressor::info() {
  const EdgcOptions d;
  ParamTable params;
  params.add_int("max_rank", "cap on r_max (DAC's bound decides when it is lower)", d.max_rank, 1, 256)
      .add_number("min_rank_divisor", "r_min = ceil(r_max / divisor)", d.min_rank_divisor, 4, 6)
      .add_int("step_limit", "s: largest rank change per window (Algorithm 1)", d.step_limit, 1, 256)
      .add_int("window", "w: rounds per window; the rank changes only at a window's end",
               static_cast<int64_t>(d.window_rounds), 1, 1000000000)
      .add_number("alpha", "iteration sampling rate: entropy sampled every round(1/alpha) rounds of a window", d.alpha,
                  1e-4, 1)
      .add_number("beta", "gradient sampling rate: fraction of entries in the entropy estimate", d.beta, 1e-4, 1)
      .add_int("entropy_bins", "histogram bins of the entropy estimate", d.entropy_bins, 2, 65536)
      .add_number("bandwidth_gbps", "B in DAC's bound T_compress + D_compressed/B + T_decompress <= D_original/B",
                  d.bandwidth_gbps, 1e-3, 1e6)
      .add_number("compute_tflops", "effective rate of the compression products in DAC's bound", d.compute_tflops, 1e-6,
                  1e6)
      .add_bool("warmup", "start uncompressed until the entropy-driven rank falls below r_max", d.warmup)
      .add_int("total_rounds", "training length in rounds (the warm-up floor is a fraction of it)",
               static_cast<int64_t>(d.total_rounds), 1, int64_t{1} << 40)
      .add_number("warmup_fraction", "warm-up floor as a fraction of total_rounds", d.warmup_fraction, 0, 1)
      .add_bool("error_feedback", "add what the previous round's approximation lost to the next gradient",
                d.error_feedback)
      .add_bool("warm_start", "start each power iteration from the previous round's reduced Q", d.warm_start);
  return {"edgc",
          "EDGC entropy-driven low-rank compression: PowerSGD engine whose rank follows the gradient entropy "
          "(Marchenko-Pastur error model, DAC rank bounds, warm-up, per-window step limit)",
          std::move(params), [](const Params& p) {
            EdgcOptions o;
            o.max_rank = static_cast<uint32_t>(p.get_int("max_rank"));
            o.min_rank_divisor = p.get_number("min_rank_divisor");
            o.step_limit = static_cast<uint32_t>(p.get_int("step_limit"));
            o.window_rounds = static_cast<uint64_t>(p.get_int("window"));
            o.alpha = p.get_number("alpha");
            o.beta = p.get_number("beta");
            o.entropy_bins = static_cast<uint32_t>(p.get_int("entropy_bins"));
            o.bandwidth_gbps = p.get_number("bandwidth_gbps");
            o.compute_tflops = p.get_number("compute_tflops");
            o.warmup = p.get_bool("warmup");
            o.total_rounds = static_cast<uint64_t>(p.get_int("total_rounds"));
            o.warmup_fraction = p.get_number("warmup_fraction");
            o.error_feedback = p.get_bool("error_feedback");
            o.warm_start = p.get_bool("warm_start");
            return std::make_unique<EdgcCompressor>(o);
          }};
}

EdgcCompressor::EdgcCompressor(const EdgcOptions& options)
    : LowRankCompressor(0, options.error_feedback, options.warm_start), options_(options) {
  on_layout();
}

void EdgcCompressor::on_layout() {
  const std::vector<LayerShape>& layers = layout();
  has_matrices_ =
      std::any_of(layers.begin(), layers.end(), [](const LayerShape& l) { return l.rows > 1 && l.cols > 1; });
  EdgcControllerConfig c;
  c.max_rank = edgc_max_rank(layers, options_.bandwidth_gbps * 1e9 / 8, options_.compute_tflops * 1e12,
                             options_.error_feedback, options_.max_rank);
  c.min_rank = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(c.max_rank / options_.min_rank_divisor)));
  c.step_limit = options_.step_limit;
  c.window_rounds = options_.window_rounds;
  c.sample_interval = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(1 / options_.alpha)));
  c.warmup = options_.warmup;
  c.min_warmup_rounds =
      static_cast<uint64_t>(std::ceil(options_.warmup_fraction * static_cast<double>(options_.total_rounds)));
  controller_ = std::make_unique<EdgcRankController>(c, edgc_error_by_rank(layers, c.max_rank));
  set_rank(controller_->rank());
}

std::optional<double> EdgcCompressor::layer_entropy(std::span<const float> values, const LayerShape& l,
                                                    const kern::RngKey& key, EntropyScratch& scratch) const {
  CCSIM_CHECK(values.size() == l.count, "layer of {} entries given {}", l.count, values.size());
  // kern::in_sample(key, l.offset + i, beta) over the layer, drawn, kept and ranged in one pass. The
  // buffer grows to the layer without keeping what it held, and only the kept entries touch it.
  UninitVector<float>& sample = scratch.sample;
  if (sample.size() < l.count) {
    sample.clear();
    sample.resize(l.count);
  }
  float lo = INFINITY, hi = -INFINITY;
  const uint64_t kept =
      kern::sample_finite(key, l.offset, values.data(), l.count, static_cast<float>(options_.beta), sample.data(), lo, hi);
  if (kept < 2) return std::nullopt;
  if (!(hi > lo)) return std::nullopt;
  const double width = (static_cast<double>(hi) - lo) / options_.entropy_bins;
  scratch.counts.resize(options_.entropy_bins);
  kern::histogram(sample.data(), kept, options_.entropy_bins, lo, hi, scratch.counts.data());
  return kern::entropy_bits(scratch.counts.data(), options_.entropy_bins) + std::log2(width);
}

std::optional<double> EdgcCompressor::entropy_estimate(std::span<const float> x, const kern::RngKey& key) const {
  double sum = 0;
  uint64_t layers_counted = 0;
  // Kept on the thread from round to round, so that the sample's pages stay mapped; a buffer for
  // layers past 2^24 entries is let go after the call.
  thread_local EntropyScratch scratch;
  for (const LayerShape& l : layers_for(x.size())) {
    if (l.rows <= 1 || l.cols <= 1) continue;
    if (auto h = layer_entropy(x.subspan(l.offset, l.count), l, key, scratch)) sum += *h, ++layers_counted;
  }
  if (scratch.sample.capacity() > (uint64_t{1} << 24)) scratch.sample = UninitVector<float>();
  if (layers_counted == 0) return std::nullopt;
  return sum / static_cast<double>(layers_counted);
}

uint64_t EdgcCompressor::extra_plan_entries() const { return has_matrices_ && controller_->samples_round() ? 2 : 0; }

uint64_t EdgcCompressor::extra_plan_local_bytes(uint64_t elements) const {
  if (extra_plan_entries() == 0) return 0;
  uint64_t matrix_entries = 0;
  for (const LayerShape& l : layers_for(elements))
    if (l.rows > 1 && l.cols > 1) matrix_entries += l.count;  // the layers entropy_estimate() samples
  return 8 * matrix_entries;
}

void EdgcCompressor::extra_plan_local(std::span<const float> x, uint32_t, const kern::RngKey& key,
                                      std::span<double> out) const {
  const std::optional<double> h = entropy_estimate(x, key);
  // fp32 on the wire, like every sum entry.
  out[0] = h ? static_cast<double>(static_cast<float>(*h)) : 0.0;
  out[1] = h ? 1.0 : 0.0;
}

void EdgcCompressor::extra_plan_commit(std::span<const double> combined, uint32_t) {
  if (combined[1] > 0) controller_->add_entropy(combined[0] / combined[1]);
}

std::vector<PlanDecision> EdgcCompressor::plan_decisions() const {
  const EdgcRankController& c = *controller_;
  std::string detail = fmt::format("warming_up={} r_min={} r_max={} rounds={}", c.warming_up() ? 1 : 0,
                                   c.config().min_rank, c.config().max_rank, c.round());
  if (c.last_window_entropy()) detail += fmt::format(" H_w={}", *c.last_window_entropy());
  if (c.anchor_entropy()) detail += fmt::format(" H0={}", *c.anchor_entropy());
  if (c.last_target_rank()) detail += fmt::format(" r_target={}", *c.last_target_rank());
  return {{"rank", static_cast<double>(rank()), std::move(detail)}};
}

void EdgcCompressor::observe_round(std::optional<double> entropy_bits) {
  if (has_matrices_ && controller_->samples_round() && entropy_bits) controller_->add_entropy(*entropy_bits);
  on_round_end();
}

void EdgcCompressor::on_round_end() {
  controller_->end_round();
  set_rank(controller_->rank());
}

}  // namespace ccsim::algo
