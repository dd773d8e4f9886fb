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

#include "algorithms/lowrank/edgc_stages.hpp"
#include "sim/base/enum_names.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/units.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/training/pipeline_schedule.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/tenants.hpp"
#include "topology/schedule.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::app {

// ---- Closed choices of scenario files (each with its names, in the order files list them) ----

/// Where per-rank gradients come from.
enum class GradientSource : uint8_t { kSynthetic, kNpy, kDump };
inline constexpr EnumName<GradientSource> kGradientSources[] = {
    {GradientSource::kSynthetic, "synthetic"}, {GradientSource::kNpy, "npy"}, {GradientSource::kDump, "dump"}};
/// Which ranks run the collective: all of them, or every group of one parallelism dimension.
enum class CollectiveGroup : uint8_t { kWorld, kTp, kPp, kDp };
inline constexpr EnumName<CollectiveGroup> kCollectiveGroups[] = {
    {CollectiveGroup::kWorld, "world"}, {CollectiveGroup::kTp, "tp"}, {CollectiveGroup::kPp, "pp"},
    {CollectiveGroup::kDp, "dp"}};
/// The adaptive controller driving a scheme in training runs.
enum class ControllerKind : uint8_t { kNone, kAqgb, kEdgc };
inline constexpr EnumName<ControllerKind> kControllerKinds[] = {
    {ControllerKind::kNone, "none"}, {ControllerKind::kAqgb, "aqgb"}, {ControllerKind::kEdgc, "edgc"}};
/// How training rounds synchronize gradients.
enum class SyncMode : uint8_t { kAllReduce, kBroadcast, kSharded };
inline constexpr EnumName<SyncMode> kSyncModes[] = {
    {SyncMode::kAllReduce, "allreduce"}, {SyncMode::kBroadcast, "broadcast"}, {SyncMode::kSharded, "sharded"}};
/// Collective operations, as scenario files name them (sorted).
inline constexpr EnumName<topo::CollectiveOp> kCollectiveOps[] = {
    {topo::CollectiveOp::kAllGather, "allgather"}, {topo::CollectiveOp::kAllReduce, "allreduce"},
    {topo::CollectiveOp::kAllToAll, "alltoall"}, {topo::CollectiveOp::kBroadcast, "broadcast"},
    {topo::CollectiveOp::kReduceScatter, "reduce_scatter"}};

/// GPU model used to time compression kernels.
struct GpuConfig {
  sim::KernelCostMode kernel_cost = sim::KernelCostMode::kIdeal;
  std::string profile;                ///< device cost profile (kernel_cost "profile"), absolute once loaded
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
  topo::CollectiveOp operation = topo::CollectiveOp::kAllReduce;
  std::string algorithm = "ring";
  CollectiveGroup group = CollectiveGroup::kWorld;
  int64_t segments = 1;
  int64_t root = 0;
};

/// A serving (forward-only) pass built from a collective run's collective: `layers` layers, each
/// its forward compute then `collectives_per_layer` of the collective, one after the other, as a
/// tensor-parallel prefill's activation all-reduces sit on its critical path.
struct ServingConfig {
  int64_t layers = 0;  ///< 0: no serving pass
  int64_t collectives_per_layer = 1;
  double layer_compute_s = 0;  ///< one layer's forward on one device, between its collectives
};

/// Where per-rank gradients come from.
struct GradientsConfig {
  GradientSource source = GradientSource::kSynthetic;
  uint64_t size_bytes = 0;           ///< synthetic: fp32 bytes per rank
  traces::SyntheticGradientSpec synthetic;  ///< synthetic: the generator (its elements unset)
  std::vector<std::string> files;    ///< npy: one file per worker (worker w reads files[w % size])
  std::string dump;                  ///< dump: a gradient dump's directory (traces/gradient_dump.hpp)
  std::vector<int64_t> steps;        ///< dump: the dumped training steps to use (empty: all; a collective: the first)
  uint64_t numerics_memory_bytes = 8ull << 30;  ///< numerics run only if one group's buffers fit in this

  /// The synthetic generator's parameters for `elements` entries per worker.
  traces::SyntheticGradientSpec synthetic_spec(uint64_t elements) const {
    traces::SyntheticGradientSpec spec = synthetic;
    spec.elements = elements;
    return spec;
  }
};

/// An adaptive controller driving a scheme round by round (training runs).
struct ControllerConfig {
  ControllerKind kind = ControllerKind::kNone;
  double q_floor = 0.125;          ///< aqgb: the lowest quantization ratio
  bool second_stage = true;        ///< aqgb: send remaining bits before each block's forward
  int64_t r_min = 16;              ///< edgc: rank bounds
  int64_t r_max = 256;
  algo::EdgcAnchor anchor = algo::EdgcAnchor::kFirstStage;  ///< edgc: Alg. 2's anchor
};

/// Sharded data parallelism: how the updated weights (or their differences) are all-gathered.
struct WeightsConfig {
  std::string scheme = "bf16";                        ///< weight all-gather format (SDP4Bit: sdp4bit_qwd)
  nlohmann::json params = nlohmann::json::object();
  std::string algorithm = "ring";                     ///< all-gather algorithm
};

/// One compression scheme to evaluate.
struct CompressionConfig {
  std::string scheme;
  nlohmann::json params = nlohmann::json::object();
  std::string label;          ///< the entry's name in every output ("": entry_label's default)
  std::string algorithm;      ///< collective and DP training runs: this entry's algorithm ("": collective.algorithm)
  ControllerConfig controller;
  WeightsConfig weights;      ///< sync.mode sharded: the weight all-gather
};

/// The training workload (absent trace: the scenario runs one collective, not training rounds).
struct WorkloadConfig {
  std::string trace;                 ///< compute trace file (traces/models/...)
  int64_t rounds = 0;                ///< rounds to run (0: until duration)
  double duration_s = 0;             ///< simulated-time horizon (0: until rounds)
  int64_t warmup_rounds = 1;         ///< excluded from the per-round averages
  std::vector<int64_t> blocks;       ///< merge the trace's layers into blocks starting at these indices
  double interference = 0;           ///< compute slowdown while compression kernels run
  int64_t micro_batches = 1;         ///< tp/pp > 1: micro-batches per round and pipeline replica
  sim::PipelineKind pipeline = sim::PipelineKind::k1F1B;  ///< tp/pp > 1
  int64_t tp_allreduces = 2;         ///< tp > 1: all-reduces per layer in forward and in backward
  int64_t matrix_rows = 0;           ///< low-rank schemes: rows of each layer's gradient matrix (0: square)
};

/// How gradients are synchronized each round.
struct SyncConfig {
  SyncMode mode = SyncMode::kAllReduce;
  uint64_t bucket_bytes = 25ull << 20;  ///< allreduce: DDP bucket_cap
  uint64_t first_bucket_bytes = 0;     ///< allreduce: DDP first bucket (0: same as bucket)
  int64_t segment = 1 << 20;           ///< broadcast: gradient entries per segment
  int64_t replan_every = 0;            ///< allreduce/sharded: rounds between plans (0: once per bucket size)
};

/// Shared-network settings.
struct NetworkConfig {
  std::vector<sim::TenantSpec> tenants;
};

/// convergence.proxy: the proxy training `python3 -m ccsim.proxy SCENARIO` runs to write the
/// curves (tools/python/ccsim/proxy.py reads these keys; declared here so that `ccsim validate` checks
/// them and the schema lists them; the C++ run itself never trains).
struct ProxyConfig {
  std::string task = "gpt";
  int64_t workers = 8;
  std::string collective = "ring";
  int64_t rounds = 300;
  int64_t eval_every = 10;
  std::string optimizer;        ///< "" = adamw for gpt, sgd for digits
  double lr = 0;                ///< 0 = the task's default
  double momentum = 0.9;
  double weight_decay = 0;
  int64_t warmup = 10;
  int64_t micro_batch = 0;      ///< 0 = the task's default
  int64_t seed = 1;
  int64_t seeds = 1;            ///< repetitions averaged per round
  double bucket_mb = 25;
  int64_t d_model = 32, layers = 2, heads = 4, block_size = 32, hidden = 128;
  /// Per entry label, scheme parameters the proxy trains it with instead of the entry's (a rank or a
  /// schedule counted in rounds that fits the timed model but not the proxy's).
  nlohmann::json params = nlohmann::json::object();
};

/// A stretch of an entry's rounds timed as another entry's round: the phases of an adaptive scheme
/// (EDGC's uncompressed warm-up, then its compressed rounds), each timed by an entry of the run.
struct TimingPhase {
  std::string label;       ///< the entry whose rounds these are
  int64_t from_round = 0;  ///< the phase's first round; it lasts until the label's next phase
  std::string timed_as;    ///< the entry whose mean simulated round time these rounds take
  double share = 1;        ///< the fraction of these rounds timed so; the rest keep the previous timing
};

/// Time-to-accuracy (algorithms/convergence.hpp, docs/tta.md): where rounds-to-target come from.
struct ConvergenceConfig {
  std::string curves;           ///< metric against round per label (proxy output or the user's own CSV)
  std::string calibration;      ///< or: a calibrated convergence model (JSON, `python3 -m ccsim.tta fit`)
  std::string baseline;         ///< label of the baseline entry ("" = the first entry)
  std::string metric;           ///< "loss" or "accuracy" ("" = the calibration's, else loss)
  std::vector<double> targets;  ///< relative to the baseline's final metric (empty = the metric's defaults)
  int64_t baseline_rounds = 0;  ///< calibration: the baseline's rounds to its final metric (0 = the proxy's)
  int64_t vnmse_elements = INT64_C(1) << 21;  ///< calibration in training runs: entries per rank the vNMSE is measured on
  int64_t vnmse_warmup = 2;     ///< ... and rounds run before the measured one
  std::vector<TimingPhase> phases;  ///< rounds of an entry timed as another entry's (empty: each its own)
  ProxyConfig proxy;
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
  WorkloadConfig workload;
  SyncConfig sync;
  sim::StragglerSpec stragglers;
  NetworkConfig network;
  ConvergenceConfig convergence;
  ServingConfig serving;
  OutputsConfig outputs;
};

// ---- The names of open choices (registries) and the compressor parameters' field ----

std::vector<std::string> topology_names();
/// Collective algorithm names, sorted; with "" first (= collective.algorithm) for the _or_default.
std::vector<std::string> algorithm_names();
std::vector<std::string> algorithm_names_or_default();
std::vector<std::string> compressor_names();
/// A compression entry's params: resolved and checked by `scheme`'s parameter table (nothing when
/// the scheme is unknown: that was reported at the scheme); in the schema, one table per scheme.
TableField compressor_params(const std::string& scheme);
/// A scenario's name: it names its default output folder.
inline constexpr StringPattern kScenarioName{"^[A-Za-z0-9_.-]+$", "a name of letters, digits, '_', '.', '-'"};

/// Field declarations. `V` is a FieldReader, FieldWriter or FieldSchema (sim/base/json_fields.hpp).
template <class V>
void visit(V& v, GpuConfig& c) {
  v.choice("kernel_cost", c.kernel_cost, sim::kKernelCostModes,
           "how compression kernels are timed: ideal (free), roofline (memory traffic / bandwidth + launch) or "
           "profile (the scheme's kernels measured in the device profile; kernels it lacks by the roofline)");
  v.path("profile", c.profile, "device cost profile written by `ccsim bench-kernels` (kernel_cost \"profile\"), "
         "relative to the scenario file; traces/devices/ holds measured ones");
  v.quantity("memory_bandwidth", c.memory_bandwidth_Bps, UnitKind::kBandwidth, Sign::kPositive,
             "nominal GPU memory bandwidth for the roofline model");
  v.quantity("kernel_launch", c.kernel_launch_s, UnitKind::kTime, Sign::kNonNegative,
             "per-kernel launch overhead for the roofline model");
}

template <class V>
void visit(V& v, IntraNodeConfig& c) {
  v.quantity("bandwidth", c.bandwidth_Bps, UnitKind::kBandwidth, Sign::kPositive,
             "per-direction bandwidth between each GPU and its node's fabric");
  v.quantity("latency", c.latency_s, UnitKind::kTime, Sign::kNonNegative, "latency of each intra-node link");
}

template <class V>
void visit(V& v, LeafSpineConfig& c) {
  v.integer("leaves", c.leaves, 0, 1 << 16, "leaf switches (0 = automatic)");
  v.integer("spines", c.spines, 0, 1 << 16, "spine switches (0 = automatic)");
  v.quantity("uplink_bandwidth", c.uplink_bandwidth_Bps, UnitKind::kBandwidth, Sign::kNonNegative,
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
  v.choice("topology", c.topology, topology_names(), "cluster shape");
  v.integer("nodes", c.nodes, 1, 1 << 20, "number of nodes (hosts) on the inter-node network");
  v.integer("gpus_per_node", c.gpus_per_node, 1, 1024, "GPUs (ranks) per node; ranks = nodes * gpus_per_node");
  v.quantity("nic_bandwidth", c.nic_bandwidth_Bps, UnitKind::kBandwidth, Sign::kPositive,
             "per-direction bandwidth of each GPU's network link (torus/ring: of each inter-node link)");
  v.quantity("link_latency", c.link_latency_s, UnitKind::kTime, Sign::kNonNegative, "latency of each inter-node link");
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
  v.choice("operation", c.operation, kCollectiveOps, "collective operation");
  v.choice("algorithm", c.algorithm, algorithm_names(), "collective algorithm lowering the operation to a schedule");
  v.choice("group", c.group, kCollectiveGroups,
           "ranks taking part: all of them, or every tensor/pipeline/data-parallel group at once");
  v.integer("segments", c.segments, 1, 1 << 16, "pipelined segments per chunk");
  v.integer("root", c.root, 0, 1 << 20, "broadcast: source rank within the group");
}

template <class V>
void visit(V& v, ServingConfig& c) {
  v.integer("layers", c.layers, 0, 1 << 20,
            "layers of the pass, each its compute then collectives_per_layer of the run's collective in sequence "
            "(0: no serving pass)");
  v.integer("collectives_per_layer", c.collectives_per_layer, 1, 64,
            "collectives after each layer's compute (a tensor-parallel transformer layer: 2 all-reduces)");
  v.quantity("layer_compute", c.layer_compute_s, UnitKind::kTime, Sign::kNonNegative,
             "one layer's forward compute on one device, between its collectives");
}

template <class V>
void visit(V& v, GradientsConfig& c) {
  v.choice("source", c.source, kGradientSources,
           "synthetic generator, per-worker .npy files (collective runs) or a gradient dump (docs/gradient-dumps.md)");
  v.bytes("size", c.size_bytes, "synthetic: fp32 gradient bytes per rank (a multiple of 4)");
  visit(v, c.synthetic);  // its fields sit in this object
  v.path_list("files", c.files, "npy: per-worker gradient files (float32/float16), relative to the scenario file");
  v.directory("dump", c.dump,
              "dump: a gradient dump's directory (manifest.json and one file per worker), relative to the scenario "
              "file; rank r reads worker r mod W. A training run measures its calibration's vNMSE on it");
  v.integer_list("steps", c.steps, 0, INT64_MAX,
                 "dump: the dumped training steps to use (empty: all of them in a training run, the first in a "
                 "collective run, which takes one)");
  v.bytes("numerics_memory", c.numerics_memory_bytes,
          "the numerics interpreter runs (one collective group, real data) only when its buffers fit in this much "
          "memory; otherwise vNMSE is not computed and the summary says why");
}

template <class V>
void visit(V& v, CompressionConfig& c) {
  v.required_choice("scheme", c.scheme, compressor_names(), "compression scheme (see `ccsim list`)");
  v.table("params", c.params, compressor_params(c.scheme), "scheme parameters (see `ccsim list`)");
  v.string("label", c.label,
           "the entry's name on the console and in every output file (empty: the scheme and its non-default "
           "parameters, e.g. dynamiq(budget=3)); unique among the entries");
  v.choice("algorithm", c.algorithm, algorithm_names_or_default(),
           "collective and data-parallel training runs: the algorithm of this scheme's collective (empty: "
           "collective.algorithm), e.g. semi_loop for one EQuARX flavour beside ring_bidir, or two_level for a "
           "reduce-scatter whose format changes between node levels");
  v.object("controller", c.controller, "training runs: an adaptive controller driving the scheme per round");
  v.object("weights", c.weights, "sync.mode sharded: the weight all-gather after each bucket's reduce-scatter");
}

template <class V>
void visit(V& v, WeightsConfig& c) {
  v.choice("scheme", c.scheme, compressor_names(),
           "weight all-gather format: bf16 (Megatron's distributed optimizer), sdp4bit_qw (ZeRO++ qW), sdp4bit_qwd "
           "(SDP4Bit qWD, weight differences)");
  v.table("params", c.params, compressor_params(c.scheme), "scheme parameters (see `ccsim list`)");
  v.choice("algorithm", c.algorithm, algorithm_names(), "all-gather algorithm");
}

template <class V>
void visit(V& v, WorkloadConfig& c) {
  v.path("trace", c.trace, "compute trace (docs/compute-traces.md), relative to the scenario file; with it the "
                           "scenario runs training rounds (empty: none)");
  v.integer("rounds", c.rounds, 0, 1 << 30, "rounds to run (0: until duration)");
  v.quantity("duration", c.duration_s, UnitKind::kTime, Sign::kNonNegative,
             "simulated time to run; rounds completed by then are counted (0: until rounds)");
  v.integer("warmup_rounds", c.warmup_rounds, 0, 1 << 30, "first rounds left out of the per-round averages");
  v.integer_list(
      "blocks", c.blocks, 0, 1 << 20,
      "merge the trace's layers into gradient blocks starting at these layer indices (first 0; empty: as is)");
  v.number("interference", c.interference, 0.0, 100.0,
           "compute runs at 1/(1+interference) speed while the worker's compression kernels run");
  v.integer("micro_batches", c.micro_batches, 1, 1 << 20, "tp/pp > 1: micro-batches per round and pipeline replica");
  v.choice("pipeline", c.pipeline, sim::kPipelineKinds, "tp/pp > 1: micro-batch schedule");
  v.integer("tp_allreduces", c.tp_allreduces, 0, 64,
            "tp > 1: activation all-reduces per layer in forward and in backward (Megatron-LM: 2)");
  v.integer("matrix_rows", c.matrix_rows, 0, INT64_C(1) << 32,
            "low-rank schemes in 3D-parallel runs: each layer's gradient (per TP rank) is a matrix of this many rows "
            "(the model width; 0: as square as possible)");
}

template <class V>
void visit(V& v, SyncConfig& c) {
  v.choice("mode", c.mode, kSyncModes,
           "allreduce: DDP buckets, each through collective.algorithm once all workers produced it; broadcast: every "
           "worker sends each gradient block to every other worker (AQGB); sharded: sharded data parallelism (ZeRO / "
           "SDP4Bit Alg. 2), each bucket's gradients reduce-scattered, then its weights all-gathered");
  v.integer("replan_every", c.replan_every, 0, 1 << 30,
            "allreduce/sharded: rounds between the metadata plans of schemes that have one (adaptive controllers "
            "decide then; each plan, and its round, run on fresh synthetic gradients of the bucket); 0: plan once "
            "per bucket");
  v.bytes("bucket", c.bucket_bytes, "allreduce: DDP bucket size (bucket_cap)");
  v.bytes("first_bucket", c.first_bucket_bytes, "allreduce: size of the first bucket (0: same as bucket)");
  v.integer("segment", c.segment, 1, INT64_C(1) << 40, "broadcast: gradient entries per segment (control granularity)");
}

template <class V>
void visit(V& v, ControllerConfig& c) {
  v.choice("kind", c.kind, kControllerKinds,
           "none (the scheme's fixed wire size), aqgb (AQGB's two-stage adaptive ratio; scheme tfp, sync.mode "
           "broadcast) or edgc (EDGC's stage-aligned ranks, Alg. 2; scheme powersgd or edgc, pipeline parallelism)");
  v.number("q_floor", c.q_floor, 1.0 / 32, 1.0, "aqgb: the lowest quantization ratio q̄ (0.125 = 4 of 32 bits)");
  v.boolean("second_stage", c.second_stage, "aqgb: send the remaining bits of each block before its next forward");
  v.integer("r_min", c.r_min, 1, 1 << 20, "edgc: smallest rank");
  v.integer("r_max", c.r_max, 1, 1 << 20, "edgc: largest rank");
  v.choice("anchor", c.anchor, algo::kEdgcAnchors,
           "edgc: first_stage: the first pipeline stage (which starts its DP sync last) runs the scheme's rank and "
           "later stages get T_com(r) + offset x T_microBack more (Alg. 2); mean: the same offsets, shifted so the "
           "stages' mean rank is the scheme's rank (equal volume to one shared rank)");
}

template <class V>
void visit(V& v, NetworkConfig& c) {
  v.object_list("tenants", c.tenants, "background jobs sharing the links max-min fairly");
}

template <class V>
void visit(V& v, TimingPhase& c) {
  v.required_string("label", c.label, "the entry whose rounds these are");
  v.integer("from_round", c.from_round, 0, INT64_C(1) << 40, "the phase's first round (it lasts until the next)");
  v.required_string("timed_as", c.timed_as, "the entry whose mean simulated round time these rounds take");
  v.number("share", c.share, 0.0, 1.0,
           "the fraction of these rounds timed as timed_as, the rest keeping the previous timing (a curve averaged "
           "over proxy seeds of which only some entered the phase)");
}

template <class V>
void visit(V& v, ProxyConfig& c) {
  v.choice("task", c.task, {"gpt", "digits"},
           "gpt: character-level GPT on the Debian license texts (metric loss); digits: a perceptron on "
           "python3-sklearn's 8x8 digits (metric accuracy)");
  v.integer("workers", c.workers, 2, 1024, "simulated data-parallel workers");
  v.choice("collective", c.collective, algorithm_names(), "the gradients' all-reduce algorithm");
  v.integer("rounds", c.rounds, 1, 1 << 24, "training rounds");
  v.integer("eval_every", c.eval_every, 1, 1 << 24, "rounds between held-out evaluations (curve points)");
  v.choice("optimizer", c.optimizer, {"", "adamw", "sgd"}, "adamw or sgd with momentum (empty: the task's)");
  v.number("lr", c.lr, 0.0, 10.0, "peak learning rate (0: 3e-3 for adamw, 0.05 for sgd)");
  v.number("momentum", c.momentum, 0.0, 1.0, "sgd momentum");
  v.number("weight_decay", c.weight_decay, 0.0, 1.0, "decoupled (adamw) or L2 (sgd) weight decay");
  v.integer("warmup", c.warmup, 0, 1 << 24, "rounds of linear learning-rate warm-up (then cosine decay to a tenth)");
  v.integer("micro_batch", c.micro_batch, 0, 1 << 16, "samples per worker per round (0: 16 sequences or images)");
  v.integer("seed", c.seed, 0, INT64_C(1) << 53, "data order, initial weights and the schemes' random numbers");
  v.integer("seeds", c.seeds, 1, 64, "repetitions with seeds seed, seed + 1, ...; each entry's curve is their mean");
  v.number("bucket_mb", c.bucket_mb, 0.001, 1e6, "DDP bucket cap in MiB");
  v.integer("d_model", c.d_model, 8, 4096, "gpt: embedding width");
  v.integer("layers", c.layers, 1, 64, "gpt: transformer blocks");
  v.integer("heads", c.heads, 1, 64, "gpt: attention heads (dividing d_model)");
  v.integer("block_size", c.block_size, 8, 4096, "gpt: context length in characters");
  v.integer("hidden", c.hidden, 1, 1 << 16, "digits: hidden units");
  v.json_object("params", c.params,
                "per entry label, scheme parameters the proxy trains that entry with in place of its own (a rank or "
                "a schedule in rounds sized for the timed model, not the proxy's); the entry keeps its label");
}

template <class V>
void visit(V& v, ConvergenceConfig& c) {
  v.path("curves", c.curves,
         "CSV of metric against round per label (columns label, round and val_loss/loss or val_accuracy/accuracy): "
         "what `python3 -m ccsim.proxy SCENARIO` writes, or the user's own training; relative to the scenario file");
  v.path("calibration", c.calibration,
         "or: a convergence model calibrated on proxy runs (`python3 -m ccsim.tta fit`), applied to each entry's "
         "measured vNMSE");
  v.string("baseline", c.baseline, "label of the entry the targets and ratios refer to (empty: the first entry)");
  v.choice("metric", c.metric, {"", "loss", "accuracy"},
           "what the targets measure (empty: the calibration's, else loss)");
  v.number_list("targets", c.targets, 0.5, 2.0,
                "targets relative to the baseline's final metric (empty: 1.05, 1.02, 1 for a loss; 0.99, 0.995, 1 "
                "for an accuracy)");
  v.integer("baseline_rounds", c.baseline_rounds, 0, INT64_C(1) << 40,
            "calibration: rounds the baseline needs to its final metric, scaling the proxy's rounds to every target "
            "(0: the proxy's own)");
  v.integer("vnmse_elements", c.vnmse_elements, 1024, INT64_C(1) << 32,
            "calibration in training runs: gradient entries per rank each entry's vNMSE is measured on (synthetic, "
            "or at most this many of a gradient dump's, sampled in whole rows; DDP-bucketed as the run)");
  v.integer("vnmse_warmup", c.vnmse_warmup, 0, 1024, "rounds each vNMSE measurement runs before the measured one");
  v.object_list("phases", c.phases,
                "rounds of an entry timed as another entry's: an adaptive scheme's phases (EDGC's uncompressed "
                "warm-up, then its compressed rounds), each {label, from_round, timed_as, share}; an entry's rounds "
                "before its first phase take its own round time");
  v.object("proxy", c.proxy, "the proxy training that writes `curves` (python3 -m ccsim.proxy SCENARIO)");
}

template <class V>
void visit(V& v, OutputsConfig& c) {
  v.string("dir", c.dir, "output folder (default out/<name>), relative to the working directory");
  v.quantity("link_timeline_bin", c.link_timeline_bin_s, UnitKind::kTime, Sign::kNonNegative,
             "> 0: also write links_timeline.csv, each link's utilization in bins of this width");
}

template <class V>
void visit(V& v, Scenario& s) {
  v.required_string("name", s.name, "scenario name ([A-Za-z0-9_.-]+), names the default output folder",
                    &kScenarioName);
  v.string("description", s.description, "free text");
  v.integer("seed", s.seed, 0, INT64_MAX, "the one seed behind every random draw");
  v.object("cluster", s.cluster, "the physical cluster");
  v.object("parallelism", s.parallelism, "tensor/pipeline/data-parallel layout of the ranks");
  v.object("collective", s.collective, "collective and algorithm");
  v.object("gradients", s.gradients, "per-rank gradient source");
  v.required_object_list("compression", s.compression, "schemes to evaluate (an object or an array of objects)");
  v.object("workload", s.workload, "training rounds: compute trace and horizon (absent: one collective)");
  v.object("sync", s.sync, "training: how gradients are synchronized");
  v.object("stragglers", s.stragglers, "training: per-round, per-worker compute scaling");
  v.object("network", s.network, "training: background tenants on the links");
  v.object("convergence", s.convergence,
           "training: time-to-accuracy from proxy curves, a user's curve or a calibrated model (tta.csv)");
  v.object("serving", s.serving,
           "collective runs: a forward-only serving pass (prefill) of layers, each its compute then the collective; "
           "its latency and speedup over the first entry join the outputs");
  v.object("outputs", s.outputs, "output files");
}

}  // namespace ccsim::app
