#include "algorithms/omnireduce/omnireduce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "kernels/parallel.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/stats/block_sums.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace {

constexpr uint64_t kGrainElements = 1 << 16;

// Whether chunk c is sent: every union chunk when own is null (send=union), else chunk c's bit.
inline bool sends(const uint64_t* own, uint64_t c) { return own == nullptr || OmniReduceCompressor::chunk_bit(own, c); }

inline float get_bf16(const uint8_t* in, uint64_t pos) {
  uint16_t h;
  std::memcpy(&h, in + 2 * pos, sizeof h);
  return kern::bf16_to_float(h);
}

}  // namespace

CompressorInfo OmniReduceCompressor::info() {
  ParamTable params;
  params.add_int("chunk", "elements per chunk, the unit of top-k selection", 256, 1, 65536, true)
      .add_int("bits", "budget b in bits per element: target union K = round(n_chunks * b / 16) chunks", 8, 1, 16)
      .add_number("momentum", "gamma of the k update k' = gamma k + (1 - gamma) (K / K') k", 0.8, 0.0, 1.0)
      .add_choice("layout",
                  "sparse: the collective runs on the whole tensor, a message carrying the union elements of its "
                  "range; compact: the union chunks are gathered into one dense vector that an all-reduce splits "
                  "evenly (all-reduce only)",
                  "compact", {"sparse", "compact"})
      .add_choice("send",
                  "union: every rank sends its values in every union chunk; own: a rank sends its values only in "
                  "its own top-k chunks and zeros in the other union chunks (OmniReduce's local sparsification)",
                  "union", {"union", "own"});
  return {"omnireduce",
          "OmniReduce chunked top-k (DynamiQ App. C adaptation): union of local top-k chunks agreed by a bitmap "
          "all-reduce, union chunks in BF16 at every hop, k adapted per round toward K = n_chunks * b / 16",
          std::move(params), [](const Params& p) {
            return std::make_unique<OmniReduceCompressor>(static_cast<uint64_t>(p.get_int("chunk")),
                                                          static_cast<uint32_t>(p.get_int("bits")),
                                                          p.get_number("momentum"),
                                                          p.get_string("layout") == "compact",
                                                          p.get_string("send") == "own");
          }};
}

OmniReduceCompressor::OmniReduceCompressor(uint64_t chunk, uint32_t bits, double momentum, bool compact,
                                           bool send_own)
    : chunk_(chunk), bits_(bits), momentum_(momentum), compact_(compact), send_own_(send_own) {
  CCSIM_CHECK(std::has_single_bit(chunk), "omnireduce: chunk {} is not a power of two", chunk);
  CCSIM_CHECK(bits >= 1 && bits <= 16, "omnireduce: bits {} not in [1, 16]", bits);
  CCSIM_CHECK(momentum >= 0.0 && momentum <= 1.0, "omnireduce: momentum {} not in [0, 1]", momentum);
}

uint64_t OmniReduceCompressor::target_chunks(uint64_t n_chunks) const {
  return static_cast<uint64_t>(std::llround(static_cast<double>(n_chunks) * bits_ / 16.0));
}

uint64_t OmniReduceCompressor::local_k(uint64_t n_chunks) const {
  if (n_chunks == 0) return 0;
  const double k = std::round(k_for(n_chunks));
  if (!(k >= 1.0)) return 1;
  return k >= static_cast<double>(n_chunks) ? n_chunks : static_cast<uint64_t>(k);
}

PlanFormat OmniReduceCompressor::plan_format(uint64_t elements, uint32_t) const {
  PlanFormat f;
  f.bit_words = (chunks_of(elements) + 63) / 64;
  return f;
}

namespace {

// Squared norms of x's chunks of `chunk` entries into key[] (the last may be short), summed in
// element order (exact squares in double: kern::block_sums' sums of squares); NaN ranks highest.
// A chunk's key reads its entries only.
void chunk_keys(std::span<const float> x, uint64_t chunk, double* key) {
  const uint64_t n = x.size(), nc = (n + chunk - 1) / chunk;
  const float* data = x.data();
  kern::parallel_for(nc, std::max<uint64_t>(1, kGrainElements / chunk), [=](uint64_t c0, uint64_t c1) {
    std::vector<double> sums(c1 - c0);  // the plain sums block_sums also makes, not used
    kern::block_sums(data + c0 * chunk, std::min(n, c1 * chunk) - c0 * chunk, chunk, sums.data(), key + c0);
    for (uint64_t c = c0; c < c1; ++c)
      if (std::isnan(key[c])) key[c] = std::numeric_limits<double>::infinity();
  });
}

}  // namespace

// plan_local() a piece of whole chunks at a time: the chunks' keys piece by piece, the selection
// once every key is known.
class OmniReduceCompressor::Pieces final : public PlanPieces {
 public:
  Pieces(const OmniReduceCompressor& comp, uint64_t elements, uint32_t rank)
      : comp_(comp), rank_(rank), key_(comp.chunks_of(elements), 0.0) {}
  void add(std::span<const float> x, uint64_t offset) override {
    const uint64_t chunk = comp_.chunk_;
    CCSIM_CHECK(offset % chunk == 0 && (offset + x.size() + chunk - 1) / chunk <= key_.size(),
                "omnireduce: plan piece [{}, {}) not aligned to {}", offset, offset + x.size(), chunk);
    chunk_keys(x, chunk, key_.data() + offset / chunk);
  }
  bool finish(PlanStats& out) override {
    comp_.select_local(key_, rank_, out);
    return true;
  }

 private:
  const OmniReduceCompressor& comp_;
  uint32_t rank_;
  std::vector<double> key_;
};

void OmniReduceCompressor::plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey&,
                                      PlanStats& out) const {
  std::vector<double> key(chunks_of(x.size()));
  chunk_keys(x, chunk_, key.data());
  select_local(key, rank, out);
}

std::unique_ptr<PlanPieces> OmniReduceCompressor::plan_pieces(uint64_t elements, uint32_t rank,
                                                              const kern::RngKey&) const {
  return std::make_unique<Pieces>(*this, elements, rank);
}

void OmniReduceCompressor::select_local(std::span<const double> key, uint32_t rank, PlanStats& out) const {
  const uint64_t nc = key.size();
  CCSIM_CHECK(out.bits.size() == (nc + 63) / 64, "omnireduce: {} bitmap words for {} chunks", out.bits.size(), nc);
  if (nc == 0) return;
  // The k largest keys, ties to the lower index: a strict total order, so the set is unique.
  const uint64_t k = local_k(nc);
  std::vector<uint64_t> order(nc);
  std::iota(order.begin(), order.end(), uint64_t{0});
  auto before = [&key](uint64_t a, uint64_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(), before);
  for (uint64_t j = 0; j < k; ++j) out.bits[order[j] / 64] |= uint64_t{1} << (order[j] % 64);
  if (send_own_) {
    if (own_.size() <= rank) {
      own_.resize(rank + 1);
      own_round_.resize(rank + 1, 0);
    }
    own_[rank].assign(out.bits.begin(), out.bits.end());
    own_round_[rank] = commits_;
  }
}

std::span<const uint64_t> OmniReduceCompressor::own_bitmap(uint32_t rank) const {
  if (!send_own_ || prefix_.empty() || rank >= own_.size() || own_round_[rank] + 1 != commits_ ||
      own_[rank].size() != union_.size())
    return {};
  return own_[rank];
}

const uint64_t* OmniReduceCompressor::own_words(uint32_t rank) const {
  if (!send_own_) return nullptr;
  const std::span<const uint64_t> own = own_bitmap(rank);
  CCSIM_CHECK(!own.empty(), "omnireduce: send=own needs rank {}'s plan_local of the committed round", rank);
  return own.data();
}

Status OmniReduceCompressor::plan_commit(const PlanStats& combined, uint64_t elements, uint32_t) {
  const uint64_t nc = chunks_of(elements);
  if (combined.bits.size() != (nc + 63) / 64)
    return internal_error(fmt::format("omnireduce: {} bitmap words for {} chunks", combined.bits.size(), nc));
  elements_ = elements;
  n_chunks_ = nc;
  union_ = combined.bits;
  if (nc % 64 != 0) union_.back() &= (uint64_t{1} << (nc % 64)) - 1;  // no chunk past the end
  prefix_.assign(nc + 1, 0);
  for (uint64_t c = 0; c < nc; ++c)
    prefix_[c + 1] = prefix_[c] + (in_union(c) ? std::min(chunk_, elements - c * chunk_) : 0);
  union_chunks_ = 0;
  for (uint64_t w : union_) union_chunks_ += static_cast<uint64_t>(std::popcount(w));
  committed_k_ = local_k(nc);
  // DynamiQ eq. (1).
  const double k = k_for(nc);
  committed_k_real_ = k;
  k_ = k;
  if (union_chunks_ > 0) {
    const double ratio = static_cast<double>(target_chunks(nc)) / static_cast<double>(union_chunks_);
    k_ = momentum_ * k + (1.0 - momentum_) * ratio * k;
  }
  k_chunks_ = nc;
  k_set_ = true;
  ++commits_;
  return ok_status();
}

std::vector<PlanDecision> OmniReduceCompressor::plan_decisions() const {
  if (!k_set_) return {};
  return {{"k", static_cast<double>(committed_k_),
           fmt::format("k_t={} K={} K'={} n_chunks={} gamma={} k_next={}", committed_k_real_, target_chunks(n_chunks_),
                       union_chunks_, n_chunks_, momentum_, k_)}};
}

uint64_t OmniReduceCompressor::union_before(uint64_t i) const {
  const uint64_t c = i / chunk_;
  return prefix_[c] + (in_union(c) ? i - c * chunk_ : 0);
}

uint64_t OmniReduceCompressor::reduced_elements(uint64_t elements) const {
  return compact_ && !prefix_.empty() && elements == elements_ ? prefix_.back() : elements;
}

uint64_t OmniReduceCompressor::domain_elements() const {
  if (prefix_.empty()) return 0;
  return compact_ ? prefix_.back() : elements_;
}

void OmniReduceCompressor::check_spec(const TensorSpec& spec) const {
  CCSIM_CHECK(!prefix_.empty() && spec.offset + spec.count <= domain_elements(),
              "omnireduce: elements [{}, {}) outside the committed plan's {} elements", spec.offset,
              spec.offset + spec.count, domain_elements());
}

Status OmniReduceCompressor::can_implement(const TensorSpec& spec) const {
  if (prefix_.empty() || spec.offset + spec.count > domain_elements())
    return invalid_argument(fmt::format("omnireduce: elements [{}, {}) are not covered by a committed metadata phase "
                                        "({} elements; run plan_round first)",
                                        spec.offset, spec.offset + spec.count, domain_elements()));
  return ok_status();
}

uint64_t OmniReduceCompressor::wire_bytes(const TensorSpec& spec, const HopContext&) const {
  check_spec(spec);
  return 2 * (compact_ ? spec.count : union_elements(spec));
}

void OmniReduceCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&,
                                  const kern::RngKey&, std::span<uint8_t> out) {
  check_spec(spec);
  if (spec.count == 0) return;
  const float* src = x.data();
  uint8_t* dst = out.data();
  if (compact_) {
    kern::parallel_for(spec.count, kGrainElements, [=](uint64_t b, uint64_t e) {
      kern::bf16_encode_saturating_row(src + b, e - b, reinterpret_cast<uint16_t*>(dst) + b);
    });
    return;
  }
  const uint64_t begin = spec.offset, end = spec.offset + spec.count, base = union_before(begin);
  const uint64_t c0 = begin / chunk_, c1 = (end - 1) / chunk_ + 1;
  kern::parallel_for(c1 - c0, std::max<uint64_t>(1, kGrainElements / chunk_), [&](uint64_t b, uint64_t e) {
    for (uint64_t c = c0 + b; c < c0 + e; ++c) {
      if (!in_union(c)) continue;
      const uint64_t lo = std::max(begin, c * chunk_), hi = std::min(end, (c + 1) * chunk_);
      const uint64_t pos = union_before(lo) - base;
      kern::bf16_encode_saturating_row(src + (lo - begin), hi - lo, reinterpret_cast<uint16_t*>(dst) + pos);
    }
  });
}

template <class Op>
void OmniReduceCompressor::for_union_values(std::span<const uint8_t> in, const TensorSpec& spec, Op&& op) const {
  check_spec(spec);
  if (spec.count == 0) return;
  const uint8_t* src = in.data();
  if (compact_) {  // every element is a union element
    kern::parallel_for(spec.count, kGrainElements, [&](uint64_t b, uint64_t e) { op(b, e, src + 2 * b); });
    return;
  }
  const uint64_t begin = spec.offset, end = spec.offset + spec.count, base = union_before(begin);
  const uint64_t c0 = begin / chunk_, c1 = (end - 1) / chunk_ + 1;
  kern::parallel_for(c1 - c0, std::max<uint64_t>(1, kGrainElements / chunk_), [&](uint64_t b, uint64_t e) {
    for (uint64_t c = c0 + b; c < c0 + e; ++c) {
      const uint64_t lo = std::max(begin, c * chunk_), hi = std::min(end, (c + 1) * chunk_);
      if (!in_union(c)) {
        op(lo - begin, hi - begin, nullptr);
        continue;
      }
      op(lo - begin, hi - begin, src + 2 * (union_before(lo) - base));
    }
  });
}

void OmniReduceCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                  std::span<float> out) {
  float* dst = out.data();
  for_union_values(in, spec, [dst](uint64_t lo, uint64_t hi, const uint8_t* values) {
    if (values == nullptr) {
      std::fill(dst + lo, dst + hi, 0.0f);
      return;
    }
    for (uint64_t i = lo; i < hi; ++i) dst[i] = get_bf16(values, i - lo);
  });
}

void OmniReduceCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                             std::span<float> acc) {
  float* dst = acc.data();
  for_union_values(in, spec, [dst](uint64_t lo, uint64_t hi, const uint8_t* values) {
    if (values == nullptr) return;  // outside U: adds nothing
    for (uint64_t i = lo; i < hi; ++i) dst[i] += get_bf16(values, i - lo);
  });
}

uint64_t OmniReduceCompressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec,
                                            const HopContext& hop) const {
  if (!topo::is_round_op(kind)) return Compressor::memory_bytes(kind, spec, hop);
  if (kind == topo::KernelKind::kPlanLocal) return 4 * spec.count + plan_format(spec.count, hop.ranks).wire_bytes();
  const bool planned = !prefix_.empty() && spec.count == elements_;
  const uint64_t u = planned ? prefix_.back() : spec.count;
  const bool prepare = kind == topo::KernelKind::kPrepare;
  if (send_own_ && prepare) {  // the rank's own entries, about k chunks of them
    const uint64_t k = planned ? committed_k_ : local_k(chunks_of(spec.count));
    const uint64_t own = std::min(spec.count, k * chunk_);
    // In place (sparse, or a union of everything): zeros over the rest; else a gather of u entries
    // that reads the own ones.
    return !compact_ || u == spec.count ? 4 * (spec.count - own) : 4 * own + 4 * u;
  }
  if (u == spec.count) return 0;  // every chunk in the union: the tensor is the reduced vector
  if (!compact_) return prepare ? 4 * (spec.count - u) : 0;
  return prepare ? 8 * u : 4 * u + 4 * spec.count;
}

void OmniReduceCompressor::prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t,
                                   const kern::RngKey&) {
  CCSIM_CHECK(!prefix_.empty() && x.size() == elements_ && out.size() == reduced_elements(x.size()),
              "omnireduce: prepare of {} elements into {} with a plan of {}", x.size(), out.size(), elements_);
  const float* src = x.data();
  float* dst = out.data();
  const uint64_t* own = own_words(rank);  // null: send every union chunk
  kern::parallel_for(n_chunks_, std::max<uint64_t>(1, kGrainElements / chunk_), [&](uint64_t c0, uint64_t c1) {
    for (uint64_t c = c0; c < c1; ++c) {
      const uint64_t lo = c * chunk_, hi = std::min<uint64_t>(x.size(), (c + 1) * chunk_);
      if (compact_) {  // gather: chunk c lands at its rank among the union chunks
        if (!in_union(c)) continue;
        if (!sends(own, c)) std::fill(dst + prefix_[c], dst + prefix_[c] + (hi - lo), 0.0f);
        else if (src + lo != dst + prefix_[c]) std::copy(src + lo, src + hi, dst + prefix_[c]);
      } else if (in_union(c) && sends(own, c)) {
        if (src != dst) std::copy(src + lo, src + hi, dst + lo);
      } else {
        std::fill(dst + lo, dst + hi, 0.0f);
      }
    }
  });
}

void OmniReduceCompressor::finish(std::span<const float> reduced, std::span<float> out, uint32_t, uint32_t) {
  if (!compact_) {
    copy_unless_same(reduced, out);
    return;
  }
  CCSIM_CHECK(!prefix_.empty() && out.size() == elements_ && reduced.size() == prefix_.back(),
              "omnireduce: finish of {} elements into {} with a plan of {}", reduced.size(), out.size(), elements_);
  if (reduced.size() == out.size()) {  // every chunk is in U: the compact vector is the tensor
    copy_unless_same(reduced, out);
    return;
  }
  const float* src = reduced.data();
  float* dst = out.data();
  kern::parallel_for(n_chunks_, std::max<uint64_t>(1, kGrainElements / chunk_), [&](uint64_t c0, uint64_t c1) {
    for (uint64_t c = c0; c < c1; ++c) {  // scatter back, zeros outside U
      const uint64_t lo = c * chunk_, hi = std::min<uint64_t>(out.size(), (c + 1) * chunk_);
      if (in_union(c)) std::copy(src + prefix_[c], src + prefix_[c] + (hi - lo), dst + lo);
      else std::fill(dst + lo, dst + hi, 0.0f);
    }
  });
}

}  // namespace ccsim::algo
