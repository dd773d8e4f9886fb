// Topology builders: shapes, counts, capacities, routes (chains of shortest length against the BFS
// oracle), ECMP spread, dimension-ordered torus routing, input errors and build/route speed.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "topology/builders/builders.hpp"

namespace ccsim::topo {

// gtest prints parameters with this (found by argument-dependent lookup).
void PrintTo(const ClusterSpec& s, std::ostream* os) {
  *os << fmt::format("{{{} nodes={} gpus_per_node={} leaves={} spines={} k={} dims={}}}", s.topology, s.nodes,
                     s.gpus_per_node, s.leaves, s.spines, s.k, fmt::join(s.dims, "x"));
}

namespace {

std::optional<Topology> must_build(const ClusterSpec& spec) {
  Result<Topology> r = build_topology(spec);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return std::nullopt;
  return std::move(r).value();
}

ClusterSpec spec_of(std::string topology, uint32_t nodes, uint32_t gpus_per_node = 1) {
  ClusterSpec s;
  s.topology = std::move(topology);
  s.nodes = nodes;
  s.gpus_per_node = gpus_per_node;
  s.nic_Bps = 10e9;
  s.link_latency_s = 1e-6;
  if (gpus_per_node > 1) {
    s.intra_Bps = 300e9;
    s.intra_latency_s = 2e-7;
  }
  return s;
}

std::string spec_name(const ClusterSpec& s) {
  return fmt::format("{}_n{}_g{}_k{}_l{}_s{}_d{}", s.topology, s.nodes, s.gpus_per_node, s.k, s.leaves, s.spines,
                     fmt::join(s.dims, "x"));
}

// Checks that `path` is a chain of links from vertex src to vertex dst visiting no vertex twice.
void expect_chain(const Topology& t, Rank src, Rank dst, const std::vector<LinkId>& path) {
  SCOPED_TRACE(fmt::format("route {}->{}", src, dst));
  ASSERT_FALSE(path.empty());
  std::set<uint32_t> visited{src};
  uint32_t at = src;
  for (LinkId l : path) {
    ASSERT_LT(l, t.links().size());
    EXPECT_EQ(t.links()[l].from, at) << "link " << l << " does not continue the chain";
    at = t.links()[l].to;
    EXPECT_TRUE(visited.insert(at).second) << "vertex " << t.vertex_name(at) << " visited twice";
  }
  EXPECT_EQ(at, dst);
}

size_t bfs_hops(const Topology& t, Rank src, Rank dst) {
  std::vector<LinkId> out;
  t.bfs_route(src, dst, out);
  return out.size();
}

// --- every shape: chains of BFS-shortest length, deterministic --------------------------------------------

std::vector<ClusterSpec> small_specs() {
  std::vector<ClusterSpec> v;
  for (uint32_t g : {1u, 4u}) {
    v.push_back(spec_of("star", 1, g));
    v.push_back(spec_of("star", 7, g));
    v.push_back(spec_of("leaf_spine", 9, g));  // auto: 3 leaves, 3 spines
    auto ls = spec_of("leaf_spine", 7, g);
    ls.leaves = 3;
    ls.spines = 2;
    v.push_back(ls);
    ls.leaves = 7;
    ls.spines = 1;
    v.push_back(ls);
    v.push_back(spec_of("fat_tree", 2, g));   // k = 2
    v.push_back(spec_of("fat_tree", 16, g));  // k = 4, full
    v.push_back(spec_of("fat_tree", 11, g));  // k = 4, partial
    auto ft = spec_of("fat_tree", 30, g);
    ft.k = 6;
    v.push_back(ft);
    for (std::vector<uint32_t> dims : std::vector<std::vector<uint32_t>>{
             {4, 4}, {5, 3}, {2, 3}, {1, 5}, {2, 2}, {3, 1, 2}, {4, 3, 2}, {2, 2, 2}, {1, 1, 3}, {1, 1}}) {
      uint32_t n = 1;
      for (uint32_t d : dims) n *= d;
      auto to = spec_of("torus", n, g);
      to.dims = dims;
      v.push_back(to);
    }
    v.push_back(spec_of("torus", 12, g));  // auto dims 4x3
    for (uint32_t n : {1u, 2u, 3u, 4u, 5u, 8u}) v.push_back(spec_of("ring", n, g));
  }
  return v;
}

class EveryShape : public testing::TestWithParam<ClusterSpec> {};

TEST_P(EveryShape, RoutesAreChainsOfShortestLength) {
  const ClusterSpec& spec = GetParam();
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind(), spec.topology);
  EXPECT_FALSE(t->description().empty());
  EXPECT_EQ(t->num_ranks(), spec.nodes * spec.gpus_per_node);
  EXPECT_EQ(t->gpus_per_node(), spec.gpus_per_node);
  EXPECT_EQ(t->num_nodes(), spec.nodes);
  std::vector<LinkId> path, again;
  for (Rank s = 0; s < t->num_ranks(); ++s) {
    for (Rank d = 0; d < t->num_ranks(); ++d) {
      for (uint64_t key : {0ull, 1ull, 0xDEADBEEFull}) {
        t->route(s, d, key, path);
        if (s == d) {
          EXPECT_TRUE(path.empty());
          continue;
        }
        expect_chain(*t, s, d, path);
        EXPECT_EQ(path.size(), bfs_hops(*t, s, d)) << spec_name(spec) << " " << s << "->" << d << " key " << key;
        t->route(s, d, key, again);
        EXPECT_EQ(path, again);
      }
    }
  }
}

TEST_P(EveryShape, RandomFlowsAreChainsAndCopiesRouteAlike) {
  const ClusterSpec& spec = GetParam();
  auto original = must_build(spec);
  ASSERT_TRUE(original);
  if (original->num_ranks() < 2) {  // one rank: the only route is the empty one
    EXPECT_TRUE(original->route(0, 0, 42).empty());
    return;
  }
  // The router owns its tables: a copy routes identically after the original is gone.
  std::optional<Topology> copy = *original;
  const std::vector<LinkId> probe = original->route(0, original->num_ranks() - 1, 42);
  original.reset();
  EXPECT_EQ(copy->route(0, copy->num_ranks() - 1, 42), probe);
  std::mt19937_64 rng(1234);
  std::vector<LinkId> path;
  for (int i = 0; i < 2000; ++i) {
    const auto s = static_cast<Rank>(rng() % copy->num_ranks());
    const auto d = static_cast<Rank>(rng() % copy->num_ranks());
    const uint64_t key = rng();
    copy->route(s, d, key, path);
    if (s == d) continue;
    expect_chain(*copy, s, d, path);
  }
}

INSTANTIATE_TEST_SUITE_P(Builders, EveryShape, testing::ValuesIn(small_specs()),
                         [](const testing::TestParamInfo<ClusterSpec>& param) { return spec_name(param.param); });

// --- counts, names, capacities -------------------------------------------------------------------------

TEST(TopologyBuilders, FatTreeCountsAreTheClosedForms) {
  for (uint32_t k : {2u, 4u, 6u, 8u}) {
    SCOPED_TRACE(fmt::format("k={}", k));
    const uint32_t hosts = k * k * k / 4, switches = 5 * k * k / 4;
    auto spec = spec_of("fat_tree", hosts);
    spec.k = k;
    auto t = must_build(spec);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->num_ranks(), hosts);
    EXPECT_EQ(t->num_vertices(), hosts + switches);
    EXPECT_EQ(t->links().size(), 2u * 3 * hosts);  // host-edge, edge-agg, agg-core: k^3/4 cables each
    EXPECT_NE(t->description().find(fmt::format("k={}, {} hosts, {} switches", k, hosts, switches)), std::string::npos)
        << t->description();
  }
  // Partially filled (auto k = 6 for 17 nodes) with 2 GPUs per node: all switches, fabrics, G NICs per node.
  auto spec = spec_of("fat_tree", 17, 2);
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->num_vertices(), 34u + 45 + 17);
  EXPECT_EQ(t->links().size(), 2u * (34 + 2 * 54 + 34));  // NICs, edge-agg + agg-core, GPU-fabric
  EXPECT_EQ(t->vertex_name(34), "pod0.edge0");
  EXPECT_EQ(t->vertex_name(34 + 3), "pod0.agg0");
  EXPECT_EQ(t->vertex_name(34 + 6 + 5), "pod1.agg2");
  EXPECT_EQ(t->vertex_name(34 + 36 + 2), "core2");
  EXPECT_EQ(t->vertex_name(34 + 45 + 5), "node5.nvswitch");
}

TEST(TopologyBuilders, AutoParametersFollowTheDocumentedRules) {
  // fat_tree: smallest even k with k^3/4 >= nodes.
  for (auto [nodes, k] :
       std::vector<std::pair<uint32_t, uint32_t>>{{1, 2}, {2, 2}, {3, 4}, {16, 4}, {17, 6}, {128, 8}, {129, 10}}) {
    auto t = must_build(spec_of("fat_tree", nodes));
    ASSERT_TRUE(t);
    EXPECT_NE(t->description().find(fmt::format("k={},", k)), std::string::npos) << nodes << ": " << t->description();
    EXPECT_EQ(t->num_vertices(), nodes + 5 * k * k / 4);
  }
  // leaf_spine: ceil(sqrt(nodes)) leaves, ceil(nodes / leaves) spines, node n on leaf n * leaves / nodes.
  auto t = must_build(spec_of("leaf_spine", 8));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->num_vertices(), 8u + 3 + 3);
  EXPECT_EQ(t->vertex_name(8), "leaf0");
  EXPECT_EQ(t->vertex_name(13), "spine2");
  const std::vector<uint32_t> leaf_of = {0, 0, 0, 1, 1, 1, 2, 2};
  for (Rank r = 0; r < 8; ++r) EXPECT_EQ(t->links()[t->route(r, (r + 4) % 8)[0]].to, 8 + leaf_of[r]) << r;
  // torus: 2D, x = nodes / a with a the largest divisor <= sqrt(nodes).
  for (auto [nodes, shape] :
       std::vector<std::pair<uint32_t, std::string>>{{8, "4x2"}, {16, "4x4"}, {7, "7x1"}, {1, "1x1"}}) {
    auto tt = must_build(spec_of("torus", nodes));
    ASSERT_TRUE(tt);
    EXPECT_NE(tt->description().find("torus " + shape + ","), std::string::npos) << tt->description();
  }
}

TEST(TopologyBuilders, StarLeafSpineTorusRingCounts) {
  auto star = must_build(spec_of("star", 5));
  ASSERT_TRUE(star);
  EXPECT_EQ(star->num_vertices(), 6u);
  EXPECT_EQ(star->links().size(), 10u);
  EXPECT_EQ(star->vertex_name(5), "switch");

  auto ls = spec_of("leaf_spine", 8, 2);
  ls.leaves = 4;
  ls.spines = 2;
  auto t = must_build(ls);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->num_vertices(), 16u + 4 + 2 + 8);
  EXPECT_EQ(t->links().size(), 2u * (16 + 4 * 2 + 16));
  EXPECT_EQ(t->vertex_name(16 + 3), "leaf3");
  EXPECT_EQ(t->vertex_name(16 + 4 + 1), "spine1");

  // Torus cables: n per dimension of size >= 3, n/2 for size 2, none for size 1.
  const auto torus_links = [](std::vector<uint32_t> dims) {
    auto s = spec_of("torus", 1);
    s.nodes = 1;
    for (uint32_t d : dims) s.nodes *= d;
    s.dims = dims;
    auto tt = must_build(s);
    return tt ? tt->links().size() : size_t{0};
  };
  EXPECT_EQ(torus_links({4, 4}), 2u * 32);
  EXPECT_EQ(torus_links({4, 2, 1}), 2u * (8 + 4));
  EXPECT_EQ(torus_links({2, 2, 2}), 2u * 12);
  EXPECT_EQ(torus_links({3, 3, 3}), 2u * 81);
  EXPECT_EQ(torus_links({1, 1}), 0u);
  for (auto [n, cables] : std::vector<std::pair<uint32_t, size_t>>{{1, 0}, {2, 1}, {3, 3}, {6, 6}}) {
    auto r = must_build(spec_of("ring", n));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->links().size(), 2 * cables) << n;
    EXPECT_EQ(r->num_vertices(), n);
  }
  // G > 1: the routers are the node fabrics; GPU vertices only link to their fabric.
  auto r4 = must_build(spec_of("ring", 4, 2));
  ASSERT_TRUE(r4);
  EXPECT_EQ(r4->num_vertices(), 8u + 4);
  EXPECT_EQ(r4->links().size(), 2u * (8 + 4));
  for (const Link& l : r4->links()) {
    if (l.from < 8) {
      EXPECT_EQ(r4->vertex_name(l.to), fmt::format("node{}.nvswitch", l.from / 2));
    }
  }
}

TEST(TopologyBuilders, CapacitiesAndLatenciesAsSpecified) {
  auto spec = spec_of("leaf_spine", 8, 2);
  spec.leaves = 2;
  spec.spines = 2;
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  for (const Link& l : t->links()) {
    const bool fabric = t->vertex_name(l.from).ends_with("nvswitch") || t->vertex_name(l.to).ends_with("nvswitch");
    const bool uplink = t->vertex_name(l.from).starts_with("spine") || t->vertex_name(l.to).starts_with("spine");
    if (fabric) {
      EXPECT_EQ(l.capacity_Bps, 300e9);
      EXPECT_EQ(l.latency_s, 2e-7);
    } else if (uplink) {
      EXPECT_EQ(l.capacity_Bps, 4 * 2 * 10e9 / 2);  // non-blocking: hosts_per_leaf * G * nic / spines
      EXPECT_EQ(l.latency_s, 1e-6);
    } else {
      EXPECT_EQ(l.capacity_Bps, 10e9);
      EXPECT_EQ(l.latency_s, 1e-6);
    }
  }
  EXPECT_DOUBLE_EQ(t->route_latency_s(0, 1), 2 * 2e-7);   // same node: GPU->fabric->GPU
  EXPECT_DOUBLE_EQ(t->route_latency_s(0, 2), 2 * 1e-6);   // same leaf
  EXPECT_DOUBLE_EQ(t->route_latency_s(0, 15), 4 * 1e-6);  // across a spine
  spec.uplink_Bps = 7e9;
  t = must_build(spec);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->links()[t->route(0, 15)[1]].capacity_Bps, 7e9);

  // Fat-tree tiers carry a node's NIC bandwidth; torus links carry nic_Bps.
  auto ft = must_build(spec_of("fat_tree", 16, 4));
  ASSERT_TRUE(ft);
  const auto p = ft->route(0, 63, 5);  // pod 0 -> pod 3
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(ft->links()[p[0]].capacity_Bps, 10e9);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(ft->links()[p[i]].capacity_Bps, 4 * 10e9);
  EXPECT_EQ(ft->links()[p[5]].capacity_Bps, 10e9);
  EXPECT_DOUBLE_EQ(ft->latency_s(p), 6e-6);
  auto to = must_build(spec_of("torus", 9, 2));
  ASSERT_TRUE(to);
  const auto q = to->route(0, 8);  // node 0 -> node 4 (1,1): GPU, x hop, y hop, GPU
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(to->links()[q[1]].capacity_Bps, 10e9);
  EXPECT_DOUBLE_EQ(to->latency_s(q), 2 * 2e-7 + 2 * 1e-6);
}

TEST(TopologyBuilders, IntraNodeRoutesAvoidTheNetwork) {
  for (const char* kind : {"star", "leaf_spine", "fat_tree", "torus", "ring"}) {
    SCOPED_TRACE(kind);
    auto t = must_build(spec_of(kind, 6, 4));
    ASSERT_TRUE(t);
    for (Rank s = 0; s < t->num_ranks(); ++s) {
      for (Rank d = 0; d < t->num_ranks(); ++d) {
        if (s == d) continue;
        const auto path = t->route(s, d, s * 31 + d);
        const bool same_node = s / 4 == d / 4;
        for (LinkId l : path) {
          const bool fabric_link = t->vertex_name(t->links()[l].from).ends_with(".nvswitch") ||
                                   t->vertex_name(t->links()[l].to).ends_with(".nvswitch");
          if (same_node) {
            EXPECT_TRUE(fabric_link) << s << "->" << d;
            EXPECT_EQ(t->links()[l].capacity_Bps, 300e9);
          }
        }
        if (same_node) {
          ASSERT_EQ(path.size(), 2u);
          EXPECT_EQ(t->vertex_name(t->links()[path[0]].to), fmt::format("node{}.nvswitch", s / 4));
        } else if (t->kind() != "torus" && t->kind() != "ring") {
          // Switched networks: inter-node traffic leaves on the GPU's own NIC, never via the fabric.
          for (LinkId l : path) EXPECT_FALSE(t->vertex_name(t->links()[l].to).ends_with(".nvswitch"));
          EXPECT_EQ(t->links()[path.front()].capacity_Bps, 10e9);
        }
      }
    }
  }
}

TEST(TopologyBuilders, MakeStarKeepsItsLinkLayout) {
  const Topology t = make_star(4, 5e9, 3e-6);
  EXPECT_EQ(t.kind(), "star");
  EXPECT_EQ(t.num_vertices(), 5u);
  ASSERT_EQ(t.links().size(), 8u);
  for (Rank r = 0; r < 4; ++r) {
    EXPECT_EQ(t.links()[2 * r].from, r);
    EXPECT_EQ(t.links()[2 * r].to, 4u);
    EXPECT_EQ(t.links()[2 * r + 1].to, r);
    EXPECT_EQ(t.links()[2 * r].capacity_Bps, 5e9);
  }
  EXPECT_EQ(t.route(1, 3), (std::vector<LinkId>{2, 7}));
  EXPECT_DOUBLE_EQ(t.route_latency_s(0, 2), 6e-6);
}

// Copies share the graph until one of them adds to it; the other then keeps its own graph.
TEST(TopologyBuilders, CopiesShareTheGraphUntilOneIsModified) {
  const Topology original = make_star(3, 1e9, 1e-6);
  Topology copy = original;
  EXPECT_EQ(&copy.graph(), &original.graph());
  const uint32_t extra = copy.add_switch("extra");
  copy.add_duplex(0, extra, 1e9, 0);
  EXPECT_NE(&copy.graph(), &original.graph());
  EXPECT_EQ(original.num_vertices(), 4u);
  EXPECT_EQ(boost::num_edges(original.graph()), 6u);
  EXPECT_EQ(copy.num_vertices(), 5u);
  EXPECT_EQ(boost::num_edges(copy.graph()), 8u);
  EXPECT_EQ(copy.vertex_name(3), "switch");
  EXPECT_EQ(copy.vertex_name(extra), "extra");
  std::vector<LinkId> path;
  copy.bfs_route(0, 2, path);  // the rebuilt graph keeps link ids
  EXPECT_EQ(path, (std::vector<LinkId>{0, 5}));
  path.clear();  // bfs_route appends
  original.bfs_route(1, 2, path);
  EXPECT_EQ(path, (std::vector<LinkId>{2, 5}));
}

TEST(TopologyBuilders, KnownTopologiesListsEveryBuilder) {
  std::vector<std::string> names;
  for (const auto& info : known_topologies()) {
    names.push_back(info.name);
    EXPECT_FALSE(info.description.empty()) << info.name;
    auto t = must_build(spec_of(info.name, 4));
    ASSERT_TRUE(t) << info.name;
    EXPECT_EQ(t->kind(), info.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"star", "leaf_spine", "fat_tree", "torus", "ring"}));
}

// --- ECMP ----------------------------------------------------------------------------------------------

TEST(TopologyBuilders, FatTreeEcmpSpreadsOverAggregationAndCoreSwitches) {
  constexpr uint32_t k = 8, h = k / 2, hosts = k * k * k / 4;
  auto spec = spec_of("fat_tree", hosts);
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  constexpr int kKeys = 20000;
  for (auto [src, dst] : std::vector<std::pair<Rank, Rank>>{{0, hosts - 1}, {5, 40}, {17, 100}}) {
    SCOPED_TRACE(fmt::format("{}->{}", src, dst));
    std::map<std::string, int> aggs, cores;
    for (int key = 0; key < kKeys; ++key) {
      const auto path = t->route(src, dst, static_cast<uint64_t>(key));
      ASSERT_EQ(path.size(), 6u);  // inter-pod: host-edge-agg-core-agg-edge-host
      const std::string agg = t->vertex_name(t->links()[path[1]].to);
      const std::string core = t->vertex_name(t->links()[path[2]].to);
      const std::string down_agg = t->vertex_name(t->links()[path[3]].to);
      // The core reached from agg a only links to agg a of the destination pod.
      EXPECT_EQ(agg.substr(agg.find('.')), down_agg.substr(down_agg.find('.')));
      ++aggs[agg];
      ++cores[core];
      EXPECT_EQ(path, t->route(src, dst, static_cast<uint64_t>(key)));  // same key, same route
    }
    ASSERT_EQ(aggs.size(), h);
    ASSERT_EQ(cores.size(), h * h);
    for (const auto& [name, n] : aggs) EXPECT_NEAR(n, kKeys / h, 0.3 * kKeys / h) << name;
    for (const auto& [name, n] : cores) EXPECT_NEAR(n, kKeys / (h * h), 0.3 * kKeys / (h * h)) << name;
  }
  // Same edge: no aggregation switch; same pod: one of the pod's aggregation switches, all used.
  EXPECT_EQ(t->route(0, 3, 7).size(), 2u);
  std::set<std::string> pod_aggs;
  for (uint64_t key = 0; key < 1000; ++key) {
    const auto path = t->route(0, 12, key);  // edge 0 -> edge 3 of pod 0
    ASSERT_EQ(path.size(), 4u);
    pod_aggs.insert(t->vertex_name(t->links()[path[1]].to));
  }
  EXPECT_EQ(pod_aggs, (std::set<std::string>{"pod0.agg0", "pod0.agg1", "pod0.agg2", "pod0.agg3"}));
}

TEST(TopologyBuilders, LeafSpineEcmpUsesEverySpine) {
  auto spec = spec_of("leaf_spine", 16);
  spec.leaves = 4;
  spec.spines = 5;
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  std::map<std::string, int> spines;
  for (uint64_t key = 0; key < 10000; ++key) {
    const auto path = t->route(1, 14, key);
    ASSERT_EQ(path.size(), 4u);
    ++spines[t->vertex_name(t->links()[path[1]].to)];
  }
  ASSERT_EQ(spines.size(), 5u);
  for (const auto& [name, n] : spines) EXPECT_NEAR(n, 2000, 600) << name;
}

// --- torus and ring: dimension order, wrap-around, ties -----------------------------------------------

struct TorusCoords {
  std::vector<uint32_t> dims;
  std::vector<uint32_t> of(uint32_t node) const {
    std::vector<uint32_t> c;
    for (uint32_t d : dims) {
      c.push_back(node % d);
      node /= d;
    }
    return c;
  }
};

TEST(TopologyBuilders, TorusRoutesInDimensionOrderTheShortWayRound) {
  for (uint32_t g : {1u, 2u}) {
    for (std::vector<uint32_t> dims : std::vector<std::vector<uint32_t>>{{5, 4, 3}, {6, 5}, {2, 4, 1}}) {
      auto spec = spec_of("torus", 1, g);
      spec.dims = dims;
      spec.nodes = 1;
      for (uint32_t d : dims) spec.nodes *= d;
      auto t = must_build(spec);
      ASSERT_TRUE(t);
      const TorusCoords tc{dims};
      // The router vertex of node n: the GPU itself (G == 1) or its fabric.
      std::map<uint32_t, uint32_t> node_of_router;
      for (uint32_t n = 0; n < spec.nodes; ++n) node_of_router[g == 1 ? n : t->num_ranks() + n] = n;
      std::set<LinkId> wrap_links_used;
      for (uint32_t s = 0; s < spec.nodes; ++s) {
        for (uint32_t d = 0; d < spec.nodes; ++d) {
          if (s == d) continue;
          SCOPED_TRACE(fmt::format("g={} node {}->{}", g, s, d));
          auto path = t->route(s * g, d * g, 99);
          if (g > 1) {  // strip GPU->fabric and fabric->GPU
            ASSERT_GE(path.size(), 2u);
            path = std::vector<LinkId>(path.begin() + 1, path.end() - 1);
          }
          std::vector<uint32_t> at = tc.of(s);
          const std::vector<uint32_t> goal = tc.of(d);
          size_t last_dim = 0;
          std::vector<int> moved(dims.size(), 0);  // signed hops per dimension
          for (LinkId l : path) {
            ASSERT_TRUE(node_of_router.count(t->links()[l].from) && node_of_router.count(t->links()[l].to));
            const auto from = tc.of(node_of_router[t->links()[l].from]);
            const auto to = tc.of(node_of_router[t->links()[l].to]);
            EXPECT_EQ(from, at);
            size_t changed = dims.size(), nchanged = 0;
            for (size_t i = 0; i < dims.size(); ++i) {
              if (from[i] != to[i]) {
                changed = i;
                ++nchanged;
              }
            }
            ASSERT_EQ(nchanged, 1u);
            EXPECT_GE(changed, last_dim) << "dimension order violated";
            last_dim = changed;
            const uint32_t n = dims[changed];
            const bool plus = to[changed] == (from[changed] + 1) % n;
            EXPECT_TRUE(plus || from[changed] == (to[changed] + 1) % n) << "not a neighbour hop";
            moved[changed] += plus ? 1 : -1;
            if ((plus && to[changed] == 0) || (!plus && from[changed] == 0)) wrap_links_used.insert(l);
            at = to;
          }
          EXPECT_EQ(at, goal);
          for (size_t i = 0; i < dims.size(); ++i) {
            const uint32_t n = dims[i], delta = (goal[i] + n - tc.of(s)[i]) % n;
            const int want = delta == 0 ? 0 : (2 * delta <= n ? static_cast<int>(delta) : -static_cast<int>(n - delta));
            EXPECT_EQ(moved[i], want) << "dimension " << i;
          }
        }
      }
      EXPECT_FALSE(wrap_links_used.empty());
    }
  }
}

TEST(TopologyBuilders, TorusAndRingTiesGoThePositiveWay) {
  auto spec = spec_of("torus", 16);
  spec.dims = {4, 4};
  auto t = must_build(spec);
  ASSERT_TRUE(t);
  const auto hops = [&](Rank s, Rank d) {
    std::vector<uint32_t> v{s};
    for (LinkId l : t->route(s, d)) v.push_back(t->links()[l].to);
    return v;
  };
  EXPECT_EQ(hops(0, 2), (std::vector<uint32_t>{0, 1, 2}));          // exactly half: +x
  EXPECT_EQ(hops(2, 0), (std::vector<uint32_t>{2, 3, 0}));          // exactly half: +x, through the wrap link
  EXPECT_EQ(hops(0, 3), (std::vector<uint32_t>{0, 3}));             // -x through the wrap link
  EXPECT_EQ(hops(0, 10), (std::vector<uint32_t>{0, 1, 2, 6, 10}));  // x first, then y
  EXPECT_EQ(hops(13, 0), (std::vector<uint32_t>{13, 12, 0}));       // x then y (+y wraps 3 -> 0)

  auto r = must_build(spec_of("ring", 6));
  ASSERT_TRUE(r);
  const auto ring_hops = [&](Rank s, Rank d) {
    std::vector<uint32_t> v{s};
    for (LinkId l : r->route(s, d)) v.push_back(r->links()[l].to);
    return v;
  };
  EXPECT_EQ(ring_hops(0, 3), (std::vector<uint32_t>{0, 1, 2, 3}));  // tie: clockwise
  EXPECT_EQ(ring_hops(4, 1), (std::vector<uint32_t>{4, 5, 0, 1}));  // tie: clockwise, wrapping
  EXPECT_EQ(ring_hops(0, 4), (std::vector<uint32_t>{0, 5, 4}));
  EXPECT_EQ(ring_hops(5, 1), (std::vector<uint32_t>{5, 0, 1}));
  auto r2 = must_build(spec_of("ring", 2));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->route(0, 1), (std::vector<LinkId>{0}));
  EXPECT_EQ(r2->route(1, 0), (std::vector<LinkId>{1}));
}

// --- input errors ----------------------------------------------------------------------------------------

struct BadSpec {
  std::string name;
  ClusterSpec spec;
  std::string message_start;
};

std::vector<BadSpec> bad_specs() {
  std::vector<BadSpec> v;
  const auto add = [&](std::string name, std::string topology, auto mutate, std::string start) {
    ClusterSpec s = spec_of(std::move(topology), 8);
    mutate(s);
    v.push_back({std::move(name), s, std::move(start)});
  };
  add(
      "UnknownTopology", "mesh", [](ClusterSpec&) {},
      "topology: unknown topology 'mesh'; valid: star, leaf_spine, fat_tree, torus, ring");
  add(
      "ZeroNodes", "star", [](ClusterSpec& s) { s.nodes = 0; }, "nodes: expected >= 1");
  add(
      "ZeroGpus", "star", [](ClusterSpec& s) { s.gpus_per_node = 0; }, "gpus_per_node: expected >= 1");
  add(
      "TooManyRanks", "star",
      [](ClusterSpec& s) {
        s.nodes = 1u << 20;
        s.gpus_per_node = 2;
        s.intra_Bps = 1;
      },
      "nodes: expected nodes * gpus_per_node <= 1048576");
  add(
      "ZeroNic", "star", [](ClusterSpec& s) { s.nic_Bps = 0; }, "nic_Bps: expected a finite bandwidth > 0, got 0");
  add(
      "NanNic", "ring", [](ClusterSpec& s) { s.nic_Bps = std::nan(""); }, "nic_Bps:");
  add(
      "NegativeLatency", "star", [](ClusterSpec& s) { s.link_latency_s = -1e-6; }, "link_latency_s:");
  add(
      "MissingIntra", "star", [](ClusterSpec& s) { s.gpus_per_node = 2; },
      "intra_Bps: expected a finite bandwidth > 0 when gpus_per_node > 1 (2), got 0");
  add(
      "NegativeIntraLatency", "star", [](ClusterSpec& s) { s.intra_latency_s = -1; }, "intra_latency_s:");
  add(
      "OddK", "fat_tree",
      [](ClusterSpec& s) {
        s.nodes = 128;
        s.k = 5;
      },
      "k: expected an even number >= 2 with k^3/4 >= nodes (128), got 5");
  add(
      "SmallK", "fat_tree",
      [](ClusterSpec& s) {
        s.nodes = 17;
        s.k = 4;
      },
      "k: expected an even number >= 2 with k^3/4 >= nodes (17), got 4");
  add(
      "HugeK", "fat_tree", [](ClusterSpec& s) { s.k = 1000; }, "k: expected at most 256, got 1000");
  add(
      "TooManyLeaves", "leaf_spine", [](ClusterSpec& s) { s.leaves = 9; },
      "leaves: expected 0 (auto) or 1..nodes (8), got 9");
  add(
      "NegativeUplink", "leaf_spine", [](ClusterSpec& s) { s.uplink_Bps = -1; }, "uplink_Bps:");
  add(
      "OneDim", "torus", [](ClusterSpec& s) { s.dims = {8}; }, "dims: expected 2 or 3 sizes");
  add(
      "FourDims", "torus",
      [](ClusterSpec& s) {
        s.dims = {2, 2, 2, 1};
      },
      "dims: expected 2 or 3 sizes");
  add(
      "ZeroDim", "torus",
      [](ClusterSpec& s) {
        s.dims = {8, 0};
      },
      "dims: expected sizes >= 1, got 8x0");
  add(
      "WrongProduct", "torus",
      [](ClusterSpec& s) {
        s.dims = {3, 3};
      },
      "dims: expected sizes whose product equals nodes (8), got 3x3");
  add(
      "LeavesOnStar", "star", [](ClusterSpec& s) { s.leaves = 2; },
      "leaves: only applies to topology 'leaf_spine', got 2 with topology 'star'");
  add(
      "KOnLeafSpine", "leaf_spine", [](ClusterSpec& s) { s.k = 4; }, "k: only applies to topology 'fat_tree'");
  add(
      "DimsOnRing", "ring",
      [](ClusterSpec& s) {
        s.dims = {2, 4};
      },
      "dims: only applies to topology 'torus'");
  return v;
}

void PrintTo(const BadSpec& b, std::ostream* os) { *os << b.name; }

class InvalidSpec : public testing::TestWithParam<BadSpec> {};

TEST_P(InvalidSpec, FailsNamingTheField) {
  const BadSpec& bad = GetParam();
  const Result<Topology> r = build_topology(bad.spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind(bad.message_start, 0), 0u) << r.status().message();
  EXPECT_EQ(check_cluster_spec(bad.spec).message(), r.status().message());
}

INSTANTIATE_TEST_SUITE_P(Builders, InvalidSpec, testing::ValuesIn(bad_specs()),
                         [](const testing::TestParamInfo<BadSpec>& param) { return param.param.name; });

TEST(TopologyBuilders, ReportsEveryErrorAtOnce) {
  ClusterSpec s = spec_of("fat_tree", 0);
  s.nic_Bps = -1;
  s.dims = {2, 2};
  const Status st = check_cluster_spec(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nodes: expected >= 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("; nic_Bps:"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("; dims: only applies"), std::string::npos) << st.message();
  EXPECT_TRUE(check_cluster_spec(spec_of("torus", 8)).ok());
}

// --- scale ---------------------------------------------------------------------------------------------

TEST(TopologyBuilders, LargeFatTreesBuildAndRouteQuickly) {
  ClusterSpec by_gpus = spec_of("fat_tree", 512, 8);  // 4096 GPUs, auto k = 14
  ClusterSpec by_k = spec_of("fat_tree", 4096);       // 4096 hosts in a k = 26 tree
  by_k.k = 26;
  for (const ClusterSpec& spec : {by_gpus, by_k}) {
    SCOPED_TRACE(spec_name(spec));
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto t = must_build(spec);
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->num_ranks(), 4096u);
    EXPECT_LT(build_s, 1.0);
    std::mt19937_64 rng(7);
    std::vector<LinkId> path;
    uint64_t hops = 0;
    const auto t1 = Clock::now();
    constexpr int kFlows = 1'000'000;
    for (int i = 0; i < kFlows; ++i) {
      const auto s = static_cast<Rank>(rng() % 4096), d = static_cast<Rank>(rng() % 4096);
      t->route(s, d, rng(), path);
      hops += path.size();
    }
    const double route_s = std::chrono::duration<double>(Clock::now() - t1).count();
    EXPECT_LT(route_s, 5.0);
    const double mean_hops = static_cast<double>(hops) / kFlows;
    EXPECT_GT(mean_hops, 4.0);  // most random pairs cross pods: 6 links
    EXPECT_LT(mean_hops, 6.0);
    std::printf("[          ] %s: build %.3f s, 1e6 routes %.3f s, %.2f links/route\n", t->description().c_str(),
                build_s, route_s, mean_hops);
  }
}

}  // namespace
}  // namespace ccsim::topo
