// The real ccsim executable, run as a user would: help and version, list, schema, validate on good
// and bad files (exit codes and the location named in each message), and run (outputs written
// completely and reproducibly, or not at all).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/cli_run.hpp"
#include "tests/tools/temp_dir.hpp"
#include "traces/npy.hpp"

namespace ccsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ccsim::testing;  // TempDir, read_file and the CLI-run helpers (cli_run.hpp)

const fs::path kSourceDir = CCSIM_SOURCE_DIR;
const std::string kQuickstart = (kSourceDir / "scenarios" / "quickstart.json").string();

class Cli : public ::testing::Test {
 protected:
  Outcome run(const std::string& args) { return ccsim(args, scratch_); }
  // `validate` and `run` of the quickstart with `options` both exit 2 with `want` on stderr, and
  // run writes nothing.
  void expect_quickstart_refused(const std::string& options, const std::string& want) {
    const fs::path out = tmp_ / "refused";
    for (const std::string& cmd : {"validate " + quote(kQuickstart), "run " + quote(kQuickstart) + " --out " +
                                                                        quote(out.string())}) {
      SCOPED_TRACE(cmd);
      const Outcome o = run(cmd + " " + options);
      EXPECT_EQ(o.code, 2) << show(o);
      EXPECT_TRUE(contains(o.err, want)) << show(o);
    }
    EXPECT_FALSE(fs::exists(out));
  }
  TempDir scratch_{"ccsim-cli-io"};
  TempDir tmp_{"ccsim-cli"};
};

// ---------------------------------------------------------------------------------------------
// Help, version, list, schema, unknown commands.

TEST_F(Cli, VersionMatchesTheProjectVersion) {
  for (const char* flag : {"--version", "-V"}) {
    const Outcome o = run(flag);
    EXPECT_EQ(o.code, 0) << show(o);
    EXPECT_EQ(o.out, fmt::format("ccsim {}\n", CCSIM_PROJECT_VERSION)) << flag;
    EXPECT_EQ(o.err, "");
  }
}

TEST_F(Cli, HelpListsEveryCommandAndTheExitCodes) {
  for (const char* flag : {"--help", "-h", "help"}) {
    const Outcome o = run(flag);
    EXPECT_EQ(o.code, 0) << show(o);
    for (const char* word : {"usage: ccsim <command>", "\n  run ", "\n  validate ", "\n  list ", "\n  schema ",
                             "exit codes: 0 success, 1 runtime failure, 2 bad input"})
      EXPECT_TRUE(contains(o.out, word)) << flag << " lacks " << word << "\n" << show(o);
  }
}

TEST_F(Cli, NoArgumentsPrintsUsageAndFails) {
  const Outcome o = run("");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "usage: ccsim")) << show(o);
}

TEST_F(Cli, UnknownCommandFailsWithUsage) {
  const Outcome o = run("frobnicate");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "unknown command 'frobnicate'")) << show(o);
  EXPECT_TRUE(contains(o.err, "usage: ccsim")) << show(o);
}

TEST_F(Cli, ListNamesSchemesCollectivesAndTopologies) {
  const Outcome o = run("list");
  ASSERT_EQ(o.code, 0) << show(o);
  for (const char* re : {"\n  fp32 +\\S", "\n  bf16 +\\S", "\n  int8 +\\S", "\n  allreduce +ring +\\S", "\n  star +\\S",
                         "\n      block +default 256 +\\[8, 65536\\], power of two", "\n  synthetic ", "\n  npy "})
    EXPECT_TRUE(std::regex_search(o.out, std::regex(re))) << "no match for " << re << "\n" << o.out;
}

TEST_F(Cli, CommandHelpShowsItsOptions) {
  Outcome o = run("run --help");
  EXPECT_EQ(o.code, 0) << show(o);
  for (const char* word : {"usage: ccsim run SCENARIO", "--out", "--set", "--seed", "--threads"})
    EXPECT_TRUE(contains(o.out, word)) << word << "\n" << show(o);
  o = run("validate --help");
  EXPECT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "usage: ccsim validate")) << show(o);
}

TEST_F(Cli, BadOptionsAreBadInput) {
  Outcome o = run("run --bogus " + quote(kQuickstart));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "ccsim run --help")) << show(o);
  o = run("run");  // the scenario is required
  EXPECT_EQ(o.code, 2) << show(o);
  o = run("validate");
  EXPECT_EQ(o.code, 2) << show(o);
}

TEST_F(Cli, SchemaPrintsTheShippedSchema) {
  const Outcome o = run("schema");
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_EQ(json::parse(o.out), json::parse(read_file(kSourceDir / "scenarios" / "schema.json")))
      << "scenarios/schema.json is stale: regenerate it with `ccsim schema > scenarios/schema.json`";
}

// ---------------------------------------------------------------------------------------------
// validate.

json base_doc() {
  return json::parse(R"({
    "name": "case",
    "cluster": {"topology": "star", "nodes": 4, "nic_bandwidth": "100Gbps", "link_latency": "1us"},
    "gradients": {"source": "synthetic", "size": "64KB"},
    "compression": [{"scheme": "bf16"}, {"scheme": "int8", "params": {"block": 256}}]
  })");
}

struct BadFile {
  std::string name;
  std::string text;      ///< the file's content
  std::string location;  ///< the JSON Pointer (or "line L, column C") stderr must name
  std::string detail;    ///< and part of the message
};

std::vector<BadFile> bad_files() {
  std::vector<BadFile> out;
  auto add = [&](std::string name, const std::function<void(json&)>& mutate, std::string location, std::string detail) {
    json d = base_doc();
    mutate(d);
    out.push_back({std::move(name), d.dump(2), std::move(location), std::move(detail)});
  };
  add("typo", [](json& d) { d["cluster"]["nic_bandwith"] = d["cluster"]["nic_bandwidth"]; d["cluster"].erase("nic_bandwidth"); },
      "/cluster/nic_bandwith", "did you mean 'nic_bandwidth'");
  add("top_typo", [](json& d) { d["compresion"] = d["compression"]; d.erase("compression"); }, "/compresion",
      "did you mean 'compression'");
  add("nodes_type", [](json& d) { d["cluster"]["nodes"] = "eight"; }, "/cluster/nodes", "expected an integer");
  add("negative_string", [](json& d) { d["cluster"]["nic_bandwidth"] = "-100Gbps"; }, "/cluster/nic_bandwidth",
      "positive");
  add("negative_number", [](json& d) { d["cluster"]["nic_bandwidth"] = -5; }, "/cluster/nic_bandwidth", "positive");
  add("bad_unit", [](json& d) { d["cluster"]["nic_bandwidth"] = "100Gbsp"; }, "/cluster/nic_bandwidth",
      "unknown unit \"Gbsp\"");
  add("missing_npy", [](json& d) { d["gradients"] = {{"source", "npy"}, {"files", json::array({"missing.npy"})}}; },
      "/gradients/files/0", "missing.npy");
  add("scheme", [](json& d) { d["compression"][1]["scheme"] = "int4"; }, "/compression/1/scheme",
      "did you mean 'int8'");
  add("block", [](json& d) { d["compression"][1]["params"]["block"] = 100; }, "/compression/1/params/block",
      "power of two");
  add("param", [](json& d) { d["compression"][1]["params"] = {{"blok", 64}}; }, "/compression/1/params/blok",
      "did you mean 'block'");
  // Line 3 is `  "seed": 1,,`; the second comma is its 13th character.
  out.push_back({"broken_json", "{\n  \"name\": \"x\",\n  \"seed\": 1,,\n}\n", "invalid JSON: line 3, column 13",
                 "unexpected ','"});
  // A repeated key: JSON would keep one of the two values silently.
  std::string twice = base_doc().dump(2);
  twice.insert(twice.find("\"cluster\": {") + 12, "\n    \"nodes\": 3,");
  out.push_back({"duplicate_key", twice, "/cluster/nodes: duplicate key", "one of them would be silently lost"});
  return out;
}

TEST_F(Cli, ValidateRejectsEachBadFileNamingWhereAndWhy) {
  for (const BadFile& b : bad_files()) {
    SCOPED_TRACE(b.name);
    const fs::path file = tmp_.write(b.name + ".json", b.text);
    const Outcome o = run("validate " + quote(file.string()));
    EXPECT_EQ(o.code, 2) << show(o);
    EXPECT_TRUE(contains(o.err, fmt::format("{}: {}", file.string(), b.location))) << show(o);
    EXPECT_TRUE(contains(o.err, b.detail)) << show(o);
    EXPECT_FALSE(contains(o.out, "ok:")) << show(o);
    EXPECT_FALSE(contains(o.err, "runtime failure")) << show(o);
  }
}

TEST_F(Cli, ValidateOnAnOverflowingNumberIsBadInput) {
  // 1e999 is well-formed JSON that nlohmann refuses with out_of_range (not parse_error): still the
  // user's input, so exit 2 naming the file, not a "runtime failure" (exit 1).
  const fs::path file = tmp_.write("overflow.json", "{\n  \"name\": \"x\",\n  \"seed\": 1e999\n}\n");
  const Outcome o = run("validate " + quote(file.string()));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, file.string() + ": ")) << show(o);
  EXPECT_TRUE(contains(o.err, "1e999")) << show(o);
  EXPECT_FALSE(contains(o.err, "runtime failure")) << show(o);
}

TEST_F(Cli, DeeplyNestedJsonIsBadInputNotACrash) {
  // 100,000 nested arrays overflow a recursive parser's stack (the process died with SIGSEGV):
  // validate and run refuse the file at the byte where it passes 256 levels, exit 2, write nothing.
  const size_t depth = 100000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  const fs::path file = tmp_.write("deep.json", "{\"name\": \"x\", \"cluster\": " + nested + "}");
  const size_t byte = std::string("{\"name\": \"x\", \"cluster\": ").size() + 255;
  const std::string want = fmt::format("{}: JSON nested deeper than 256 levels at byte {}", file.string(), byte);
  Outcome o = run("validate " + quote(file.string()));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, want)) << show(o);
  const fs::path out = tmp_ / "deep-out";
  o = run(fmt::format("run {} --out {}", quote(file.string()), quote(out.string())));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, want)) << show(o);
  EXPECT_FALSE(fs::exists(out));
  // The same in an override's value (1,000 levels: one argument may not exceed 128 KiB).
  o = run(fmt::format("validate {} --set 'cluster.nodes={}{}'", quote(kQuickstart), std::string(1000, '['),
                      std::string(1000, ']')));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "--set cluster.nodes (its value): JSON nested deeper than 256 levels at byte 256"))
      << show(o);
}

TEST_F(Cli, ArgumentsThatAreNotUtf8AreRefused) {
  // JSON (scenarios, outputs) holds UTF-8 only: a byte that is not is refused where it is, before
  // it can reach a document (it once ended the process with an uncaught JSON exception).
  Outcome o = run("validate " + quote(kQuickstart) + " --set \"$(printf 'name=a\\373')\"");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "ccsim: argument 4: not valid UTF-8 at byte 6 (0xFB)")) << show(o);
  o = run("run " + quote(kQuickstart) + " --out " + quote((tmp_ / "u").string()) +
          " --set \"$(printf 'compression=[\\373]')\"");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "not valid UTF-8 at byte 13 (0xFB)")) << show(o);
  EXPECT_FALSE(fs::exists(tmp_ / "u"));
}

TEST_F(Cli, RunsTooLargeToSimulateAreRefusedWithTheirEstimate) {
  // A ring all-reduce over 2^20 ranks (about 2.2e12 transfers per scheme) is refused at once, by
  // validate and run alike, at /cluster/nodes, with the estimate and the option that allows it.
  expect_quickstart_refused("--set cluster.nodes=1048576",
                            kQuickstart + ": /cluster/nodes: the run would simulate 4.4e+12 transfers "
                                          "(2199021158400 per collective of 1048576 ranks x 1 concurrent group(s) "
                                          "x 2 scheme(s)), more than --max-flows 2e+08 allows");
  // 64 ranks: 2 x 64 x 63 = 8064 ring transfers per scheme, 16128 for the two schemes; the limit
  // is inclusive, and the option takes exponent forms.
  const std::string at64 = "validate " + quote(kQuickstart) + " --set cluster.nodes=64 --set gradients.size=64KB";
  EXPECT_EQ(run(at64 + " --max-flows 16128").code, 0);
  Outcome o = run(at64 + " --max-flows 16127");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "(8064 per collective of 64 ranks x 1 concurrent group(s) x 2 scheme(s))")) << show(o);
  EXPECT_EQ(run(at64 + " --max-flows 1.6128e4").code, 0);
  o = run(at64 + " --max-flows lots");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "--max-flows: expected a whole number of transfers of at least 1 (e.g. 5e8), got 'lots'"))
      << show(o);
}

TEST_F(Cli, RunsPastTheEndOfSimulatedTimeAreRefused) {
  // The picosecond clock ends at 2^63 ps (9.2e6 s). 10^18 bytes per rank cannot be timed: validate
  // and run refuse it up front with a lower bound of its time (7/8 of each scheme's encoded copy
  // through rank 0's 12.5 GB/s: bf16 3.5e7 s, int8 with its scales 1.78e7 s), not with a crash.
  expect_quickstart_refused("--set gradients.size=1000000000000000000",
                            kQuickstart + ": /compression/0: the run needs at least 3.5e+07 s of simulated time "
                                          "('bf16' on 8 ranks, through rank 0's links), past the end of the "
                                          "simulated clock at 9.223e+06 s (about 107 days)");
  expect_quickstart_refused("--set gradients.size=1000000000000000000",
                            "/compression/1: the run needs at least 1.78e+07 s");
  const fs::path out = tmp_ / "far";
  // Where the bound is below the clock's end and the run is not (int8 at 4e17 bytes: bound 7e6 s,
  // the ring takes twice that), validate cannot tell; the run stops when an event would pass the
  // end of the clock and reports it, writing nothing.
  const std::string at4e17 = quote(kQuickstart) + " --set gradients.size=400000000000000000 --set "
                             "'compression=[{\"scheme\": \"int8\"}]'";
  EXPECT_EQ(run("validate " + at4e17).code, 0);
  const Outcome o = run("run " + at4e17 + " --out " + quote(out.string()));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, kQuickstart + ": /gradients: the ring collective of 'int8' runs past the end of "
                                            "simulated time (9.223e+06 s, about 107 days"))
      << show(o);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Cli, NumericsBeyondTheMachinesMemoryAreSampled) {
  // gradients.numerics_memory may allow more than the machine holds: 8 ranks x 1 TB would need 16 TB
  // of buffers, so the vNMSE is measured on a sample that fits half the machine (the run is timed on
  // the whole terabyte); validate accepts it.
  const Outcome o = run("validate " + quote(kQuickstart) + " --set gradients.size=1TB --set gradients.numerics_memory=100TB");
  EXPECT_EQ(o.code, 0) << show(o);
}

// A tensor whose numerics do not fit gradients.numerics_memory is timed whole (metadata phases
// planned on every rank's whole gradient, one rank at a time) and its vNMSE measured on a synthetic
// sample of the same distribution: the timing equals the unsampled run's to the byte and the
// picosecond, the vNMSE is close to it, and the outputs say what was sampled.
TEST_F(Cli, LargeTensorsAreTimedWholeAndTheirVnmseMeasuredOnASample) {
  json doc = base_doc();
  doc["gradients"]["size"] = "16MB";
  doc["compression"] = json::parse(R"([{"scheme": "fp32"}, {"scheme": "dynamiq", "params": {"budget": 3}},
      {"scheme": "mxfp8"}, {"scheme": "thc"}, {"scheme": "omnireduce"}])");
  const fs::path file = tmp_.write("large.json", doc.dump());
  std::map<std::string, json> summary;
  for (const std::string limit : {"8GiB", "150MB"}) {
    const fs::path out = tmp_ / limit;
    const Outcome o = run("run " + quote(file.string()) + " --out " + quote(out.string()) +
                          " --set gradients.numerics_memory=" + limit);
    ASSERT_EQ(o.code, 0) << show(o);
    summary[limit] = json::parse(read_file(out / "summary.json"));
    EXPECT_EQ(contains(o.out, "vNMSE on a "), limit == "150MB") << o.out;
    EXPECT_LE(summary[limit]["numerics_memory_estimate_bytes"].get<double>(), limit == "150MB" ? 150e6 : 8.6e9);
  }
  const json &whole = summary["8GiB"], &sampled = summary["150MB"];
  EXPECT_EQ(whole["vnmse_elements"], 4'000'000);
  EXPECT_LT(sampled["vnmse_elements"].get<uint64_t>(), 4'000'000u);
  EXPECT_GE(sampled["vnmse_elements"].get<uint64_t>(), 1'000'000u);
  ASSERT_EQ(whole["results"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const json &a = whole["results"][i], &b = sampled["results"][i];
    SCOPED_TRACE(a["label"].get<std::string>());
    for (const char* k : {"label", "bits_per_element", "payload_bits_per_element", "metadata_bits_per_element",
                          "plan_bits_per_element", "tensor_wire_bytes", "wire_bytes_total", "time_s", "plan_time_s"})
      EXPECT_EQ(a[k], b[k]) << k;
    if (a["scheme"] == "fp32") {
      EXPECT_LT(b["vnmse"].get<double>(), 1e-12);  // fp32 sums in ring order
      continue;
    }
    const double ratio = b["vnmse"].get<double>() / a["vnmse"].get<double>();
    if (a["scheme"] == "thc") {  // one scale for the whole rotated tensor: a smaller one errs less (docs/outputs.md)
      EXPECT_LT(ratio, 1.0);
      continue;
    }
    EXPECT_GT(ratio, 0.8) << a["vnmse"] << " vs " << b["vnmse"];
    EXPECT_LT(ratio, 1.25) << a["vnmse"] << " vs " << b["vnmse"];
  }
  EXPECT_EQ(whole["results"][1]["label"], "dynamiq(budget=3)");
  // The budget bounds payload, scales and the metadata phase together.
  EXPECT_LE(whole["results"][1]["bits_per_element"].get<double>(), 3.0);
  EXPECT_GT(whole["results"][1]["bits_per_element"].get<double>(), 2.99);
}

// Bits per element mean one thing in `run` and `vnmse` (payload + metadata + metadata phase, with
// the parts apart): the same scheme on the same number of entries and ranks reports the same bits
// in both, where its format does not depend on the data.
TEST_F(Cli, BitsPerElementMeanTheSameInRunAndVnmse) {
  json doc = base_doc();
  doc["gradients"]["size"] = "256KiB";  // 65,536 entries on 4 ranks
  doc["compression"] = json::parse(R"([{"scheme": "mxfp8"}, {"scheme": "thc"}, {"scheme": "int8"}])");
  const fs::path file = tmp_.write("bits.json", doc.dump());
  const fs::path out = tmp_ / "bits-run", vout = tmp_.path();
  Outcome o = run("run " + quote(file.string()) + " --out " + quote(out.string()));
  ASSERT_EQ(o.code, 0) << show(o);
  o = run("vnmse --synthetic 65536 --ranks 4 --algo mxfp8 --algo thc --algo int8 --csv " + quote((vout / "vnmse.csv").string()));
  ASSERT_EQ(o.code, 0) << show(o);
  const json results = json::parse(read_file(out / "summary.json"))["results"];
  std::map<std::string, std::vector<std::string>> vnmse;  // label -> the overall row
  std::vector<std::string> header;
  std::istringstream csv(read_file(vout / "vnmse.csv"));
  for (std::string line; std::getline(csv, line);) {
    std::vector<std::string> cells(1);  // RFC 4180 fields: quoted ones may hold commas
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') cells.back() += line[++i];
      else if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) cells.emplace_back();
      else cells.back() += c;
    }
    if (header.empty()) header = cells;
    else if (cells.size() > 4 && cells[4] == "overall") vnmse[cells[0]] = cells;
  }
  auto col = [&](const std::string& name) { return std::find(header.begin(), header.end(), name) - header.begin(); };
  for (const json& r : results) {
    const std::string label = r["label"];
    SCOPED_TRACE(label);
    ASSERT_TRUE(vnmse.count(label));
    const auto& v = vnmse[label];
    EXPECT_NEAR(std::stod(v[col("bits_per_entry")]), r["bits_per_element"].get<double>(), 1e-8);
    EXPECT_NEAR(std::stod(v[col("payload_bits_per_entry")]), r["payload_bits_per_element"].get<double>(), 1e-8);
    EXPECT_NEAR(std::stod(v[col("metadata_bits_per_entry")]), r["metadata_bits_per_element"].get<double>(), 1e-8);
    EXPECT_NEAR(std::stod(v[col("plan_bits_per_entry")]), r["plan_bits_per_element"].get<double>(), 1e-8);
  }
  EXPECT_EQ(results[0]["bits_per_element"], 9.5);  // 8 payload + a bf16 scale per 32 + 1 bit of block maxima
  EXPECT_EQ(results[0]["payload_bits_per_element"], 8.0);
  EXPECT_EQ(results[0]["metadata_bits_per_element"], 0.5);
  EXPECT_EQ(results[0]["plan_bits_per_element"], 1.0);
}

// The estimate the numerics are sized by is within 25% of the peak resident size a run on whole
// tensors reaches (measured as this process's children's), for a scheme that reduces in place and
// one with buffers of its own (THC's padded rotation); an all-reduce that runs in pieces (int8)
// stays far below it.
TEST_F(Cli, NumericsMemoryEstimateIsWithinAQuarterOfThePeak) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory is not the program's";
#endif
  for (const char* scheme : {"dynamiq", "thc", "int8"}) {
    SCOPED_TRACE(scheme);
    json doc = base_doc();
    doc["cluster"]["nodes"] = 8;
    doc["gradients"]["size"] = "32MB";
    doc["compression"] = json::array({{{"scheme", scheme}}});
    const fs::path file = tmp_.write(std::string(scheme) + ".json", doc.dump());
    const fs::path out = tmp_ / scheme;
    const Outcome o = run("run " + quote(file.string()) + " --out " + quote(out.string()));
    ASSERT_EQ(o.code, 0) << show(o);
    const double estimate =
        json::parse(read_file(out / "summary.json"))["numerics_memory_estimate_bytes"].get<double>();
    const double peak = o.peak_rss_bytes;
    if (std::string(scheme) == "int8") {
      EXPECT_LT(peak, 0.25 * estimate) << estimate << " vs " << peak;
      continue;
    }
    EXPECT_GT(estimate, 0.75 * peak) << estimate << " vs " << peak;
    EXPECT_LT(estimate, 1.25 * peak) << estimate << " vs " << peak;
  }
}

TEST_F(Cli, ValidateAcceptsGoodFiles) {
  Outcome o = run("validate " + quote(kQuickstart));
  EXPECT_EQ(o.code, 0) << show(o);
  EXPECT_EQ(o.out, "ok: " + kQuickstart + "\n");
  EXPECT_EQ(o.err, "");

  const fs::path good = tmp_.write("good.json", base_doc().dump());
  o = run("validate " + quote(good.string()));
  EXPECT_EQ(o.code, 0) << show(o);
}

TEST_F(Cli, ValidateReportsEveryFileAndFailsIfAnyIsBad) {
  const fs::path good = tmp_.write("good.json", base_doc().dump());
  json bad = base_doc();
  bad["cluster"]["nodes"] = "eight";
  const fs::path bad_file = tmp_.write("bad.json", bad.dump());
  const Outcome o = run(fmt::format("validate {} {} {}", quote(bad_file.string()), quote(good.string()),
                                    quote((tmp_ / "absent.json").string())));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.out, "ok: " + good.string())) << show(o);
  EXPECT_TRUE(contains(o.err, bad_file.string() + ": /cluster/nodes")) << show(o);
  EXPECT_TRUE(contains(o.err, "absent.json")) << show(o);
}

TEST_F(Cli, ValidateAppliesOverrides) {
  Outcome o = run("validate " + quote(kQuickstart) + " --set cluster.nodes=1");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, kQuickstart + ": /cluster/nodes")) << show(o);
  o = run("validate " + quote(kQuickstart) + " --set cluster.nodse=4");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "/cluster/nodse: unknown key 'nodse' (did you mean 'nodes'?)")) << show(o);
}

// ---------------------------------------------------------------------------------------------
// run.

const std::vector<std::string> kOutputs = {"links.csv", "results.csv", "scenario.resolved.json", "summary.json"};

TEST_F(Cli, RunWritesCompleteReproducibleOutputs) {
  const std::string common = quote(kQuickstart) + " --set gradients.size=1MB";
  const fs::path a = tmp_ / "a";
  const Outcome first = run(fmt::format("run {} --out {}", common, quote(a.string())));
  ASSERT_EQ(first.code, 0) << show(first);
  ASSERT_EQ(files_under(a), kOutputs);
  EXPECT_TRUE(contains(first.out, "scenario quickstart")) << show(first);
  EXPECT_TRUE(contains(first.out, a.string())) << show(first);

  const json resolved = json::parse(read_file(a / "scenario.resolved.json"));
  EXPECT_EQ(resolved["name"], "quickstart");
  EXPECT_EQ(resolved["gradients"]["size"], 1'000'000);  // the override, resolved to bytes
  EXPECT_DOUBLE_EQ(resolved["cluster"]["nic_bandwidth"].get<double>(), 12.5e9);
  const json summary = json::parse(read_file(a / "summary.json"));
  EXPECT_EQ(summary["scenario"], "quickstart");
  EXPECT_EQ(summary["ranks"], 8);
  EXPECT_EQ(summary["elements"], 250'000);
  ASSERT_EQ(summary["results"].size(), 2u);
  EXPECT_EQ(summary["results"][0]["scheme"], "bf16");
  EXPECT_EQ(summary["results"][1]["scheme"], "int8");
  const std::string csv = read_file(a / "results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  EXPECT_EQ(csv.rfind("scenario,label,scheme,params,ranks,", 0), 0u) << csv;

  // The same command again, and with another worker-thread count, writes byte-identical files.
  const std::vector<std::string> extras = {"", " --threads 1", " --threads 3"};
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& extra = extras[i];
    SCOPED_TRACE("again with" + extra);
    const fs::path b = tmp_ / fmt::format("b{}", i);
    const Outcome again = run(fmt::format("run {} --out {}{}", common, quote(b.string()), extra));
    ASSERT_EQ(again.code, 0) << show(again);
    ASSERT_EQ(files_under(b), kOutputs);
    for (const auto& f : kOutputs) EXPECT_EQ(read_file(b / f), read_file(a / f)) << f;
  }

  // The resolved record validates and, run again, reproduces the results.
  const Outcome valid = run("validate " + quote((a / "scenario.resolved.json").string()));
  EXPECT_EQ(valid.code, 0) << show(valid);
  const fs::path c = tmp_ / "c";
  const Outcome rerun = run(fmt::format("run {} --out {}", quote((a / "scenario.resolved.json").string()),
                                        quote(c.string())));
  ASSERT_EQ(rerun.code, 0) << show(rerun);
  EXPECT_EQ(read_file(c / "summary.json"), read_file(a / "summary.json"));
  EXPECT_EQ(read_file(c / "results.csv"), read_file(a / "results.csv"));
}

// Round ops under the roofline (1 GB/s: a byte costs a nanosecond; 5 us launch per op): every
// rank runs the scheme's plan_local, prepare and finish on its whole tensor, each charged its
// declared traffic (algorithms/*.hpp), reported apart from the collective's kernels and included
// in the time; a profile measuring one of them charges it from its curve instead.
TEST_F(Cli, RunChargesRoundOpsAndReportsThemApart) {
  const uint64_t n = 1'000'000;  // 4 MB of fp32
  json doc = {{"name", "round-ops"},
              {"cluster", {{"topology", "star"}, {"nodes", 4}, {"nic_bandwidth", "100Gbps"}, {"link_latency", "1us"},
                           {"gpu", {{"kernel_cost", "roofline"}, {"memory_bandwidth", "1GBps"},
                                    {"kernel_launch", "5us"}}}}},
              {"collective", {{"operation", "allreduce"}, {"algorithm", "ring"}}},
              {"gradients", {{"source", "synthetic"}, {"size", "4MB"}}},
              {"compression", json::array({{{"scheme", "bf16"}}, {{"scheme", "dynamiq"}}, {{"scheme", "thc"}}})}};
  const fs::path file = tmp_.write("round_ops.json", doc.dump(2));
  const fs::path out = tmp_ / "round_ops";
  const Outcome o = run(fmt::format("run {} --out {}", quote(file.string()), quote(out.string())));
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "round ops")) << show(o);
  const json summary = json::parse(read_file(out / "summary.json"));
  std::map<std::string, json> res;
  for (const json& r : summary["results"]) res[r["scheme"].get<std::string>()] = r;
  auto ns = [](uint64_t bytes) { return 5e-6 + static_cast<double>(bytes) * 1e-9; };  // one op
  // DynamiQ (S = 256): plan_local 4n + 16 G, prepare and finish 8n + 4 G, G super-groups.
  const uint64_t groups = (n + 255) / 256;
  const double dynamiq = ns(4 * n + 16 * groups) + 2 * ns(8 * n + 4 * groups);
  // THC: the tensor padded to the 2^20 block, 2 rotation passes: plan_local 4n + 12 padded,
  // prepare and finish 16 padded.
  const uint64_t padded = uint64_t{1} << 20;
  const double thc = ns(4 * n + 12 * padded) + 2 * ns(16 * padded);
  // (Each op's time is rounded up to the simulator's picosecond.)
  EXPECT_NEAR(res["dynamiq"]["round_kernel_time_s"].get<double>(), dynamiq, 4e-12);
  EXPECT_NEAR(res["thc"]["round_kernel_time_s"].get<double>(), thc, 4e-12);
  EXPECT_EQ(res["bf16"]["round_kernel_time_s"].get<double>(), 0.0);
  for (const char* scheme : {"dynamiq", "thc"}) {
    const json& r = res[scheme];
    // plan_local runs before the metadata all-reduce, inside plan_time_s; the whole sync, round
    // ops included, is time_s.
    EXPECT_GT(r["plan_time_s"].get<double>(), ns(4 * n)) << scheme;
    EXPECT_GT(r["time_s"].get<double>(),
              r["round_kernel_time_s"].get<double>() + r["kernel_time_s"].get<double>()) << scheme;
  }
  const std::string csv = read_file(out / "results.csv");
  EXPECT_TRUE(contains(csv, ",kernel_time_s,round_kernel_time_s,vnmse,")) << csv;

  // A profile with DynamiQ's prepare measured at 1 ms flat: the other two ops stay on the roofline.
  const json profile = {
      {"format", "ccsim-device-profile"}, {"version", 1},
      {"device", {{"kind", "cuda"}, {"name", "test GPU"}, {"measured", "2026-11-21"}, {"source", "test"}}},
      {"copy_bandwidth", 1e9},
      {"kernels", json::array({{{"scheme", "dynamiq"}, {"op", "prepare"}, {"launch", 1e-3},
                                {"points", json::array({{{"elements", n}, {"bytes", 8 * n}, {"seconds", 1e-3}}})}}})}};
  tmp_.write("prepare_profile.json", profile.dump(2));
  doc["cluster"]["gpu"]["kernel_cost"] = "profile";
  doc["cluster"]["gpu"]["profile"] = "prepare_profile.json";
  doc["compression"] = json::array({{{"scheme", "dynamiq"}}});
  const fs::path file2 = tmp_.write("round_ops_profile.json", doc.dump(2));
  const fs::path out2 = tmp_ / "round_ops_profile";
  const Outcome o2 = run(fmt::format("run {} --out {}", quote(file2.string()), quote(out2.string())));
  ASSERT_EQ(o2.code, 0) << show(o2);
  const json r2 = json::parse(read_file(out2 / "summary.json"))["results"][0];
  EXPECT_NEAR(r2["round_kernel_time_s"].get<double>(), ns(4 * n + 16 * groups) + 1e-3 + ns(8 * n + 4 * groups), 4e-12);
  const std::string how = r2["kernel_cost"].get<std::string>();
  EXPECT_TRUE(contains(how, "(prepare)")) << how;
  EXPECT_TRUE(contains(how, "decode_accumulate_encode, plan_local, finish")) << how;
}

// A profile may measure a scheme's ops under several parameter sets: each op is charged from the
// curve whose recorded parameters all hold in the scenario's, the one naming the most of them;
// none holding, the roofline. MX's default block scaling runs plan_local only; layer scaling runs
// plan_local, prepare and finish. (With layer scaling on these 8 ranks the runner once read the
// collective's timings through a view that the finish phase's runners had invalidated, and crashed.)
TEST_F(Cli, ProfileCurvesAreChosenByTheSchemesParameters) {
  const uint64_t n = 1'000'000;
  auto flat = [&](const char* op, const json& params, double seconds) {
    return json{{"scheme", "mxfp8"}, {"op", op}, {"params", params}, {"launch", seconds},
                {"points", json::array({{{"elements", n}, {"bytes", 8 * n}, {"seconds", seconds}}})}};
  };
  const json layer = {{"global_scaling", "layer"}};
  const json profile = {
      {"format", "ccsim-device-profile"}, {"version", 1},
      {"device", {{"kind", "cuda"}, {"name", "test GPU"}, {"measured", "2026-11-21"}, {"source", "test"}}},
      {"copy_bandwidth", 1e9},
      {"kernels", json::array({flat("plan_local", json::object(), 1e-3), flat("plan_local", layer, 2e-3),
                               flat("prepare", layer, 3e-3),
                               flat("finish", {{"global_scaling", "layer"}, {"mu_decay", 0.5}}, 0.1)})}};
  tmp_.write("variants_profile.json", profile.dump(2));
  const json doc = {
      {"name", "variants"},
      {"cluster", {{"topology", "star"}, {"nodes", 8}, {"nic_bandwidth", "100Gbps"}, {"link_latency", "1us"},
                   {"gpu", {{"kernel_cost", "profile"}, {"profile", "variants_profile.json"},
                            {"memory_bandwidth", "1GBps"}, {"kernel_launch", "5us"}}}}},
      {"collective", {{"operation", "allreduce"}, {"algorithm", "ring"}}},
      {"gradients", {{"source", "synthetic"}, {"size", "4MB"}}},
      {"compression", json::array({{{"scheme", "mxfp8"}},
                                   {{"scheme", "mxfp8"}, {"params", {{"global_scaling", "layer"}}}}})}};
  const fs::path file = tmp_.write("variants.json", doc.dump(2));
  const fs::path out = tmp_ / "variants";
  const Outcome o = run(fmt::format("run {} --out {}", quote(file.string()), quote(out.string())));
  ASSERT_EQ(o.code, 0) << show(o);
  const json results = json::parse(read_file(out / "summary.json"))["results"];
  ASSERT_EQ(results.size(), 2u);
  // Block scaling: the default's plan_local (the layer curve's switch does not hold).
  EXPECT_NEAR(results[0]["round_kernel_time_s"].get<double>(), 1e-3, 4e-12);
  const std::string block_how = results[0]["kernel_cost"].get<std::string>();
  EXPECT_FALSE(contains(block_how, "global_scaling")) << block_how;
  // Layer scaling: plan_local and prepare from the layer curves; finish's curve names a mu_decay
  // the scenario does not have, so finish (8 B per entry) is charged by the roofline.
  EXPECT_NEAR(results[1]["round_kernel_time_s"].get<double>(), 2e-3 + 3e-3 + 5e-6 + 8e-9 * n, 4e-12);
  const std::string layer_how = results[1]["kernel_cost"].get<std::string>();
  EXPECT_TRUE(contains(layer_how, R"(plan_local at {"global_scaling":"layer"}, prepare at {"global_scaling":"layer"})"))
      << layer_how;
  EXPECT_TRUE(contains(layer_how, "roofline (1 GB/s, 5 us launch) for encode, decode, decode_accumulate, "
                                  "decode_accumulate_encode, finish"))
      << layer_how;
}

TEST_F(Cli, RunSeedOptionChangesTheSeed) {
  const fs::path d = tmp_ / "seeded";
  const Outcome o = run(fmt::format("run {} --set gradients.size=64KB --seed 9 --out {}", quote(kQuickstart),
                                    quote(d.string())));
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_EQ(json::parse(read_file(d / "scenario.resolved.json"))["seed"], 9);
  EXPECT_EQ(json::parse(read_file(d / "summary.json"))["seed"], 9);
}

// Writes an npy scenario with two per-worker files of `n0` and `n1` elements; returns its path.
fs::path npy_scenario(const TempDir& dir, const std::string& name, uint64_t n0, uint64_t n1) {
  auto make = [](uint64_t n, float scale) {
    std::vector<float> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 7) - 3.0f;
    return v;
  };
  const fs::path folder = dir / name;
  fs::create_directories(folder);
  EXPECT_TRUE(traces::write_npy_f32((folder / "w0.npy").string(), {n0}, make(n0, 1.0f)).ok());
  EXPECT_TRUE(traces::write_npy_f32((folder / "w1.npy").string(), {n1}, make(n1, 0.5f)).ok());
  const json doc = {{"name", name},
                    {"cluster", {{"nodes", 2}}},
                    {"gradients", {{"source", "npy"}, {"files", json::array({"w0.npy", "w1.npy"})}}},
                    {"compression", json::array({{{"scheme", "bf16"}}})}};
  return dir.write(name + "/scenario.json", doc.dump(2));
}

TEST_F(Cli, RunOnMismatchedNpyFilesFailsAndWritesNothing) {
  // Control: equal lengths run fine, so the failure below is about the lengths.
  const fs::path ok_file = npy_scenario(tmp_, "equal", 1024, 1024);
  const Outcome ok = run(fmt::format("run {} --out {}", quote(ok_file.string()), quote((tmp_ / "equal_out").string())));
  ASSERT_EQ(ok.code, 0) << show(ok);
  EXPECT_EQ(files_under(tmp_ / "equal_out"), kOutputs);

  const fs::path bad_file = npy_scenario(tmp_, "mismatch", 1024, 512);
  // The loader reads the files' headers: validate finds what run would.
  const Outcome v = run("validate " + quote(bad_file.string()));
  EXPECT_EQ(v.code, 2) << show(v);
  EXPECT_TRUE(contains(v.err, bad_file.string() + ": /gradients/files/1")) << show(v);
  const fs::path out = tmp_ / "mismatch_out";
  fs::create_directories(out);
  const Outcome o = run(fmt::format("run {} --out {}", quote(bad_file.string()), quote(out.string())));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, bad_file.string() + ": /gradients/files/1")) << show(o);
  EXPECT_TRUE(contains(o.err, "same size")) << show(o);
  EXPECT_EQ(files_under(out), std::vector<std::string>{});
  // And nothing half-written anywhere.
  for (const auto& f : files_under(tmp_.path())) EXPECT_FALSE(contains(f, ".tmp.")) << f;
}

// An all-to-all's blocks are the operation's, so a scheme whose blocks they cut (MX's 32-entry
// blocks in 31,250-entry all-to-all blocks) is bad input naming the scheme, not an internal
// failure halfway through; the scheme before it ran, and nothing is written.
TEST_F(Cli, RunRejectsAnAllToAllThatCutsTheSchemesBlocks) {
  const json doc = {{"name", "a2a"},
                    {"cluster", {{"topology", "star"}, {"nodes", 8}, {"nic_bandwidth", "100Gbps"}}},
                    {"collective", {{"operation", "alltoall"}, {"algorithm", "direct"}}},
                    {"gradients", {{"source", "synthetic"}, {"size", "1MB"}}},
                    {"compression", json::array({{{"scheme", "bf16"}}, {{"scheme", "mxfp8"}}})}};
  const fs::path file = tmp_.write("a2a.json", doc.dump(2));
  const fs::path out = tmp_ / "a2a_out";
  const Outcome o = run(fmt::format("run {} --out {}", quote(file.string()), quote(out.string())));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, file.string() + ": /compression/1: direct cannot run 'mxfp8' on 250000 elements"))
      << show(o);
  EXPECT_TRUE(contains(o.err, "blocks of 31250 elements")) << show(o);
  EXPECT_FALSE(fs::exists(out));
  // 1,048,576 bytes: 32,768-entry blocks, whole MX blocks: it runs.
  json fits = doc;
  fits["gradients"]["size"] = "1MiB";
  const fs::path file2 = tmp_.write("a2a_fits.json", fits.dump(2));
  const Outcome ok = run(fmt::format("run {} --out {}", quote(file2.string()), quote((tmp_ / "fits").string())));
  EXPECT_EQ(ok.code, 0) << show(ok);
}

TEST_F(Cli, RunWithAnUncreatableOutputFolderIsARuntimeFailure) {
  const fs::path blocker = tmp_.write("blocker", "a file, not a folder");
  const Outcome o = run(fmt::format("run {} --set gradients.size=64KB --out {}", quote(kQuickstart),
                                    quote((blocker / "sub").string())));
  EXPECT_EQ(o.code, 1) << show(o);
  EXPECT_TRUE(contains(o.err, "cannot create output folder")) << show(o);
}

}  // namespace
}  // namespace ccsim
