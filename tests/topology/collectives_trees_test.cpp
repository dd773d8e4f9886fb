// Structural properties of the tree-shaped collective schedules (ring, semi-loop, butterfly,
// hierarchical ring): per-element aggregation trees (depth, in-arborescence, `summed` = subtree
// size), the generator step contract, closed-form step and op counts, a contribution-set replay that
// also checks every message is at its rank and every buffer conflict is ordered by the DAG, and
// input errors for unsupported shapes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "topology/collectives/collectives.hpp"

namespace ccsim::topo {
namespace {

/// A materialized schedule plus the first op id of every generator step.
struct Generated {
  Schedule schedule;
  std::vector<OpId> step_first;
};

CollectiveOptions options_with(uint32_t gpus_per_node, uint32_t segments, uint64_t align) {
  CollectiveOptions o;
  o.gpus_per_node = gpus_per_node;
  o.segments = segments;
  o.align = align;
  return o;
}

const CollectiveInfo& info(CollectiveOp op, const std::string& algorithm) {
  auto found = find_collective(std::string(collective_op_name(op)), algorithm);
  // gtest reports an exception as a failure of the running test.
  if (!found.ok()) throw std::runtime_error(found.status().message());
  return *found.value();
}

Generated generate(CollectiveOp op, const std::string& algorithm, uint32_t n, uint64_t elements,
                   const CollectiveOptions& o) {
  const CollectiveInfo& c = info(op, algorithm);
  const Status st = c.check(n, elements, o);
  EXPECT_TRUE(st.ok()) << st.message();
  auto gen = c.make(n, elements, o);
  Generated g{gen->begin(), {}};
  for (OpId first = g.schedule.id_end(); gen->next_step(g.schedule); first = g.schedule.id_end())
    g.step_first.push_back(first);
  return g;
}

/// Aggregation hops of one chunk's tree, by algorithm.
uint32_t expected_depth(const std::string& algorithm, uint32_t n, uint32_t g) {
  if (algorithm == "semi_loop") return n / 2;
  if (algorithm == "butterfly") return static_cast<uint32_t>(std::countr_zero(n));
  if (algorithm == "hierarchical_ring") return (g - 1) + (n / g - 1);
  return n - 1;  // ring, ring_bidir
}

/// Generator steps: receiving kernels live in the step after their transfer, so a phase of h hops
/// takes h + 1 steps and the all-reduce's all-gather starts in the reduce-scatter's last step.
uint32_t expected_steps(CollectiveOp op, const std::string& algorithm, uint32_t n, uint32_t g) {
  const uint32_t hops = expected_depth(algorithm, n, g);
  return op == CollectiveOp::kAllReduce ? 2 * hops + 1 : hops + 1;
}

/// The runner's contract: an op of step k > 0 depends on an op of step k − 1, directly or through
/// an op of its own step.
::testing::AssertionResult anchored(const Generated& g) {
  const Schedule& s = g.schedule;
  std::vector<uint8_t> ok(s.id_end(), 0);
  for (size_t k = 0; k < g.step_first.size(); ++k) {
    const OpId first = g.step_first[k], end = k + 1 < g.step_first.size() ? g.step_first[k + 1] : s.id_end();
    if (first == end) return ::testing::AssertionFailure() << "step " << k << " is empty";
    for (OpId id = first; id < end; ++id) {
      if (k == 0) {
        ok[id] = 1;
        continue;
      }
      const OpId prev_first = g.step_first[k - 1];
      for (OpId d : s.deps(s.op(id)))
        if ((d >= prev_first && d < first) || (d >= first && ok[d])) ok[id] = 1;
      if (!ok[id]) return ::testing::AssertionFailure() << "op " << id << " of step " << k << " is not anchored";
    }
  }
  return ::testing::AssertionSuccess();
}

/// The aggregation tree of one element: every rank but the root has exactly one outgoing edge, the
/// edges lead to the root without cycles, and each edge's `summed` is the size of its sender's
/// subtree (so every rank contributes exactly once). Returns the depth through `depth`.
::testing::AssertionResult element_tree(const Schedule& s, const std::vector<AggregationEdge>& edges, uint64_t e,
                                        uint32_t& depth) {
  const uint32_t n = s.num_ranks();
  std::vector<std::vector<AggregationEdge>> out(n);
  for (const AggregationEdge& edge : edges) {
    const Chunk& c = s.chunks()[edge.chunk];
    if (e >= c.offset && e < c.offset + c.count) out[edge.from].push_back(edge);
  }
  uint32_t root = n;
  for (uint32_t r = 0; r < n; ++r) {
    if (out[r].size() > 1) return ::testing::AssertionFailure() << "rank " << r << " sends element " << e << " twice";
    if (out[r].empty()) {
      if (root != n) return ::testing::AssertionFailure() << "element " << e << " has roots " << root << " and " << r;
      root = r;
    }
  }
  if (root == n) return ::testing::AssertionFailure() << "element " << e << " has no root (cycle)";
  if (s.operation() == CollectiveOp::kReduceScatter) {
    const Chunk& mine = s.shards()[root];
    if (e < mine.offset || e >= mine.offset + mine.count)
      return ::testing::AssertionFailure() << "element " << e << " ends at rank " << root << ", not its owner";
  }
  std::vector<uint32_t> subtree(n, 0);
  depth = 0;
  for (uint32_t r = 0; r < n; ++r) {
    uint32_t at = r, hops = 0;
    ++subtree[at];
    while (at != root) {
      if (++hops > n) return ::testing::AssertionFailure() << "element " << e << ": cycle through rank " << r;
      at = out[at][0].to;
      ++subtree[at];
    }
    depth = std::max(depth, hops);
  }
  for (uint32_t r = 0; r < n; ++r) {
    if (r != root && out[r][0].summed != subtree[r])
      return ::testing::AssertionFailure() << "element " << e << ": rank " << r << " sends summed "
                                           << out[r][0].summed << " for a subtree of " << subtree[r];
  }
  return ::testing::AssertionSuccess();
}

/// Replays a materialized schedule on contribution sets (bit r = rank r's value, n <= 64): encoders
/// and decoders must report `summed` = the set size, a decode-accumulate must add a disjoint set
/// (nobody counted twice), every message a kernel decodes or a transfer forwards must have reached
/// that rank through an ancestor op, and two kernels of a rank touching a common element (one of
/// them writing) must be ordered by the DAG. Finally every rank must hold what the operation
/// promises (all-reduce: everything; reduce-scatter: its shard reduced; all-gather: every shard).
::testing::AssertionResult replay_contributions(const Schedule& s) {
  const uint32_t n = s.num_ranks();
  const uint64_t elements = s.elements();
  const OpId ops = s.id_end();
  const uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
  const CollectiveOp operation = s.operation();
  auto owner_of = [&](uint64_t e) {
    for (uint32_t r = 0; r < n; ++r)
      if (e >= s.shards()[r].offset && e < s.shards()[r].offset + s.shards()[r].count) return r;
    return n;
  };
  // Ancestor bitsets.
  const size_t words = (ops + 63) / 64;
  std::vector<uint64_t> anc(size_t{ops} * words, 0);
  auto is_ancestor = [&](OpId a, OpId of) { return (anc[of * words + a / 64] >> (a % 64)) & 1; };
  std::vector<std::vector<OpId>> transfers_of(ops);
  std::vector<std::vector<uint64_t>> acc(n, std::vector<uint64_t>(elements, 0));
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t e = 0; e < elements; ++e)
      acc[r][e] = operation == CollectiveOp::kAllGather ? (owner_of(e) == r ? 1ull << r : 0) : 1ull << r;
  std::vector<std::vector<uint64_t>> messages(ops);
  struct Touch {
    OpId id;
    Chunk chunk;
    bool writes;
  };
  std::vector<std::vector<Touch>> touches(n);
  auto available = [&](OpId msg, uint32_t rank, OpId at) {
    if (s.op(msg).rank == rank && is_ancestor(msg, at)) return true;
    for (OpId t : transfers_of[msg])
      if (s.op(t).peer == rank && is_ancestor(t, at)) return true;
    return false;
  };
  for (OpId id = 0; id < ops; ++id) {
    const Op& op = s.op(id);
    for (OpId d : s.deps(op)) {
      anc[id * words + d / 64] |= 1ull << (d % 64);
      for (size_t w = 0; w < words; ++w) anc[id * words + w] |= anc[d * words + w];
    }
    // (message, chunk) pairs the op carries or decodes; a kernel without a message works on op.chunk.
    std::vector<MessageRef> parts(s.bundle(op).begin(), s.bundle(op).end());
    if (parts.empty()) {
      const bool consumes = op.kind == OpKind::kTransfer || Schedule::consumes_message(op.kernel);
      parts.push_back(MessageRef{consumes ? op.message : kNoOp, op.chunk,
                                 op.kind == OpKind::kTransfer ? op.summed : op.in_summed});
    }
    if (op.kind == OpKind::kTransfer) {
      for (const MessageRef& m : parts) {
        if (!available(m.id, op.rank, id))
          return ::testing::AssertionFailure() << "transfer " << id << " forwards message " << m.id << " that rank "
                                               << op.rank << " does not have";
        if (m.summed != s.op(m.id).summed)
          return ::testing::AssertionFailure() << "transfer " << id << " summed " << m.summed;
        transfers_of[m.id].push_back(id);
      }
      continue;
    }
    const bool writes = op.kernel != KernelKind::kEncode;
    for (const MessageRef& m : parts) {
      const Chunk c = s.chunks()[m.chunk];
      for (const Touch& t : touches[op.rank]) {
        const bool overlap = c.count > 0 && t.chunk.count > 0 && c.offset < t.chunk.offset + t.chunk.count &&
                             t.chunk.offset < c.offset + c.count;
        if (overlap && (writes || t.writes) && !is_ancestor(t.id, id))
          return ::testing::AssertionFailure() << "kernels " << t.id << " and " << id << " on rank " << op.rank
                                               << " touch common elements unordered";
      }
      touches[op.rank].push_back(Touch{id, c, writes});
      std::vector<uint64_t>& a = acc[op.rank];
      if (Schedule::consumes_message(op.kernel)) {
        if (!available(m.id, op.rank, id))
          return ::testing::AssertionFailure() << "kernel " << id << " on rank " << op.rank << " decodes message "
                                               << m.id << " before it arrives";
        const std::vector<uint64_t>& in = messages[m.id];
        for (uint64_t i = 0; i < c.count; ++i) {
          if (static_cast<uint32_t>(std::popcount(in[i])) != m.summed)
            return ::testing::AssertionFailure() << "kernel " << id << " in_summed " << m.summed;
          if (op.kernel == KernelKind::kDecode) {
            a[c.offset + i] = in[i];
          } else {
            if (a[c.offset + i] & in[i])
              return ::testing::AssertionFailure() << "kernel " << id << " counts a contribution twice";
            a[c.offset + i] |= in[i];
          }
        }
      }
      for (uint64_t i = 0; i < c.count; ++i)
        if (static_cast<uint32_t>(std::popcount(a[c.offset + i])) != op.summed)
          return ::testing::AssertionFailure() << "kernel " << id << " (" << kernel_kind_name(op.kernel)
                                               << ") reports summed " << op.summed << " for "
                                               << std::popcount(a[c.offset + i]) << " contributions";
      if (Schedule::produces_message(op.kernel))
        messages[id].assign(a.begin() + static_cast<std::ptrdiff_t>(c.offset),
                            a.begin() + static_cast<std::ptrdiff_t>(c.offset + c.count));
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    for (uint64_t e = 0; e < elements; ++e) {
      uint64_t want = all;
      if (operation == CollectiveOp::kReduceScatter && owner_of(e) != r) continue;
      if (operation == CollectiveOp::kAllGather) want = 1ull << owner_of(e);
      if (acc[r][e] != want)
        return ::testing::AssertionFailure() << "rank " << r << " element " << e << " holds " << acc[r][e]
                                             << ", expected " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

struct Shape {
  std::string algorithm;
  uint32_t n;
  uint32_t g;  ///< gpus_per_node (hierarchical_ring only)
};

std::vector<Shape> tree_shapes() {
  std::vector<Shape> v;
  for (uint32_t n : {2u, 3u, 4u, 5u, 7u, 8u, 16u}) {
    v.push_back({"ring", n, 1});
    v.push_back({"semi_loop", n, 1});
  }
  for (uint32_t n : {2u, 4u, 8u, 16u}) v.push_back({"butterfly", n, 1});
  for (auto [n, g] : {std::pair{4u, 2u}, {6u, 3u}, {6u, 2u}, {8u, 4u}, {12u, 4u}, {16u, 4u}, {5u, 1u}, {4u, 4u}})
    v.push_back({"hierarchical_ring", n, g});
  return v;
}

constexpr CollectiveOp kOps[] = {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather};

TEST(CollectiveTrees, EveryElementHasAnInArborescenceOfTheExpectedDepth) {
  for (const Shape& sh : tree_shapes()) {
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter}) {
      for (uint32_t segments : {1u, 3u}) {
        const uint64_t elements = uint64_t{sh.n} * 12 + 5;  // uneven shards and segments
        SCOPED_TRACE(fmt::format("{} {} n={} G={} segments={}", collective_op_name(op), sh.algorithm, sh.n, sh.g,
                                 segments));
        const Generated g = generate(op, sh.algorithm, sh.n, elements, options_with(sh.g, segments, 1));
        const std::vector<AggregationEdge> edges = aggregation_edges(g.schedule);
        uint32_t max_depth = 0;
        for (uint64_t e = 0; e < elements; ++e) {
          uint32_t depth = 0;
          ASSERT_TRUE(element_tree(g.schedule, edges, e, depth));
          EXPECT_EQ(depth, expected_depth(sh.algorithm, sh.n, sh.g)) << "element " << e;
          max_depth = std::max(max_depth, depth);
        }
        EXPECT_EQ(max_depth, expected_depth(sh.algorithm, sh.n, sh.g));
      }
    }
  }
}

TEST(CollectiveTrees, DepthsMatchTheClosedForms) {
  // The headline numbers, spelled out: 16 ranks (4 nodes of 4 for the hierarchical ring).
  const uint64_t elements = 16 * 8;
  auto depth_of = [&](const std::string& algorithm, uint32_t g) {
    const Generated gen = generate(CollectiveOp::kAllReduce, algorithm, 16, elements, options_with(g, 1, 1));
    const auto edges = aggregation_edges(gen.schedule);
    uint32_t depth = 0;
    EXPECT_TRUE(element_tree(gen.schedule, edges, 0, depth));
    return depth;
  };
  EXPECT_EQ(depth_of("ring", 1), 15u);
  EXPECT_EQ(depth_of("semi_loop", 1), 8u);
  EXPECT_EQ(depth_of("butterfly", 1), 4u);
  EXPECT_EQ(depth_of("hierarchical_ring", 4), 6u);  // (4−1) intra + (4−1) inter
}

TEST(CollectiveTrees, StepCountsMatchTheClosedForms) {
  for (const Shape& sh : tree_shapes()) {
    for (CollectiveOp op : kOps) {
      for (uint32_t segments : {1u, 2u}) {
        SCOPED_TRACE(fmt::format("{} {} n={} G={} segments={}", collective_op_name(op), sh.algorithm, sh.n, sh.g,
                                 segments));
        const Generated g = generate(op, sh.algorithm, sh.n, uint64_t{sh.n} * 10, options_with(sh.g, segments, 2));
        EXPECT_EQ(g.step_first.size(), expected_steps(op, sh.algorithm, sh.n, sh.g));
        EXPECT_TRUE(anchored(g));
      }
    }
  }
}

TEST(CollectiveTrees, ReplayGivesEveryRankItsResultRaceFree) {
  for (const Shape& sh : tree_shapes()) {
    for (CollectiveOp op : kOps) {
      for (auto [segments, align] : {std::pair{1u, uint64_t{1}}, {3u, uint64_t{4}}}) {
        const uint64_t elements = uint64_t{sh.n} * 16 + 3;
        SCOPED_TRACE(fmt::format("{} {} n={} G={} segments={} align={}", collective_op_name(op), sh.algorithm, sh.n,
                                 sh.g, segments, align));
        const Generated g = generate(op, sh.algorithm, sh.n, elements, options_with(sh.g, segments, align));
        EXPECT_TRUE(replay_contributions(g.schedule));
        if (op != CollectiveOp::kAllReduce) {
          ASSERT_EQ(g.schedule.shards().size(), sh.n);
          for (uint32_t r = 0; r < sh.n; ++r) EXPECT_EQ(g.schedule.shards()[r].offset % align, 0u);
        }
        for (const Chunk& c : g.schedule.chunks()) EXPECT_EQ(c.offset % align, 0u);
      }
    }
  }
}

TEST(CollectiveTrees, TinyTensorsLeaveChunksEmptyButStayCorrect) {
  for (const Shape& sh : tree_shapes()) {
    for (CollectiveOp op : kOps) {
      for (uint64_t elements : {uint64_t{0}, uint64_t{1}, uint64_t{sh.n} * 4 - 1}) {
        SCOPED_TRACE(fmt::format("{} {} n={} G={} elements={}", collective_op_name(op), sh.algorithm, sh.n, sh.g,
                                 elements));
        const Generated g = generate(op, sh.algorithm, sh.n, elements, options_with(sh.g, 2, 4));
        EXPECT_EQ(g.step_first.size(), expected_steps(op, sh.algorithm, sh.n, sh.g));
        EXPECT_TRUE(anchored(g));
        EXPECT_TRUE(replay_contributions(g.schedule));
      }
    }
  }
}

TEST(CollectiveTrees, ButterflyOpCountsAreNLogN) {
  for (uint32_t n : {2u, 4u, 8u, 16u, 64u, 256u}) {
    for (uint32_t segments : {1u, 3u}) {
      SCOPED_TRACE(fmt::format("n={} segments={}", n, segments));
      const uint64_t levels = static_cast<uint64_t>(std::countr_zero(n)), N = n, S = segments;
      const Generated rs =
          generate(CollectiveOp::kReduceScatter, "butterfly", n, uint64_t{n} * 64, options_with(1, segments, 1));
      uint64_t enc = 0, da = 0, other = 0;
      for (const Op& op : rs.schedule.ops()) {
        if (op.kind == OpKind::kTransfer) continue;
        if (op.kernel == KernelKind::kEncode) ++enc;
        else if (op.kernel == KernelKind::kDecodeAccumulate) ++da;
        else ++other;
      }
      // One encode, transfer and decode-accumulate per rank, step and segment.
      EXPECT_EQ(rs.schedule.ops().size(), 3 * N * levels * S);
      EXPECT_EQ(rs.schedule.num_transfers(), N * levels * S);
      EXPECT_EQ(enc, N * levels * S);
      EXPECT_EQ(da, N * levels * S);
      EXPECT_EQ(other, 0u);
      // Every reduce-scatter transfer of step k crosses distance n / 2^(k+1).
      for (size_t k = 0; k + 1 < rs.step_first.size(); ++k) {
        const OpId end = rs.step_first[k + 1];
        for (OpId id = rs.step_first[k]; id < end; ++id) {
          const Op& op = rs.schedule.op(id);
          if (op.kind == OpKind::kTransfer) {
            EXPECT_EQ(op.rank ^ op.peer, n >> (k + 1)) << "op " << id;
          }
        }
      }
      // The all-gather forwards unchanged messages in bundles: one encode and own decode per shard,
      // then per rank, step and segment one bundled transfer and one bundled decode; n(n−1) messages
      // are delivered and decoded in all.
      const Generated ag =
          generate(CollectiveOp::kAllGather, "butterfly", n, uint64_t{n} * 64, options_with(1, segments, 1));
      EXPECT_EQ(ag.schedule.num_transfers(), N * levels * S);
      EXPECT_EQ(ag.schedule.ops().size(), 2 * N * S + 2 * N * levels * S);
      uint64_t delivered = 0, decoded = 0;
      for (const Op& op : ag.schedule.ops()) {
        uint64_t messages = 0;
        ag.schedule.for_each_message(op, [&](const MessageRef&) { ++messages; });
        if (op.kind == OpKind::kTransfer) {
          delivered += messages;
          // Step a of the all-gather carries a block of 2^a shards.
          EXPECT_TRUE(std::has_single_bit(messages)) << messages;
          EXPECT_EQ(op.rank ^ op.peer, messages);
        } else if (op.kernel == KernelKind::kDecode) {
          decoded += messages;
        }
      }
      EXPECT_EQ(delivered, N * (N - 1) * S);
      EXPECT_EQ(decoded, N * N * S);
    }
  }
}

TEST(CollectiveTrees, SemiLoopMovesOneShardPerLinkDirectionPerStep) {
  for (uint32_t n : {2u, 3u, 4u, 5u, 8u, 9u}) {
    for (CollectiveOp op : kOps) {
      SCOPED_TRACE(fmt::format("{} n={}", collective_op_name(op), n));
      const Generated g = generate(op, "semi_loop", n, uint64_t{n} * 8, options_with(1, 1, 1));
      for (size_t k = 0; k < g.step_first.size(); ++k) {
        const OpId end = k + 1 < g.step_first.size() ? g.step_first[k + 1] : g.schedule.id_end();
        std::vector<uint32_t> load(size_t{n} * n, 0);
        for (OpId id = g.step_first[k]; id < end; ++id) {
          const Op& o = g.schedule.op(id);
          if (o.kind != OpKind::kTransfer) continue;
          EXPECT_TRUE((o.rank + 1) % n == o.peer || (o.peer + 1) % n == o.rank) << "not a ring neighbour";
          EXPECT_EQ(++load[o.rank * n + o.peer], 1u) << "link " << o.rank << "->" << o.peer << " step " << k;
        }
      }
    }
  }
  // EQuARX Fig. 5, n = 4, shard 0: the tree 2->1->0 plus 3->0. The paper sends 3->0 in the first
  // iteration; here the shorter chain starts one step later so that both arrive together.
  const Generated g = generate(CollectiveOp::kReduceScatter, "semi_loop", 4, 16, options_with(1, 1, 1));
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> shard0;  // (step, from, to)
  for (size_t k = 0; k < g.step_first.size(); ++k) {
    const OpId end = k + 1 < g.step_first.size() ? g.step_first[k + 1] : g.schedule.id_end();
    for (OpId id = g.step_first[k]; id < end; ++id) {
      const Op& o = g.schedule.op(id);
      if (o.kind == OpKind::kTransfer && g.schedule.chunks()[o.chunk].offset == 0)
        shard0.emplace_back(static_cast<uint32_t>(k), o.rank, o.peer);
    }
  }
  std::sort(shard0.begin(), shard0.end());
  const std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> want{{0, 2, 1}, {1, 1, 0}, {1, 3, 0}};
  EXPECT_EQ(shard0, want);
}

/// Per step, the sorted (kind, kernel, rank, peer, chunk range, summed, in_summed) of every op.
using Signature = std::tuple<int, int, uint32_t, uint32_t, uint64_t, uint64_t, uint32_t, uint32_t>;
std::vector<std::vector<Signature>> step_signatures(const Generated& g) {
  std::vector<std::vector<Signature>> steps;
  for (size_t k = 0; k < g.step_first.size(); ++k) {
    const OpId end = k + 1 < g.step_first.size() ? g.step_first[k + 1] : g.schedule.id_end();
    std::vector<Signature> v;
    for (OpId id = g.step_first[k]; id < end; ++id) {
      const Op& o = g.schedule.op(id);
      const Chunk& c = g.schedule.chunks()[o.chunk];
      v.emplace_back(static_cast<int>(o.kind), o.kind == OpKind::kKernel ? static_cast<int>(o.kernel) : -1, o.rank,
                     o.kind == OpKind::kTransfer ? o.peer : 0, c.offset, c.count, o.summed, o.in_summed);
    }
    std::sort(v.begin(), v.end());
    steps.push_back(std::move(v));
  }
  return steps;
}

TEST(CollectiveTrees, HierarchicalRingDegeneratesToTheRing) {
  for (CollectiveOp op : kOps) {
    for (uint32_t n : {2u, 3u, 6u}) {
      SCOPED_TRACE(fmt::format("{} n={}", collective_op_name(op), n));
      const CollectiveOptions one_per_node = options_with(1, 2, 1), one_node = options_with(n, 2, 1);
      const auto ring = step_signatures(generate(op, "ring", n, uint64_t{n} * 6, one_per_node));
      EXPECT_EQ(step_signatures(generate(op, "hierarchical_ring", n, uint64_t{n} * 6, one_per_node)), ring);
      EXPECT_EQ(step_signatures(generate(op, "hierarchical_ring", n, uint64_t{n} * 6, one_node)), ring);
    }
  }
}

TEST(CollectiveTrees, HierarchicalRingKeepsEachPhaseOnItsLinks) {
  // n = 12, G = 4: reduce-scatter steps 0..2 are intra-node, steps 3..5 inter-node (same local index).
  const uint32_t n = 12, g = 4;
  const Generated gen = generate(CollectiveOp::kAllReduce, "hierarchical_ring", n, n * 8, options_with(g, 1, 1));
  ASSERT_EQ(gen.step_first.size(), 2 * (g + n / g) - 3);
  for (size_t k = 0; k < gen.step_first.size(); ++k) {
    const OpId end = k + 1 < gen.step_first.size() ? gen.step_first[k + 1] : gen.schedule.id_end();
    for (OpId id = gen.step_first[k]; id < end; ++id) {
      const Op& o = gen.schedule.op(id);
      if (o.kind != OpKind::kTransfer) continue;
      const bool intra = o.rank / g == o.peer / g;
      const bool inter = o.rank % g == o.peer % g && (o.rank / g + 1) % (n / g) == o.peer / g;
      EXPECT_TRUE(intra || inter) << "op " << id;
      // RS intra 0..G−2, inter G−1..G+N−3; AG inter G+N−2..G+2N−4, intra G+2N−3..
      const bool inter_step = (k >= g - 1 && k <= g + n / g - 3) || (k >= g + n / g - 2 && k <= g + 2 * (n / g) - 4);
      EXPECT_EQ(inter, inter_step) << "op " << id << " step " << k;
      if (intra) {
        EXPECT_EQ((o.rank + 1) % g, o.peer % g) << "intra hops follow the local ring";
      }
    }
  }
}

TEST(CollectiveTrees, UnsupportedShapesAreInputErrors) {
  const CollectiveOptions plain = options_with(1, 1, 1);
  for (CollectiveOp op : kOps) {
    SCOPED_TRACE(collective_op_name(op));
    for (uint32_t n : {0u, 1u, 3u, 6u, 12u}) {
      const Status st = info(op, "butterfly").check(n, 1024, plain);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << n;
      EXPECT_NE(st.message().find("power-of-two"), std::string::npos) << st.message();
    }
    EXPECT_TRUE(info(op, "butterfly").check(8, 1024, plain).ok());
    const Status hier = info(op, "hierarchical_ring").check(12, 1024, options_with(8, 1, 1));
    EXPECT_EQ(hier.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(hier.message().find("gpus_per_node=8"), std::string::npos) << hier.message();
    EXPECT_EQ(info(op, "hierarchical_ring").check(8, 1024, options_with(0, 1, 1)).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(info(op, "hierarchical_ring").check(1, 1024, plain).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(info(op, "hierarchical_ring").check(16, 1024, options_with(8, 1, 1)).ok());
    EXPECT_EQ(info(op, "semi_loop").check(1, 1024, plain).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(info(op, "semi_loop").check(3, 1024, plain).ok());
    for (const std::string algorithm : {"semi_loop", "butterfly", "hierarchical_ring"})
      EXPECT_EQ(info(op, algorithm).check(4, 1024, options_with(1, 0, 1)).code(), StatusCode::kInvalidArgument)
          << algorithm << " with zero segments";
  }
}

TEST(CollectiveTrees, RegisteredWithDescriptions) {
  for (const std::string algorithm : {"semi_loop", "butterfly", "hierarchical_ring"}) {
    for (CollectiveOp op : kOps) {
      const CollectiveInfo& c = info(op, algorithm);
      EXPECT_EQ(c.algorithm, algorithm);
      EXPECT_FALSE(c.description.empty());
      EXPECT_EQ(c.description.find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ccsim::topo
