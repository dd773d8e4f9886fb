#pragma once
/// \file
/// Loading, validating, resolving and describing scenario files.

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"
#include "sim/base/status.hpp"
#include "sim/base/uninit_vector.hpp"
#include "sim/training/parallel_job.hpp"
#include "tools/app/numerics_cache.hpp"
#include "tools/app/run_plan.hpp"
#include "tools/app/scenario.hpp"
#include "topology/builders/builders.hpp"

namespace ccsim::app {

/// A scenario loaded from a file.
struct LoadedScenario {
  Scenario scenario;
  std::string file;        ///< the path as given
  nlohmann::json resolved; ///< every default filled in, every override applied
  std::shared_ptr<const RunPlan> plan;  ///< what the checks built for the run
};

/// Told as each scheme of a run starts: its index, the number of schemes and its name (the CLI
/// shows it on a terminal).
using Progress = std::function<void(size_t index, size_t count, const std::string& scheme)>;

/// What a run may be given besides its scenario: progress reports for a terminal, and a numerics
/// cache (nullptr: compute everything).
struct RunHooks {
  Progress progress;
  NumericsCache* numerics = nullptr;
  /// Replay a data-parallel bucket phase that repeats an earlier run instead of simulating it
  /// again (sim/phase_replay.hpp); the outputs are the same either way.
  bool replay_phases = true;
};

/// The most transfers a run may simulate unless --max-flows allows more: a ring all-reduce over
/// about 10,000 ranks, minutes of simulation on one core.
inline constexpr uint64_t kDefaultMaxFlows = 200'000'000;

/// Command-line changes applied to the raw JSON before validation, and the run's size limit.
struct Overrides {
  std::vector<std::string> sets;  ///< "PATH=VALUE"; PATH a JSON Pointer ("/cluster/nodes") or dotted ("cluster.nodes")
  std::optional<int64_t> seed;
  uint64_t max_flows = kDefaultMaxFlows;  ///< transfers the run may simulate (--max-flows)
};

/// Reads, parses and validates `file`: its fields, then everything its run would check
/// (scenario_checks.cpp), so that a scenario that loads runs without an input error. Every problem
/// is reported at once, each as "<file>: <JSON pointer or line/column>: <what was expected>, got
/// <what was found>". Relative file paths inside resolve against the file's folder.
Result<LoadedScenario> load_scenario(const std::string& file, const Overrides& overrides = {});
/// Validates an already-parsed document (`file` only names it in messages; relative paths resolve
/// against `base_dir`).
Result<LoadedScenario> load_scenario_json(nlohmann::json doc, const std::string& file, const std::string& base_dir,
                                          const Overrides& overrides = {});

/// A collective run's per-rank gradients from its dump (gradients.source "dump"), with their layers:
/// rank r reads worker r mod W at the first of gradients.steps (the first dumped step when none is
/// given). Errors carry the dump's file and what was wrong.
struct DumpGradients {
  RankTensors ranks;
  std::vector<algo::LayerShape> layout;
  uint64_t step = 0;  ///< the training step read
};
Result<DumpGradients> read_dump_gradients(const GradientsConfig& g, uint32_t ranks);

/// The fully resolved JSON form of a scenario.
nlohmann::json scenario_to_json(const Scenario& s);
/// The JSON Schema (draft 2020-12) for scenario files, generated from the field declarations.
nlohmann::json scenario_schema();

/// The topology builder's input for a scenario's cluster.
topo::ClusterSpec cluster_spec(const ClusterConfig& c);

/// The cross-field and cross-file checks of a scenario read from `doc` (scenario_checks.cpp):
/// every problem into `diag`; the run's plan, or nullptr when there is a problem.
std::shared_ptr<const RunPlan> check_scenario(const Scenario& s, const nlohmann::json& doc, uint64_t max_flows,
                                              Diagnostics& diag);
/// Why a collective run skips its numerics: "numerics skipped: R ranks x S need about M (> ...)".
/// Compression entry `i`'s name in every output: its `label`, else the scheme and its non-default
/// parameters (algo::scheme_label); a training entry with a controller is named by the controller
/// (EDGC's with its rank source and anchor), and a sharded run's compressed weights join with "+".
std::string entry_label(const Scenario& s, size_t i, RunKind kind);

/// The limit a collective run's numerics were sized to (GradientPlan::limit_bytes), naming the
/// setting that binds: "gradients.numerics_memory 8 GiB" or "half this machine's memory, 12 GB".
std::string numerics_limit_desc(const Scenario& s, double limit);

/// A synthetic tensor's layers at `elements` entries per rank (its scenario's seed and generator).
std::vector<algo::LayerShape> synthetic_layout(const Scenario& s, uint64_t elements);
/// The 3D-parallel job's options from the workload (the kernel costs and ECMP salt are the run's).
sim::ParallelJobOptions parallel_job_options(const Scenario& s, const traces::ComputeTrace& trace);

/// Applies one "PATH=VALUE" override to `doc`; VALUE is parsed as JSON, else taken as a string.
Status apply_override(nlohmann::json& doc, const std::string& assignment);

}  // namespace ccsim::app
