#include <fmt/format.h>

#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

namespace ccsim::topo {
namespace {

/// One chain: a (shard, direction, segment) slice travelling around the ring.
struct Lane {
  uint32_t owner = 0;  ///< rank that ends with the reduced slice / sources it in the all-gather
  int dir = 1;         ///< +1 clockwise, −1 counter-clockwise
  uint32_t chunk = 0;
  uint32_t segment = 0;
  MessageRef msg;      ///< message travelling on this lane
  OpId arrived = kNoOp;   ///< transfer that delivered msg to the lane's current rank
  OpId reduced = kNoOp;   ///< all-reduce: the owner's final decode-accumulate
};

class RingGenerator final : public ScheduleGenerator {
 public:
  RingGenerator(CollectiveOp op, uint32_t n, uint64_t elements, const CollectiveOptions& o, bool bidir)
      : op_(op), n_(n), elements_(elements), options_(o), bidir_(bidir) {
    CCSIM_CHECK(n >= 2, "ring needs at least 2 ranks, got {}", n);
    CCSIM_CHECK(op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
    CCSIM_CHECK(o.segments >= 1);
  }

  Schedule begin() override {
    const char* op_name = op_ == CollectiveOp::kAllReduce       ? "allreduce"
                          : op_ == CollectiveOp::kReduceScatter ? "reduce_scatter"
                                                                : "allgather";
    Schedule s(fmt::format("{}.{}(n={})", op_name, bidir_ ? "ring_bidir" : "ring", n_), op_, n_, elements_);
    const std::vector<Chunk> shards = shard_split(elements_, n_, options_);
    for (uint32_t r = 0; r < n_; ++r) {
      const uint32_t halves = bidir_ ? 2 : 1;
      const std::vector<Chunk> parts = split_chunk(shards[r], halves, options_.align);
      for (uint32_t h = 0; h < halves; ++h) {
        for (uint32_t j = 0; const Chunk& seg : split_chunk(parts[h], options_.segments, options_.align)) {
          Lane lane;
          lane.owner = r;
          lane.dir = h == 0 ? 1 : -1;
          lane.chunk = s.add_chunk(seg.offset, seg.count);
          lane.segment = j++;
          lanes_.push_back(lane);
        }
      }
    }
    if (op_ != CollectiveOp::kAllReduce) s.set_shards(shards);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (!detail::phased_step(op_, n_ - 1, step_, [&](uint32_t k) { emit_reduce_step(s, k); },
                     [&](uint32_t k) { emit_gather_step(s, k); }))
      return false;
    ++step_;
    return true;
  }

 private:
  uint32_t walk(uint32_t from, int dir, uint32_t hops) const { return detail::ring_walk(n_, from, dir, hops); }

  // Reduce-scatter step k of every lane: the chain of a lane owned by o visits o+d, o+2d, ..., o.
  void emit_reduce_step(Schedule& s, uint32_t k) {
    OpId prev_segment = kNoOp;  // the previous segment's transfer on the same hop
    for (Lane& lane : lanes_) {
      if (lane.segment == 0) prev_segment = kNoOp;
      const uint32_t at = walk(lane.owner, lane.dir, k + 1), next = walk(lane.owner, lane.dir, k + 2);
      if (k + 1 == n_) {
        lane.reduced = s.add_kernel(KernelKind::kDecodeAccumulate, at, lane.chunk, lane.msg, n_, {lane.arrived});
        continue;
      }
      const OpId kernel = k == 0 ? s.add_kernel(KernelKind::kEncode, at, lane.chunk, MessageRef{}, 1, {})
                                 : s.add_kernel(KernelKind::kDecodeAccumulateEncode, at, lane.chunk, lane.msg, k + 1,
                                                {lane.arrived});
      lane.msg = s.message(kernel);
      lane.arrived = detail::send_after(s, at, next, lane.msg, kernel, prev_segment);
      prev_segment = lane.arrived;
    }
  }

  // All-gather step k: the owner's message is at o + k*d.
  void emit_gather_step(Schedule& s, uint32_t k) {
    OpId prev_segment = kNoOp;
    const uint32_t summed = op_ == CollectiveOp::kAllReduce ? n_ : 1;
    for (Lane& lane : lanes_) {
      if (lane.segment == 0) prev_segment = kNoOp;
      const uint32_t at = walk(lane.owner, lane.dir, k), next = walk(lane.owner, lane.dir, k + 1);
      OpId ready;  // what the forwarding transfer waits for
      if (k == 0) {
        const OpId enc = op_ == CollectiveOp::kAllReduce
                             ? s.add_kernel(KernelKind::kEncode, at, lane.chunk, MessageRef{}, summed, {lane.reduced})
                             : s.add_kernel(KernelKind::kEncode, at, lane.chunk, MessageRef{}, summed, {});
        lane.msg = s.message(enc);
        s.add_kernel(KernelKind::kDecode, at, lane.chunk, lane.msg, summed, {enc});
        ready = enc;
      } else {
        s.add_kernel(KernelKind::kDecode, at, lane.chunk, lane.msg, summed, {lane.arrived});
        ready = lane.arrived;
      }
      if (k + 1 < n_) {
        lane.arrived = detail::send_after(s, at, next, lane.msg, ready, prev_segment);
        prev_segment = lane.arrived;
      }
    }
  }

  CollectiveOp op_;
  uint32_t n_;
  uint64_t elements_;
  CollectiveOptions options_;
  bool bidir_;
  std::vector<Lane> lanes_;
  uint32_t step_ = 0;
};

/// Transfers of make_ring: every lane (shard × half × segment, empty ones included) makes n − 1
/// hops in each phase.
uint64_t ring_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o, bool bidir) {
  return detail::saturating_product({detail::phase_count(op), n, bidir ? 2u : 1u, o.segments, n - 1u});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_ring(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                             const CollectiveOptions& options, bool bidirectional) {
  return std::make_unique<RingGenerator>(op, ranks, elements, options, bidirectional);
}

namespace detail {

void register_ring(std::vector<CollectiveInfo>& out) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const std::string what = op == CollectiveOp::kAllReduce       ? "reduce-scatter + all-gather, 2(n-1) steps"
                             : op == CollectiveOp::kReduceScatter ? "n-1 steps, the chain of shard r ends at rank r"
                                                                  : "n-1 steps, each shard encoded once and forwarded";
    for (bool bidir : {false, true}) {
      out.push_back(CollectiveInfo{
          op, bidir ? "ring_bidir" : "ring",
          (bidir ? "ring, every shard halved and sent both ways (EQuARX full loop); " : "unidirectional ring; ") + what +
              (op == CollectiveOp::kAllGather ? "" : "; fused decode-accumulate-encode at intermediate hops"),
          [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) { return check_common(ranks, elements, o); },
          [op, bidir](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
            return make_ring(op, ranks, elements, o, bidir);
          },
          [op, bidir](uint32_t ranks, uint64_t, const CollectiveOptions& o) {
            return ring_transfers(op, ranks, o, bidir);
          }});
    }
  }
}

}  // namespace detail

Schedule make_allreduce_ring(uint32_t ranks, uint64_t elements, const CollectiveOptions& options) {
  auto gen = make_ring(CollectiveOp::kAllReduce, ranks, elements, options, false);
  return materialize(*gen);
}

}  // namespace ccsim::topo
