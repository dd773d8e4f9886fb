#pragma once
/// \file
/// The typed scenario: what a scenario JSON file means once loaded. Every field is declared once,
/// in the visit() functions below, with its JSON key, type, range, unit and description; the
/// loader (JSON → Scenario, with strict validation), the writer (Scenario → resolved JSON) and the
/// JSON Schema generator are three visitors over those declarations, so they cannot drift apart.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.hpp"

namespace ccsim::app {

/// GPU model used to time compression kernels.
struct GpuConfig {
  std::string kernel_cost = "ideal";  ///< "ideal" (free) or "roofline"
  double memory_bandwidth_Bps = 2e12;
  double kernel_launch_s = 5e-6;
};

/// The fabric inside a multi-GPU node (NVLink/NVSwitch-like).
struct IntraNodeConfig {
  double bandwidth_Bps = 300e9;
  double latency_s = 0.5e-6;
};

/// Two-tier leaf-spine shape.
struct LeafSpineConfig {
  int64_t leaves = 0;        ///< 0 = automatic
  int64_t spines = 0;        ///< 0 = automatic
  double uplink_bandwidth_Bps = 0;  ///< 0 = non-blocking
};

/// k-ary fat-tree shape.
struct FatTreeConfig {
  int64_t k = 0;  ///< 0 = the smallest even k with k^3/4 >= nodes
};

/// Torus shape.
struct TorusConfig {
  std::vector<int64_t> dims;  ///< 2 or 3 sizes, product = nodes
};

/// The physical cluster.
struct ClusterConfig {
  std::string topology = "star";
  int64_t nodes = 8;
  int64_t gpus_per_node = 1;
  double nic_bandwidth_Bps = 12.5e9;
  double link_latency_s = 1e-6;
  IntraNodeConfig intra_node;
  LeafSpineConfig leaf_spine;
  FatTreeConfig fat_tree;
  TorusConfig torus;
  GpuConfig gpu;
};

/// How ranks are split into tensor-, pipeline- and data-parallel groups.
struct ParallelismConfig {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 0;  ///< 0 = world size / (tp * pp)
  std::string order = "tp-dp-pp";
};

/// Which collective to run and how it is lowered to a schedule.
struct CollectiveConfig {
  std::string operation = "allreduce";
  std::string algorithm = "ring";
  std::string group = "world";  ///< world, or every group of one parallelism dimension at once
  int64_t segments = 1;
  int64_t root = 0;
};

/// Where per-rank gradients come from.
struct GradientsConfig {
  std::string source = "synthetic";  ///< "synthetic" or "npy"
  uint64_t size_bytes = 0;           ///< synthetic: fp32 bytes per rank
  int64_t layers = 16;
  double scale_decades = 3.0;
  double correlation = 0.5;
  double envelope_sigma = 1.0;
  int64_t envelope_span = 256;
  std::vector<std::string> files;    ///< npy: one file per worker (worker w reads files[w % size])
  uint64_t numerics_memory_bytes = 8ull << 30;  ///< numerics run only if one group's buffers fit in this
};

/// One compression scheme to evaluate.
struct CompressionConfig {
  std::string scheme;
  nlohmann::json params = nlohmann::json::object();
};

/// Where outputs go.
struct OutputsConfig {
  std::string dir;  ///< default "out/<name>", relative to the working directory
  double link_timeline_bin_s = 0;  ///< > 0: links_timeline.csv with per-link utilization in bins of this width
};

/// A whole scenario.
struct Scenario {
  std::string name;
  std::string description;
  int64_t seed = 1;
  ClusterConfig cluster;
  ParallelismConfig parallelism;
  CollectiveConfig collective;
  GradientsConfig gradients;
  std::vector<CompressionConfig> compression;
  OutputsConfig outputs;
};

/// Field declarations. `V` is a visitor with the methods used below (see scenario_io.cpp).
template <class V>
void visit(V& v, GpuConfig& c) {
  v.choice("kernel_cost", c.kernel_cost, {"ideal", "roofline"},
           "how compression kernels are timed: ideal (free) or roofline (memory traffic / bandwidth + launch)");
  v.quantity("memory_bandwidth", c.memory_bandwidth_Bps, UnitKind::kBandwidth, V::kPositive,
             "GPU memory bandwidth for the roofline model");
  v.quantity("kernel_launch", c.kernel_launch_s, UnitKind::kTime, V::kNonNegative, "per-kernel launch overhead");
}

template <class V>
void visit(V& v, IntraNodeConfig& c) {
  v.quantity("bandwidth", c.bandwidth_Bps, UnitKind::kBandwidth, V::kPositive,
             "per-direction bandwidth between each GPU and its node's fabric");
  v.quantity("latency", c.latency_s, UnitKind::kTime, V::kNonNegative, "latency of each intra-node link");
}

template <class V>
void visit(V& v, LeafSpineConfig& c) {
  v.integer("leaves", c.leaves, 0, 1 << 16, "leaf switches (0 = automatic)");
  v.integer("spines", c.spines, 0, 1 << 16, "spine switches (0 = automatic)");
  v.quantity("uplink_bandwidth", c.uplink_bandwidth_Bps, UnitKind::kBandwidth, V::kNonNegative,
             "leaf-to-spine link bandwidth (0 = non-blocking)");
}

template <class V>
void visit(V& v, FatTreeConfig& c) {
  v.integer("k", c.k, 0, 256, "switch radix, even (0 = the smallest k with k^3/4 >= nodes)");
}

template <class V>
void visit(V& v, TorusConfig& c) {
  v.integer_list("dims", c.dims, 1, 1 << 16, "2 or 3 ring sizes whose product is the number of nodes");
}

template <class V>
void visit(V& v, ClusterConfig& c) {
  v.choice("topology", c.topology, V::topology_names(), "cluster shape");
  v.integer("nodes", c.nodes, 1, 1 << 20, "number of nodes (hosts) on the inter-node network");
  v.integer("gpus_per_node", c.gpus_per_node, 1, 1024, "GPUs (ranks) per node; ranks = nodes * gpus_per_node");
  v.quantity("nic_bandwidth", c.nic_bandwidth_Bps, UnitKind::kBandwidth, V::kPositive,
             "per-direction bandwidth of each GPU's network link (torus/ring: of each inter-node link)");
  v.quantity("link_latency", c.link_latency_s, UnitKind::kTime, V::kNonNegative, "latency of each inter-node link");
  v.object("intra_node", c.intra_node, "intra-node fabric, used when gpus_per_node > 1");
  v.object("leaf_spine", c.leaf_spine, "leaf_spine topology shape");
  v.object("fat_tree", c.fat_tree, "fat_tree topology shape");
  v.object("torus", c.torus, "torus topology shape");
  v.object("gpu", c.gpu, "GPU compute model");
}

template <class V>
void visit(V& v, ParallelismConfig& c) {
  v.integer("tp", c.tp, 1, 1 << 20, "tensor-parallel degree");
  v.integer("pp", c.pp, 1, 1 << 20, "pipeline-parallel degree");
  v.integer("dp", c.dp, 0, 1 << 20, "data-parallel degree (0 = ranks / (tp * pp))");
  v.choice("order", c.order, {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"},
           "rank order, fastest-varying dimension first (Megatron: tp-dp-pp)");
}

template <class V>
void visit(V& v, CollectiveConfig& c) {
  v.choice("operation", c.operation, V::operation_names(), "collective operation");
  v.choice("algorithm", c.algorithm, V::algorithm_names(), "collective algorithm lowering the operation to a schedule");
  v.choice("group", c.group, {"world", "tp", "pp", "dp"},
           "ranks taking part: all of them, or every tensor/pipeline/data-parallel group at once");
  v.integer("segments", c.segments, 1, 1 << 16, "pipelined segments per chunk");
  v.integer("root", c.root, 0, 1 << 20, "broadcast: source rank within the group");
}

template <class V>
void visit(V& v, GradientsConfig& c) {
  v.choice("source", c.source, {"synthetic", "npy"}, "synthetic generator or per-worker .npy files");
  v.bytes("size", c.size_bytes, "synthetic: fp32 gradient bytes per rank (a multiple of 4)");
  v.integer("layers", c.layers, 1, 1 << 20, "synthetic: number of layers");
  v.number("scale_decades", c.scale_decades, 0.0, 30.0, "synthetic: layer scales span this many decades");
  v.number("correlation", c.correlation, 0.0, 1.0, "synthetic: correlation between two workers' values");
  v.number("envelope_sigma", c.envelope_sigma, 0.0, 5.0, "synthetic: sigma of the lognormal local-magnitude envelope");
  v.integer("envelope_span", c.envelope_span, 1, 1 << 30, "synthetic: elements sharing one envelope value");
  v.path_list("files", c.files, "npy: per-worker gradient files (float32/float16), relative to the scenario file");
  v.bytes("numerics_memory", c.numerics_memory_bytes,
          "the numerics interpreter runs (one collective group, real data) only when its buffers fit in this much "
          "memory; otherwise vNMSE is not computed and the summary says why");
}

template <class V>
void visit(V& v, CompressionConfig& c) {
  v.required_choice("scheme", c.scheme, V::compressor_names(), "compression scheme (see `ccsim list`)");
  v.compressor_params("params", c.params, c.scheme, "scheme parameters (see `ccsim list`)");
}

template <class V>
void visit(V& v, OutputsConfig& c) {
  v.string("dir", c.dir, "output folder (default out/<name>), relative to the working directory");
  v.quantity("link_timeline_bin", c.link_timeline_bin_s, UnitKind::kTime, V::kNonNegative,
             "> 0: also write links_timeline.csv, each link's utilization in bins of this width");
}

template <class V>
void visit(V& v, Scenario& s) {
  v.required_string("name", s.name, "scenario name ([A-Za-z0-9_.-]+), names the default output folder");
  v.string("description", s.description, "free text");
  v.integer("seed", s.seed, 0, INT64_MAX, "the one seed behind every random draw");
  v.object("cluster", s.cluster, "the physical cluster");
  v.object("parallelism", s.parallelism, "tensor/pipeline/data-parallel layout of the ranks");
  v.object("collective", s.collective, "collective and algorithm");
  v.object("gradients", s.gradients, "per-rank gradient source");
  v.required_object_list("compression", s.compression, "schemes to evaluate (an object or an array of objects)");
  v.object("outputs", s.outputs, "output files");
}

}  // namespace ccsim::app
