#pragma once
/// \file
/// A collective lowered to data: a DAG of typed operations that both interpreters execute
/// (shared/DESIGN.md, "one schedule, two interpreters").
///
/// * A kernel op runs on one rank and works on one chunk (an element range) of that rank's fp32
///   buffer. Encoding kernels (`kEncode`, `kDecodeAccumulateEncode`) produce a *message*,
///   identified by the producing op's id; decoding kernels consume the message named in `message`.
/// * A transfer op moves a message from `rank` to `peer`. A message is immutable once produced,
///   so it may be forwarded several times (ring all-gather) without re-encoding.
/// * `summed` counts the ranks whose contributions a message carries, which is what a compressor's
///   wire format may depend on (e.g. THC's integer fields widen with it).
/// * A transfer may carry a *bundle* of messages (one flow, the sum of their wire bytes), and a
///   kDecode kernel may decode a bundle, each message into the chunk it was encoded from. This is
///   how a butterfly all-gather sends its growing block of unchanged shards in one flow per step.
///   for_each_message() visits the messages of any op, bundled or not.
///
/// Ops are stored in a topological order: every dependency of op i has an id smaller than i.
/// The aggregation tree of a chunk is the message chain: follow `message` backwards from any decode
/// to see who added whose partial sum (aggregation_edges() lists it).
///
/// Schedules are produced step by step by a ScheduleGenerator so that the timing interpreter can
/// keep only the steps in flight (memory proportional to the active flows, not to the collective);
/// materialize() produces the whole DAG for the numerics interpreter and for tests. A Schedule is
/// therefore a window [id_base(), id_end()) of the op sequence; retire_before() drops a finished
/// prefix while keeping ids stable.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ccsim::topo {

using OpId = uint32_t;
inline constexpr OpId kNoOp = std::numeric_limits<OpId>::max();

enum class OpKind : uint8_t { kTransfer, kKernel };

/// What a kernel op does to its rank's chunk `acc` (an fp32 buffer).
enum class KernelKind : uint8_t {
  kEncode,                  ///< message = encode(acc)                        (leaf / all-gather source)
  kDecode,                  ///< acc = decode(message)                        (all-gather receive)
  kDecodeAccumulate,        ///< acc += decode(message)                       (last reduce hop)
  kDecodeAccumulateEncode,  ///< acc += decode(message); message' = encode(acc) (fused intermediate hop)
  // Round ops: a compressor's per-rank work around the collective, on the rank's whole tensor (the
  // op's chunk is [0, elements)); no message. Only round-op schedules (make_round_ops) hold them:
  // the timing interpreter charges them like any kernel, while the numerics interpreter runs the
  // compressor's round phases around the collective itself (algorithms/numerics.hpp).
  kPlanLocal,               ///< the rank's statistics for the metadata phase (Compressor::plan_local)
  kPrepare,                 ///< tensor -> the vector the collective reduces (Compressor::prepare)
  kFinish,                  ///< the reduced vector -> the tensor (Compressor::finish)
};
inline constexpr size_t kNumKernelKinds = static_cast<size_t>(KernelKind::kFinish) + 1;
std::string_view kernel_kind_name(KernelKind k);
/// Whether `k` is a round op (kPlanLocal, kPrepare, kFinish).
inline bool is_round_op(KernelKind k) { return k >= KernelKind::kPlanLocal; }

/// The collective operation a schedule implements; it fixes what every rank must end with
/// (see the contract on Schedule::shards()).
enum class CollectiveOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll };
std::string_view collective_op_name(CollectiveOp op);

/// A contiguous slice of the tensor, in elements.
struct Chunk {
  uint64_t offset = 0;
  uint64_t count = 0;
  friend bool operator==(const Chunk&, const Chunk&) = default;
};

/// A message as a builder refers to it: the producing op and what that op encoded.
struct MessageRef {
  OpId id = kNoOp;
  uint32_t chunk = 0;
  uint32_t summed = 0;
};

/// One operation of a schedule.
struct Op {
  OpKind kind = OpKind::kKernel;
  KernelKind kernel = KernelKind::kEncode;  ///< kernels only
  uint32_t rank = 0;        ///< kernel: executing rank; transfer: sender
  uint32_t peer = 0;        ///< transfer: receiver
  uint32_t chunk = 0;       ///< index into Schedule::chunks
  OpId message = kNoOp;     ///< transfer: message carried; decoding kernel: message consumed
  uint32_t summed = 1;      ///< kernels: contributions in the accumulator after the op (= in the message
                            ///< produced, for encoders); transfers: contributions in the message carried
  uint32_t in_summed = 0;   ///< decoding kernels: contributions in the consumed message
  uint32_t num_deps = 0;    ///< dependencies are deps_pool[deps_begin, deps_begin + num_deps)
  uint64_t deps_begin = 0;
  uint64_t bytes = 0;       ///< transfer: bytes on the wire; kernel: bytes of memory traffic (set by binding)
  uint32_t bundle = 0;      ///< > 1: the op carries / decodes Schedule::bundle(op); then `message`, `chunk`,
                            ///< `summed` (and `in_summed`) describe the first message of the bundle
  uint64_t bundle_begin = 0;
};

/// A collective's DAG of ops over `num_ranks` group-local ranks and a tensor of `elements` fp32
/// elements per rank (or a window of it, see the file comment).
class Schedule {
 public:
  Schedule(std::string name, CollectiveOp operation, uint32_t num_ranks, uint64_t elements);

  // ---- header, fixed before the first op ----
  uint32_t add_chunk(uint64_t offset, uint64_t count);
  /// Declares the operation's per-rank regions. kReduceScatter: rank r ends with the sum of
  /// shards[r]. kAllGather: rank r contributes shards[r], every rank ends with all of them.
  /// kAllToAll: shards[i] is block i; rank d ends with rank s's block d in its block s.
  /// kAllReduce and kBroadcast: unused (every rank ends with the whole sum / the root's tensor).
  void set_shards(std::vector<Chunk> shards) { shards_ = std::move(shards); }
  void set_root(uint32_t root) { root_ = root; }

  // ---- ops ----
  /// Adds a kernel op; returns its id (which is also the id of the message it produces, if any).
  /// `consumed` is the decoded message (MessageRef{} for kEncode); `summed` the contributions in
  /// the rank's accumulator after the op, which is also what a produced message carries.
  OpId add_kernel(KernelKind kind, uint32_t rank, uint32_t chunk, MessageRef consumed, uint32_t summed,
                  std::span<const OpId> deps);
  OpId add_kernel(KernelKind kind, uint32_t rank, uint32_t chunk, MessageRef consumed, uint32_t summed,
                  std::initializer_list<OpId> deps) {
    return add_kernel(kind, rank, chunk, consumed, summed, std::span<const OpId>(deps.begin(), deps.size()));
  }
  /// Adds a transfer of `message` from `src` to `dst`.
  OpId add_transfer(uint32_t src, uint32_t dst, MessageRef message, std::span<const OpId> deps);
  OpId add_transfer(uint32_t src, uint32_t dst, MessageRef message, std::initializer_list<OpId> deps) {
    return add_transfer(src, dst, message, std::span<const OpId>(deps.begin(), deps.size()));
  }
  /// Adds one transfer carrying every message of `bundle` (at least one) from `src` to `dst`.
  OpId add_transfer(uint32_t src, uint32_t dst, std::span<const MessageRef> bundle, std::span<const OpId> deps);
  /// Adds one kDecode kernel on `rank` that decodes every message of `bundle` (at least one, all with
  /// the same `summed`) into the chunk it was encoded from.
  OpId add_decodes(uint32_t rank, std::span<const MessageRef> bundle, std::span<const OpId> deps);
  /// Appends a copy of `op` (bytes included) with dependencies `deps` and, for a bundled op, its
  /// messages `bundle`; for replaying a schedule.
  OpId append_op(const Op& op, std::span<const OpId> deps, std::span<const MessageRef> bundle = {});
  /// The message produced by op `id`. REQUIRES: id is in the window and produces a message.
  MessageRef message(OpId id) const;

  const std::string& name() const { return name_; }
  CollectiveOp operation() const { return operation_; }
  uint32_t num_ranks() const { return num_ranks_; }
  uint64_t elements() const { return elements_; }
  uint32_t root() const { return root_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<Chunk>& shards() const { return shards_; }

  /// First op id in the window (0 unless a prefix was retired) and one past the last.
  OpId id_base() const { return id_base_; }
  OpId id_end() const { return id_base_ + static_cast<OpId>(ops_.size()); }
  /// Ops of the window, ops()[i] has id id_base() + i.
  const std::vector<Op>& ops() const { return ops_; }
  std::vector<Op>& mutable_ops() { return ops_; }
  const Op& op(OpId id) const { return ops_[id - id_base_]; }
  Op& mutable_op(OpId id) { return ops_[id - id_base_]; }
  std::span<const OpId> deps(const Op& op) const { return {deps_.data() + (op.deps_begin - deps_base_), op.num_deps}; }
  /// The messages of a bundled op (empty unless op.bundle > 1).
  std::span<const MessageRef> bundle(const Op& op) const {
    return op.bundle > 1 ? std::span<const MessageRef>(bundles_.data() + (op.bundle_begin - bundles_base_), op.bundle)
                         : std::span<const MessageRef>();
  }
  /// Calls f(MessageRef) for every message `op` carries (transfer) or consumes (decoding kernel),
  /// bundled or not; nothing for kEncode. For a kernel, the MessageRef's `chunk` is the chunk the
  /// message is decoded into and `summed` the contributions it carries.
  template <class F>
  void for_each_message(const Op& op, F&& f) const {
    if (op.bundle > 1) {
      for (const MessageRef& m : bundle(op)) f(m);
    } else if (op.kind == OpKind::kTransfer) {
      f(MessageRef{op.message, op.chunk, op.summed});
    } else if (consumes_message(op.kernel)) {
      f(MessageRef{op.message, op.chunk, op.in_summed});
    }
  }
  /// Elements of the messages a transfer carries, or of the chunk(s) a kernel works on.
  uint64_t op_elements(const Op& op) const;
  /// Drops ops with id < `id` (they must not be referenced again). Amortized O(1) per op.
  void retire_before(OpId id);

  /// Whether `k` produces a message.
  static bool produces_message(KernelKind k) { return k == KernelKind::kEncode || k == KernelKind::kDecodeAccumulateEncode; }
  /// Whether `k` consumes a message.
  static bool consumes_message(KernelKind k) {
    return k == KernelKind::kDecode || k == KernelKind::kDecodeAccumulate || k == KernelKind::kDecodeAccumulateEncode;
  }

  /// Total bytes over the window's transfers (valid after binding).
  uint64_t wire_bytes() const;
  /// Number of transfers in the window.
  uint64_t num_transfers() const;

 private:
  void append_deps(Op& op, OpId id, std::span<const OpId> deps);
  void append_bundle(Op& op, std::span<const MessageRef> bundle);

  std::string name_;
  CollectiveOp operation_;
  uint32_t num_ranks_;
  uint64_t elements_;
  uint32_t root_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<Chunk> shards_;
  OpId id_base_ = 0;
  uint64_t deps_base_ = 0;
  uint64_t bundles_base_ = 0;
  std::vector<Op> ops_;
  std::vector<OpId> deps_;
  std::vector<MessageRef> bundles_;
};

/// Produces a schedule step by step. Contract (checked by the streaming timing interpreter):
/// every op of step k > 0 depends, directly or through ops of its own step, on an op of step
/// k − 1, so no op of step k can become ready before some op of step k − 1 has started.
class ScheduleGenerator {
 public:
  virtual ~ScheduleGenerator() = default;
  /// An empty schedule carrying the header (name, operation, ranks, chunks, shards).
  virtual Schedule begin() = 0;
  /// Appends the next step's ops to `out` (the schedule returned by begin()); returns false, and
  /// appends nothing, when there are no more steps.
  virtual bool next_step(Schedule& out) = 0;
};

/// Runs a generator to the end: the whole DAG.
Schedule materialize(ScheduleGenerator& generator);

/// A one-step schedule of round op `kind` (REQUIRES: is_round_op(kind)): one independent kernel per
/// rank on its whole tensor of `elements` entries (chunk 0 = [0, elements)). The timing interpreter
/// runs it before (kPlanLocal, kPrepare) or after (kFinish) a compressor's collective.
std::unique_ptr<ScheduleGenerator> make_round_ops(KernelKind kind, uint32_t ranks, uint64_t elements);

/// The phases of a compressed collective round, in their order (algorithms/compressor.hpp; the
/// round is lowered in algorithms/compressed_collective.hpp): the ranks' plan_local ops, the
/// metadata all-reduce, their prepare ops, the collective, their finish ops.
enum class PhaseKind : uint8_t { kPlanLocal, kMetadata, kPrepare, kCollective, kFinish };
/// "plan_local", "metadata", "prepare", "collective", "finish".
std::string_view phase_kind_name(PhaseKind kind);
/// Whether a phase is one op per rank on its whole tensor (plan_local, prepare, finish).
inline bool is_round_op_phase(PhaseKind kind) {
  return kind == PhaseKind::kPlanLocal || kind == PhaseKind::kPrepare || kind == PhaseKind::kFinish;
}

/// A phase of a round as data: its schedule, how its ops get their bytes, and whose kernels they
/// are. Both interpreters take it: the timing interpreter charges its kernels from the cost model
/// of (scheme, params).
struct SchedulePhase {
  PhaseKind kind = PhaseKind::kCollective;
  /// A fresh generator of the phase's schedule (call once per concurrent group).
  std::function<std::unique_ptr<ScheduleGenerator>()> make;
  /// Sets `bytes` on the ops [first, end) of a window of the schedule (wire bytes of transfers,
  /// memory traffic of kernels): the binding compressor's exact sizes.
  std::function<void(Schedule&, OpId first, OpId end)> bind;
  std::string scheme;  ///< the binding compressor's name (the metadata all-reduce's: fp32)
  std::string params;  ///< its resolved parameters, compact JSON
};

/// One edge of a chunk's aggregation tree: rank `to` adds the partial sum of `summed`
/// contributions that rank `from` sent (a decode-accumulate kernel fed by a transfer).
struct AggregationEdge {
  uint32_t chunk = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  uint32_t summed = 0;
  OpId op = kNoOp;  ///< the decode-accumulate kernel
};
/// Every aggregation edge of a materialized schedule, in op order.
std::vector<AggregationEdge> aggregation_edges(const Schedule& schedule);

/// Splits `elements` into `parts` contiguous chunks whose boundaries are multiples of `align`
/// (except the end); sizes differ by at most `align`. Some chunks may be empty when
/// elements < parts * align.
std::vector<Chunk> split_even(uint64_t elements, uint32_t parts, uint64_t align);
/// Splits `c` the same way into `parts` sub-chunks.
std::vector<Chunk> split_chunk(const Chunk& c, uint32_t parts, uint64_t align);

}  // namespace ccsim::topo
