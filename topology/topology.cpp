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

Topology::Topology(std::string kind, uint32_t num_ranks, uint32_t gpus_per_node)
    : kind_(std::move(kind)),
      num_ranks_(num_ranks),
      gpus_per_node_(gpus_per_node),
      graph_(std::make_shared<Graph>(num_ranks)) {
  CCSIM_CHECK(gpus_per_node >= 1, "gpus_per_node must be at least 1");
  for (uint32_t r = 0; r < num_ranks; ++r) (*graph_)[r].name = fmt::format("rank{}", r);
}

uint64_t ecmp_hash(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ c * 0x94D049BB133111EBull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

Graph& Topology::mutable_graph() {
  if (graph_.use_count() > 1) {
    // Rebuilt rather than copied (same vertices, names and edges in link-id order): Boost's
    // adjacency_list copy draws a false -Wmaybe-uninitialized from GCC 12.
    auto g = std::make_shared<Graph>(num_vertices());
    for (uint32_t v = 0; v < num_vertices(); ++v) (*g)[v].name = (*graph_)[v].name;
    for (LinkId l = 0; l < links_.size(); ++l) boost::add_edge(links_[l].from, links_[l].to, EdgeProps{l}, *g);
    graph_ = std::move(g);
  }
  return *graph_;
}

uint32_t Topology::add_switch(const std::string& name) {
  const auto v = static_cast<uint32_t>(boost::add_vertex(VertexProps{name}, mutable_graph()));
  pred_.clear();
  return v;
}

LinkId Topology::add_link(uint32_t from, uint32_t to, double capacity_Bps, double latency_s) {
  CCSIM_CHECK(from < num_vertices() && to < num_vertices(), "link {}->{} outside {} vertices", from, to, num_vertices());
  CCSIM_CHECK(capacity_Bps > 0, "link capacity must be positive, got {}", capacity_Bps);
  Graph& g = mutable_graph();  // before links_ grows: a rebuilt graph must not hold the new link yet
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{from, to, capacity_Bps, latency_s});
  boost::add_edge(from, to, EdgeProps{id}, g);
  pred_.clear();
  return id;
}

LinkId Topology::add_duplex(uint32_t a, uint32_t b, double capacity_Bps, double latency_s) {
  const LinkId id = add_link(a, b, capacity_Bps, latency_s);
  add_link(b, a, capacity_Bps, latency_s);
  return id;
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
  boost::breadth_first_search(*graph_, src, boost::visitor(rec));
  return pred;
}

void Topology::warm_routes() const {
  if (router_) return;
  for (Rank r = 0; r < num_ranks_; ++r) predecessors_from(r);
}

void Topology::bfs_route(Rank src, Rank dst, std::vector<LinkId>& out) const {
  const auto& pred = predecessors_from(src);
  const size_t begin = out.size();
  for (uint32_t v = dst; v != src;) {
    const LinkId l = pred[v];
    CCSIM_CHECK(l != kNoLink, "rank {} is unreachable from rank {}", dst, src);
    out.push_back(l);
    v = links_[l].from;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(begin), out.end());
}

void Topology::route(Rank src, Rank dst, uint64_t flow_key, std::vector<LinkId>& out) const {
  CCSIM_CHECK(src < num_ranks_ && dst < num_ranks_, "route {}->{} outside {} ranks", src, dst, num_ranks_);
  out.clear();
  if (src == dst) return;
  if (router_) {
    router_(src, dst, flow_key, out);
  } else {
    bfs_route(src, dst, out);
  }
}

std::vector<LinkId> Topology::route(Rank src, Rank dst, uint64_t flow_key) const {
  std::vector<LinkId> path;
  route(src, dst, flow_key, path);
  return path;
}

double Topology::latency_s(std::span<const LinkId> links) const {
  double s = 0;
  for (LinkId l : links) s += links_[l].latency_s;
  return s;
}

double Topology::route_latency_s(Rank src, Rank dst, uint64_t flow_key) const {
  return latency_s(route(src, dst, flow_key));
}

}  // namespace ccsim::topo
