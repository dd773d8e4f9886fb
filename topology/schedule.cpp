#include "topology/schedule.hpp"

#include "sim/base/check.hpp"

namespace ccsim::topo {

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::kEncode: return "encode";
    case KernelKind::kDecode: return "decode";
    case KernelKind::kDecodeAccumulate: return "decode_accumulate";
    case KernelKind::kDecodeAccumulateEncode: return "decode_accumulate_encode";
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
  ops_.push_back(op);
  return id;
}

OpId Schedule::add_transfer(uint32_t src, uint32_t dst, MessageRef message, std::span<const OpId> deps) {
  const OpId id = id_end();
  CCSIM_CHECK(src < num_ranks_ && dst < num_ranks_ && src != dst, "transfer {}->{}", src, dst);
  CCSIM_CHECK(message.id < id && message.chunk < chunks_.size(), "transfer {} of message {}", id, message.id);
  Op op;
  op.kind = OpKind::kTransfer;
  op.rank = src;
  op.peer = dst;
  op.chunk = message.chunk;
  op.message = message.id;
  op.summed = message.summed;
  append_deps(op, id, deps);
  ops_.push_back(op);
  return id;
}

OpId Schedule::append_op(const Op& op, std::span<const OpId> deps) {
  const OpId id = id_end();
  Op copy = op;
  append_deps(copy, id, deps);
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
  const uint64_t deps_drop = (drop == ops_.size()) ? deps_.size() : ops_[drop].deps_begin - deps_base_;
  ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(drop));
  deps_.erase(deps_.begin(), deps_.begin() + static_cast<std::ptrdiff_t>(deps_drop));
  id_base_ = id;
  deps_base_ += deps_drop;
}

uint64_t Schedule::wire_bytes() const {
  uint64_t total = 0;
  for (const Op& op : ops_)
    if (op.kind == OpKind::kTransfer) total += op.bytes;
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
