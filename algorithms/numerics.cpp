#include "algorithms/numerics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "algorithms/detail/error_piece.hpp"
#include "kernels/parallel.hpp"
#include "kernels/stats/error_sums.hpp"
#include "sim/base/check.hpp"
#include "sim/base/uninit_vector.hpp"

namespace ccsim::algo {

std::vector<uint64_t> byte_balanced_cuts(const Compressor& compressor, uint64_t elements, uint32_t parts,
                                         const HopContext& hop) {
  CCSIM_CHECK(parts >= 1, "byte_balanced_cuts: no parts");
  const uint64_t align = std::max<uint64_t>(compressor.alignment(), 1);
  const uint64_t blocks = (elements + align - 1) / align;  // candidate boundaries: b * align, b = 0..blocks
  auto prefix = [&](uint64_t b) -> uint64_t {
    const uint64_t end = std::min(b * align, elements);
    return end == 0 ? 0 : compressor.wire_bytes({0, end}, hop);
  };
  const long double total = static_cast<long double>(prefix(blocks));
  std::vector<uint64_t> cuts{0};
  uint64_t lo_block = 0;
  for (uint32_t k = 1; k < parts; ++k) {
    const long double target = total * k / parts;
    uint64_t lo = lo_block, hi = blocks;  // smallest b in [lo, hi] with prefix(b) >= target
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (static_cast<long double>(prefix(mid)) >= target) hi = mid; else lo = mid + 1;
    }
    lo_block = lo;
    // An inner boundary stays on the alignment (as split_even's do): past the last whole block it
    // is the last whole block's end, and the shards after it are empty but for the partial block.
    cuts.push_back(lo * align <= elements ? lo * align : (blocks - 1) * align);
  }
  cuts.push_back(elements);
  return cuts;
}

void set_shard_options(const Compressor& compressor, topo::CollectiveOp op, uint64_t reduced, uint32_t ranks,
                       topo::CollectiveOptions& options) {
  options.align = compressor.alignment();
  options.cuts.clear();
  if (op == topo::CollectiveOp::kAllReduce || op == topo::CollectiveOp::kReduceScatter ||
      op == topo::CollectiveOp::kAllGather)
    options.cuts = compressor.shard_cuts(reduced, ranks);
}

RoundBytes tensor_bytes(const Compressor& compressor, uint64_t reduced, uint32_t ranks,
                        const topo::CollectiveOptions& options) {
  RoundBytes bytes;
  for (const auto& c : topo::shard_split(reduced, ranks, options)) {
    const TensorSpec spec{c.offset, c.count};
    const uint64_t payload = compressor.payload_bytes(spec, {1, ranks});
    bytes.payload += payload;
    bytes.metadata += compressor.wire_bytes(spec, {1, ranks}) - payload;
  }
  return bytes;
}

double numerics_peak_bytes(const Compressor& compressor, uint64_t elements, uint32_t ranks) {
  const auto n = static_cast<double>(elements), g = static_cast<double>(ranks);
  const uint64_t reduced = compressor.reduced_elements(elements);
  const double own = reduced == elements ? 0.0 : g * static_cast<double>(reduced) * 4;
  return 2 * g * n * 4 + own + n * 4 + 32.0 * (1 << 20);
}

void copy_unless_same(std::span<const float> from, std::span<float> to) {
  CCSIM_CHECK(from.size() == to.size(), "copy of {} elements into {}", from.size(), to.size());
  if (from.data() != to.data()) std::copy(from.begin(), from.end(), to.begin());
}

using topo::KernelKind;
using topo::Op;
using topo::OpKind;

void bind_ops(topo::Schedule& schedule, const Compressor& compressor, topo::OpId first, topo::OpId end) {
  const auto& chunks = schedule.chunks();
  const uint32_t ranks = schedule.num_ranks();
  auto spec_of = [&](uint32_t chunk) { return TensorSpec{chunks[chunk].offset, chunks[chunk].count}; };
  for (topo::OpId id = first; id < end; ++id) {
    Op& op = schedule.mutable_op(id);
    uint64_t bytes = 0;
    if (op.kind == OpKind::kTransfer) {
      schedule.for_each_message(op, [&](const topo::MessageRef& m) {
        bytes += compressor.wire_bytes(spec_of(m.chunk), HopContext{m.summed, ranks});
      });
    } else if (topo::Schedule::consumes_message(op.kernel)) {
      // Decoders see the incoming message's hop; encoders the hop they produce.
      schedule.for_each_message(op, [&](const topo::MessageRef& m) {
        bytes += compressor.memory_bytes(op.kernel, spec_of(m.chunk), HopContext{m.summed, ranks});
      });
    } else {
      bytes = compressor.memory_bytes(op.kernel, spec_of(op.chunk), HopContext{op.summed, ranks});
    }
    op.bytes = bytes;
  }
}

std::vector<KernelKind> round_ops(const Compressor& compressor, uint64_t elements, uint32_t ranks) {
  std::vector<KernelKind> out;
  for (KernelKind k : {KernelKind::kPlanLocal, KernelKind::kPrepare, KernelKind::kFinish})
    if (compressor.memory_bytes(k, TensorSpec{0, elements}, HopContext{1, ranks}) > 0) out.push_back(k);
  return out;
}

void bind_schedule(topo::Schedule& schedule, const Compressor& compressor) {
  bind_ops(schedule, compressor, schedule.id_base(), schedule.id_end());
}

PlanAccumulator::PlanAccumulator(Compressor& compressor, uint64_t elements, uint32_t ranks,
                                 const NumericsOptions& options)
    : comp_(&compressor), elements_(elements), ranks_(ranks), options_(options),
      format_(compressor.plan_format(elements, ranks)) {}

namespace {

// Statistics of `format`'s sizes, zeroed: what plan_local() writes into.
PlanStats zero_stats(const PlanFormat& format) {
  PlanStats s;
  s.sum.assign(format.sum_entries, 0.0);
  s.max.assign(format.max_entries, 0.0f);
  s.bits.assign(format.bit_words, 0);
  return s;
}

}  // namespace

void PlanAccumulator::add(std::span<const float> x) {
  CCSIM_CHECK(added_ < ranks_, "plan statistics of {} ranks for {}", added_ + 1, ranks_);
  CCSIM_CHECK(x.size() == elements_, "rank inputs of {} and {} elements", elements_, x.size());
  if (format_.empty()) {
    ++added_;
    return;
  }
  PlanStats local = zero_stats(format_);
  comp_->plan_local(x, added_, kern::RngKey{options_.seed, options_.round, added_, kPlanStream}, local);
  add_stats(std::move(local));
}

void PlanAccumulator::add_stats(PlanStats local) {
  CCSIM_CHECK(added_ < ranks_, "plan statistics of {} ranks for {}", added_ + 1, ranks_);
  const uint32_t r = added_++;
  if (format_.empty()) return;
  CCSIM_CHECK(local.sum.size() == format_.sum_entries && local.max.size() == format_.max_entries &&
                  local.bits.size() == format_.bit_words,
              "{}: plan_local changed the statistics' sizes", comp_->name());
  if (r == 0) {
    combined_ = std::move(local);
    return;
  }
  // Entry by entry (a NaN maximum wins), in pieces on every thread.
  const uint64_t n = std::max({format_.sum_entries, format_.max_entries, format_.bit_words});
  kern::parallel_for(n, uint64_t{1} << 16, [&](uint64_t b, uint64_t e) {
    double* sum = combined_.sum.data();
    for (uint64_t i = b; i < std::min(e, format_.sum_entries); ++i) sum[i] += local.sum[i];
    float* most = combined_.max.data();
    for (uint64_t i = b; i < std::min(e, format_.max_entries); ++i) {
      const float l = local.max[i], m = most[i];
      most[i] = l > m || l != l ? l : m;
    }
    uint64_t* bits = combined_.bits.data();
    for (uint64_t i = b; i < std::min(e, format_.bit_words); ++i) bits[i] |= local.bits[i];
  });
}

void PlanAccumulator::adopt(const PlanAccumulator& other) {
  CCSIM_CHECK(added_ == 0 && other.added_ == ranks_ && other.ranks_ == ranks_ && other.elements_ == elements_,
              "{}: adopting {} of {} ranks' statistics", comp_->name(), other.added_, other.ranks_);
  CCSIM_CHECK(other.format_.sum_entries == format_.sum_entries && other.format_.max_entries == format_.max_entries &&
                  other.format_.bit_words == format_.bit_words,
              "{}: adopting statistics of another format", comp_->name());
  combined_ = other.combined_;
  added_ = other.added_;
}

namespace {

Result<PlanReport> commit_combined(Compressor& comp, const PlanFormat& format, const PlanStats& combined,
                                   uint64_t elements, uint32_t ranks) {
  PlanReport report;
  if (format.empty()) return report;
  CCSIM_RETURN_IF_ERROR(comp.plan_commit(combined, elements, ranks));
  report.ran = true;
  report.wire_bytes_per_rank = format.wire_bytes();
  return report;
}

}  // namespace

Result<PlanReport> PlanAccumulator::commit() {
  CCSIM_CHECK(added_ == ranks_, "plan committed after {} of {} ranks", added_, ranks_);
  return commit_combined(*comp_, format_, combined_, elements_, ranks_);
}

const PlanStats* PlanStatsCache::find(const std::string& identity, uint64_t elements, uint32_t ranks,
                                      const NumericsOptions& options) const {
  for (const Entry& e : entries_)
    if (e.identity == identity && e.elements == elements && e.ranks == ranks && e.seed == options.seed &&
        e.round == options.round)
      return &e.combined;
  return nullptr;
}

void PlanStatsCache::store(const std::string& identity, uint64_t elements, uint32_t ranks,
                           const NumericsOptions& options, const PlanStats& combined) {
  entries_.push_back(Entry{identity, elements, ranks, options.seed, options.round, combined});
}

namespace {

// Compressors of one plan_local_identity() (or one without), their ranks' statistics piece by piece.
struct PieceSet {
  std::string identity;
  std::vector<size_t> members;
  std::vector<std::unique_ptr<PlanPieces>> ranks;
};

// The sets, one per identity, of the compressors that plan in pieces; `align` becomes the least
// common multiple of their alignments and its own.
std::vector<PieceSet> piece_sets(std::span<Compressor* const> compressors, uint64_t elements, uint32_t ranks,
                                 const NumericsOptions& options, uint64_t& align) {
  std::vector<PieceSet> sets;
  for (size_t i = 0; i < compressors.size(); ++i) {
    const Compressor& c = *compressors[i];
    const std::string identity = c.plan_local_identity();
    auto same = std::find_if(sets.begin(), sets.end(), [&](const PieceSet& s) {
      return !identity.empty() && s.identity == identity;
    });
    if (same != sets.end()) {
      same->members.push_back(i);
      continue;
    }
    PieceSet set{identity, {i}, {}};
    for (uint32_t r = 0; r < ranks; ++r)
      set.ranks.push_back(c.plan_pieces(elements, r, kern::RngKey{options.seed, options.round, r, kPlanStream}));
    if (set.ranks.empty() || std::any_of(set.ranks.begin(), set.ranks.end(), [](const auto& p) { return !p; }))
      continue;
    align = std::lcm(align, std::max<uint64_t>(1, c.plan_piece_alignment(elements)));
    sets.push_back(std::move(set));
  }
  return sets;
}

// A piece of about `piece_elements` entries, a multiple of `align`.
uint64_t piece_of(uint64_t align, uint64_t piece_elements) {
  return align * std::max<uint64_t>(1, piece_elements / align);
}

}  // namespace

uint64_t plan_piece_length(std::span<const Compressor* const> compressors, uint64_t elements,
                           uint64_t source_alignment, uint64_t piece_elements) {
  uint64_t align = std::max<uint64_t>(1, source_alignment);
  bool any = false;
  for (const Compressor* c : compressors) {
    if (!c->plan_pieces(elements, 0, kern::RngKey{0, 0, 0, kPlanStream})) continue;
    any = true;
    align = std::lcm(align, std::max<uint64_t>(1, c->plan_piece_alignment(elements)));
  }
  if (!any || align > kMaxPlanPiece) return 0;
  return std::min(elements, piece_of(align, piece_elements));
}

std::vector<std::unique_ptr<PlanAccumulator>> plan_in_pieces(std::span<Compressor* const> compressors,
                                                             uint64_t elements, uint32_t ranks,
                                                             const NumericsOptions& options, const PieceSource& source,
                                                             uint64_t source_alignment, uint64_t piece_elements) {
  std::vector<std::unique_ptr<PlanAccumulator>> out(compressors.size());
  uint64_t align = std::max<uint64_t>(1, source_alignment);
  std::vector<PieceSet> sets = piece_sets(compressors, elements, ranks, options, align);
  if (sets.empty() || align > kMaxPlanPiece) return out;
  const uint64_t piece = piece_of(align, piece_elements);
  RankTensors buffers(ranks);
  for (auto& b : buffers) b.resize(std::min(piece, elements));
  std::vector<std::span<float>> views(ranks);
  for (uint64_t offset = 0; offset < elements; offset += piece) {
    const uint64_t n = std::min(piece, elements - offset);
    for (uint32_t r = 0; r < ranks; ++r) views[r] = std::span<float>(buffers[r].data(), n);
    source(offset, views);
    // Each rank's statistics are its own: where whole ranks balance over the threads within a
    // quarter, each thread takes whole ranks (their kernels inline), else every kernel takes every
    // thread.
    auto add = [&](uint64_t r0, uint64_t r1) {
      for (uint64_t r = r0; r < r1; ++r)
        for (PieceSet& set : sets) set.ranks[r]->add(views[r], offset);
    };
    const auto threads = static_cast<uint64_t>(kern::worker_threads());
    if (4 * ((ranks + threads - 1) / threads) * threads > 5 * uint64_t{ranks}) {
      add(0, ranks);
      continue;
    }
    kern::parallel_for(ranks, 1, [&](uint64_t r0, uint64_t r1) {
      const kern::SerialScope serial;
      add(r0, r1);
    });
  }
  for (PieceSet& set : sets) {
    // Each rank's statistics added as it finishes, and its pieces' state dropped: one rank's held.
    const size_t first = set.members.front();
    const PlanFormat format = compressors[first]->plan_format(elements, ranks);
    auto acc = std::make_unique<PlanAccumulator>(*compressors[first], elements, ranks, options);
    bool whole = true;
    for (uint32_t r = 0; r < ranks && whole; ++r) {
      PlanStats stats = zero_stats(format);
      whole = set.ranks[r]->finish(stats);
      set.ranks[r].reset();
      if (whole) acc->add_stats(std::move(stats));
    }
    if (!whole) continue;
    out[first] = std::move(acc);
    for (size_t i : set.members) {
      if (i == first) continue;
      out[i] = std::make_unique<PlanAccumulator>(*compressors[i], elements, ranks, options);
      out[i]->adopt(*out[first]);
    }
  }
  return out;
}

Result<PlanReport> plan_round(Compressor& compressor, std::span<const std::span<const float>> inputs,
                              const NumericsOptions& options, PlanStatsCache* cache) {
  CCSIM_CHECK(!inputs.empty());
  const uint64_t elements = inputs[0].size();
  const auto ranks = static_cast<uint32_t>(inputs.size());
  const std::string identity = cache != nullptr ? compressor.plan_local_identity() : std::string();
  if (!identity.empty())
    if (const PlanStats* known = cache->find(identity, elements, ranks, options)) {
      const PlanFormat format = compressor.plan_format(elements, ranks);
      CCSIM_CHECK(known->sum.size() == format.sum_entries && known->max.size() == format.max_entries &&
                      known->bits.size() == format.bit_words,
                  "{}: statistics shared under '{}' do not fit its plan format", compressor.name(), identity);
      return commit_combined(compressor, format, *known, elements, ranks);
    }
  PlanAccumulator acc(compressor, elements, ranks, options);
  for (const auto& x : inputs) acc.add(x);
  if (!identity.empty()) cache->store(identity, elements, ranks, options, acc.combined());
  return acc.commit();
}

namespace {

using detail::kErrorPiece;

// The squared error and norm of got[0, n) against exact[0, n), in element order.
ErrorStats piece_error(const float* exact, const float* got, uint64_t n) {
  ErrorStats e;
  kern::squared_errors(exact, &got, 1, n, &e.sq_error, &e.sq_norm);
  return e;
}

// An all-reduce's errors: every rank's output against the exact sum of the inputs, the sum made a
// piece at a time and compared with every output while it is in cache (the same sums, in the same
// order, as error_stats() of each rank against the whole sum).
std::vector<ErrorStats> allreduce_errors(std::span<const std::span<const float>> inputs,
                                         std::span<const std::span<const float>> outputs, uint64_t n) {
  const uint64_t pieces = (n + kErrorPiece - 1) / kErrorPiece, ranks = outputs.size();
  std::vector<ErrorStats> partial(pieces * ranks);
  kern::parallel_for(pieces, 1, [&](uint64_t p0, uint64_t p1) {
    std::vector<float> sum(kErrorPiece);
    std::vector<const float*> in(inputs.size()), got(ranks);
    std::vector<double> se(ranks);
    for (uint64_t p = p0; p < p1; ++p) {
      const uint64_t b = p * kErrorPiece, len = std::min(n, b + kErrorPiece) - b;
      for (size_t r = 0; r < inputs.size(); ++r) in[r] = inputs[r].data() + b;
      for (uint64_t r = 0; r < ranks; ++r) got[r] = outputs[r].data() + b;
      kern::sum_to_float(in.data(), static_cast<uint32_t>(in.size()), len, sum.data());
      double sn = 0;
      kern::squared_errors(sum.data(), got.data(), static_cast<uint32_t>(ranks), len, se.data(), &sn);
      for (uint64_t r = 0; r < ranks; ++r) partial[p * ranks + r] = {se[r], sn};
    }
  });
  std::vector<ErrorStats> out(ranks);  // summed in a fixed order: independent of the thread count
  for (uint64_t p = 0; p < pieces; ++p)
    for (uint64_t r = 0; r < ranks; ++r) {
      out[r].sq_error += partial[p * ranks + r].sq_error;
      out[r].sq_norm += partial[p * ranks + r].sq_norm;
    }
  return out;
}

}  // namespace

ErrorStats error_stats(std::span<const float> exact, std::span<const float> got) {
  CCSIM_CHECK(exact.size() == got.size());
  const uint64_t n = exact.size();
  const uint64_t pieces = (n + kErrorPiece - 1) / kErrorPiece;
  std::vector<ErrorStats> partial(pieces);
  kern::parallel_for(pieces, 1, [&](uint64_t p0, uint64_t p1) {
    for (uint64_t p = p0; p < p1; ++p)
      partial[p] = piece_error(exact.data() + p * kErrorPiece, got.data() + p * kErrorPiece,
                               std::min(n, (p + 1) * kErrorPiece) - p * kErrorPiece);
  });
  ErrorStats total;  // summed in a fixed order: independent of the thread count
  for (const auto& s : partial) {
    total.sq_error += s.sq_error;
    total.sq_norm += s.sq_norm;
  }
  return total;
}

std::vector<ErrorStats> operation_errors(const topo::Schedule& schedule, std::span<const std::span<const float>> inputs,
                                         std::span<const std::span<const float>> outputs) {
  const uint32_t n = schedule.num_ranks();
  CCSIM_CHECK(inputs.size() == n && outputs.size() == n, "{} inputs, {} outputs for {} ranks", inputs.size(),
              outputs.size(), n);
  const uint64_t elements = inputs.front().size();
  CCSIM_CHECK(elements == schedule.elements() || schedule.operation() == topo::CollectiveOp::kAllReduce,
              "a {} of {} elements checked against tensors of {}", topo::collective_op_name(schedule.operation()),
              schedule.elements(), elements);
  auto add = [](ErrorStats& into, const ErrorStats& e) {
    into.sq_error += e.sq_error;
    into.sq_norm += e.sq_norm;
  };
  auto exact_sum = [&](uint64_t offset, uint64_t count) {
    std::vector<float> sum(count);
    kern::parallel_for(count, 1 << 16, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) {
        double acc = 0;
        for (const auto& in : inputs) acc += in[offset + i];
        sum[i] = static_cast<float>(acc);
      }
    });
    return sum;
  };
  std::vector<ErrorStats> out(n);
  switch (schedule.operation()) {
    case topo::CollectiveOp::kAllReduce:
      for (const auto& o : outputs) CCSIM_CHECK(o.size() == elements, "an output of {} elements, inputs of {}", o.size(), elements);
      out = allreduce_errors(inputs, outputs, elements);
      break;
    case topo::CollectiveOp::kReduceScatter:
      for (uint32_t r = 0; r < n; ++r) {
        const topo::Chunk c = schedule.shards()[r];
        out[r] = error_stats(exact_sum(c.offset, c.count), outputs[r].subspan(c.offset, c.count));
      }
      break;
    case topo::CollectiveOp::kAllGather:
      for (uint32_t r = 0; r < n; ++r)
        for (uint32_t s = 0; s < n; ++s) {
          const topo::Chunk c = schedule.shards()[s];
          add(out[r], error_stats(inputs[s].subspan(c.offset, c.count), outputs[r].subspan(c.offset, c.count)));
        }
      break;
    case topo::CollectiveOp::kBroadcast:
      for (uint32_t r = 0; r < n; ++r) out[r] = error_stats(inputs[schedule.root()], outputs[r]);
      break;
    case topo::CollectiveOp::kAllToAll:
      for (uint32_t d = 0; d < n; ++d)
        for (uint32_t s = 0; s < n; ++s) {
          const topo::Chunk from = schedule.shards()[d], to = schedule.shards()[s];
          add(out[d], error_stats(inputs[s].subspan(from.offset, from.count), outputs[d].subspan(to.offset, to.count)));
        }
      break;
  }
  return out;
}

std::vector<ErrorStats> allreduce_layer_errors(std::span<const std::span<const float>> inputs,
                                               std::span<const std::span<const float>> outputs,
                                               std::span<const LayerShape> layers) {
  CCSIM_CHECK(!inputs.empty() && inputs.size() == outputs.size());
  std::vector<ErrorStats> out(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerShape& L = layers[l];
    CCSIM_CHECK(L.offset + L.count <= inputs.front().size(), "layer {} past the tensor's end", l);
    std::vector<float> sum(L.count);
    for (uint64_t i = 0; i < L.count; ++i) {
      double acc = 0;
      for (const auto& in : inputs) acc += in[L.offset + i];
      sum[i] = static_cast<float>(acc);
    }
    for (const auto& o : outputs) {
      const ErrorStats e = error_stats(sum, o.subspan(L.offset, L.count));
      out[l].sq_error += e.sq_error;
      out[l].sq_norm += e.sq_norm;
    }
  }
  return out;
}

double relative_error(const ErrorStats& e) {
  if (e.sq_error == 0) return 0;
  return e.sq_norm > 0 ? e.sq_error / e.sq_norm : std::numeric_limits<double>::infinity();
}

double vnmse(std::span<const ErrorStats> per_rank) {
  if (per_rank.empty()) return 0;
  double sum = 0;
  for (const auto& s : per_rank) sum += relative_error(s);
  return sum / static_cast<double>(per_rank.size());
}

namespace {

// check_sum_in_range() of inputs that hold entries [first, first + n) of the tensors.
Status check_sum_in_range_at(std::span<const std::span<const float>> inputs, uint64_t first) {
  constexpr double kMax = std::numeric_limits<float>::max();
  for (size_t i = 0; !inputs.empty() && i < inputs.front().size(); ++i) {
    double sum = 0;
    for (const auto& in : inputs) sum += static_cast<double>(in[i]);
    if (std::fabs(sum) > kMax)
      return invalid_argument(fmt::format("the {} ranks' gradients sum past the fp32 range at index {} ({:.4g}, "
                                          "beyond {:.4g}): every fp32 collective would overflow; scale them down",
                                          inputs.size(), first + i, sum, kMax));
  }
  return ok_status();
}

double largest_magnitude(std::span<const std::span<const float>> inputs) {
  double largest = 0;
  for (const auto& in : inputs)
    for (const float x : in) largest = std::max(largest, std::fabs(static_cast<double>(x)));
  return largest;
}

bool all_finite(std::span<const ErrorStats> errors) {
  return std::all_of(errors.begin(), errors.end(), [](const ErrorStats& e) {
    return std::isfinite(e.sq_error) && std::isfinite(e.sq_norm);
  });
}

Status overflowed(std::string_view scheme, double largest) {
  return invalid_argument(fmt::format("'{}' overflowed fp32 on these gradients (the largest |x| is {:.4g}, near the "
                                      "fp32 limit {:.4g}): its error is not finite; scale the gradients down",
                                      scheme, largest, static_cast<double>(std::numeric_limits<float>::max())));
}

}  // namespace

Status check_sum_in_range(std::span<const std::span<const float>> inputs) { return check_sum_in_range_at(inputs, 0); }

Status check_errors_finite(std::span<const std::span<const float>> inputs, std::span<const ErrorStats> errors,
                           std::string_view scheme) {
  if (all_finite(errors)) return ok_status();
  CCSIM_RETURN_IF_ERROR(check_sum_in_range(inputs));
  return overflowed(scheme, largest_magnitude(inputs));
}

Status check_errors_finite(const PieceSource& source, uint64_t elements, uint32_t ranks, uint64_t source_alignment,
                           uint64_t piece_elements, std::span<const ErrorStats> errors, std::string_view scheme) {
  if (all_finite(errors)) return ok_status();
  const uint64_t align = std::max<uint64_t>(1, source_alignment);
  const uint64_t piece =
      std::max<uint64_t>(1, std::min(elements, align * std::max<uint64_t>(1, piece_elements / align)));
  RankTensors buffers(ranks);
  for (auto& b : buffers) b.resize(piece);
  double largest = 0;
  for (uint64_t first = 0; first < elements; first += piece) {
    const uint64_t n = std::min(piece, elements - first);
    std::vector<std::span<float>> views;
    for (auto& b : buffers) views.emplace_back(b.data(), n);
    source(first, views);
    const std::vector<std::span<const float>> ins(views.begin(), views.end());
    CCSIM_RETURN_IF_ERROR(check_sum_in_range_at(ins, first));
    largest = std::max(largest, largest_magnitude(ins));
  }
  return overflowed(scheme, largest);
}

}  // namespace ccsim::algo
