// Torus (2D/3D, and the 1D case the ring builder uses) with dimension-ordered routing.
// Rings of size 1 have no links (they would be self links); rings of size 2 have one duplex link
// per pair (the + and - neighbours coincide), rings of size >= 3 one per neighbour pair.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "sim/base/check.hpp"
#include "topology/builders/builders.hpp"

namespace ccsim::topo::detail {
namespace {

struct TorusTables {
  uint32_t ndims = 0;
  std::array<uint32_t, 3> size{1, 1, 1};
  std::array<uint32_t, 3> stride{1, 1, 1};
  std::vector<LinkId> plus;   // [node * ndims + d], router(node) -> router(+1 neighbour in d)
  std::vector<LinkId> minus;  // [node * ndims + d], router(node) -> router(-1 neighbour in d)
  NodeFabrics fabrics;
};

// Dimension-ordered route between the routers of nodes `ns` and `nd`: x, then y, then z; the
// shorter way around each ring, exactly half-way goes in the + direction.
void route_dor(const TorusTables& tab, uint32_t ns, uint32_t nd, std::vector<LinkId>& out) {
  uint32_t cur = ns;
  for (uint32_t d = 0; d < tab.ndims; ++d) {
    const uint32_t n = tab.size[d], st = tab.stride[d];
    uint32_t c = (cur / st) % n;
    const uint32_t target = (nd / st) % n;
    if (c == target) continue;
    const uint32_t delta = (target + n - c) % n;  // hops in the + direction
    if (2 * delta <= n) {
      for (uint32_t i = 0; i < delta; ++i) {
        out.push_back(tab.plus[size_t{cur} * tab.ndims + d]);
        if (c + 1 == n) {
          cur -= c * st;
          c = 0;
        } else {
          cur += st;
          ++c;
        }
      }
    } else {
      for (uint32_t i = 0; i < n - delta; ++i) {
        out.push_back(tab.minus[size_t{cur} * tab.ndims + d]);
        if (c == 0) {
          cur += (n - 1) * st;
          c = n - 1;
        } else {
          cur -= st;
          --c;
        }
      }
    }
  }
}

std::string join_dims(const std::vector<uint32_t>& dims) { return fmt::format("{}", fmt::join(dims, "x")); }

// Default 2D shape: {nodes / a, a} with a the largest divisor of nodes with a * a <= nodes.
std::vector<uint32_t> auto_dims(uint32_t nodes) {
  uint32_t a = 1;
  for (uint32_t i = 1; uint64_t{i} * i <= nodes; ++i)
    if (nodes % i == 0) a = i;
  return {nodes / a, a};
}

}  // namespace

void check_torus(const ClusterSpec& spec, std::vector<SpecProblem>& errors) {
  if (spec.dims.empty()) return;
  if (spec.dims.size() != 2 && spec.dims.size() != 3) {
    errors.push_back({"dims", fmt::format("expected 2 or 3 sizes (or none for auto), got {}", spec.dims.size())});
    return;
  }
  uint64_t product = 1;
  for (uint32_t d : spec.dims) {
    if (d == 0) {
      errors.push_back({"dims", fmt::format("expected sizes >= 1, got {}", join_dims(spec.dims))});
      return;
    }
    product = std::min<uint64_t>(product * d, uint64_t{1} << 40);  // saturate; nodes < 2^32
  }
  if (product != spec.nodes)
    errors.push_back({"dims", fmt::format("expected sizes whose product equals nodes ({}), got {}", spec.nodes,
                                       join_dims(spec.dims))});
}

Topology build_torus(const ClusterSpec& spec) {
  return build_direct_torus(spec, "torus", spec.dims.empty() ? auto_dims(spec.nodes) : spec.dims);
}

Topology build_direct_torus(const ClusterSpec& spec, std::string kind, const std::vector<uint32_t>& dims) {
  CCSIM_CHECK(!dims.empty() && dims.size() <= 3, "torus with {} dimensions", dims.size());
  const uint32_t G = spec.gpus_per_node;
  Topology t(kind, spec.nodes * G, G);
  auto tab = std::make_shared<TorusTables>();
  tab->ndims = static_cast<uint32_t>(dims.size());
  uint32_t stride = 1;
  for (uint32_t d = 0; d < tab->ndims; ++d) {
    tab->size[d] = dims[d];
    tab->stride[d] = stride;
    stride *= dims[d];
  }
  CCSIM_CHECK(stride == spec.nodes, "torus {} does not hold {} nodes", join_dims(dims), spec.nodes);
  // Fabrics first: with G > 1 they are the routers.
  tab->fabrics = NodeFabrics::add(t, spec);
  const auto router = [&](uint32_t node) { return G == 1 ? node : tab->fabrics.vertex[node]; };
  tab->plus.resize(size_t{spec.nodes} * tab->ndims);
  tab->minus.resize(size_t{spec.nodes} * tab->ndims);
  for (uint32_t v = 0; v < spec.nodes; ++v) {
    for (uint32_t d = 0; d < tab->ndims; ++d) {
      const uint32_t n = tab->size[d], st = tab->stride[d], c = (v / st) % n;
      if (n == 1 || (n == 2 && c == 1)) continue;  // no self links; one cable per pair when n == 2
      const uint32_t w = c + 1 == n ? v - c * st : v + st;
      const LinkId l = t.add_duplex(router(v), router(w), spec.nic_Bps, spec.link_latency_s);
      tab->plus[size_t{v} * tab->ndims + d] = l;
      tab->minus[size_t{w} * tab->ndims + d] = l + 1;
      if (n == 2) {  // the + and - neighbours coincide
        tab->plus[size_t{w} * tab->ndims + d] = l + 1;
        tab->minus[size_t{v} * tab->ndims + d] = l;
      }
    }
  }
  t.set_router([tab = std::shared_ptr<const TorusTables>(tab)](Rank src, Rank dst, uint64_t, std::vector<LinkId>& out) {
    if (tab->fabrics.route_intra(src, dst, out)) return;
    const uint32_t g = tab->fabrics.gpus_per_node;
    if (g > 1) out.push_back(tab->fabrics.gpu_up[src]);
    route_dor(*tab, src / g, dst / g, out);
    if (g > 1) out.push_back(tab->fabrics.gpu_up[dst] + 1);
  });
  if (kind == "ring") {
    t.set_description(
        fmt::format("ring, {} nodes, shortest direction (ties clockwise){}", spec.nodes, gpus_suffix(spec)));
  } else {
    t.set_description(
        fmt::format("torus {}, {} nodes, dimension-ordered routing{}", join_dims(dims), spec.nodes, gpus_suffix(spec)));
  }
  return t;
}

}  // namespace ccsim::topo::detail
