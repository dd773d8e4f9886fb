// Exact-sum property test for every registered collective algorithm (known_collectives()).
//
// An integer interpreter, independent of algorithms/, runs each schedule on int64 buffers with
// distinct inputs: kEncode copies the rank's chunk into a message keyed by the op id, kDecode
// copies a message into the chunk, kDecodeAccumulate adds it, kDecodeAccumulateEncode adds and
// emits the accumulator as a new message. Along the way it checks:
//  * the step contract, streaming the generator as the timing interpreter does (ops of step k > 0
//    anchored on step k−1, no empty step, steps before the previous one retired from the window);
//  * message custody: a transfer's sender and a decoder hold the message, and depend on the op that
//    gave it to them; no message is delivered twice to a rank or left unused;
//  * buffer hazards: every kernel depends (transitively) on the last kernel that wrote the elements
//    it touches, and a writer on every reader since that write (so id order is a valid execution);
//  * `summed` / `in_summed` equal the number of distinct contributions (bitsets), no contribution
//    is added twice;
//  * the final buffers against the operation's semantics (schedule.hpp, Schedule::set_shards).
// Grid: n ∈ {2,3,4,5,8,16}, elements ∈ {1, n−1, 1000, 4099, 64n}, align ∈ {1,4}, segments ∈ {1,3},
// gpus_per_node ∈ {1,2,4} dividing n, root ∈ {0, n−1}.
#include "topology/collectives/collectives.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ccsim::topo {
namespace {

#define EXACT_REQUIRE(cond, ...)                       \
  do {                                                 \
    if (!(cond)) return fmt::format(__VA_ARGS__);      \
  } while (0)

/// Rank r's input element e: distinct for every (r, e), exact in int64 for any sum over 16 ranks.
int64_t input(uint32_t rank, uint64_t e) {
  return static_cast<int64_t>(rank + 1) * 1000003 + static_cast<int64_t>(e) * 7;
}

std::string describe(const Op& op, OpId id) {
  if (op.kind == OpKind::kTransfer)
    return fmt::format("op {} (transfer {}->{} of message {}, chunk {})", id, op.rank, op.peer, op.message, op.chunk);
  return fmt::format("op {} ({} on rank {}, chunk {}, message {})", id, kernel_kind_name(op.kernel), op.rank, op.chunk,
                     op.message == kNoOp ? -1 : static_cast<int64_t>(op.message));
}

/// The whole DAG as streamed out of a generator.
struct Recorded {
  std::vector<Op> ops;
  std::vector<std::vector<OpId>> deps;
  std::vector<std::vector<MessageRef>> bundles;  ///< the messages of bundled ops (empty otherwise)
};

/// Streams `gen` step by step, checking the step contract, and records every op. Before each new
/// step the window is retired up to the previous step, as the timing interpreter may do.
std::string generate(ScheduleGenerator& gen, Schedule& s, Recorded& rec) {
  std::vector<uint8_t> anchored;
  OpId prev_first = s.id_end();
  for (uint32_t step = 0;; ++step) {
    const OpId first = s.id_end();
    if (!gen.next_step(s)) {
      EXACT_REQUIRE(s.id_end() == first, "next_step returned false after appending {} ops", s.id_end() - first);
      break;
    }
    const OpId end = s.id_end();
    EXACT_REQUIRE(end > first, "step {} is empty", step);
    EXACT_REQUIRE(step < 1'000'000, "the generator does not stop");
    anchored.resize(end);
    for (OpId id = first; id < end; ++id) {
      const Op& op = s.op(id);
      const auto deps = s.deps(op);
      bool anchor = step == 0;
      for (OpId d : deps) {
        EXACT_REQUIRE(d < id, "{} depends on a later op {}", describe(op, id), d);
        if (d >= prev_first && d < first) anchor = true;
        if (d >= first && anchored[d]) anchor = true;
      }
      anchored[id] = anchor;
      EXACT_REQUIRE(anchor, "{} of step {} does not depend on step {} (step contract)", describe(op, id), step,
                    step - 1);
      rec.ops.push_back(op);
      rec.deps.emplace_back(deps.begin(), deps.end());
      const auto bundle = s.bundle(op);
      EXACT_REQUIRE(bundle.size() == (op.bundle > 1 ? op.bundle : 0u), "{}: bundle of {} for {} messages",
                    describe(op, id), bundle.size(), op.bundle);
      rec.bundles.emplace_back(bundle.begin(), bundle.end());
    }
    s.retire_before(first);
    prev_first = first;
  }
  return {};
}

/// Checks that `shards` are n disjoint ranges covering [0, elements).
std::string check_partition(const std::vector<Chunk>& shards, uint32_t n, uint64_t elements) {
  EXACT_REQUIRE(shards.size() == n, "{} shards for {} ranks", shards.size(), n);
  std::vector<Chunk> sorted = shards;
  std::sort(sorted.begin(), sorted.end(), [](const Chunk& a, const Chunk& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.count < b.count;
  });
  uint64_t at = 0;
  for (const Chunk& c : sorted) {
    EXACT_REQUIRE(c.offset == at, "shards do not partition [0, {}): a range starts at {}, expected {}", elements,
                  c.offset, at);
    at += c.count;
  }
  EXACT_REQUIRE(at == elements, "shards cover [0, {}), expected [0, {})", at, elements);
  return {};
}

/// Runs one (algorithm, shape) through the integer interpreter; returns the first violation.
std::string run_case(const CollectiveInfo& info, uint32_t n, uint64_t elements, const CollectiveOptions& o) {
  EXACT_REQUIRE(n <= 64, "the contributor bitsets hold 64 ranks");
  auto gen = info.make(n, elements, o);
  Schedule s = gen->begin();
  EXACT_REQUIRE(s.operation() == info.operation, "schedule operation {}, registered as {}",
                collective_op_name(s.operation()), collective_op_name(info.operation));
  EXACT_REQUIRE(s.num_ranks() == n && s.elements() == elements, "schedule header: {} ranks, {} elements",
                s.num_ranks(), s.elements());
  Recorded rec;
  if (std::string err = generate(*gen, s, rec); !err.empty()) return err;
  const std::vector<Chunk>& chunks = s.chunks();
  const std::vector<Chunk>& shards = s.shards();
  const CollectiveOp op_kind = info.operation;
  if (op_kind == CollectiveOp::kReduceScatter || op_kind == CollectiveOp::kAllGather) {
    if (std::string err = check_partition(shards, n, elements); !err.empty()) return err;
  }
  if (op_kind == CollectiveOp::kAllToAll) {
    if (std::string err = check_partition(shards, n, elements); !err.empty()) return err;
    for (const Chunk& c : shards) EXACT_REQUIRE(c.count == shards[0].count, "alltoall blocks of different sizes");
  }
  if (op_kind == CollectiveOp::kBroadcast) EXACT_REQUIRE(s.root() == o.root, "root {}, asked {}", s.root(), o.root);

  const size_t total = static_cast<size_t>(n) * elements;
  std::vector<int64_t> buf(total);
  std::vector<uint64_t> mask(total);
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t e = 0; e < elements; ++e) {
      buf[r * elements + e] = input(r, e);
      mask[r * elements + e] = uint64_t{1} << r;
    }
  std::vector<OpId> last_writer(total, kNoOp);
  std::vector<std::vector<OpId>> readers(total);  // readers since the last write

  const size_t num_ops = rec.ops.size();
  const size_t words = (num_ops + 63) / 64;
  std::vector<uint64_t> anc(num_ops * words, 0);  // anc[id] = transitive dependencies of id
  auto depends_on = [&](OpId id, OpId d) { return (anc[id * words + d / 64] >> (d % 64)) & 1; };

  struct Message {
    std::vector<int64_t> values;
    std::vector<uint64_t> masks;
  };
  std::vector<Message> messages(num_ops);
  struct Custody {
    OpId since = kNoOp;  ///< the op that gave the rank the message (its producer or a transfer)
    bool used = false;
  };
  std::unordered_map<uint64_t, Custody> custody;  // key: message id * 64 + rank
  auto key = [](OpId msg, uint32_t rank) { return static_cast<uint64_t>(msg) * 64 + rank; };

  for (OpId id = 0; id < num_ops; ++id) {
    const Op& op = rec.ops[id];
    for (OpId d : rec.deps[id]) {
      anc[id * words + d / 64] |= uint64_t{1} << (d % 64);
      for (size_t w = 0; w < words; ++w) anc[id * words + w] |= anc[d * words + w];
    }
    EXACT_REQUIRE(op.rank < n, "{}: rank out of range", describe(op, id));
    EXACT_REQUIRE(op.chunk < chunks.size(), "{}: chunk out of range", describe(op, id));
    const bool consumes = op.kind == OpKind::kTransfer || Schedule::consumes_message(op.kernel);
    // The messages the op carries or decodes: (message, chunk it is read into / sent as, summed).
    std::vector<MessageRef> msgs = rec.bundles[id];
    const bool bundled = !msgs.empty();
    if (bundled) {
      EXACT_REQUIRE(op.kind == OpKind::kTransfer || op.kernel == KernelKind::kDecode,
                    "{}: only transfers and decodes take bundles", describe(op, id));
      EXACT_REQUIRE(msgs[0].id == op.message && msgs[0].chunk == op.chunk, "{}: fields differ from the first message",
                    describe(op, id));
    } else if (consumes) {
      msgs.push_back(MessageRef{op.message, op.chunk, op.kind == OpKind::kTransfer ? op.summed : op.in_summed});
    }
    for (const MessageRef& m : msgs) {
      EXACT_REQUIRE(m.id < id, "{}: message {} is not earlier", describe(op, id), m.id);
      EXACT_REQUIRE(m.chunk < chunks.size(), "{}: chunk {} out of range", describe(op, id), m.chunk);
      const Op& producer = rec.ops[m.id];
      EXACT_REQUIRE(producer.kind == OpKind::kKernel && Schedule::produces_message(producer.kernel),
                    "{}: op {} produces no message", describe(op, id), m.id);
      EXACT_REQUIRE(chunks[producer.chunk].count == chunks[m.chunk].count,
                    "{}: message of {} elements into a chunk of {}", describe(op, id), chunks[producer.chunk].count,
                    chunks[m.chunk].count);
      if (op.kind == OpKind::kTransfer || bundled)
        EXACT_REQUIRE(m.chunk == producer.chunk, "{}: chunk {} differs from message {}'s {}", describe(op, id),
                      m.chunk, m.id, producer.chunk);
      auto it = custody.find(key(m.id, op.rank));
      EXACT_REQUIRE(it != custody.end(), "{}: rank {} does not hold message {}", describe(op, id), op.rank, m.id);
      EXACT_REQUIRE(depends_on(id, it->second.since), "{}: does not depend on op {} that gave rank {} message {}",
                    describe(op, id), it->second.since, op.rank, m.id);
      it->second.used = true;
      const uint32_t carried = messages[m.id].masks.empty()
                                   ? producer.summed
                                   : static_cast<uint32_t>(std::popcount(messages[m.id].masks[0]));
      EXACT_REQUIRE(m.summed == producer.summed && m.summed == carried,
                    "{}: summed {} but message {} carries {} contributions", describe(op, id), m.summed, m.id,
                    carried);
    }

    if (op.kind == OpKind::kTransfer) {
      EXACT_REQUIRE(op.peer < n && op.peer != op.rank, "{}: bad peer", describe(op, id));
      for (const MessageRef& m : msgs) {
        auto [it, fresh] = custody.emplace(key(m.id, op.peer), Custody{id, false});
        EXACT_REQUIRE(fresh, "{}: rank {} already holds message {} (since op {})", describe(op, id), op.peer, m.id,
                      it->second.since);
      }
      continue;
    }

    const bool reads = op.kernel != KernelKind::kDecode;
    const bool writes = op.kernel != KernelKind::kEncode;
    // Applies the kernel to chunk c of the rank, decoding `in` (nullptr for kEncode).
    auto apply = [&](const Chunk& c, const Message* in) -> std::string {
      Message out;
      if (Schedule::produces_message(op.kernel)) {
        out.values.resize(c.count);
        out.masks.resize(c.count);
      }
      const uint64_t base = static_cast<uint64_t>(op.rank) * elements + c.offset;
      for (uint64_t i = 0; i < c.count; ++i) {
        const uint64_t x = base + i;
        const OpId w = last_writer[x];
        EXACT_REQUIRE(w == kNoOp || depends_on(id, w), "{}: element {} was last written by {} without a dependency",
                      describe(op, id), c.offset + i, describe(rec.ops[w], w));
        if (writes) {
          for (OpId r : readers[x])
            EXACT_REQUIRE(r == id || depends_on(id, r), "{}: overwrites element {} read by {} without a dependency",
                          describe(op, id), c.offset + i, describe(rec.ops[r], r));
          readers[x].clear();
          last_writer[x] = id;
        } else if (reads) {
          readers[x].push_back(id);
        }
        switch (op.kernel) {
          case KernelKind::kEncode: break;
          case KernelKind::kDecode:
            buf[x] = in->values[i];
            mask[x] = in->masks[i];
            break;
          case KernelKind::kDecodeAccumulate:
          case KernelKind::kDecodeAccumulateEncode:
            EXACT_REQUIRE((mask[x] & in->masks[i]) == 0,
                          "{}: element {} adds contributions {:#x} to an accumulator already holding {:#x}",
                          describe(op, id), c.offset + i, in->masks[i], mask[x]);
            buf[x] += in->values[i];
            mask[x] |= in->masks[i];
            break;
          case KernelKind::kPlanLocal:
          case KernelKind::kPrepare:
          case KernelKind::kFinish:
            EXACT_REQUIRE(false, "{}: a round op in a collective schedule", describe(op, id));
        }
        EXACT_REQUIRE(static_cast<uint32_t>(std::popcount(mask[x])) == op.summed,
                      "{}: summed {} but element {} holds {} contributions ({:#x})", describe(op, id), op.summed,
                      c.offset + i, std::popcount(mask[x]), mask[x]);
        if (!out.values.empty()) {
          out.values[i] = buf[x];
          out.masks[i] = mask[x];
        }
      }
      if (Schedule::produces_message(op.kernel)) {
        messages[id] = std::move(out);
        custody.emplace(key(id, op.rank), Custody{id, false});
      }
      return {};
    };
    if (bundled) {
      for (const MessageRef& m : msgs)
        if (std::string err = apply(chunks[m.chunk], &messages[m.id]); !err.empty()) return err;
    } else if (std::string err = apply(chunks[op.chunk], consumes ? &messages[op.message] : nullptr); !err.empty()) {
      return err;
    }
  }
  for (const auto& [k, cu] : custody)
    EXACT_REQUIRE(cu.used, "message {} reaches rank {} (op {}) but is never used there", k / 64, k % 64, cu.since);

  // Final state against the operation's semantics.
  const uint64_t everyone = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  auto expect = [&](uint32_t rank, uint64_t e, int64_t value, uint64_t contributors) -> std::string {
    const uint64_t x = static_cast<uint64_t>(rank) * elements + e;
    EXACT_REQUIRE(buf[x] == value && mask[x] == contributors,
                  "rank {} element {}: got {} (contributions {:#x}), expected {} ({:#x})", rank, e, buf[x], mask[x],
                  value, contributors);
    return {};
  };
  std::vector<int64_t> sum(elements, 0);
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t e = 0; e < elements; ++e) sum[e] += input(r, e);
  for (uint32_t r = 0; r < n; ++r) {
    std::string err;
    switch (op_kind) {
      case CollectiveOp::kAllReduce:
        for (uint64_t e = 0; e < elements && err.empty(); ++e) err = expect(r, e, sum[e], everyone);
        break;
      case CollectiveOp::kReduceScatter:
        for (uint64_t e = shards[r].offset; e < shards[r].offset + shards[r].count && err.empty(); ++e)
          err = expect(r, e, sum[e], everyone);
        break;
      case CollectiveOp::kAllGather:
        for (uint32_t owner = 0; owner < n; ++owner)
          for (uint64_t e = shards[owner].offset; e < shards[owner].offset + shards[owner].count && err.empty(); ++e)
            err = expect(r, e, input(owner, e), uint64_t{1} << owner);
        break;
      case CollectiveOp::kBroadcast:
        for (uint64_t e = 0; e < elements && err.empty(); ++e)
          err = expect(r, e, input(o.root, e), uint64_t{1} << o.root);
        break;
      case CollectiveOp::kAllToAll:
        // Rank r's block src = rank src's original block r.
        for (uint32_t src = 0; src < n; ++src)
          for (uint64_t k = 0; k < shards[src].count && err.empty(); ++k)
            err = expect(r, shards[src].offset + k, input(src, shards[r].offset + k), uint64_t{1} << src);
        break;
    }
    if (!err.empty()) return err;
  }
  return {};
}

class CollectiveExact : public ::testing::TestWithParam<size_t> {};

TEST_P(CollectiveExact, IntegerInterpreterMatchesSemantics) {
  const CollectiveInfo& info = known_collectives()[GetParam()];
  int failures = 0, ran = 0, rejected = 0;
  for (uint32_t n : {2u, 3u, 4u, 5u, 8u, 16u}) {
    std::vector<uint64_t> sizes = {1, n - 1, 1000, 4096 + 3, 64ull * n};
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (uint64_t elements : sizes)
      for (uint64_t align : {1u, 4u})
        for (uint32_t segments : {1u, 3u})
          for (uint32_t gpus : {1u, 2u, 4u}) {
            if (n % gpus != 0) continue;
            for (uint32_t root : {0u, n - 1}) {
              SCOPED_TRACE(fmt::format("{}/{} n={} elements={} align={} segments={} gpus_per_node={} root={}",
                                       collective_op_name(info.operation), info.algorithm, n, elements, align,
                                       segments, gpus, root));
              CollectiveOptions o;
              o.align = align;
              o.segments = segments;
              o.root = root;
              o.gpus_per_node = gpus;
              const Status st = info.check(n, elements, o);
              // Power-of-two groups (n is a multiple of gpus_per_node here) with equal all-to-all blocks
              // that start on the compressor's blocks are the shapes every algorithm must accept.
              const bool must = std::has_single_bit(n) && (info.operation != CollectiveOp::kAllToAll ||
                                                           (elements % n == 0 && elements / n % align == 0));
              if (!st.ok()) {
                EXPECT_FALSE(must) << "a power-of-two / divisible shape is rejected: " << st.message();
                EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
                EXPECT_FALSE(st.message().empty());
                ++rejected;
                continue;
              }
              ++ran;
              if (const std::string err = run_case(info, n, elements, o); !err.empty()) {
                ADD_FAILURE() << err;
                if (++failures >= 5) return;
              }
            }
          }
  }
  EXPECT_GT(ran, 0) << "every shape was rejected";
  RecordProperty("shapes_run", ran);
  RecordProperty("shapes_rejected", rejected);
}

INSTANTIATE_TEST_SUITE_P(Exact, CollectiveExact, ::testing::Range<size_t>(0, known_collectives().size()),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           const CollectiveInfo& c = known_collectives()[p.param];
                           return fmt::format("{}_{}", collective_op_name(c.operation), c.algorithm);
                         });

// The algorithms of direct.cpp, two_level.cpp and broadcast_ring.cpp are registered, described on
// one line, and reject the shapes they cannot build with an input error.
TEST(CollectiveExactRegistry, DirectTwoLevelAndChainAreRegistered) {
  for (const auto& [op, algorithm] : std::vector<std::pair<std::string, std::string>>{
           {"allreduce", "p2p"},
           {"allgather", "p2p"},
           {"reduce_scatter", "direct"},
           {"broadcast", "p2p"},
           {"alltoall", "direct"},
           {"reduce_scatter", "two_level"},
           {"alltoall", "two_level"},
           {"broadcast", "ring"}}) {
    SCOPED_TRACE(op + "/" + algorithm);
    const auto found = find_collective(op, algorithm);
    ASSERT_TRUE(found.ok()) << found.status().message();
    EXPECT_FALSE(found.value()->description.empty());
    EXPECT_EQ(found.value()->description.find('\n'), std::string::npos);
  }
  for (const CollectiveInfo& c : known_collectives()) {
    SCOPED_TRACE(fmt::format("{}/{}", collective_op_name(c.operation), c.algorithm));
    EXPECT_FALSE(c.description.empty());
    EXPECT_EQ(c.description.find('\n'), std::string::npos);
  }
}

TEST(CollectiveExactRegistry, UnsupportedShapesAreInputErrors) {
  auto check = [](const char* op, const char* algorithm, uint32_t ranks, uint64_t elements,
                  const CollectiveOptions& o) {
    const auto found = find_collective(op, algorithm);
    EXPECT_TRUE(found.ok());
    return found.ok() ? found.value()->check(ranks, elements, o) : found.status();
  };
  CollectiveOptions o;
  o.gpus_per_node = 4;
  Status st = check("reduce_scatter", "two_level", 6, 100, o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("gpus_per_node"), std::string::npos) << st.message();
  EXPECT_EQ(check("alltoall", "two_level", 8, 100, o).code(), StatusCode::kInvalidArgument);  // 100 % 8 != 0
  EXPECT_TRUE(check("alltoall", "two_level", 8, 96, o).ok());
  o.gpus_per_node = 1;
  EXPECT_EQ(check("alltoall", "direct", 3, 100, o).code(), StatusCode::kInvalidArgument);
  // All-to-all blocks are the operation's: each must start on a compressor block (align).
  o.align = 32;
  st = check("alltoall", "direct", 8, 8 * 48, o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("blocks of 48 elements"), std::string::npos) << st.message();
  EXPECT_TRUE(check("alltoall", "direct", 8, 8 * 64, o).ok());
  o.gpus_per_node = 4;
  EXPECT_EQ(check("alltoall", "two_level", 8, 8 * 48, o).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(check("alltoall", "two_level", 8, 8 * 64, o).ok());
  o.gpus_per_node = 1;
  o.align = 1;
  EXPECT_EQ(check("allreduce", "p2p", 1, 100, o).code(), StatusCode::kInvalidArgument);
  o.root = 4;
  EXPECT_EQ(check("broadcast", "p2p", 4, 100, o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(check("broadcast", "ring", 4, 100, o).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(check("broadcast", "ring", 5, 100, o).ok());
  o.segments = 0;
  EXPECT_EQ(check("broadcast", "ring", 5, 100, o).code(), StatusCode::kInvalidArgument);
}

TEST(CollectiveExactRegistry, ShardCutsSetTheShardsOrAreRejected) {
  CollectiveOptions o;
  o.align = 4;
  o.cuts = {0, 8, 40, 100};
  // Every shard-splitting algorithm uses the cuts as its shards (reduce-scatter defines them).
  for (const char* algorithm : {"ring", "semi_loop", "direct"}) {
    const auto found = find_collective("reduce_scatter", algorithm);
    ASSERT_TRUE(found.ok()) << algorithm;
    ASSERT_TRUE(found.value()->check(3, 100, o).ok()) << algorithm;
    const Schedule s = found.value()->build(3, 100, o);
    EXPECT_EQ(s.shards(), (std::vector<Chunk>{{0, 8}, {8, 32}, {40, 60}})) << algorithm;
  }
  const auto ring = find_collective("allreduce", "ring");
  ASSERT_TRUE(ring.ok());
  auto rejected = [&](std::vector<uint64_t> cuts, const char* says) {
    CollectiveOptions bad = o;
    bad.cuts = std::move(cuts);
    const Status st = ring.value()->check(3, 100, bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  rejected({0, 8, 100}, "expected 4 shard boundaries");
  rejected({0, 8, 40, 96}, "from 0 to 100");
  rejected({0, 40, 8, 100}, "below boundary");
  rejected({0, 8, 42, 100}, "multiple of align 4");
}

// Closed forms of the new schedules: transfer counts and step counts.
TEST(CollectiveExactShape, TransferAndStepCounts) {
  CollectiveOptions o;
  o.segments = 2;
  auto count = [&](const char* op, const char* algorithm, uint32_t n, uint64_t elements) {
    const auto found = find_collective(op, algorithm);
    EXPECT_TRUE(found.ok());
    auto gen = found.value()->make(n, elements, o);
    Schedule s = gen->begin();
    uint32_t steps = 0;
    while (gen->next_step(s)) ++steps;
    return std::pair<uint64_t, uint32_t>{s.num_transfers(), steps};
  };
  // Direct: n(n-1) pairs, each segment sent separately, 2 steps.
  EXPECT_EQ(count("allreduce", "p2p", 5, 1000), (std::pair<uint64_t, uint32_t>{5 * 4 * 2, 2}));
  EXPECT_EQ(count("reduce_scatter", "direct", 5, 1000), (std::pair<uint64_t, uint32_t>{5 * 4 * 2, 2}));
  EXPECT_EQ(count("broadcast", "p2p", 5, 1000), (std::pair<uint64_t, uint32_t>{4 * 2, 2}));
  // Chain broadcast: n-1 hops per segment, n steps.
  EXPECT_EQ(count("broadcast", "ring", 5, 1000), (std::pair<uint64_t, uint32_t>{4 * 2, 5}));
  // Two-level over 2 nodes of 4: intra n(G-1), inter n(N-1) messages per segment.
  o.gpus_per_node = 4;
  EXPECT_EQ(count("reduce_scatter", "two_level", 8, 1024), (std::pair<uint64_t, uint32_t>{(8 * 3 + 8 * 1) * 2, 3}));
  // All-to-all relay: a block crosses one hop per level it changes: per source, G-1 local-only
  // blocks (1 hop), N-1 same-local-index blocks (1 hop), (G-1)(N-1) blocks (2 hops).
  EXPECT_EQ(count("alltoall", "two_level", 8, 1024), (std::pair<uint64_t, uint32_t>{8 * (3 + 1 + 2 * 3) * 2, 3}));
}

}  // namespace
}  // namespace ccsim::topo
