// Two-level (node-aware) collectives over N nodes of G ranks: rank r is (node i, local j) with
// r = i * G + j. Step-0 ops are emitted in fixed per-rank layouts so that later steps recompute
// transfer and message ids instead of storing them (O(ranks * segments) generator state).
#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ccsim::topo {
namespace {

/// Hierarchical all-to-all reduce-scatter (ZeRO++ qgZ / SDP4Bit TLq).
///
/// The tensor is split into n pieces; rank (i, j) owns piece j*N + i, so local peer j's pieces
/// R_j = {j*N, ..., j*N + N-1} form one contiguous range and every message is one chunk.
///  * Phase A (intra-node all-to-all, G > 1): rank (i, j') encodes its copy of R_j and sends it to
///    (i, j); the receiver decode-accumulates the G-1 messages into R_j (kDecodeAccumulate, chained):
///    R_j then holds the node's sum, summed = G.
///  * Phase B (inter-node all-to-all, N > 1): rank (i, j) re-encodes piece j*N + i' of that node sum
///    (one kEncode per outgoing piece: the decoded range spans N pieces, so no single fused
///    decode-accumulate-encode could produce them) and sends it to (i', j), which decode-accumulates
///    the N-1 messages into its own piece: summed = N*G.
/// Segments split R_j (phase A) and every piece (phase B); a phase-B segment waits for the phase-A
/// segments it overlaps. Node i sends its phase-A segments in rotated order, starting with the one
/// that holds piece j*N + (i+1) mod N: phase-B sends then start after the first segment and every
/// node feeds a different destination node first, instead of all nodes converging on one (an incast
/// that would idle the other NICs while phase A runs).
/// Steps: A sends | A accumulates + B sends | B accumulates (phases that do not exist are dropped).
class TwoLevelReduceScatter final : public ScheduleGenerator {
 public:
  TwoLevelReduceScatter(uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : n_(n), g_(o.gpus_per_node), nodes_(o.gpus_per_node == 0 ? 0 : n / o.gpus_per_node), s_(o.segments),
        elements_(elements), options_(o) {
    CCSIM_CHECK(n >= 2 && g_ >= 1 && n % g_ == 0, "two-level over {} ranks, {} per node", n, g_);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1);
  }

  Schedule begin() override {
    Schedule s(fmt::format("reduce_scatter.two_level(n={},G={})", n_, g_), CollectiveOp::kReduceScatter, n_,
               elements_);
    const std::vector<Chunk> pieces = shard_split(elements_, n_, options_);
    // Phase-A chunks: range R_j split into segments, chunk a_first_ + j*S + seg.
    a_first_ = static_cast<uint32_t>(s.chunks().size());
    std::vector<std::vector<Chunk>> a_segs(g_);
    for (uint32_t j = 0; j < g_; ++j) {
      const Chunk& lo = pieces[j * nodes_];
      const Chunk& hi = pieces[j * nodes_ + nodes_ - 1];
      a_segs[j] = split_chunk(Chunk{lo.offset, hi.offset + hi.count - lo.offset}, s_, options_.align);
      for (const Chunk& c : a_segs[j]) s.add_chunk(c.offset, c.count);
    }
    // Phase-B chunks: piece k split into segments, chunk b_first_ + k*S + seg, with the range of
    // phase-A segments of R_{k / N} it overlaps (an empty segment waits for the last one).
    b_first_ = static_cast<uint32_t>(s.chunks().size());
    overlap_.resize(static_cast<size_t>(n_) * s_);
    for (uint32_t k = 0; k < n_; ++k) {
      const std::vector<Chunk>& as = a_segs[k / nodes_];
      for (uint32_t seg = 0; const Chunk& c : split_chunk(pieces[k], s_, options_.align)) {
        s.add_chunk(c.offset, c.count);
        uint32_t lo = s_, hi = 0;
        for (uint32_t a = 0; a < s_; ++a) {
          if (as[a].offset < c.offset + c.count && c.offset < as[a].offset + as[a].count) {
            lo = std::min(lo, a);
            hi = std::max(hi, a);
          }
        }
        if (lo > hi) lo = hi = s_ - 1;
        overlap_[static_cast<size_t>(k) * s_ + seg++] = {lo, hi};
      }
    }
    // Phase-A send order: rank (i, j) first receives the segment of R_j holding piece j*N + (i+1) mod N.
    a_start_.assign(n_, 0);
    if (nodes_ > 1) {
      for (uint32_t r = 0; r < n_; ++r) {
        const uint32_t first_piece = local(r) * nodes_ + (node(r) + 1) % nodes_;
        a_start_[r] = overlap_[static_cast<size_t>(first_piece) * s_].lo;
      }
    }
    std::vector<Chunk> shards(n_);
    for (uint32_t r = 0; r < n_; ++r) shards[r] = pieces[piece_of(r)];
    s.set_shards(std::move(shards));
    a_base_.assign(n_, kNoOp);
    b_base_.assign(n_, kNoOp);
    last_a_.assign(static_cast<size_t>(n_) * s_, kNoOp);
    // Phase sequence per step.
    plan_.clear();
    if (g_ > 1) plan_.push_back({kASend});
    if (g_ > 1 && nodes_ > 1) plan_.push_back({kAReceive, kBSend});
    else plan_.push_back({g_ > 1 ? kAReceive : kBSend});
    if (nodes_ > 1) plan_.push_back({kBReceive});
    return s;
  }

  bool next_step(Schedule& s) override {
    if (step_ >= plan_.size()) return false;
    for (Phase p : plan_[step_]) {
      switch (p) {
        case kASend: emit_a_send(s); break;
        case kAReceive: emit_a_receive(s); break;
        case kBSend: emit_b_send(s); break;
        case kBReceive: emit_b_receive(s); break;
      }
    }
    ++step_;
    return true;
  }

 private:
  enum Phase : uint8_t { kASend, kAReceive, kBSend, kBReceive };
  struct Range {
    uint32_t lo = 0, hi = 0;
  };

  uint32_t node(uint32_t r) const { return r / g_; }
  uint32_t local(uint32_t r) const { return r % g_; }
  uint32_t rank(uint32_t i, uint32_t j) const { return i * g_ + j; }
  uint32_t piece_of(uint32_t r) const { return local(r) * nodes_ + node(r); }
  uint32_t a_chunk(uint32_t j, uint32_t seg) const { return a_first_ + j * s_ + seg; }
  uint32_t b_chunk(uint32_t k, uint32_t seg) const { return b_first_ + k * s_ + seg; }
  // Phase-A layout of sender r: [E, T] for local distance u = 1..G-1, send position t, which carries
  // segment a_segment(receiver, t).
  OpId a_transfer(uint32_t r, uint32_t u, uint32_t t) const { return a_base_[r] + 2 * ((u - 1) * s_ + t) + 1; }
  uint32_t a_segment(uint32_t receiver, uint32_t t) const { return (a_start_[receiver] + t) % s_; }
  // Phase-B layout of sender r: [E, T] for node distance v = 1..N-1, segment seg.
  OpId b_transfer(uint32_t r, uint32_t v, uint32_t seg) const { return b_base_[r] + 2 * ((v - 1) * s_ + seg) + 1; }
  /// Appends rank r's final phase-A accumulations that overlap segment seg of piece k.
  void add_a_deps(std::vector<OpId>& deps, uint32_t r, uint32_t k, uint32_t seg) const {
    if (g_ == 1) return;
    const Range& ov = overlap_[static_cast<size_t>(k) * s_ + seg];
    for (uint32_t a = ov.lo; a <= ov.hi; ++a) deps.push_back(last_a_[static_cast<size_t>(r) * s_ + a]);
  }

  void emit_a_send(Schedule& s) {
    for (uint32_t r = 0; r < n_; ++r) {
      a_base_[r] = s.id_end();
      for (uint32_t u = 1; u < g_; ++u) {
        const uint32_t j = (local(r) + u) % g_, dst = rank(node(r), j);
        for (uint32_t t = 0; t < s_; ++t) {
          const OpId enc = s.add_kernel(KernelKind::kEncode, r, a_chunk(j, a_segment(dst, t)), MessageRef{}, 1, {});
          const OpId tr = t == 0 ? s.add_transfer(r, dst, s.message(enc), {enc})
                                 : s.add_transfer(r, dst, s.message(enc), {enc, a_transfer(r, u, t - 1)});
          CCSIM_CHECK(tr == a_transfer(r, u, t), "two-level layout");
        }
      }
    }
  }

  void emit_a_receive(Schedule& s) {
    for (uint32_t r = 0; r < n_; ++r) {
      const uint32_t j = local(r);
      for (uint32_t t = 0; t < s_; ++t) {
        const uint32_t seg = a_segment(r, t);
        OpId prev = kNoOp;
        for (uint32_t u = 1; u < g_; ++u) {
          const uint32_t src = rank(node(r), (j + g_ - u) % g_);
          const OpId tr = a_transfer(src, u, t);
          const MessageRef msg{tr - 1, a_chunk(j, seg), 1};
          prev = prev == kNoOp ? s.add_kernel(KernelKind::kDecodeAccumulate, r, msg.chunk, msg, 1 + u, {tr})
                               : s.add_kernel(KernelKind::kDecodeAccumulate, r, msg.chunk, msg, 1 + u, {tr, prev});
        }
        last_a_[static_cast<size_t>(r) * s_ + seg] = prev;
      }
    }
  }

  void emit_b_send(Schedule& s) {
    std::vector<OpId> deps;
    for (uint32_t r = 0; r < n_; ++r) {
      b_base_[r] = s.id_end();
      for (uint32_t v = 1; v < nodes_; ++v) {
        const uint32_t i = (node(r) + v) % nodes_, dst = rank(i, local(r)), k = piece_of(dst);
        for (uint32_t seg = 0; seg < s_; ++seg) {
          deps.clear();
          add_a_deps(deps, r, k, seg);
          const OpId enc = s.add_kernel(KernelKind::kEncode, r, b_chunk(k, seg), MessageRef{}, g_, deps);
          const OpId tr = seg == 0 ? s.add_transfer(r, dst, s.message(enc), {enc})
                                   : s.add_transfer(r, dst, s.message(enc), {enc, b_transfer(r, v, seg - 1)});
          CCSIM_CHECK(tr == b_transfer(r, v, seg), "two-level layout");
        }
      }
    }
  }

  void emit_b_receive(Schedule& s) {
    std::vector<OpId> deps;
    for (uint32_t r = 0; r < n_; ++r) {
      const uint32_t k = piece_of(r);
      for (uint32_t seg = 0; seg < s_; ++seg) {
        OpId prev = kNoOp;
        for (uint32_t v = 1; v < nodes_; ++v) {
          const uint32_t src = rank((node(r) + nodes_ - v) % nodes_, local(r));
          const OpId tr = b_transfer(src, v, seg);
          const MessageRef msg{tr - 1, b_chunk(k, seg), g_};
          deps.assign({tr});
          if (prev == kNoOp) add_a_deps(deps, r, k, seg);  // after this rank's own node-level sum
          else deps.push_back(prev);
          prev = s.add_kernel(KernelKind::kDecodeAccumulate, r, msg.chunk, msg, g_ * (1 + v), deps);
        }
      }
    }
  }

  uint32_t n_, g_, nodes_, s_;
  uint64_t elements_;
  CollectiveOptions options_;
  uint32_t a_first_ = 0, b_first_ = 0;
  std::vector<Range> overlap_;   ///< per (piece, segment): the phase-A segments it overlaps
  std::vector<uint32_t> a_start_;  ///< per rank (i, j): the first segment of R_j sent to it in phase A
  std::vector<OpId> a_base_;     ///< per rank: first op of its phase-A sends
  std::vector<OpId> b_base_;     ///< per rank: first op of its phase-B sends
  std::vector<OpId> last_a_;     ///< per (rank, phase-A segment): its last phase-A accumulation
  std::vector<std::vector<Phase>> plan_;
  uint32_t step_ = 0;
};

/// Two-level all-to-all: block d of rank s = (i, j) travels to d = (i', j') through the local peer
/// (i, j') (skipped when j == j') and then across nodes (skipped when i == i'). It is encoded once at
/// s, forwarded unchanged, decoded only at d into d's block s. Rank s's own block s is left as is.
/// Steps: encodes + intra-node hops | inter-node hops + decodes of intra-node-only blocks | the
/// remaining decodes. Block order: shards[b] = [b*B, (b+1)*B), B = elements / n.
class TwoLevelAllToAll final : public ScheduleGenerator {
 public:
  TwoLevelAllToAll(uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : n_(n), g_(o.gpus_per_node), nodes_(o.gpus_per_node == 0 ? 0 : n / o.gpus_per_node), s_(o.segments),
        elements_(elements), options_(o) {
    CCSIM_CHECK(n >= 2 && g_ >= 1 && n % g_ == 0, "two-level over {} ranks, {} per node", n, g_);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1 && elements % n == 0);
  }

  Schedule begin() override {
    Schedule s(fmt::format("alltoall.two_level(n={},G={})", n_, g_), CollectiveOp::kAllToAll, n_, elements_);
    const uint64_t block = elements_ / n_;
    std::vector<Chunk> blocks;
    for (uint32_t b = 0; b < n_; ++b) {
      blocks.push_back(Chunk{b * block, block});
      for (const Chunk& c : split_chunk(blocks.back(), s_, options_.align)) s.add_chunk(c.offset, c.count);
    }
    s.set_shards(std::move(blocks));
    base0_.assign(n_, kNoOp);
    base1_.assign(n_, kNoOp);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (step_ == 0) emit_first_hops(s);
    else if (step_ == 1) emit_second_hops(s);
    else if (step_ == 2 && nodes_ > 1) emit_last_decodes(s);
    else return false;
    ++step_;
    return true;
  }

 private:
  uint32_t node(uint32_t r) const { return r / g_; }
  uint32_t local(uint32_t r) const { return r % g_; }
  uint32_t chunk(uint32_t b, uint32_t seg) const { return b * s_ + seg; }

  /// Walks sender src's blocks in the fixed order (distance t = 1..n-1, segment) and calls
  /// f(dst, seg, encode id, intra-node transfer id or kNoOp, index in the walk) with step-0 ids
  /// recomputed from src's layout: [E, T1 if the local index changes] per (t, seg).
  template <class F>
  void walk(uint32_t src, F&& f) const {
    OpId id = base0_[src];
    uint32_t index = 0;
    for (uint32_t t = 1; t < n_; ++t) {
      const uint32_t dst = (src + t) % n_;
      const bool hop1 = local(dst) != local(src);
      for (uint32_t seg = 0; seg < s_; ++seg) {
        f(dst, seg, id, hop1 ? id + 1 : kNoOp, index++);
        id += hop1 ? 2 : 1;
      }
    }
  }

  /// Step-0 id of src's encode of the block for dst = src + t, segment seg (the closed form of walk():
  /// among distances 1..t-1, those that are multiples of G keep the local index and take one op).
  OpId encode_id(uint32_t src, uint32_t t, uint32_t seg) const {
    const uint32_t same_local = (t - 1) / g_;
    const bool hop1 = t % g_ != 0;
    return base0_[src] + s_ * (2 * (t - 1) - same_local) + seg * (hop1 ? 2 : 1);
  }
  /// Decoding into dst's block src overwrites what dst encoded for src: it must wait for that encode.
  OpId own_encode(uint32_t dst, uint32_t src, uint32_t seg) const { return encode_id(dst, (src + n_ - dst) % n_, seg); }

  void emit_first_hops(Schedule& s) {
    for (uint32_t src = 0; src < n_; ++src) {
      base0_[src] = s.id_end();
      walk(src, [&](uint32_t dst, uint32_t seg, OpId enc_id, OpId t1_id, uint32_t) {
        const OpId enc = s.add_kernel(KernelKind::kEncode, src, chunk(dst, seg), MessageRef{}, 1, {});
        CCSIM_CHECK(enc == enc_id && enc == encode_id(src, (dst + n_ - src) % n_, seg), "two-level layout");
        if (t1_id == kNoOp) return;
        const uint32_t relay = node(src) * g_ + local(dst);
        const OpId tr = seg == 0 ? s.add_transfer(src, relay, s.message(enc), {enc})
                                 : s.add_transfer(src, relay, s.message(enc), {enc, t1_id - 2});
        CCSIM_CHECK(tr == t1_id, "two-level layout");
      });
    }
  }

  // One op per (src, t, seg): the inter-node hop, or the decode of a block that stayed in the node.
  void emit_second_hops(Schedule& s) {
    for (uint32_t src = 0; src < n_; ++src) {
      base1_[src] = s.id_end();
      walk(src, [&](uint32_t dst, uint32_t seg, OpId enc, OpId t1, uint32_t index) {
        const MessageRef msg{enc, chunk(dst, seg), 1};
        OpId id;
        if (node(dst) == node(src)) {
          id = s.add_kernel(KernelKind::kDecode, dst, chunk(src, seg), msg, 1, {t1, own_encode(dst, src, seg)});
        } else {
          const uint32_t relay = node(src) * g_ + local(dst);
          const OpId ready = t1 == kNoOp ? enc : t1;
          id = seg == 0 ? s.add_transfer(relay, dst, msg, {ready})
                        : s.add_transfer(relay, dst, msg, {ready, base1_[src] + index - 1});
        }
        CCSIM_CHECK(id == base1_[src] + index, "two-level layout");
      });
    }
  }

  void emit_last_decodes(Schedule& s) {
    for (uint32_t src = 0; src < n_; ++src) {
      walk(src, [&](uint32_t dst, uint32_t seg, OpId enc, OpId, uint32_t index) {
        if (node(dst) == node(src)) return;
        const MessageRef msg{enc, chunk(dst, seg), 1};
        s.add_kernel(KernelKind::kDecode, dst, chunk(src, seg), msg, 1,
                     {base1_[src] + index, own_encode(dst, src, seg)});
      });
    }
  }

  uint32_t n_, g_, nodes_, s_;
  uint64_t elements_;
  CollectiveOptions options_;
  std::vector<OpId> base0_;  ///< per sender: first op of its step-0 block
  std::vector<OpId> base1_;  ///< per sender: first op of its step-1 block (one op per (t, segment))
  uint32_t step_ = 0;
};

Status check_two_level(CollectiveOp op, uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
  CCSIM_RETURN_IF_ERROR(detail::check_common(ranks, elements, o));
  if (o.gpus_per_node < 1 || ranks % o.gpus_per_node != 0)
    return invalid_argument(fmt::format("two_level needs the ranks ({}) to be a multiple of gpus_per_node ({})",
                                        ranks, o.gpus_per_node));
  return detail::check_alltoall_blocks(op, ranks, elements, o.align);
}

/// Transfers of make_two_level, per sender and segment. Reduce-scatter: G − 1 local peers (phase A)
/// and N − 1 peers with the same local index (phase B). All-to-all: of the n − 1 blocks, the n − N
/// bound for another local index take the intra-node hop and the n − G bound for another node the
/// inter-node hop.
uint64_t two_level_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o) {
  const uint64_t g = o.gpus_per_node, nodes = n / g;
  const uint64_t hops = op == CollectiveOp::kReduceScatter ? (g - 1) + (nodes - 1) : (n - nodes) + (n - g);
  return detail::saturating_product({n, o.segments, hops});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_two_level(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options) {
  CCSIM_CHECK(op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllToAll, "two_level {}",
              collective_op_name(op));
  if (op == CollectiveOp::kReduceScatter) return std::make_unique<TwoLevelReduceScatter>(ranks, elements, options);
  return std::make_unique<TwoLevelAllToAll>(ranks, elements, options);
}

namespace detail {

void register_two_level(std::vector<CollectiveInfo>& out) {
  out.push_back(CollectiveInfo{
      CollectiveOp::kReduceScatter, "two_level",
      "hierarchical all-to-all (ZeRO++ qgZ / SDP4Bit TLq): intra-node all-to-all + reduce, re-encode, inter-node "
      "all-to-all + reduce; rank (node i, local j) owns piece j*N+i; ranks % gpus_per_node == 0",
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
        return check_two_level(CollectiveOp::kReduceScatter, ranks, elements, o);
      },
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
        return make_two_level(CollectiveOp::kReduceScatter, ranks, elements, o);
      },
      [](uint32_t ranks, uint64_t, const CollectiveOptions& o) {
        return two_level_transfers(CollectiveOp::kReduceScatter, ranks, o);
      }});
  out.push_back(CollectiveInfo{
      CollectiveOp::kAllToAll, "two_level",
      "blocks relayed through the local peer with the destination's local index, then across nodes; encoded once, "
      "forwarded unchanged; ranks % gpus_per_node == 0, elements % ranks == 0, each block whole scheme blocks",
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
        return check_two_level(CollectiveOp::kAllToAll, ranks, elements, o);
      },
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
        return make_two_level(CollectiveOp::kAllToAll, ranks, elements, o);
      },
      [](uint32_t ranks, uint64_t, const CollectiveOptions& o) {
        return two_level_transfers(CollectiveOp::kAllToAll, ranks, o);
      }});
}

}  // namespace detail
}  // namespace ccsim::topo
