// k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2 aggregation switches,
// (k/2)^2 core switches; aggregation switch a of every pod links to cores a*k/2 .. a*k/2+k/2-1.
// Node n fills host slot n: edge n / (k/2) (global index), pod n / (k/2)^2.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "topology/builders/builders.hpp"

namespace ccsim::topo::detail {
namespace {

uint64_t host_slots(uint64_t k) { return k * k * k / 4; }

// Smallest even k >= 2 with k^3/4 >= nodes.
uint32_t auto_k(uint32_t nodes) {
  uint32_t k = 2;
  while (host_slots(k) < nodes) k += 2;
  return k;
}

struct FatTreeTables {
  uint32_t half = 0;              // k/2
  std::vector<uint32_t> edge_of;  // per GPU, global edge index (pod * half + local)
  std::vector<LinkId> nic_up;     // per GPU, GPU->edge; edge->GPU is +1
  std::vector<LinkId> edge_agg;   // [edge * half + agg], edge->agg (same pod); agg->edge is +1
  std::vector<LinkId> agg_core;   // [(pod * half + agg) * half + j], agg->core (agg*half + j); core->agg is +1
  NodeFabrics fabrics;
};

void route_fat_tree(const FatTreeTables& tab, Rank src, Rank dst, uint64_t key, std::vector<LinkId>& out) {
  if (tab.fabrics.route_intra(src, dst, out)) return;
  const uint32_t h = tab.half, es = tab.edge_of[src], ed = tab.edge_of[dst];
  out.push_back(tab.nic_up[src]);
  if (es != ed) {
    // One hash picks the aggregation switch (low digit) and, between pods, the core (next digit).
    const uint64_t hash = ecmp_hash(src, dst, key);
    const auto a = static_cast<uint32_t>(hash % h);
    const uint32_t ps = es / h, pd = ed / h;
    out.push_back(tab.edge_agg[size_t{es} * h + a]);
    if (ps != pd) {
      const auto j = static_cast<uint32_t>((hash / h) % h);
      out.push_back(tab.agg_core[(size_t{ps} * h + a) * h + j]);
      out.push_back(tab.agg_core[(size_t{pd} * h + a) * h + j] + 1);
    }
    out.push_back(tab.edge_agg[size_t{ed} * h + a] + 1);
  }
  out.push_back(tab.nic_up[dst] + 1);
}

}  // namespace

void check_fat_tree(const ClusterSpec& spec, std::vector<SpecProblem>& errors) {
  if (spec.k == 0) return;
  if (spec.k > kMaxFatTreeK) {
    errors.push_back({"k", fmt::format("expected at most {}, got {}", kMaxFatTreeK, spec.k)});
  } else if (spec.k % 2 != 0 || host_slots(spec.k) < spec.nodes) {
    errors.push_back(
        {"k", fmt::format("expected an even number >= 2 with k^3/4 >= nodes ({}), got {}", spec.nodes, spec.k)});
  }
}

Topology build_fat_tree(const ClusterSpec& spec) {
  const uint32_t k = spec.k != 0 ? spec.k : auto_k(spec.nodes);
  const uint32_t h = k / 2, G = spec.gpus_per_node;
  Topology t("fat_tree", spec.nodes * G, G);
  auto tab = std::make_shared<FatTreeTables>();
  tab->half = h;
  std::vector<uint32_t> edge_v(size_t{k} * h), agg_v(size_t{k} * h), core_v(size_t{h} * h);
  for (uint32_t p = 0; p < k; ++p) {
    for (uint32_t i = 0; i < h; ++i) edge_v[p * h + i] = t.add_switch(fmt::format("pod{}.edge{}", p, i));
    for (uint32_t i = 0; i < h; ++i) agg_v[p * h + i] = t.add_switch(fmt::format("pod{}.agg{}", p, i));
  }
  for (uint32_t c = 0; c < h * h; ++c) core_v[c] = t.add_switch(fmt::format("core{}", c));

  tab->edge_of.resize(t.num_ranks());
  tab->nic_up.resize(t.num_ranks());
  for (Rank r = 0; r < t.num_ranks(); ++r) {
    tab->edge_of[r] = (r / G) / h;
    tab->nic_up[r] = t.add_duplex(r, edge_v[tab->edge_of[r]], spec.nic_Bps, spec.link_latency_s);
  }
  // Switch-to-switch links carry a whole node's NIC bandwidth: full bisection for any G.
  const double tier_Bps = G * spec.nic_Bps;
  tab->edge_agg.resize(size_t{k} * h * h);
  for (uint32_t e = 0; e < k * h; ++e)
    for (uint32_t a = 0; a < h; ++a)
      tab->edge_agg[size_t{e} * h + a] = t.add_duplex(edge_v[e], agg_v[(e / h) * h + a], tier_Bps, spec.link_latency_s);
  tab->agg_core.resize(size_t{k} * h * h);
  for (uint32_t g = 0; g < k * h; ++g)  // g = pod * h + agg
    for (uint32_t j = 0; j < h; ++j)
      tab->agg_core[size_t{g} * h + j] = t.add_duplex(agg_v[g], core_v[(g % h) * h + j], tier_Bps, spec.link_latency_s);
  tab->fabrics = NodeFabrics::add(t, spec);

  t.set_router(
      [tab = std::shared_ptr<const FatTreeTables>(tab)](Rank src, Rank dst, uint64_t key, std::vector<LinkId>& out) {
        route_fat_tree(*tab, src, dst, key, out);
      });
  const uint64_t slots = host_slots(k);
  const std::string hosts =
      slots == spec.nodes ? fmt::format("{} hosts", slots) : fmt::format("{} hosts ({} slots)", spec.nodes, slots);
  t.set_description(fmt::format("fat-tree k={}, {}, {} switches, ECMP{}", k, hosts, 5 * k * k / 4, gpus_suffix(spec)));
  return t;
}

}  // namespace ccsim::topo::detail
