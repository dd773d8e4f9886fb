#pragma once
/// \file
/// Collective algorithms: generators of schedules from (group size, tensor size, options)
/// (STYLE rule 8: schedules are data, one algorithm per file, no simulation here).
///
/// Ranks are group-local (0..n−1); the caller maps them to cluster ranks. Every algorithm states
/// each chunk's aggregation tree through its message chain (see schedule.hpp) and declares the
/// per-rank regions its operation defines (Schedule::shards()).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::topo {

/// Options every algorithm understands (each ignores what does not apply to it).
struct CollectiveOptions {
  uint64_t align = 1;          ///< chunk boundaries are multiples of this many elements (compressor block size)
  uint32_t segments = 1;       ///< pipelined segments per chunk: segment j+1 of a hop is sent after segment j,
                               ///< so one segment's (de)compression overlaps the next one's transfer
  uint32_t root = 0;           ///< broadcast: the source rank
  uint32_t gpus_per_node = 1;  ///< hierarchical algorithms: ranks r, r' share a node iff r / G == r' / G
  /// Shard boundaries of the n-way split (n + 1 entries: 0, ..., elements; non-decreasing; inner
  /// ones multiples of `align`); empty: split_even. A compressor whose wire bytes vary along the
  /// tensor sets them so that every shard carries the same bytes (Compressor::shard_cuts).
  /// All-to-all (fixed blocks) and broadcast (no shards) ignore them.
  std::vector<uint64_t> cuts{};
};

/// The n-way shard split an algorithm uses: options.cuts when set, else split_even(elements, parts,
/// options.align). REQUIRES: cuts empty or valid for (parts, elements) (check_cuts).
std::vector<Chunk> shard_split(uint64_t elements, uint32_t parts, const CollectiveOptions& options);
/// Why options.cuts is not a valid split of `elements` into `parts` shards; OK when valid or empty.
Status check_cuts(uint32_t parts, uint64_t elements, const CollectiveOptions& options);

/// A registered (operation, algorithm) pair.
struct CollectiveInfo {
  CollectiveOp operation;
  std::string algorithm;  ///< "ring", "butterfly", ...
  std::string description;
  /// Why (ranks, elements, options) cannot be built, as an input error; OK otherwise.
  std::function<Status(uint32_t, uint64_t, const CollectiveOptions&)> check;
  std::function<std::unique_ptr<ScheduleGenerator>(uint32_t, uint64_t, const CollectiveOptions&)> make;
  /// The exact number of transfer ops (OpKind::kTransfer; a bundled transfer counts once) of the
  /// schedule build(ranks, elements, options) would produce, without building it, so that a
  /// scenario too large to simulate can be refused before it runs. A closed form in O(1) or
  /// O(log ranks) time; exact in uint64 for ranks <= 2^20 and segments <= 2^16, saturating at
  /// UINT64_MAX (never wrapping) beyond. REQUIRES: check(ranks, elements, options) is OK.
  std::function<uint64_t(uint32_t ranks, uint64_t elements, const CollectiveOptions&)> transfers;

  /// The whole schedule. REQUIRES: check(...) is OK.
  Schedule build(uint32_t ranks, uint64_t elements, const CollectiveOptions& options) const;
};

/// Every algorithm this build knows, in a fixed order.
const std::vector<CollectiveInfo>& known_collectives();
/// Looks up an (operation, algorithm) pair; kNotFound lists the valid ones for that operation.
Result<const CollectiveInfo*> find_collective(const std::string& operation, const std::string& algorithm);
/// Parses "allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall".
Result<CollectiveOp> parse_collective_op(const std::string& name);
/// Names of all operations and all algorithms (for the scenario schema).
std::vector<std::string> collective_op_names();
std::vector<std::string> collective_algorithm_names();

// ---- generators, one file each (collectives/<op>_<algorithm>.cpp) ----

/// Ring (collectives/ring.cpp). Rank r owns shard r. Reduce-scatter: the chain of shard r starts
/// at r+1 and walks the ring to r (n−1 hops, fused decode-accumulate-encode at each intermediate
/// rank). All-gather: the owner encodes its shard once and the message is forwarded n−1 hops
/// without re-encoding; the owner decodes its own message too, so every rank ends with identical
/// values. All-reduce = reduce-scatter then all-gather. `bidirectional` splits every shard into two
/// halves sent in opposite directions (EQuARX's full loop with both directions).
std::unique_ptr<ScheduleGenerator> make_ring(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                             const CollectiveOptions& options, bool bidirectional);

/// Convenience used by tests and examples: the whole unidirectional ring all-reduce.
Schedule make_allreduce_ring(uint32_t ranks, uint64_t elements, const CollectiveOptions& options);

/// Semi-loop ring (collectives/semi_loop.cpp; EQuARX §III.C). Rank r owns shard r. Reduce-scatter:
/// two chains per shard meet at the owner, r+H → … → r+1 → r and r−Hb → … → r−1 → r with
/// H = floor(n/2), Hb = ceil(n/2) − 1 (fused decode-accumulate-encode in between; the owner
/// decode-accumulates both); the shorter chain starts later so both arrive at the same step, and
/// every step moves one shard per link direction. Aggregation depth H. All-gather: the owner
/// encodes once and the message is forwarded unchanged H hops along +1 and Hb hops along −1.
/// Steps: reduce-scatter and all-gather H + 1, all-reduce 2H + 1. REQUIRES: ranks >= 2.
std::unique_ptr<ScheduleGenerator> make_semi_loop(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options);

/// Butterfly (collectives/butterfly.cpp; DynamiQ §5.3): recursive-halving reduce-scatter (partner
/// distance n/2, n/4, …, 1; one encode + transfer + decode-accumulate per rank, step and segment on
/// a contiguous slice: 3·n·log2(n)·segments ops) and recursive-doubling all-gather (distance 1, 2,
/// …; each shard encoded once by its owner r and forwarded unchanged: n(n−1)·segments messages in
/// n·log2(n)·segments bundled transfers).
/// Rank r owns shard r; each shard's aggregation tree is binomial with depth log2 n. The forwarded
/// half is re-encoded after a decode-accumulate of the received slice rather than fused (a message
/// decodes only whole). Steps: reduce-scatter and all-gather log2(n) + 1, all-reduce 2·log2(n) + 1.
/// REQUIRES: ranks is a power of two >= 2.
std::unique_ptr<ScheduleGenerator> make_butterfly(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options);

/// Hierarchical ring (collectives/hierarchical_ring.cpp) over N = ranks / G nodes of
/// G = options.gpus_per_node ranks. Piece l·N + m of an n-way split is owned by rank m·G + l.
/// Reduce-scatter: intra-node ring (G−1 hops, local l of each node gets its node's partial of part
/// l), then inter-node ring among the ranks with local index l (N−1 hops, started by a fused hop on
/// node m+1); aggregation depth (G−1) + (N−1). All-gather: inter-node ring, then intra-node ring,
/// messages forwarded unchanged. Steps: reduce-scatter and all-gather G + N − 1, all-reduce
/// 2(G + N) − 3. G = 1 is the ring; N = 1 the intra-node ring. REQUIRES: ranks >= 2, ranks % G == 0.
std::unique_ptr<ScheduleGenerator> make_hierarchical_ring(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                          const CollectiveOptions& options);

/// Direct, single-hop collectives (collectives/direct.cpp): step 0 encodes and sends everything,
/// step 1 decodes. kAllReduce ("p2p", AQGB's peer-to-peer broadcast): every rank encodes its tensor
/// once and sends it to all others; each rank decodes its own message (kDecode, so it uses the same
/// compressed values as everyone) and then decode-accumulates the n−1 received messages in the
/// fixed order r−1, r−2, ... (ranks differ only by float summation order). kAllGather ("p2p"):
/// owner r encodes shard r once and sends it to all others; everyone, owner included, decodes it.
/// kReduceScatter ("direct"): rank s encodes its copy of shard d and sends it to d, which
/// decode-accumulates the n−1 messages onto its own copy. kBroadcast ("p2p"): the root encodes
/// once and sends to every rank; everyone, root included, decodes. kAllToAll ("direct"):
/// shards[b] is block b = [b·E/n, (b+1)·E/n); rank s encodes block d and sends it to d, which
/// decodes it into block s; rank s's own block s is left as is (never compressed). Buffers are
/// in place: the decode into block s waits for the rank's encode of its own block s. Block
/// boundaries are fixed by the operation; options.align applies to segments within a block.
/// Segments split every chunk; segment j+1 of a (sender, receiver) pair is sent after segment j.
/// REQUIRES: ranks >= 2; kBroadcast: options.root < ranks; kAllToAll: elements % ranks == 0 and
/// (elements / ranks) % options.align == 0.
std::unique_ptr<ScheduleGenerator> make_direct(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                               const CollectiveOptions& options);

/// Two-level collectives over ranks / G nodes of G = options.gpus_per_node ranks
/// (collectives/two_level.cpp); rank r is (node r / G, local r % G).
/// kReduceScatter (ZeRO++ qgZ / SDP4Bit TLq): rank (i, j) owns piece j·N + i of an n-way split,
/// so each local peer's pieces form one contiguous range. Intra-node all-to-all of those ranges with
/// decode-accumulate (summed G), one re-encode per outgoing piece, inter-node all-to-all with
/// decode-accumulate (summed N·G). kAllToAll: block d of rank s = (i, j) goes to the local peer
/// (i, j') of d = (i', j') (skipped when j = j'), then across to d (skipped when i = i'); encoded once,
/// forwarded unchanged, decoded only at d; own block left as is; shards[b] = block b (as for
/// make_direct's all-to-all: in place, align applies within blocks).
/// REQUIRES: ranks >= 2, ranks % G == 0; kAllToAll: elements % ranks == 0 and
/// (elements / ranks) % options.align == 0.
std::unique_ptr<ScheduleGenerator> make_two_level(CollectiveOp op, uint32_t ranks, uint64_t elements,
                                                  const CollectiveOptions& options);

/// Pipelined chain broadcast (collectives/broadcast_ring.cpp): root → root+1 → … → root+n−1, each
/// segment encoded once at the root and forwarded unchanged; every rank, root included, decodes it.
/// Step k is hop k; segment j+1 follows segment j on every hop. REQUIRES: ranks >= 2, root < ranks.
std::unique_ptr<ScheduleGenerator> make_broadcast_ring(uint32_t ranks, uint64_t elements,
                                                       const CollectiveOptions& options);

}  // namespace ccsim::topo
