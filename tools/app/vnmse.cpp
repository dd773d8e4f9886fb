#include "tools/app/vnmse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/registry.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/units.hpp"
#include "traces/dump_sample.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// What the options say to measure on, before the schemes run.
struct Input {
  std::vector<algo::LayerShape> layout;
  std::vector<uint64_t> steps;
  std::vector<std::vector<std::vector<float>>> inputs;  // [step][worker]
};

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

// The dumped steps asked for (all of them by default), as indices.
Result<std::vector<size_t>> dump_steps(const traces::GradientDump& dump, const VnmseOptions& o) {
  std::vector<size_t> steps;
  if (o.steps.empty())
    for (size_t i = 0; i < dump.steps(); ++i) steps.push_back(i);
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
  return steps;
}

Status load_dump(const VnmseOptions& o, uint32_t& ranks, VnmseReport& report, Input& in) {
  CCSIM_ASSIGN_OR_RETURN(const traces::GradientDump dump, traces::GradientDump::open(o.gradients));
  if (ranks == 0) ranks = dump.workers();
  if (ranks < 2) return invalid_argument(fmt::format("--ranks: expected at least 2, got {}", ranks));
  CCSIM_ASSIGN_OR_RETURN(const std::vector<size_t> steps, dump_steps(dump, o));
  for (size_t si : steps) in.steps.push_back(dump.step_info()[si].step);
  const traces::DumpSample sample = traces::sample_dump(dump, o.max_elements, o.bucket, o.seed);
  report.sampling_note = sample.note;
  uint64_t elements = 0;
  for (const traces::DumpPiece& p : sample.pieces) {
    in.layout.push_back({elements, p.count, p.rows, p.cols});
    const traces::GradientLayer& layer = dump.layers()[p.layer];
    report.layer_names.push_back(sample.note.empty() ? layer.name
                                                     : fmt::format("{}@{}", layer.name, p.offset - layer.offset));
    elements += p.count;
  }
  report.elements = elements;
  report.gradients_desc =
      fmt::format("{}: {} workers, {} entries per worker, {} layers, steps {}; {}", o.gradients, dump.workers(),
                  dump.elements(), dump.layers().size(), steps.size(), dump.provenance().model);
  // Rank r reads worker r mod W.
  const uint32_t readers = std::min(ranks, dump.workers());
  in.inputs.assign(steps.size(), std::vector<std::vector<float>>(readers));
  for (size_t si = 0; si < steps.size(); ++si)
    for (uint32_t w = 0; w < readers; ++w) {
      CCSIM_ASSIGN_OR_RETURN(in.inputs[si][w], traces::read_sample(dump, sample, w, steps[si]));
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

Status load_synthetic(const VnmseOptions& o, uint32_t& ranks, VnmseReport& report, Input& in) {
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
  in.inputs.assign(1, std::vector<std::vector<float>>(ranks, std::vector<float>(n)));
  if (o.structure.empty()) {
    in.layout.push_back(whole);
    report.layer_names.push_back("normal");
    report.gradients_desc = fmt::format("synthetic: i.i.d. N(0,1), shape {}, drawn per rank", o.synthetic);
    for (uint32_t r = 0; r < ranks; ++r) {
      float* v = in.inputs[0][r].data();
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
  std::vector<std::span<float>> views(in.inputs[0].begin(), in.inputs[0].end());
  traces::generate_synthetic_gradients(spec, kDataSeed, views);
  const std::vector<uint64_t> off = traces::synthetic_layer_offsets(spec, kDataSeed);
  for (size_t l = 0; l + 1 < off.size(); ++l) {
    in.layout.push_back(off.size() == 2 ? whole : algo::LayerShape{off[l], off[l + 1] - off[l], off[l + 1] - off[l], 1});
    report.layer_names.push_back(fmt::format("layer{}", l));
  }
  report.gradients_desc = fmt::format(
      "synthetic: shape {} per rank, {} layer(s) with scales over {} decades, correlation {} between ranks, "
      "lognormal envelope sigma {} per {} entries{}",
      o.synthetic, in.layout.size(), spec.scale_decades, spec.correlation, spec.envelope_sigma, spec.envelope_span,
      spec.envelope_correlation < 1.0 ? fmt::format(", correlated {} between ranks", spec.envelope_correlation)
                                      : std::string());
  return ok_status();
}

// The tensor as one bucket (no --ddp-bucket), or PyTorch DDP's bucketing of its layers.
Result<std::vector<algo::TensorBucket>> tensor_buckets(const VnmseOptions& o, const std::vector<algo::LayerShape>& layout,
                                                       uint64_t elements, std::string& desc) {
  if (o.ddp_bucket.empty()) {
    if (!o.ddp_first_bucket.empty()) return invalid_argument("--ddp-first-bucket: give --ddp-bucket with it");
    return std::vector<algo::TensorBucket>{{0, elements, layout, 0}};
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
  std::vector<algo::TensorBucket> out = algo::ddp_tensor_buckets(layout, cap, first);
  uint64_t largest = 0;
  for (const algo::TensorBucket& b : out) largest = std::max(largest, b.count);
  desc = fmt::format(", each of {} DDP buckets of at least {}{} (the largest {} entries) on its own", out.size(),
                     format_quantity(static_cast<double>(cap), UnitKind::kBytes),
                     first > 0 ? fmt::format(", the first {}", format_quantity(static_cast<double>(first),
                                                                                   UnitKind::kBytes))
                               : std::string(),
                     largest);
  return out;
}

// The schemes of the --algo options, each made once to check its parameters.
Result<std::vector<algo::StudyScheme>> parse_schemes(const VnmseOptions& o) {
  std::vector<algo::StudyScheme> schemes;
  for (const std::string& a : o.algos) {
    algo::StudyScheme s;
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
  return schemes;
}

// Whether every scheme can run on every bucket of the collective, whatever the data.
Status check_schemes(const std::vector<algo::StudyScheme>& schemes, const algo::ErrorStudy& st, const VnmseOptions& o,
                     const std::vector<std::string>& layer_names) {
  for (const algo::StudyScheme& scheme : schemes)
    for (const algo::TensorBucket& bucket : st.buckets) {
      auto comp = algo::CompressorRegistry::global().create(scheme.name, scheme.params);
      CCSIM_RETURN_IF_ERROR(comp.status());
      (*comp)->set_layout(bucket.layout);
      Status bad = algo::CompressedCollective::check_scheme(**comp, st.collective->operation, st.ranks, bucket.count)
                       .with_context(fmt::format("--algo {}", scheme.label));
      if (bad.ok()) {
        bad = algo::CompressedCollective::check_collective(**comp, *st.collective, st.ranks, bucket.count, st.base);
        if (!bad.ok()) bad = invalid_argument(fmt::format("--collective {}: {}", o.algorithm, bad.message()));
      }
      if (bad.ok() || st.buckets.size() == 1) CCSIM_RETURN_IF_ERROR(bad);
      // Which bucket a scheme or collective could not handle (a small one may be below its alignment).
      const uint32_t last = bucket.first_layer + static_cast<uint32_t>(bucket.layout.size()) - 1;
      return bad.with_context(fmt::format("--ddp-bucket: the bucket of entries [{}, {}) ({}{})", bucket.offset,
                                          bucket.offset + bucket.count, layer_names.at(bucket.first_layer),
                                          last > bucket.first_layer ? " .. " + layer_names.at(last) : std::string()));
    }
  return ok_status();
}

Status check_options(const VnmseOptions& o) {
  if (o.algos.empty()) return invalid_argument("--algo: give at least one compression scheme (see `ccsim list`)");
  if (o.seeds == 0) return invalid_argument("--seeds: expected at least 1");
  if (o.warmup > 10000) return invalid_argument(fmt::format("--warmup: expected at most 10000 rounds, got {}", o.warmup));
  if (o.max_elements == 0 || o.bucket == 0) return invalid_argument("--max-elements and --bucket must be positive");
  if (!o.structure.empty() && o.synthetic.empty())
    return invalid_argument("--structure: shapes synthetic entries; give --synthetic with it");
  if (!o.synthetic.empty() && !o.gradients.empty()) return invalid_argument("--synthetic and --gradients: give one of them");
  if (o.synthetic.empty() && o.gradients.empty())
    return invalid_argument("--gradients: give a gradient dump directory (or --synthetic)");
  return ok_status();
}

}  // namespace

Result<VnmseReport> run_vnmse(const VnmseOptions& o) {
  CCSIM_RETURN_IF_ERROR(check_options(o));
  CCSIM_ASSIGN_OR_RETURN(const std::vector<algo::StudyScheme> schemes, parse_schemes(o));
  VnmseReport report;
  Input in;
  uint32_t ranks = o.ranks;
  if (!o.synthetic.empty()) {
    CCSIM_RETURN_IF_ERROR(load_synthetic(o, ranks, report, in));
    in.steps = {0};
  } else {
    CCSIM_RETURN_IF_ERROR(load_dump(o, ranks, report, in));
  }
  const auto readers = static_cast<uint32_t>(in.inputs.front().size());
  CCSIM_ASSIGN_OR_RETURN(const topo::CollectiveInfo* collective, topo::find_collective(o.operation, o.algorithm));
  report.ranks = ranks;
  for (size_t si = 0; si < in.steps.size(); ++si)
    report.skew.push_back(algo::super_group_skew(in.steps[si], in.inputs[si], ranks));
  std::string buckets_desc;
  algo::ErrorStudy st;
  st.collective = collective;
  st.ranks = ranks;
  st.seeds = o.seeds;
  st.seed = o.seed;
  st.warmup = o.warmup;
  st.layout = in.layout;
  st.steps = in.steps;
  st.base.segments = o.segments;
  st.base.gpus_per_node = o.gpus_per_node;
  CCSIM_ASSIGN_OR_RETURN(st.buckets, tensor_buckets(o, in.layout, report.elements, buckets_desc));
  report.buckets = st.buckets.size();
  report.collective_desc = fmt::format(
      "{}/{} on {} ranks{}{}{}", o.operation, o.algorithm, ranks,
      ranks > readers ? fmt::format(" (rank r reads worker r mod {})", readers) : "", buckets_desc,
      o.warmup > 0 ? fmt::format(", round {} measured after {} warm-up rounds on each step", o.warmup, o.warmup) : "");
  CCSIM_RETURN_IF_ERROR(check_schemes(schemes, st, o, report.layer_names));
  st.inputs = std::move(in.inputs);
  CCSIM_ASSIGN_OR_RETURN(report.rows, algo::study_errors(schemes, st));
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
