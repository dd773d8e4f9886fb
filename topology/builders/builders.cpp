// Dispatch from ClusterSpec::topology to the builders, the checks shared by all of them, and the
// list `ccsim list` prints.
#include "topology/builders/builders.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace ccsim::topo {
namespace {

struct BuilderEntry {
  TopologyInfo info;
  void (*check)(const ClusterSpec&, std::vector<SpecProblem>&);
  Topology (*build)(const ClusterSpec&);
};

// The one explicit list of builders (STYLE rule 1: no self-registration).
const std::vector<BuilderEntry>& builders() {
  static const std::vector<BuilderEntry> kBuilders = {
      {{"star", "one switch; every GPU on its own full-duplex NIC link of nic_Bps"},
       detail::check_star,
       detail::build_star},
      {{"leaf_spine", "two-tier Clos: nodes spread over leaves in order, every leaf linked to every spine; ECMP"},
       detail::check_leaf_spine,
       detail::build_leaf_spine},
      {{"fat_tree", "k-ary fat-tree: k pods of k/2 edge + k/2 aggregation switches, (k/2)^2 cores; ECMP"},
       detail::check_fat_tree,
       detail::build_fat_tree},
      {{"torus", "2D/3D torus of nodes with wrap-around links; dimension-ordered shortest routing"},
       detail::check_torus,
       detail::build_torus},
      {{"ring", "bidirectional ring of nodes; shortest direction, ties clockwise"},
       detail::check_ring,
       detail::build_ring},
  };
  return kBuilders;
}

const BuilderEntry* find_builder(const std::string& name) {
  for (const auto& b : builders())
    if (b.info.name == name) return &b;
  return nullptr;
}

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

// Shape-specific fields must keep their defaults for the other shapes (never ignored silently).
void check_unused_fields(const ClusterSpec& s, std::vector<SpecProblem>& errors) {
  const auto unused = [&](const char* field, const char* owner, const std::string& got) {
    errors.push_back(
        {field, fmt::format("only applies to topology '{}', got {} with topology '{}'", owner, got, s.topology)});
  };
  if (s.topology != "leaf_spine") {
    if (s.leaves != 0) unused("leaves", "leaf_spine", std::to_string(s.leaves));
    if (s.spines != 0) unused("spines", "leaf_spine", std::to_string(s.spines));
    if (s.uplink_Bps != 0) unused("uplink_Bps", "leaf_spine", fmt::format("{}", s.uplink_Bps));
  }
  if (s.topology != "fat_tree" && s.k != 0) unused("k", "fat_tree", std::to_string(s.k));
  if (s.topology != "torus" && !s.dims.empty()) unused("dims", "torus", fmt::format("{} sizes", s.dims.size()));
}

// The checks every shape shares: sizes, bandwidths, latencies.
bool check_common_fields(const ClusterSpec& spec, std::vector<SpecProblem>& errors) {
  bool sizes_ok = true;
  if (spec.nodes < 1) {
    errors.push_back({"nodes", "expected >= 1, got 0"});
    sizes_ok = false;
  }
  if (spec.gpus_per_node < 1) {
    errors.push_back({"gpus_per_node", "expected >= 1, got 0"});
    sizes_ok = false;
  }
  if (sizes_ok && uint64_t{spec.nodes} * spec.gpus_per_node > kMaxRanks) {
    errors.push_back({"nodes", fmt::format("expected nodes * gpus_per_node <= {}, got {} * {}", kMaxRanks, spec.nodes,
                                           spec.gpus_per_node)});
    sizes_ok = false;
  }
  if (!(std::isfinite(spec.nic_Bps) && spec.nic_Bps > 0))
    errors.push_back({"nic_Bps", fmt::format("expected a finite bandwidth > 0, got {}", spec.nic_Bps)});
  if (!finite_at_least(spec.link_latency_s, 0))
    errors.push_back({"link_latency_s", fmt::format("expected a finite latency >= 0, got {}", spec.link_latency_s)});
  if (spec.gpus_per_node > 1 && !(std::isfinite(spec.intra_Bps) && spec.intra_Bps > 0)) {
    errors.push_back({"intra_Bps", fmt::format("expected a finite bandwidth > 0 when gpus_per_node > 1 ({}), got {}",
                                               spec.gpus_per_node, spec.intra_Bps)});
  } else if (!finite_at_least(spec.intra_Bps, 0)) {
    errors.push_back({"intra_Bps", fmt::format("expected a finite bandwidth >= 0, got {}", spec.intra_Bps)});
  }
  if (!finite_at_least(spec.intra_latency_s, 0))
    errors.push_back({"intra_latency_s", fmt::format("expected a finite latency >= 0, got {}", spec.intra_latency_s)});
  return sizes_ok;
}

}  // namespace

std::vector<SpecProblem> cluster_spec_problems(const ClusterSpec& spec) {
  std::vector<SpecProblem> errors;
  const BuilderEntry* entry = find_builder(spec.topology);
  if (entry == nullptr) {
    std::vector<std::string> valid;
    for (const auto& b : builders()) valid.push_back(b.info.name);
    errors.push_back(
        {"topology", fmt::format("unknown topology '{}'; valid: {}", spec.topology, fmt::join(valid, ", "))});
  }
  const bool sizes_ok = check_common_fields(spec, errors);
  if (entry != nullptr) {
    check_unused_fields(spec, errors);
    // Shape checks compare against nodes; they only make sense once the sizes are valid.
    if (sizes_ok) entry->check(spec, errors);
  }
  return errors;
}

std::string cluster_field_pointer(std::string_view field) {
  static const std::pair<std::string_view, std::string_view> kPointers[] = {
      {"topology", "/topology"},           {"nodes", "/nodes"},
      {"gpus_per_node", "/gpus_per_node"}, {"nic_Bps", "/nic_bandwidth"},
      {"link_latency_s", "/link_latency"}, {"intra_Bps", "/intra_node/bandwidth"},
      {"intra_latency_s", "/intra_node/latency"}, {"leaves", "/leaf_spine/leaves"},
      {"spines", "/leaf_spine/spines"},    {"uplink_Bps", "/leaf_spine/uplink_bandwidth"},
      {"k", "/fat_tree/k"},                {"dims", "/torus/dims"}};
  for (const auto& [f, p] : kPointers)
    if (f == field) return std::string(p);
  return "";
}

Status check_cluster_spec(const ClusterSpec& spec) {
  const std::vector<SpecProblem> problems = cluster_spec_problems(spec);
  if (problems.empty()) return ok_status();
  std::vector<std::string> parts;
  for (const SpecProblem& p : problems) parts.push_back(p.field + ": " + p.message);
  return invalid_argument(fmt::format("{}", fmt::join(parts, "; ")));
}

Result<Topology> build_topology(const ClusterSpec& spec) {
  CCSIM_RETURN_IF_ERROR(check_cluster_spec(spec));
  return find_builder(spec.topology)->build(spec);
}

Topology make_star(uint32_t ranks, double nic_Bps, double link_latency_s) {
  ClusterSpec spec;
  spec.topology = "star";
  spec.nodes = ranks;
  spec.nic_Bps = nic_Bps;
  spec.link_latency_s = link_latency_s;
  return detail::build_star(spec);
}

const std::vector<TopologyInfo>& known_topologies() {
  static const std::vector<TopologyInfo> kTopologies = [] {
    std::vector<TopologyInfo> v;
    for (const auto& b : builders()) v.push_back(b.info);
    return v;
  }();
  return kTopologies;
}

namespace detail {

NodeFabrics NodeFabrics::add(Topology& t, const ClusterSpec& spec) {
  NodeFabrics f;
  f.gpus_per_node = spec.gpus_per_node;
  if (spec.gpus_per_node == 1) return f;
  f.vertex.resize(spec.nodes);
  for (uint32_t n = 0; n < spec.nodes; ++n) f.vertex[n] = t.add_switch(fmt::format("node{}.nvswitch", n));
  f.gpu_up.resize(t.num_ranks());
  for (Rank r = 0; r < t.num_ranks(); ++r)
    f.gpu_up[r] = t.add_duplex(r, f.vertex[r / spec.gpus_per_node], spec.intra_Bps, spec.intra_latency_s);
  return f;
}

std::string gpus_suffix(const ClusterSpec& spec) {
  return spec.gpus_per_node > 1 ? fmt::format(", {} GPUs/node", spec.gpus_per_node) : std::string();
}

}  // namespace detail
}  // namespace ccsim::topo
