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

/// The physical cluster.
struct ClusterConfig {
  std::string topology = "star";
  int64_t nodes = 8;
  double nic_bandwidth_Bps = 12.5e9;
  double link_latency_s = 1e-6;
  GpuConfig gpu;
};

/// Which collective to run and how it is lowered to a schedule.
struct CollectiveConfig {
  std::string operation = "allreduce";
  std::string algorithm = "ring";
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
};

/// One compression scheme to evaluate.
struct CompressionConfig {
  std::string scheme;
  nlohmann::json params = nlohmann::json::object();
};

/// Where outputs go.
struct OutputsConfig {
  std::string dir;  ///< default "out/<name>", relative to the working directory
};

/// A whole scenario.
struct Scenario {
  std::string name;
  std::string description;
  int64_t seed = 1;
  ClusterConfig cluster;
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
void visit(V& v, ClusterConfig& c) {
  v.choice("topology", c.topology, V::topology_names(), "cluster shape");
  v.integer("nodes", c.nodes, 2, 1 << 20, "number of ranks (one GPU each)");
  v.quantity("nic_bandwidth", c.nic_bandwidth_Bps, UnitKind::kBandwidth, V::kPositive,
             "per-direction bandwidth of each rank's network link");
  v.quantity("link_latency", c.link_latency_s, UnitKind::kTime, V::kNonNegative, "latency of each link");
  v.object("gpu", c.gpu, "GPU compute model");
}

template <class V>
void visit(V& v, CollectiveConfig& c) {
  v.choice("operation", c.operation, V::operation_names(), "collective operation");
  v.choice("algorithm", c.algorithm, V::algorithm_names(), "collective algorithm lowering the operation to a schedule");
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
}

template <class V>
void visit(V& v, CompressionConfig& c) {
  v.required_choice("scheme", c.scheme, V::compressor_names(), "compression scheme (see `ccsim list`)");
  v.compressor_params("params", c.params, c.scheme, "scheme parameters (see `ccsim list`)");
}

template <class V>
void visit(V& v, OutputsConfig& c) {
  v.string("dir", c.dir, "output folder (default out/<name>), relative to the working directory");
}

template <class V>
void visit(V& v, Scenario& s) {
  v.required_string("name", s.name, "scenario name ([A-Za-z0-9_.-]+), names the default output folder");
  v.string("description", s.description, "free text");
  v.integer("seed", s.seed, 0, INT64_MAX, "the one seed behind every random draw");
  v.object("cluster", s.cluster, "the physical cluster");
  v.object("collective", s.collective, "collective and algorithm");
  v.object("gradients", s.gradients, "per-rank gradient source");
  v.required_object_list("compression", s.compression, "schemes to evaluate (an object or an array of objects)");
  v.object("outputs", s.outputs, "output files");
}

}  // namespace ccsim::app
