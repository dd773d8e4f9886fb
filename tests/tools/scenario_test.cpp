// Scenario files end to end: every shipped scenario against the shipped schema and the loader, the
// schema against its generator, each kind of input error (path, message, and whether the schema
// catches it too), quantities, relative paths, overrides and the resolved JSON.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "tests/tools/json_schema_validator.hpp"
#include "tests/tools/temp_dir.hpp"
#include "tools/app/outputs.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/run_training.hpp"
#include "tools/app/scenario_io.hpp"
#include "tools/app/sweep.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/npy.hpp"

namespace ccsim::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ccsim::testing::JsonSchemaValidator;
using ccsim::testing::read_file;
using ccsim::testing::SchemaViolation;
using ccsim::testing::ScopedCurrentPath;
using ccsim::testing::TempDir;

const fs::path kSourceDir = CCSIM_SOURCE_DIR;
const fs::path kScenarios = kSourceDir / "scenarios";
const fs::path kSchemaFile = kScenarios / "schema.json";

const JsonSchemaValidator& shipped_schema() {
  static const JsonSchemaValidator validator(json::parse(read_file(kSchemaFile)));
  return validator;
}

// ---------------------------------------------------------------------------------------------
// Error-message helpers. A failed load's message is one line per error:
// "<file>: <JSON pointer or line/column>: <message>".

struct Error {
  std::string path;
  std::string message;
};

std::vector<Error> errors_of(const Status& s, const std::string& file) {
  std::vector<Error> out;
  std::stringstream ss(s.message());
  const std::string prefix = file + ": ";
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind(prefix, 0) != 0) {
      out.push_back({"<line does not start with the file name>", line});
      continue;
    }
    line = line.substr(prefix.size());
    const auto colon = line.find(": ");
    out.push_back({line.substr(0, colon), colon == std::string::npos ? "" : line.substr(colon + 2)});
  }
  return out;
}

// Success when `s` reports an error at exactly `path` whose message contains every needle.
::testing::AssertionResult has_error(const Status& s, const std::string& file, const std::string& path,
                                     const std::vector<std::string>& needles) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected an error at " << path << ", got OK";
  for (const Error& e : errors_of(s, file)) {
    if (e.path != path) continue;
    for (const auto& n : needles)
      if (e.message.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "error at " << path << " lacks \"" << n << "\": " << e.message;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error at " << path << " in:\n" << s.message();
}

// Success when some schema violation is at `path`, or (inside a oneOf) names `path`, and mentions `needle`.
::testing::AssertionResult schema_reports(const std::vector<SchemaViolation>& v, const std::string& path,
                                          const std::string& needle) {
  std::string all;
  for (const auto& e : v) {
    all += "  " + e.to_string() + "\n";
    const bool here = e.path == path || e.message.find((path.empty() ? "/" : path) + ": ") != std::string::npos;
    if (here && e.message.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "the schema reports nothing at " << (path.empty() ? "/" : path)
                                       << " mentioning \"" << needle << "\"; violations:\n"
                                       << (all.empty() ? "  (none: the schema accepts the document)\n" : all);
}

// A small valid scenario every error case starts from.
json base_doc() {
  return json::parse(R"({
    "name": "case",
    "cluster": {"topology": "star", "nodes": 4, "nic_bandwidth": "100Gbps", "link_latency": "1us"},
    "collective": {"operation": "allreduce", "algorithm": "ring"},
    "gradients": {"source": "synthetic", "size": "64KB"},
    "compression": [{"scheme": "bf16"}, {"scheme": "int8", "params": {"block": 256, "rounding": "nearest"}}]
  })");
}

std::function<void(json&)> set(const std::string& pointer, json value) {
  return [=](json& d) { d[json::json_pointer(pointer)] = value; };
}
std::function<void(json&)> erase(const std::string& pointer) {
  return [=](json& d) {
    const json::json_pointer p(pointer);
    d[p.parent_pointer()].erase(p.back());
  };
}
std::function<void(json&)> rename(const std::string& pointer, const std::string& new_key) {
  return [=](json& d) {
    const json::json_pointer p(pointer);
    json& parent = d[p.parent_pointer()];
    parent[new_key] = parent[p.back()];
    parent.erase(p.back());
  };
}

// ---------------------------------------------------------------------------------------------
// Shipped files.

bool is_sweep_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 11 && name.compare(name.size() - 11, 11, ".sweep.json") == 0;
}

// Scenario files (*.json but schema.json and the sweep files *.sweep.json), or with `sweeps` the
// sweep files, relative to the source tree, sorted.
std::vector<std::string> shipped_scenarios(bool sweeps = false) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(kScenarios)) {
    if (!e.is_regular_file() || e.path().extension() != ".json" || e.path() == kSchemaFile) continue;
    if (is_sweep_file(e.path()) != sweeps) continue;
    out.push_back(fs::relative(e.path(), kSourceDir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every shipped sweep file loads, and every one of its runs passes the checks `ccsim run` makes.
TEST(ShippedSweeps, LoadAndEveryRunPassesTheChecks) {
  const ScopedCurrentPath in(kSourceDir);
  const auto files = shipped_scenarios(true);
  EXPECT_FALSE(files.empty()) << "tools/reproduce runs the sweep files under scenarios/papers/";
  for (const std::string& f : files) {
    Result<Sweep> sw = load_sweep(f);
    ASSERT_TRUE(sw.ok()) << sw.status().message();
    EXPECT_GT(sw->runs.size(), 1u) << f;
    const Status st = check_sweep(*sw, Overrides{});
    EXPECT_TRUE(st.ok()) << st.message();
  }
}

TEST(ShippedScenarios, AreFoundIncludingQuickstart) {
  const auto files = shipped_scenarios();
  EXPECT_NE(std::find(files.begin(), files.end(), "scenarios/quickstart.json"), files.end())
      << "the scenarios/ walk found " << files.size() << " file(s)";
  EXPECT_EQ(std::find(files.begin(), files.end(), "scenarios/schema.json"), files.end());
}

class ShippedScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedScenario, ValidatesAgainstSchemaAndLoads) {
  const fs::path file = kSourceDir / GetParam();
  const json doc = json::parse(read_file(file));
  EXPECT_EQ(shipped_schema().errors(doc), std::vector<std::string>{});
  const auto loaded = load_scenario(file.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  // What the loader resolved is itself a valid scenario.
  EXPECT_EQ(shipped_schema().errors(loaded->resolved), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Files, ShippedScenario, ::testing::ValuesIn(shipped_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The topology/collective scenarios are small enough to run in the test suite: each must run,
// produce a positive time on every scheme, count bytes on the links its transfers cross, and
// (fp32 passes data through exactly) give fp32 an error at the level of float summation order.
class TopologyScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(TopologyScenario, RunsEndToEnd) {
  const auto loaded = load_scenario((kSourceDir / GetParam()).string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const auto report = run_scenario(*loaded);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->results.size(), loaded->scenario.compression.size());
  for (const auto& r : report->results) {
    SCOPED_TRACE(r.scheme);
    EXPECT_GT(r.timing.time_s, 0);
    EXPECT_LE(r.timing.time_min_s, r.timing.time_s);
    EXPECT_GT(r.timing.transfers, 0u);
    double link_bytes = 0;
    for (const auto& l : r.links) link_bytes += l.bytes;
    // Every transfer crosses at least one link, so links carry at least the wire bytes.
    EXPECT_GE(link_bytes, 0.999 * static_cast<double>(r.timing.wire_bytes));
    ASSERT_TRUE(std::isfinite(r.vnmse));
    if (r.scheme == "fp32") {
      EXPECT_LT(r.vnmse, 1e-10);
    } else {
      EXPECT_GT(r.vnmse, 0);
    }
  }
  const std::string links = links_csv(*report);
  EXPECT_EQ(links.rfind("label,link,from,to,", 0), 0u);
  if (loaded->scenario.outputs.link_timeline_bin_s > 0) {
    EXPECT_NE(links_timeline_csv(*report).find('\n'), std::string::npos);
  }
}

std::vector<std::string> topology_scenarios() {
  std::vector<std::string> out;
  for (const auto& f : shipped_scenarios())
    if (f.rfind("scenarios/topologies/", 0) == 0) out.push_back(f);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Files, TopologyScenario, ::testing::ValuesIn(topology_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param.substr(std::string("scenarios/topologies/").size());
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(ShippedScenarios, EveryTopologyAndCollectiveIsExercised) {
  std::set<std::string> topologies, algorithms, operations;
  for (const auto& f : shipped_scenarios()) {
    const auto loaded = load_scenario((kSourceDir / f).string());
    ASSERT_TRUE(loaded.ok()) << f;
    topologies.insert(loaded->scenario.cluster.topology);
    algorithms.insert(loaded->scenario.collective.algorithm);
    operations.insert(std::string(ccsim::topo::collective_op_name(loaded->scenario.collective.operation)));
  }
  for (const auto& t : ccsim::topo::known_topologies()) EXPECT_TRUE(topologies.count(t.name)) << "no scenario uses " << t.name;
  for (const auto& a : ccsim::topo::collective_algorithm_names()) EXPECT_TRUE(algorithms.count(a)) << "no scenario uses " << a;
  for (const auto& o : ccsim::topo::collective_op_names()) EXPECT_TRUE(operations.count(o)) << "no scenario uses " << o;
}

TEST(SchemaFile, EqualsTheGeneratedSchema) {
  // scenarios/schema.json is `ccsim schema`'s output; regenerate it when the declarations change.
  const json shipped = json::parse(read_file(kSchemaFile));
  const json generated = scenario_schema();
  EXPECT_EQ(shipped, generated) << "scenarios/schema.json is stale; regenerate it with `ccsim schema > "
                                   "scenarios/schema.json`. Diff: "
                                << json::diff(shipped, generated).dump();
}

TEST(SchemaFile, UsesOnlyKeywordsTheValidatorChecksAndNamesEveryScheme) {
  EXPECT_NO_THROW(JsonSchemaValidator{scenario_schema()});
  // Every registered scheme has an if/then branch validating its parameters.
  const json schema = scenario_schema();
  const json& branches = schema["properties"]["compression"]["oneOf"][0]["allOf"];
  std::vector<std::string> covered;
  for (const auto& b : branches) covered.push_back(b["if"]["properties"]["scheme"]["const"].get<std::string>());
  EXPECT_EQ(covered, algo::CompressorRegistry::global().names());
}

// ---------------------------------------------------------------------------------------------
// Input errors: one mutation of a valid document each. The loader must report exactly one error, at
// the given path and with the given message parts; the shipped schema must catch it too where JSON
// Schema can express the rule (schema_path set), and accept the document where it cannot.

struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string path;
  std::vector<std::string> needles;
  std::optional<std::pair<std::string, std::string>> schema;  ///< (path, message part) the schema reports
  StatusCode code = StatusCode::kInvalidArgument;
  std::vector<std::string> absent = {};  ///< must not appear in the message
};

// Names the case in gtest output instead of dumping its bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

const std::vector<BadCase>& bad_cases() {
  using P = std::pair<std::string, std::string>;
  static const std::vector<BadCase> cases = {
      {"MisspelledKey", rename("/cluster/nic_bandwidth", "nic_bandwith"), "/cluster/nic_bandwith",
       {"unknown key 'nic_bandwith'", "did you mean 'nic_bandwidth'", "valid keys here: fat_tree, gpu, gpus_per_node, intra_node, leaf_spine, link_latency"},
       P{"/cluster/nic_bandwith", "unexpected property"}},
      {"MisspelledTopLevelKey", rename("/collective", "colective"), "/colective",
       {"unknown key 'colective'", "did you mean 'collective'"}, P{"/colective", "unexpected property"}},
      {"MisspelledNestedKey", set("/cluster/gpu/kernel_cots", "roofline"), "/cluster/gpu/kernel_cots",
       {"did you mean 'kernel_cost'"}, P{"/cluster/gpu/kernel_cots", "unexpected property"}},
      {"UnknownKeyFarFromAll", set("/zzzzzzzzzz", 1), "/zzzzzzzzzz", {"unknown key 'zzzzzzzzzz'; valid keys here"},
       P{"/zzzzzzzzzz", "unexpected property"}, StatusCode::kInvalidArgument, {"did you mean"}},
      {"NodesWrongType", set("/cluster/nodes", "eight"), "/cluster/nodes",
       {"expected an integer in [1, 1048576]", "got the string \"eight\""}, P{"/cluster/nodes", "expected type integer"}},
      {"NodesFractional", set("/cluster/nodes", 8.5), "/cluster/nodes", {"expected an integer", "8.5"},
       P{"/cluster/nodes", "expected type integer"}},
      {"NodesBelowMinimum", set("/cluster/nodes", 0), "/cluster/nodes", {"[1, 1048576]", "got the number 0"},
       P{"/cluster/nodes", ">= 1"}},
      {"NegativeBandwidthString", set("/cluster/nic_bandwidth", "-100Gbps"), "/cluster/nic_bandwidth",
       {"positive", "\"-100Gbps\""}, P{"/cluster/nic_bandwidth", "oneOf"}},
      {"NegativeBandwidthNumber", set("/cluster/nic_bandwidth", -5), "/cluster/nic_bandwidth", {"positive", "-5"},
       P{"/cluster/nic_bandwidth", "> 0"}},
      {"ZeroBandwidth", set("/cluster/nic_bandwidth", 0), "/cluster/nic_bandwidth", {"positive"},
       P{"/cluster/nic_bandwidth", "> 0"}},
      {"BandwidthBadUnit", set("/cluster/nic_bandwidth", "100Gbsp"), "/cluster/nic_bandwidth",
       {"unknown unit \"Gbsp\"", "\"100Gbps\""}, P{"/cluster/nic_bandwidth", "100Gbsp"}},
      {"BandwidthTimeUnit", set("/cluster/nic_bandwidth", "1us"), "/cluster/nic_bandwidth", {"unknown unit \"us\""},
       P{"/cluster/nic_bandwidth", "matching"}},
      {"BandwidthWrongType", set("/cluster/nic_bandwidth", true), "/cluster/nic_bandwidth",
       {"expected a positive bandwidth", "the boolean true"}, P{"/cluster/nic_bandwidth", "oneOf"}},
      {"NegativeLatency", set("/cluster/link_latency", "-1us"), "/cluster/link_latency", {"non-negative duration"},
       P{"/cluster/link_latency", "oneOf"}},
      {"UnknownTopology", set("/cluster/topology", "stra"), "/cluster/topology",
       {"expected one of star", "got \"stra\"", "did you mean 'star'"}, P{"/cluster/topology", "expected one of"}},
      {"UnknownOperation", set("/collective/operation", "allredcue"), "/collective/operation",
       {"did you mean 'allreduce'"}, P{"/collective/operation", "expected one of"}},
      {"UnknownAlgorithm", set("/collective/algorithm", "rign"), "/collective/algorithm", {"did you mean 'ring'"},
       P{"/collective/algorithm", "expected one of"}},
      // A compression entry's own algorithm runs in a collective run: it must exist for the operation.
      {"EntryAlgorithmWithoutTheOperation", set("/compression/1/algorithm", "two_level"), "/compression/1/algorithm",
       {"no algorithm 'two_level' for allreduce", "valid: ring, ring_bidir, semi_loop"}, std::nullopt},
      {"KernelCostTypo", set("/cluster/gpu/kernel_cost", "rooflin"), "/cluster/gpu/kernel_cost",
       {"did you mean 'roofline'"}, P{"/cluster/gpu/kernel_cost", "expected one of"}},
      {"UnknownScheme", set("/compression/1/scheme", "int4"), "/compression/1/scheme",
       {"expected one of fp32, bf16, int8", "got \"int4\"", "did you mean 'int8'"},
       P{"/compression/1/scheme", "expected one of"}},
      {"UnknownSchemeNoSuggestion", set("/compression/0/scheme", "signsgd"), "/compression/0/scheme",
       {"got \"signsgd\""}, P{"/compression/0/scheme", "expected one of"}, StatusCode::kInvalidArgument,
       {"did you mean"}},
      {"BlockNotPowerOfTwo", set("/compression/1/params/block", 100), "/compression/1/params/block",
       {"power of two", "got 100"}, std::nullopt},
      {"BlockOutOfRange", set("/compression/1/params/block", 4), "/compression/1/params/block",
       {"[8, 65536]", "got the number 4"}, P{"/compression/1/params/block", ">= 8"}},
      {"UnknownParam", rename("/compression/1/params/block", "blok"), "/compression/1/params/blok",
       {"unknown parameter 'blok'", "did you mean 'block'", "valid: block, rounding"},
       P{"/compression/1/params/blok", "unexpected property"}},
      {"ParamChoiceTypo", set("/compression/1/params/rounding", "nearst"), "/compression/1/params/rounding",
       {"got \"nearst\"", "did you mean 'nearest'"}, P{"/compression/1/params/rounding", "expected one of"}},
      {"ParamForSchemeWithoutParams", set("/compression/0/params", json{{"block", 256}}), "/compression/0/params/block",
       {"unknown parameter 'block'", "valid: (none)"}, P{"/compression/0/params/block", "unexpected property"}},
      {"ParamsInconsistentWithEachOther",
       set("/compression/1", json{{"scheme", "tfp"}, {"params", {{"k", 20}, {"base", "fp16"}}}}),
       "/compression/1/params/k", {"expected an integer in [7, 16] with base fp16", "got 20"}, std::nullopt},
      {"CompressionItemNotObject", set("/compression/0", "bf16"), "/compression/0",
       {"expected an object", "the string \"bf16\""}, P{"/compression", "oneOf"}},
      {"EmptyCompression", set("/compression", json::array()), "/compression", {"empty array"},
       P{"/compression", "at least 1 item"}},
      {"MissingCompression", erase("/compression"), "/compression", {"missing required key 'compression'"},
       P{"", "'compression'"}},
      {"MissingName", erase("/name"), "/name", {"missing required key 'name'"}, P{"", "'name'"}},
      {"NameWithSpace", set("/name", "my run"), "/name", {"letters, digits", "\"my run\""}, P{"/name", "matching"}},
      {"SeedNegative", set("/seed", -1), "/seed", {"[0, 9223372036854775807]"}, P{"/seed", ">= 0"}},
      {"SeedAsString", set("/seed", "1"), "/seed", {"expected an integer", "the string \"1\""},
       P{"/seed", "expected type integer"}},
      {"ClusterNotObject", set("/cluster", 8), "/cluster", {"expected an object", "the number 8"},
       P{"/cluster", "expected type object"}},
      {"CorrelationAboveOne", set("/gradients/correlation", 1.5), "/gradients/correlation", {"[0, 1]", "1.5"},
       P{"/gradients/correlation", "<= 1"}},
      {"EnvelopeCorrelationNegative", set("/gradients/envelope_correlation", -0.25), "/gradients/envelope_correlation",
       {"[0, 1]", "-0.25"}, P{"/gradients/envelope_correlation", ">= 0"}},
      {"SizeNotMultipleOfFour", set("/gradients/size", "1001B"), "/gradients/size", {"multiple of 4", "1001"},
       std::nullopt},
      {"SizeFractionalBytes", set("/gradients/size", "2.5B"), "/gradients/size", {"whole number of bytes"},
       std::nullopt},
      {"FilesNotAnArray", set("/gradients/files", "a.npy"), "/gradients/files", {"an array of file paths"},
       P{"/gradients/files", "expected type array"}},
      {"NpyWithoutFiles", set("/gradients/source", "npy"), "/gradients/files", {"at least one .npy file"},
       std::nullopt},
      {"MissingNpyFile", set("/gradients", json{{"source", "npy"}, {"files", json::array({"missing.npy"})}}), "/gradients/files/0",
       {"expected an existing file", "\"missing.npy\"", "not found"}, std::nullopt, StatusCode::kNotFound},
  };
  return cases;
}

class BadScenario : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadScenario, IsReportedAtItsPathByLoaderAndSchema) {
  const BadCase& c = GetParam();
  TempDir dir;  // an empty base folder: no file referenced by a case exists
  json doc = base_doc();
  c.mutate(doc);
  SCOPED_TRACE(doc.dump());

  const auto loaded = load_scenario_json(doc, "case.json", dir.path().string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), c.code) << loaded.status().message();
  EXPECT_TRUE(has_error(loaded.status(), "case.json", c.path, c.needles));
  EXPECT_EQ(errors_of(loaded.status(), "case.json").size(), 1u) << loaded.status().message();
  for (const auto& a : c.absent) EXPECT_EQ(loaded.status().message().find(a), std::string::npos) << a;

  const auto violations = shipped_schema().validate(doc);
  if (c.schema) {
    EXPECT_TRUE(schema_reports(violations, c.schema->first, c.schema->second));
  } else {
    std::vector<std::string> msgs;
    for (const auto& v : violations) msgs.push_back(v.to_string());
    EXPECT_EQ(msgs, std::vector<std::string>{}) << "the schema cannot express this rule, yet rejects the document";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadScenario, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

TEST(LoaderErrors, BaseDocumentIsValid) {
  // The error cases above mean something only if the unmutated document is accepted by both.
  EXPECT_EQ(shipped_schema().errors(base_doc()), std::vector<std::string>{});
  const auto loaded = load_scenario_json(base_doc(), "case.json", ".");
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
}

TEST(LoaderErrors, EveryErrorOfADocumentIsReportedInOneStatus) {
  json doc = base_doc();
  doc["cluster"]["nodes"] = "eight";
  doc["cluster"]["nic_bandwith"] = "100Gbps";
  doc["compression"][0]["scheme"] = "int9";
  doc["compression"][1]["params"]["block"] = 100;
  doc["sed"] = 3;
  const auto loaded = load_scenario_json(doc, "multi.json", ".");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(errors_of(loaded.status(), "multi.json").size(), 5u) << loaded.status().message();
  EXPECT_TRUE(has_error(loaded.status(), "multi.json", "/cluster/nodes", {"expected an integer"}));
  EXPECT_TRUE(has_error(loaded.status(), "multi.json", "/cluster/nic_bandwith", {"did you mean 'nic_bandwidth'"}));
  EXPECT_TRUE(has_error(loaded.status(), "multi.json", "/compression/0/scheme", {"did you mean 'int8'"}));
  EXPECT_TRUE(has_error(loaded.status(), "multi.json", "/compression/1/params/block", {"power of two"}));
  EXPECT_TRUE(has_error(loaded.status(), "multi.json", "/sed", {"did you mean 'seed'"}));
}

TEST(LoaderErrors, MissingFileAmongOtherErrorsIsInvalidArgument) {
  json doc = base_doc();
  doc["gradients"] = {{"source", "npy"}, {"files", json::array({"missing.npy", "also_missing.npy"})}};
  TempDir dir;
  const auto loaded = load_scenario_json(doc, "f.json", dir.path().string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_error(loaded.status(), "f.json", "/gradients/files/0", {"missing.npy"}));
  EXPECT_TRUE(has_error(loaded.status(), "f.json", "/gradients/files/1", {"also_missing.npy"}));
  EXPECT_TRUE(loaded.status().is_input_error());
}

TEST(LoaderErrors, NonObjectDocumentIsRejectedAtTheRoot) {
  for (const json& doc : {json::array({1, 2}), json("scenario"), json(3)}) {
    SCOPED_TRACE(doc.dump());
    const auto loaded = load_scenario_json(doc, "root.json", ".");
    ASSERT_FALSE(loaded.ok());
    EXPECT_TRUE(has_error(loaded.status(), "root.json", "/", {"expected a scenario object"}));
    EXPECT_FALSE(shipped_schema().accepts(doc));
  }
}

TEST(LoaderErrors, MissingScenarioFileIsNotFound) {
  TempDir dir;
  const auto loaded = load_scenario((dir / "nope.json").string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("nope.json"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Broken JSON: the message carries nlohmann's line and column (1-based; the column is that of the
// last character read, which for a stray character is the character itself).

TEST(BrokenJson, ReportsLineAndColumnOfAStrayComma) {
  TempDir dir;
  // Line 3 is `  "seed": 1,,`; the second comma is its 13th character.
  const fs::path file = dir.write("broken.json", "{\n  \"name\": \"x\",\n  \"seed\": 1,,\n  \"cluster\": {}\n}\n");
  const auto loaded = load_scenario(file.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message().rfind(file.string() + ": invalid JSON: line 3, column 13:", 0), 0u)
      << loaded.status().message();
  EXPECT_EQ(loaded.status().message().find("[json.exception"), std::string::npos) << "library noise in the message";
}

TEST(BrokenJson, ReportsLineAndColumnOfABareWord) {
  TempDir dir;
  // Line 4 is `    "nodes": eight`: the lexer rejects the literal at its first letter, column 14.
  const fs::path file = dir.write("bare.json", "{\n  \"name\": \"x\",\n  \"cluster\": {\n    \"nodes\": eight\n  }\n}\n");
  const auto loaded = load_scenario(file.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(": invalid JSON: line 4, column 14:"), std::string::npos)
      << loaded.status().message();
}

TEST(BrokenJson, ReportsTruncatedFile) {
  TempDir dir;
  const fs::path file = dir.write("truncated.json", "{\n  \"name\": \"x\",\n");
  const auto loaded = load_scenario(file.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("line 3, column 1"), std::string::npos) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("end of input"), std::string::npos) << loaded.status().message();
}

TEST(BrokenJson, OverflowingNumberIsAnInputErrorNotAnException) {
  // 1e999 is valid JSON syntax that nlohmann rejects with out_of_range (not parse_error); it is
  // still bad input and must come back as an input-error Status naming the file, not escape as an
  // exception (which the CLI reports as a runtime failure, exit 1).
  TempDir dir;
  const fs::path file = dir.write("overflow.json", "{\n  \"name\": \"x\",\n  \"seed\": 1e999\n}\n");
  Result<LoadedScenario> loaded = invalid_argument("not run");
  ASSERT_NO_THROW(loaded = load_scenario(file.string()));
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.status().is_input_error());
  EXPECT_EQ(loaded.status().message().rfind(file.string() + ": ", 0), 0u) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("1e999"), std::string::npos) << loaded.status().message();
}

// ---------------------------------------------------------------------------------------------
// Quantities.

TEST(Quantities, StringsWithUnitsLoadInBaseUnits) {
  json doc = base_doc();
  doc["cluster"]["nic_bandwidth"] = "100Gbps";
  doc["cluster"]["link_latency"] = "1.5us";
  doc["cluster"]["gpu"] = {{"memory_bandwidth", "2TB/s"}, {"kernel_launch", "200ns"}};
  doc["gradients"]["size"] = "25MB";
  auto loaded = load_scenario_json(doc, "q.json", ".");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Scenario& s = loaded->scenario;
  EXPECT_DOUBLE_EQ(s.cluster.nic_bandwidth_Bps, 12.5e9);
  EXPECT_DOUBLE_EQ(s.cluster.link_latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.memory_bandwidth_Bps, 2e12);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.kernel_launch_s, 200e-9);
  EXPECT_EQ(s.gradients.size_bytes, 25'000'000u);
  // The resolved JSON carries base units.
  EXPECT_DOUBLE_EQ(loaded->resolved["cluster"]["nic_bandwidth"].get<double>(), 12.5e9);
  EXPECT_EQ(loaded->resolved["gradients"]["size"], 25'000'000u);

  doc["gradients"]["size"] = "25MiB";
  loaded = load_scenario_json(doc, "q.json", ".");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->scenario.gradients.size_bytes, 26'214'400u);
}

TEST(Quantities, EquivalentSpellingsAgree) {
  const std::vector<json> spellings = {"100Gbps", "12.5GBps", "12.5GB/s", " 100 Gbps ", "0.1Tbps", 12.5e9,
                                       json::parse("12500000000"), "12500000000", "1e2Gbps", "100000Mbps"};
  for (const json& bw : spellings) {
    SCOPED_TRACE(bw.dump());
    json doc = base_doc();
    doc["cluster"]["nic_bandwidth"] = bw;
    EXPECT_TRUE(shipped_schema().accepts(doc)) << ::testing::PrintToString(shipped_schema().errors(doc));
    const auto loaded = load_scenario_json(doc, "q.json", ".");
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_DOUBLE_EQ(loaded->scenario.cluster.nic_bandwidth_Bps, 12.5e9);
  }
}

TEST(Quantities, SchemaPatternAndParserAgreeOnSyntax) {
  // A quantity string the schema's pattern accepts must parse, and one it rejects must not
  // (non-zero values, so the sign/positivity rule, which a pattern cannot express, stays out).
  const std::vector<std::string> texts = {"100Gbps", "100 Gbps", ".5GB/s", "5.GB/s", "1.5e3Mbps", "7",
                                          "100gbps", "100Gbsp", "Gbps", "1..5Gbps", "0x10Gbps", "1e3",
                                          "+100Gbps", "100Gbps/s", "inf", "nan"};
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    json doc = base_doc();
    doc["cluster"]["nic_bandwidth"] = t;
    const bool schema_ok = shipped_schema().accepts(doc);
    const bool loader_ok = load_scenario_json(doc, "q.json", ".").ok();
    EXPECT_EQ(schema_ok, loader_ok) << "schema " << (schema_ok ? "accepts" : "rejects") << ", loader "
                                    << (loader_ok ? "accepts" : "rejects");
  }
}

// ---------------------------------------------------------------------------------------------
// Relative file paths resolve against the scenario file's folder, not the working directory.

TEST(RelativePaths, ResolveAgainstTheScenarioFolder) {
  TempDir dir;
  const std::vector<float> g0 = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> g1 = {8, 7, 6, 5, 4, 3, 2, 1};
  fs::create_directories(dir / "scn" / "grads");
  ASSERT_TRUE(traces::write_npy_f32((dir / "scn" / "g0.npy").string(), {8}, g0).ok());
  ASSERT_TRUE(traces::write_npy_f32((dir / "scn" / "grads" / "g1.npy").string(), {2, 4}, g1).ok());
  json doc = base_doc();
  doc["gradients"] = {{"source", "npy"}, {"files", json::array({"g0.npy", "grads/g1.npy"})}};
  doc["cluster"]["nodes"] = 2;
  doc["compression"] = {{"scheme", "fp32"}};
  dir.write("scn/s.json", doc.dump(2));
  fs::create_directories(dir / "elsewhere");
  // A decoy with the same name in the working directory must not be picked up.
  ASSERT_TRUE(traces::write_npy_f32((dir / "elsewhere" / "g0.npy").string(), {2}, {0, 0}).ok());

  ScopedCurrentPath cwd(dir / "elsewhere");
  const auto loaded = load_scenario("../scn/s.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const auto& files = loaded->scenario.gradients.files;
  ASSERT_EQ(files.size(), 2u);
  EXPECT_TRUE(fs::equivalent(files[0], dir / "scn" / "g0.npy")) << files[0];
  EXPECT_TRUE(fs::equivalent(files[1], dir / "scn" / "grads" / "g1.npy")) << files[1];

  // The runner reads exactly those files.
  const auto report = run_scenario(loaded.value());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->elements, 8u);
  ASSERT_EQ(report->results.size(), 1u);
  EXPECT_EQ(report->results[0].vnmse, 0.0);  // fp32 is lossless

  // A file present only in the working directory is not found.
  fs::remove(dir / "scn" / "g0.npy");
  const auto missing = load_scenario("../scn/s.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(has_error(missing.status(), "../scn/s.json", "/gradients/files/0", {"\"g0.npy\"", "not found"}));
}

// "vs formula" compares what the ring formula models: the collective's network time. With free
// kernels a scheme's metadata phase is left out of the comparison (bf16 and DynamiQ both meet the
// formula); where kernels are timed there is no comparison at all.
TEST(AnalyticFormula, ComparesTheCollectivesNetworkTimeOnly) {
  json doc = base_doc();
  doc["gradients"]["size"] = "4MB";
  doc["compression"] = json::parse(R"([{"scheme": "bf16"}, {"scheme": "dynamiq"}])");
  const auto ideal = run_scenario(load_scenario_json(doc, "case.json", ".").value());
  ASSERT_TRUE(ideal.ok()) << ideal.status().message();
  for (const auto& r : ideal->results) {
    SCOPED_TRACE(r.scheme);
    ASSERT_TRUE(std::isfinite(r.analytic_time_s));
    EXPECT_NEAR(r.vs_analytic, 0.0, 1e-3);
  }
  EXPECT_GT(ideal->results[1].timing.plan_time_s, 0.0);  // DynamiQ's metadata phase is timed, and set aside
  EXPECT_NE(results_csv(*ideal).find(fmt::format(",{},", ideal->results[1].vs_analytic)), std::string::npos);

  doc["cluster"]["gpu"] = json::parse(R"({"kernel_cost": "roofline"})");
  const auto timed = run_scenario(load_scenario_json(doc, "case.json", ".").value());
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  for (const auto& r : timed->results) {
    EXPECT_TRUE(std::isfinite(r.analytic_time_s));
    EXPECT_TRUE(std::isnan(r.vs_analytic));
  }
  EXPECT_NE(format_summary(*timed, "out").find("not compared"), std::string::npos);
}

TEST(RelativePaths, AbsolutePathsAreKept) {
  TempDir dir;
  const fs::path npy = dir / "abs.npy";
  ASSERT_TRUE(traces::write_npy_f32(npy.string(), {4}, {1, 2, 3, 4}).ok());
  json doc = base_doc();
  doc["gradients"] = {{"source", "npy"}, {"files", json::array({npy.string()})}};
  const fs::path file = dir.write("sub/s.json", doc.dump());
  const auto loaded = load_scenario(file.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->scenario.gradients.files, std::vector<std::string>{npy.string()});
}

// ---------------------------------------------------------------------------------------------
// Overrides.

TEST(Overrides, DottedAndPointerPathsWithNumbersAndStrings) {
  Overrides ov;
  ov.sets = {"cluster.nodes=16",                   // dotted, a JSON number
             "/cluster/nic_bandwidth=25GB/s",      // pointer, not JSON: taken as a string
             "gradients.size=1MB",                 // dotted, string quantity
             "/compression/1/params/block=64",     // pointer through an array index
             "compression.0.scheme=fp32",          // dotted through an array index
             "description=\"quoted string\"",      // JSON string
             "cluster.gpu.kernel_cost=roofline"};  // creates the missing "gpu" object
  const auto loaded = load_scenario_json(base_doc(), "o.json", ".", ov);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Scenario& s = loaded->scenario;
  EXPECT_EQ(s.cluster.nodes, 16);
  EXPECT_DOUBLE_EQ(s.cluster.nic_bandwidth_Bps, 25e9);
  EXPECT_EQ(s.gradients.size_bytes, 1'000'000u);
  ASSERT_EQ(s.compression.size(), 2u);
  EXPECT_EQ(s.compression[0].scheme, "fp32");
  EXPECT_EQ(s.compression[1].params["block"], 64);
  EXPECT_EQ(s.description, "quoted string");
  EXPECT_EQ(s.cluster.gpu.kernel_cost, sim::KernelCostMode::kRoofline);
  // The resolved JSON records the overridden values.
  EXPECT_EQ(loaded->resolved["cluster"]["nodes"], 16);
  EXPECT_EQ(loaded->resolved["compression"][1]["params"]["block"], 64);
}

TEST(Overrides, JsonStringIsNotANumber) {
  Overrides ov;
  ov.sets = {"cluster.nodes=\"16\""};
  const auto loaded = load_scenario_json(base_doc(), "o.json", ".", ov);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_error(loaded.status(), "o.json", "/cluster/nodes", {"expected an integer", "the string \"16\""}));
}

TEST(Overrides, SeedOverrideWinsOverFileAndSet) {
  json doc = base_doc();
  doc["seed"] = 5;
  Overrides ov;
  ov.sets = {"seed=7"};
  auto loaded = load_scenario_json(doc, "o.json", ".", ov);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->scenario.seed, 7);
  ov.seed = 42;
  loaded = load_scenario_json(doc, "o.json", ".", ov);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->scenario.seed, 42);
  EXPECT_EQ(loaded->resolved["seed"], 42);
  ov = {};
  ov.seed = -3;  // validated like the file's own value
  loaded = load_scenario_json(doc, "o.json", ".", ov);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_error(loaded.status(), "o.json", "/seed", {"[0, 9223372036854775807]"}));
}

TEST(Overrides, TypoIsReportedAsUnknownKey) {
  Overrides ov;
  ov.sets = {"cluster.nic_bandwith=50Gbps"};
  auto loaded = load_scenario_json(base_doc(), "o.json", ".", ov);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_error(loaded.status(), "o.json", "/cluster/nic_bandwith",
                        {"unknown key 'nic_bandwith'", "did you mean 'nic_bandwidth'"}));
  ov.sets = {"/clutser/nodes=4"};
  loaded = load_scenario_json(base_doc(), "o.json", ".", ov);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_error(loaded.status(), "o.json", "/clutser", {"did you mean 'cluster'"}));
}

TEST(Overrides, MalformedAssignmentsAreInputErrors) {
  for (const std::string bad : {"cluster.nodes", "=16", "/name/x=1"}) {
    SCOPED_TRACE(bad);
    Overrides ov;
    ov.sets = {bad};
    Result<LoadedScenario> loaded = invalid_argument("not run");
    ASSERT_NO_THROW(loaded = load_scenario_json(base_doc(), "o.json", ".", ov));
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(loaded.status().message().find(bad), std::string::npos) << loaded.status().message();
  }
}

TEST(Overrides, IndicesThatWouldPadArraysWithNullsAreRefused) {
  // nlohmann pads an array with nulls up to any index: "/x/88888888" once asked for 2 GB (found by
  // the override fuzz target). An index names an entry or the one past the end, and a number past
  // what exists starts a new array, at 0.
  const struct {
    std::string set, want;
  } cases[] = {
      {"/compression/5/scheme=bf16", "/compression/5: the array has 2 entries; expected an index from 0 to 2"},
      {"/extra/12=3", "/extra/12: a new array starts at index 0, got '12'"},
      {"/cn8/88888888=1", "/cn8/88888888: a new array starts at index 0, got '88888888'"},
      {"/cluster/x/0/7=1", "/cluster/x/0/7: a new array starts at index 0, got '7'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.set);
    json doc = base_doc();
    const Status st = apply_override(doc, c.set);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.message();
  }
  json doc = base_doc();
  ASSERT_TRUE(apply_override(doc, "/compression/2={\"scheme\": \"fp16\"}").ok());  // one past the end adds one
  EXPECT_EQ(doc["compression"].size(), 3u);
  ASSERT_TRUE(apply_override(doc, "/list/0/0=3").ok());  // new arrays from index 0
  EXPECT_EQ(doc["list"], json::parse("[[3]]"));
}

TEST(Overrides, OverflowingValueIsAnInputErrorNotAnException) {
  Overrides ov;
  ov.sets = {"seed=1e999"};
  Result<LoadedScenario> loaded = invalid_argument("not run");
  ASSERT_NO_THROW(loaded = load_scenario_json(base_doc(), "o.json", ".", ov));
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.status().is_input_error());
  EXPECT_NE(loaded.status().message().find("1e999"), std::string::npos) << loaded.status().message();
}

TEST(Overrides, SeedOnANonObjectDocumentIsAnInputErrorNotAnException) {
  Overrides ov;
  ov.seed = 3;
  Result<LoadedScenario> loaded = invalid_argument("not run");
  ASSERT_NO_THROW(loaded = load_scenario_json(json::array({1, 2}), "o.json", ".", ov));
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(loaded.status().is_input_error());
}

// ---------------------------------------------------------------------------------------------
// The resolved JSON.

// Walks `schema` next to `resolved` (and the `input` it came from): every declared property is
// present, and one the input left out carries the schema's default (or `special` at that path).
// Returns how many defaults were compared.
int expect_complete(const json& schema, const json& input, const json& resolved, const std::string& path,
                    const std::map<std::string, json>& special) {
  int compared = 0;
  if (auto props = schema.find("properties"); props != schema.end()) {
    for (const auto& [key, sub] : props->items()) {
      const std::string at = path + "/" + key;
      if (!resolved.contains(key)) {
        ADD_FAILURE() << "resolved JSON lacks " << at;
        continue;
      }
      const json in = input.is_object() && input.contains(key) ? input[key] : json();
      if (in.is_null()) {
        if (auto it = special.find(at); it != special.end()) {
          EXPECT_EQ(resolved[key], it->second) << at;
          ++compared;
        } else if (sub.contains("default")) {
          EXPECT_EQ(resolved[key], sub["default"]) << at;
          ++compared;
        }
      }
      if (sub.contains("properties")) compared += expect_complete(sub, in, resolved[key], at, special);
      if (sub.contains("oneOf") && resolved[key].is_array()) {  // compression: an object or an array of them
        const json& item_schema = sub["oneOf"][0];
        for (size_t i = 0; i < resolved[key].size(); ++i) {
          const json item_in = in.is_array() ? in[i] : in;
          compared += expect_complete(item_schema, item_in, resolved[key][i], at + "/" + std::to_string(i), special);
        }
      }
    }
  }
  if (auto all = schema.find("allOf"); all != schema.end()) {  // per-scheme parameters
    for (const auto& branch : *all) {
      if (branch["if"]["properties"]["scheme"]["const"] == resolved["scheme"])
        compared += expect_complete(branch["then"], input, resolved, path, special);
    }
  }
  return compared;
}

TEST(Resolved, EveryDefaultIsPresent) {
  const json minimal = json::parse(R"({"name": "minimal", "gradients": {"size": "4KB"},
                                       "compression": [{"scheme": "int8"}, {"scheme": "bf16"}]})");
  const auto loaded = load_scenario_json(minimal, "m.json", ".");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const int compared =
      expect_complete(scenario_schema(), minimal, loaded->resolved, "", {{"/outputs/dir", "out/minimal"}});
  EXPECT_GE(compared, 20) << "the walk compared too few defaults to mean anything";
  EXPECT_EQ(loaded->resolved["compression"][0]["params"], json::parse(R"({"block": 256, "rounding": "stochastic"})"));
  EXPECT_EQ(loaded->resolved["outputs"]["dir"], "out/minimal");
  EXPECT_EQ(shipped_schema().errors(loaded->resolved), std::vector<std::string>{});
}

TEST(Resolved, ReloadingGivesTheIdenticalResolvedJson) {
  for (const std::string& name : shipped_scenarios()) {
    SCOPED_TRACE(name);
    const auto first = load_scenario((kSourceDir / name).string());
    ASSERT_TRUE(first.ok()) << first.status().message();
    const auto second = load_scenario_json(first->resolved, "resolved.json", (kSourceDir / name).parent_path().string());
    ASSERT_TRUE(second.ok()) << second.status().message();
    EXPECT_EQ(second->resolved, first->resolved) << json::diff(first->resolved, second->resolved).dump();
    EXPECT_EQ(second->resolved.dump(), first->resolved.dump());  // byte-identical text too
  }
  // A single compression object becomes an array; the reload is still identical.
  json doc = base_doc();
  doc["compression"] = {{"scheme", "int8"}, {"params", {{"block", 64}}}};
  const auto first = load_scenario_json(doc, "c.json", ".");
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(first->resolved["compression"].is_array());
  const auto second = load_scenario_json(first->resolved, "c.json", ".");
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->resolved, first->resolved);
}

TEST(Resolved, WrittenNextToOutputsItReloadsFromThere) {
  // scenario.resolved.json is written into the output folder; loaded from there, it must describe
  // the same run, including gradient files named relative to the original scenario file.
  TempDir dir;
  fs::create_directories(dir / "work" / "scn");
  ASSERT_TRUE(traces::write_npy_f32((dir / "work" / "scn" / "g.npy").string(), {4}, {1, 2, 3, 4}).ok());
  json doc = base_doc();
  doc["gradients"] = {{"source", "npy"}, {"files", json::array({"g.npy"})}};
  dir.write("work/scn/s.json", doc.dump(2));

  ScopedCurrentPath cwd(dir / "work");
  const auto first = load_scenario("scn/s.json");
  ASSERT_TRUE(first.ok()) << first.status().message();
  const fs::path resolved_file = dir.write("work/out/case/scenario.resolved.json", first->resolved.dump(2));
  const auto second = load_scenario(fs::relative(resolved_file).string());
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->resolved, first->resolved);
}

// The size check's closed form for a 3D-parallel run (TP all-reduces, stage-to-stage sends, each
// stage's DP sync, per round) against the flows the run actually starts: --max-flows at the count
// passes, one less is refused, and the count is what the network carried.
TEST(RunSize, ParallelEstimateIsTheFlowsTheRunStarts) {
  const json doc = {{"name", "p"},
                    {"cluster", {{"nodes", 4}, {"gpus_per_node", 2}}},
                    {"parallelism", {{"tp", 2}, {"pp", 2}}},
                    {"workload", {{"trace", (kSourceDir / "traces/models/gpt2-345m.json").string()},
                                  {"rounds", 2}, {"micro_batches", 3}}},
                    {"compression", json::array({{{"scheme", "fp16"}}, {{"scheme", "int8"}}})}};
  const auto loaded = load_scenario_json(doc, "p.json", ".");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const auto report = run_parallel_training(*loaded);
  ASSERT_TRUE(report.ok()) << report.status().message();
  uint64_t flows = 0;
  for (const ParallelResult& r : report->results) flows += r.transfers;
  ASSERT_GT(flows, 0u);
  Overrides at;
  at.max_flows = flows;
  EXPECT_TRUE(load_scenario_json(doc, "p.json", ".", at).ok());
  at.max_flows = flows - 1;
  const auto refused = load_scenario_json(doc, "p.json", ".", at);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(fmt::format("/workload/rounds: the run would simulate {:.3g} transfers",
                                                        static_cast<double>(flows))),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace ccsim::app
