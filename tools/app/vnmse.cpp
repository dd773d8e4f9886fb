#include "tools/app/vnmse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>

#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/units.hpp"
#include "sim/training/bucket_sync.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/gradient_dump.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// "k=v": v as JSON if it parses (numbers, booleans), else as a string.
Status parse_param(const std::string& text, json& into, const std::string& where) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(fmt::format("{}: expected KEY=VALUE, got '{}'", where, text));
  const std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  json v = json::parse(value, nullptr, false);
  into[key] = v.is_discarded() ? json(value) : v;
  return ok_status();
}

// A piece of the dump used as part of the tensor: entries [offset, offset + count) of layer `layer`.
struct Piece {
  size_t layer = 0;
  uint64_t offset = 0;  // in the dump's flattened vector
  uint64_t count = 0;
  uint64_t rows = 0, cols = 1;
};

// The pieces making up the tensor: the whole dump, or a bucket sample of it.
std::vector<Piece> choose_pieces(const traces::GradientDump& dump, const VnmseOptions& o, std::string& note) {
  std::vector<Piece> all;
  for (size_t l = 0; l < dump.layers().size(); ++l) {
    const traces::GradientLayer& L = dump.layers()[l];
    const uint64_t rows = L.shape.empty() ? 1 : L.shape.front();
    const uint64_t cols = rows > 0 ? L.count / rows : 1;
    if (dump.elements() <= o.max_elements) {
      all.push_back({l, L.offset, L.count, rows, cols});
      continue;
    }
    const uint64_t rows_per_piece = std::max<uint64_t>(1, o.bucket / std::max<uint64_t>(cols, 1));
    for (uint64_t r = 0; r < rows; r += rows_per_piece) {
      const uint64_t n = std::min(rows_per_piece, rows - r);
      all.push_back({l, L.offset + r * cols, n * cols, n, cols});
    }
  }
  if (dump.elements() <= o.max_elements) return all;
  // Random order by Philox keys, then greedily take pieces that still fit.
  std::vector<std::pair<uint32_t, size_t>> keyed;
  for (size_t i = 0; i < all.size(); ++i)
    keyed.emplace_back(kern::random_bits_at(kern::RngKey{o.seed, 0, 0, 0x5A4D}, i), i);
  std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> chosen;
  uint64_t total = 0;
  for (const auto& [k, i] : keyed)
    if (total + all[i].count <= o.max_elements) {
      chosen.push_back(i);
      total += all[i].count;
    }
  std::sort(chosen.begin(), chosen.end());
  std::vector<Piece> out;
  for (size_t i : chosen) out.push_back(all[i]);
  note = fmt::format("sampled {} of {} buckets (whole rows, <= {} entries each): {} of {} entries per worker ({:.2f}%)",
                     out.size(), all.size(), o.bucket, total, dump.elements(),
                     100.0 * static_cast<double>(total) / static_cast<double>(dump.elements()));
  return out;
}

Status load_dump(const VnmseOptions& o, uint32_t& ranks, VnmseReport& report, std::vector<algo::LayerShape>& layout,
                 std::vector<uint64_t>& step_numbers, std::vector<std::vector<std::vector<float>>>& inputs) {
  CCSIM_ASSIGN_OR_RETURN(const traces::GradientDump dump, traces::GradientDump::open(o.gradients));
  if (ranks == 0) ranks = dump.workers();
  if (ranks < 2) return invalid_argument(fmt::format("--ranks: expected at least 2, got {}", ranks));
  std::vector<size_t> steps;
  if (o.steps.empty()) {
    steps.resize(dump.steps());
    std::iota(steps.begin(), steps.end(), size_t{0});
  }
  for (uint64_t want : o.steps) {
    size_t found = dump.steps();
    std::string have;
    for (size_t i = 0; i < dump.steps(); ++i) {
      if (dump.step_info()[i].step == want) found = i;
      have += (have.empty() ? "" : ", ") + std::to_string(dump.step_info()[i].step);
    }
    if (found == dump.steps())
      return invalid_argument(fmt::format("--steps: {} has no step {}; dumped steps: {}", o.gradients, want, have));
    steps.push_back(found);
  }
  for (size_t si : steps) step_numbers.push_back(dump.step_info()[si].step);
  const std::vector<Piece> pieces = choose_pieces(dump, o, report.sampling_note);
  uint64_t elements = 0;
  for (const Piece& p : pieces) {
    layout.push_back({elements, p.count, p.rows, p.cols});
    report.layer_names.push_back(report.sampling_note.empty()
                                     ? dump.layers()[p.layer].name
                                     : fmt::format("{}@{}", dump.layers()[p.layer].name,
                                                   p.offset - dump.layers()[p.layer].offset));
    elements += p.count;
  }
  report.elements = elements;
  report.gradients_desc =
      fmt::format("{}: {} workers, {} entries per worker, {} layers, steps {}; {}", o.gradients, dump.workers(),
                  dump.elements(), dump.layers().size(), steps.size(), dump.provenance().model);
  // Rank r reads worker r mod W.
  const uint32_t readers = std::min(ranks, dump.workers());
  inputs.assign(steps.size(), std::vector<std::vector<float>>(readers));
  for (size_t si = 0; si < steps.size(); ++si)
    for (uint32_t w = 0; w < readers; ++w) {
      std::vector<float>& v = inputs[si][w];
      v.resize(elements);
      uint64_t at = 0;
      size_t cached_layer = SIZE_MAX;
      std::vector<float> layer;
      for (const Piece& p : pieces) {
        if (p.layer != cached_layer) {
          CCSIM_ASSIGN_OR_RETURN(layer, dump.layer(w, steps[si], p.layer));
          cached_layer = p.layer;
        }
        const uint64_t within = p.offset - dump.layers()[p.layer].offset;
        std::copy(layer.begin() + static_cast<std::ptrdiff_t>(within),
                  layer.begin() + static_cast<std::ptrdiff_t>(within + p.count), v.begin() + static_cast<std::ptrdiff_t>(at));
        at += p.count;
      }
    }
  return ok_status();
}

// The non-empty items of a comma-separated list ("a,,b" gives a and b).
std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> items;
  for (size_t p = 0; p <= text.size();) {
    const size_t comma = std::min(text.find(',', p), text.size());
    if (comma > p) items.push_back(text.substr(p, comma - p));
    p = comma + 1;
  }
  return items;
}

// --structure "KEY=VALUE,...": the synthetic generator's parameters, each in the range a scenario's
// synthetic gradients accept (traces/synthetic_gradients.hpp); unnamed keys keep their defaults.
Result<traces::SyntheticGradientSpec> parse_structure(const std::string& text) {
  traces::SyntheticGradientSpec spec;
  struct Key {
    const char* name;
    double lo, hi;
    bool integer;
    std::function<void(double)> set;
  };
  const Key keys[] = {
      {"layers", 1, traces::kMaxSyntheticLayers, true, [&](double v) { spec.layers = static_cast<uint32_t>(v); }},
      {"scale_decades", 0, traces::kMaxScaleDecades, false, [&](double v) { spec.scale_decades = v; }},
      {"correlation", 0, 1, false, [&](double v) { spec.correlation = v; }},
      {"envelope_sigma", 0, traces::kMaxEnvelopeSigma, false, [&](double v) { spec.envelope_sigma = v; }},
      {"envelope_span", 1, traces::kMaxEnvelopeSpan, true,
       [&](double v) { spec.envelope_span = static_cast<uint32_t>(v); }},
      {"envelope_correlation", 0, 1, false, [&](double v) { spec.envelope_correlation = v; }}};
  for (const std::string& kv : comma_items(text)) {
    const size_t eq = kv.find('=');
    const std::string name = kv.substr(0, eq);
    const Key* key = nullptr;
    for (const Key& k : keys)
      if (name == k.name) key = &k;
    if (eq == std::string::npos || key == nullptr)
      return invalid_argument(fmt::format("--structure: expected KEY=VALUE with KEY one of layers, scale_decades, "
                                          "correlation, envelope_sigma, envelope_span, envelope_correlation; got '{}'",
                                          kv));
    const std::string value = kv.substr(eq + 1);
    double v = std::numeric_limits<double>::quiet_NaN();
    try {
      size_t used = 0;
      v = std::stod(value, &used);
      if (used != value.size()) v = std::numeric_limits<double>::quiet_NaN();
    } catch (const std::exception&) {
    }
    if (!(v >= key->lo && v <= key->hi) || (key->integer && v != std::floor(v)))
      return invalid_argument(fmt::format("--structure {}: expected {} in [{}, {}], got '{}'", name,
                                          key->integer ? "an integer" : "a number", key->lo, key->hi, value));
    key->set(v);
  }
  return spec;
}

Status load_synthetic(const VnmseOptions& o, uint32_t& ranks, VnmseReport& report,
                      std::vector<algo::LayerShape>& layout, std::vector<std::vector<std::vector<float>>>& inputs) {
  uint64_t rows = 0, cols = 1;
  const size_t x = o.synthetic.find('x');
  try {
    size_t used = 0;
    rows = std::stoull(o.synthetic.substr(0, x), &used);
    if (used != std::min(x, o.synthetic.size())) rows = 0;
    if (x != std::string::npos) {
      cols = std::stoull(o.synthetic.substr(x + 1), &used);
      if (used != o.synthetic.size() - x - 1) cols = 0;
    }
  } catch (const std::exception&) {
    rows = 0;
  }
  if (rows == 0 || cols == 0 || rows * cols > (uint64_t{1} << 34))
    return invalid_argument(fmt::format("--synthetic: expected ROWSxCOLS or N (positive, at most 2^34 entries), got '{}'",
                                        o.synthetic));
  if (ranks == 0) ranks = 8;
  if (ranks < 2) return invalid_argument(fmt::format("--ranks: expected at least 2, got {}", ranks));
  const uint64_t n = rows * cols;
  const algo::LayerShape whole{0, n, x == std::string::npos ? n : rows, x == std::string::npos ? 1 : cols};
  report.elements = n;
  inputs.assign(1, std::vector<std::vector<float>>(ranks, std::vector<float>(n)));
  if (o.structure.empty()) {
    layout.push_back(whole);
    report.layer_names.push_back("normal");
    report.gradients_desc = fmt::format("synthetic: i.i.d. N(0,1), shape {}, drawn per rank", o.synthetic);
    for (uint32_t r = 0; r < ranks; ++r) {
      float* v = inputs[0][r].data();
      const kern::RngKey key{0x5EED, 0, r, 0x4E};
      kern::parallel_for(n, 1 << 16, [=](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) v[i] = kern::standard_normal_at(key, i);
      });
    }
    return ok_status();
  }
  // Structured: the scenario generator, one worker per rank, the data seed fixed like the normals'.
  CCSIM_ASSIGN_OR_RETURN(traces::SyntheticGradientSpec spec, parse_structure(o.structure));
  spec.elements = n;
  constexpr uint64_t kDataSeed = 0x5EED;
  std::vector<std::span<float>> views(inputs[0].begin(), inputs[0].end());
  traces::generate_synthetic_gradients(spec, kDataSeed, views);
  const std::vector<uint64_t> off = traces::synthetic_layer_offsets(spec, kDataSeed);
  for (size_t l = 0; l + 1 < off.size(); ++l) {
    layout.push_back(off.size() == 2 ? whole : algo::LayerShape{off[l], off[l + 1] - off[l], off[l + 1] - off[l], 1});
    report.layer_names.push_back(fmt::format("layer{}", l));
  }
  report.gradients_desc = fmt::format(
      "synthetic: shape {} per rank, {} layer(s) with scales over {} decades, correlation {} between ranks, "
      "lognormal envelope sigma {} per {} entries{}",
      o.synthetic, layout.size(), spec.scale_decades, spec.correlation, spec.envelope_sigma, spec.envelope_span,
      spec.envelope_correlation < 1.0 ? fmt::format(", correlated {} between ranks", spec.envelope_correlation)
                                      : std::string());
  return ok_status();
}

double ratio(const algo::ErrorStats& e) {
  if (e.sq_error == 0) return 0;
  return e.sq_norm > 0 ? e.sq_error / e.sq_norm : std::numeric_limits<double>::infinity();
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
  s.below_median_100 = static_cast<double>(std::count_if(f.begin(), f.end(), [&](double v) { return v < median / 100; })) /
                       static_cast<double>(f.size());
  std::sort(g.begin(), g.end());
  const double g_total = std::accumulate(g.begin(), g.end(), 0.0);
  const auto half = static_cast<std::ptrdiff_t>(g.size() / 2);
  s.sum_low50 = g_total > 0 ? std::accumulate(g.begin(), g.begin() + half, 0.0) / g_total : 0.0;
  return s;
}

// A DDP bucket of the tensor: entries [offset, offset + count), which are whole layers, and their
// shapes relative to the bucket.
struct TensorBucket {
  uint64_t offset = 0, count = 0;
  std::vector<algo::LayerShape> layout;
  uint32_t first_layer = 0;  ///< index of its first layer in the tensor's layout
};

// The tensor as one bucket (no --ddp-bucket), or PyTorch DDP's bucketing of its layers (the last
// layer first, a bucket closed once it holds at least the cap of fp32 gradient; sim::make_buckets).
Result<std::vector<TensorBucket>> tensor_buckets(const VnmseOptions& o, const std::vector<algo::LayerShape>& layout,
                                                 uint64_t elements, std::string& desc) {
  if (o.ddp_bucket.empty()) {
    if (!o.ddp_first_bucket.empty()) return invalid_argument("--ddp-first-bucket: give --ddp-bucket with it");
    return std::vector<TensorBucket>{{0, elements, layout}};
  }
  auto size = [](const std::string& text, const char* option) -> Result<uint64_t> {
    auto q = parse_quantity(text, UnitKind::kBytes);
    if (!q.ok() || !(*q >= 1.0) || *q > 0x1p62)
      return invalid_argument(fmt::format("{}: expected a size of at least 1 byte such as 25MB or 1MiB, got '{}'",
                                          option, text));
    return static_cast<uint64_t>(*q);
  };
  CCSIM_ASSIGN_OR_RETURN(const uint64_t cap, size(o.ddp_bucket, "--ddp-bucket"));
  uint64_t first = 0;
  if (!o.ddp_first_bucket.empty()) {
    CCSIM_ASSIGN_OR_RETURN(first, size(o.ddp_first_bucket, "--ddp-first-bucket"));
  }
  std::vector<sim::TrainingLayer> layers(layout.size());
  for (size_t l = 0; l < layout.size(); ++l) {
    CCSIM_CHECK(layout[l].offset == (l == 0 ? 0 : layout[l - 1].offset + layout[l - 1].count),
                "layer {} does not follow the one before it", l);
    layers[l].params = layout[l].count;
  }
  std::vector<TensorBucket> out;
  for (const sim::GradientBucket& g : sim::make_buckets(layers, cap, first, 4)) {
    // Backward order: the bucket's layers are lo .. hi, contiguous in the tensor.
    const uint32_t lo = *std::min_element(g.layers.begin(), g.layers.end());
    const uint32_t hi = *std::max_element(g.layers.begin(), g.layers.end());
    CCSIM_CHECK(hi - lo + 1 == g.layers.size(), "bucket of layers {} .. {} is not contiguous", lo, hi);
    TensorBucket b;
    b.offset = layout[lo].offset;
    b.first_layer = lo;
    for (uint32_t l = lo; l <= hi; ++l) {
      algo::LayerShape shape = layout[l];
      shape.offset -= b.offset;
      b.layout.push_back(shape);
      b.count += shape.count;
    }
    out.push_back(std::move(b));
  }
  std::reverse(out.begin(), out.end());  // tensor order (the first bucket DDP fills is the last here)
  uint64_t largest = 0;
  for (const TensorBucket& b : out) largest = std::max(largest, b.count);
  desc = fmt::format(", each of {} DDP buckets of at least {}{} (the largest {} entries) on its own", out.size(),
                     format_quantity(static_cast<double>(cap), UnitKind::kBytes),
                     first > 0 ? fmt::format(", the first {}", format_quantity(static_cast<double>(first),
                                                                                   UnitKind::kBytes))
                               : std::string(),
                     largest);
  return out;
}

Result<VnmseReport> run_vnmse(const VnmseOptions& o) {
  if (o.algos.empty()) return invalid_argument("--algo: give at least one compression scheme (see `ccsim list`)");
  if (o.seeds == 0) return invalid_argument("--seeds: expected at least 1");
  if (o.warmup > 10000)
    return invalid_argument(fmt::format("--warmup: expected at most 10000 rounds, got {}", o.warmup));
  if (o.max_elements == 0 || o.bucket == 0) return invalid_argument("--max-elements and --bucket must be positive");
  // Schemes (validated before any work).
  struct Scheme {
    std::string label, name;
    json params, resolved;
  };
  std::vector<Scheme> schemes;
  for (const std::string& a : o.algos) {
    Scheme s;
    const size_t colon = a.find(':');
    s.name = a.substr(0, colon);
    s.params = json::object();
    std::string explicit_params;
    auto add = [&](const std::string& kv, const std::string& where) -> Status {
      CCSIM_RETURN_IF_ERROR(parse_param(kv, s.params, where));
      explicit_params += (explicit_params.empty() ? "" : ",") + kv;
      return ok_status();
    };
    if (colon != std::string::npos)
      for (const std::string& kv : comma_items(a.substr(colon + 1))) CCSIM_RETURN_IF_ERROR(add(kv, "--algo " + a));
    for (const std::string& kv : o.params) CCSIM_RETURN_IF_ERROR(add(kv, "--param"));
    auto made = algo::CompressorRegistry::global().create(s.name, s.params);
    if (!made.ok()) return made.status().with_context("--algo " + a);
    Diagnostics diag;
    s.resolved = algo::CompressorRegistry::global().find(s.name)->params.resolve(s.params, "/params", diag);
    s.label = explicit_params.empty() ? s.name : fmt::format("{}({})", s.name, explicit_params);
    schemes.push_back(std::move(s));
  }

  // Input: a dump or synthetic normals; steps; the layout.
  VnmseReport report;
  std::vector<algo::LayerShape> layout;
  std::vector<uint64_t> step_numbers;
  std::vector<std::vector<std::vector<float>>> inputs;  // [step][worker]
  uint32_t ranks = o.ranks;
  if (!o.structure.empty() && o.synthetic.empty())
    return invalid_argument("--structure: shapes synthetic entries; give --synthetic with it");
  if (!o.synthetic.empty()) {
    if (!o.gradients.empty()) return invalid_argument("--synthetic and --gradients: give one of them");
    CCSIM_RETURN_IF_ERROR(load_synthetic(o, ranks, report, layout, inputs));
    step_numbers = {0};
  } else {
    if (o.gradients.empty()) return invalid_argument("--gradients: give a gradient dump directory (or --synthetic)");
    CCSIM_RETURN_IF_ERROR(load_dump(o, ranks, report, layout, step_numbers, inputs));
  }
  const uint32_t readers = static_cast<uint32_t>(inputs.front().size());
  const uint64_t elements = report.elements;
  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* collective, topo::find_collective(o.operation, o.algorithm));
  report.ranks = ranks;
  for (size_t si = 0; si < step_numbers.size(); ++si)
    report.skew.push_back(super_group_skew(step_numbers[si], inputs[si], ranks));
  std::string buckets_desc;
  CCSIM_ASSIGN_OR_RETURN(const std::vector<TensorBucket> buckets, tensor_buckets(o, layout, elements, buckets_desc));
  report.buckets = buckets.size();
  report.collective_desc = fmt::format(
      "{}/{} on {} ranks{}{}{}", o.operation, o.algorithm, ranks,
      ranks > readers ? fmt::format(" (rank r reads worker r mod {})", readers) : "", buckets_desc,
      o.warmup > 0 ? fmt::format(", round {} measured after {} warm-up rounds on each step", o.warmup, o.warmup) : "");

  for (const Scheme& scheme : schemes) {
    std::vector<VnmseRow> rows(step_numbers.size());
    std::vector<std::vector<double>> per_seed(step_numbers.size());
    std::vector<std::vector<double>> mean_out(step_numbers.size(), std::vector<double>(elements, 0.0));
    std::vector<std::vector<algo::ErrorStats>> layer_sum(step_numbers.size(), std::vector<algo::ErrorStats>(layout.size()));
    std::vector<std::vector<algo::ErrorStats>> hop_sum(step_numbers.size(), std::vector<algo::ErrorStats>(ranks + 1));
    for (uint32_t k = 0; k < o.seeds; ++k) {
      const uint64_t seed = o.seed + k;
      for (size_t si = 0; si < step_numbers.size(); ++si) {
        // Every bucket on its own: a fresh instance per (seed, step, bucket), whose rounds 0 ..
        // warmup - 1 on this step's gradients let the schemes that adapt across rounds settle; round
        // `warmup` is measured. The buckets' outputs, errors and bytes add up to the tensor's.
        VnmseRow& row = rows[si];
        std::vector<std::span<const float>> ins;
        for (uint32_t r = 0; r < ranks; ++r) ins.emplace_back(inputs[si][r % readers]);
        std::vector<algo::ErrorStats> errs(ranks);
        std::vector<std::vector<float>> outs_store(buckets.size() == 1 ? 0 : ranks);
        std::vector<std::span<const float>> outs(ranks);
        uint64_t plan_bytes = 0, wire_bytes = 0, tensor_bytes = 0;
        bool unbiased = false;
        for (size_t b = 0; b < buckets.size(); ++b) {
          const TensorBucket& bucket = buckets[b];
          // Each bucket draws its own random numbers (bucket 0 those of the whole tensor).
          const uint64_t bucket_seed = seed ^ (b * 0x9E3779B97F4A7C15ull);
          auto made = algo::CompressorRegistry::global().create(scheme.name, scheme.params);
          if (!made.ok()) return made.status();
          algo::Compressor& comp = **made;
          comp.set_layout(bucket.layout);
          std::vector<std::span<const float>> bins;
          for (uint32_t r = 0; r < ranks; ++r) bins.push_back(ins[r].subspan(bucket.offset, bucket.count));
          // One round: its metadata phase, then the collective on copies of the inputs.
          struct Round {
            algo::PlanReport plan;
            topo::CollectiveOptions copt;
            uint64_t reduced;
            topo::Schedule schedule;
            std::vector<std::vector<float>> bufs;
            algo::NumericsStats stats;
          };
          auto run_round = [&](uint32_t round, bool measured) -> Result<Round> {
            const algo::NumericsOptions nopt{bucket_seed, round, measured};
            CCSIM_ASSIGN_OR_RETURN(const algo::PlanReport plan, algo::plan_round(comp, bins, nopt));
            topo::CollectiveOptions copt;
            copt.segments = o.segments;
            copt.gpus_per_node = o.gpus_per_node;
            const uint64_t reduced = comp.reduced_elements(bucket.count);
            algo::set_shard_options(comp, collective->operation, reduced, ranks, copt);
            CCSIM_RETURN_IF_ERROR(algo::check_reduced_length(comp, collective->operation, bucket.count, reduced)
                                      .with_context(fmt::format("--algo {}", scheme.label)));
            if (Status st = collective->check(ranks, reduced, copt); !st.ok())
              return invalid_argument(fmt::format("--collective {}: cannot run {} entries on {} ranks: {}",
                                                  o.algorithm, reduced, ranks, st.message()));
            topo::Schedule schedule = collective->build(ranks, reduced, copt);
            algo::bind_schedule(schedule, comp);
            std::vector<std::vector<float>> bufs(ranks);
            std::vector<std::span<float>> views;
            for (uint32_t r = 0; r < ranks; ++r) {
              bufs[r].assign(bins[r].begin(), bins[r].end());
              views.emplace_back(bufs[r]);
            }
            CCSIM_ASSIGN_OR_RETURN(const algo::NumericsStats stats, algo::run_numerics(schedule, comp, views, nopt));
            return Round{plan, copt, reduced, std::move(schedule), std::move(bufs), stats};
          };
          // Which bucket a scheme or collective could not handle (a small one may be below its alignment).
          auto where = [&](Status st) {
            if (st.ok() || buckets.size() == 1) return st;
            const uint32_t last = bucket.first_layer + static_cast<uint32_t>(bucket.layout.size()) - 1;
            return st.with_context(fmt::format(
                "--ddp-bucket: the bucket of entries [{}, {}) ({}{})", bucket.offset, bucket.offset + bucket.count,
                report.layer_names.at(bucket.first_layer),
                last > bucket.first_layer ? " .. " + report.layer_names.at(last) : std::string()));
          };
          for (uint32_t round = 0; round < o.warmup; ++round) {
            CCSIM_RETURN_IF_ERROR(where(run_round(round, false).status()));
          }
          auto measured = run_round(o.warmup, true);
          CCSIM_RETURN_IF_ERROR(where(measured.status()));
          Round rd = std::move(measured).value();
          std::vector<std::span<const float>> bouts(rd.bufs.begin(), rd.bufs.end());
          const std::vector<algo::ErrorStats> berrs = algo::operation_errors(rd.schedule, bins, bouts);
          for (uint32_t r = 0; r < ranks; ++r) {
            errs[r].sq_error += berrs[r].sq_error;
            errs[r].sq_norm += berrs[r].sq_norm;
          }
          plan_bytes += rd.plan.wire_bytes_per_rank;
          wire_bytes += rd.stats.wire_bytes;
          tensor_bytes += algo::tensor_wire_bytes(comp, rd.reduced, ranks, rd.copt);
          unbiased = comp.unbiased();
          for (size_t h = 0; h < rd.stats.hop_errors.size(); ++h) {
            hop_sum[si][h].sq_error += rd.stats.hop_errors[h].sq_error;
            hop_sum[si][h].sq_norm += rd.stats.hop_errors[h].sq_norm;
          }
          if (buckets.size() == 1) {
            outs_store = std::move(rd.bufs);
          } else {
            for (uint32_t r = 0; r < ranks; ++r) {
              outs_store[r].resize(elements);
              std::copy(rd.bufs[r].begin(), rd.bufs[r].end(),
                        outs_store[r].begin() + static_cast<std::ptrdiff_t>(bucket.offset));
            }
          }
        }
        for (uint32_t r = 0; r < ranks; ++r) outs[r] = outs_store[r];
        const double v = algo::vnmse(errs);
        per_seed[si].push_back(v);
        for (const auto& e : errs)
          row.mse += e.sq_error / static_cast<double>(elements) / (static_cast<double>(ranks) * o.seeds);
        for (const auto& e : errs) row.vnmse_max_rank = std::max(row.vnmse_max_rank, ratio(e));
        if (k == 0) {
          row.label = scheme.label;
          row.scheme = scheme.name;
          row.params = scheme.resolved;
          row.step = step_numbers[si];
          row.unbiased = unbiased;
          row.plan_bytes_per_rank = plan_bytes;
          row.wire_bytes = wire_bytes;
          row.bits_per_entry = 8.0 * static_cast<double>(tensor_bytes + plan_bytes) / static_cast<double>(elements);
        }
        if (collective->operation == topo::CollectiveOp::kAllReduce) {
          for (uint32_t r = 0; r < ranks; ++r)
            for (uint64_t i = 0; i < elements; ++i) mean_out[si][i] += outs[r][i];
          const auto le = algo::allreduce_layer_errors(ins, outs, layout);
          for (size_t l = 0; l < le.size(); ++l) {
            layer_sum[si][l].sq_error += le[l].sq_error;
            layer_sum[si][l].sq_norm += le[l].sq_norm;
          }
        }
      }
    }
    for (size_t si = 0; si < step_numbers.size(); ++si) {
      VnmseRow& row = rows[si];
      const auto& vs = per_seed[si];
      row.vnmse = std::accumulate(vs.begin(), vs.end(), 0.0) / static_cast<double>(vs.size());
      double var = 0;
      for (double v : vs) var += (v - row.vnmse) * (v - row.vnmse);
      row.vnmse_std = vs.size() > 1 ? std::sqrt(var / static_cast<double>(vs.size() - 1)) : 0.0;
      row.bias_floor = row.vnmse / o.seeds;
      row.bias = std::numeric_limits<double>::quiet_NaN();
      if (collective->operation == topo::CollectiveOp::kAllReduce) {
        double se = 0, sn = 0;
        const double denom = static_cast<double>(o.seeds) * ranks;
        for (uint64_t i = 0; i < elements; ++i) {
          double exact = 0;
          for (uint32_t r = 0; r < ranks; ++r) exact += inputs[si][r % readers][i];
          const double d = mean_out[si][i] / denom - exact;
          se += d * d;
          sn += exact * exact;
        }
        row.bias = se == 0 ? 0 : se / sn;
        for (const auto& e : layer_sum[si]) row.layer_vnmse.push_back(ratio(e));
      }
      for (uint32_t h = 1; h <= ranks; ++h)
        row.hop_vnmse.push_back(hop_sum[si][h].sq_norm > 0 || hop_sum[si][h].sq_error > 0
                                    ? ratio(hop_sum[si][h])
                                    : std::numeric_limits<double>::quiet_NaN());
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

namespace {

std::string fmt_value(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return "inf";
  return fmt::format("{:.4e}", v);
}

}  // namespace

std::string format_vnmse(const VnmseReport& report, bool detail) {
  std::string out;
  out += fmt::format("gradients   {}\n", report.gradients_desc);
  out += fmt::format("collective  {}, {} entries per rank\n", report.collective_desc, report.elements);
  if (!report.sampling_note.empty()) out += fmt::format("sampling    {}\n", report.sampling_note);
  for (const SuperGroupSkew& s : report.skew)
    out += fmt::format("energy      step {}: the largest 10/30/50% of the {} super-groups (256 entries) hold "
                       "{:.1f}/{:.1f}/{:.1f}% of the sum of squares; {:.1f}% are below 1/100 of the median; "
                       "the smallest half of the summed gradient's super-groups hold {:.3g}% of its energy\n",
                       s.step, s.super_groups, 100 * s.top10, 100 * s.top30, 100 * s.top50, 100 * s.below_median_100,
                       100 * s.sum_low50);
  out += "\n";
  size_t width = 6;
  for (const auto& r : report.rows) width = std::max(width, r.label.size());
  out += fmt::format("{:<{}} {:>6} {:>11} {:>10} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9} {:>8}\n", "scheme", width,
                     "step", "vNMSE", "+-std", "worst rank", "MSE", "bias", "bias floor", "bits/ent", "plan B/r",
                     "unbiased");
  for (const auto& r : report.rows)
    out += fmt::format("{:<{}} {:>6} {:>11} {:>10} {:>11} {:>11} {:>11} {:>11} {:>9.3f} {:>9} {:>8}\n", r.label, width,
                       r.step, fmt_value(r.vnmse), fmt::format("{:.2e}", r.vnmse_std), fmt_value(r.vnmse_max_rank),
                       fmt_value(r.mse), fmt_value(r.bias), fmt_value(r.bias_floor), r.bits_per_entry,
                       r.plan_bytes_per_rank, r.unbiased ? "yes" : "no");
  if (!detail) return out;
  for (const auto& r : report.rows) {
    out += fmt::format("\n{} at step {}: vNMSE per hop depth (what each hop's encoding loses, relative to what it "
                       "encodes)\n",
                       r.label, r.step);
    for (size_t h = 0; h < r.hop_vnmse.size(); ++h)
      if (!std::isnan(r.hop_vnmse[h])) out += fmt::format("  depth {:>4}  {}\n", h + 1, fmt_value(r.hop_vnmse[h]));
    if (r.layer_vnmse.empty()) continue;
    out += fmt::format("{} at step {}: vNMSE per layer\n", r.label, r.step);
    for (size_t l = 0; l < r.layer_vnmse.size(); ++l)
      out += fmt::format("  {:<40} {}\n", report.layer_names[l], fmt_value(r.layer_vnmse[l]));
  }
  return out;
}

std::string vnmse_csv(const VnmseReport& report) {
  std::string out = "scheme,params,step,kind,index,name,vnmse,vnmse_std,vnmse_max_rank,mse,bias,bias_floor,"
                    "bits_per_entry,plan_bytes_per_rank,wire_bytes,unbiased\n";
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  auto num = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.9g}", v); };
  for (const auto& r : report.rows) {
    const std::string head = fmt::format("{},{},{}", quoted(r.label), quoted(r.params.dump()), r.step);
    out += fmt::format("{},overall,,,{},{},{},{},{},{},{},{},{},{}\n", head, num(r.vnmse), num(r.vnmse_std),
                       num(r.vnmse_max_rank), num(r.mse), num(r.bias), num(r.bias_floor), num(r.bits_per_entry),
                       r.plan_bytes_per_rank, r.wire_bytes, r.unbiased ? 1 : 0);
    for (size_t l = 0; l < r.layer_vnmse.size(); ++l)
      out += fmt::format("{},layer,{},{},{},,,,,,,,,\n", head, l, quoted(report.layer_names[l]), num(r.layer_vnmse[l]));
    for (size_t h = 0; h < r.hop_vnmse.size(); ++h)
      if (!std::isnan(r.hop_vnmse[h])) out += fmt::format("{},hop,{},,{},,,,,,,,,\n", head, h + 1, num(r.hop_vnmse[h]));
  }
  return out;
}

}  // namespace ccsim::app
