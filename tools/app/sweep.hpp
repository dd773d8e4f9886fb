#pragma once
/// \file
/// `ccsim sweep`: one base scenario run over axes of values, as a cartesian product and as zipped
/// lists, into one output folder:
///
///   DIR/sweep.plan.json   the runs (ids and axis values) and the base scenario; a rerun into DIR
///                         must plan the same sweep (else an input error), and skips finished runs
///   DIR/runs/<id>/        each run's own outputs (those of `ccsim run`), renamed into place only
///                         once complete, so a killed sweep leaves finished runs or nothing
///   DIR/numerics/         compression numerics by content (numerics_cache.hpp)
///   DIR/sweep.csv         one row per (run, scheme): `run`, the axis values, the run's
///                         results.csv columns; written once every run has finished
///
/// sweep.csv depends only on the runs' outputs, never on how the sweep was split: one process,
/// a resumed one, `--shard i/N` processes (run k belongs to shard k mod N) or MPI ranks produce
/// the same bytes.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "tools/app/numerics_cache.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::app {

/// One run of a sweep: its id ("0007") and its value on every axis (in Sweep::columns' order).
struct SweepRun {
  std::string id;
  std::vector<nlohmann::json> values;
};

/// A sweep file, read and expanded.
struct Sweep {
  std::string file;                  ///< the sweep file as given
  std::string dir;                   ///< its folder
  std::string name;                  ///< "name", else the file's stem
  nlohmann::json base;               ///< the base scenario document
  std::string base_dir;              ///< where the base's relative paths resolve
  std::vector<std::pair<std::string, nlohmann::json>> set;  ///< "set": values every run takes (in order)
  std::vector<std::string> columns;  ///< axis paths as written: "axes" in order, then the zipped ones
  std::vector<SweepRun> runs;        ///< the first axis varies slowest
  std::string out_dir;               ///< "out", else out/<name>
};

/// Reads and expands `file`: {"name", "base": FILE or {scenario}, "set": {PATH: value} (every
/// run, before the axes; no column), "axes": {PATH: [values]},
/// "zip": {PATH: [values]} or [{...}, ...] (each group's lists of one length, varying together),
/// "out"}. PATHs are those `--set` takes. A base file and axis values naming files resolve
/// against the sweep file's folder. Every problem is reported at once.
Result<Sweep> load_sweep(const std::string& file);

/// Run `k`'s scenario document (the base with "set" and its axis values applied), and its name in
/// messages.
Result<nlohmann::json> sweep_run_document(const Sweep& sweep, size_t k);
std::string sweep_run_desc(const Sweep& sweep, size_t k);  ///< "run 0007 (a=1, b=\"x\")"

/// Loads and checks every run as `ccsim run` would (`ov` as its options), all errors together:
/// a sweep that passes starts no run that would be rejected.
Status check_sweep(const Sweep& sweep, const Overrides& ov);

/// Creates `dir` and its plan, or checks that the plan already there is this sweep's.
Status prepare_sweep_dir(const Sweep& sweep, const std::string& dir);

/// Indices of the runs of shard `shard` of `shards` not finished in `dir` yet.
std::vector<size_t> pending_runs(const Sweep& sweep, const std::string& dir, uint32_t shard, uint32_t shards);

/// Runs run `k` and renames its outputs into DIR/runs/<id> once complete.
Status run_sweep_run(const Sweep& sweep, size_t k, const std::string& dir, const Overrides& ov,
                     const RunHooks& hooks);

/// What merging found: the runs that have not finished (sweep.csv is written only when none).
struct MergeResult {
  size_t runs = 0;
  size_t rows = 0;
  std::vector<std::string> missing;  ///< ids of unfinished runs
};
/// Writes DIR/sweep.csv from DIR/sweep.plan.json and the finished runs' results.csv, when every run
/// has finished.
Result<MergeResult> merge_sweep(const std::string& dir);

/// Simulates a loaded scenario of any kind and writes its outputs into `out_dir` (all or none);
/// returns the console summary (without the wall-time line), naming `shown_dir` (else `out_dir`)
/// as the outputs' folder.
Result<std::string> run_and_write(const LoadedScenario& loaded, const std::string& out_dir, const RunHooks& hooks,
                                  const std::string& shown_dir = {});

}  // namespace ccsim::app
