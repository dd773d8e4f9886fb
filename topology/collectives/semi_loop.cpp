// Semi-loop ring (EQuARX §III.C, Fig. 5): the reduce-scatter of shard r uses both ring directions.
//
// With H = floor(n/2) and Hb = ceil(n/2) − 1 (H + Hb = n − 1):
//   chain "down": r+H → r+H−1 → … → r+1 → r   (H hops, walking −1)
//   chain "up":   r−Hb → … → r−1 → r          (Hb hops, walking +1)
// Both end at the owner r, which decode-accumulates the down partial, then the up partial. The up
// chain starts H − Hb steps later (0 for odd n, 1 for even n) so both arrive at the same step: every
// step then moves one shard per link direction and the reduce-scatter takes H steps of D/n bytes,
// about D/(2B) (the paper's bound). Aggregation tree depth = H = floor(n/2) hops (Fig. 5: n = 4,
// step 1: 3→0 and 2→1, step 2: 1→0).
//
// All-gather: the owner encodes once, decodes its own message, and sends it both ways: H hops
// along +1 (reaching r+1..r+H) and Hb hops along −1 (reaching r−1..r−Hb), forwarded unchanged.
//
// Steps (the receiving kernel of a transfer lives in the next step, as in ring.cpp):
// reduce-scatter H + 1, all-gather H + 1, all-reduce 2H + 1 (all-gather step 0 shares the last
// reduce-scatter step).
#include <fmt/format.h>

#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

namespace ccsim::topo {
namespace {

/// One (shard, segment): both reduce chains of the shard and both all-gather directions.
struct Lane {
  uint32_t owner = 0;
  uint32_t chunk = 0;
  uint32_t segment = 0;
  MessageRef down;              ///< reduce-scatter message on the down chain (walking −1)
  MessageRef up;                ///< reduce-scatter message on the up chain (walking +1)
  OpId down_arrived = kNoOp;    ///< transfer that delivered `down` to its current rank
  OpId up_arrived = kNoOp;
  OpId down_leaf = kNoOp;       ///< the down chain's leaf encode (anchors a late up-chain start)
  OpId reduced = kNoOp;         ///< all-reduce: the owner's last decode-accumulate
  MessageRef gathered;          ///< all-gather message
  OpId plus_arrived = kNoOp;    ///< all-gather transfer that delivered `gathered` along +1
  OpId minus_arrived = kNoOp;   ///< … along −1
};

class SemiLoopGenerator final : public ScheduleGenerator {
 public:
  SemiLoopGenerator(CollectiveOp op, uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : op_(op), n_(n), elements_(elements), options_(o), down_hops_(n / 2), up_hops_((n + 1) / 2 - 1) {
    CCSIM_CHECK(n >= 2, "semi_loop needs at least 2 ranks, got {}", n);
    CCSIM_CHECK(op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1);
  }

  Schedule begin() override {
    Schedule s(fmt::format("{}.semi_loop(n={})", collective_op_name(op_), n_), op_, n_, elements_);
    const std::vector<Chunk> shards = shard_split(elements_, n_, options_);
    for (uint32_t r = 0; r < n_; ++r) {
      for (uint32_t j = 0; const Chunk& seg : split_chunk(shards[r], options_.segments, options_.align)) {
        Lane lane;
        lane.owner = r;
        lane.chunk = s.add_chunk(seg.offset, seg.count);
        lane.segment = j++;
        lanes_.push_back(lane);
      }
    }
    if (op_ != CollectiveOp::kAllReduce) s.set_shards(shards);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (!detail::phased_step(op_, down_hops_, step_, [&](uint32_t k) { emit_reduce_step(s, k); },
                     [&](uint32_t k) { emit_gather_step(s, k); }))
      return false;
    ++step_;
    return true;
  }

 private:
  uint32_t walk(uint32_t from, int dir, uint32_t hops) const { return detail::ring_walk(n_, from, dir, hops); }
  const Lane& lane_of(uint32_t owner, uint32_t segment) const { return lanes_[owner * options_.segments + segment]; }

  void emit_reduce_step(Schedule& s, uint32_t k) {
    const uint32_t up_start = down_hops_ - up_hops_;  // 0 (odd n) or 1 (even n)
    OpId prev_down = kNoOp, prev_up = kNoOp;          // previous segment's transfer on the same hop
    for (Lane& lane : lanes_) {
      if (lane.segment == 0) prev_down = prev_up = kNoOp;
      if (k == down_hops_) {
        // Both chains arrive: the owner adds the down partial, then the up partial.
        lane.reduced = s.add_kernel(KernelKind::kDecodeAccumulate, lane.owner, lane.chunk, lane.down, down_hops_ + 1,
                                    {lane.down_arrived});
        if (up_hops_ > 0)
          lane.reduced = s.add_kernel(KernelKind::kDecodeAccumulate, lane.owner, lane.chunk, lane.up, n_,
                                      {lane.up_arrived, lane.reduced});
        continue;
      }
      // Down chain: at step k the partial is at owner + H − k and moves to owner + H − k − 1.
      const uint32_t at = walk(lane.owner, 1, down_hops_ - k);
      OpId kernel;
      if (k == 0) {
        kernel = s.add_kernel(KernelKind::kEncode, at, lane.chunk, MessageRef{}, 1, {});
        lane.down_leaf = kernel;
      } else {
        kernel = s.add_kernel(KernelKind::kDecodeAccumulateEncode, at, lane.chunk, lane.down, k + 1,
                              {lane.down_arrived});
      }
      lane.down = s.message(kernel);
      lane.down_arrived = detail::send_after(s, at, walk(at, -1, 1), lane.down, kernel, prev_down);
      prev_down = lane.down_arrived;

      // Up chain: its t-th hop happens at step up_start + t, from owner − (Hb − t) to owner − (Hb − t) + 1.
      if (up_hops_ == 0 || k < up_start) continue;
      const uint32_t t = k - up_start;
      const uint32_t from = walk(lane.owner, -1, up_hops_ - t);
      if (t == 0 && k == 0) {
        kernel = s.add_kernel(KernelKind::kEncode, from, lane.chunk, MessageRef{}, 1, {});
      } else if (t == 0) {
        // A late leaf (even n): order it after the same rank's step-0 leaf encode, which anchors it
        // to step 0 (that rank leads the down chain of shard from − H).
        const OpId anchor = lane_of(walk(from, -1, down_hops_), lane.segment).down_leaf;
        kernel = s.add_kernel(KernelKind::kEncode, from, lane.chunk, MessageRef{}, 1, {anchor});
      } else {
        kernel = s.add_kernel(KernelKind::kDecodeAccumulateEncode, from, lane.chunk, lane.up, t + 1, {lane.up_arrived});
      }
      lane.up = s.message(kernel);
      lane.up_arrived = detail::send_after(s, from, walk(from, 1, 1), lane.up, kernel, prev_up);
      prev_up = lane.up_arrived;
    }
  }

  // All-gather step a: the owner's message is at owner + a (a <= H) and owner − a (a <= Hb).
  void emit_gather_step(Schedule& s, uint32_t a) {
    const uint32_t summed = op_ == CollectiveOp::kAllReduce ? n_ : 1;
    OpId prev_plus = kNoOp, prev_minus = kNoOp;
    for (Lane& lane : lanes_) {
      if (lane.segment == 0) prev_plus = prev_minus = kNoOp;
      if (a == 0) {
        const OpId enc = op_ == CollectiveOp::kAllReduce
                             ? s.add_kernel(KernelKind::kEncode, lane.owner, lane.chunk, MessageRef{}, summed,
                                            {lane.reduced})
                             : s.add_kernel(KernelKind::kEncode, lane.owner, lane.chunk, MessageRef{}, summed, {});
        lane.gathered = s.message(enc);
        s.add_kernel(KernelKind::kDecode, lane.owner, lane.chunk, lane.gathered, summed, {enc});
        lane.plus_arrived = detail::send_after(s, lane.owner, walk(lane.owner, 1, 1), lane.gathered, enc, prev_plus);
        prev_plus = lane.plus_arrived;
        if (up_hops_ > 0) {
          lane.minus_arrived =
              detail::send_after(s, lane.owner, walk(lane.owner, -1, 1), lane.gathered, enc, prev_minus);
          prev_minus = lane.minus_arrived;
        }
        continue;
      }
      if (a <= down_hops_) {
        const uint32_t at = walk(lane.owner, 1, a);
        s.add_kernel(KernelKind::kDecode, at, lane.chunk, lane.gathered, summed, {lane.plus_arrived});
        if (a < down_hops_) {
          lane.plus_arrived = detail::send_after(s, at, walk(at, 1, 1), lane.gathered, lane.plus_arrived, prev_plus);
          prev_plus = lane.plus_arrived;
        }
      }
      if (a <= up_hops_) {
        const uint32_t at = walk(lane.owner, -1, a);
        s.add_kernel(KernelKind::kDecode, at, lane.chunk, lane.gathered, summed, {lane.minus_arrived});
        if (a < up_hops_) {
          lane.minus_arrived =
              detail::send_after(s, at, walk(at, -1, 1), lane.gathered, lane.minus_arrived, prev_minus);
          prev_minus = lane.minus_arrived;
        }
      }
    }
  }

  CollectiveOp op_;
  uint32_t n_;
  uint64_t elements_;
  CollectiveOptions options_;
  uint32_t down_hops_;  ///< H = floor(n/2)
  uint32_t up_hops_;    ///< Hb = ceil(n/2) − 1
  std::vector<Lane> lanes_;
  uint32_t step_ = 0;
};

/// Transfers of make_semi_loop: per (shard, segment) the two reduce chains make H + Hb = n − 1
/// hops, and the all-gather the same H along +1 and Hb along −1.
uint64_t semi_loop_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o) {
  return detail::saturating_product({detail::phase_count(op), n, o.segments, n - 1u});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_semi_loop(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options) {
  return std::make_unique<SemiLoopGenerator>(op, ranks, elements, options);
}

namespace detail {

void register_semi_loop(std::vector<CollectiveInfo>& out) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const std::string what =
        op == CollectiveOp::kAllReduce       ? "reduce-scatter + all-gather, 2*floor(n/2)+1 steps"
        : op == CollectiveOp::kReduceScatter ? "each shard reduced by two chains meeting at its owner, floor(n/2) hops"
                                             : "each shard encoded once and forwarded both ways, floor(n/2) hops";
    out.push_back(CollectiveInfo{
        op, "semi_loop", "EQuARX semi-loop ring using both directions (aggregation depth floor(n/2)); " + what +
            (op == CollectiveOp::kAllGather ? "" : "; fused decode-accumulate-encode at intermediate hops"),
        [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) { return check_common(ranks, elements, o); },
        [op](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
          return make_semi_loop(op, ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t, const CollectiveOptions& o) { return semi_loop_transfers(op, ranks, o); }});
  }
}

}  // namespace detail
}  // namespace ccsim::topo
