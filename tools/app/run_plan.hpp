#pragma once
/// \file
/// A scenario resolved for its run: what the loader's checks looked up and built (the topology,
/// the collectives and schemes, the trace, the buckets or pipeline stages, ...), so that a run
/// neither looks anything up again nor finds an input error the loader did not report.
/// scenario_checks.cpp makes it; run_collective.cpp and run_training.cpp execute it.

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/bucket_codecs.hpp"
#include "algorithms/compressor.hpp"
#include "algorithms/convergence.hpp"
#include "algorithms/registry.hpp"
#include "sim/kernel_cost.hpp"
#include "sim/training/stragglers.hpp"
#include "sim/training/training_job.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/parallel_groups.hpp"
#include "topology/topology.hpp"
#include "traces/compute_trace.hpp"
#include "traces/ddp_buckets.hpp"

namespace ccsim::app {

/// The three kinds of run.
enum class RunKind : uint8_t {
  kCollective,  ///< no workload: one collective per scheme
  kTraining,    ///< a workload, data parallelism only
  kParallel,    ///< a workload with tensor or pipeline parallelism
};

/// One compression entry, looked up.
struct SchemePlan {
  std::string label;  ///< the entry's name in every output (entry_label)
  const algo::CompressorInfo* info = nullptr;
  const topo::CollectiveInfo* collective = nullptr;  ///< the collective it runs on (training: per entry)
  const topo::CollectiveInfo* weights = nullptr;     ///< sharded training: the weight all-gather
  std::vector<algo::BucketShape> buckets;            ///< bucketed training: its buckets' shapes
};

/// Where a collective run's gradients come from and how big they are.
struct GradientPlan {
  uint64_t elements = 0;                  ///< per rank
  /// Per rank, what the numerics (vNMSE) run on: `elements` where every rank's buffers fit the
  /// limit (gradients.numerics_memory and this machine's memory), else a synthetic sample of the
  /// same distribution that fits (0: not even 1024 entries per rank fit, and the run times only);
  /// metadata phases are planned on the whole gradient either way.
  uint64_t sample_elements = 0;
  double full_need_bytes = 0;             ///< the whole tensor's numerics need (largest over the schemes)
  double sample_need_bytes = 0;           ///< the sample's (of 1024 entries when none fits)
  double limit_bytes = 0;                 ///< what the numerics may hold
  bool sampled() const { return sample_elements != elements; }
  std::vector<algo::LayerShape> layout;   ///< the tensor's layers
  std::vector<algo::LayerShape> sample_layout;  ///< the sample's (the tensor's when not sampled)
  std::string desc;                       ///< "synthetic (...)" / ".npy files ..."
};

/// A scenario's convergence block, read and checked with it (tools/app/tta.hpp).
struct ConvergenceInputs {
  algo::MetricSense sense = algo::MetricSense::kLowerIsBetter;
  std::string metric = "loss";
  std::vector<double> targets;                   ///< relative, as given or the metric's defaults
  std::string baseline;                          ///< the baseline entry's label
  size_t baseline_index = 0;
  std::map<std::string, algo::Curve> curves;     ///< convergence.curves, by label
  std::optional<algo::ConvergenceModel> model;   ///< or convergence.calibration
  std::string source_desc;                       ///< one line: where rounds-to-target come from
  /// One of convergence.phases: from round `from`, a `share` of the rounds timed as entry `timed_as`.
  struct Phase {
    uint64_t from = 0;
    size_t timed_as = 0;
    double share = 1;
  };
  std::map<size_t, std::vector<Phase>> phases;  ///< by entry index, rounds increasing
};

/// The resolved run.
struct RunPlan {
  RunKind kind = RunKind::kCollective;
  std::shared_ptr<const topo::Topology> topology;
  sim::KernelCosts costs;
  std::vector<SchemePlan> schemes;  ///< per compression entry
  algo::SyntheticGradients synthetic;

  // Collective runs.
  std::vector<std::vector<uint32_t>> groups;  ///< concurrent instances, group 0 first
  const topo::CollectiveInfo* collective = nullptr;
  topo::CollectiveOptions base;               ///< segments, root, the groups' GPUs per node
  GradientPlan gradients;

  // Training runs.
  std::shared_ptr<const traces::ComputeTrace> trace;  ///< merged into workload.blocks
  std::vector<sim::TrainingLayer> layers;
  std::vector<uint64_t> layer_params;                 ///< per layer
  std::optional<sim::StragglerModel> stragglers;
  std::vector<traces::GradientBucket> buckets;        ///< bucketed data-parallel runs

  // 3D-parallel runs.
  std::optional<topo::ParallelGroups> parallel;
  std::vector<uint32_t> stage_starts;
  std::vector<algo::BucketShape> stages;               ///< per stage: one TP rank's gradient

  /// Training runs with a convergence block: time-to-accuracy after the rounds (null: none).
  std::shared_ptr<const ConvergenceInputs> convergence;
};

}  // namespace ccsim::app
