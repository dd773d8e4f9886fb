#pragma once
/// \file
/// A physical cluster: hosts (ranks) and switches as vertices of a Boost.Graph, directed links
/// with capacity and latency as its edges (a full-duplex cable is two links), and routes between
/// ranks. Builders in topology/builders/ return one; the flow network in sim/ reads its links and
/// routes and never the graph itself.

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ccsim::topo {

using Rank = uint32_t;
using LinkId = uint32_t;

/// One directed link.
struct Link {
  uint32_t from = 0;          ///< source vertex
  uint32_t to = 0;            ///< destination vertex
  double capacity_Bps = 0;    ///< bytes per second
  double latency_s = 0;       ///< propagation + switching latency, seconds
};

/// Vertex and edge properties of the underlying graph.
struct VertexProps {
  std::string name;
};
struct EdgeProps {
  LinkId link = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;

/// A cluster graph with routes. Ranks are vertices 0..num_ranks()-1; other vertices are switches.
class Topology {
 public:
  Topology(std::string kind, uint32_t num_ranks);

  /// Adds a vertex (a switch) and returns its index.
  uint32_t add_switch(const std::string& name);
  /// Adds a directed link and returns its id.
  LinkId add_link(uint32_t from, uint32_t to, double capacity_Bps, double latency_s);
  /// Adds two directed links (from→to, to→from) with the same capacity and latency.
  void add_duplex(uint32_t a, uint32_t b, double capacity_Bps, double latency_s);

  const std::string& kind() const { return kind_; }
  uint32_t num_ranks() const { return num_ranks_; }
  uint32_t num_vertices() const { return static_cast<uint32_t>(boost::num_vertices(graph_)); }
  const std::vector<Link>& links() const { return links_; }
  const Graph& graph() const { return graph_; }

  /// Links from rank `src` to rank `dst` along a shortest path (fewest hops; ties broken by the
  /// lowest link id, so routes are deterministic). Empty when src == dst.
  /// REQUIRES: both ranks exist and dst is reachable from src.
  std::vector<LinkId> route(Rank src, Rank dst) const;
  /// Sum of the latencies along route(src, dst).
  double route_latency_s(Rank src, Rank dst) const;

 private:
  const std::vector<LinkId>& predecessors_from(Rank src) const;

  std::string kind_;
  uint32_t num_ranks_;
  Graph graph_;
  std::vector<Link> links_;
  // Per source rank, the link by which BFS first reached each vertex (lazily computed).
  mutable std::vector<std::vector<LinkId>> pred_;
};

/// A single switch with `ranks` hosts, each attached by a full-duplex link of `nic_Bps` and
/// `link_latency_s` (so a rank-to-rank route has two links and twice the latency).
Topology make_star(uint32_t ranks, double nic_Bps, double link_latency_s);

/// Names and one-line descriptions of the topologies this build knows (for `ccsim list`).
struct TopologyInfo {
  std::string name;
  std::string description;
};
const std::vector<TopologyInfo>& known_topologies();

}  // namespace ccsim::topo
