#include "algorithms/thc/thc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/quant/minifloat.hpp"
#include "kernels/quant/thc_quant.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/transform/hadamard.hpp"
#include "kernels/stats/entropy.hpp"
#include "sim/base/check.hpp"
#include "sim/base/uninit_vector.hpp"

namespace ccsim::algo {
namespace {

constexpr uint64_t kPiece = 1 << 16;

// work[0, elements) = x * 2^-k, work[elements, size) = 0 (work may be x itself).
// (kern::thc_scale_pow2's two exact factors, hoisted out of the loop: the same products.)
void load_scaled(std::span<const float> x, std::span<float> work, int k) {
  const float* src = x.data();
  float* dst = work.data();
  const uint64_t n = x.size();
  const float f1 = kern::exact_pow2(-k / 2), f2 = kern::exact_pow2(-k - -k / 2);
  kern::parallel_for(work.size(), kPiece, [=](uint64_t b, uint64_t e) {
    const uint64_t mid = std::clamp(n, b, e);
    for (uint64_t i = b; i < mid; ++i) dst[i] = (src[i] * f1) * f2;
    std::fill(dst + mid, dst + e, 0.0f);
  });
}

// The chunk of whole blocks rotated_max_abs() rotates at a time.
uint64_t rotated_chunk(uint64_t block) {
  constexpr uint64_t kChunk = 1 << 20;
  return block * std::max<uint64_t>(1, kChunk / block);
}

// kern::max_abs() of x (its largest |x[i]|, or the first NaN) and the smallest nonzero finite
// |x[i]| (+inf where there is none): kern::abs_extremes() of each piece, in one pass.
std::pair<float, float> extremes(std::span<const float> x) {
  const uint64_t pieces = (x.size() + kPiece - 1) / kPiece;
  std::vector<float> most(pieces), least(pieces);
  const float* data = x.data();
  const uint64_t n = x.size();
  kern::parallel_for(pieces, 1, [&most, &least, data, n](uint64_t p0, uint64_t p1) {
    for (uint64_t p = p0; p < p1; ++p) {
      const uint64_t b = p * kPiece, e = std::min(n, b + kPiece);
      kern::abs_extremes(data + b, e - b, most[p], least[p]);
    }
  });
  // The pieces' maxima combined as kern::parallel_max_abs() combines them (the first NaN, if any).
  return {kern::max_abs(most.data(), pieces),
          least.empty() ? std::numeric_limits<float>::infinity() : *std::min_element(least.begin(), least.end())};
}

// max |H·D·x'| of one chunk: work = x · 2^-k (zero-padded past x's end), rotated in blocks of
// `block` whose signs start at entry `index_base` of the tensor.
float rotated_chunk_max(std::span<const float> x, std::span<float> work, int k, uint64_t block,
                        const kern::RngKey& key, uint64_t index_base) {
  load_scaled(x, work, k);
  kern::randomized_hadamard_transform(work.data(), work.size(), block, key, index_base);
  return kern::parallel_max_abs(work.data(), work.size());
}

// max |H·D·x'| over every rotation block, x' = x · 2^-k zero-padded to `padded` entries: whole
// blocks a chunk at a time in one scratch buffer, with their own signs (index_base), so the same
// blocks and arithmetic as rotating the whole padded tensor at once, and the same maximum, without
// mapping a padded copy of the tensor.
float rotated_max_abs(std::span<const float> x, uint64_t padded, uint64_t block, int k, const kern::RngKey& key) {
  const uint64_t chunk = rotated_chunk(block);
  UninitVector<float> work(std::min(chunk, padded));  // every entry written by load_scaled
  float m = 0.0f;
  for (uint64_t c0 = 0; c0 < padded; c0 += chunk) {
    const std::span<float> w(work.data(), std::min(chunk, padded - c0));
    m = std::max(m, rotated_chunk_max(x.subspan(std::min<uint64_t>(c0, x.size())), w, k, block, key, c0));
  }
  return m;
}

void fill(std::span<float> x, float v) {
  kern::parallel_for(x.size(), kPiece, [=](uint64_t b, uint64_t e) { std::fill(x.data() + b, x.data() + e, v); });
}

}  // namespace

CompressorInfo ThcCompressor::info() {
  ParamTable params;
  params.add_int("q", "bits of a rank's lattice code (2^q - 1 lattice steps)", 4, 1, 15)
      .add_choice("bits",
                  "width of the aggregation fields carrying partial sums: auto (8 for <= 8 ranks, else 12), 8, 12 "
                  "or 16; must hold ranks * (2^q - 1)",
                  "auto", {"auto", "8", "12", "16"})
      .add_int("rotation_block",
               "randomized Hadamard block (capped at the power of two >= the tensor, which is zero-padded to a "
               "multiple of it)",
               int64_t{1} << 20, 1, int64_t{1} << 24, true);
  return {"thc",
          "THC homomorphic quantization: shared randomized Hadamard rotation, q-bit stochastic codes on a global "
          "lattice, integer partial sums in b-bit fields (8 or 12 bits/element)",
          std::move(params),
          [](const Params& p) {
            const std::string bits = p.get_string("bits");
            return std::make_unique<ThcCompressor>(static_cast<uint32_t>(p.get_int("q")),
                                                   bits == "auto" ? 0u : static_cast<uint32_t>(std::stoul(bits)),
                                                   static_cast<uint64_t>(p.get_int("rotation_block")));
          },
          [](const Params& p) -> Status {
            const std::string bits = p.get_string("bits");
            const int64_t q = p.get_int("q");
            if (bits != "auto" && static_cast<int64_t>(std::stoul(bits)) < q)
              return invalid_argument_at("/bits", fmt::format(
                  "{}-bit aggregation fields cannot hold one rank's {}-bit codes (q = {})", bits, q, q));
            return ok_status();
          }};
}

uint64_t ThcCompressor::wire_bytes(const TensorSpec& spec, const HopContext& hop) const {
  return kern::thc_bytes(spec.count, aggregation_bits(hop.ranks));
}

void ThcCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey&,
                           std::span<uint8_t> out) {
  kern::thc_pack(x.data(), spec.count, aggregation_bits(hop.ranks), out.data());
}

void ThcCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                           std::span<float> out) {
  kern::thc_unpack(in.data(), spec.count, aggregation_bits(hop.ranks), out.data());
}

void ThcCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                                      std::span<float> acc) {
  kern::thc_unpack_accumulate(in.data(), spec.count, aggregation_bits(hop.ranks), acc.data());
}

void ThcCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec,
                                             const HopContext& hop_in, std::span<float> acc,
                                             const HopContext& hop_out, const kern::RngKey&,
                                             std::span<uint8_t> out) {
  kern::thc_unpack_accumulate_pack(in.data(), spec.count, aggregation_bits(hop_in.ranks), acc.data(),
                                   aggregation_bits(hop_out.ranks), out.data());
}

uint64_t ThcCompressor::rotation_block_for(uint64_t elements) const {
  return std::min<uint64_t>(rotation_block_, std::bit_ceil(std::max<uint64_t>(elements, 1)));
}

uint64_t ThcCompressor::reduced_elements(uint64_t elements) const {
  const uint64_t block = rotation_block_for(elements);
  return (elements + block - 1) / block * block;
}

uint64_t ThcCompressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const {
  if (!topo::is_round_op(kind)) return Compressor::memory_bytes(kind, spec, hop);
  const uint64_t padded = reduced_elements(spec.count);
  const uint64_t passes = kern::hadamard_tiled_passes(rotation_block_for(spec.count));
  if (kind == topo::KernelKind::kPlanLocal) return 4 * spec.count + (8 * passes - 4) * padded;
  return 8 * passes * padded;
}

double ThcCompressor::entry_divisor(uint64_t block) {
  const int log2_block = std::countr_zero(block);
  return std::ldexp(1.0, (log2_block + 1) / 2 + 1);
}

void ThcCompressor::plan_local(std::span<const float> x, uint32_t, const kern::RngKey& key, PlanStats& out) const {
  const float a = kern::parallel_max_abs(x.data(), x.size());
  if (!(a > 0.0f) || !std::isfinite(a)) {  // zero, or non-finite (NaN or inf): reported as is
    out.max[0] = a;
    return;
  }
  // Rotate in the rank's own frame (max |x| 2^-e in [1, 2)); the prepared frame differs by a power
  // of two, which commutes exactly with the transform.
  const int e = kern::floor_log2(a);
  const uint64_t block = rotation_block_for(x.size());
  out.max[0] = plan_entry(rotated_max_abs(x, reduced_elements(x.size()), block, e, shared_key(key)), e, block);
}

float ThcCompressor::plan_entry(float m, int e, uint64_t block) {
  const double entry = std::ldexp(static_cast<double>(m), e) / entry_divisor(block);
  float f = static_cast<float>(entry);
  if (static_cast<double>(f) < entry) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// plan_local() a chunk of whole rotation blocks at a time (the chunks rotated_max_abs() takes).
// The rank's frame 2^-e is known only after the last piece, so each chunk is rotated in its own,
// 2^-e_c with e_c = floor(log2 max |chunk|) <= e, and its maximum m_c brought to the rank's frame
// at the end as m_c 2^(e_c - e). That is the maximum rotating in the rank's frame gives, bit for
// bit, when every nonzero x 2^-e is a normal float: scaling by a power of two is then exact in both
// frames, the butterflies' sums and differences round alike in both (relative rounding of normal
// values; a result in the subnormal range is exact), and so does the final scaling of the block
// maximum that decides the result (at least 2^-12 in the rank's frame, since B <= 2^24); a chunk's
// maximum whose rescaling leaves the normal range is far below it. Where an entry would leave the
// normal range, finish() declines and the rank is planned on its whole tensor.
class ThcCompressor::Pieces final : public PlanPieces {
 public:
  Pieces(const ThcCompressor& comp, uint64_t elements, const kern::RngKey& shared)
      : elements_(elements), padded_(comp.reduced_elements(elements)), block_(comp.rotation_block_for(elements)),
        chunk_(rotated_chunk(block_)), shared_(shared) {}
  void add(std::span<const float> x, uint64_t offset) override {
    CCSIM_CHECK(offset % chunk_ == 0 && offset + x.size() <= elements_, "thc: plan piece [{}, {}) not aligned to {}",
                offset, offset + x.size(), chunk_);
    CCSIM_CHECK(x.size() % chunk_ == 0 || offset + x.size() == elements_,
                "thc: plan piece [{}, {}) ends inside a chunk of {}", offset, offset + x.size(), chunk_);
    for (uint64_t c = 0; c < x.size(); c += chunk_) {
      const std::span<const float> xc = x.subspan(c, std::min(chunk_, x.size() - c));
      const auto [a, least] = extremes(xc);
      chunk_max_.push_back(a);
      if (!(a > 0.0f) || !std::isfinite(a)) continue;  // all zero (its maximum is 0), or not finite
      min_ = std::min(min_, least);
      const uint64_t c0 = offset + c;
      const int ec = kern::floor_log2(a);
      work_.resize(std::min(chunk_, padded_ - c0));  // the tensor's last chunk takes its padding
      rotated_.emplace_back(rotated_chunk_max(xc, work_, ec, block_, shared_, c0), ec);
    }
  }
  bool finish(PlanStats& out) override {
    const float a = kern::max_abs(chunk_max_.data(), chunk_max_.size());  // plan_local()'s max |x|
    if (!(a > 0.0f) || !std::isfinite(a)) {  // as plan_local(): zero or non-finite, reported as is
      out.max[0] = a;
      return true;
    }
    const int e = kern::floor_log2(a);
    if (!(static_cast<double>(min_) * std::ldexp(1.0, -e) >= 0x1p-126)) return false;
    float m = 0.0f;
    for (const auto& [mc, ec] : rotated_) m = std::max(m, std::ldexp(mc, ec - e));
    out.max[0] = plan_entry(m, e, block_);
    return true;
  }

 private:
  uint64_t elements_, padded_, block_, chunk_;
  kern::RngKey shared_;
  float min_ = std::numeric_limits<float>::infinity();
  UninitVector<float> work_;
  std::vector<float> chunk_max_;                // every chunk's max_abs(), in order
  std::vector<std::pair<float, int>> rotated_;  // rotated chunks' maxima and frames
};

std::unique_ptr<PlanPieces> ThcCompressor::plan_pieces(uint64_t elements, uint32_t, const kern::RngKey& key) const {
  return std::make_unique<Pieces>(*this, elements, shared_key(key));
}

uint64_t ThcCompressor::plan_piece_alignment(uint64_t elements) const {
  return rotated_chunk(rotation_block_for(elements));
}

Status ThcCompressor::can_reduce(uint64_t /*elements*/, uint32_t ranks) const {
  const uint32_t bits = aggregation_bits(ranks);
  const uint64_t peak = uint64_t{ranks} * levels(), field_max = (uint64_t{1} << bits) - 1;
  if (peak <= field_max) return ok_status();
  return invalid_argument_at(
      "/bits", fmt::format("{}-bit aggregation fields{} overflow on {} ranks: a sum of {} codes of q = {} bits reaches "
                           "{} * {} = {} > 2^{} - 1 = {}; needs bits >= {}",
                           bits, bits_ == 0 ? " (auto)" : "", ranks, ranks, q_, ranks, levels(), peak, bits, field_max,
                           std::bit_width(peak)));
}

Status ThcCompressor::plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) {
  CCSIM_RETURN_IF_ERROR(can_reduce(elements, ranks));
  CCSIM_CHECK(combined.max.size() == 1, "thc: {} max entries", combined.max.size());
  planned_elements_ = elements;
  planned_ranks_ = ranks;
  const float entry = combined.max[0];
  if (!std::isfinite(entry)) {
    lattice_ = Lattice::kNonFinite;
    return ok_status();
  }
  if (entry == 0.0f) {
    lattice_ = Lattice::kZero;
    return ok_status();
  }
  const double m = static_cast<double>(entry) * entry_divisor(rotation_block_for(elements));
  int exponent = 0;
  std::frexp(m, &exponent);  // m = f 2^exponent, f in [0.5, 1)
  k_ = exponent - 1;
  m_ = static_cast<float>(std::ldexp(m, -k_));  // exact: entry's significand, in [1, 2)
  const float l = static_cast<float>(levels());
  step_ = (2.0f * m_) / l;
  inv_step_ = l / (2.0f * m_);
  lattice_ = Lattice::kValid;
  return ok_status();
}

kern::ThcLattice ThcCompressor::committed_lattice() const {
  CCSIM_CHECK(lattice_ != Lattice::kNone, "thc: no committed plan");
  kern::ThcLattice l;
  l.kind = lattice_ == Lattice::kZero        ? kern::ThcLattice::Kind::kZero
           : lattice_ == Lattice::kNonFinite ? kern::ThcLattice::Kind::kNonFinite
                                              : kern::ThcLattice::Kind::kValid;
  if (lattice_ == Lattice::kValid) {
    l.k = k_;
    l.m = m_;
    l.step = step_;
    l.inv_step = inv_step_;
  }
  l.levels = levels();
  return l;
}

std::vector<PlanDecision> ThcCompressor::plan_decisions() const {
  if (lattice_ == Lattice::kNone) return {};
  const uint32_t bits = aggregation_bits(planned_ranks_);
  switch (lattice_) {
    case Lattice::kZero: return {{"scale", 0.0, fmt::format("lattice=zero q={} bits={}", q_, bits)}};
    case Lattice::kNonFinite:
      return {{"scale", std::numeric_limits<double>::infinity(),
               fmt::format("lattice=nonfinite q={} bits={}", q_, bits)}};
    default:
      return {{"scale", lattice_max(), fmt::format("lattice=valid k={} m={} q={} bits={}", k_, m_, q_, bits)}};
  }
}

void ThcCompressor::prepare(std::span<const float> x, std::span<float> out, uint32_t, uint32_t,
                            const kern::RngKey& key) {
  CCSIM_CHECK(lattice_ != Lattice::kNone && x.size() == planned_elements_,
              "thc: prepare of {} elements without a committed plan for it (planned {}): run plan_round() first",
              x.size(), planned_elements_);
  CCSIM_CHECK(out.size() == reduced_elements(x.size()), "thc: prepare into {} elements, reduces {}", out.size(),
              reduced_elements(x.size()));
  round_key_ = shared_key(key);
  if (lattice_ != Lattice::kValid) return fill(out, 0.0f);
  load_scaled(x, out, k_);
  kern::randomized_hadamard_transform(out.data(), out.size(), rotation_block_for(x.size()), round_key_, 0);
  kern::thc_lattice_codes(out.data(), out.size(), m_, inv_step_, levels(), key, 0);
}

void ThcCompressor::finish(std::span<const float> reduced, std::span<float> out, uint32_t, uint32_t ranks) {
  CCSIM_CHECK(
      lattice_ != Lattice::kNone && out.size() == planned_elements_ && reduced.size() == reduced_elements(out.size()),
      "thc: finish of {} -> {} elements without a committed plan for it (planned {})", reduced.size(), out.size(),
      planned_elements_);
  CCSIM_CHECK(ranks == planned_ranks_, "thc: finish of a sum over {} ranks, planned {}", ranks, planned_ranks_);
  if (lattice_ == Lattice::kZero) return fill(out, 0.0f);
  if (lattice_ == Lattice::kNonFinite) return fill(out, std::numeric_limits<float>::quiet_NaN());
  // Work in `out` when the sizes agree (aliasing allowed), else on a copy.
  std::vector<float> copy;
  std::span<float> work = out;
  if (reduced.size() == out.size()) {
    copy_unless_same(reduced, out);
  } else {
    copy.assign(reduced.begin(), reduced.end());
    work = copy;
  }
  const float m = m_, step = step_;
  float* w = work.data();
  kern::parallel_for(work.size(), kPiece, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) w[i] = kern::thc_lattice_value(w[i], m, step, ranks);
  });
  kern::randomized_hadamard_inverse(w, work.size(), rotation_block_for(out.size()), round_key_, 0);
  const int k = k_;
  float* dst = out.data();
  kern::parallel_for(out.size(), kPiece, [=](uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; ++i) dst[i] = kern::thc_scale_pow2(w[i], k);
  });
}

}  // namespace ccsim::algo
