// Hierarchical ring: intra-node ring reduce-scatter, inter-node ring over each 1/G part, intra-node
// ring all-gather. G = gpus_per_node, N = n / G nodes; rank (i, x) = i·G + x is local rank x of
// node i.
//
// The tensor is split into n pieces q = l·N + m (part l = pieces l·N .. l·N+N−1, contiguous);
// piece (l, m) is owned by rank (m, l), which declares it as its shard.
//
// Reduce-scatter of piece (l, m):
//   intra: on every node i the piece walks local l+1 → l+2 → … → l (G−1 hops, fused
//          decode-accumulate-encode in between), so local l of each node ends with its node's partial
//          (G contributions). The N pieces of part l travel together on a node's hop.
//   inter: among the ranks (·, l) the piece walks node m+1 → m+2 → … → m (N−1 hops). Node m+1 starts
//          the chain with a fused decode-accumulate-encode of its intra arrival (G contributions);
//          every later node first decode-accumulates its intra arrival, then decode-accumulate-encodes
//          the inter arrival ((u+1)·G contributions after u+1 nodes); the owner decode-accumulates
//          both (n in the end).
// Each piece's aggregation tree has depth (G−1) + (N−1). All-gather: the owner encodes once; the
// message walks the inter ring node m → m+1 → … (N−1 hops), then on every node the N messages of
// part l walk the intra ring local l → l+1 → … (G−1 hops), forwarded unchanged; every rank decodes
// each message once (the owner its own too), so all ranks end with identical values.
//
// Steps (receiving kernels live in the step after their transfer, as in ring.cpp): reduce-scatter
// G + N − 1, all-gather N + G − 1, all-reduce 2(N + G) − 3 (all-gather step 0 shares the last
// reduce-scatter step). G = 1 is the plain ring; N = 1 the intra-node ring.
//
// Generator state is O(n·segments): transfers and kernels that a later step refers to are emitted
// in fixed-layout runs whose first ids are kept (see the *_first_ members).
#include <fmt/format.h>

#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

namespace ccsim::topo {
namespace {

class HierarchicalRingGenerator final : public ScheduleGenerator {
 public:
  HierarchicalRingGenerator(CollectiveOp op, uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : op_(op), n_(n), g_(o.gpus_per_node), nodes_(o.gpus_per_node == 0 ? 0 : n / o.gpus_per_node),
        segs_(o.segments), elements_(elements), options_(o) {
    CCSIM_CHECK(n >= 2 && g_ >= 1 && n % g_ == 0, "hierarchical_ring over {} ranks with {} per node", n, g_);
    CCSIM_CHECK(op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
    CCSIM_CHECK(o.segments >= 1 && o.align >= 1);
  }

  Schedule begin() override {
    Schedule s(fmt::format("{}.hierarchical_ring(n={},G={})", collective_op_name(op_), n_, g_), op_, n_, elements_);
    const std::vector<Chunk> pieces = shard_split(elements_, n_, options_);
    for (const Chunk& piece : pieces)
      for (const Chunk& seg : split_chunk(piece, segs_, options_.align)) s.add_chunk(seg.offset, seg.count);
    if (op_ != CollectiveOp::kAllReduce) {
      std::vector<Chunk> shards(n_);
      for (uint32_t l = 0; l < g_; ++l)
        for (uint32_t m = 0; m < nodes_; ++m) shards[rank(m, l)] = pieces[l * nodes_ + m];
      s.set_shards(std::move(shards));
    }
    lane_first_.assign(n_, kNoOp);
    junction_first_.assign(n_, kNoOp);
    msg_.assign(size_t{n_} * segs_, MessageRef{});
    arrived_.assign(size_t{n_} * segs_, kNoOp);
    reduced_.assign(size_t{n_} * segs_, kNoOp);
    inter_first_.assign(nodes_, kNoOp);
    return s;
  }

  bool next_step(Schedule& s) override {
    if (!detail::phased_step(op_, g_ + nodes_ - 2, step_, [&](uint32_t k) { emit_reduce_step(s, k); },
                     [&](uint32_t k) { emit_gather_step(s, k); }))
      return false;
    ++step_;
    return true;
  }

 private:
  uint32_t rank(uint32_t node, uint32_t local) const { return (node % nodes_) * g_ + local % g_; }
  uint32_t piece(uint32_t part, uint32_t sub) const { return part * nodes_ + sub; }
  uint32_t chunk(uint32_t q, uint32_t j) const { return q * segs_ + j; }
  /// Junction kernel of lane (node, part) for sub-shard m, segment j.
  OpId junction(uint32_t node, uint32_t part, uint32_t m, uint32_t j) const {
    return junction_first_[(node % nodes_) * g_ + part] + m * segs_ + j;
  }

  void emit_reduce_step(Schedule& s, uint32_t k) {
    if (k + 1 < g_) return emit_intra_reduce(s, k);
    if (k + 1 == g_) return emit_junction(s);
    const uint32_t u = k - (g_ - 1);
    if (u + 1 < nodes_) return emit_inter_reduce(s, u);
    emit_final_reduce(s);
  }

  // Intra hop t of lane (i, l): local l+1+t sends the N pieces of part l to l+2+t. The lane's ops are
  // (kernel, transfer) pairs per (m, j), starting at lane_first_.
  void emit_intra_reduce(Schedule& s, uint32_t t) {
    for (uint32_t i = 0; i < nodes_; ++i) {
      for (uint32_t l = 0; l < g_; ++l) {
        const uint32_t at = rank(i, l + 1 + t), to = rank(i, l + 2 + t);
        const OpId old = lane_first_[i * g_ + l];
        lane_first_[i * g_ + l] = s.id_end();
        for (uint32_t m = 0; m < nodes_; ++m) {
          OpId prev = kNoOp;  // segment j+1 of a piece follows segment j on the hop
          for (uint32_t j = 0; j < segs_; ++j) {
            const uint32_t c = chunk(piece(l, m), j), idx = m * segs_ + j;
            const OpId kernel =
                t == 0 ? s.add_kernel(KernelKind::kEncode, at, c, MessageRef{}, 1, {})
                       : s.add_kernel(KernelKind::kDecodeAccumulateEncode, at, c, MessageRef{old + 2 * idx, c, t},
                                      t + 1, {old + 2 * idx + 1});
            prev = detail::send_after(s, at, to, s.message(kernel), kernel, prev);
          }
        }
      }
    }
  }

  // Step G−1: local l of every node receives its node's partial of part l (G−1 contributions). On
  // node m+1 piece (l, m) starts its inter chain (fused), elsewhere it is only accumulated. With
  // G = 1 the inter chains start with a leaf encode instead.
  void emit_junction(Schedule& s) {
    if (g_ >= 2) {
      for (uint32_t i = 0; i < nodes_; ++i) {
        for (uint32_t l = 0; l < g_; ++l) {
          const OpId old = lane_first_[i * g_ + l];
          junction_first_[i * g_ + l] = s.id_end();
          for (uint32_t m = 0; m < nodes_; ++m) {
            const bool starts = nodes_ >= 2 && (m + 1) % nodes_ == i;
            for (uint32_t j = 0; j < segs_; ++j) {
              const uint32_t c = chunk(piece(l, m), j), idx = m * segs_ + j;
              const KernelKind kind = starts ? KernelKind::kDecodeAccumulateEncode : KernelKind::kDecodeAccumulate;
              const OpId kernel =
                  s.add_kernel(kind, rank(i, l), c, MessageRef{old + 2 * idx, c, g_ - 1}, g_, {old + 2 * idx + 1});
              if (nodes_ == 1) reduced_[piece(l, m) * segs_ + j] = kernel;
            }
          }
        }
      }
    }
    if (nodes_ == 1) return;
    for (uint32_t l = 0; l < g_; ++l) {
      for (uint32_t m = 0; m < nodes_; ++m) {
        const uint32_t q = piece(l, m), at = rank(m + 1, l), to = rank(m + 2, l);
        OpId prev = kNoOp;
        for (uint32_t j = 0; j < segs_; ++j) {
          const OpId kernel = g_ >= 2 ? junction(m + 1, l, m, j)
                                      : s.add_kernel(KernelKind::kEncode, at, chunk(q, j), MessageRef{}, 1, {});
          msg_[q * segs_ + j] = s.message(kernel);
          prev = arrived_[q * segs_ + j] = detail::send_after(s, at, to, msg_[q * segs_ + j], kernel, prev);
        }
      }
    }
  }

  // Inter hop u >= 1 of piece (l, m): node m+1+u adds its intra partial and the inter partial.
  void emit_inter_reduce(Schedule& s, uint32_t u) {
    for (uint32_t l = 0; l < g_; ++l) {
      for (uint32_t m = 0; m < nodes_; ++m) {
        const uint32_t q = piece(l, m), node = m + 1 + u, at = rank(node, l), to = rank(node + 1, l);
        OpId prev = kNoOp;
        for (uint32_t j = 0; j < segs_; ++j) {
          const size_t lane = q * segs_ + j;
          const OpId kernel =
              g_ >= 2 ? s.add_kernel(KernelKind::kDecodeAccumulateEncode, at, chunk(q, j), msg_[lane], (u + 1) * g_,
                                     {arrived_[lane], junction(node, l, m, j)})
                      : s.add_kernel(KernelKind::kDecodeAccumulateEncode, at, chunk(q, j), msg_[lane], u + 1,
                                     {arrived_[lane]});
          msg_[lane] = s.message(kernel);
          prev = arrived_[lane] = detail::send_after(s, at, to, msg_[lane], kernel, prev);
        }
      }
    }
  }

  void emit_final_reduce(Schedule& s) {
    for (uint32_t l = 0; l < g_; ++l) {
      for (uint32_t m = 0; m < nodes_; ++m) {
        const uint32_t q = piece(l, m);
        for (uint32_t j = 0; j < segs_; ++j) {
          const size_t lane = q * segs_ + j;
          reduced_[lane] = g_ >= 2 ? s.add_kernel(KernelKind::kDecodeAccumulate, rank(m, l), chunk(q, j), msg_[lane],
                                                  n_, {arrived_[lane], junction(m, l, m, j)})
                                   : s.add_kernel(KernelKind::kDecodeAccumulate, rank(m, l), chunk(q, j), msg_[lane],
                                                  n_, {arrived_[lane]});
        }
      }
    }
  }

  // All-gather step a: inter phase for a <= N−1 (piece (l, m) reaches node m+a), intra phase for
  // a >= N−1 (hop v = a − (N−1): local l+v of every node forwards part l's N messages to l+v+1).
  void emit_gather_step(Schedule& s, uint32_t a) {
    const uint32_t summed = op_ == CollectiveOp::kAllReduce ? n_ : 1;
    if (a < nodes_) {
      for (uint32_t q = 0; q < n_; ++q) {
        const uint32_t l = q / nodes_, m = q % nodes_;
        for (uint32_t j = 0; j < segs_; ++j) {
          const size_t lane = q * segs_ + j;
          if (a == 0) {
            const OpId enc =
                op_ == CollectiveOp::kAllReduce
                    ? s.add_kernel(KernelKind::kEncode, rank(m, l), chunk(q, j), MessageRef{}, summed, {reduced_[lane]})
                    : s.add_kernel(KernelKind::kEncode, rank(m, l), chunk(q, j), MessageRef{}, summed, {});
            msg_[lane] = s.message(enc);
            s.add_kernel(KernelKind::kDecode, rank(m, l), chunk(q, j), msg_[lane], summed, {enc});
          } else {
            s.add_kernel(KernelKind::kDecode, rank(m + a, l), chunk(q, j), msg_[lane], summed,
                         {inter_arrival(a - 1, q, j)});
          }
        }
      }
      if (a + 1 < nodes_) {
        // One run of n·segments transfers in (q, j) order: inter_arrival() relies on it.
        inter_first_[a] = s.id_end();
        for (uint32_t q = 0; q < n_; ++q) {
          const uint32_t l = q / nodes_, m = q % nodes_;
          OpId prev = kNoOp;
          for (uint32_t j = 0; j < segs_; ++j) {
            const OpId ready = a == 0 ? msg_[q * segs_ + j].id : inter_arrival(a - 1, q, j);
            prev = detail::send_after(s, rank(m + a, l), rank(m + a + 1, l), msg_[q * segs_ + j], ready, prev);
          }
        }
      }
    }
    if (a + 1 < nodes_) return;
    const uint32_t v = a - (nodes_ - 1);
    const uint32_t run = nodes_ * segs_;  // transfers per lane and intra hop
    // Lane (i, l) carries part l's pieces in arrival order at node i, latest first: u = N−1 .. 0,
    // where piece (l, m) reached node i = m + u at all-gather step u.
    const auto piece_at = [&](uint32_t i, uint32_t l, uint32_t pos) { return piece(l, (i + pos + 1) % nodes_); };
    if (v >= 1) {
      for (uint32_t i = 0; i < nodes_; ++i)
        for (uint32_t l = 0; l < g_; ++l)
          for (uint32_t pos = 0; pos < nodes_; ++pos)
            for (uint32_t j = 0; j < segs_; ++j) {
              const uint32_t q = piece_at(i, l, pos);
              s.add_kernel(KernelKind::kDecode, rank(i, l + v), chunk(q, j), msg_[q * segs_ + j], summed,
                           {intra_first_ + (i * g_ + l) * run + pos * segs_ + j});
            }
    }
    if (v + 1 >= g_) return;
    // Lane (i, l) sends one contiguous run of N·segments transfers per hop (the decodes above rely
    // on it). At hop 0 a piece leaves once it is at local l (its inter arrival, or the owner's encode)
    // and once the inter ring has delivered the node's last piece (u = N−1, same segment): the
    // intra-node all-gather follows the inter-node one, which also anchors older pieces to the
    // previous step.
    const OpId first = s.id_end();
    for (uint32_t i = 0; i < nodes_; ++i) {
      for (uint32_t l = 0; l < g_; ++l) {
        for (uint32_t pos = 0; pos < nodes_; ++pos) {
          const uint32_t q = piece_at(i, l, pos), u = nodes_ - 1 - pos;
          OpId prev = kNoOp;
          for (uint32_t j = 0; j < segs_; ++j) {
            const MessageRef msg = msg_[q * segs_ + j];
            const uint32_t from = rank(i, l + v), to = rank(i, l + v + 1);
            if (v >= 1) {
              prev = detail::send_after(s, from, to, msg, intra_first_ + (i * g_ + l) * run + pos * segs_ + j, prev);
            } else if (u + 1 == nodes_) {
              prev = detail::send_after(s, from, to, msg, u == 0 ? msg.id : inter_arrival(u - 1, q, j), prev);
            } else {
              const OpId ready = u == 0 ? msg.id : inter_arrival(u - 1, q, j);  // u = 0: the node's own piece
              const OpId last = inter_arrival(nodes_ - 2, piece_at(i, l, 0), j);
              prev = prev == kNoOp ? s.add_transfer(from, to, msg, {ready, last})
                                   : s.add_transfer(from, to, msg, {ready, last, prev});
            }
          }
        }
      }
    }
    intra_first_ = first;
  }

  /// The inter all-gather transfer of all-gather step a carrying piece q, segment j.
  OpId inter_arrival(uint32_t a, uint32_t q, uint32_t j) const { return inter_first_[a] + q * segs_ + j; }


  CollectiveOp op_;
  uint32_t n_;
  uint32_t g_;      ///< G: ranks per node
  uint32_t nodes_;  ///< N
  uint32_t segs_;
  uint64_t elements_;
  CollectiveOptions options_;
  std::vector<OpId> lane_first_;      ///< [i·G + l]: first op of the lane's latest intra reduce-scatter hop
  std::vector<OpId> junction_first_;  ///< [i·G + l]: first of the lane's N·segments junction kernels
  std::vector<MessageRef> msg_;       ///< [q·segs + j]: inter reduce-scatter message, then all-gather message
  std::vector<OpId> arrived_;         ///< [q·segs + j]: transfer that delivered the inter message
  std::vector<OpId> reduced_;         ///< [q·segs + j]: the owner's final decode-accumulate
  std::vector<OpId> inter_first_;     ///< [a]: first inter all-gather transfer of all-gather step a
  OpId intra_first_ = kNoOp;          ///< first intra all-gather transfer of the previous step
  uint32_t step_ = 0;
};

/// Transfers of make_hierarchical_ring, per phase and segment: the n pieces make G − 1 intra-node
/// hops on each of the N nodes and N − 1 inter-node hops, N(G − 1) + N − 1 = n − 1 hops each, as
/// in the flat ring.
uint64_t hierarchical_ring_transfers(CollectiveOp op, uint32_t n, const CollectiveOptions& o) {
  return detail::saturating_product({detail::phase_count(op), n, o.segments, n - 1u});
}

}  // namespace

std::unique_ptr<ScheduleGenerator> make_hierarchical_ring(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                          const CollectiveOptions& options) {
  return std::make_unique<HierarchicalRingGenerator>(op, ranks, elements, options);
}

namespace detail {

void register_hierarchical_ring(std::vector<CollectiveInfo>& out) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const std::string what =
        op == CollectiveOp::kAllReduce       ? "intra-node ring reduce-scatter, inter-node ring all-reduce of each 1/G "
                                               "part, intra-node ring all-gather"
        : op == CollectiveOp::kReduceScatter ? "intra-node ring then inter-node ring, (G-1)+(N-1) hops"
                                             : "inter-node ring then intra-node ring, messages forwarded unchanged";
    out.push_back(CollectiveInfo{
        op, "hierarchical_ring", "two-level ring over nodes of gpus_per_node ranks; " + what +
            (op == CollectiveOp::kAllGather ? "" : "; fused decode-accumulate-encode at intermediate hops"),
        [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) -> Status {
          if (o.gpus_per_node < 1) return invalid_argument("hierarchical_ring needs gpus_per_node >= 1, got 0");
          if (ranks % o.gpus_per_node != 0)
            return invalid_argument(fmt::format(
                "hierarchical_ring needs ranks divisible by gpus_per_node={}, got {} ranks", o.gpus_per_node, ranks));
          return check_common(ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
          return make_hierarchical_ring(op, ranks, elements, o);
        },
        [op](uint32_t ranks, uint64_t, const CollectiveOptions& o) {
          return hierarchical_ring_transfers(op, ranks, o);
        }});
  }
}

}  // namespace detail
}  // namespace ccsim::topo
