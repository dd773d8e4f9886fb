// The catalog of broken input files. validate_catalog_test.cpp breaks the fields of a scenario; this
// one breaks the bytes of every file the CLI reads, as a user would hand them over: the scenario
// itself, its --set overrides, workload traces, device kernel-cost profiles, straggler CDFs, the .npy
// gradients of a scenario, and gradient dumps (manifest, .safetensors and .npy worker files) that
// `ccsim vnmse` reads.
//
// Each entry writes its files (bytes built here) into a fresh folder next to an otherwise valid
// scenario that references them (or a dump directory for vnmse), runs the real binary as a user
// would (`validate` and `run --out`, or `vnmse --csv`, each under `timeout 60`), and asserts what
// docs/reliability.md promises for bad input: exit code 2; one line of stderr naming the offending
// file, the location (JSON Pointer, line and column, byte offset, or the npy/safetensors field) and
// what was expected and found; `run` rejecting the file with validate's very report; nothing written
// (the output folder absent or empty, and no stray file next to the inputs). The bases themselves
// pass (TheBasesPass).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/tools/cli_run.hpp"
#include "tests/tools/npy_bytes.hpp"
#include "tests/tools/temp_dir.hpp"

namespace ccsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ccsim::testing;

// ---- the files an entry writes ------------------------------------------------------------------

struct File {
  enum Kind { kBytes, kDirectory, kSymlink };
  std::string path;   // relative to the entry's folder
  std::string bytes;  // the content; the link target for kSymlink ($DIR in .json files: the folder)
  Kind kind = kBytes;
};
using Files = std::vector<File>;

Files operator+(Files a, const Files& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string text(const json& j) { return j.dump(2) + "\n"; }

// `s` with its first `from` replaced by `to` (the pattern must be there).
std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("replace_once: no '" + from + "' in the text");
  return s.replace(at, from.size(), to);
}

// ---- valid bases ----------------------------------------------------------------------------------

// A collective run: small enough for a fast run (4 ranks, 64 KB).
json collective() {
  return json::parse(R"({"name": "broken", "cluster": {"nodes": 4}, "gradients": {"size": "64KB"},
                         "compression": [{"scheme": "fp32"}]})");
}

// A data-parallel training run on the compute trace `trace` (2 rounds).
json training(const std::string& trace) {
  json s = json::parse(R"({"name": "broken", "cluster": {"nodes": 4}, "workload": {"rounds": 2},
                           "compression": [{"scheme": "fp32"}]})");
  s["workload"]["trace"] = trace;
  return s;
}

// A compute trace in the traces/models/ format, 4 layers.
json trace() {
  return json::parse(R"({
    "format": "ccsim-compute-trace", "version": 1, "model": "a 4-layer test model",
    "provenance": {"kind": "estimated", "device": "none", "source": "broken_inputs_test"},
    "layers": [
      {"name": "embed", "params": 3000000, "forward": 0.2294025, "backward": "481.0125ms"},
      {"name": "block0", "params": 5600000, "forward": 0.0848625, "backward": 0.135255},
      {"name": "block1", "params": 6000000, "forward": 0.0903375, "backward": 0.1228725},
      {"name": "head", "params": 11000000, "forward": 0.1428975, "backward": 0.21336}]})");
}

// A device kernel-cost profile in the traces/devices/ format: one measured kernel, 3 sizes.
json profile() {
  return json::parse(R"({
    "format": "ccsim-device-profile", "version": 1,
    "device": {"kind": "cpu", "name": "test cpu", "measured": "2026-11-21", "source": "broken_inputs_test"},
    "copy_bandwidth": 2.5e10,
    "kernels": [{"scheme": "fp32", "op": "encode", "params": {}, "launch": 3e-8, "points": [
      {"elements": 16384, "bytes": 65536, "seconds": 1.4e-6},
      {"elements": 65536, "bytes": 262144, "seconds": 5.2e-6},
      {"elements": 262144, "bytes": 1048576, "seconds": 3.4e-5}]}]})");
}

// A straggler CDF in the traces/stragglers/ format.
json cdf() {
  return json::parse(R"({"format": "ccsim-straggler-cdf", "version": 1,
                         "points": [[1.0, 0.0], [1.2, 0.5], [2.0, 1.0]]})");
}

// The scenario file of an entry and the files it references.
Files scenario(const json& s, Files more = {}) { return Files{{"scenario.json", text(s)}} + more; }

Files with_trace(const std::string& name, const std::string& bytes) {
  return scenario(training(name), {{name, bytes}});
}
Files with_profile(const std::string& name, const std::string& bytes) {
  json s = collective();
  s["cluster"]["gpu"] = {{"kernel_cost", "profile"}, {"profile", name}};
  return scenario(s, {{name, bytes}});
}
// A collective run of int8 whose kernels are timed by a profile measuring each of them at `seconds`.
Files with_int8_profile(const std::string& name, double seconds) {
  json p = profile();
  p["kernels"] = json::array();
  for (const char* op : {"encode", "decode", "decode_accumulate", "decode_accumulate_encode"}) {
    json k = profile()["kernels"][0];
    k["scheme"] = "int8";
    k["op"] = op;
    for (auto& point : k["points"]) point["seconds"] = seconds;
    p["kernels"].push_back(k);
  }
  json s = collective();
  s["cluster"]["gpu"] = {{"kernel_cost", "profile"}, {"profile", name}};
  s["compression"] = json::parse(R"([{"scheme": "int8"}])");
  return scenario(s, {{name, text(p)}});
}
Files with_cdf(const std::string& name, const std::string& bytes) {
  json s = training("trace.json");
  s["stragglers"] = {{"model", "empirical"}, {"file", name}};
  return scenario(s, {{"trace.json", text(trace())}, {name, bytes}});
}

// ---- binary formats ---------------------------------------------------------------------------

template <class T> std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

std::string npy(const std::string& descr, const std::string& shape, const std::string& data, bool fortran = false) {
  return test_files::npy_bytes(descr, shape, data, fortran);
}

std::vector<float> ones(size_t n) { return std::vector<float>(n, 1.0f); }
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A collective run whose per-worker gradients are .npy files: a good one and `name`, the second at
// /gradients/files/1.
Files with_npy(const std::string& name, const std::string& bytes) {
  json s = collective();
  s["gradients"] = {{"source", "npy"}, {"files", {"good.npy", name}}};
  return scenario(s, {{"good.npy", npy("<f4", "(64,)", raw(ones(64)))}, {name, bytes}});
}

// A .safetensors file: the 8-byte little-endian header length, the header (padded with spaces to a
// multiple of 8, as the writers do), the data.
std::string safetensors(std::string header, const std::string& data) {
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return le64(header.size()) + header + data;
}

// ---- gradient dumps (docs/gradient-dumps.md) -----------------------------------------------------
// 4 workers, 64 elements in two layers ('a' [8, 4] and 'b' [32]), steps 0 and 10.

constexpr size_t kElements = 64;

std::vector<float> gradient(int worker, int step) {
  std::vector<float> v(kElements);
  for (size_t i = 0; i < kElements; ++i)
    v[i] = 0.01f * static_cast<float>((i + 1) * (worker + 1)) - 0.02f * static_cast<float>(step);
  return v;
}

std::string st_header(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string h = "{";
  for (const auto& [name, entry] : entries) h += (h.size() > 1 ? ", " : "") + fmt::format("\"{}\": {}", name, entry);
  return h + "}";
}
std::string st_entry(const char* dtype, size_t elements, size_t begin, size_t end) {
  return fmt::format(R"({{"dtype": "{}", "shape": [{}], "data_offsets": [{}, {}]}})", dtype, elements, begin, end);
}

// A worker file with the header entries `step0` and `step10` for tensors step0 and step10, then `data`.
std::string st_two(const std::string& step0, const std::string& step10, const std::string& data) {
  return safetensors(st_header({{"step0", step0}, {"step10", step10}}), data);
}

// A worker file holding tensors step0 and step10 of F32 values.
std::string st_worker(const std::vector<float>& step0, const std::vector<float>& step10) {
  return safetensors(st_header({{"step0", st_entry("F32", step0.size(), 0, 4 * step0.size())},
                                {"step10", st_entry("F32", step10.size(), 4 * step0.size(),
                                                    4 * (step0.size() + step10.size()))}}),
                     raw(step0) + raw(step10));
}
std::string st_worker(int w) { return st_worker(gradient(w, 0), gradient(w, 10)); }

json manifest(const std::vector<std::string>& workers, bool npy_files = false) {
  json m = json::parse(R"({
    "format": "ccsim-gradient-dump", "version": 1, "dtype": "F32", "elements": 64,
    "steps": [{"step": 0, "tensor": "step0"}, {"step": 10, "tensor": "step10"}],
    "layers": [{"name": "a", "shape": [8, 4], "offset": 0, "count": 32},
               {"name": "b", "shape": [32], "offset": 32, "count": 32}],
    "provenance": {"model": "a test model", "dataset": "none"}})");
  m["workers"] = workers;
  if (npy_files) m["steps"] = json::parse(R"([{"step": 0}, {"step": 10}])");
  return m;
}
const std::vector<std::string> kWorkers = {"worker0.safetensors", "worker1.safetensors", "worker2.safetensors",
                                           "worker3.safetensors"};

// The dump folder "dump": its manifest and the 4 worker files. An entry of `replace` takes the place
// of the worker file of the same path (bytes "<none>": leaves that file out) or adds a file.
Files dump_text(const std::string& manifest_text, Files replace = {}) {
  Files out{{"dump/manifest.json", manifest_text}};
  for (int w = 0; w < 4; ++w) {
    const std::string name = "dump/" + kWorkers[w];
    bool replaced = false;
    for (const File& f : replace) replaced |= f.path == name;
    if (!replaced) out.push_back({name, st_worker(w)});
  }
  for (File& f : replace)
    if (f.bytes != "<none>") out.push_back(std::move(f));
  return out;
}
Files dump(Files replace = {}) { return dump_text(text(manifest(kWorkers)), std::move(replace)); }

// The same dump with .npy worker files, each [2, 64] (steps 0 and 10).
std::string npy_worker(int w, std::vector<float> step10 = {}) {
  std::vector<float> v = gradient(w, 0);
  const std::vector<float> s10 = step10.empty() ? gradient(w, 10) : step10;
  v.insert(v.end(), s10.begin(), s10.end());
  return npy("<f4", "(2, 64)", raw(v));
}
Files npy_dump(const std::string& worker1) {
  const std::vector<std::string> names = {"worker0.npy", "worker1.npy", "worker2.npy", "worker3.npy"};
  return Files{{"dump/manifest.json", text(manifest(names, true))},
               {"dump/worker0.npy", npy_worker(0)},
               {"dump/worker1.npy", worker1},
               {"dump/worker2.npy", npy_worker(2)},
               {"dump/worker3.npy", npy_worker(3)}};
}

// ---- the catalog ------------------------------------------------------------------------------

enum class Reader {
  kScenario,  // `ccsim validate TARGET ARGS` and `ccsim run TARGET --out OUT ARGS`
  kVnmse,     // `ccsim vnmse --gradients TARGET --algo int8 ARGS --csv OUT/vnmse.csv`
};

struct Broken {
  const char* name;
  Reader reader;
  const char* target;   // the file or folder given to the command, relative to the entry's folder
  const char* args;     // further arguments
  Files (*files)();     // what the entry writes into its folder
  const char* file;     // one line of stderr names this file ...
  const char* where;    // ... this location in it ("" only where the whole file is at fault) ...
  const char* message;  // ... and says what was expected and found
};

const Broken kBroken[] = {
    // ---- the scenario file itself
    {"ScenarioTruncated", Reader::kScenario, "truncated.json", "",
     [] { return Files{{"truncated.json", text(collective()).substr(0, 60)}}; }, "truncated.json",
     "line 6, column 5", "invalid JSON: line 6, column 5: syntax error while parsing value - unexpected end of input"},
    {"ScenarioNotAnObject", Reader::kScenario, "array.json", "",
     [] { return Files{{"array.json", fmt::format("[{}]", collective().dump())}}; }, "array.json", "/:",
     "expected a scenario object, got an array"},
    {"ScenarioRepeatedKey", Reader::kScenario, "repeated.json", "",
     [] {
       return Files{{"repeated.json", replace_once(text(collective()), "\"nodes\": 4", "\"nodes\": 4, \"nodes\": 8")}};
     },
     "repeated.json", "/cluster/nodes:", "duplicate key (JSON keeps only one of the values"},
    {"ScenarioNestedTooDeep", Reader::kScenario, "deep.json", "",
     [] { return Files{{"deep.json", "{\"description\": " + std::string(100000, '[')}}; }, "deep.json",
     "at byte 271", "JSON nested deeper than 256 levels at byte 271"},
    {"ScenarioInvalidUtf8", Reader::kScenario, "latin1.json", "",
     [] {
       json s = collective();
       s["description"] = "caf@";
       return Files{{"latin1.json", replace_once(text(s), "caf@", "caf\xe9")}};
     },
     "latin1.json", "line 10, column 23", "invalid string: ill-formed UTF-8 byte"},
    {"ScenarioStrayByte", Reader::kScenario, "stray.json", "",
     [] { return Files{{"stray.json", replace_once(text(collective()), "\"gradients\"", "\x01\"gradients\"")}}; },
     "stray.json", "line 10, column 3", "syntax error while parsing object key - invalid literal"},
    {"ScenarioUtf16", Reader::kScenario, "utf16.json", "",
     [] {
       std::string out = "\xff\xfe";  // what a UTF-16 editor writes: a byte-order mark, two bytes per character
       for (char c : collective().dump()) out += std::string{c, '\0'};
       return Files{{"utf16.json", out}};
     },
     "utf16.json", "line 1, column 1", "invalid literal"},
    {"ScenarioEmpty", Reader::kScenario, "empty.json", "", [] { return Files{{"empty.json", ""}}; }, "empty.json",
     "line 1, column 1", "unexpected end of input"},
    {"ScenarioNumberOutOfRange", Reader::kScenario, "overflow.json", "",
     [] { return Files{{"overflow.json", replace_once(text(collective()), "\"64KB\"", "1e400")}}; }, "overflow.json",
     "line 11, column", "number overflow parsing '1e400'"},
    {"ScenarioIsADirectory", Reader::kScenario, "folder.json", "",
     [] { return Files{{"folder.json", "", File::kDirectory}}; }, "folder.json", "", "a directory"},
    {"ScenarioMissing", Reader::kScenario, "missing.json", "", [] { return Files{}; }, "missing.json", "",
     "no such scenario file"},

    // ---- --set overrides (`ccsim run --help`): a JSON Pointer or a dotted path = a JSON value or a string
    {"SetUnknownKey", Reader::kScenario, "scenario.json", "--set cluster.nodez=8",
     [] { return scenario(collective()); }, "scenario.json", "/cluster/nodez:",
     "unknown key 'nodez' (did you mean 'nodes'?)"},
    {"SetBadValue", Reader::kScenario, "scenario.json", "--set /cluster/nodes=four",
     [] { return scenario(collective()); }, "scenario.json", "/cluster/nodes:",
     "expected an integer in [1, 1048576], got the string \"four\""},
    {"SetEmptyValue", Reader::kScenario, "scenario.json", "--set cluster.nodes=",
     [] { return scenario(collective()); }, "scenario.json", "/cluster/nodes:",
     "expected an integer in [1, 1048576], got the string \"\""},
    {"SetEmptyPath", Reader::kScenario, "scenario.json", "--set =16", [] { return scenario(collective()); },
     "scenario.json", "--set =16:", "expected PATH=VALUE (e.g. cluster.nodes=16 or /cluster/nodes=16)"},
    {"SetWithoutValue", Reader::kScenario, "scenario.json", "--set cluster.nodes",
     [] { return scenario(collective()); }, "scenario.json", "--set cluster.nodes:", "expected PATH=VALUE"},
    {"SetNewSection", Reader::kScenario, "scenario.json", "--set a.b=", [] { return scenario(collective()); },
     "scenario.json", "/a:", "unknown key 'a'; valid keys here: cluster, collective, compression"},
    {"SetEmptyPathSegment", Reader::kScenario, "scenario.json", "--set cluster..nodes=8",
     [] { return scenario(collective()); }, "scenario.json", "/cluster/:", "unknown key ''"},
    {"SetPathThroughANumber", Reader::kScenario, "scenario.json", "--set cluster.nodes.x=3",
     [] { return scenario(collective()); }, "scenario.json", "--set cluster.nodes.x=3:",
     "cannot set /cluster/nodes/x"},
    {"SetIndexPastTheEnd", Reader::kScenario, "scenario.json", "--set compression.3.scheme=bf16",
     [] { return scenario(collective()); }, "scenario.json", "--set compression.3.scheme=bf16",
     "/compression/3"},
    {"SetValueNestedTooDeep", Reader::kScenario, "scenario.json", "--set cluster.nodes=$DEEP",
     [] { return scenario(collective()); }, "scenario.json", "--set cluster.nodes (its value):",
     "JSON nested deeper than 256 levels at byte 256"},
    {"SetNumberOutOfRange", Reader::kScenario, "scenario.json", "--set cluster.nodes=1e400",
     [] { return scenario(collective()); }, "scenario.json", "--set cluster.nodes=1e400:",
     "number overflow parsing '1e400'"},

    // ---- workload traces (traces/models/*.json, docs/compute-traces.md)
    {"TraceTruncated", Reader::kScenario, "scenario.json", "",
     [] {
       const std::string t = text(trace());
       return with_trace("truncated_trace.json", t.substr(0, t.size() / 2));
     },
     "truncated_trace.json", "line 18, column 19", "syntax error while parsing object - unexpected end of input"},
    {"TraceRepeatedKey", Reader::kScenario, "scenario.json", "",
     [] {
       return with_trace("repeated_trace.json",
                         replace_once(text(trace()), "\"params\": 3000000", "\"params\": 3000000, \"params\": 3"));
     },
     "repeated_trace.json", "/layers/0/params:", "duplicate key"},
    {"TraceDuplicateLayerNames", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][2]["name"] = "embed";
       return with_trace("dup_names_trace.json", text(t));
     },
     "dup_names_trace.json", "/layers/2/name:", "duplicate layer name 'embed'"},
    {"TraceNegativeTime", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][1]["forward"] = -1;
       return with_trace("negative_time_trace.json", text(t));
     },
     "negative_time_trace.json", "/layers/1/forward:", "expected a non-negative value in s, found -1"},
    {"TraceNegativeParams", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][3]["params"] = -5;
       return with_trace("negative_params_trace.json", text(t));
     },
     "negative_params_trace.json", "/layers/3/params:", "expected an integer in [0, 2^44 = 17592186044416], found -5"},
    {"TraceNaNTime", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][1]["backward"] = "NaN";
       return with_trace("nan_trace.json", text(t));
     },
     "nan_trace.json", "/layers/1/backward:", "expected a finite quantity, got \"NaN\""},
    {"TraceNaNLiteral", Reader::kScenario, "scenario.json", "",
     [] { return with_trace("nan_literal_trace.json", replace_once(text(trace()), "0.135255", "NaN")); },
     "nan_literal_trace.json", "line 11, column 19", "invalid literal; last read: '\"backward\": N'"},
    {"TraceNumberOutOfRange", Reader::kScenario, "scenario.json", "",
     [] { return with_trace("overflow_trace.json", replace_once(text(trace()), "0.135255", "1e999")); },
     "overflow_trace.json", "line 11, column", "number overflow parsing '1e999'"},
    {"TraceEnormousLayer", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][0]["params"] = uint64_t{1} << 62;
       return with_trace("enormous_layer_trace.json", text(t));
     },
     "enormous_layer_trace.json", "/layers/0/params:",
     "expected an integer in [0, 2^44 = 17592186044416], found 4611686018427387904"},
    {"TraceEnormousLayers", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       for (auto& l : t["layers"]) l["params"] = uint64_t{1} << 62;  // 4 x 2^62 = 2^64: 0 in 64-bit arithmetic
       return with_trace("enormous_layers_trace.json", text(t));
     },
     "enormous_layers_trace.json", "/layers/3/params:",
     "expected an integer in [0, 2^44 = 17592186044416], found 4611686018427387904"},
    {"TraceEnormousModel", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       for (auto& l : t["layers"]) l["params"] = uint64_t{1} << 43;  // each allowed, 2^45 in all
       return with_trace("enormous_model_trace.json", text(t));
     },
     "enormous_model_trace.json", "/layers:",
     "expected at most 2^44 = 17592186044416 parameters in all, found 3.51844e+13"},
    {"TraceWithoutLayers", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"] = json::array();
       return with_trace("no_layers_trace.json", text(t));
     },
     "no_layers_trace.json", "/layers:", "expected a non-empty array of layers, found array []"},
    {"TraceLayersNotAnArray", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"] = {{"embed", 3000000}};
       return with_trace("layers_object_trace.json", text(t));
     },
     "layers_object_trace.json", "/layers:", "expected a non-empty array of layers, found object"},
    {"TraceParamsAString", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][2]["params"] = "6M";
       return with_trace("string_params_trace.json", text(t));
     },
     "string_params_trace.json", "/layers/2/params:",
     "expected an integer in [0, 2^44 = 17592186044416], found string \"6M\""},
    {"TraceVersionAString", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["version"] = "1";
       return with_trace("version_trace.json", text(t));
     },
     "version_trace.json", "/version:", "expected 1, found string \"1\""},
    {"TraceUnknownLayerKey", Reader::kScenario, "scenario.json", "",
     [] {
       json t = trace();
       t["layers"][1]["paramz"] = 3;
       return with_trace("unknown_key_trace.json", text(t));
     },
     "unknown_key_trace.json", "/layers/1/paramz:", "unknown key 'paramz' (did you mean 'params'?)"},

    // ---- device kernel-cost profiles (traces/devices/*.json, docs/kernel-costs.md)
    {"ProfileTruncated", Reader::kScenario, "scenario.json", "",
     [] {
       const std::string p = text(profile());
       return with_profile("truncated_profile.json", p.substr(0, p.size() * 2 / 3));
     },
     "truncated_profile.json", "line 2", "invalid JSON: line 2"},
    {"ProfileUnsortedSizes", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       std::swap(p["kernels"][0]["points"][0], p["kernels"][0]["points"][2]);
       return with_profile("unsorted_profile.json", text(p));
     },
     "unsorted_profile.json", "/kernels/0/points/1/elements:",
     "expected sizes in ascending order, found 65536 after 262144"},
    {"ProfileNegativeBandwidth", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       p["copy_bandwidth"] = -5;
       return with_profile("negative_bandwidth_profile.json", text(p));
     },
     "negative_bandwidth_profile.json", "/copy_bandwidth:", "expected a positive value in bytes/s, found -5"},
    {"ProfileBadSeconds", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       p["kernels"][0]["points"][1]["seconds"] = "fast";
       return with_profile("bad_seconds_profile.json", text(p));
     },
     "bad_seconds_profile.json", "/kernels/0/points/1/seconds:", "got \"fast\""},
    {"ProfileDeviceNotAnObject", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       p["device"] = "cpu";
       return with_profile("bad_section_profile.json", text(p));
     },
     "bad_section_profile.json", "/device:", "expected an object, found string \"cpu\""},
    {"ProfileUnknownOp", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       p["kernels"][0]["op"] = "encod";
       return with_profile("unknown_op_profile.json", text(p));
     },
     "unknown_op_profile.json", "/kernels/0/op:", "expected one of encode, decode"},
    {"ProfileKernelTwice", Reader::kScenario, "scenario.json", "",
     [] {
       json p = profile();
       p["kernels"].push_back(p["kernels"][0]);
       return with_profile("twice_profile.json", text(p));
     },
     "twice_profile.json", "/kernels/1:", "duplicate kernel: fp32 encode is measured twice"},
    {"ProfileEnormousKernelTime", Reader::kScenario, "scenario.json", "",
     [] { return with_int8_profile("enormous_time_profile.json", 1e300); },
     "enormous_time_profile.json", "/kernels/0/points/0/seconds", "1e+300"},

    // ---- straggler CDFs (traces/stragglers/*.json)
    {"CdfEmpty", Reader::kScenario, "scenario.json", "", [] { return with_cdf("empty_cdf.json", ""); },
     "empty_cdf.json", "line 1, column 1", "unexpected end of input"},
    {"CdfUnsortedValues", Reader::kScenario, "scenario.json", "",
     [] {
       json c = cdf();
       c["points"][1][0] = 0.9;
       return with_cdf("unsorted_cdf.json", text(c));
     },
     "unsorted_cdf.json", "/points/1/0:", "expected a value above the previous one (1), got the number 0.9"},
    {"CdfProbabilityAboveOne", Reader::kScenario, "scenario.json", "",
     [] {
       json c = cdf();
       c["points"][2][1] = 1.5;
       return with_cdf("above_one_cdf.json", text(c));
     },
     "above_one_cdf.json", "/points/2/1:", "expected a probability in [0, 1], got the number 1.5"},
    {"CdfNegativeProbability", Reader::kScenario, "scenario.json", "",
     [] {
       json c = cdf();
       c["points"][0][1] = -0.1;
       return with_cdf("negative_probability_cdf.json", text(c));
     },
     "negative_probability_cdf.json", "/points/0/1:", "expected a probability in [0, 1], got the number -0.1"},
    {"CdfProbabilityDecreasing", Reader::kScenario, "scenario.json", "",
     [] {
       json c = cdf();
       c["points"] = json::parse("[[1.0, 0.0], [1.5, 0.6], [2.0, 0.4], [3.0, 1.0]]");
       return with_cdf("decreasing_cdf.json", text(c));
     },
     "decreasing_cdf.json", "/points/2/1:",
     "expected a probability not below the previous one (0.6), got the number 0.4"},
    {"CdfNegativeValue", Reader::kScenario, "scenario.json", "",
     [] {
       json c = cdf();
       c["points"][0][0] = -1.0;
       return with_cdf("negative_cdf.json", text(c));
     },
     "negative_cdf.json", "/points/0/0:", "expected a positive finite value, got the number -1.0"},
    {"CdfWithoutFormat", Reader::kScenario, "scenario.json", "",
     [] { return with_cdf("no_format_cdf.json", "{}"); }, "no_format_cdf.json", "/format:",
     "missing required key"},

    // ---- a scenario's .npy gradients (gradients.source "npy"); the broken one is /gradients/files/1
    {"NpyTruncatedData", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("truncated.npy", npy("<f4", "(64,)", raw(ones(64))).substr(0, 128 + 100)); },
     "truncated.npy", "/gradients/files/1:", "expected 64 values of 4 bytes, file is truncated"},
    {"NpyTruncatedHeader", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("truncated_header.npy", npy("<f4", "(64,)", "").substr(0, 9)); }, "truncated_header.npy",
     "/gradients/files/1:", "truncated .npy header"},
    {"NpyHeaderHidesTrailingBytes", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("trailing.npy", npy("<f4", "(64,)", raw(ones(80)))); }, "trailing.npy",
     "/gradients/files/1:", "expected 384 bytes (64 values of 4 after a 128-byte header), found 448"},
    {"NpyHeaderLengthPastTheFile", Reader::kScenario, "scenario.json", "",
     [] {
       // A version-2 header announcing 4 GiB - 256 bytes: refused before anything is allocated for it.
       return with_npy("long_header.npy", std::string("\x93NUMPY\x02\x00\x00\xff\xff\xff", 12) + "{'descr': '<f4'}");
     },
     "long_header.npy", "/gradients/files/1:", "truncated .npy header: expected 4294967040 header bytes, file has 16"},
    {"NpyHeaderLiesAboutShape", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("lying.npy", npy("<f4", "(100,)", raw(ones(64)))); }, "lying.npy", "/gradients/files/1:",
     "expected 100 values of 4 bytes, file is truncated"},
    {"NpyBigEndian", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("big_endian.npy", npy(">f4", "(64,)", raw(ones(64)))); }, "big_endian.npy",
     "/gradients/files/1:", "expected dtype float32 ('<f4') or float16 ('<f2'), got '>f4'"},
    {"NpyFloat64", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("float64.npy", npy("<f8", "(64,)", raw(std::vector<double>(64, 1.0)))); }, "float64.npy",
     "/gradients/files/1:", "got '<f8'"},
    {"NpyInt32", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("int32.npy", npy("<i4", "(64,)", raw(std::vector<int32_t>(64, 1)))); }, "int32.npy",
     "/gradients/files/1:", "got '<i4'"},
    {"NpyFortranOrder", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("fortran.npy", npy("<f4", "(8, 8)", raw(ones(64)), true)); }, "fortran.npy",
     "/gradients/files/1:", "Fortran-ordered arrays are not supported"},
    {"NpyZeroLength", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("zero_length.npy", npy("<f4", "(8, 0)", "")); }, "zero_length.npy", "/gradients/files/1:",
     "zero_length.npy is empty"},
    {"NpyEnormousShape", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("enormous.npy", npy("<f4", "(1099511627776,)", "")); }, "enormous.npy",
     "/gradients/files/1:", "expected 1099511627776 values of 4 bytes, file is truncated"},
    {"NpyShapeOverflowsTheByteCount", Reader::kScenario, "scenario.json", "",
     [] {
       // 2^62 values of 4 bytes: 2^64 bytes, 0 in 64-bit arithmetic. The only file, at /gradients/files/0.
       json s = collective();
       s["gradients"] = {{"source", "npy"}, {"files", {"wrapping.npy"}}};
       return scenario(s, {{"wrapping.npy", npy("<f4", "(4611686018427387904,)", "")}});
     },
     "wrapping.npy", "/gradients/files/0:", "4611686018427387904"},
    {"NpyNaN", Reader::kScenario, "scenario.json", "",
     [] {
       std::vector<float> v = ones(64);
       v[5] = kNaN;
       v[6] = -kInf;
       v[63] = kInf;
       return with_npy("nan.npy", npy("<f4", "(64,)", raw(v)));
     },
     "nan.npy", "/gradients/files/1:", "3 non-finite value(s) (NaN or inf) of 64, the first at index 5: nan"},
    {"NpyInf", Reader::kScenario, "scenario.json", "",
     [] {
       std::vector<float> v = ones(64);
       v[9] = kInf;
       return with_npy("inf.npy", npy("<f4", "(64,)", raw(v)));
     },
     "inf.npy", "/gradients/files/1:", "1 non-finite value(s) (NaN or inf) of 64, the first at index 9: inf"},
    {"NpyNotNpy", Reader::kScenario, "scenario.json", "",
     [] { return with_npy("zip.npy", std::string("PK\x03\x04", 4) + std::string(200, '\0')); }, "zip.npy",
     "/gradients/files/1:", "not a .npy file (bad magic)"},
    {"NpyFiniteValuesWhoseSumOverflows", Reader::kScenario, "scenario.json", "",
     [] {
       // Every value finite, but 4 workers' 3e38 add up past FLT_MAX: the exact sum, and the error
       // metrics measured against it, are inf or NaN.
       json s = collective();
       s["gradients"] = {{"source", "npy"}, {"files", {"near_max.npy"}}};
       return scenario(s, {{"near_max.npy", npy("<f4", "(64,)", raw(std::vector<float>(64, 3e38f)))}});
     },
     "near_max.npy", "/gradients/files:", "sum past the fp32 range at index 0 (1.2e+39, beyond 3.403e+38)"},

    // ---- gradient dumps: .safetensors worker files (`ccsim vnmse` reads them); the broken one is worker 2
    {"SafetensorsShorterThanTheLength", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker2.safetensors", st_worker(2).substr(0, 5)}}); }, "worker2.safetensors",
     "/workers/2:", "truncated safetensors file: expected at least 8 bytes (the header length), found 5"},
    {"SafetensorsHeaderBeyondTheFile", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker2.safetensors", le64(1000000) + st_worker(2).substr(8)}}); },
     "worker2.safetensors", "/workers/2:", "header length 1000000 exceeds the file: expected at most 656 bytes"},
    {"SafetensorsHeaderNotJson", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       const std::string cut = R"({"step0": {"dtype": "F32", )";
       return dump({{"dump/worker2.safetensors", safetensors(cut, std::string(512, '\0'))}});
     },
     "worker2.safetensors", "header (bytes counted from 8): invalid JSON: line 1, column 33", "syntax error"},
    {"SafetensorsHeaderNotAnObject", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker2.safetensors", safetensors("[1, 2, 3]", std::string(512, '\0'))}}); },
     "worker2.safetensors", "/workers/2:",
     "expected the header to be a JSON object starting with '{', found byte 0x5b"},
    {"SafetensorsHeaderNestedTooDeep", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker2.safetensors", safetensors("{\"a\": " + std::string(100000, '['), "")}}); },
     "worker2.safetensors", "at byte 261", "JSON nested deeper than 256 levels"},
    {"SafetensorsOffsetsPastTheEnd", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       const std::string data = raw(ones(64)) + raw(ones(64)).substr(0, 100);
       return dump({{"dump/worker2.safetensors",
                     st_two(st_entry("F32", 64, 0, 256), st_entry("F32", 64, 256, 512), data)}});
     },
     "worker2.safetensors", "/step10/data_offsets:",
     "out of range: expected end <= 356 (the data buffer's size), found [256, 512]"},
    {"SafetensorsUnsupportedDtype", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       return dump({{"dump/worker2.safetensors",
                     st_two(st_entry("I32", 64, 0, 256), st_entry("F32", 64, 256, 512), raw(ones(128)))}});
     },
     "worker2.safetensors", "/step0/dtype:", "unsupported dtype 'I32': expected one of F32, F16, BF16"},
    {"SafetensorsTensorNamedTwice", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       return dump({{"dump/worker2.safetensors",
                     safetensors(st_header({{"step0", st_entry("F32", 64, 0, 256)},
                                            {"step10", st_entry("F32", 64, 256, 512)},
                                            {"step0", st_entry("F32", 64, 0, 256)}}),
                                 raw(ones(128)))}});
     },
     "worker2.safetensors", "header (bytes counted from 8): /step0:", "duplicate key"},
    {"SafetensorsTensorsOverlap", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       return dump({{"dump/worker2.safetensors",
                     st_two(st_entry("F32", 64, 0, 256), st_entry("F32", 64, 128, 384), raw(ones(96)))}});
     },
     "worker2.safetensors", "/step10/data_offsets:",
     "overlaps tensor 'step0' at bytes [0, 256): expected begin >= 256, found 128"},
    {"SafetensorsTensorShorterThanTheManifest", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker2.safetensors", st_worker(gradient(2, 0), std::vector<float>(63, 0.5f))}}); },
     "worker2.safetensors", "/workers/2:", "tensor 'step10': expected 64 elements (/elements), found 63 (shape [63])"},
    {"SafetensorsNaN", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       std::vector<float> v = gradient(2, 10);
       v[35] = kNaN;
       v[40] = kInf;
       return dump({{"dump/worker2.safetensors", st_worker(gradient(2, 0), v)}});
     },
     "worker2.safetensors", "the first at index 35 (layer 'b', entry 3)",
     "worker 2, step 1 (iteration 10): 2 non-finite value(s) (NaN or inf)"},
    {"SafetensorsFiniteValuesWhoseSumOverflows", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       const std::vector<float> near_max(kElements, 3e38f);  // finite; 2 of them add up past FLT_MAX
       return dump({{"dump/worker2.safetensors", st_worker(near_max, near_max)},
                    {"dump/worker3.safetensors", st_worker(near_max, near_max)}});
     },
     "dump", "step 0: int8:", "the 4 ranks' gradients sum past the fp32 range at index 0 (6e+38, beyond 3.403e+38)"},

    // ---- gradient dumps: the manifest (docs/gradient-dumps.md)
    {"ManifestMissing", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       Files f = dump();
       f.erase(f.begin());
       return f;
     },
     "dump", "", "has no manifest.json; `ccsim manifest "},
    {"ManifestTruncated", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump_text(text(manifest(kWorkers)).substr(0, 200)); }, "dump/manifest.json", "line 14, column 5",
     "syntax error while parsing object - unexpected end of input"},
    {"ManifestRepeatedKey", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       return dump_text(
           replace_once(text(manifest(kWorkers)), "\"dtype\": \"F32\"", "\"dtype\": \"F32\", \"dtype\": \"BF16\""));
     },
     "dump/manifest.json", "/dtype:", "duplicate key"},
    {"ManifestWorkerFileMissing", Reader::kVnmse, "dump", "--ranks 4",
     [] { return dump({{"dump/worker3.safetensors", "<none>"}}); }, "dump/manifest.json", "/workers/3:",
     "worker3.safetensors: no such file"},
    {"ManifestPathEscapesWithDotDot", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       json m = manifest(kWorkers);
       m["workers"][3] = "../outside/worker3.safetensors";
       return dump_text(text(m),
                        {{"dump/worker3.safetensors", "<none>"}, {"outside/worker3.safetensors", st_worker(3)}});
     },
     "dump/manifest.json", "/workers/3:", "../outside/worker3.safetensors"},
    {"ManifestAbsolutePath", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       json m = manifest(kWorkers);
       m["workers"][3] = "$DIR/outside/worker3.safetensors";
       return dump_text(text(m),
                        {{"dump/worker3.safetensors", "<none>"}, {"outside/worker3.safetensors", st_worker(3)}});
     },
     "dump/manifest.json", "/workers/3:", "expected a path relative to the dump directory"},
    {"ManifestSymlinkLoop", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       return dump({{"dump/worker3.safetensors", "loop.safetensors", File::kSymlink},
                    {"dump/loop.safetensors", "worker3.safetensors", File::kSymlink}});
     },
     "dump/manifest.json", "/workers/3:", "symbolic link"},
    {"ManifestCountNotTheShape", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       json m = manifest(kWorkers);
       m["layers"][1]["count"] = 31;
       return dump_text(text(m));
     },
     "dump/manifest.json", "/layers/1/count:", "expected 32 (the product of shape [32]), found 31"},
    {"ManifestLayersOverlap", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       json m = manifest(kWorkers);
       m["layers"][1]["offset"] = 30;
       return dump_text(text(m));
     },
     "dump/manifest.json", "/layers/1/offset:",
     "expected 32 (the end of layer 0 'a'), found 30 (an overlap of 2 elements)"},
    {"ManifestLayersNotTheTensor", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       json m = manifest(kWorkers);
       m["elements"] = 60;
       return dump_text(text(m));
     },
     "dump/manifest.json", "/layers/1:", "expected the last layer to end at /elements = 60, found it ends at 64"},
    {"ManifestOneWorker", Reader::kVnmse, "dump", "",
     [] {
       return Files{{"dump/manifest.json", text(manifest({"worker0.safetensors"}))},
                    {"dump/worker0.safetensors", st_worker(0)}};
     },
     "dump/manifest.json", "/workers", "at least 2"},

    // ---- gradient dumps with .npy worker files; the broken one is worker 1
    {"DumpNpyTruncated", Reader::kVnmse, "dump", "--ranks 4",
     [] { return npy_dump(npy_worker(1).substr(0, 630)); }, "worker1.npy", "/workers/1:",
     "expected 640 bytes (128 values of F32 after a 128-byte header), found 630"},
    {"DumpNpyBigEndian", Reader::kVnmse, "dump", "--ranks 4",
     [] { return npy_dump(npy(">f4", "(2, 64)", raw(ones(128)))); }, "worker1.npy", "/workers/1:",
     "expected dtype float32 ('<f4') or float16 ('<f2'), got '>f4'"},
    {"DumpNpyShapeOverflowsTheByteCount", Reader::kVnmse, "dump", "--ranks 4",
     [] { return npy_dump(npy("<f4", "(4611686018427387904,)", "")); }, "worker1.npy", "/workers/1:",
     "expected a shape of at most 2^44 = 17592186044416 values, got (4611686018427387904,)"},
    {"DumpNpyNaN", Reader::kVnmse, "dump", "--ranks 4",
     [] {
       std::vector<float> v = gradient(1, 10);
       v[33] = kNaN;
       return npy_dump(npy_worker(1, v));
     },
     "worker1.npy", "the first at index 33 (layer 'b', entry 1)",
     "worker 1, step 1 (iteration 10): 1 non-finite value(s) (NaN or inf)"},
};

void PrintTo(const Broken& b, std::ostream* os) { *os << b.name; }

// `ccsim ARGS` under `timeout 60` (no core file): the exit status as a shell reports it (128 + the
// signal for a crash, 124 for a hang).
Outcome guarded(const std::string& args, const fs::path& scratch) {
  static int n = 0;
  const fs::path out = scratch / fmt::format("stdout.{}.txt", n), err = scratch / fmt::format("stderr.{}.txt", n);
  ++n;
  const std::string cmd = fmt::format("ulimit -c 0; timeout -k 5 60 {} {} >{} 2>{}", quote(CCSIM_BINARY), args,
                                      quote(out.string()), quote(err.string()));
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = read_file(out);
  o.err = read_file(err);
  fs::remove(out);
  fs::remove(err);
  return o;
}

// `s` with $DIR replaced by `dir` and $DEEP by 300 opening brackets (one shell word).
std::string substitute(std::string s, const fs::path& dir) {
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"$DIR", dir.string()},
                                   {"$DEEP", quote(std::string(300, '['))}})
    for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
      s.replace(at, key.size(), value);
  return s;
}

// What `dir` holds, relative and sorted (links listed, not followed: some entries write link loops).
std::vector<std::string> listing(const fs::path& dir, const fs::path& root = {}) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    out.push_back(e.path().lexically_relative(root.empty() ? dir : root).generic_string());
    if (!e.is_symlink(ec) && e.is_directory(ec))
      for (std::string& s : listing(e.path(), root.empty() ? dir : root)) out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Writes `files` under `dir` and returns the paths written, relative and sorted.
std::vector<std::string> write_files(const fs::path& dir, const Files& files) {
  for (const File& f : files) {
    const fs::path p = dir / f.path;
    fs::create_directories(p.parent_path());
    if (f.kind == File::kDirectory) {
      fs::create_directories(p);
    } else if (f.kind == File::kSymlink) {
      fs::create_symlink(f.bytes, p);
    } else {
      std::ofstream(p, std::ios::binary | std::ios::trunc)
          << (p.extension() == ".json" ? substitute(f.bytes, dir) : f.bytes);
    }
  }
  return listing(dir);
}

// The first line of `err` holding `file`, `where` and `message`, or "".
std::string line_with(const std::string& err, const std::string& file, const std::string& where,
                      const std::string& message) {
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, file) && contains(line, where) && contains(line, message)) return line;
  return "";
}

class BrokenInputs : public ::testing::TestWithParam<Broken> {
 protected:
  static void SetUpTestSuite() { scratch_ = new TempDir("ccsim-broken-io"); }
  static void TearDownTestSuite() { delete scratch_; }

  // The command of `b` on its folder `dir`, writing into `out`.
  static std::vector<std::pair<std::string, std::string>> commands(const Broken& b, const fs::path& dir,
                                                                   const fs::path& out) {
    const std::string target = quote((dir / b.target).string());
    const std::string args = substitute(b.args, dir);
    if (b.reader == Reader::kVnmse)
      return {{"vnmse", fmt::format("vnmse --gradients {} --algo int8 {} --csv {}", target, args,
                                    quote((out / "vnmse.csv").string()))}};
    return {{"validate", fmt::format("validate {} {}", target, args)},
            {"run", fmt::format("run {} --out {} {}", target, quote(out.string()), args)}};
  }
  static TempDir* scratch_;
};
TempDir* BrokenInputs::scratch_ = nullptr;

TEST_P(BrokenInputs, ExitTwoWithFileLocationAndWhatWasExpectedAndNothingWritten) {
  const Broken& b = GetParam();
  TempDir dir("ccsim-broken");
  const std::vector<std::string> inputs = write_files(dir.path(), b.files());
  const fs::path out = scratch_->path() / (std::string(b.name) + "-out");
  std::string first_report;
  for (const auto& [what, command] : commands(b, dir.path(), out)) {
    SCOPED_TRACE(fmt::format("ccsim {}", command));
    const Outcome o = guarded(command, scratch_->path());
    EXPECT_EQ(o.code, 2) << show(o);
    if (what == "validate") {
      EXPECT_EQ(o.out, "") << "validate printed on stdout";
      first_report = o.err;
    }
    EXPECT_NE(line_with(o.err, b.file, b.where, b.message), "")
        << "expected one line of stderr naming '" << b.file << "' at '" << b.where << "' saying '" << b.message
        << "'\n" << show(o);
    if (what == "run") {
      EXPECT_EQ(o.err, first_report) << "run must reject the file with validate's report";
    }
    EXPECT_TRUE(!fs::exists(out) || fs::is_empty(out)) << "a rejected " << what << " wrote into " << out;
    // Nothing written next to the inputs either (no temporary or partial file).
    EXPECT_EQ(listing(dir.path()), inputs) << "a rejected " << what << " left files next to its inputs";
    fs::remove_all(out);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BrokenInputs, ::testing::ValuesIn(kBroken),
                         [](const ::testing::TestParamInfo<Broken>& i) { return std::string(i.param.name); });

// The bases the entries break are valid: each command succeeds and writes its outputs.
TEST_F(BrokenInputs, TheBasesPass) {
  const std::vector<std::pair<std::string, Files>> bases = {
      {"collective", scenario(collective())},
      {"trace", with_trace("trace.json", text(trace()))},
      {"profile", with_profile("profile.json", text(profile()))},
      {"int8-profile", with_int8_profile("profile.json", 1e-6)},
      {"cdf", with_cdf("cdf.json", text(cdf()))},
      {"npy", with_npy("second.npy", npy("<f4", "(64,)", raw(gradient(1, 0))))},
  };
  for (const auto& [name, files] : bases) {
    TempDir dir("ccsim-broken-base");
    write_files(dir.path(), files);
    const fs::path out = scratch_->path() / ("base-" + name);
    const Broken b{name.c_str(), Reader::kScenario, "scenario.json", "", nullptr, "", "", ""};
    for (const auto& [what, command] : commands(b, dir.path(), out)) {
      const Outcome o = guarded(command, scratch_->path());
      EXPECT_EQ(o.code, 0) << name << ": ccsim " << command << "\n" << show(o);
    }
    EXPECT_TRUE(fs::exists(out / "summary.json")) << name;
  }
  for (const auto& [name, files] : std::vector<std::pair<std::string, Files>>{
           {"safetensors dump", dump()}, {"npy dump", npy_dump(npy_worker(1))}}) {
    TempDir dir("ccsim-broken-base");
    write_files(dir.path(), files);
    const fs::path out = scratch_->path() / ("base-" + name.substr(0, name.find(' ')));
    const Broken b{name.c_str(), Reader::kVnmse, "dump", "--ranks 4", nullptr, "", "", ""};
    for (const auto& [what, command] : commands(b, dir.path(), out)) {
      const Outcome o = guarded(command, scratch_->path());
      EXPECT_EQ(o.code, 0) << name << ": ccsim " << command << "\n" << show(o);
    }
    EXPECT_TRUE(fs::exists(out / "vnmse.csv")) << name;
  }
}

}  // namespace
}  // namespace ccsim
