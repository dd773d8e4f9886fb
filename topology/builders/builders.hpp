#pragma once
/// \file
/// Cluster topology builders (STYLE rule 8: builders return a graph and never touch the engine).
///
/// `build_topology(spec)` turns a ClusterSpec into a Topology with a structured router: star,
/// two-tier leaf-spine, k-ary fat-tree, 2D/3D torus and ring. Every builder follows the same
/// vertex and placement conventions:
///
///  - Ranks (GPUs) are vertices 0..nodes*gpus_per_node-1; rank r lives on node r / gpus_per_node.
///    Switches and intra-node fabrics come after them.
///  - gpus_per_node G > 1: every node gets a fabric switch ("node5.nvswitch") and every GPU a duplex
///    link to it (intra_Bps, intra_latency_s). Routes between GPUs of one node are GPU->fabric->GPU
///    and never touch the inter-node network.
///  - Switched networks (star, leaf_spine, fat_tree): every GPU also has its own NIC link (nic_Bps,
///    link_latency_s) to its node's switch; all GPUs of a node hang off the same star/leaf/edge switch.
///  - Direct networks (torus, ring): the node's router is its fabric switch (G > 1) or the GPU itself
///    (G == 1); routers are linked to their neighbours by duplex links of nic_Bps, link_latency_s.
///
/// Routers compute a route in O(hops) from index arithmetic and per-vertex link-id tables (no
/// all-pairs tables, no search at route time); routes are deterministic functions of
/// (src, dst, flow_key). ECMP choices use ecmp_hash(src, dst, flow_key).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/topology.hpp"

namespace ccsim::topo {

/// What to build. Fields that only apply to one topology (leaves, spines, uplink_Bps, k, dims)
/// must keep their defaults for the others: a value given for the wrong shape is an input error,
/// never silently ignored.
struct ClusterSpec {
  /// star | leaf_spine | fat_tree | torus | ring (see known_topologies()).
  std::string topology = "star";
  /// Hosts attached to the inter-node network. REQUIRES: >= 1 and nodes * gpus_per_node <= kMaxRanks.
  uint32_t nodes = 8;
  /// Ranks = nodes * gpus_per_node; rank r lives on node r / gpus_per_node. REQUIRES: >= 1.
  uint32_t gpus_per_node = 1;
  /// Per-direction bandwidth of each GPU's NIC link (and of torus/ring links), bytes/s. REQUIRES: > 0.
  double nic_Bps = 12.5e9;
  /// Latency of every inter-node link, seconds. REQUIRES: >= 0.
  double link_latency_s = 1e-6;
  /// Intra-node fabric (NVLink-like) per-direction bandwidth per GPU, bytes/s.
  /// REQUIRES: > 0 when gpus_per_node > 1, >= 0 otherwise (unused).
  double intra_Bps = 0;
  /// Latency of each GPU<->fabric link, seconds. REQUIRES: >= 0.
  double intra_latency_s = 0;
  /// leaf_spine: number of leaf switches, 1..nodes. Default (0): ceil(sqrt(nodes)).
  /// Node n sits on leaf floor(n * leaves / nodes): in order, leaf sizes differ by at most one.
  uint32_t leaves = 0;
  /// leaf_spine: number of spine switches. Default (0): ceil(nodes / leaves), i.e. as many spines
  /// as nodes on the fullest leaf (a radix-balanced folded Clos). Every leaf links to every spine.
  uint32_t spines = 0;
  /// leaf_spine: per-direction bandwidth of each leaf<->spine link, bytes/s. Default (0):
  /// non-blocking, ceil(nodes / leaves) * gpus_per_node * nic_Bps / spines.
  double uplink_Bps = 0;
  /// fat_tree: even switch radix k in [2, kMaxFatTreeK] with k^3/4 >= nodes. Default (0): the
  /// smallest such k. Edge<->aggregation and aggregation<->core links carry gpus_per_node * nic_Bps
  /// so the tree keeps full bisection when nodes have several NICs.
  uint32_t k = 0;
  /// torus: 2 or 3 ring sizes (x fastest: node = x + X*(y + Y*z)) whose product equals nodes.
  /// Default (empty): 2D {nodes / a, a} with a the largest divisor of nodes with a*a <= nodes.
  std::vector<uint32_t> dims;
};

/// Largest number of ranks (nodes * gpus_per_node) a spec may ask for.
inline constexpr uint64_t kMaxRanks = uint64_t{1} << 20;
/// Largest fat-tree radix (k^3/4 = 4,194,304 host slots).
inline constexpr uint32_t kMaxFatTreeK = 256;

/// One problem of a spec: the ClusterSpec field it is about ("k") and what is wrong
/// ("expected an even number >= 2 with k^3/4 >= nodes (128), got 5").
struct SpecProblem {
  std::string field;
  std::string message;
};
/// Every problem of `spec`, without building anything (empty: it builds).
std::vector<SpecProblem> cluster_spec_problems(const ClusterSpec& spec);
/// Where a ClusterSpec field sits in a scenario's cluster object, as a JSON Pointer relative to it
/// ("k" -> "/fat_tree/k", "intra_Bps" -> "/intra_node/bandwidth"); "" for an unknown field.
std::string cluster_field_pointer(std::string_view field);
/// Checks `spec` without building anything. Returns OK or an invalid_argument Status listing every
/// problem ("; "-separated) as "field: message", e.g.
/// "k: expected an even number >= 2 with k^3/4 >= nodes (128), got 5".
Status check_cluster_spec(const ClusterSpec& spec);

/// Builds the topology `spec` describes, with its structured router and a description
/// ("fat-tree k=16, 1024 hosts, 1280 switches, ECMP"). Input errors as in check_cluster_spec().
/// The Topology owns its router state; it may be moved or copied freely.
Result<Topology> build_topology(const ClusterSpec& spec);

/// A single switch with `ranks` hosts, each attached by a full-duplex link of `nic_Bps` and
/// `link_latency_s` (so a rank-to-rank route has two links and twice the latency). Link 2r is
/// rank r -> switch, link 2r+1 switch -> rank r. Same as build_topology({.topology = "star",
/// .nodes = ranks, ...}). REQUIRES: nic_Bps > 0 (checked; not an input-error path).
Topology make_star(uint32_t ranks, double nic_Bps, double link_latency_s);

/// Names and one-line descriptions of the topologies this build knows (for `ccsim list`).
struct TopologyInfo {
  std::string name;
  std::string description;
};
/// Every builder, in the order star, leaf_spine, fat_tree, torus, ring.
const std::vector<TopologyInfo>& known_topologies();

namespace detail {

/// Per-builder entry points used by build_topology(). `check_*` appends one SpecProblem per problem
/// with the builder's own fields (common fields are checked by the caller); `build_*` REQUIRES
/// that the spec passed every check.
void check_star(const ClusterSpec& spec, std::vector<SpecProblem>& errors);
Topology build_star(const ClusterSpec& spec);
void check_leaf_spine(const ClusterSpec& spec, std::vector<SpecProblem>& errors);
Topology build_leaf_spine(const ClusterSpec& spec);
void check_fat_tree(const ClusterSpec& spec, std::vector<SpecProblem>& errors);
Topology build_fat_tree(const ClusterSpec& spec);
void check_torus(const ClusterSpec& spec, std::vector<SpecProblem>& errors);
Topology build_torus(const ClusterSpec& spec);
void check_ring(const ClusterSpec& spec, std::vector<SpecProblem>& errors);
Topology build_ring(const ClusterSpec& spec);

/// A torus of routers with the given ring sizes (1 to 3 dimensions; product == spec.nodes) and
/// dimension-ordered routing; the ring builder is its one-dimensional case.
Topology build_direct_torus(const ClusterSpec& spec, std::string kind, const std::vector<uint32_t>& dims);

/// The intra-node fabrics of a cluster: one switch per node when gpus_per_node > 1, nothing
/// otherwise. Builders keep a copy in their router state.
struct NodeFabrics {
  uint32_t gpus_per_node = 1;
  std::vector<uint32_t> vertex;  ///< per node, the fabric switch; empty when gpus_per_node == 1
  std::vector<LinkId> gpu_up;    ///< per GPU, its GPU->fabric link; fabric->GPU is gpu_up + 1

  /// Adds "node<i>.nvswitch" switches and GPU<->fabric duplex links (intra_Bps, intra_latency_s)
  /// to `t` when spec.gpus_per_node > 1.
  static NodeFabrics add(Topology& t, const ClusterSpec& spec);
  /// When src and dst share a node, appends GPU->fabric->GPU to `out` and returns true.
  bool route_intra(Rank src, Rank dst, std::vector<LinkId>& out) const {
    if (gpus_per_node == 1 || src / gpus_per_node != dst / gpus_per_node) return false;
    out.push_back(gpu_up[src]);
    out.push_back(gpu_up[dst] + 1);
    return true;
  }
};

/// ", 8 GPUs/node" when gpus_per_node > 1, "" otherwise (for descriptions).
std::string gpus_suffix(const ClusterSpec& spec);

}  // namespace detail
}  // namespace ccsim::topo
