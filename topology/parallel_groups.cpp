#include "topology/parallel_groups.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "sim/base/check.hpp"

namespace ccsim::topo {

const char* dim_name(Dim d) {
  switch (d) {
    case Dim::kTensor:
      return "tp";
    case Dim::kPipeline:
      return "pp";
    case Dim::kData:
      return "dp";
  }
  return "?";
}

Result<ParallelGroups> ParallelGroups::make(const ParallelLayout& layout, uint32_t world_size) {
  std::vector<std::string> errors;
  const std::array<std::pair<const char*, uint32_t>, 3> degrees{
      {{"tp", layout.tp}, {"pp", layout.pp}, {"dp", layout.dp}}};
  for (const auto& [name, degree] : degrees)
    if (degree == 0) errors.push_back(fmt::format("{}: expected a degree >= 1, got 0", name));
  const uint64_t product = uint64_t{layout.tp} * layout.dp * layout.pp;
  if (errors.empty() && product != world_size)
    errors.push_back(fmt::format("tp * dp * pp: expected the world size ({}), got {} * {} * {} = {}", world_size,
                                 layout.tp, layout.dp, layout.pp, product));

  // The order: three '-'-separated names, each of tp, dp, pp exactly once.
  ParallelGroups g;
  bool order_ok = true;
  std::array<bool, 3> seen{false, false, false};
  size_t pos = 0, count = 0;
  while (order_ok && pos <= layout.order.size()) {
    const size_t end = std::min(layout.order.find('-', pos), layout.order.size());
    const std::string token = layout.order.substr(pos, end - pos);
    Dim d{};
    if (token == "tp") {
      d = Dim::kTensor;
    } else if (token == "dp") {
      d = Dim::kData;
    } else if (token == "pp") {
      d = Dim::kPipeline;
    } else {
      order_ok = false;
      break;
    }
    if (count == 3 || seen[index_of(d)]) order_ok = false;
    if (order_ok) {
      seen[index_of(d)] = true;
      g.order_[count++] = d;
    }
    pos = end + 1;
  }
  if (!order_ok || count != 3)
    errors.push_back(fmt::format(
        "order: expected a permutation of tp, dp, pp separated by '-', fastest first (e.g. \"tp-dp-pp\"), got \"{}\"",
        layout.order));

  if (!errors.empty()) {
    return invalid_argument(fmt::format("{}", fmt::join(errors, "; ")));
  }
  g.layout_ = layout;
  g.world_size_ = world_size;
  g.size_[index_of(Dim::kTensor)] = layout.tp;
  g.size_[index_of(Dim::kPipeline)] = layout.pp;
  g.size_[index_of(Dim::kData)] = layout.dp;
  uint32_t stride = 1;
  for (Dim d : g.order_) {
    g.stride_[index_of(d)] = stride;
    stride *= g.size_[index_of(d)];
  }
  return g;
}

Rank ParallelGroups::rank_at(const ParallelCoord& c) const {
  CCSIM_CHECK(c.tp < size(Dim::kTensor) && c.dp < size(Dim::kData) && c.pp < size(Dim::kPipeline),
              "coordinates (tp {}, dp {}, pp {}) outside a {}x{}x{} layout", c.tp, c.dp, c.pp, size(Dim::kTensor),
              size(Dim::kData), size(Dim::kPipeline));
  return c.tp * stride(Dim::kTensor) + c.dp * stride(Dim::kData) + c.pp * stride(Dim::kPipeline);
}

std::vector<Rank> ParallelGroups::group(Dim d, Rank r) const {
  CCSIM_CHECK(r < world_size_, "rank {} outside a world of {}", r, world_size_);
  const uint32_t st = stride(d), n = size(d);
  const Rank base = r - index(d, r) * st;
  std::vector<Rank> members(n);
  for (uint32_t i = 0; i < n; ++i) members[i] = base + i * st;
  return members;
}

std::vector<std::vector<Rank>> ParallelGroups::groups(Dim d) const {
  std::vector<std::vector<Rank>> out;
  out.reserve(num_groups(d));
  for (Rank r = 0; r < world_size_; ++r)
    if (index(d, r) == 0) out.push_back(group(d, r));
  return out;
}

bool intra_node(const std::vector<Rank>& group, uint32_t gpus_per_node) {
  CCSIM_CHECK(gpus_per_node >= 1, "gpus_per_node must be at least 1");
  for (Rank r : group)
    if (r / gpus_per_node != group.front() / gpus_per_node) return false;
  return true;
}

Result<ParallelGroups> ParallelGroups::make_filling(ParallelLayout layout, uint32_t world_size) {
  const uint64_t tp_pp = uint64_t{layout.tp} * layout.pp;
  if (layout.dp == 0 && tp_pp > 0) {
    if (world_size % tp_pp != 0)
      return invalid_argument(fmt::format("tp * pp: expected a divisor of the world size ({}) with dp automatic, got "
                                          "{} * {} = {}", world_size, layout.tp, layout.pp, tp_pp));
    layout.dp = static_cast<uint32_t>(world_size / tp_pp);
  }
  return make(layout, world_size);
}

uint32_t group_gpus_per_node(const std::vector<Rank>& group, const Topology& t) {
  uint32_t lead = 0;
  while (lead < group.size() && t.node_of(group[lead]) == t.node_of(group[0])) ++lead;
  if (lead == 0 || group.size() % lead != 0) return 1;
  for (size_t i = 0; i < group.size(); ++i)
    if (t.node_of(group[i]) != t.node_of(group[i - i % lead])) return 1;
  for (size_t b = lead; b < group.size(); b += lead)
    if (t.node_of(group[b]) == t.node_of(group[b - lead])) return 1;
  return lead;
}

}  // namespace ccsim::topo
