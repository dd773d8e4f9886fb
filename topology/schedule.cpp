#include "topology/schedule.hpp"

#include "sim/base/check.hpp"

namespace ccsim::topo {

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::kEncode: return "encode";
    case KernelKind::kDecode: return "decode";
    case KernelKind::kDecodeAccumulate: return "decode_accumulate";
    case KernelKind::kDecodeAccumulateEncode: return "decode_accumulate_encode";
    case KernelKind::kPlanLocal: return "plan_local";
    case KernelKind::kPrepare: return "prepare";
    case KernelKind::kFinish: return "finish";
  }
  return "?";
}

std::string_view phase_kind_name(PhaseKind kind) {
  switch (kind) {
    case PhaseKind::kPlanLocal: return "plan_local";
    case PhaseKind::kMetadata: return "metadata";
    case PhaseKind::kPrepare: return "prepare";
    case PhaseKind::kCollective: return "collective";
    case PhaseKind::kFinish: return "finish";
  }
  return "?";
}

std::string_view collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "allreduce";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllGather: return "allgather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kAllToAll: return "alltoall";
  }
  return "?";
}

Schedule::Schedule(std::string name, CollectiveOp operation, uint32_t num_ranks, uint64_t elements)
    : name_(std::move(name)), operation_(operation), num_ranks_(num_ranks), elements_(elements) {}

void Schedule::append_deps(Op& op, OpId id, std::span<const OpId> deps) {
  op.deps_begin = deps_base_ + deps_.size();
  for (OpId d : deps) {
    CCSIM_CHECK(d < id, "dependency {} of op {} is not earlier", d, id);
    deps_.push_back(d);
  }
  op.num_deps = static_cast<uint32_t>(deps.size());
}

void Schedule::append_bundle(Op& op, std::span<const MessageRef> bundle) {
  op.bundle_begin = bundles_base_ + bundles_.size();
  op.bundle = bundle.size() > 1 ? static_cast<uint32_t>(bundle.size()) : 0;
  if (op.bundle > 1) bundles_.insert(bundles_.end(), bundle.begin(), bundle.end());
}

uint32_t Schedule::add_chunk(uint64_t offset, uint64_t count) {
  CCSIM_CHECK(offset + count <= elements_, "chunk [{}, +{}) outside {} elements", offset, count, elements_);
  chunks_.push_back(Chunk{offset, count});
  return static_cast<uint32_t>(chunks_.size() - 1);
}

OpId Schedule::add_kernel(KernelKind kind, uint32_t rank, uint32_t chunk, MessageRef consumed, uint32_t summed,
                          std::span<const OpId> deps) {
  const OpId id = id_end();
  CCSIM_CHECK(rank < num_ranks_ && chunk < chunks_.size(), "kernel on rank {} chunk {}", rank, chunk);
  CCSIM_CHECK(consumes_message(kind) == (consumed.id != kNoOp), "kernel {} message {}", kernel_kind_name(kind),
              consumed.id);
  CCSIM_CHECK(consumed.id == kNoOp || consumed.id < id, "kernel {} consumes a later message {}", id, consumed.id);
  CCSIM_CHECK(consumed.id == kNoOp || chunks_[consumed.chunk].count == chunks_[chunk].count,
              "kernel {} decodes a message of {} elements into a chunk of {}", id, chunks_[consumed.chunk].count,
              chunks_[chunk].count);
  Op op;
  op.kind = OpKind::kKernel;
  op.kernel = kind;
  op.rank = rank;
  op.chunk = chunk;
  op.message = consumed.id;
  op.summed = summed;
  op.in_summed = consumed.id == kNoOp ? 0 : consumed.summed;
  append_deps(op, id, deps);
  append_bundle(op, {});
  ops_.push_back(op);
  return id;
}

OpId Schedule::add_transfer(uint32_t src, uint32_t dst, MessageRef message, std::span<const OpId> deps) {
  return add_transfer(src, dst, std::span<const MessageRef>(&message, 1), deps);
}

OpId Schedule::add_transfer(uint32_t src, uint32_t dst, std::span<const MessageRef> bundle,
                            std::span<const OpId> deps) {
  const OpId id = id_end();
  CCSIM_CHECK(src < num_ranks_ && dst < num_ranks_ && src != dst, "transfer {}->{}", src, dst);
  CCSIM_CHECK(!bundle.empty(), "transfer {} carries no message", id);
  for (const MessageRef& m : bundle)
    CCSIM_CHECK(m.id < id && m.chunk < chunks_.size(), "transfer {} of message {}", id, m.id);
  Op op;
  op.kind = OpKind::kTransfer;
  op.rank = src;
  op.peer = dst;
  op.chunk = bundle[0].chunk;
  op.message = bundle[0].id;
  op.summed = bundle[0].summed;
  append_deps(op, id, deps);
  append_bundle(op, bundle);
  ops_.push_back(op);
  return id;
}

OpId Schedule::add_decodes(uint32_t rank, std::span<const MessageRef> bundle, std::span<const OpId> deps) {
  const OpId id = id_end();
  CCSIM_CHECK(rank < num_ranks_ && !bundle.empty(), "decodes on rank {} of {} messages", rank, bundle.size());
  for (const MessageRef& m : bundle) {
    CCSIM_CHECK(m.id < id && m.chunk < chunks_.size(), "kernel {} decodes message {}", id, m.id);
    CCSIM_CHECK(m.summed == bundle[0].summed, "kernel {} decodes messages of {} and {} contributions", id,
                bundle[0].summed, m.summed);
  }
  Op op;
  op.kind = OpKind::kKernel;
  op.kernel = KernelKind::kDecode;
  op.rank = rank;
  op.chunk = bundle[0].chunk;
  op.message = bundle[0].id;
  op.summed = op.in_summed = bundle[0].summed;
  append_deps(op, id, deps);
  append_bundle(op, bundle);
  ops_.push_back(op);
  return id;
}

OpId Schedule::append_op(const Op& op, std::span<const OpId> deps, std::span<const MessageRef> bundle) {
  const OpId id = id_end();
  CCSIM_CHECK(bundle.size() == (op.bundle > 1 ? op.bundle : 0), "op with bundle {} appended with {} messages",
              op.bundle, bundle.size());
  Op copy = op;
  append_deps(copy, id, deps);
  append_bundle(copy, bundle);
  ops_.push_back(copy);
  return id;
}

MessageRef Schedule::message(OpId id) const {
  CCSIM_CHECK(id >= id_base_ && id < id_end(), "message {} outside the window [{}, {})", id, id_base_, id_end());
  const Op& o = op(id);
  CCSIM_CHECK(o.kind == OpKind::kKernel && produces_message(o.kernel), "op {} produces no message", id);
  return MessageRef{id, o.chunk, o.summed};
}

void Schedule::retire_before(OpId id) {
  CCSIM_CHECK(id >= id_base_ && id <= id_end(), "retire_before({}) outside [{}, {}]", id, id_base_, id_end());
  const size_t drop = id - id_base_;
  // Compact only when the dead prefix is at least half the storage: amortized O(1) per op.
  if (drop == 0 || drop * 2 < ops_.size()) return;
  const bool all = drop == ops_.size();
  const uint64_t deps_drop = all ? deps_.size() : ops_[drop].deps_begin - deps_base_;
  const uint64_t bundles_drop = all ? bundles_.size() : ops_[drop].bundle_begin - bundles_base_;
  ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(drop));
  deps_.erase(deps_.begin(), deps_.begin() + static_cast<std::ptrdiff_t>(deps_drop));
  bundles_.erase(bundles_.begin(), bundles_.begin() + static_cast<std::ptrdiff_t>(bundles_drop));
  id_base_ = id;
  deps_base_ += deps_drop;
  bundles_base_ += bundles_drop;
}

uint64_t Schedule::wire_bytes() const {
  uint64_t total = 0;
  for (const Op& op : ops_)
    if (op.kind == OpKind::kTransfer) total += op.bytes;
  return total;
}

uint64_t Schedule::op_elements(const Op& op) const {
  if (op.kind == OpKind::kKernel && op.bundle <= 1) return chunks_[op.chunk].count;
  uint64_t total = 0;
  for_each_message(op, [&](const MessageRef& m) { total += chunks_[m.chunk].count; });
  return total;
}

uint64_t Schedule::num_transfers() const {
  uint64_t n = 0;
  for (const Op& op : ops_) n += op.kind == OpKind::kTransfer;
  return n;
}

Schedule materialize(ScheduleGenerator& generator) {
  Schedule s = generator.begin();
  while (generator.next_step(s)) {
  }
  return s;
}

namespace {

class RoundOpsGenerator final : public ScheduleGenerator {
 public:
  RoundOpsGenerator(KernelKind kind, uint32_t ranks, uint64_t elements)
      : kind_(kind), ranks_(ranks), elements_(elements) {}
  Schedule begin() override {
    // The header's operation is nominal: round ops reduce nothing.
    Schedule s(std::string(kernel_kind_name(kind_)), CollectiveOp::kAllReduce, ranks_, elements_);
    s.add_chunk(0, elements_);
    return s;
  }
  bool next_step(Schedule& out) override {
    if (done_) return false;
    for (uint32_t r = 0; r < ranks_; ++r) out.add_kernel(kind_, r, 0, MessageRef{}, 1, {});
    done_ = true;
    return true;
  }

 private:
  KernelKind kind_;
  uint32_t ranks_;
  uint64_t elements_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<ScheduleGenerator> make_round_ops(KernelKind kind, uint32_t ranks, uint64_t elements) {
  CCSIM_CHECK(is_round_op(kind) && ranks > 0, "round ops of kind {} on {} ranks", kernel_kind_name(kind), ranks);
  return std::make_unique<RoundOpsGenerator>(kind, ranks, elements);
}

std::vector<AggregationEdge> aggregation_edges(const Schedule& schedule) {
  CCSIM_CHECK(schedule.id_base() == 0, "aggregation_edges needs a materialized schedule");
  std::vector<AggregationEdge> edges;
  for (OpId id = 0; id < schedule.id_end(); ++id) {
    const Op& op = schedule.op(id);
    if (op.kind != OpKind::kKernel) continue;
    if (op.kernel != KernelKind::kDecodeAccumulate && op.kernel != KernelKind::kDecodeAccumulateEncode) continue;
    const Op& producer = schedule.op(op.message);
    edges.push_back(AggregationEdge{op.chunk, producer.rank, op.rank, op.in_summed, id});
  }
  return edges;
}

std::vector<Chunk> split_chunk(const Chunk& c, uint32_t parts, uint64_t align) {
  CCSIM_CHECK(parts > 0 && align > 0);
  const uint64_t units = (c.count + align - 1) / align;
  std::vector<Chunk> out(parts);
  uint64_t begin = 0;
  for (uint32_t p = 0; p < parts; ++p) {
    const uint64_t end_units = units * (p + 1) / parts;
    const uint64_t end = std::min(c.count, end_units * align);
    out[p] = Chunk{c.offset + begin, end - begin};
    begin = end;
  }
  return out;
}

std::vector<Chunk> split_even(uint64_t elements, uint32_t parts, uint64_t align) {
  return split_chunk(Chunk{0, elements}, parts, align);
}

}  // namespace ccsim::topo
