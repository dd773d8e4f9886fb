// Direct (single-hop, peer-to-peer) collectives: every message goes straight from the rank that
// encodes it to the rank that decodes it. Two steps for every operation:
//   step 0: encodes (plus the sender's decode of its own message where everyone must end with the
//           same compressed values) and every transfer, all concurrent;
//   step 1: the receivers' decodes / decode-accumulates.
// Step 1 needs step 0's transfer ids. Storing them would be O(n^2 * segments) state, so step 0 is
// emitted in a fixed layout (one block of ops per (sender, segment), the same shape for every
// segment) and step 1 recomputes the ids from the block bases: O(ranks * segments) state.
#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace ccsim::topo {
namespace {

class DirectGenerator final : public ScheduleGenerator {
 public:
  DirectGenerator(CollectiveOp op, uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : op_(op), n_(n), s_(o.segments), elements_(elements), options_(o) {
    CCSIM_CHECK(n >= 2, "direct collectives need at least 2 ranks, got {}", n);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1);
    CCSIM_CHECK(op != CollectiveOp::kBroadcast || o.root < n, "root {} of {} ranks", o.root, n);
    CCSIM_CHECK(op != CollectiveOp::kAllToAll || elements % n == 0, "alltoall of {} elements over {} ranks",
                elements, n);
  }

  Schedule begin() override {
    Schedule s(fmt::format("{}.{}(n={})", collective_op_name(op_), algorithm_name(op_), n_), op_, n_, elements_);
    if (whole_tensor()) {
      // One chunk per segment of the whole tensor: chunk j.
      for (const Chunk& seg : split_even(elements_, s_, options_.align)) s.add_chunk(seg.offset, seg.count);
    } else {
      // One chunk per (region r, segment j): chunk r * S + j.
      std::vector<Chunk> regions;
      if (op_ == CollectiveOp::kAllToAll) {
        const uint64_t block = elements_ / n_;
        for (uint32_t b = 0; b < n_; ++b) regions.push_back(Chunk{b * block, block});
      } else {
        regions = shard_split(elements_, n_, options_);
      }
      for (const Chunk& r : regions)
        for (const Chunk& seg : split_chunk(r, s_, options_.align)) s.add_chunk(seg.offset, seg.count);
      s.set_shards(std::move(regions));
    }
    if (op_ == CollectiveOp::kBroadcast) s.set_root(options_.root);
    base_.assign(static_cast<size_t>(num_senders()) * s_, kNoOp);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (step_ == 0) emit_sends(s);
    else if (step_ == 1) emit_receives(s);
    else return false;
    ++step_;
    return true;
  }

  static const char* algorithm_name(CollectiveOp op) {
    return op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllToAll ? "direct" : "p2p";
  }

 private:
  /// Whether chunks are segments of the whole tensor (all-reduce, broadcast) or of per-rank regions.
  bool whole_tensor() const { return op_ == CollectiveOp::kAllReduce || op_ == CollectiveOp::kBroadcast; }
  /// Reduce-scatter and all-to-all encode a different region for every destination.
  bool per_destination() const { return op_ == CollectiveOp::kReduceScatter || op_ == CollectiveOp::kAllToAll; }
  uint32_t num_senders() const { return op_ == CollectiveOp::kBroadcast ? 1 : n_; }
  uint32_t sender(uint32_t index) const { return op_ == CollectiveOp::kBroadcast ? options_.root : index; }
  uint32_t chunk(uint32_t region, uint32_t segment) const { return whole_tensor() ? segment : region * s_ + segment; }
  /// The chunk sender `src` encodes for destination `dst`, and the one `dst` decodes it into.
  uint32_t src_chunk(uint32_t src, uint32_t dst, uint32_t j) const {
    return chunk(op_ == CollectiveOp::kAllGather ? src : dst, j);
  }
  uint32_t dst_chunk(uint32_t src, uint32_t dst, uint32_t j) const {
    return chunk(op_ == CollectiveOp::kReduceScatter ? dst : src, j);
  }
  // Layout of a (sender, segment) block of step 0, for the destination at ring distance t (1..n-1):
  //   per destination: [E, T] per t               (reduce-scatter, all-to-all)
  //   shared message:  E, D_own, then T per t     (all-reduce, all-gather, broadcast)
  OpId encode_id(uint32_t block, uint32_t t) const {
    return per_destination() ? base_[block] + 2 * (t - 1) : base_[block];
  }
  OpId transfer_id(uint32_t block, uint32_t t) const {
    return per_destination() ? base_[block] + 2 * (t - 1) + 1 : base_[block] + 2 + (t - 1);
  }

  void emit_sends(Schedule& s) {
    for (uint32_t si = 0; si < num_senders(); ++si) {
      const uint32_t src = sender(si);
      for (uint32_t j = 0; j < s_; ++j) {
        const uint32_t block = si * s_ + j;
        base_[block] = s.id_end();
        MessageRef msg;
        OpId enc = kNoOp;
        if (!per_destination()) {
          enc = s.add_kernel(KernelKind::kEncode, src, src_chunk(src, src, j), MessageRef{}, 1, {});
          msg = s.message(enc);
          // The sender decodes its own message too, so every rank ends with the same compressed values.
          s.add_kernel(KernelKind::kDecode, src, msg.chunk, msg, 1, {enc});
        }
        for (uint32_t t = 1; t < n_; ++t) {
          const uint32_t dst = (src + t) % n_;
          if (per_destination()) {
            enc = s.add_kernel(KernelKind::kEncode, src, src_chunk(src, dst, j), MessageRef{}, 1, {});
            msg = s.message(enc);
          }
          const OpId tr = j == 0 ? s.add_transfer(src, dst, msg, {enc})
                                 : s.add_transfer(src, dst, msg, {enc, transfer_id(block - 1, t)});
          CCSIM_CHECK(tr == transfer_id(block, t) && enc == encode_id(block, t), "direct layout");
        }
      }
    }
  }

  void emit_receives(Schedule& s) {
    const bool reduce = op_ == CollectiveOp::kAllReduce || op_ == CollectiveOp::kReduceScatter;
    for (uint32_t dst = 0; dst < n_; ++dst) {
      if (op_ == CollectiveOp::kBroadcast && dst == options_.root) continue;
      for (uint32_t j = 0; j < s_; ++j) {
        // All-reduce: the chain starts after the rank decoded its own message (step 0, the block's
        // second op); reduce-scatter: the rank's own contribution is already in its buffer.
        OpId prev = op_ == CollectiveOp::kAllReduce ? base_[dst * s_ + j] + 1 : kNoOp;
        for (uint32_t t = 1; t < n_; ++t) {
          const uint32_t src = (dst + n_ - t) % n_;
          if (op_ == CollectiveOp::kBroadcast && src != options_.root) continue;
          const uint32_t block = (op_ == CollectiveOp::kBroadcast ? 0 : src) * s_ + j;
          const OpId tr = transfer_id(block, t);
          const MessageRef msg{encode_id(block, t), src_chunk(src, dst, j), 1};
          const uint32_t into = dst_chunk(src, dst, j);
          if (op_ == CollectiveOp::kAllToAll) {
            // In place: wait until dst has encoded its own copy of block src (sent at distance n-t).
            s.add_kernel(KernelKind::kDecode, dst, into, msg, 1, {tr, encode_id(dst * s_ + j, n_ - t)});
            continue;
          }
          if (!reduce) {
            s.add_kernel(KernelKind::kDecode, dst, into, msg, 1, {tr});
            continue;
          }
          // Accumulations into one chunk are chained: a fixed summation order on every interpreter.
          prev = prev == kNoOp ? s.add_kernel(KernelKind::kDecodeAccumulate, dst, into, msg, 1 + t, {tr})
                               : s.add_kernel(KernelKind::kDecodeAccumulate, dst, into, msg, 1 + t, {tr, prev});
        }
      }
    }
  }

  CollectiveOp op_;
  uint32_t n_;
  uint32_t s_;  ///< segments
  uint64_t elements_;
  CollectiveOptions options_;
  std::vector<OpId> base_;  ///< first op id of each (sender, segment) block of step 0
  uint32_t step_ = 0;
};

Status check_direct(CollectiveOp op, uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
  CCSIM_RETURN_IF_ERROR(detail::check_common(ranks, elements, o));
  if (op == CollectiveOp::kBroadcast && o.root >= ranks)
    return invalid_argument(fmt::format("broadcast root {} is not one of the {} ranks", o.root, ranks));
  return detail::check_alltoall_blocks(op, ranks, elements, o.align);
}

/// Transfers of make_direct: every sender (the root alone for a broadcast) sends each segment to
/// the n − 1 other ranks.
uint64_t direct_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o) {
  const uint64_t senders = op == CollectiveOp::kBroadcast ? 1 : n;
  return detail::saturating_product({senders, o.segments, n - 1u});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_direct(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                               const CollectiveOptions& options) {
  return std::make_unique<DirectGenerator>(op, ranks, elements, options);
}

namespace detail {

void register_direct(std::vector<CollectiveInfo>& out) {
  const std::pair<CollectiveOp, const char*> entries[] = {
      {CollectiveOp::kAllReduce,
       "peer-to-peer broadcast (AQGB): each rank encodes its tensor once and sends it to all others; every rank "
       "decodes its own message and accumulates the n-1 others; 2 steps"},
      {CollectiveOp::kAllGather, "each owner encodes its shard once and sends it to all others; 2 steps"},
      {CollectiveOp::kReduceScatter,
       "rank s encodes its copy of shard d and sends it straight to d, which accumulates n-1 messages; 2 steps"},
      {CollectiveOp::kBroadcast, "the root encodes once and sends to every rank directly; all decode; 2 steps"},
      {CollectiveOp::kAllToAll,
       "rank s encodes block d and sends it straight to d; own block left as is; elements % n == 0, each block "
       "whole scheme blocks; 2 steps"},
  };
  for (const auto& entry : entries) {
    const CollectiveOp op = entry.first;  // not a structured binding: clang < 16 cannot capture those
    out.push_back(CollectiveInfo{
        op, DirectGenerator::algorithm_name(op), entry.second,
        [op](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
          return check_direct(op, ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
          return make_direct(op, ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t, const CollectiveOptions& o) { return direct_transfers(op, ranks, o); }});
  }
}

}  // namespace detail
}  // namespace ccsim::topo
