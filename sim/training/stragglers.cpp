#include "sim/training/stragglers.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>

#include "kernels/philox.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/json_text.hpp"

namespace ccsim::sim {
namespace {

using nlohmann::json;

// Stream of the straggler draws (kernels use small stream ids; this one is reserved).
constexpr uint32_t kStragglerStream = 0xA11CE;

// A double uniform on (0, 1) from 64 random bits.
double unit_open(const kern::RngKey& key, uint64_t index) {
  const uint64_t hi = kern::random_bits_at(key, 2 * index), lo = kern::random_bits_at(key, 2 * index + 1);
  const uint64_t bits53 = ((hi << 32) | lo) >> 11;
  return (static_cast<double>(bits53) + 0.5) * 0x1.0p-53;
}

}  // namespace

Result<EmpiricalCdf> EmpiricalCdf::load(const std::filesystem::path& path) {
  const std::string f = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open the straggler CDF file", f));
  std::stringstream ss;
  ss << in.rdbuf();
  CCSIM_ASSIGN_OR_RETURN(const json doc, parse_json_text(ss.str(), f));
  auto err = [&](const std::string& ptr, const std::string& expected, const json& got) {
    return invalid_argument(fmt::format("{}: {}: expected {}, got {}", f, ptr, expected, describe_json(got)));
  };
  if (!doc.is_object()) return err("/", "an object", doc);
  for (const auto& [k, v] : doc.items())
    if (k != "format" && k != "version" && k != "unit" && k != "description" && k != "points")
      return invalid_argument(
          fmt::format("{}: /{}: unknown key (expected format, version, unit, description, points)", f, k));
  for (const char* key : {"format", "version", "points"})
    if (!doc.contains(key)) return invalid_argument(fmt::format("{}: /{}: missing required key", f, key));
  if (doc["format"] != "ccsim-straggler-cdf") return err("/format", "\"ccsim-straggler-cdf\"", doc["format"]);
  if (doc["version"] != 1) return err("/version", "1", doc["version"]);
  EmpiricalCdf cdf;
  if (doc.contains("description")) {
    if (!doc["description"].is_string()) return err("/description", "a string", doc["description"]);
    cdf.description = doc["description"].get<std::string>();
  }
  if (!doc["points"].is_array() || doc["points"].size() < 2)
    return err("/points", "an array of at least two [value, probability] pairs", doc["points"]);
  const json& pts = doc["points"];
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string p = fmt::format("/points/{}", i);
    const json& e = pts[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number())
      return err(p, "a [value, probability] pair of numbers", e);
    const double v = e[0].get<double>(), q = e[1].get<double>();
    if (!std::isfinite(v) || v <= 0) return err(p + "/0", "a positive finite value", e[0]);
    if (!(q >= 0 && q <= 1)) return err(p + "/1", "a probability in [0, 1]", e[1]);
    if (i > 0 && v <= cdf.values.back())
      return err(p + "/0", fmt::format("a value above the previous one ({})", cdf.values.back()), e[0]);
    if (i > 0 && q < cdf.probs.back())
      return err(p + "/1", fmt::format("a probability not below the previous one ({})", cdf.probs.back()), e[1]);
    cdf.values.push_back(v);
    cdf.probs.push_back(q);
  }
  if (cdf.probs.front() != 0) return err("/points/0/1", "0 (the CDF starts at probability 0)", pts[0][1]);
  if (cdf.probs.back() != 1)
    return err(fmt::format("/points/{}/1", pts.size() - 1), "1 (the CDF ends at probability 1)", pts.back()[1]);
  return cdf;
}

double EmpiricalCdf::quantile(double u) const {
  u = std::clamp(u, 0.0, 1.0);
  // First point with probability >= u; interpolate on the piece before it.
  const auto it = std::lower_bound(probs.begin(), probs.end(), u);
  const size_t k = static_cast<size_t>(it - probs.begin());
  if (k == 0) return values.front();
  const double dp = probs[k] - probs[k - 1];
  if (dp <= 0) return values[k];
  return values[k - 1] + (u - probs[k - 1]) / dp * (values[k] - values[k - 1]);
}

double EmpiricalCdf::mean() const {
  double m = 0;
  for (size_t k = 1; k < values.size(); ++k) m += (probs[k] - probs[k - 1]) * 0.5 * (values[k] + values[k - 1]);
  return m;
}

std::vector<Diagnostic> StragglerModel::problems(const StragglerSpec& spec, uint32_t workers) {
  std::vector<Diagnostic> out;
  if (spec.model == StragglerKind::kEmpirical && spec.cdf_file.empty() && spec.cdf.values.empty())
    out.push_back({"/file", "the empirical model needs a CDF file, got none"});
  for (size_t i = 0; i < spec.slow_workers.size(); ++i)
    if (spec.slow_workers[i] >= workers)
      out.push_back({fmt::format("/workers/{}", i),
                     fmt::format("expected a worker below {}, got {}", workers, spec.slow_workers[i])});
  if (spec.model == StragglerKind::kUniform && spec.low > spec.high)
    out.push_back({"/high", fmt::format("expected at least low ({}), got {}", spec.low, spec.high)});
  return out;
}

Result<StragglerModel> StragglerModel::make(StragglerSpec spec, uint64_t seed) {
  if (spec.model == StragglerKind::kEmpirical && spec.cdf.values.empty() && !spec.cdf_file.empty()) {
    auto cdf = EmpiricalCdf::load(spec.cdf_file);
    if (!cdf.ok()) return invalid_argument_at("/file", cdf.status().message());
    spec.cdf = std::move(*cdf);
  }
  switch (spec.model) {
    case StragglerKind::kUniform:
      if (!(spec.low > 0) || !(spec.high >= spec.low))
        return invalid_argument(fmt::format("stragglers: uniform needs 0 < low <= high, got low {} and high {}",
                                            spec.low, spec.high));
      break;
    case StragglerKind::kLognormal:
      if (!(spec.sigma >= 0 && spec.sigma <= 5))
        return invalid_argument(fmt::format("stragglers: lognormal sigma must be in [0, 5], got {}", spec.sigma));
      break;
    case StragglerKind::kEmpirical:
      if (spec.cdf.values.size() < 2) return invalid_argument("stragglers: empirical needs a CDF file");
      break;
    case StragglerKind::kPersistent:
      if (!(spec.slow_factor > 0))
        return invalid_argument(
            fmt::format("stragglers: persistent factor must be positive, got {}", spec.slow_factor));
      break;
    case StragglerKind::kNone: break;
  }
  StragglerModel model;
  model.spec_ = std::move(spec);
  model.seed_ = seed;
  if (model.spec_.model == StragglerKind::kEmpirical) model.cdf_mean_ = model.spec_.cdf.mean();
  return model;
}

double StragglerModel::factor(uint32_t round, uint32_t worker) const {
  const StragglerKind m = spec_.model;
  if (m == StragglerKind::kNone) return 1.0;
  if (m == StragglerKind::kPersistent) {
    return std::find(spec_.slow_workers.begin(), spec_.slow_workers.end(), worker) != spec_.slow_workers.end()
               ? spec_.slow_factor
               : 1.0;
  }
  const kern::RngKey key{seed_, round, worker, kStragglerStream};
  const double u = unit_open(key, 0);
  if (m == StragglerKind::kUniform) return spec_.low + (spec_.high - spec_.low) * u;
  if (m == StragglerKind::kLognormal) {
    // Box-Muller from two independent uniforms.
    const double z = std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * unit_open(key, 1));
    return std::exp(spec_.sigma * z - 0.5 * spec_.sigma * spec_.sigma);
  }
  return spec_.cdf.quantile(u) / cdf_mean_;  // empirical
}

double StragglerModel::mean() const {
  if (spec_.model == StragglerKind::kUniform) return 0.5 * (spec_.low + spec_.high);
  return 1.0;  // none, lognormal and empirical by construction; persistent: per worker
}

std::string StragglerModel::describe() const {
  switch (spec_.model) {
    case StragglerKind::kUniform: return fmt::format("uniform U[{}, {}] per round and worker", spec_.low, spec_.high);
    case StragglerKind::kLognormal:
      return fmt::format("lognormal (sigma {}, mean 1) per round and worker", spec_.sigma);
    case StragglerKind::kEmpirical:
      return fmt::format("empirical CDF ({} points, {}..{}, mean {:.4g}), normalized to mean 1",
                         spec_.cdf.values.size(), spec_.cdf.values.front(), spec_.cdf.values.back(), cdf_mean_);
    case StragglerKind::kPersistent:
      return fmt::format("persistent: workers [{}] {}x slower", fmt::join(spec_.slow_workers, ","), spec_.slow_factor);
    case StragglerKind::kNone: break;
  }
  return "none";
}

}  // namespace ccsim::sim
