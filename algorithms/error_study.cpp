#include "algorithms/error_study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/check.hpp"
#include "traces/ddp_buckets.hpp"

namespace ccsim::algo {
namespace {

double ratio(const ErrorStats& e) {
  if (e.sq_error == 0) return 0;
  return e.sq_norm > 0 ? e.sq_error / e.sq_norm : std::numeric_limits<double>::infinity();
}

void add(ErrorStats& into, const ErrorStats& e) {
  into.sq_error += e.sq_error;
  into.sq_norm += e.sq_norm;
}

// What one (seed, step) of a scheme measured, summed over its buckets.
struct StepRun {
  std::vector<ErrorStats> errs;               // per rank
  std::vector<std::vector<float>> outs;       // per rank: what it ended with
  std::vector<ErrorStats>* hops = nullptr;    // per hop depth: the step's sums over seeds and buckets
  uint64_t plan_bytes = 0, wire_bytes = 0, tensor_bytes = 0;
  bool unbiased = false;
};

// One bucket of one (seed, step): a fresh instance, warm-up rounds, then the measured round.
Status run_bucket(const StudyScheme& scheme, const ErrorStudy& st, size_t b, uint64_t seed,
                  std::span<const std::span<const float>> ins, StepRun& out) {
  const TensorBucket& bucket = st.buckets[b];
  CCSIM_ASSIGN_OR_RETURN(auto comp, CompressorRegistry::global().create(scheme.name, scheme.params));
  comp->set_layout(bucket.layout);
  std::vector<std::span<const float>> bins;
  for (const auto& in : ins) bins.push_back(in.subspan(bucket.offset, bucket.count));
  // Each bucket draws its own random numbers (bucket 0 those of the whole tensor).
  const uint64_t bucket_seed = seed ^ (b * 0x9E3779B97F4A7C15ull);
  CompressedCollective lowering(*comp, *st.collective, st.ranks, bucket.count, st.base);
  std::vector<std::vector<float>> bufs;
  Result<NumericsRound> round = internal_error("no round");
  PlanReport plan;
  for (uint32_t r = 0; r <= st.warmup; ++r) {
    const NumericsOptions options{bucket_seed, r, r == st.warmup};
    CCSIM_ASSIGN_OR_RETURN(plan, lowering.plan(bins, options));
    bufs.resize(st.ranks);
    for (uint32_t k = 0; k < st.ranks; ++k) bufs[k].assign(bins[k].begin(), bins[k].end());
    std::vector<std::span<float>> views(bufs.begin(), bufs.end());
    round = lowering.run(views, options);
    CCSIM_RETURN_IF_ERROR(round.status());
  }
  std::vector<std::span<const float>> bouts(bufs.begin(), bufs.end());
  const std::vector<ErrorStats> berrs = operation_errors(round->schedule, bins, bouts);
  for (uint32_t r = 0; r < st.ranks; ++r) add(out.errs[r], berrs[r]);
  out.plan_bytes += plan.wire_bytes_per_rank;
  out.wire_bytes += round->stats.wire_bytes;
  out.tensor_bytes += lowering.tensor_wire_bytes();
  out.unbiased = comp->unbiased();
  for (size_t h = 0; h < round->stats.hop_errors.size(); ++h) add((*out.hops)[h], round->stats.hop_errors[h]);
  const uint64_t elements = st.buckets.size() == 1 ? 0 : st.inputs.front().front().size();
  for (uint32_t r = 0; r < st.ranks; ++r) {
    if (st.buckets.size() == 1) {
      out.outs[r] = std::move(bufs[r]);
      continue;
    }
    out.outs[r].resize(elements);
    std::copy(bufs[r].begin(), bufs[r].end(), out.outs[r].begin() + static_cast<std::ptrdiff_t>(bucket.offset));
  }
  return ok_status();
}

// The per-step sums over seeds of one scheme.
struct Accumulated {
  std::vector<ErrorRow> rows;                           // per step
  std::vector<std::vector<double>> per_seed;            // per step: each seed's vNMSE
  std::vector<std::vector<double>> mean_out;            // per step: sum over seeds and ranks of the outputs
  std::vector<std::vector<ErrorStats>> layer_sum, hop_sum;
};

void accumulate(const StudyScheme& scheme, const ErrorStudy& st, size_t si, uint32_t k,
                std::span<const std::span<const float>> ins, const StepRun& run, Accumulated& acc) {
  const uint64_t elements = ins.front().size();
  ErrorRow& row = acc.rows[si];
  acc.per_seed[si].push_back(vnmse(run.errs));
  for (const auto& e : run.errs)
    row.mse += e.sq_error / static_cast<double>(elements) / (static_cast<double>(st.ranks) * st.seeds);
  for (const auto& e : run.errs) row.vnmse_max_rank = std::max(row.vnmse_max_rank, ratio(e));
  if (k == 0) {
    row.label = scheme.label;
    row.scheme = scheme.name;
    row.params = scheme.resolved;
    row.step = st.steps[si];
    row.unbiased = run.unbiased;
    row.plan_bytes_per_rank = run.plan_bytes;
    row.wire_bytes = run.wire_bytes;
    row.bits_per_entry = 8.0 * static_cast<double>(run.tensor_bytes + run.plan_bytes) / static_cast<double>(elements);
  }
  if (st.collective->operation != topo::CollectiveOp::kAllReduce) return;
  std::vector<std::span<const float>> outs(run.outs.begin(), run.outs.end());
  for (uint32_t r = 0; r < st.ranks; ++r)
    for (uint64_t i = 0; i < elements; ++i) acc.mean_out[si][i] += outs[r][i];
  const auto le = allreduce_layer_errors(ins, outs, st.layout);
  for (size_t l = 0; l < le.size(); ++l) add(acc.layer_sum[si][l], le[l]);
}

// Means over seeds, the bias of the mean output, per-layer and per-hop ratios.
void finish_row(const ErrorStudy& st, size_t si, Accumulated& acc) {
  ErrorRow& row = acc.rows[si];
  const auto& vs = acc.per_seed[si];
  const uint64_t elements = st.inputs[si].front().size();
  const auto readers = static_cast<uint32_t>(st.inputs[si].size());
  row.vnmse = std::accumulate(vs.begin(), vs.end(), 0.0) / static_cast<double>(vs.size());
  double var = 0;
  for (double v : vs) var += (v - row.vnmse) * (v - row.vnmse);
  row.vnmse_std = vs.size() > 1 ? std::sqrt(var / static_cast<double>(vs.size() - 1)) : 0.0;
  row.bias_floor = row.vnmse / st.seeds;
  row.bias = std::numeric_limits<double>::quiet_NaN();
  if (st.collective->operation == topo::CollectiveOp::kAllReduce) {
    double se = 0, sn = 0;
    const double denom = static_cast<double>(st.seeds) * st.ranks;
    for (uint64_t i = 0; i < elements; ++i) {
      double exact = 0;
      for (uint32_t r = 0; r < st.ranks; ++r) exact += st.inputs[si][r % readers][i];
      const double d = acc.mean_out[si][i] / denom - exact;
      se += d * d;
      sn += exact * exact;
    }
    row.bias = se == 0 ? 0 : se / sn;
    for (const auto& e : acc.layer_sum[si]) row.layer_vnmse.push_back(ratio(e));
  }
  for (uint32_t h = 1; h <= st.ranks; ++h)
    row.hop_vnmse.push_back(acc.hop_sum[si][h].sq_norm > 0 || acc.hop_sum[si][h].sq_error > 0
                                ? ratio(acc.hop_sum[si][h])
                                : std::numeric_limits<double>::quiet_NaN());
}

}  // namespace

SuperGroupSkew super_group_skew(uint64_t step, const std::vector<std::vector<float>>& workers, uint32_t ranks) {
  constexpr uint64_t kSuperGroup = 256;
  const uint64_t n = workers.front().size();
  std::vector<double> f((n + kSuperGroup - 1) / kSuperGroup, 0.0);
  std::vector<double> g(f.size(), 0.0);  // the summed gradient's super-group energies
  double sum[kSuperGroup];
  for (uint64_t j = 0; j < f.size(); ++j) {
    const uint64_t lo = j * kSuperGroup, len = std::min(kSuperGroup, n - lo);
    std::fill(sum, sum + len, 0.0);
    for (uint32_t r = 0; r < ranks; ++r) {
      const float* x = workers[r % workers.size()].data() + lo;
      for (uint64_t i = 0; i < len; ++i) {
        f[j] += static_cast<double>(x[i]) * x[i];
        sum[i] += x[i];
      }
    }
    for (uint64_t i = 0; i < len; ++i) g[j] += sum[i] * sum[i];
  }
  SuperGroupSkew s;
  s.step = step;
  s.super_groups = f.size();
  std::vector<double> sorted = f;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double total = std::accumulate(sorted.begin(), sorted.end(), 0.0);
  auto share = [&](double fraction) {
    const auto k = static_cast<std::ptrdiff_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
    return total > 0 ? std::accumulate(sorted.begin(), sorted.begin() + k, 0.0) / total : 0.0;
  };
  s.top10 = share(0.1);
  s.top30 = share(0.3);
  s.top50 = share(0.5);
  const double median = sorted[sorted.size() / 2];
  s.below_median_100 =
      static_cast<double>(std::count_if(f.begin(), f.end(), [&](double v) { return v < median / 100; })) /
      static_cast<double>(f.size());
  std::sort(g.begin(), g.end());
  const double g_total = std::accumulate(g.begin(), g.end(), 0.0);
  const auto half = static_cast<std::ptrdiff_t>(g.size() / 2);
  s.sum_low50 = g_total > 0 ? std::accumulate(g.begin(), g.begin() + half, 0.0) / g_total : 0.0;
  return s;
}

std::vector<TensorBucket> ddp_tensor_buckets(std::span<const LayerShape> layout, uint64_t cap, uint64_t first) {
  std::vector<uint64_t> params(layout.size());
  for (size_t l = 0; l < layout.size(); ++l) {
    CCSIM_CHECK(layout[l].offset == (l == 0 ? 0 : layout[l - 1].offset + layout[l - 1].count),
                "layer {} does not follow the one before it", l);
    params[l] = layout[l].count;
  }
  std::vector<TensorBucket> out;
  for (const traces::GradientBucket& g : traces::make_ddp_buckets(params, cap, first, 4)) {
    // Backward order: the bucket's layers are lo .. hi, contiguous in the tensor.
    const uint32_t lo = *std::min_element(g.layers.begin(), g.layers.end());
    const uint32_t hi = *std::max_element(g.layers.begin(), g.layers.end());
    CCSIM_CHECK(hi - lo + 1 == g.layers.size(), "bucket of layers {} .. {} is not contiguous", lo, hi);
    TensorBucket b;
    b.offset = layout[lo].offset;
    b.first_layer = lo;
    for (uint32_t l = lo; l <= hi; ++l) {
      LayerShape shape = layout[l];
      shape.offset -= b.offset;
      b.layout.push_back(shape);
      b.count += shape.count;
    }
    out.push_back(std::move(b));
  }
  std::reverse(out.begin(), out.end());  // tensor order (the first bucket DDP fills is the last here)
  return out;
}

Result<std::vector<ErrorRow>> study_errors(std::span<const StudyScheme> schemes, const ErrorStudy& st) {
  std::vector<ErrorRow> out;
  const size_t steps = st.steps.size();
  const uint64_t elements = st.inputs.front().front().size();
  for (const StudyScheme& scheme : schemes) {
    Accumulated acc{std::vector<ErrorRow>(steps), std::vector<std::vector<double>>(steps),
                    std::vector<std::vector<double>>(steps, std::vector<double>(elements, 0.0)),
                    std::vector<std::vector<ErrorStats>>(steps, std::vector<ErrorStats>(st.layout.size())),
                    std::vector<std::vector<ErrorStats>>(steps, std::vector<ErrorStats>(st.ranks + 1))};
    for (uint32_t k = 0; k < st.seeds; ++k) {
      for (size_t si = 0; si < steps; ++si) {
        const auto readers = static_cast<uint32_t>(st.inputs[si].size());
        std::vector<std::span<const float>> ins;
        for (uint32_t r = 0; r < st.ranks; ++r) ins.emplace_back(st.inputs[si][r % readers]);
        StepRun run{std::vector<ErrorStats>(st.ranks), std::vector<std::vector<float>>(st.ranks), &acc.hop_sum[si],
                    0, 0, 0, false};
        for (size_t b = 0; b < st.buckets.size(); ++b) {
          if (Status e = run_bucket(scheme, st, b, st.seed + k, ins, run); !e.ok())
            return internal_error(fmt::format("{}: {}", scheme.label, e.message()));
        }
        accumulate(scheme, st, si, k, ins, run, acc);
      }
    }
    for (size_t si = 0; si < steps; ++si) {
      finish_row(st, si, acc);
      out.push_back(std::move(acc.rows[si]));
    }
  }
  return out;
}

}  // namespace ccsim::algo
