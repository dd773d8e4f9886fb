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

void Schedule::append_deps(Op& op, OpId id, std::initializer_list<OpId> deps) {
  op.deps_begin = static_cast<uint32_t>(deps_.size());
  for (OpId d : deps) {
    CCSIM_CHECK(d < id, "dependency {} of op {} is not earlier", d, id);
    deps_.push_back(d);
  }
  op.deps_end = static_cast<uint32_t>(deps_.size());
}

uint32_t Schedule::add_chunk(uint64_t offset, uint64_t count) {
  CCSIM_CHECK(offset + count <= elements_, "chunk [{}, +{}) outside {} elements", offset, count, elements_);
  chunks_.push_back(Chunk{offset, count});
  return static_cast<uint32_t>(chunks_.size() - 1);
}

OpId Schedule::add_kernel(KernelKind kind, uint32_t rank, uint32_t chunk, OpId message, uint32_t summed,
                          std::initializer_list<OpId> deps) {
  const auto id = static_cast<OpId>(ops_.size());
  CCSIM_CHECK(rank < num_ranks_ && chunk < chunks_.size());
  CCSIM_CHECK(consumes_message(kind) == (message != kNoOp), "kernel {} message {}", kernel_kind_name(kind), message);
  CCSIM_CHECK(message == kNoOp || (message < id && produces_message(ops_[message].kernel) && ops_[message].kind == OpKind::kKernel));
  Op op;
  op.kind = OpKind::kKernel;
  op.kernel = kind;
  op.rank = rank;
  op.chunk = chunk;
  op.message = message;
  op.summed = summed;
  append_deps(op, id, deps);
  ops_.push_back(op);
  return id;
}

OpId Schedule::add_transfer(uint32_t src, uint32_t dst, OpId message, std::initializer_list<OpId> deps) {
  const auto id = static_cast<OpId>(ops_.size());
  CCSIM_CHECK(src < num_ranks_ && dst < num_ranks_ && src != dst, "transfer {}->{}", src, dst);
  CCSIM_CHECK(message < id && ops_[message].kind == OpKind::kKernel && produces_message(ops_[message].kernel));
  Op op;
  op.kind = OpKind::kTransfer;
  op.rank = src;
  op.peer = dst;
  op.chunk = ops_[message].chunk;
  op.message = message;
  op.summed = ops_[message].summed;
  append_deps(op, id, deps);
  ops_.push_back(op);
  return id;
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

std::vector<Chunk> split_even(uint64_t elements, uint32_t parts, uint64_t align) {
  CCSIM_CHECK(parts > 0 && align > 0);
  const uint64_t units = (elements + align - 1) / align;
  std::vector<Chunk> out(parts);
  uint64_t begin = 0;
  for (uint32_t p = 0; p < parts; ++p) {
    const uint64_t end_units = units * (p + 1) / parts;
    const uint64_t end = std::min(elements, end_units * align);
    out[p] = Chunk{begin, end - begin};
    begin = end;
  }
  return out;
}

}  // namespace ccsim::topo
