#pragma once
/// \file
/// A physical cluster: hosts (ranks) and switches as vertices of a Boost.Graph, directed links
/// with capacity and latency as its edges (a full-duplex cable is two links), and routes between
/// ranks. Builders in topology/builders/ return one; the flow network in sim/ reads its links and
/// routes and never the graph itself.

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <functional>
#include <memory>
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

/// A cluster graph with routes. Ranks (GPUs) are vertices 0..num_ranks()-1; other vertices are
/// switches, NICs or intra-node fabrics. Ranks are grouped into nodes of gpus_per_node()
/// consecutive ranks. Moves never copy the graph; copies share it until one of them adds to it.
class Topology {
 public:
  /// Appends to `out` the links from rank `src` to rank `dst` for a flow whose ECMP hash input is
  /// `flow_key`. Must be deterministic. Only called with src != dst.
  using Router = std::function<void(Rank src, Rank dst, uint64_t flow_key, std::vector<LinkId>& out)>;

  Topology(std::string kind, uint32_t num_ranks, uint32_t gpus_per_node = 1);

  /// Adds a vertex (a switch) and returns its index.
  uint32_t add_switch(const std::string& name);
  /// Adds a directed link and returns its id.
  LinkId add_link(uint32_t from, uint32_t to, double capacity_Bps, double latency_s);
  /// Adds two directed links (from→to, to→from) with the same capacity and latency; returns the
  /// id of from→to (to→from is the next id).
  LinkId add_duplex(uint32_t a, uint32_t b, double capacity_Bps, double latency_s);
  /// Replaces the default router (BFS shortest paths, lowest link id first) by a structured one.
  /// The router must own its state (capture tables by value or shared_ptr, never this Topology):
  /// a Topology is copied and moved with its router.
  void set_router(Router router) { router_ = std::move(router); }
  /// Free-form description of the shape ("fat-tree k=8, 128 hosts, ECMP"), for summaries.
  void set_description(std::string d) { description_ = std::move(d); }

  const std::string& kind() const { return kind_; }
  const std::string& description() const { return description_; }
  uint32_t num_ranks() const { return num_ranks_; }
  uint32_t gpus_per_node() const { return gpus_per_node_; }
  uint32_t num_nodes() const { return (num_ranks_ + gpus_per_node_ - 1) / gpus_per_node_; }
  uint32_t node_of(Rank r) const { return r / gpus_per_node_; }
  uint32_t num_vertices() const { return static_cast<uint32_t>(boost::num_vertices(*graph_)); }
  const std::vector<Link>& links() const { return links_; }
  const Graph& graph() const { return *graph_; }
  const std::string& vertex_name(uint32_t v) const { return (*graph_)[v].name; }

  /// Clears `out` and fills it with the links from `src` to `dst` for a flow with ECMP key
  /// `flow_key`; empty when src == dst. REQUIRES: both ranks exist and dst is reachable.
  void route(Rank src, Rank dst, uint64_t flow_key, std::vector<LinkId>& out) const;
  std::vector<LinkId> route(Rank src, Rank dst, uint64_t flow_key = 0) const;
  /// Sum of the latencies along `links`.
  double latency_s(std::span<const LinkId> links) const;
  double route_latency_s(Rank src, Rank dst, uint64_t flow_key = 0) const;
  /// The default router: fewest hops, ties broken by the lowest link id (BFS trees are cached per
  /// source, so it suits small or irregular graphs; structured builders install their own).
  void bfs_route(Rank src, Rank dst, std::vector<LinkId>& out) const;
  /// Computes the default router's BFS tree of every rank now (nothing with a structured router),
  /// after which route() may be called from several threads at once.
  void warm_routes() const;

 private:
  const std::vector<LinkId>& predecessors_from(Rank src) const;
  // The graph for adding to it, first rebuilt privately if a copy of this Topology shares it.
  Graph& mutable_graph();

  std::string kind_;
  std::string description_;
  uint32_t num_ranks_;
  uint32_t gpus_per_node_;
  // Shared between copies until one of them adds a vertex or link (copy on write): Boost 1.74's
  // adjacency_list has no move constructor, and a Topology is moved whenever it travels in a
  // Result. mutable_graph() unshares. Never null except in a moved-from Topology.
  std::shared_ptr<Graph> graph_;
  std::vector<Link> links_;
  Router router_;
  // Per source rank, the link by which BFS first reached each vertex (lazily computed).
  mutable std::vector<std::vector<LinkId>> pred_;
};

/// A deterministic 64-bit mix (splitmix64 finalizer) for ECMP hashing.
uint64_t ecmp_hash(uint64_t a, uint64_t b, uint64_t c);

}  // namespace ccsim::topo
