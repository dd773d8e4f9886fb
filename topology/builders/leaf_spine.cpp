// Two-tier leaf-spine (folded Clos): nodes spread over leaves in order, every leaf linked to every
// spine, inter-leaf flows spread over the spines by ECMP.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "topology/builders/builders.hpp"

namespace ccsim::topo::detail {
namespace {

struct LeafSpineShape {
  uint32_t leaves = 0;
  uint32_t spines = 0;
  uint32_t max_hosts_per_leaf = 0;
  double uplink_Bps = 0;
};

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

uint32_t ceil_sqrt(uint32_t n) {
  auto r = static_cast<uint32_t>(std::sqrt(static_cast<double>(n)));
  while (uint64_t{r} * r < n) ++r;
  while (r > 0 && uint64_t{r - 1} * (r - 1) >= n) --r;
  return r;
}

// Resolves the auto (0) fields. REQUIRES: spec passed check_leaf_spine.
LeafSpineShape resolve(const ClusterSpec& spec) {
  LeafSpineShape s;
  s.leaves = spec.leaves != 0 ? spec.leaves : ceil_sqrt(spec.nodes);
  s.max_hosts_per_leaf = ceil_div(spec.nodes, s.leaves);
  s.spines = spec.spines != 0 ? spec.spines : s.max_hosts_per_leaf;
  s.uplink_Bps =
      spec.uplink_Bps != 0 ? spec.uplink_Bps : s.max_hosts_per_leaf * spec.gpus_per_node * spec.nic_Bps / s.spines;
  return s;
}

struct LeafSpineTables {
  uint32_t spines = 0;
  std::vector<uint32_t> leaf_of;  // per GPU
  std::vector<LinkId> nic_up;     // per GPU, GPU->leaf; leaf->GPU is +1
  std::vector<LinkId> uplink;     // [leaf * spines + spine], leaf->spine; spine->leaf is +1
  NodeFabrics fabrics;
};

void route_leaf_spine(const LeafSpineTables& tab, Rank src, Rank dst, uint64_t key, std::vector<LinkId>& out) {
  if (tab.fabrics.route_intra(src, dst, out)) return;
  const uint32_t ls = tab.leaf_of[src], ld = tab.leaf_of[dst];
  out.push_back(tab.nic_up[src]);
  if (ls != ld) {
    const auto s = static_cast<uint32_t>(ecmp_hash(src, dst, key) % tab.spines);
    out.push_back(tab.uplink[size_t{ls} * tab.spines + s]);
    out.push_back(tab.uplink[size_t{ld} * tab.spines + s] + 1);
  }
  out.push_back(tab.nic_up[dst] + 1);
}

}  // namespace

void check_leaf_spine(const ClusterSpec& spec, std::vector<SpecProblem>& errors) {
  if (spec.leaves > spec.nodes)
    errors.push_back({"leaves", fmt::format("expected 0 (auto) or 1..nodes ({}), got {}", spec.nodes, spec.leaves)});
  const uint32_t leaves = spec.leaves != 0 ? std::min(spec.leaves, spec.nodes) : ceil_sqrt(spec.nodes);
  constexpr uint64_t kMaxUplinks = uint64_t{1} << 24;
  if (spec.spines != 0 && uint64_t{leaves} * spec.spines > kMaxUplinks)
    errors.push_back({"spines", fmt::format("expected leaves * spines <= {}, got {} spines on {} leaves",
                                            kMaxUplinks, spec.spines, leaves)});
  if (!(std::isfinite(spec.uplink_Bps) && spec.uplink_Bps >= 0))
    errors.push_back({"uplink_Bps",
                      fmt::format("expected 0 (non-blocking) or a finite bandwidth > 0, got {}", spec.uplink_Bps)});
}

Topology build_leaf_spine(const ClusterSpec& spec) {
  const LeafSpineShape shape = resolve(spec);
  const uint32_t G = spec.gpus_per_node;
  Topology t("leaf_spine", spec.nodes * G, G);
  auto tab = std::make_shared<LeafSpineTables>();
  tab->spines = shape.spines;
  std::vector<uint32_t> leaf_v(shape.leaves), spine_v(shape.spines);
  for (uint32_t l = 0; l < shape.leaves; ++l) leaf_v[l] = t.add_switch(fmt::format("leaf{}", l));
  for (uint32_t s = 0; s < shape.spines; ++s) spine_v[s] = t.add_switch(fmt::format("spine{}", s));
  tab->leaf_of.resize(t.num_ranks());
  tab->nic_up.resize(t.num_ranks());
  for (Rank r = 0; r < t.num_ranks(); ++r) {
    const auto leaf = static_cast<uint32_t>(uint64_t{r / G} * shape.leaves / spec.nodes);
    tab->leaf_of[r] = leaf;
    tab->nic_up[r] = t.add_duplex(r, leaf_v[leaf], spec.nic_Bps, spec.link_latency_s);
  }
  tab->uplink.resize(size_t{shape.leaves} * shape.spines);
  for (uint32_t l = 0; l < shape.leaves; ++l)
    for (uint32_t s = 0; s < shape.spines; ++s)
      tab->uplink[size_t{l} * shape.spines + s] =
          t.add_duplex(leaf_v[l], spine_v[s], shape.uplink_Bps, spec.link_latency_s);
  tab->fabrics = NodeFabrics::add(t, spec);
  t.set_router(
      [tab = std::shared_ptr<const LeafSpineTables>(tab)](Rank src, Rank dst, uint64_t key, std::vector<LinkId>& out) {
        route_leaf_spine(*tab, src, dst, key, out);
      });
  t.set_description(fmt::format("leaf-spine, {} hosts, {} leaves, {} spines, {:.3g} GB/s uplinks, ECMP{}", spec.nodes,
                                shape.leaves, shape.spines, shape.uplink_Bps / 1e9, gpus_suffix(spec)));
  return t;
}

}  // namespace ccsim::topo::detail
