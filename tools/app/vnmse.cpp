#include "tools/app/vnmse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "algorithms/registry.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/json_text.hpp"
#include "sim/base/units.hpp"
#include "tools/app/outputs.hpp"

namespace ccsim::app {
namespace {

using nlohmann::json;

// "k=v": v as JSON if it parses (numbers, booleans), else as a string.
Status parse_param(const std::string& text, json& into, const std::string& where) {
  CCSIM_RETURN_IF_ERROR(check_utf8(text, where));
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(fmt::format("{}: expected KEY=VALUE, got '{}'", where, text));
  const std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  CCSIM_RETURN_IF_ERROR(check_json_depth(value, where));
  json v = json::parse(value, nullptr, false);
  into[key] = v.is_discarded() ? json(value) : v;
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
  json fields = json::object();
  for (const std::string& kv : comma_items(text)) CCSIM_RETURN_IF_ERROR(parse_param(kv, fields, "--structure"));
  traces::SyntheticGradientSpec spec;
  Diagnostics diag;
  const std::filesystem::path here;
  FieldReader reader(fields, "", diag, here);
  visit(reader, spec);
  reader.finish();
  if (!diag.empty()) return diag.to_status("--structure");
  return spec;
}

// --synthetic "ROWSxCOLS" or "N" (and --structure) into the request.
Status parse_synthetic(const VnmseOptions& o, algo::ErrorRequest& r) {
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
    return invalid_argument(
        fmt::format("--synthetic: expected ROWSxCOLS or N (positive, at most 2^34 entries), got '{}'", o.synthetic));
  r.rows = rows;
  r.cols = cols;
  r.matrix = x != std::string::npos;
  r.shape_text = o.synthetic;
  if (!o.structure.empty()) {
    CCSIM_ASSIGN_OR_RETURN(r.structure, parse_structure(o.structure));
  }
  return ok_status();
}

// --ddp-bucket / --ddp-first-bucket: sizes of at least one byte.
Status parse_ddp(const VnmseOptions& o, algo::ErrorRequest& r) {
  if (o.ddp_bucket.empty()) {
    if (!o.ddp_first_bucket.empty()) return invalid_argument("--ddp-first-bucket: give --ddp-bucket with it");
    return ok_status();
  }
  auto size = [](const std::string& text, const char* option) -> Result<uint64_t> {
    auto q = parse_quantity(text, UnitKind::kBytes);
    if (!q.ok() || !(*q >= 1.0) || *q > 0x1p62)
      return invalid_argument(fmt::format("{}: expected a size of at least 1 byte such as 25MB or 1MiB, got '{}'",
                                          option, text));
    return static_cast<uint64_t>(*q);
  };
  CCSIM_ASSIGN_OR_RETURN(r.ddp_cap, size(o.ddp_bucket, "--ddp-bucket"));
  if (!o.ddp_first_bucket.empty()) {
    CCSIM_ASSIGN_OR_RETURN(r.ddp_first, size(o.ddp_first_bucket, "--ddp-first-bucket"));
  }
  return ok_status();
}

// The schemes of the --algo options, each made once to check its parameters.
Result<std::vector<algo::StudyScheme>> parse_schemes(const VnmseOptions& o) {
  std::vector<algo::StudyScheme> schemes;
  for (const std::string& a : o.algos) {
    algo::StudyScheme s;
    const size_t colon = a.find(':');
    s.name = a.substr(0, colon);
    s.params = json::object();
    auto add = [&](const std::string& kv, const std::string& where) -> Status {
      return parse_param(kv, s.params, where);
    };
    if (colon != std::string::npos)
      for (const std::string& kv : comma_items(a.substr(colon + 1))) CCSIM_RETURN_IF_ERROR(add(kv, "--algo " + a));
    for (const std::string& kv : o.params) CCSIM_RETURN_IF_ERROR(add(kv, "--param"));
    auto made = algo::CompressorRegistry::global().create(s.name, s.params);
    if (!made.ok()) return made.status().with_context("--algo " + a);
    Diagnostics diag;
    s.resolved = algo::CompressorRegistry::global().find(s.name)->params.resolve(s.params, "/params", diag);
    s.label = algo::scheme_label(s.name, s.params);
    schemes.push_back(std::move(s));
  }
  return schemes;
}

Status check_options(const VnmseOptions& o) {
  if (o.algos.empty()) return invalid_argument("--algo: give at least one compression scheme (see `ccsim list`)");
  if (o.seeds == 0) return invalid_argument("--seeds: expected at least 1");
  if (o.warmup > 10000)
    return invalid_argument(fmt::format("--warmup: expected at most 10000 rounds, got {}", o.warmup));
  if (o.max_elements == 0 || o.bucket == 0) return invalid_argument("--max-elements and --bucket must be positive");
  if (!o.structure.empty() && o.synthetic.empty())
    return invalid_argument("--structure: shapes synthetic entries; give --synthetic with it");
  if (!o.synthetic.empty() && !o.gradients.empty())
    return invalid_argument("--synthetic and --gradients: give one of them");
  if (o.synthetic.empty() && o.gradients.empty())
    return invalid_argument("--gradients: give a gradient dump directory (or --synthetic)");
  return ok_status();
}

}  // namespace

Result<VnmseReport> run_vnmse(const VnmseOptions& o) {
  CCSIM_RETURN_IF_ERROR(check_options(o));
  algo::ErrorRequest r;
  CCSIM_ASSIGN_OR_RETURN(r.schemes, parse_schemes(o));
  if (!o.synthetic.empty()) CCSIM_RETURN_IF_ERROR(parse_synthetic(o, r));
  CCSIM_RETURN_IF_ERROR(parse_ddp(o, r));
  r.dump = o.gradients;
  r.steps = o.steps;
  r.max_elements = o.max_elements;
  r.bucket = o.bucket;
  r.operation = o.operation;
  r.algorithm = o.algorithm;
  r.ranks = o.ranks;
  r.seeds = o.seeds;
  r.seed = o.seed;
  r.warmup = o.warmup;
  r.base.segments = o.segments;
  r.base.gpus_per_node = o.gpus_per_node;
  auto report = algo::measure_errors(r);
  if (report.ok() || report.status().pointer().empty()) return report;
  // The request field an error is about, as its option ("/ddp_bucket" -> "--ddp-bucket").
  std::string option = "--" + report.status().pointer().substr(1);
  std::replace(option.begin(), option.end(), '_', '-');
  if (option == "--collective") option += " " + o.algorithm;
  return Status(report.status().code(), fmt::format("{}: {}", option, report.status().detail()));
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
  std::string out = "label,scheme,params,step,kind,index,name,vnmse,vnmse_std,vnmse_max_rank,mse,bias,bias_floor,"
                    "bits_per_entry,payload_bits_per_entry,metadata_bits_per_entry,plan_bits_per_entry,"
                    "plan_bytes_per_rank,wire_bytes,unbiased\n";
  constexpr int kAfterVnmse = 12;  // the columns after vnmse, empty on layer and hop rows
  auto num = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.9g}", v); };
  for (const auto& r : report.rows) {
    const std::string head =
        fmt::format("{},{},{},{}", csv_field(r.label), r.scheme, csv_field(r.params.dump()), r.step);
    out += fmt::format("{},overall,,,{},{},{},{},{},{},{},{},{},{},{},{},{}\n", head, num(r.vnmse), num(r.vnmse_std),
                       num(r.vnmse_max_rank), num(r.mse), num(r.bias), num(r.bias_floor), num(r.bits_per_entry),
                       num(r.payload_bits), num(r.metadata_bits), num(r.plan_bits), r.plan_bytes_per_rank,
                       r.wire_bytes, r.unbiased ? 1 : 0);
    const std::string blanks(kAfterVnmse, ',');
    for (size_t l = 0; l < r.layer_vnmse.size(); ++l)
      out += fmt::format("{},layer,{},{},{}{}\n", head, l, csv_field(report.layer_names[l]), num(r.layer_vnmse[l]),
                         blanks);
    for (size_t h = 0; h < r.hop_vnmse.size(); ++h)
      if (!std::isnan(r.hop_vnmse[h])) out += fmt::format("{},hop,{},,{}{}\n", head, h + 1, num(r.hop_vnmse[h]), blanks);
  }
  return out;
}

}  // namespace ccsim::app
