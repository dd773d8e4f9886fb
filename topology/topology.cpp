#include "topology/topology.hpp"

#include <boost/graph/breadth_first_search.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sim/base/check.hpp"

namespace ccsim::topo {
namespace {
constexpr LinkId kNoLink = std::numeric_limits<LinkId>::max();
}

Topology::Topology(std::string kind, uint32_t num_ranks) : kind_(std::move(kind)), num_ranks_(num_ranks), graph_(num_ranks) {
  for (uint32_t r = 0; r < num_ranks; ++r) graph_[r].name = fmt::format("rank{}", r);
}

uint32_t Topology::add_switch(const std::string& name) {
  const auto v = static_cast<uint32_t>(boost::add_vertex(VertexProps{name}, graph_));
  pred_.clear();
  return v;
}

LinkId Topology::add_link(uint32_t from, uint32_t to, double capacity_Bps, double latency_s) {
  CCSIM_CHECK(from < num_vertices() && to < num_vertices(), "link {}->{} outside {} vertices", from, to, num_vertices());
  CCSIM_CHECK(capacity_Bps > 0, "link capacity must be positive, got {}", capacity_Bps);
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{from, to, capacity_Bps, latency_s});
  boost::add_edge(from, to, EdgeProps{id}, graph_);
  pred_.clear();
  return id;
}

void Topology::add_duplex(uint32_t a, uint32_t b, double capacity_Bps, double latency_s) {
  add_link(a, b, capacity_Bps, latency_s);
  add_link(b, a, capacity_Bps, latency_s);
}

const std::vector<LinkId>& Topology::predecessors_from(Rank src) const {
  if (pred_.empty()) pred_.resize(num_ranks_);
  auto& pred = pred_[src];
  if (!pred.empty()) return pred;
  pred.assign(num_vertices(), kNoLink);
  // BFS visiting out-edges in ascending link id (vecS keeps insertion order = link id order).
  struct Recorder : boost::default_bfs_visitor {
    std::vector<LinkId>* pred;
    void tree_edge(Graph::edge_descriptor e, const Graph& g) const { (*pred)[boost::target(e, g)] = g[e].link; }
  } rec;
  rec.pred = &pred;
  boost::breadth_first_search(graph_, src, boost::visitor(rec));
  return pred;
}

std::vector<LinkId> Topology::route(Rank src, Rank dst) const {
  CCSIM_CHECK(src < num_ranks_ && dst < num_ranks_, "route {}->{} outside {} ranks", src, dst, num_ranks_);
  std::vector<LinkId> path;
  if (src == dst) return path;
  const auto& pred = predecessors_from(src);
  for (uint32_t v = dst; v != src;) {
    const LinkId l = pred[v];
    CCSIM_CHECK(l != kNoLink, "rank {} is unreachable from rank {}", dst, src);
    path.push_back(l);
    v = links_[l].from;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

double Topology::route_latency_s(Rank src, Rank dst) const {
  double s = 0;
  for (LinkId l : route(src, dst)) s += links_[l].latency_s;
  return s;
}

Topology make_star(uint32_t ranks, double nic_Bps, double link_latency_s) {
  Topology t("star", ranks);
  const uint32_t sw = t.add_switch("switch");
  for (Rank r = 0; r < ranks; ++r) t.add_duplex(r, sw, nic_Bps, link_latency_s);
  return t;
}

const std::vector<TopologyInfo>& known_topologies() {
  static const std::vector<TopologyInfo> kTopologies = {
      {"star", "one switch (ToR); every rank on a full-duplex NIC link of `nic_bandwidth`"},
  };
  return kTopologies;
}

}  // namespace ccsim::topo
