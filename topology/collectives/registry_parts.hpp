#pragma once
/// \file
/// Each algorithm file appends its (operation, algorithm) entries; known_collectives() calls these
/// in a fixed order. Internal to topology/collectives.

#include "topology/collectives/collectives.hpp"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

namespace ccsim::topo::detail {

void register_ring(std::vector<CollectiveInfo>& out);               // ring.cpp
void register_semi_loop(std::vector<CollectiveInfo>& out);          // semi_loop.cpp
void register_butterfly(std::vector<CollectiveInfo>& out);          // butterfly.cpp
void register_hierarchical_ring(std::vector<CollectiveInfo>& out);  // hierarchical_ring.cpp
void register_direct(std::vector<CollectiveInfo>& out);             // direct.cpp
void register_two_level(std::vector<CollectiveInfo>& out);          // two_level.cpp
void register_broadcast_ring(std::vector<CollectiveInfo>& out);     // broadcast_ring.cpp

/// Input error unless ranks >= at_least.
Status need_ranks(uint32_t ranks, uint32_t at_least);
/// What every algorithm requires: at least two ranks, segments >= 1, align >= 1.
Status check_common(uint32_t ranks, uint64_t elements, const CollectiveOptions& o);

/// For an all-to-all, an input error unless the elements split into equal blocks over the ranks,
/// each a multiple of `align` (the compressor's block).
Status check_alltoall_blocks(CollectiveOp op, uint32_t ranks, uint64_t elements, uint64_t align);

/// The product of `factors`, or UINT64_MAX where it does not fit: transfer counts (CollectiveInfo::
/// transfers) saturate rather than wrap, so an oversized schedule still reads as oversized.
inline uint64_t saturating_product(std::initializer_list<uint64_t> factors) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t product = 1;
  for (uint64_t f : factors) {
    if (f == 0) return 0;
    product = product > kMax / f ? kMax : product * f;
  }
  return product;
}

/// Reduce-scatter/all-gather phases of `op` in the ring families: 2 for an all-reduce, else 1.
inline uint64_t phase_count(CollectiveOp op) { return op == CollectiveOp::kAllReduce ? 2 : 1; }

/// A transfer of `msg` from `from` to `to` that leaves after op `after` and, unless `prev_segment`
/// is kNoOp, after the previous segment's transfer on the same hop (segments of a message follow
/// each other).
inline OpId send_after(Schedule& s, uint32_t from, uint32_t to, MessageRef msg, OpId after, OpId prev_segment) {
  if (prev_segment == kNoOp) return s.add_transfer(from, to, msg, {after});
  return s.add_transfer(from, to, msg, {after, prev_segment});
}

/// The rank `hops` steps from `from` around a ring of n, clockwise (dir > 0) or counter-clockwise.
inline uint32_t ring_walk(uint32_t n, uint32_t from, int dir, uint32_t hops) {
  const uint64_t h = hops % n;
  return static_cast<uint32_t>(dir > 0 ? (from + h) % n : (from + n - h) % n);
}

/// Step sequencing shared by the reduce-scatter / all-gather families. Each phase makes `hops` hops
/// in hops + 1 steps (the last receiving kernel sits one step after the last send); an all-reduce
/// runs the all-gather's step 0 in the reduce-scatter's last step. Calls reduce(k) and/or
/// gather(k) for `step` and returns true, or returns false when `step` is past the end.
template <class Reduce, class Gather>
bool phased_step(CollectiveOp op, uint32_t hops, uint32_t step, Reduce&& reduce, Gather&& gather) {
  const bool has_reduce = op != CollectiveOp::kAllGather, has_gather = op != CollectiveOp::kReduceScatter;
  const uint32_t gather_first = op == CollectiveOp::kAllReduce ? hops : 0;
  const uint32_t total = has_gather ? gather_first + hops + 1 : hops + 1;
  if (step >= total) return false;
  if (has_reduce && step <= hops) reduce(step);
  if (has_gather && step >= gather_first) gather(step - gather_first);
  return true;
}

}  // namespace ccsim::topo::detail
