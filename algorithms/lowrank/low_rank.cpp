#include "algorithms/lowrank/low_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "algorithms/numerics.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/parallel.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

void LowRankCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey&,
                               std::span<uint8_t> out) {
  if (spec.count != 0) std::memcpy(out.data(), x.data(), 4 * spec.count);  // empty spans may be null
}

void LowRankCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                               std::span<float> out) {
  if (spec.count != 0) std::memcpy(out.data(), in.data(), 4 * spec.count);  // empty spans may be null
}

void LowRankCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                          std::span<float> acc) {
  const uint8_t* src = in.data();
  float* dst = acc.data();
  kern::parallel_for(spec.count, 1 << 16, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) {
      float v;
      std::memcpy(&v, src + 4 * i, sizeof v);
      dst[i] += v;
    }
  });
}

std::vector<LayerShape> LowRankCompressor::layers_for(uint64_t elements) const {
  if (layout_.empty()) return {LayerShape{0, elements, elements, 1}};
  const LayerShape& last = layout_.back();
  CCSIM_CHECK(last.offset + last.count == elements, "{}: layout of {} elements for a tensor of {}", name(),
              last.offset + last.count, elements);
  return layout_;
}

std::vector<LowRankCompressor::Slot> LowRankCompressor::slots(uint64_t elements) const {
  const std::vector<LayerShape> layers = layers_for(elements);
  std::vector<Slot> out(layers.size());
  uint64_t p = 0, reduced = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    out[l].shape = layers[l];
    out[l].compressed = compressed_at(layers[l], rank_);
    if (!out[l].compressed) continue;
    out[l].p_offset = p;
    out[l].reduced_offset = reduced;
    p += layers[l].rows * rank_;
    reduced += layers[l].cols * rank_;
  }
  for (Slot& s : out) {
    if (s.compressed) continue;
    s.reduced_offset = reduced;
    reduced += s.shape.count;
  }
  return out;
}

uint64_t LowRankCompressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec,
                                         const HopContext& hop) const {
  if (!topo::is_round_op(kind)) return Compressor::memory_bytes(kind, spec, hop);
  uint64_t c = 0, u = 0, q = 0;
  for (const Slot& s : slots(spec.count)) {
    (s.compressed ? c : u) += s.shape.count;
    if (s.compressed) q += s.shape.cols * rank_;
  }
  const uint64_t ef = error_feedback_ ? 1 : 0;
  switch (kind) {
    case topo::KernelKind::kPlanLocal: {
      const PlanFormat f = plan_format(spec.count, hop.ranks);
      return f.empty() ? 0 : 4 * c * (3 + ef) + f.wire_bytes() + extra_plan_local_bytes(spec.count);
    }
    case topo::KernelKind::kPrepare:
      return 4 * c * (1 + 2 * ef) + 4 * q + (c == 0 && ef == 0 ? 0 : 4 * u * (2 + 2 * ef));
    case topo::KernelKind::kFinish: return c == 0 ? 0 : 4 * q + 4 * c + 8 * u;
    default: return 0;
  }
}

void LowRankCompressor::set_layout(std::span<const LayerShape> layers) {
  if (std::equal(layers.begin(), layers.end(), layout_.begin(), layout_.end(), [](const auto& a, const auto& b) {
        return a.offset == b.offset && a.count == b.count && a.rows == b.rows && a.cols == b.cols;
      }))
    return;
  uint64_t next = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    CCSIM_CHECK(layers[l].offset == next, "{}: layer {} starts at {}, expected {}", name(), l, layers[l].offset, next);
    CCSIM_CHECK(layers[l].count == layers[l].rows * layers[l].cols, "{}: layer {} has {} elements but is {} x {}",
                name(), l, layers[l].count, layers[l].rows, layers[l].cols);
    next += layers[l].count;
  }
  layout_.assign(layers.begin(), layers.end());
  q_.clear();
  q_rank_.clear();
  q_round_.clear();
  p_hat_.clear();
  residuals_.clear();
  planned_ = false;
  on_layout();
}

uint64_t LowRankCompressor::reduced_elements(uint64_t elements) const {
  uint64_t n = 0;
  for (const Slot& s : slots(elements)) n += s.compressed ? s.shape.cols * rank_ : s.shape.count;
  return n;
}

PlanFormat LowRankCompressor::plan_format(uint64_t elements, uint32_t) const {
  PlanFormat f;
  for (const Slot& s : slots(elements))
    if (s.compressed) f.sum_entries += s.shape.rows * rank_;
  f.sum_entries += extra_plan_entries();
  f.sum_bytes = 4;
  return f;
}

void LowRankCompressor::ensure_q(size_t layer, const LayerShape& shape, uint64_t seed) const {
  if (q_.size() <= layer) {
    q_.resize(layer + 1);
    q_rank_.resize(layer + 1, 0);
    q_round_.resize(layer + 1, 0);
  }
  // Without warm start every round draws afresh; with it, only missing columns are drawn.
  const uint32_t keep = warm_start_ || q_round_[layer] == rounds_ ? std::min(q_rank_[layer], rank_) : 0;
  if (keep == rank_ && q_rank_[layer] == rank_) return;
  std::vector<float> q(shape.cols * rank_);
  const std::vector<float>& old = q_[layer];
  for (uint64_t j = 0; j < shape.cols; ++j)
    for (uint32_t k = 0; k < keep; ++k) q[j * rank_ + k] = old[j * q_rank_[layer] + k];
  const kern::RngKey key{seed, static_cast<uint32_t>(rounds_), kSharedRank, kPlanStream};
  for (uint32_t k = keep; k < rank_; ++k)
    for (uint64_t j = 0; j < shape.cols; ++j)
      q[j * rank_ + k] = kern::standard_normal_at(key, shape.offset + k * shape.cols + j);
  q_[layer] = std::move(q);
  q_rank_[layer] = rank_;
  q_round_[layer] = rounds_;
}

const float* LowRankCompressor::residual(uint32_t rank, const LayerShape& shape) const {
  const bool has_residual = error_feedback_ && rank < residuals_.size() && !residuals_[rank].empty();
  return has_residual ? residuals_[rank].data() + shape.offset : nullptr;
}

CCSIM_STREAM_ROW void LowRankCompressor::add_into(const float* x, const float* e, uint64_t count, float* m) {
  for (uint64_t i = 0; i < count; ++i) m[i] = x[i] + e[i];
}

CCSIM_STREAM_ROW void LowRankCompressor::add_zero(const float* x, uint64_t count, float* dst) {
  for (uint64_t i = 0; i < count; ++i) dst[i] = x[i] + 0.0f;
}

CCSIM_STREAM_ROW void LowRankCompressor::move_into(const float* x, float* e, uint64_t count, float* dst) {
  // One pass: each residual entry is read, summed and cleared while in cache.
  for (uint64_t i = 0; i < count; ++i) {
    dst[i] = x[i] + e[i];
    e[i] = 0.0f;
  }
}

void LowRankCompressor::plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key,
                                   PlanStats& out) const {
  const std::vector<Slot> layer_slots = slots(x.size());
  for (size_t l = 0; l < layer_slots.size(); ++l)
    if (layer_slots[l].compressed) ensure_q(l, layer_slots[l].shape, key.seed);
  kern::parallel_for(layer_slots.size(), 1, [&](uint64_t l0, uint64_t l1) {
    std::vector<float> p;
    for (uint64_t l = l0; l < l1; ++l) {
      const Slot& s = layer_slots[l];
      if (!s.compressed) continue;
      p.resize(s.shape.rows * rank_);
      // M = x + e where the rank has a residual, summed as the product reads it.
      const float* src = x.data() + s.shape.offset;
      if (const float* e = residual(rank, s.shape))
        kern::lowrank_project_sum(src, e, s.shape.rows, s.shape.cols, q_[l].data(), rank_, p.data());
      else
        kern::lowrank_project(src, s.shape.rows, s.shape.cols, q_[l].data(), rank_, p.data());
      std::copy(p.begin(), p.end(), out.sum.begin() + static_cast<std::ptrdiff_t>(s.p_offset));
    }
  });
  const uint64_t extra = extra_plan_entries();
  if (extra > 0) extra_plan_local(x, rank, key, std::span<double>(out.sum).last(extra));
}

Status LowRankCompressor::plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) {
  const std::vector<Slot> layer_slots = slots(elements);
  p_hat_.resize(layer_slots.size());
  kern::parallel_for(layer_slots.size(), 1, [&](uint64_t l0, uint64_t l1) {
    for (uint64_t l = l0; l < l1; ++l) {
      const Slot& s = layer_slots[l];
      if (!s.compressed) {
        p_hat_[l].clear();
        continue;
      }
      std::vector<float>& p = p_hat_[l];
      p.resize(s.shape.rows * rank_);
      // The sum travels as fp32 (sum_bytes = 4).
      for (uint64_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(combined.sum[s.p_offset + i]);
      kern::orthonormalize_columns(p.data(), s.shape.rows, rank_);
    }
  });
  planned_ = true;
  const uint64_t extra = extra_plan_entries();
  if (extra > 0) extra_plan_commit(std::span<const double>(combined.sum).last(extra), ranks);
  return ok_status();
}

void LowRankCompressor::prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
                                const kern::RngKey&) {
  const std::vector<Slot> layer_slots = slots(x.size());
  CCSIM_CHECK(out.size() == reduced_elements(x.size()), "{}: prepare into {} elements, expected {}", name(), out.size(),
              reduced_elements(x.size()));
  const bool any_compressed =
      std::any_of(layer_slots.begin(), layer_slots.end(), [](const Slot& s) { return s.compressed; });
  CCSIM_CHECK(!any_compressed || planned_, "{}: prepare() before the round's plan_commit()", name());
  // A residual is all zeros until a round compresses a layer: it is allocated then, and an
  // uncompressed round before sends x + 0 (x with -0 made +0, as x + e would).
  bool has_residual = false;
  if (error_feedback_) {
    if (residuals_.size() < ranks) residuals_.resize(ranks);
    std::vector<float>& e = residuals_[rank];
    if ((any_compressed || !e.empty()) && e.size() != x.size()) e.assign(x.size(), 0.0f);
    has_residual = !e.empty();
  }
  kern::parallel_for(layer_slots.size(), 1, [&](uint64_t l0, uint64_t l1) {
    for (uint64_t l = l0; l < l1; ++l) {
      const Slot& s = layer_slots[l];
      float* e = has_residual ? residuals_[rank].data() + s.shape.offset : nullptr;
      if (!s.compressed) {
        // Offsets agree when nothing is compressed, the one case where out may alias x.
        float* dst = out.data() + s.reduced_offset;
        const float* src = x.data() + s.shape.offset;
        if (e)
          move_into(src, e, s.shape.count, dst);
        else if (error_feedback_)
          add_zero(src, s.shape.count, dst);
        else if (dst != src)
          std::copy_n(src, s.shape.count, dst);
        continue;
      }
      float* q = out.data() + s.reduced_offset;
      if (!e) {
        kern::lowrank_project_transposed(x.data() + s.shape.offset, s.shape.rows, s.shape.cols, p_hat_[l].data(),
                                         rank_, q);
        continue;
      }
      // M = x + e formed in the residual itself as it is projected, then what the round sends taken
      // from it.
      kern::lowrank_add_project_transposed(x.data() + s.shape.offset, e, s.shape.rows, s.shape.cols, p_hat_[l].data(),
                                           rank_, q);
      kern::lowrank_subtract(p_hat_[l].data(), q, s.shape.rows, s.shape.cols, rank_, e);
    }
  });
}

void LowRankCompressor::finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) {
  const std::vector<Slot> layer_slots = slots(out.size());
  CCSIM_CHECK(reduced.size() == reduced_elements(out.size()), "{}: finish from {} elements, expected {}", name(),
              reduced.size(), reduced_elements(out.size()));
  kern::parallel_for(layer_slots.size(), 1, [&](uint64_t l0, uint64_t l1) {
    for (uint64_t l = l0; l < l1; ++l) {
      const Slot& s = layer_slots[l];
      if (s.compressed) {
        kern::lowrank_expand(p_hat_[l].data(), reduced.data() + s.reduced_offset, s.shape.rows, s.shape.cols, rank_,
                             out.data() + s.shape.offset);
      } else if (reduced.data() + s.reduced_offset != out.data() + s.shape.offset) {
        std::copy_n(reduced.data() + s.reduced_offset, s.shape.count, out.data() + s.shape.offset);
      }
    }
  });
  if (rank + 1 != ranks) return;
  // The round is over: the reduced Q becomes the next warm start.
  if (warm_start_) {
    for (size_t l = 0; l < layer_slots.size(); ++l) {
      const Slot& s = layer_slots[l];
      if (!s.compressed) continue;
      const float* q = reduced.data() + s.reduced_offset;
      q_[l].assign(q, q + s.shape.cols * rank_);
    }
  }
  planned_ = false;
  ++rounds_;
  on_round_end();
}

std::vector<LayerShape> layer_matrices(std::span<const uint64_t> params, uint32_t tp, uint64_t rows_wanted,
                                       uint64_t total) {
  std::vector<LayerShape> out;
  uint64_t offset = 0;
  for (const uint64_t p : params) {
    const uint64_t share = (p + tp - 1) / tp;
    if (share == 0) continue;
    const uint64_t rows =
        rows_wanted > 0 ? std::min(rows_wanted, share)
                        : std::max<uint64_t>(1, static_cast<uint64_t>(std::sqrt(static_cast<double>(share))));
    const uint64_t cols = share / rows;
    out.push_back({offset, rows * cols, rows, cols});
    offset += rows * cols;
    if (share > rows * cols) {
      out.push_back({offset, share - rows * cols, share - rows * cols, 1});
      offset += share - rows * cols;
    }
  }
  if (offset < total) out.push_back({offset, total - offset, total - offset, 1});  // rounding of ceil(params / tp)
  return out;
}

}  // namespace ccsim::algo
