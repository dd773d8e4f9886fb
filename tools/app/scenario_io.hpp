#pragma once
/// \file
/// Loading, validating, resolving and describing scenario files.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "tools/app/scenario.hpp"
#include "topology/builders/builders.hpp"

namespace ccsim::app {

/// A scenario loaded from a file.
struct LoadedScenario {
  Scenario scenario;
  std::string file;        ///< the path as given
  nlohmann::json resolved; ///< every default filled in, every override applied
};

/// Command-line changes applied to the raw JSON before validation.
struct Overrides {
  std::vector<std::string> sets;  ///< "PATH=VALUE"; PATH a JSON Pointer ("/cluster/nodes") or dotted ("cluster.nodes")
  std::optional<int64_t> seed;
};

/// Reads, parses and validates `file`. Every problem is reported at once, each as
/// "<file>: <JSON pointer or line/column>: <what was expected>, got <what was found>".
/// Relative file paths inside resolve against the file's folder.
Result<LoadedScenario> load_scenario(const std::string& file, const Overrides& overrides = {});
/// Validates an already-parsed document (`file` only names it in messages; relative paths resolve
/// against `base_dir`).
Result<LoadedScenario> load_scenario_json(nlohmann::json doc, const std::string& file, const std::string& base_dir,
                                          const Overrides& overrides = {});

/// The fully resolved JSON form of a scenario.
nlohmann::json scenario_to_json(const Scenario& s);
/// The JSON Schema (draft 2020-12) for scenario files, generated from the field declarations.
nlohmann::json scenario_schema();

/// The topology builder's input for a scenario's cluster.
topo::ClusterSpec cluster_spec(const ClusterConfig& c);
/// The ranks of every concurrent collective instance: one group of all ranks for
/// collective.group = "world", else every group of that parallelism dimension (group 0 first).
/// Errors (inconsistent parallelism) name their JSON path.
Result<std::vector<std::vector<uint32_t>>> collective_groups(const Scenario& s);

/// Applies one "PATH=VALUE" override to `doc`; VALUE is parsed as JSON, else taken as a string.
Status apply_override(nlohmann::json& doc, const std::string& assignment);

}  // namespace ccsim::app
