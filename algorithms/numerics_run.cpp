// The numerics interpreter's op loop, run on whole tensors (run_numerics) or on a piece of every
// rank's tensor at a time (run_in_pieces).
#include <algorithm>
#include <mutex>
#include <numeric>
#include <optional>

#include "algorithms/detail/error_piece.hpp"
#include "algorithms/numerics.hpp"
#include "kernels/parallel.hpp"
#include "kernels/stats/error_sums.hpp"
#include "sim/base/check.hpp"
#include "sim/base/uninit_vector.hpp"

namespace ccsim::algo {

using topo::KernelKind;
using topo::Op;
using topo::OpId;
using topo::OpKind;

namespace {

// The messages of a run of a schedule, each alive from its producing op to its last consumer;
// released buffers are reused, so that messages do not fault in fresh pages.
class MessageStore {
 public:
  explicit MessageStore(const topo::Schedule& schedule)
      : consumers_(schedule.ops().size(), 0), messages_(schedule.ops().size()) {
    for (const Op& op : schedule.ops())
      if (op.kind == OpKind::kKernel)
        schedule.for_each_message(op, [&](const topo::MessageRef& m) { ++consumers_[m.id]; });
    left_ = consumers_;
  }
  // Every message dropped (its buffer kept for reuse) and every consumer count restored.
  void restart() {
    for (auto& m : messages_)
      if (m.capacity() > 0) drop(m);
    left_ = consumers_;
    live_ = 0;
  }
  std::span<uint8_t> make(OpId id, uint64_t size) {
    auto& m = messages_[id];
    for (size_t p = 0; p < pool_.size(); ++p) {
      if (pool_[p].capacity() >= size) {
        m.swap(pool_[p]);
        pool_[p].swap(pool_.back());
        pool_.pop_back();
        break;
      }
    }
    m.resize(size);
    live_ += m.size();
    peak_ = std::max(peak_, live_);
    return m;
  }
  std::span<const uint8_t> at(OpId id) const { return messages_[id]; }
  uint64_t size(OpId id) const { return messages_[id].size(); }
  // One consumer of message `id` is done with it; the last one releases it.
  void consumed(OpId id) {
    if (--left_[id] > 0) return;
    live_ -= messages_[id].size();
    drop(messages_[id]);
  }
  uint64_t peak() const { return peak_; }

 private:
  void drop(std::vector<uint8_t>& m) {
    m.clear();
    pool_.push_back(std::move(m));
    m = {};
  }
  std::vector<uint32_t> consumers_, left_;
  std::vector<std::vector<uint8_t>> messages_, pool_;
  uint64_t live_ = 0, peak_ = 0;
};

// Entries [first, first + count) of every rank's tensor, held as work[r][0, count).
struct Window {
  std::span<const std::span<float>> work;
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t elements = 0;  // the tensor's

  // The part of `c` in the window; nullopt where none is. An empty chunk belongs to the window
  // holding its offset (the last one where that is the tensor's end), so that its ops run once.
  std::optional<TensorSpec> part(const topo::Chunk& c) const {
    const uint64_t lo = std::max(c.offset, first), hi = std::min(c.offset + c.count, first + count);
    if (lo < hi) return TensorSpec{lo, hi - lo};
    const bool holds = c.offset >= first && (c.offset < first + count || first + count == elements);
    if (c.count == 0 && holds) return TensorSpec{c.offset, 0};
    return std::nullopt;
  }
  std::span<float> entries(uint32_t rank, const TensorSpec& spec) const {
    return work[rank].subspan(spec.offset - first, spec.count);
  }
};

// What the op loop observes besides the buffers.
struct OpTally {
  std::span<uint64_t> carried;  // per op: bytes each transfer carried
  uint64_t kernels_run = 0;
  std::vector<ErrorStats>* hop_errors = nullptr;  // NumericsStats::hop_errors, when measured
};

// Kernel op `id` (not a bundle) on `acc`, entries `spec` of its rank's tensor: the coding function
// its kind names, with the message it consumes and the one it produces.
void run_kernel(Compressor& comp, const Op& op, OpId id, const TensorSpec& spec, uint32_t ranks, std::span<float> acc,
                MessageStore& store, const NumericsOptions& options) {
  const kern::RngKey key{options.seed, options.round, op.rank, id % kPrepareStream};
  const HopContext in_hop{op.in_summed, ranks}, out_hop{op.summed, ranks};
  auto produce = [&] { return store.make(id, comp.wire_bytes(spec, out_hop)); };
  switch (op.kernel) {
    case KernelKind::kEncode: comp.encode(acc, spec, out_hop, key, produce()); break;
    case KernelKind::kDecode: comp.decode(store.at(op.message), spec, in_hop, acc); break;
    case KernelKind::kDecodeAccumulate: comp.decode_accumulate(store.at(op.message), spec, in_hop, acc); break;
    case KernelKind::kDecodeAccumulateEncode:
      comp.decode_accumulate_encode(store.at(op.message), spec, in_hop, acc, out_hop, key, produce());
      break;
    case KernelKind::kPlanLocal:
    case KernelKind::kPrepare:
    case KernelKind::kFinish:
      CCSIM_CHECK(false, "op {}: round op {} in a collective schedule (run_numerics runs the round phases itself)", id,
                  topo::kernel_kind_name(op.kernel));
  }
  if (op.message != topo::kNoOp) store.consumed(op.message);
}

// What encoding message `id` (entries `spec`, in `acc`) lost, added to its hop depth's entry.
void add_hop_error(Compressor& comp, const Op& op, OpId id, const TensorSpec& spec, uint32_t ranks,
                   std::span<const float> acc, const MessageStore& store, std::vector<float>& scratch,
                   std::vector<ErrorStats>& hop_errors) {
  scratch.resize(spec.count);
  comp.decode(store.at(id), spec, HopContext{op.summed, ranks}, scratch);
  const ErrorStats e = error_stats(acc, scratch);
  ErrorStats& into = hop_errors[std::min(op.summed, ranks)];
  into.sq_error += e.sq_error;
  into.sq_norm += e.sq_norm;
}

// Runs `schedule`'s ops in order on their chunks' parts in `window`, skipping those whose chunk
// has none there.
void run_ops(const topo::Schedule& schedule, Compressor& comp, const Window& window, MessageStore& store,
             const NumericsOptions& options, OpTally& tally) {
  const auto& ops = schedule.ops();
  const auto& chunks = schedule.chunks();
  const uint32_t ranks = schedule.num_ranks();
  std::vector<float> scratch;  // a decoded copy of a message, for per-depth errors
  for (OpId id = 0; id < ops.size(); ++id) {
    const Op& op = ops[id];
    if (op.kind == OpKind::kTransfer) {
      schedule.for_each_message(op, [&](const topo::MessageRef& m) { tally.carried[id] += store.size(m.id); });
      continue;
    }
    if (op.bundle > 1) {  // a bundle of decodes, each message into its own chunk
      bool any = false;
      for (const topo::MessageRef& m : schedule.bundle(op)) {
        const std::optional<TensorSpec> spec = window.part(chunks[m.chunk]);
        if (!spec) continue;
        any = true;
        comp.decode(store.at(m.id), *spec, HopContext{m.summed, ranks}, window.entries(op.rank, *spec));
        store.consumed(m.id);
      }
      tally.kernels_run += any ? 1 : 0;
      continue;
    }
    const std::optional<TensorSpec> spec = window.part(chunks[op.chunk]);
    if (!spec) continue;
    const std::span<float> acc = window.entries(op.rank, *spec);
    run_kernel(comp, op, id, *spec, ranks, acc, store, options);
    if (tally.hop_errors != nullptr && topo::Schedule::produces_message(op.kernel))
      add_hop_error(comp, op, id, *spec, ranks, acc, store, scratch, *tally.hop_errors);
    ++tally.kernels_run;
  }
}

// Every transfer carried the bytes it is bound to.
void check_carried(const topo::Schedule& schedule, std::span<const uint64_t> carried) {
  const auto& ops = schedule.ops();
  for (OpId id = 0; id < ops.size(); ++id)
    CCSIM_CHECK(ops[id].kind != OpKind::kTransfer || carried[id] == ops[id].bytes,
                "transfer {} carries {} bytes but is bound to {}", id, carried[id], ops[id].bytes);
}

uint64_t wire_bytes(const topo::Schedule& schedule) {
  uint64_t bytes = 0;
  for (const Op& op : schedule.ops())
    if (op.kind == OpKind::kTransfer) bytes += op.bytes;
  return bytes;
}

}  // namespace

Result<NumericsStats> run_numerics(const topo::Schedule& schedule, Compressor& compressor,
                                   std::span<const std::span<float>> buffers, const NumericsOptions& options) {
  CCSIM_CHECK(buffers.size() == schedule.num_ranks(), "{} buffers for {} ranks", buffers.size(), schedule.num_ranks());
  CCSIM_CHECK(schedule.id_base() == 0, "numerics needs a materialized schedule");
  const uint64_t tensor = buffers.front().size();
  for (const auto& b : buffers) CCSIM_CHECK(b.size() == tensor, "rank buffers of {} and {} elements", tensor, b.size());
  CCSIM_CHECK(schedule.elements() == compressor.reduced_elements(tensor),
              "{}: schedule of {} elements for a tensor of {} that reduces {}", compressor.name(), schedule.elements(),
              tensor, compressor.reduced_elements(tensor));
  const uint32_t ranks = schedule.num_ranks();
  for (const auto& c : schedule.chunks())
    CCSIM_RETURN_IF_ERROR(compressor.can_implement(TensorSpec{c.offset, c.count}));
  // The collective runs in place when the scheme keeps the tensor's size, else on its own buffers.
  const bool in_place = schedule.elements() == tensor;
  std::vector<std::vector<float>> reduced_store(in_place ? 0 : ranks,
                                               std::vector<float>(in_place ? 0 : schedule.elements()));
  std::vector<std::span<float>> work(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    work[r] = in_place ? buffers[r] : std::span<float>(reduced_store[r]);
    compressor.prepare(buffers[r], work[r], r, ranks, kern::RngKey{options.seed, options.round, r, kPrepareStream});
  }
  NumericsStats stats;
  if (options.hop_errors) stats.hop_errors.assign(ranks + 1, ErrorStats{});
  std::vector<uint64_t> carried(schedule.ops().size(), 0);
  OpTally tally{carried, 0, options.hop_errors ? &stats.hop_errors : nullptr};
  MessageStore store(schedule);
  run_ops(schedule, compressor, Window{work, 0, schedule.elements(), schedule.elements()}, store, options, tally);
  check_carried(schedule, carried);
  stats.wire_bytes = wire_bytes(schedule);
  stats.kernels_run = tally.kernels_run;
  stats.peak_message_bytes = store.peak();
  for (uint32_t r = 0; r < ranks; ++r) compressor.finish(work[r], buffers[r], r, ranks);
  return stats;
}

namespace {

// Whether `op`'s ops touch only entries of one index on every rank, so that a piece of the tensor
// can run on its own: every operation but the all-to-all, which moves blocks between indices.
bool chunks_never_mix(topo::CollectiveOp op) { return op != topo::CollectiveOp::kAllToAll; }

// The ranges operation_errors() restarts its error sums at: the whole tensor, or each rank's shard
// (reduce-scatter: the shard it ends with; all-gather: the shard it contributes).
std::vector<topo::Chunk> error_regions(const topo::Schedule& s) {
  const topo::CollectiveOp op = s.operation();
  if (op == topo::CollectiveOp::kReduceScatter || op == topo::CollectiveOp::kAllGather) return s.shards();
  return {topo::Chunk{0, s.elements()}};
}

}  // namespace

bool pieces_together(const topo::Schedule& a, const topo::Schedule& b) {
  return a.elements() == b.elements() && a.num_ranks() == b.num_ranks() && a.operation() == b.operation() &&
         a.root() == b.root() && error_regions(a) == error_regions(b);
}

bool runs_in_pieces(const topo::Schedule& schedule, const Compressor& compressor, const NumericsOptions& options) {
  const uint64_t n = schedule.elements();
  if (!chunks_never_mix(schedule.operation()) || options.hop_errors || schedule.id_base() != 0 ||
      !compressor.codes_in_pieces() || compressor.reduced_elements(n) != n)
    return false;
  for (KernelKind k : round_ops(compressor, n, schedule.num_ranks()))
    if (k != KernelKind::kPlanLocal) return false;
  const uint64_t align = std::max<uint64_t>(1, compressor.alignment());
  if (std::lcm(align, detail::kErrorPiece) > kMaxPlanPiece) return false;
  auto aligned = [&](const topo::Chunk& c) { return c.offset % align == 0 || c.offset == n; };
  const std::vector<topo::Chunk> regions = error_regions(schedule);
  return std::all_of(schedule.chunks().begin(), schedule.chunks().end(), aligned) &&
         std::all_of(regions.begin(), regions.end(), aligned);
}

namespace {

// One thread's buffers for run_in_pieces(): a piece of every rank's input and working copy, the
// piece's exact sum, and each round's messages and per-transfer bytes.
struct PieceState {
  std::vector<UninitVector<float>> inputs, work;
  UninitVector<float> exact;
  std::vector<MessageStore> stores;
  std::vector<std::vector<uint64_t>> carried;

  PieceState(std::span<const PieceRound> rounds, uint32_t ranks, uint64_t piece)
      : inputs(ranks), work(ranks), exact(piece) {
    for (uint32_t r = 0; r < ranks; ++r) {
      inputs[r].resize(piece);
      work[r].resize(piece);
    }
    for (const PieceRound& round : rounds) {
      stores.emplace_back(*round.schedule);
      carried.emplace_back(round.schedule->ops().size(), 0);
    }
  }
};

// A piece: entries [first, first + count) inside error region `region`, whose error pieces from
// `first` on are numbered from `error_piece` (each region's error pieces follow the region before).
struct Piece {
  uint64_t first = 0;
  uint64_t count = 0;
  uint32_t region = 0;
  uint64_t error_piece = 0;
};

// Every region cut into pieces of `piece` entries from its start (an empty tensor: one empty piece,
// so that its empty chunks' ops run once); the regions' error pieces, in all.
std::vector<Piece> cut_pieces(std::span<const topo::Chunk> regions, uint64_t elements, uint64_t piece,
                              uint64_t& error_pieces) {
  std::vector<Piece> out;
  error_pieces = 0;
  for (uint32_t g = 0; g < regions.size(); ++g) {
    const topo::Chunk& c = regions[g];
    for (uint64_t at = 0; at < c.count; at += piece)
      out.push_back({c.offset + at, std::min(piece, c.count - at), g, error_pieces + at / detail::kErrorPiece});
    error_pieces += (c.count + detail::kErrorPiece - 1) / detail::kErrorPiece;
  }
  if (elements == 0) out.push_back({0, 0, 0, 0});
  return out;
}

// The error sums of piece `p` of one round's outputs (state.work), as operation_errors() makes them:
// partial[k · ranks + r] for error piece k of the piece's region and rank r, against the exact sum
// (all-reduce; reduce-scatter, for the region's owner only), the root's input (broadcast) or the
// region owner's (all-gather).
void piece_errors(const topo::Schedule& s, const PieceState& state, const Piece& p, std::span<ErrorStats> partial) {
  const auto ranks = static_cast<uint32_t>(state.work.size());
  const topo::CollectiveOp op = s.operation();
  const bool one = op == topo::CollectiveOp::kReduceScatter;  // only the region's owner ends with it
  const float* exact = state.exact.data();
  if (op == topo::CollectiveOp::kBroadcast) exact = state.inputs[s.root()].data();
  if (op == topo::CollectiveOp::kAllGather) exact = state.inputs[p.region].data();
  std::vector<const float*> got(ranks);
  std::vector<double> se(ranks);
  for (uint64_t b = 0; b < p.count; b += detail::kErrorPiece) {
    const uint64_t len = std::min(p.count - b, detail::kErrorPiece);
    for (uint32_t r = 0; r < ranks; ++r) got[r] = state.work[r].data() + b;
    double sn = 0;
    const uint64_t k = p.error_piece + b / detail::kErrorPiece;
    if (one) {
      kern::squared_errors(exact + b, &got[p.region], 1, len, se.data(), &sn);
      partial[k * ranks + p.region] = {se[0], sn};
      continue;
    }
    kern::squared_errors(exact + b, got.data(), ranks, len, se.data(), &sn);
    for (uint32_t r = 0; r < ranks; ++r) partial[k * ranks + r] = {se[r], sn};
  }
}

// Piece `p` of every rank's input drawn, its exact sum made, and every round run on it.
void run_piece(std::span<const PieceRound> rounds, const PieceSource& source, const Piece& p, uint64_t elements,
               const NumericsOptions& options, PieceState& state, std::span<std::vector<ErrorStats>> partial) {
  const auto ranks = static_cast<uint32_t>(state.inputs.size());
  std::vector<std::span<float>> in(ranks), work(ranks);
  std::vector<const float*> from(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    in[r] = std::span<float>(state.inputs[r].data(), p.count);
    work[r] = std::span<float>(state.work[r].data(), p.count);
  }
  source(p.first, in);
  const topo::CollectiveOp op = rounds.front().schedule->operation();
  if (op == topo::CollectiveOp::kAllReduce || op == topo::CollectiveOp::kReduceScatter)
    for (uint64_t b = 0; b < p.count; b += detail::kErrorPiece) {
      for (uint32_t r = 0; r < ranks; ++r) from[r] = in[r].data() + b;
      kern::sum_to_float(from.data(), ranks, std::min(p.count - b, detail::kErrorPiece), state.exact.data() + b);
    }
  for (size_t k = 0; k < rounds.size(); ++k) {
    for (uint32_t r = 0; r < ranks; ++r) std::copy(in[r].begin(), in[r].end(), work[r].begin());
    state.stores[k].restart();
    OpTally tally{state.carried[k], 0, nullptr};
    run_ops(*rounds[k].schedule, *rounds[k].compressor, Window{work, p.first, p.count, elements}, state.stores[k],
            options, tally);
    piece_errors(*rounds[k].schedule, state, p, partial[k]);
  }
}

// Every rank's errors from the partial sums: each region's error pieces added in order from zero,
// then the regions' sums in region order (as operation_errors() adds error_stats() of each).
std::vector<ErrorStats> sum_partials(std::span<const ErrorStats> partial, std::span<const topo::Chunk> regions,
                                     uint32_t ranks) {
  std::vector<ErrorStats> out(ranks);
  uint64_t k = 0;
  for (const topo::Chunk& c : regions) {
    const uint64_t end = k + (c.count + detail::kErrorPiece - 1) / detail::kErrorPiece;
    for (uint32_t r = 0; r < ranks; ++r) {
      ErrorStats region;
      for (uint64_t j = k; j < end; ++j) {
        region.sq_error += partial[j * ranks + r].sq_error;
        region.sq_norm += partial[j * ranks + r].sq_norm;
      }
      out[r].sq_error += region.sq_error;
      out[r].sq_norm += region.sq_norm;
    }
    k = end;
  }
  return out;
}

uint64_t kernel_ops(const topo::Schedule& s) {
  return static_cast<uint64_t>(
      std::count_if(s.ops().begin(), s.ops().end(), [](const Op& op) { return op.kind == OpKind::kKernel; }));
}

}  // namespace

Result<std::vector<PieceRoundResult>> run_in_pieces(std::span<const PieceRound> rounds, const PieceSource& source,
                                                    uint64_t piece_elements, const NumericsOptions& options) {
  CCSIM_CHECK(!rounds.empty(), "run_in_pieces: no rounds");
  const topo::Schedule& first = *rounds.front().schedule;
  const uint64_t elements = first.elements();
  const uint32_t ranks = first.num_ranks();
  const std::vector<topo::Chunk> regions = error_regions(first);
  uint64_t align = detail::kErrorPiece;
  for (const PieceRound& round : rounds) {
    const topo::Schedule& s = *round.schedule;
    CCSIM_CHECK(pieces_together(s, first) && runs_in_pieces(s, *round.compressor, options),
                "{}: a collective that cannot run in pieces with the others", round.compressor->name());
    for (const auto& c : s.chunks())
      CCSIM_RETURN_IF_ERROR(round.compressor->can_implement(TensorSpec{c.offset, c.count}));
    align = std::lcm(align, std::max<uint64_t>(1, round.compressor->alignment()));
  }
  CCSIM_CHECK(align <= kMaxPlanPiece, "run_in_pieces: pieces of {} entries", align);
  const uint64_t piece = align * std::max<uint64_t>(1, piece_elements / align);
  uint64_t error_pieces = 0;
  const std::vector<Piece> pieces = cut_pieces(regions, elements, piece, error_pieces);
  std::vector<std::vector<ErrorStats>> partial(rounds.size(), std::vector<ErrorStats>(error_pieces * ranks));
  std::vector<std::vector<uint64_t>> carried;
  for (const PieceRound& round : rounds) carried.emplace_back(round.schedule->ops().size(), 0);
  std::mutex merge;
  kern::parallel_for(pieces.size(), 1, [&](uint64_t p0, uint64_t p1) {
    const kern::SerialScope serial;  // each thread takes whole pieces
    PieceState state(rounds, ranks, std::min(piece, std::max<uint64_t>(elements, 1)));
    for (uint64_t p = p0; p < p1; ++p) run_piece(rounds, source, pieces[p], elements, options, state, partial);
    const std::lock_guard<std::mutex> lock(merge);  // integer sums: the same in any order
    for (size_t k = 0; k < rounds.size(); ++k)
      for (size_t id = 0; id < carried[k].size(); ++id) carried[k][id] += state.carried[k][id];
  });
  std::vector<PieceRoundResult> out(rounds.size());
  for (size_t k = 0; k < rounds.size(); ++k) {
    check_carried(*rounds[k].schedule, carried[k]);
    out[k].stats.wire_bytes = wire_bytes(*rounds[k].schedule);
    out[k].stats.kernels_run = kernel_ops(*rounds[k].schedule);  // each once, as run_numerics() counts them
    out[k].errors = sum_partials(partial[k], regions, ranks);
  }
  return out;
}

}  // namespace ccsim::algo
