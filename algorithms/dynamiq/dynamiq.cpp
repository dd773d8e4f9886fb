#include "algorithms/dynamiq/dynamiq.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/parallel.hpp"
#include "kernels/quant/dynamiq_cpu.hpp"
#include "kernels/stats/block_sums.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace {

// `in` itself, or a copy of it held in `held` where it overlaps `out`: prepare() and finish()
// permute super-groups, which cannot run in place.
std::span<const float> unaliased(std::span<const float> in, std::span<const float> out, std::vector<float>& held) {
  const std::less<const float*> before;
  const bool overlap = before(in.data(), out.data() + out.size()) && before(out.data(), in.data() + in.size());
  if (!overlap) return in;
  held.assign(in.begin(), in.end());
  return held;
}

DynamiqCompressor::Options options_from(const Params& p) {
  DynamiqCompressor::Options o;
  o.budget = p.get_number("budget");
  o.group = static_cast<uint32_t>(p.get_int("group"));
  o.super_group = static_cast<uint32_t>(p.get_int("super_group"));
  o.widths = p.get_string("widths") == "1-2-4-8-16" ? std::vector<uint32_t>{1, 2, 4, 8, 16} : std::vector<uint32_t>{2, 4, 8};
  o.nonuniform = p.get_string("values") == "nonuniform";
  o.eps4 = p.get_number("eps4");
  o.eps8 = p.get_number("eps8");
  o.eps16 = p.get_number("eps16");
  o.variable = p.get_bool("variable");
  o.hierarchical = p.get_bool("hierarchical");
  o.correlated = p.get_bool("correlated");
  o.subtract_mean = p.get_bool("subtract_mean");
  o.reorder = p.get_bool("reorder");
  return o;
}

// Per-bit benefit of raising a super-group from a to b bits (§3.2): (4^(b-a) - 1) / (4^b (b - a)).
double log2_benefit(uint32_t a, uint32_t b) {
  return std::log2(std::exp2(2.0 * (b - a)) - 1.0) - 2.0 * b - std::log2(static_cast<double>(b - a));
}

// The payload bits Σ_j m_j · W[k_j] of the widths at log2 C = L, where k_j counts the thresholds
// L − b_0, L − b_1, ... that log2 F_j reaches before the first it misses, answered from the
// super-groups sorted by log2 F instead of a pass over them: k_j > k exactly when log2 F_j is at
// least max(L − b_0, ..., L − b_k), so the bits are W[0]·Σ m + Σ_k (W[k+1] − W[k])·(Σ m_j over
// those super-groups). Every term is an integer far below 2^53, so the sum is exact and equals the
// pass's in any order.
class WidthBits {
 public:
  WidthBits(const std::vector<double>& log2F, const std::vector<uint64_t>& m) : suffix_(m.size() + 1, 0.0) {
    std::vector<uint32_t> by(m.size());
    for (uint32_t j = 0; j < by.size(); ++j) by[j] = j;
    std::sort(by.begin(), by.end(), [&](uint32_t a, uint32_t b) { return log2F[a] < log2F[b]; });
    sorted_.resize(m.size());
    for (size_t i = m.size(); i-- > 0;) {
      sorted_[i] = log2F[by[i]];
      suffix_[i] = suffix_[i + 1] + static_cast<double>(m[by[i]]);
    }
  }

  double at(double L, const std::vector<double>& log2_benefits, const std::vector<uint32_t>& W) const {
    double bits = suffix_[0] * W[0], reach = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < log2_benefits.size(); ++k) {
      reach = std::max(reach, L - log2_benefits[k]);
      const auto first = std::lower_bound(sorted_.begin(), sorted_.end(), reach) - sorted_.begin();
      bits += suffix_[static_cast<size_t>(first)] * (static_cast<double>(W[k + 1]) - static_cast<double>(W[k]));
    }
    return bits;
  }

 private:
  std::vector<double> sorted_;  // log2 F ascending
  std::vector<double> suffix_;  // suffix_[i]: Σ m over sorted positions i, i + 1, ...
};

}  // namespace

CompressorInfo DynamiqCompressor::info() {
  ParamTable params;
  params.add_number("budget", "bits per entry including all metadata (scales and the metadata phase)", 5.0, 1.0, 32.0)
      .add_int("group", "entries per group sharing a scale (s)", 16, 2, 4096, true)
      .add_int("super_group", "entries per super-group sharing a bit width and mean (S)", 256, 4, 65536, true)
      .add_choice("widths", "allowed bit widths W", "2-4-8", {"2-4-8", "1-2-4-8-16"})
      .add_choice("values", "magnitude grid: nonuniform f(eps, r) or uniform", "nonuniform", {"nonuniform", "uniform"})
      .add_number("eps4", "epsilon of the 4-bit non-uniform grid", 0.2, 0.0, 4.0)
      .add_number("eps8", "epsilon of the 8-bit non-uniform grid", 0.04, 0.0, 4.0)
      .add_number("eps16", "epsilon of the 16-bit non-uniform grid", 0.0, 0.0, 4.0)
      .add_bool("variable", "variable bit width per super-group by its norm (false: one width for all)", true)
      .add_bool("hierarchical", "uint8 group scales under a bf16 super-group scale (false: bf16 per group)", true)
      .add_bool("correlated", "correlated stochastic rounding across ranks (u = (pi_i + gamma_i) / n)", true)
      .add_bool("subtract_mean", "subtract each super-group's mean over ranks before the collective", true)
      .add_bool("reorder", "reorder super-groups so equal widths are contiguous", true);
  return {"dynamiq",
          "DynamiQ: per-super-group bit widths {2,4,8} from norms within a budget (default 5 bits incl. metadata), "
          "non-uniform grids, hierarchical scales, correlated rounding; metadata phase of 64 bits/256 entries",
          std::move(params),
          [](const Params& p) { return std::make_unique<DynamiqCompressor>(options_from(p)); },
          [](const Params& p) -> Status {
            const Options o = options_from(p);
            if (o.super_group < 2 * o.group)
              return invalid_argument_at("/super_group", fmt::format("expected at least 2 groups of {} entries, got {}",
                                                  o.group, o.super_group));
            const double payload = o.budget - metadata_bits_per_entry(o);
            if (payload < o.widths.front())
              return invalid_argument_at("/budget", fmt::format(
                  "{} bits per entry leave {:.4g} for values after {:.4g} bits of metadata, below the smallest "
                  "width {}",
                  o.budget, payload, metadata_bits_per_entry(o), o.widths.front()));
            return ok_status();
          }};
}

double DynamiqCompressor::metadata_bits_per_entry(const Options& o) {
  const double scales = o.hierarchical ? (16.0 + 8.0 * (o.super_group / o.group)) / o.super_group : 16.0 / o.group;
  return scales + 64.0 / o.super_group;
}

DynamiqCompressor::DynamiqCompressor(const Options& options) : options_(options) {
  auto grid = [&](uint32_t width, double eps, std::vector<float>& out) {
    out.resize(uint64_t{1} << (width - 1));
    kern::geometric_grid_levels(options_.nonuniform ? eps : 0.0, static_cast<uint32_t>(out.size()), out.data());
  };
  grid(4, options_.eps4, levels4_);
  grid(8, options_.eps8, levels8_);
  grid(16, options_.eps16, levels16_);
}

const float* DynamiqCompressor::levels(uint32_t width) const {
  switch (width) {
    case 2: return kLevels2;
    case 4: return levels4_.data();
    case 8: return levels8_.data();
    case 16: return levels16_.data();
    default: return nullptr;  // 1 bit: no magnitude grid
  }
}

kern::DynamiqSgCoding DynamiqCompressor::coding(uint32_t width) const {
  return kern::DynamiqSgCoding{width, options_.group, options_.hierarchical, levels(width), options_.correlated};
}

uint64_t DynamiqCompressor::sg_count(uint64_t j) const {
  return std::min<uint64_t>(options_.super_group, elements_ - j * options_.super_group);
}

PlanFormat DynamiqCompressor::plan_format(uint64_t elements, uint32_t) const {
  const uint64_t n = (elements + options_.super_group - 1) / options_.super_group;
  return PlanFormat{2 * n, 0, 0, 4};
}

namespace {

// The sums and sums of squares of x's super-groups of S entries into sum[] and sq[]: each
// super-group's own sums in entry order (kern::block_sums), so a piece of whole super-groups gives
// the values the whole tensor gives them.
void super_group_sums(std::span<const float> x, uint64_t S, double* sum, double* sq) {
  const uint64_t n = (x.size() + S - 1) / S;
  kern::parallel_for(n, 64, [&](uint64_t b, uint64_t e) {
    kern::block_sums(x.data() + b * S, std::min<uint64_t>(x.size(), e * S) - b * S, S, sum + b, sq + b);
  });
}

// plan_local() a piece of whole super-groups at a time.
class DynamiqPlanPieces final : public PlanPieces {
 public:
  DynamiqPlanPieces(uint64_t elements, uint64_t S) : S_(S), n_((elements + S - 1) / S), sum_(2 * n_, 0.0) {}
  void add(std::span<const float> x, uint64_t offset) override {
    CCSIM_CHECK(offset % S_ == 0 && (offset + x.size() + S_ - 1) / S_ <= n_, "dynamiq: plan piece [{}, {}) not aligned to {}",
                offset, offset + x.size(), S_);
    super_group_sums(x, S_, sum_.data() + offset / S_, sum_.data() + n_ + offset / S_);
  }
  bool finish(PlanStats& out) override {
    out.sum = std::move(sum_);
    return true;
  }

 private:
  uint64_t S_, n_;
  std::vector<double> sum_;
};

}  // namespace

void DynamiqCompressor::plan_local(std::span<const float> x, uint32_t, const kern::RngKey&, PlanStats& out) const {
  const uint64_t n = (x.size() + options_.super_group - 1) / options_.super_group;
  super_group_sums(x, options_.super_group, out.sum.data(), out.sum.data() + n);
}

std::unique_ptr<PlanPieces> DynamiqCompressor::plan_pieces(uint64_t elements, uint32_t, const kern::RngKey&) const {
  return std::make_unique<DynamiqPlanPieces>(elements, options_.super_group);
}

std::string DynamiqCompressor::plan_local_identity() const {
  return fmt::format("dynamiq super-group sums, S = {}", options_.super_group);
}

Status DynamiqCompressor::plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) {
  const uint64_t S = options_.super_group, n = (elements + S - 1) / S;
  CCSIM_CHECK(combined.sum.size() == 2 * n);
  elements_ = elements;
  ranks_ = ranks;
  mean_.assign(n, 0.0f);
  if (options_.subtract_mean)
    for (uint64_t j = 0; j < n; ++j)
      mean_[j] = static_cast<float>(combined.sum[j] / (static_cast<double>(sg_count(j)) * ranks));

  // Bit widths. The payload's share of the budget: everything but the scales and the metadata
  // phase's 64 bits per super-group, counted exactly (the last super-group may be partial).
  const std::vector<uint32_t>& W = options_.widths;
  double budget_bits = options_.budget * static_cast<double>(elements) - 64.0 * static_cast<double>(n);
  for (uint64_t j = 0; j < n; ++j)
    budget_bits -= 8.0 * static_cast<double>(kern::dynamiq_meta_bytes(sg_count(j), options_.group, options_.hierarchical));
  payload_budget_ = budget_bits / static_cast<double>(elements);
  uint32_t fixed = W.front();
  for (uint32_t w : W)
    if (static_cast<double>(w) * static_cast<double>(elements) <= budget_bits) fixed = w;
  widths_.assign(n, static_cast<uint8_t>(fixed));
  log2_thresholds_.clear();
  if (options_.variable) {
    std::vector<double> log2F(n);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (uint64_t j = 0; j < n; ++j) {
      const double F = combined.sum[n + j];
      log2F[j] = F > 0 ? std::log2(F) : -std::numeric_limits<double>::infinity();
      if (F > 0) {
        lo = std::min(lo, log2F[j]);
        hi = std::max(hi, log2F[j]);
      }
    }
    std::vector<double> log2_benefits;
    for (size_t i = 0; i + 1 < W.size(); ++i) log2_benefits.push_back(log2_benefit(W[i], W[i + 1]));
    // Widths for log2 C = L: the number of thresholds T_i = C / benefit_i at or below F_j.
    auto assign = [&](double L) {
      for (uint64_t j = 0; j < n; ++j) {
        size_t k = 0;
        while (k < log2_benefits.size() && log2F[j] >= L - log2_benefits[k]) ++k;
        widths_[j] = static_cast<uint8_t>(W[k]);
      }
    };
    if (std::isfinite(lo)) {
      // All at the widest at L_lo, all at the narrowest at L_hi; the smallest feasible L wins.
      double L_lo = lo + *std::min_element(log2_benefits.begin(), log2_benefits.end()) - 1.0;
      double L_hi = hi + *std::max_element(log2_benefits.begin(), log2_benefits.end()) + 1.0;
      std::vector<uint64_t> counts(n);
      for (uint64_t j = 0; j < n; ++j) counts[j] = sg_count(j);
      const WidthBits bits_at(log2F, counts);
      if (bits_at.at(L_lo, log2_benefits, W) <= budget_bits) {
        L_hi = L_lo;
      } else {
        for (int it = 0; it < 200 && L_hi - L_lo > 1e-12 * std::max(1.0, std::fabs(L_hi)); ++it) {
          const double mid = 0.5 * (L_lo + L_hi);
          (bits_at.at(mid, log2_benefits, W) <= budget_bits ? L_hi : L_lo) = mid;
        }
      }
      assign(L_hi);
      log2_c_ = L_hi;
      for (double b : log2_benefits) log2_thresholds_.push_back(L_hi - b);
    } else {
      widths_.assign(n, static_cast<uint8_t>(W.front()));  // an all-zero tensor: nothing to spend bits on
    }
  }

  // Reordering: full super-groups sorted by width (stable), the partial one last.
  order_.resize(n);
  for (uint64_t j = 0; j < n; ++j) order_[j] = static_cast<uint32_t>(j);
  const uint64_t full = elements / S;
  if (options_.reorder)
    std::stable_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(full),
                     [&](uint32_t a, uint32_t b) { return widths_[a] < widths_[b]; });
  block_offset_.assign(n + 1, 0);
  meta_offset_.assign(n + 1, 0);
  for (uint64_t k = 0; k < n; ++k) {
    block_offset_[k + 1] = block_offset_[k] + kern::dynamiq_sg_bytes(sg_count(order_[k]), widths_[order_[k]],
                                                                      options_.group, options_.hierarchical);
    meta_offset_[k + 1] =
        meta_offset_[k] + kern::dynamiq_meta_bytes(sg_count(order_[k]), options_.group, options_.hierarchical);
  }
  return ok_status();
}

std::vector<PlanDecision> DynamiqCompressor::plan_decisions() const {
  if (elements_ == 0) return {};
  const std::vector<uint32_t>& W = options_.widths;
  std::vector<PlanDecision> out;
  if (!log2_thresholds_.empty()) {
    std::vector<std::string> parts;
    for (size_t i = 0; i + 1 < W.size(); ++i)
      parts.push_back(fmt::format("log2_T_{}_{}={}", W[i], W[i + 1], log2_thresholds_[i]));
    // App. A's form for W = {2,4,8}: z_j = 4 / log2(512/17) log2 F_j + u, with z = 4 at F = T_{2,4}.
    if (W == std::vector<uint32_t>{2, 4, 8})
      parts.push_back(fmt::format("u={}", 4.0 - 4.0 / std::log2(512.0 / 17.0) * log2_thresholds_[0]));
    out.push_back({"log2_C", log2_c_, fmt::format("{}", fmt::join(parts, " "))});
  }
  double payload = 0;
  std::vector<uint64_t> count(W.size(), 0);
  for (uint64_t j = 0; j < widths_.size(); ++j) {
    payload += static_cast<double>(sg_count(j)) * widths_[j];
    ++count[static_cast<size_t>(std::find(W.begin(), W.end(), widths_[j]) - W.begin())];
  }
  std::vector<std::string> parts = {fmt::format("budget={}", payload_budget_),
                                    fmt::format("budget_total={}", options_.budget),
                                    fmt::format("super_groups={}", widths_.size())};
  for (size_t i = 0; i < W.size(); ++i) parts.push_back(fmt::format("w{}={}", W[i], count[i]));
  out.push_back({"bits", payload / static_cast<double>(elements_), fmt::format("{}", fmt::join(parts, " "))});
  return out;
}

uint64_t DynamiqCompressor::tensor_bits() const {
  return 8 * block_offset_.back();
}

Status DynamiqCompressor::can_implement(const TensorSpec& spec) const {
  if (elements_ == 0) return invalid_argument("dynamiq: no plan committed (run the metadata phase first)");
  const uint64_t S = options_.super_group;
  if (spec.offset % S != 0 || (spec.count % S != 0 && spec.offset + spec.count != elements_) ||
      spec.offset + spec.count > elements_)
    return invalid_argument(fmt::format("dynamiq: chunk [{}, {}) does not fall on super-group boundaries (S={}) of "
                                        "the planned {} entries",
                                        spec.offset, spec.offset + spec.count, S, elements_));
  return ok_status();
}

template <typename Fn>
void DynamiqCompressor::for_each_run(const TensorSpec& spec, Fn&& fn) const {
  CCSIM_CHECK(can_implement(spec).ok(), "{}", can_implement(spec).message());
  const uint64_t S = options_.super_group, k0 = spec.offset / S, k1 = (spec.offset + spec.count + S - 1) / S;
  kern::parallel_for(k1 - k0, kSgRun, [&](uint64_t b, uint64_t e) {
    for (uint64_t k = k0 + b; k < k0 + e; k += kSgRun) fn(k0, k, std::min(k + kSgRun, k0 + e));
  });
}

template <typename Fn>
void DynamiqCompressor::for_each_sg(const TensorSpec& spec, Fn&& fn) const {
  const uint64_t S = options_.super_group;
  for_each_run(spec, [&](uint64_t k0, uint64_t ka, uint64_t kb) {
    for (uint64_t k = ka; k < kb; ++k) {
      const uint32_t j = order_[k];
      fn(k, k * S - spec.offset, sg_count(j), coding(widths_[j]), block_offset_[k] - block_offset_[k0]);
    }
  });
}

template <typename Fn>
void DynamiqCompressor::for_each_sg_drawn(const TensorSpec& spec, const kern::RngKey& key, uint32_t ranks,
                                          Fn&& fn) const {
  const kern::RngKey shared = kern::dynamiq_shared_key(key);
  const uint64_t S = options_.super_group;
  for_each_run(spec, [&](uint64_t k0, uint64_t ka, uint64_t kb) {
    thread_local std::vector<float> u;
    uint64_t entries = 0;
    for (uint64_t k = ka; k < kb; ++k) entries += sg_count(order_[k]);
    u.resize(entries);
    kern::dynamiq_uniforms(key, shared, options_.correlated, key.rank, ranks, ka * S, entries, u.data());
    for (uint64_t k = ka; k < kb; ++k) {
      const uint32_t j = order_[k];
      fn(k, k * S - spec.offset, sg_count(j), coding(widths_[j]), block_offset_[k] - block_offset_[k0],
         u.data() + (k - ka) * S);
    }
  });
}

uint64_t DynamiqCompressor::wire_bytes(const TensorSpec& spec, const HopContext&) const {
  CCSIM_CHECK(can_implement(spec).ok(), "{}", can_implement(spec).message());
  const uint64_t S = options_.super_group;
  return block_offset_[(spec.offset + spec.count + S - 1) / S] - block_offset_[spec.offset / S];
}

uint64_t DynamiqCompressor::payload_bytes(const TensorSpec& spec, const HopContext& hop) const {
  const uint64_t S = options_.super_group, k0 = spec.offset / S, k1 = (spec.offset + spec.count + S - 1) / S;
  return wire_bytes(spec, hop) - (meta_offset_[k1] - meta_offset_[k0]);
}

void DynamiqCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop,
                               const kern::RngKey& key, std::span<uint8_t> out) {
  const uint64_t G = options_.super_group / options_.group;
  for_each_sg_drawn(spec, key, hop.ranks,
                    [&](uint64_t k, uint64_t at, uint64_t m, const kern::DynamiqSgCoding& c, uint64_t byte,
                        const float* u) {
                      kern::dynamiq_encode_sg_drawn(x.data() + at, m, c, key, k * G, u, out.data() + byte);
                    });
}

void DynamiqCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec,
                                                 const HopContext&, std::span<float> acc, const HopContext& hop_out,
                                                 const kern::RngKey& key, std::span<uint8_t> out) {
  const uint64_t G = options_.super_group / options_.group;
  for_each_sg_drawn(spec, key, hop_out.ranks,
                    [&](uint64_t k, uint64_t at, uint64_t m, const kern::DynamiqSgCoding& c, uint64_t byte,
                        const float* u) {
                      kern::dynamiq_decode_sg_table(in.data() + byte, m, c, true, acc.data() + at);
                      kern::dynamiq_encode_sg_drawn(acc.data() + at, m, c, key, k * G, u, out.data() + byte);
                    });
}

void DynamiqCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                               std::span<float> out) {
  for_each_sg(spec, [&](uint64_t, uint64_t at, uint64_t m, const kern::DynamiqSgCoding& c, uint64_t byte) {
    kern::dynamiq_decode_sg_table(in.data() + byte, m, c, false, out.data() + at);
  });
}

void DynamiqCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                          std::span<float> acc) {
  for_each_sg(spec, [&](uint64_t, uint64_t at, uint64_t m, const kern::DynamiqSgCoding& c, uint64_t byte) {
    kern::dynamiq_decode_sg_table(in.data() + byte, m, c, true, acc.data() + at);
  });
}

uint64_t DynamiqCompressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec,
                                         const HopContext& hop) const {
  const uint64_t groups = (spec.count + options_.super_group - 1) / options_.super_group;
  switch (kind) {
    case topo::KernelKind::kPlanLocal: return 4 * spec.count + 16 * groups;
    case topo::KernelKind::kPrepare:
    case topo::KernelKind::kFinish: return 8 * spec.count + 4 * groups;
    default: return Compressor::memory_bytes(kind, spec, hop);
  }
}

void DynamiqCompressor::prepare(std::span<const float> x, std::span<float> out, uint32_t, uint32_t,
                                const kern::RngKey&) {
  CCSIM_CHECK(x.size() == elements_ && out.size() == elements_, "dynamiq: planned {} entries, got {}", elements_,
              x.size());
  std::vector<float> held;
  const std::span<const float> copy = unaliased(x, out, held);
  const uint64_t S = options_.super_group;
  kern::parallel_for(order_.size(), 64, [&](uint64_t b, uint64_t e) {
    for (uint64_t k = b; k < e; ++k) {
      const uint64_t j = order_[k], m = sg_count(j);
      for (uint64_t i = 0; i < m; ++i) out[k * S + i] = copy[j * S + i] - mean_[j];
    }
  });
}

void DynamiqCompressor::finish(std::span<const float> reduced, std::span<float> out, uint32_t, uint32_t ranks) {
  std::vector<float> held;
  const std::span<const float> copy = unaliased(reduced, out, held);
  const uint64_t S = options_.super_group;
  kern::parallel_for(order_.size(), 64, [&](uint64_t b, uint64_t e) {
    for (uint64_t k = b; k < e; ++k) {
      const uint64_t j = order_[k], m = sg_count(j);
      const float shift = static_cast<float>(ranks) * mean_[j];
      for (uint64_t i = 0; i < m; ++i) out[j * S + i] = copy[k * S + i] + shift;
    }
  });
}

}  // namespace ccsim::algo
