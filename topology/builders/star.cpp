// Star: one switch, every GPU on its own NIC link to it.
#include <fmt/format.h>

#include <memory>

#include "topology/builders/builders.hpp"

namespace ccsim::topo::detail {
namespace {

struct StarTables {
  std::vector<LinkId> nic_up;  // per GPU, GPU->switch; switch->GPU is nic_up + 1
  NodeFabrics fabrics;
};

}  // namespace

void check_star(const ClusterSpec&, std::vector<SpecProblem>&) {}  // no fields of its own

Topology build_star(const ClusterSpec& spec) {
  Topology t("star", spec.nodes * spec.gpus_per_node, spec.gpus_per_node);
  auto tab = std::make_shared<StarTables>();
  const uint32_t sw = t.add_switch("switch");
  tab->nic_up.resize(t.num_ranks());
  for (Rank r = 0; r < t.num_ranks(); ++r) tab->nic_up[r] = t.add_duplex(r, sw, spec.nic_Bps, spec.link_latency_s);
  tab->fabrics = NodeFabrics::add(t, spec);
  t.set_router([tab = std::shared_ptr<const StarTables>(tab)](Rank src, Rank dst, uint64_t, std::vector<LinkId>& out) {
    if (tab->fabrics.route_intra(src, dst, out)) return;
    out.push_back(tab->nic_up[src]);
    out.push_back(tab->nic_up[dst] + 1);
  });
  t.set_description(fmt::format("star, {} hosts, 1 switch{}", spec.nodes, gpus_suffix(spec)));
  return t;
}

}  // namespace ccsim::topo::detail
