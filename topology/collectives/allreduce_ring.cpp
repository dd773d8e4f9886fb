#include "sim/base/check.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::topo {

Schedule make_allreduce_ring(uint32_t ranks, uint64_t elements, const CollectiveOptions& options) {
  CCSIM_CHECK(ranks >= 2, "ring all-reduce needs at least 2 ranks, got {}", ranks);
  Schedule s(fmt::format("allreduce.ring(n={})", ranks), ranks, elements);
  for (const Chunk& c : split_even(elements, ranks, options.align)) s.add_chunk(c.offset, c.count);

  // Per chunk c: the reduce chain starts at rank c and walks c+1, ..., c+n-1 (the owner).
  for (uint32_t c = 0; c < ranks; ++c) {
    auto at = [&](uint32_t step) { return (c + step) % ranks; };
    OpId msg = s.add_kernel(KernelKind::kEncode, at(0), c, kNoOp, 1, {});
    OpId arrived = s.add_transfer(at(0), at(1), msg, {msg});
    for (uint32_t step = 1; step + 1 < ranks; ++step) {
      msg = s.add_kernel(KernelKind::kDecodeAccumulateEncode, at(step), c, msg, step + 1, {arrived});
      arrived = s.add_transfer(at(step), at(step + 1), msg, {msg});
    }
    const uint32_t owner = at(ranks - 1);
    const OpId reduced = s.add_kernel(KernelKind::kDecodeAccumulate, owner, c, msg, ranks, {arrived});
    // All-gather: the owner encodes the reduced chunk once; the message travels n-1 hops.
    const OpId final_msg = s.add_kernel(KernelKind::kEncode, owner, c, kNoOp, ranks, {reduced});
    s.add_kernel(KernelKind::kDecode, owner, c, final_msg, ranks, {final_msg});
    OpId prev = final_msg;
    for (uint32_t step = 0; step + 1 < ranks; ++step) {
      const uint32_t src = (owner + step) % ranks, dst = (owner + step + 1) % ranks;
      prev = s.add_transfer(src, dst, final_msg, {prev});
      s.add_kernel(KernelKind::kDecode, dst, c, final_msg, ranks, {prev});
    }
  }
  return s;
}

const std::vector<CollectiveInfo>& known_collectives() {
  static const std::vector<CollectiveInfo> kCollectives = {
      {"allreduce", "ring",
       "ring reduce-scatter + all-gather, 2(n-1) steps; fused decode-accumulate-encode at each reduce hop",
       make_allreduce_ring},
  };
  return kCollectives;
}

Result<const CollectiveInfo*> find_collective(const std::string& operation, const std::string& algorithm) {
  std::string valid;
  for (const auto& c : known_collectives()) {
    if (c.operation == operation && c.algorithm == algorithm) return &c;
    valid += (valid.empty() ? "" : ", ") + c.operation + "/" + c.algorithm;
  }
  return not_found(fmt::format("no collective algorithm '{}' for operation '{}'; valid: {}", algorithm, operation, valid));
}

}  // namespace ccsim::topo
