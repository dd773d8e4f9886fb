// Butterfly: recursive-halving reduce-scatter + recursive-doubling all-gather (DynamiQ §5.3,
// Appendix B Fig. 13) on n = 2^L ranks.
//
// Shards s = 0..n−1 split the tensor evenly; rank r owns shard r. A level-ℓ slice is the union of
// n/2^ℓ consecutive shards (slice i covers shards [i·n/2^ℓ, (i+1)·n/2^ℓ)); it is contiguous.
//
// Reduce-scatter step k = 0..L−1 (partner p = x XOR n/2^(k+1), the highest remaining bit first):
// rank x encodes the level-(k+1) slice that p keeps and sends it to p (one kernel + one transfer per
// rank and segment); at step k+1 it decode-accumulates the level-(k+1) slice it keeps, received
// from p. After L exchanges rank x keeps exactly shard x. Each shard's aggregation tree is a
// binomial in-arborescence of depth L whose messages carry 1, 2, 4, …, n/2 contributions.
// (Fig. 13 draws the distances in doubling order, 1, 2, 4; halving from the top bit gives the
// isomorphic tree and lands shard x on rank x.)
//
// Not fused: a rank sends at step k+1 only half of what it received at step k, and a message can
// only be decoded whole into a chunk of its own size. A fused decode-accumulate-encode on the half
// to forward would need the sender to have encoded that half as its own message, and recursively
// every later halving boundary too: one message per shard per (rank, step), O(n²) ops. So the
// receiver decode-accumulates the whole received slice (kDecodeAccumulate, 2^(k+1) contributions)
// and then encodes the half it forwards (kEncode, 2^(k+1) contributions). The values are those of
// the fused kernel (accumulate, then encode the accumulator); it costs one extra read of the half.
// Reduce-scatter: exactly 3·n·L·segments ops (n·L encodes, transfers and decode-accumulates).
//
// All-gather step a = 0..L−1 (partner x XOR 2^a): the owner encodes its shard once (and decodes its
// own message); messages are then forwarded unchanged, so every rank ends with identical values
// (as DynamiQ's all-gather). At step a rank x sends the 2^a messages of its block of shards
// [x & ~(2^a − 1), +2^a) to its partner as one bundled transfer per segment (one flow, as a real
// butterfly sends the block in one message), and the partner decodes the bundle with one bundled
// decode kernel. All-gather: n·segments encodes and own decodes, n·L·segments transfers and
// n·L·segments bundled decodes (n(n−1)·segments messages delivered in all). Re-encoding the
// combined block at every doubling would change values per hop and leave ranks with different
// results, which the all-gather contract (identical values everywhere) rules out.
// Steps (receiving kernels live in the step after their transfer, as in ring.cpp): reduce-scatter
// L + 1, all-gather L + 1, all-reduce 2L + 1 (all-gather step 0 shares the last reduce-scatter step).
// Generator state is O(n·segments).
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

namespace ccsim::topo {
namespace {

bool overlaps(const Chunk& a, const Chunk& b) {
  return a.count > 0 && b.count > 0 && a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

class ButterflyGenerator final : public ScheduleGenerator {
 public:
  ButterflyGenerator(CollectiveOp op, uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : op_(op), n_(n), levels_(static_cast<uint32_t>(std::countr_zero(n))), segs_(o.segments), elements_(elements),
        options_(o) {
    CCSIM_CHECK(n >= 2 && std::has_single_bit(n), "butterfly needs a power-of-two rank count >= 2, got {}", n);
    CCSIM_CHECK(op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1);
  }

  Schedule begin() override {
    Schedule s(fmt::format("{}.butterfly(n={})", collective_op_name(op_), n_), op_, n_, elements_);
    const std::vector<Chunk> shards = shard_split(elements_, n_, options_);
    for (uint32_t level = 1; level <= levels_; ++level) {
      const uint32_t per = n_ >> level;
      for (uint32_t i = 0; i < (1u << level); ++i) {
        const Chunk& first = shards[i * per];
        const Chunk& last = shards[i * per + per - 1];
        const Chunk slice{first.offset, last.offset + last.count - first.offset};
        for (const Chunk& seg : split_chunk(slice, segs_, options_.align)) s.add_chunk(seg.offset, seg.count);
      }
    }
    if (op_ != CollectiveOp::kAllReduce) s.set_shards(shards);
    inbox_.assign(size_t{n_} * segs_, MessageRef{});
    inbox_arrived_.assign(size_t{n_} * segs_, kNoOp);
    acc_.assign(size_t{n_} * segs_, kNoOp);
    gathered_.assign(size_t{n_} * segs_, MessageRef{});
    sent_.assign(size_t{n_} * segs_, kNoOp);
    sent_prev_.assign(size_t{n_} * segs_, kNoOp);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (!detail::phased_step(op_, levels_, step_, [&](uint32_t k) { emit_reduce_step(s, k); },
                     [&](uint32_t k) { emit_gather_step(s, k); }))
      return false;
    ++step_;
    return true;
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  /// Chunk of segment j of slice i at `level` (1..L).
  uint32_t chunk(uint32_t level, uint32_t i, uint32_t j) const { return ((1u << level) - 2 + i) * segs_ + j; }
  /// Index of the level-`level` slice containing shard/rank x.
  uint32_t slice_of(uint32_t x, uint32_t level) const { return x >> (levels_ - level); }

  void emit_reduce_step(Schedule& s, uint32_t k) {
    const auto& chunks = s.chunks();
    std::vector<OpId> accumulated(segs_);
    if (k >= 1) {
      // Decode-accumulate the level-k slice kept at step k−1 (2^(k−1) contributions arrive).
      for (uint32_t x = 0; x < n_; ++x) {
        for (uint32_t j = 0; j < segs_; ++j) {
          const uint32_t c = chunk(k, slice_of(x, k), j);
          std::vector<OpId> deps{inbox_arrived_[x * segs_ + j]};
          if (k >= 2) append_overlapping(deps, chunks, x, chunk(k - 1, slice_of(x, k - 1), 0), chunks[c], kNone);
          accumulated[j] =
              s.add_kernel(KernelKind::kDecodeAccumulate, x, c, inbox_[x * segs_ + j], 1u << k, std::span(deps));
        }
        std::copy(accumulated.begin(), accumulated.end(), acc_.begin() + x * segs_);
      }
    }
    if (k == levels_) return;
    // Encode the level-(k+1) slice the partner keeps and send it (2^k contributions).
    const uint32_t distance = n_ >> (k + 1);
    for (uint32_t x = 0; x < n_; ++x) {
      const uint32_t p = x ^ distance;
      OpId prev = kNoOp;
      for (uint32_t j = 0; j < segs_; ++j) {
        const uint32_t c = chunk(k + 1, slice_of(p, k + 1), j);
        OpId enc;
        if (k == 0) {
          enc = s.add_kernel(KernelKind::kEncode, x, c, MessageRef{}, 1, {});
        } else {
          std::vector<OpId> deps;
          append_overlapping(deps, chunks, x, chunk(k, slice_of(x, k), 0), chunks[c], j);
          enc = s.add_kernel(KernelKind::kEncode, x, c, MessageRef{}, 1u << k, std::span(deps));
        }
        const MessageRef msg = s.message(enc);
        prev = detail::send_after(s, x, p, msg, enc, prev);
        inbox_[p * segs_ + j] = msg;
        inbox_arrived_[p * segs_ + j] = prev;
      }
    }
  }

  /// Appends rank x's latest decode-accumulates (acc_, one per segment of the slice whose first
  /// segment chunk is `first_chunk`) that overlap `target`; if none does (empty chunks), appends the
  /// one of segment `fallback` unless it is kNone.
  void append_overlapping(std::vector<OpId>& deps, const std::vector<Chunk>& chunks, uint32_t x, uint32_t first_chunk,
                          const Chunk& target, uint32_t fallback) const {
    bool any = false;
    for (uint32_t j = 0; j < segs_; ++j) {
      if (overlaps(chunks[first_chunk + j], target)) {
        deps.push_back(acc_[x * segs_ + j]);
        any = true;
      }
    }
    if (!any && fallback != kNone) deps.push_back(acc_[x * segs_ + fallback]);
  }

  // All-gather step a: blocks of 2^a shards travel between x and x XOR 2^a.
  void emit_gather_step(Schedule& s, uint32_t a) {
    const uint32_t summed = op_ == CollectiveOp::kAllReduce ? n_ : 1;
    const auto shard_chunk = [&](uint32_t shard, uint32_t j) { return chunk(levels_, shard, j); };
    if (a == 0) {
      for (uint32_t x = 0; x < n_; ++x) {
        for (uint32_t j = 0; j < segs_; ++j) {
          const OpId enc = op_ == CollectiveOp::kAllReduce
                               ? s.add_kernel(KernelKind::kEncode, x, shard_chunk(x, j), MessageRef{}, summed,
                                              {acc_[x * segs_ + j]})
                               : s.add_kernel(KernelKind::kEncode, x, shard_chunk(x, j), MessageRef{}, summed, {});
          gathered_[x * segs_ + j] = s.message(enc);
          s.add_kernel(KernelKind::kDecode, x, shard_chunk(x, j), gathered_[x * segs_ + j], summed, {enc});
        }
      }
    } else {
      // Decode what arrived at step a−1: the block of q = x XOR 2^(a−1), one bundle per segment.
      const uint32_t half = 1u << (a - 1);
      for (uint32_t x = 0; x < n_; ++x) {
        const uint32_t q = x ^ half;
        for (uint32_t j = 0; j < segs_; ++j) {
          block_messages(q & ~(half - 1), half, j);
          const OpId arrived = sent_prev_[q * segs_ + j];
          s.add_decodes(x, bundle_, std::span<const OpId>(&arrived, 1));
        }
      }
    }
    if (a == levels_) return;
    // x sends its block (shard order) to x XOR 2^a, one bundle per segment. The bundle leaves after
    // the arrival of the half x received at step a−1 and after x's own step-(a−1) bundle (which
    // carried the other half), which anchors it to the previous step. Segment j+1 follows segment j
    // on the hop.
    const uint32_t block = 1u << a, half = block >> 1;
    for (uint32_t x = 0; x < n_; ++x) {
      const uint32_t p = x ^ block;
      OpId prev = kNoOp;
      for (uint32_t j = 0; j < segs_; ++j) {
        block_messages(x & ~(block - 1), block, j);
        std::vector<OpId> deps;
        if (a == 0) deps.push_back(bundle_[0].id);
        else deps = {sent_prev_[(x ^ half) * segs_ + j], sent_prev_[x * segs_ + j]};
        if (prev != kNoOp) deps.push_back(prev);
        prev = s.add_transfer(x, p, std::span<const MessageRef>(bundle_), std::span<const OpId>(deps));
        sent_[x * segs_ + j] = prev;
      }
    }
    std::swap(sent_, sent_prev_);
  }

  /// Fills bundle_ with segment j of the all-gather messages of shards [start, start + count).
  void block_messages(uint32_t start, uint32_t count, uint32_t j) {
    bundle_.clear();
    for (uint32_t shard = start; shard < start + count; ++shard) bundle_.push_back(gathered_[shard * segs_ + j]);
  }

  CollectiveOp op_;
  uint32_t n_;
  uint32_t levels_;  ///< L = log2 n
  uint32_t segs_;
  uint64_t elements_;
  CollectiveOptions options_;
  std::vector<MessageRef> inbox_;     ///< [rank·segs + j]: message sent to the rank at the previous step
  std::vector<OpId> inbox_arrived_;   ///< its transfer
  std::vector<OpId> acc_;             ///< [rank·segs + j]: the rank's latest decode-accumulate per segment
  std::vector<MessageRef> gathered_;  ///< [shard·segs + j]: the owner's all-gather message
  std::vector<OpId> sent_;            ///< all-gather: [rank·segs + j] the rank's bundle transfer, this step
  std::vector<OpId> sent_prev_;       ///< … previous step
  std::vector<MessageRef> bundle_;    ///< scratch
  uint32_t step_ = 0;
};

/// Transfers of make_butterfly: each of the L = log2 n steps of a phase sends one transfer per rank
/// and segment (the all-gather's block travels as one bundle).
uint64_t butterfly_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o) {
  const auto levels = static_cast<uint64_t>(std::countr_zero(n));
  return detail::saturating_product({detail::phase_count(op), n, o.segments, levels});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_butterfly(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options) {
  return std::make_unique<ButterflyGenerator>(op, ranks, elements, options);
}

namespace detail {

void register_butterfly(std::vector<CollectiveInfo>& out) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const std::string what =
        op == CollectiveOp::kAllReduce
            ? "recursive-halving reduce-scatter + recursive-doubling all-gather, log2(n) hops each"
        : op == CollectiveOp::kReduceScatter ? "recursive halving, log2(n) hops, binomial aggregation tree"
                                             : "recursive doubling, each shard encoded once and forwarded unchanged";
    out.push_back(CollectiveInfo{
        op, "butterfly", "butterfly (power-of-two ranks); " + what,
        [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) -> Status {
          if (ranks < 2 || !std::has_single_bit(ranks))
            return invalid_argument(fmt::format("butterfly needs a power-of-two number of ranks >= 2, got {}", ranks));
          return check_common(ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
          return make_butterfly(op, ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t, const CollectiveOptions& o) { return butterfly_transfers(op, ranks, o); }});
  }
}

}  // namespace detail
}  // namespace ccsim::topo
