#include "algorithms/mx/mx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "kernels/parallel.hpp"
#include "kernels/stats/entropy.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace {

constexpr uint64_t kPiece = 1 << 16;

// out[i] = x[i] * factor per layer (out may be x).
void scale_layers(std::span<const float> x, std::span<float> out, std::span<const MxCompressor::LayerScale> scales,
                  bool forward) {
  for (const auto& s : scales) {
    const float f = forward ? s.to_fpx : s.from_fpx;
    const float* src = x.data() + s.offset;
    float* dst = out.data() + s.offset;
    kern::parallel_for(s.count, kPiece, [=](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) dst[i] = src[i] * f;
    });
  }
}

}  // namespace

CompressorInfo MxCompressor::info(kern::MinifloatKind element) {
  CCSIM_CHECK(element == kern::MinifloatKind::kFp8E4M3 || element == kern::MinifloatKind::kFp6E3M2 ||
                  element == kern::MinifloatKind::kFp4E2M1,
              "MX element formats are E4M3, E3M2 and E2M1");
  const bool fp8 = element == kern::MinifloatKind::kFp8E4M3, fp6 = element == kern::MinifloatKind::kFp6E3M2;
  const char* name = fp8 ? "mxfp8" : fp6 ? "mxfp6" : "mxfp4";
  const uint32_t bits = kern::minifloat_format(element).bits();
  ParamTable params;
  params.add_int("block", "elements sharing one scale (32 in the OCP MX spec)", 32, 8, 65536, true)
      .add_choice("scale",
                  "shared block scale: bf16 (smallest BF16 >= amax / FPX_MAX, never saturates; DynamiQ's runs) or "
                  "e8m0 (the OCP spec's power of two; elements near amax may saturate)",
                  "bf16", {"bf16", "e8m0"})
      .add_choice("rounding", "nearest (ties to even, saturating at the element maximum) or stochastic (unbiased)",
                  "nearest", {"nearest", "stochastic"})
      .add_choice("global_scaling",
                  "block: every block's max all-reduced first and its shared scale fixed to mu * gm / FPX_MAX at "
                  "every hop (DynamiQ App. C); layer: FP8-LM per-layer pre-scaling g -> g / (mu * gm) * FPX_MAX "
                  "with per-message block scales; off. mu adapts across rounds",
                  "block", {"block", "layer", "off"})
      .add_number("overflow_threshold",
                  "global scaling: mu doubles when the fraction of encoded elements beyond FPX_MAX exceeds this "
                  "(FP8-LM's 0.001%)",
                  1e-5, 0.0, 1.0)
      .add_number("mu_decay", "global scaling: mu is multiplied by this after a round without excess overflow", 0.99,
                  0.5, 1.0);
  return {name,
          fmt::format("OCP {} ({} elements, blocks with a shared BF16 or E8M0 scale), decoded and re-encoded at "
                      "every hop, FP8-LM global scaling: {} bits/element + 16 (bf16) or 8 (e8m0) per block",
                      fp8   ? "MXFP8"
                      : fp6 ? "MXFP6"
                            : "MXFP4",
                      fp8   ? "E4M3"
                      : fp6 ? "E3M2"
                            : "E2M1",
                      bits),
          std::move(params), [name, element](const Params& p) {
            Options o;
            o.format.element = element;
            o.format.block = static_cast<uint32_t>(p.get_int("block"));
            o.format.scale = p.get_string("scale") == "e8m0" ? kern::MxScaleKind::kE8M0 : kern::MxScaleKind::kBf16;
            o.format.rounding =
                p.get_string("rounding") == "stochastic" ? kern::Rounding::kStochastic : kern::Rounding::kNearest;
            const std::string g = p.get_string("global_scaling");
            o.global_scaling = g == "block"   ? Options::Scaling::kBlock
                               : g == "layer" ? Options::Scaling::kLayer
                                              : Options::Scaling::kOff;
            o.overflow_threshold = p.get_number("overflow_threshold");
            o.mu_decay = p.get_number("mu_decay");
            return std::make_unique<MxCompressor>(name, o);
          },
          nullptr,
          // Per-layer scaling runs plan_local, prepare and finish of its own (the defaults only
          // plan_local's block maxima): the kernel benches measure them under it.
          {R"({"global_scaling":"layer"})"}};
}

const uint32_t* MxCompressor::agreed_codes(const TensorSpec& spec) const {
  if (options_.global_scaling != Options::Scaling::kBlock || block_codes_.empty()) return nullptr;
  const uint64_t block = options_.format.block;
  CCSIM_CHECK(spec.offset % block == 0 && (spec.offset + spec.count + block - 1) / block <= block_codes_.size(),
              "{}: chunk [{}, {}) is not block-aligned within the planned {} blocks", name_, spec.offset,
              spec.offset + spec.count, block_codes_.size());
  return block_codes_.data() + spec.offset / block;
}

void MxCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey& key,
                          std::span<uint8_t> out) {
  const uint32_t* codes = agreed_codes(spec);
  const uint64_t over =
      codes != nullptr
          ? kern::mx_encode_with_scales(x.data(), spec.count, options_.format, codes, key, spec.offset, out.data())
          : kern::mx_encode(x.data(), spec.count, options_.format, key, spec.offset, element_max(), out.data());
  overflows_.fetch_add(over, std::memory_order_relaxed);
  encoded_.fetch_add(spec.count, std::memory_order_relaxed);
}

void MxCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                            std::span<float> acc, const HopContext&, const kern::RngKey& key,
                                            std::span<uint8_t> out) {
  const uint64_t over = kern::mx_decode_accumulate_encode(in.data(), spec.count, options_.format, acc.data(),
                                                          agreed_codes(spec), key, spec.offset, element_max(),
                                                          out.data());
  overflows_.fetch_add(over, std::memory_order_relaxed);
  encoded_.fetch_add(spec.count, std::memory_order_relaxed);
}

void MxCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                          std::span<float> out) {
  kern::mx_decode(in.data(), spec.count, options_.format, out.data());
}

void MxCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                     std::span<float> acc) {
  kern::mx_decode_accumulate(in.data(), spec.count, options_.format, acc.data());
}

std::vector<LayerShape> MxCompressor::layers_for(uint64_t elements) const {
  uint64_t next = 0;
  for (const auto& l : layout_) {
    if (l.offset != next) break;
    next += l.count;
  }
  if (!layout_.empty() && next == elements) return layout_;
  return {LayerShape{0, elements, elements, 1}};
}

PlanFormat MxCompressor::plan_format(uint64_t elements, uint32_t) const {
  PlanFormat f;
  if (options_.global_scaling == Options::Scaling::kLayer) f.max_entries = layers_for(elements).size();
  if (options_.global_scaling == Options::Scaling::kBlock)
    f.max_entries = (elements + options_.format.block - 1) / options_.format.block;
  return f;
}

namespace {

// Block scaling's plan_local() a piece of whole blocks at a time (each block's maximum is its own).
class MxBlockPlanPieces final : public PlanPieces {
 public:
  MxBlockPlanPieces(uint64_t elements, uint64_t block) : block_(block), max_((elements + block - 1) / block, 0.0f) {}
  void add(std::span<const float> x, uint64_t offset) override {
    CCSIM_CHECK(offset % block_ == 0 && (offset + x.size() + block_ - 1) / block_ <= max_.size(),
                "mx: plan piece [{}, {}) not aligned to {}", offset, offset + x.size(), block_);
    kern::block_max_abs(x.data(), x.size(), block_, max_.data() + offset / block_);
  }
  bool finish(PlanStats& out) override {
    out.max = std::move(max_);
    return true;
  }

 private:
  uint64_t block_;
  std::vector<float> max_;
};

}  // namespace

std::unique_ptr<PlanPieces> MxCompressor::plan_pieces(uint64_t elements, uint32_t, const kern::RngKey&) const {
  if (options_.global_scaling != Options::Scaling::kBlock) return nullptr;
  return std::make_unique<MxBlockPlanPieces>(elements, options_.format.block);
}

std::string MxCompressor::plan_local_identity() const {
  if (options_.global_scaling != Options::Scaling::kBlock) return {};
  return fmt::format("mx block maxima, block = {}", options_.format.block);
}

void MxCompressor::plan_local(std::span<const float> x, uint32_t, const kern::RngKey&, PlanStats& out) const {
  if (options_.global_scaling == Options::Scaling::kBlock) {
    kern::block_max_abs(x.data(), x.size(), options_.format.block, out.max.data());
    return;
  }
  const auto layers = layers_for(x.size());
  for (size_t j = 0; j < layers.size(); ++j)
    out.max[j] = kern::parallel_max_abs(x.data() + layers[j].offset, layers[j].count);
}

Status MxCompressor::plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) {
  const uint64_t encoded = encoded_.exchange(0), overflows = overflows_.exchange(0);
  previous_mu_ = mu_;
  last_encoded_ = encoded;
  last_overflows_ = overflows;
  if (!committed_) {
    mu_ = ranks;
    committed_ = true;
    last_move_ = "init";
  } else if (encoded > 0) {
    const double ratio = static_cast<double>(overflows) / static_cast<double>(encoded);
    const bool over = ratio > options_.overflow_threshold;
    mu_ = over ? 2.0 * mu_ : options_.mu_decay * mu_;
    last_move_ = over ? "double" : "decay";
  } else {
    last_move_ = "hold";
  }
  planned_elements_ = elements;
  if (options_.global_scaling == Options::Scaling::kBlock) {
    block_codes_.resize(combined.max.size());
    const auto mu = static_cast<float>(mu_);
    for (size_t b = 0; b < block_codes_.size(); ++b)
      block_codes_[b] = kern::mx_scale_code(mu * combined.max[b], options_.format);
    return ok_status();
  }
  const auto layers = layers_for(elements);
  CCSIM_CHECK(combined.max.size() == layers.size(), "mx: {} maxima for {} layers", combined.max.size(), layers.size());
  scales_.assign(layers.size(), LayerScale{});
  const double fpx_max = element_max();
  for (size_t j = 0; j < layers.size(); ++j) {
    LayerScale& s = scales_[j];
    s.offset = layers[j].offset;
    s.count = layers[j].count;
    s.global_max = combined.max[j];
    const double global_scale = mu_ * static_cast<double>(s.global_max);
    const auto to = static_cast<float>(fpx_max / global_scale), from = static_cast<float>(global_scale / fpx_max);
    if (std::isnormal(to) && std::isnormal(from)) {
      s.to_fpx = to;
      s.from_fpx = from;
    }
  }
  planned_elements_ = elements;
  return ok_status();
}

std::vector<PlanDecision> MxCompressor::plan_decisions() const {
  if (!committed_ || options_.global_scaling == Options::Scaling::kOff) return {};
  std::string detail = fmt::format("move={}", last_move_);
  if (std::string_view(last_move_) != "init" && last_encoded_ > 0)  // mu doubled or decayed on these counts
    detail += fmt::format(" overflow_ratio={} overflows={} encoded={}",
                          static_cast<double>(last_overflows_) / static_cast<double>(last_encoded_), last_overflows_,
                          last_encoded_);
  detail += fmt::format(" overflow_threshold={} mu_decay={} previous_mu={}", options_.overflow_threshold,
                        options_.mu_decay, previous_mu_);
  return {{"mu", mu_, std::move(detail)}};
}

uint64_t MxCompressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const {
  if (!topo::is_round_op(kind)) return Compressor::memory_bytes(kind, spec, hop);
  const PlanFormat f = plan_format(spec.count, hop.ranks);
  if (f.empty()) return 0;  // no global scaling: no round work
  if (kind == topo::KernelKind::kPlanLocal) return 4 * spec.count + f.wire_bytes();
  // Block scaling folds the agreed scale codes into encode: prepare and finish are copies.
  return options_.global_scaling == Options::Scaling::kLayer ? 8 * spec.count : 0;
}

void MxCompressor::prepare(std::span<const float> x, std::span<float> out, uint32_t, uint32_t, const kern::RngKey&) {
  if (scales_.empty()) return copy_unless_same(x, out);
  CCSIM_CHECK(x.size() == planned_elements_ && out.size() == x.size(), "mx: prepare of {} elements, planned {}",
              x.size(), planned_elements_);
  scale_layers(x, out, scales_, true);
}

void MxCompressor::finish(std::span<const float> reduced, std::span<float> out, uint32_t, uint32_t) {
  if (scales_.empty()) return copy_unless_same(reduced, out);
  CCSIM_CHECK(reduced.size() == planned_elements_ && out.size() == reduced.size(),
              "mx: finish of {} elements, planned {}", reduced.size(), planned_elements_);
  scale_layers(reduced, out, scales_, false);
}

}  // namespace ccsim::algo
