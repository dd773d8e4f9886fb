#include "algorithms/error_study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "algorithms/collective_session.hpp"
#include "algorithms/compressed_collective.hpp"
#include "algorithms/registry.hpp"
#include "sim/base/check.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/parallel.hpp"
#include "sim/base/units.hpp"
#include "traces/ddp_buckets.hpp"
#include "traces/dump_sample.hpp"

namespace ccsim::algo {
namespace {

void add(ErrorStats& into, const ErrorStats& e) {
  into.sq_error += e.sq_error;
  into.sq_norm += e.sq_norm;
}

// What one (seed, step) of a scheme measured, summed over its buckets.
struct StepRun {
  std::vector<ErrorStats> errs;               // per rank
  std::vector<std::vector<float>> outs;       // per rank: what it ended with
  std::vector<ErrorStats>* hops = nullptr;    // per hop depth: the step's sums over seeds and buckets
  RoundBytes bytes;  // one rank's, summed over buckets
  uint64_t wire_bytes = 0;
  bool unbiased = false;
};

// One bucket of one (seed, step): a fresh instance, warm-up rounds, then the measured round.
Status run_bucket(const StudyScheme& scheme, const ErrorStudy& st, size_t b, uint64_t seed,
                  std::span<const std::span<const float>> ins, StepRun& out) {
  const TensorBucket& bucket = st.buckets[b];
  std::vector<std::span<const float>> bins;
  for (const auto& in : ins) bins.push_back(in.subspan(bucket.offset, bucket.count));
  // Each bucket draws its own random numbers (bucket 0 those of the whole tensor).
  const uint64_t bucket_seed = seed ^ (b * 0x9E3779B97F4A7C15ull);
  CCSIM_ASSIGN_OR_RETURN(auto session, CollectiveSession::create(scheme.name, scheme.params, *st.collective, st.ranks,
                                                                 bucket.count, st.base, bucket.layout, bucket_seed));
  std::vector<std::vector<float>> bufs(st.ranks, std::vector<float>(bucket.count));
  std::vector<std::span<float>> views(bufs.begin(), bufs.end());
  Result<SessionRound> round = internal_error("no round");
  for (uint32_t r = 0; r <= st.warmup; ++r) {
    round = session->run(bins, views, r == st.warmup);
    CCSIM_RETURN_IF_ERROR(round.status());
  }
  const std::vector<ErrorStats>& berrs = round->errors;
  for (uint32_t r = 0; r < st.ranks; ++r) add(out.errs[r], berrs[r]);
  out.bytes += round->bytes;
  out.wire_bytes += round->stats.wire_bytes;
  out.unbiased = session->compressor().unbiased();
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
  for (const auto& e : run.errs) row.vnmse_max_rank = std::max(row.vnmse_max_rank, relative_error(e));
  if (k == 0) {
    row.label = scheme.label;
    row.scheme = scheme.name;
    row.params = scheme.resolved;
    row.step = st.steps[si];
    row.unbiased = run.unbiased;
    row.plan_bytes_per_rank = run.bytes.plan;
    row.wire_bytes = run.wire_bytes;
    row.bits_per_entry = RoundBytes::bits(run.bytes.total(), elements);
    row.payload_bits = RoundBytes::bits(run.bytes.payload, elements);
    row.metadata_bits = RoundBytes::bits(run.bytes.metadata, elements);
    row.plan_bits = RoundBytes::bits(run.bytes.plan, elements);
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
    for (const auto& e : acc.layer_sum[si]) row.layer_vnmse.push_back(relative_error(e));
  }
  for (uint32_t h = 1; h <= st.ranks; ++h)
    row.hop_vnmse.push_back(acc.hop_sum[si][h].sq_norm > 0 || acc.hop_sum[si][h].sq_error > 0
                                ? relative_error(acc.hop_sum[si][h])
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
            return Status(e.code(), fmt::format("step {}: {}: {}", st.steps.empty() ? 0 : st.steps[si], scheme.label,
                                                e.message()));
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

namespace {

// A dump's tensors (sampled when large); rank r reads worker r mod W.
Status load_dump(const ErrorRequest& r, ErrorStudy& st, ErrorReport& report) {
  CCSIM_ASSIGN_OR_RETURN(const traces::GradientDump dump, traces::GradientDump::open(r.dump));
  if (st.ranks == 0 && dump.workers() < 2)
    return invalid_argument(fmt::format("{}: /workers: a collective needs at least 2 ranks, and the dump holds {} "
                                        "worker; give --ranks N (rank r reads worker r mod {}) or dump more workers",
                                        (dump.dir() / "manifest.json").string(), dump.workers(), dump.workers()));
  if (st.ranks == 0) st.ranks = dump.workers();
  if (st.ranks < 2) return invalid_argument_at("/ranks", fmt::format("expected at least 2, got {}", st.ranks));
  auto found = dump.step_indices(r.steps);
  if (!found.ok()) return invalid_argument_at("/steps", found.status().message());
  const std::vector<size_t> steps = std::move(*found);
  for (size_t si : steps) st.steps.push_back(dump.step_info()[si].step);
  const traces::DumpSample sample = traces::sample_dump(dump, r.max_elements, r.bucket, r.seed);
  report.sampling_note = sample.note;
  uint64_t elements = 0;
  for (const traces::DumpPiece& p : sample.pieces) {
    st.layout.push_back({elements, p.count, p.rows, p.cols});
    const traces::GradientLayer& layer = dump.layers()[p.layer];
    report.layer_names.push_back(sample.note.empty() ? layer.name
                                                     : fmt::format("{}@{}", layer.name, p.offset - layer.offset));
    elements += p.count;
  }
  report.elements = elements;
  report.gradients_desc =
      fmt::format("{}: {} workers, {} entries per worker, {} layers, steps {}; {}", r.dump, dump.workers(),
                  dump.elements(), dump.layers().size(), steps.size(), dump.provenance().model);
  const uint32_t readers = std::min(st.ranks, dump.workers());
  st.inputs.assign(steps.size(), std::vector<std::vector<float>>(readers));
  for (size_t si = 0; si < steps.size(); ++si)
    for (uint32_t w = 0; w < readers; ++w) {
      CCSIM_ASSIGN_OR_RETURN(st.inputs[si][w], traces::read_sample(dump, sample, w, steps[si]));
    }
  return ok_status();
}

// Synthetic tensors, one per rank: i.i.d. normals, or the scenario generator's (the data seed
// fixed like the normals').
Status load_synthetic(const ErrorRequest& r, ErrorStudy& st, ErrorReport& report) {
  if (st.ranks == 0) st.ranks = 8;
  if (st.ranks < 2) return invalid_argument_at("/ranks", fmt::format("expected at least 2, got {}", st.ranks));
  const uint64_t n = r.rows * r.cols;
  const LayerShape whole{0, n, r.matrix ? r.rows : n, r.matrix ? r.cols : 1};
  report.elements = n;
  st.steps = {0};
  st.inputs.assign(1, std::vector<std::vector<float>>(st.ranks, std::vector<float>(n)));
  constexpr uint64_t kDataSeed = 0x5EED;
  if (!r.structure) {
    st.layout.push_back(whole);
    report.layer_names.push_back("normal");
    report.gradients_desc = fmt::format("synthetic: i.i.d. N(0,1), shape {}, drawn per rank", r.shape_text);
    for (uint32_t k = 0; k < st.ranks; ++k) {
      float* v = st.inputs[0][k].data();
      const kern::RngKey key{kDataSeed, 0, k, 0x4E};
      kern::parallel_for(n, 1 << 16, [=](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) v[i] = kern::standard_normal_at(key, i);
      });
    }
    return ok_status();
  }
  traces::SyntheticGradientSpec spec = *r.structure;
  spec.elements = n;
  std::vector<std::span<float>> views(st.inputs[0].begin(), st.inputs[0].end());
  traces::generate_synthetic_gradients(spec, kDataSeed, views);
  const std::vector<uint64_t> off = traces::synthetic_layer_offsets(spec, kDataSeed);
  for (size_t l = 0; l + 1 < off.size(); ++l) {
    st.layout.push_back(off.size() == 2 ? whole : LayerShape{off[l], off[l + 1] - off[l], off[l + 1] - off[l], 1});
    report.layer_names.push_back(fmt::format("layer{}", l));
  }
  report.gradients_desc = fmt::format(
      "synthetic: shape {} per rank, {} layer(s) with scales over {} decades, correlation {} between ranks, "
      "lognormal envelope sigma {} per {} entries{}",
      r.shape_text, st.layout.size(), spec.scale_decades, spec.correlation, spec.envelope_sigma, spec.envelope_span,
      spec.envelope_correlation < 1.0 ? fmt::format(", correlated {} between ranks", spec.envelope_correlation)
                                      : std::string());
  return ok_status();
}

// The tensor as one bucket, or PyTorch DDP's bucketing of its layers; `desc` says which.
std::vector<TensorBucket> request_buckets(const ErrorRequest& r, const ErrorStudy& st, uint64_t elements,
                                          std::string& desc) {
  if (r.ddp_cap == 0) return {{0, elements, st.layout, 0}};
  std::vector<TensorBucket> out = ddp_tensor_buckets(st.layout, r.ddp_cap, r.ddp_first);
  uint64_t largest = 0;
  for (const TensorBucket& b : out) largest = std::max(largest, b.count);
  desc = fmt::format(", each of {} DDP buckets of at least {}{} (the largest {} entries) on its own", out.size(),
                     format_quantity(static_cast<double>(r.ddp_cap), UnitKind::kBytes),
                     r.ddp_first > 0 ? fmt::format(", the first {}", format_quantity(static_cast<double>(r.ddp_first),
                                                                                         UnitKind::kBytes))
                                     : std::string(),
                     largest);
  return out;
}

// Whether every scheme can run on every bucket of the collective, whatever the data.
Status check_schemes(const ErrorRequest& r, const ErrorStudy& st, const std::vector<std::string>& layer_names) {
  for (const StudyScheme& scheme : r.schemes)
    for (const TensorBucket& bucket : st.buckets) {
      auto comp = CompressorRegistry::global().create(scheme.name, scheme.params);
      CCSIM_RETURN_IF_ERROR(comp.status());
      (*comp)->set_layout(bucket.layout);
      Status bad = CompressedCollective::check_scheme(**comp, st.collective->operation, st.ranks, bucket.count);
      if (!bad.ok()) bad = invalid_argument_at("/algo", fmt::format("{}: {}", scheme.label, bad.message()));
      if (bad.ok()) {
        bad = CompressedCollective::check_collective(**comp, *st.collective, st.ranks, bucket.count, st.base);
        if (!bad.ok()) bad = bad.at("/collective");
      }
      if (bad.ok()) continue;
      if (st.buckets.size() == 1) return bad;
      // Which bucket a scheme or collective could not handle (a small one may be below its alignment).
      const uint32_t last = bucket.first_layer + static_cast<uint32_t>(bucket.layout.size()) - 1;
      return invalid_argument_at(
          "/ddp_bucket", fmt::format("the bucket of entries [{}, {}) ({}{}): {}", bucket.offset,
                                     bucket.offset + bucket.count, layer_names.at(bucket.first_layer),
                                     last > bucket.first_layer ? " .. " + layer_names.at(last) : std::string(),
                                     bad.detail()));
    }
  return ok_status();
}

}  // namespace

Result<ErrorReport> measure_errors(const ErrorRequest& r) {
  ErrorReport report;
  ErrorStudy st;
  st.ranks = r.ranks;
  st.seeds = r.seeds;
  st.seed = r.seed;
  st.warmup = r.warmup;
  st.base = r.base;
  CCSIM_RETURN_IF_ERROR(r.dump.empty() ? load_synthetic(r, st, report) : load_dump(r, st, report));
  const auto readers = static_cast<uint32_t>(st.inputs.front().size());
  auto collective = topo::find_collective(r.operation, r.algorithm);
  if (!collective.ok()) return collective.status().at("/collective");
  st.collective = *collective;
  report.ranks = st.ranks;
  for (size_t si = 0; si < st.steps.size(); ++si)
    report.skew.push_back(super_group_skew(st.steps[si], st.inputs[si], st.ranks));
  std::string buckets_desc;
  st.buckets = request_buckets(r, st, report.elements, buckets_desc);
  report.buckets = st.buckets.size();
  report.collective_desc = fmt::format(
      "{}/{} on {} ranks{}{}{}", r.operation, r.algorithm, st.ranks,
      st.ranks > readers ? fmt::format(" (rank r reads worker r mod {})", readers) : "", buckets_desc,
      r.warmup > 0 ? fmt::format(", round {} measured after {} warm-up rounds on each step", r.warmup, r.warmup) : "");
  CCSIM_RETURN_IF_ERROR(check_schemes(r, st, report.layer_names));
  auto rows = study_errors(r.schemes, st);
  if (!rows.ok()) return r.dump.empty() ? rows.status() : rows.status().with_context(r.dump);
  report.rows = std::move(*rows);
  return report;
}

}  // namespace ccsim::algo
