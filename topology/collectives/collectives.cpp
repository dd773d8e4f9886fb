#include "topology/collectives/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

namespace ccsim::topo {
namespace detail {

Status need_ranks(uint32_t ranks, uint32_t at_least) {
  if (ranks < at_least) return invalid_argument(fmt::format("needs at least {} ranks, got {}", at_least, ranks));
  return Status();
}

Status check_common(uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
  CCSIM_RETURN_IF_ERROR(need_ranks(ranks, 2));
  if (o.segments < 1) return invalid_argument("segments must be at least 1");
  if (o.align < 1) return invalid_argument("align must be at least 1");
  return check_cuts(ranks, elements, o);
}

Status check_alltoall_blocks(CollectiveOp op, uint32_t ranks, uint64_t elements, uint64_t align) {
  if (op != CollectiveOp::kAllToAll) return Status();
  if (elements % ranks != 0)
    return invalid_argument(
        fmt::format("alltoall needs elements divisible by the ranks (equal blocks), got {} elements over {} ranks",
                    elements, ranks));
  // The blocks are the operation's, not a split the schedule may align: each must start on a
  // compressor block.
  if (align > 1 && (elements / ranks) % align != 0)
    return invalid_argument(fmt::format("alltoall blocks of {} elements ({} over {} ranks) do not start on the "
                                        "compressor's blocks of {} elements",
                                        elements / ranks, elements, ranks, align));
  return Status();
}

}  // namespace detail

Status check_cuts(uint32_t parts, uint64_t elements, const CollectiveOptions& o) {
  const auto& c = o.cuts;
  if (c.empty()) return Status();
  if (c.size() != static_cast<size_t>(parts) + 1)
    return invalid_argument(fmt::format("cuts: expected {} shard boundaries, got {}", parts + 1, c.size()));
  if (c.front() != 0 || c.back() != elements)
    return invalid_argument(fmt::format("cuts: expected boundaries from 0 to {}, got {} to {}", elements, c.front(), c.back()));
  for (size_t i = 1; i < c.size(); ++i) {
    if (c[i] < c[i - 1])
      return invalid_argument(fmt::format("cuts: boundary {} ({}) below boundary {} ({})", i, c[i], i - 1, c[i - 1]));
    if (i + 1 < c.size() && c[i] % std::max<uint64_t>(o.align, 1) != 0)
      return invalid_argument(fmt::format("cuts: boundary {} ({}) is not a multiple of align {}", i, c[i], o.align));
  }
  return Status();
}

std::vector<Chunk> shard_split(uint64_t elements, uint32_t parts, const CollectiveOptions& options) {
  if (options.cuts.empty()) return split_even(elements, parts, options.align);
  const Status st = check_cuts(parts, elements, options);
  CCSIM_CHECK(st.ok(), "{}", st.message());
  std::vector<Chunk> out;
  out.reserve(parts);
  for (uint32_t i = 0; i < parts; ++i) out.push_back({options.cuts[i], options.cuts[i + 1] - options.cuts[i]});
  return out;
}

Schedule CollectiveInfo::build(uint32_t ranks, uint64_t elements, const CollectiveOptions& options) const {
  const Status st = check(ranks, elements, options);
  CCSIM_CHECK(st.ok(), "{}/{}: {}", collective_op_name(operation), algorithm, st.message());
  auto gen = make(ranks, elements, options);
  return materialize(*gen);
}

const std::vector<CollectiveInfo>& known_collectives() {
  static const std::vector<CollectiveInfo> kCollectives = [] {
    std::vector<CollectiveInfo> v;
    detail::register_ring(v);
    detail::register_semi_loop(v);
    detail::register_butterfly(v);
    detail::register_hierarchical_ring(v);
    detail::register_direct(v);
    detail::register_two_level(v);
    detail::register_broadcast_ring(v);
    return v;
  }();
  return kCollectives;
}

Result<CollectiveOp> parse_collective_op(const std::string& name) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll})
    if (collective_op_name(op) == name) return op;
  return not_found(fmt::format("unknown collective operation '{}'", name));
}

std::vector<std::string> collective_op_names() {
  std::vector<std::string> v;
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll})
    v.emplace_back(collective_op_name(op));
  return v;
}

std::vector<std::string> collective_algorithm_names() {
  std::vector<std::string> v;
  for (const auto& c : known_collectives())
    if (std::find(v.begin(), v.end(), c.algorithm) == v.end()) v.push_back(c.algorithm);
  return v;
}

Result<const CollectiveInfo*> find_collective(const std::string& operation, const std::string& algorithm) {
  CCSIM_ASSIGN_OR_RETURN(const CollectiveOp op, parse_collective_op(operation));
  std::string valid;
  for (const auto& c : known_collectives()) {
    if (c.operation != op) continue;
    if (c.algorithm == algorithm) return &c;
    valid += (valid.empty() ? "" : ", ") + c.algorithm;
  }
  return not_found(fmt::format("no algorithm '{}' for {}; valid: {}", algorithm, operation, valid));
}

}  // namespace ccsim::topo
