// Manifests written from a directory of per-worker files (traces/dump_manifest.hpp): .npy with one
// or several steps, F16, .safetensors with one tensor per step, layers from a parameter list; each
// manifest is read back by GradientDump::open and its values compared with what was written. Every
// refusal names the file and what was expected and found. The missing-manifest error of
// GradientDump::open names the command that writes one.

#include "traces/dump_manifest.hpp"

#include "tests/tools/npy_bytes.hpp"
#include "tests/tools/temp_dir.hpp"
#include "traces/gradient_dump.hpp"
#include "traces/npy.hpp"
#include "traces/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle)                                                                              \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (haystack)

constexpr uint64_t kElements = 24;

// Worker w's gradient at step index s: multiples of 1/4 below 64, exact in F16 and BF16.
std::vector<float> gradient(uint32_t w, size_t s, uint64_t n = kElements) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = 0.25f * static_cast<float>((i % 16 + 1) * (w + 1)) * (s % 2 ? -1.0f : 1.0f) + static_cast<float>(s);
  return v;
}

// Steps [0, steps) of worker w, back to back.
std::vector<float> rows(uint32_t w, size_t steps, uint64_t n = kElements) {
  std::vector<float> out;
  for (size_t s = 0; s < steps; ++s) {
    const auto g = gradient(w, s, n);
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

using ccsim::test_files::npy_bytes;

// `v` as float16 bytes.
std::string f16_bytes(const std::vector<float>& v) {
  std::string out(2 * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = float_to_f16_rne(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class DumpManifestTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_f32(const std::string& name, const std::vector<uint64_t>& shape, const std::vector<float>& v) const {
    ASSERT_TRUE(write_npy_f32(path(name), shape, v).ok());
  }
  // Worker files `names`, each [steps, kElements] F32 (1-D for steps == 0), worker w from names[w].
  void write_npy_workers(const std::vector<std::string>& names, size_t steps) const {
    for (uint32_t w = 0; w < names.size(); ++w)
      write_f32(names[w], steps == 0 ? std::vector<uint64_t>{kElements} : std::vector<uint64_t>{steps, kElements},
                rows(w, std::max<size_t>(steps, 1)));
  }
  // Worker w's .safetensors file `name` with one `dtype` tensor [4, 6] per entry of `tensors`,
  // tensors[k] holding gradient(w, step_of[k]).
  void write_st(const std::string& name, uint32_t w, const std::vector<std::string>& tensors,
                const std::vector<size_t>& step_of, TensorDtype dtype = TensorDtype::kBF16, uint64_t n = kElements) {
    std::vector<std::vector<float>> values;
    for (size_t s : step_of) values.push_back(gradient(w, s, n));
    std::vector<SafetensorsTensorData> t;
    for (size_t k = 0; k < tensors.size(); ++k)
      t.push_back({tensors[k], dtype, n == kElements ? std::vector<uint64_t>{4, 6} : std::vector<uint64_t>{n},
                   values[k]});
    ASSERT_TRUE(write_safetensors(dir_ / name, t).ok());
  }

  json make() const {
    auto m = make_dump_manifest(dir_.path(), options_);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? *m : json();
  }
  std::string error(StatusCode code = StatusCode::kInvalidArgument) const {
    auto m = make_dump_manifest(dir_.path(), options_);
    EXPECT_FALSE(m.ok()) << "unexpectedly made " << (m.ok() ? m->dump() : "");
    if (m.ok()) return {};
    EXPECT_EQ(m.status().code(), code) << m.status().message();
    return m.status().message();
  }
  // Writes `manifest` as manifest.json and opens the dump.
  GradientDump open(const json& manifest) const {
    dir_.write("manifest.json", manifest_text(manifest));
    auto d = GradientDump::open(dir_.path());
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? *d : GradientDump();
  }
  static std::vector<float> values(const GradientDump& d, uint32_t w, size_t s) {
    auto g = d.worker(w, s);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return g.ok() ? std::vector<float>(g->values().begin(), g->values().end()) : std::vector<float>();
  }

  TempDir dir_{"ccsim-manifest"};
  ManifestOptions options_;
};

// ---- what the files say -------------------------------------------------------------------------

TEST_F(DumpManifestTest, NpyOneDimensionalArraysAreOneStep) {
  write_npy_workers({"worker0.npy", "worker1.npy", "worker2.npy"}, 0);
  dir_.write("notes.txt", "ignored");
  const json m = make();
  EXPECT_EQ(m["format"], "ccsim-gradient-dump");
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["dtype"], "F32");
  EXPECT_EQ(m["elements"], kElements);
  EXPECT_EQ(m["workers"], json({"worker0.npy", "worker1.npy", "worker2.npy"}));
  EXPECT_FALSE(m.contains("steps"));
  EXPECT_EQ(m["layers"], json::parse(R"([{"name": "gradient", "shape": [24], "offset": 0, "count": 24}])"));
  EXPECT_EQ(m["provenance"], json::parse(R"({"model": "unknown: described by ccsim manifest", "dataset": "unknown"})"));
  const GradientDump d = open(m);
  ASSERT_EQ(d.workers(), 3u);
  ASSERT_EQ(d.steps(), 1u);
  for (uint32_t w = 0; w < 3; ++w) EXPECT_EQ(values(d, w, 0), gradient(w, 0)) << w;
  EXPECT_EQ(d.provenance().model, "unknown: described by ccsim manifest");
}

TEST_F(DumpManifestTest, NpyRowsAreStepsNumberedFromZeroUnlessGiven) {
  write_npy_workers({"rank_0.npy", "rank_1.npy", "rank_2.npy"}, 3);
  json m = make();
  EXPECT_EQ(m["steps"], json::parse(R"([{"step": 0}, {"step": 1}, {"step": 2}])"));
  EXPECT_EQ(m["elements"], kElements);
  {
    const GradientDump d = open(m);
    ASSERT_EQ(d.steps(), 3u);
    for (uint32_t w = 0; w < 3; ++w)
      for (size_t s = 0; s < 3; ++s) EXPECT_EQ(values(d, w, s), gradient(w, s)) << w << " " << s;
  }
  options_.steps = {5, 50, 500};
  options_.model = "MLP";
  options_.dataset = "MNIST";
  options_.generator = "ccsim manifest DIR --steps 5,50,500";
  m = make();
  EXPECT_EQ(m["steps"], json::parse(R"([{"step": 5}, {"step": 50}, {"step": 500}])"));
  EXPECT_EQ(m["provenance"]["generator"], "ccsim manifest DIR --steps 5,50,500");
  const GradientDump d = open(m);
  EXPECT_EQ(d.step_info()[2].step, 500u);
  EXPECT_EQ(d.provenance().dataset, "MNIST");
  EXPECT_EQ(values(d, 1, 2), gradient(1, 2));
}

TEST_F(DumpManifestTest, GivenStepNumbersForOneDimensionalArrays) {
  write_npy_workers({"w0.npy", "w1.npy"}, 0);
  options_.steps = {700};
  const json m = make();
  EXPECT_EQ(m["steps"], json::parse(R"([{"step": 700}])"));
  EXPECT_EQ(open(m).step_info()[0].step, 700u);
}

TEST_F(DumpManifestTest, NpyFloat16) {
  for (uint32_t w = 0; w < 2; ++w)
    dir_.write(fmt::format("g{}.npy", w), npy_bytes("<f2", "(2, 24)", f16_bytes(rows(w, 2))));
  const json m = make();
  EXPECT_EQ(m["dtype"], "F16");
  const GradientDump d = open(m);
  EXPECT_EQ(d.dtype(), TensorDtype::kF16);
  for (uint32_t w = 0; w < 2; ++w)
    for (size_t s = 0; s < 2; ++s) EXPECT_EQ(values(d, w, s), gradient(w, s));
}

TEST_F(DumpManifestTest, WorkersAreOrderedByTheLastNumberInTheirNames) {
  // Written so that worker w's values are gradient(w): the names' numbers 1, 2, 10 (not 0..W-1),
  // "run2" ignored, and name order ("run2_worker1", "run2_worker10", "run2_worker2") differs.
  write_npy_workers({"run2_worker1.npy", "run2_worker2.npy", "run2_worker10.npy"}, 0);
  const json m = make();
  EXPECT_EQ(m["workers"], json({"run2_worker1.npy", "run2_worker2.npy", "run2_worker10.npy"}));
  const GradientDump d = open(m);
  for (uint32_t w = 0; w < 3; ++w) EXPECT_EQ(values(d, w, 0), gradient(w, 0));
  EXPECT_CONTAINS(manifest_summary(m), "3 workers (run2_worker1.npy, run2_worker2.npy, run2_worker10.npy) in the "
                                       "order of the numbers in their names");
}

TEST_F(DumpManifestTest, SafetensorsTensorsAreStepsInTheOrderOfTheirNumbers) {
  // Tensor "stepK" holds the gradient of step index k: step2 -> 0, step10 -> 1, step100 -> 2.
  for (uint32_t w = 0; w < 3; ++w)
    write_st(fmt::format("grads-{}.safetensors", w), w, {"step10", "step100", "step2"}, {1, 2, 0});
  const json m = make();
  EXPECT_EQ(m["dtype"], "BF16");
  EXPECT_EQ(m["elements"], kElements);
  EXPECT_EQ(m["steps"], json::parse(R"([{"step": 2, "tensor": "step2"}, {"step": 10, "tensor": "step10"},
                                        {"step": 100, "tensor": "step100"}])"));
  const GradientDump d = open(m);
  ASSERT_EQ(d.steps(), 3u);
  EXPECT_EQ(d.file_format(), GradientFileFormat::kSafetensors);
  for (uint32_t w = 0; w < 3; ++w)
    for (size_t s = 0; s < 3; ++s) EXPECT_EQ(values(d, w, s), gradient(w, s)) << w << " " << s;
  EXPECT_CONTAINS(manifest_summary(m), "3 steps (2, 10, 100: tensors 'step2', 'step10', 'step100'), 24 BF16 elements");

  options_.steps = {20, 30, 40};  // given numbers replace the names' numbers, in the same order
  const json given = make();
  EXPECT_EQ(given["steps"][0], json::parse(R"({"step": 20, "tensor": "step2"})"));
  EXPECT_EQ(given["steps"][2], json::parse(R"({"step": 40, "tensor": "step100"})"));
}

TEST_F(DumpManifestTest, ALoneTensorWithoutANumberIsStepZero) {
  for (uint32_t w = 0; w < 2; ++w)
    write_st(fmt::format("worker{}.safetensors", w), w, {"grad"}, {0}, TensorDtype::kF32);
  const json m = make();
  EXPECT_EQ(m["steps"], json::parse(R"([{"step": 0, "tensor": "grad"}])"));
  EXPECT_EQ(m["dtype"], "F32");
  EXPECT_EQ(values(open(m), 1, 0), gradient(1, 0));
}

TEST_F(DumpManifestTest, ParameterListGivesTheLayers) {
  write_npy_workers({"w0.npy", "w1.npy"}, 2);
  dir_.write("params.json", R"([{"name": "fc.weight", "shape": [4, 5]}, {"name": "fc.bias", "shape": [4]}])");
  options_.params = dir_ / "params.json";
  const json m = make();
  EXPECT_EQ(m["layers"], json::parse(R"([{"name": "fc.weight", "shape": [4, 5], "offset": 0, "count": 20},
                                         {"name": "fc.bias", "shape": [4], "offset": 20, "count": 4}])"));
  const GradientDump d = open(m);
  auto bias = d.find_layer("fc.bias");
  ASSERT_TRUE(bias.ok()) << bias.status().message();
  auto v = d.layer(1, 1, *bias);
  ASSERT_TRUE(v.ok()) << v.status().message();
  const auto g = gradient(1, 1);
  EXPECT_EQ(*v, std::vector<float>(g.begin() + 20, g.end()));
  EXPECT_CONTAINS(manifest_summary(m), "2 layers ('fc.weight' ... 'fc.bias')");
}

TEST_F(DumpManifestTest, SummarySaysWhatWasAssumed) {
  write_npy_workers({"worker0.npy", "worker1.npy", "worker2.npy"}, 0);
  EXPECT_EQ(manifest_summary(make()),
            "3 workers (worker0.npy, worker1.npy, worker2.npy), 1 step, 24 F32 elements, one layer 'gradient'");
}

TEST_F(DumpManifestTest, TheTextIsTheManifestInSchemaOrder) {
  write_npy_workers({"worker0.npy", "worker1.npy"}, 2);
  options_.generator = "ccsim manifest 'my dump'";
  const json m = make();
  const std::string text = manifest_text(m);
  EXPECT_EQ(json::parse(text), m);
  EXPECT_LT(text.find("\"format\""), text.find("\"version\""));
  EXPECT_LT(text.find("\"workers\""), text.find("\"steps\""));
  EXPECT_LT(text.find("\"steps\""), text.find("\"layers\""));
  EXPECT_CONTAINS(text, "\n    {\"name\": \"gradient\", \"shape\": [24], \"offset\": 0, \"count\": 24}\n");
}

TEST(CommandLine, QuotesOnlyWhereTheShellNeedsIt) {
  EXPECT_EQ(command_line({"ccsim", "manifest", "dumps/run-1", "--steps", "0,50"}),
            "ccsim manifest dumps/run-1 --steps 0,50");
  EXPECT_EQ(command_line({"ccsim", "--model", "GPT 2", "it's", ""}), "ccsim --model 'GPT 2' 'it'\\''s' ''");
}

// ---- the directory ------------------------------------------------------------------------------

TEST_F(DumpManifestTest, AMixOfKindsIsRefusedNamingBoth) {
  write_npy_workers({"w0.npy"}, 0);
  write_st("w1.safetensors", 1, {"step0"}, {0});
  const std::string e = error();
  EXPECT_CONTAINS(e, dir_.path().string() + ": expected per-worker files of one kind, all .npy or all .safetensors, "
                                            "found 1 .npy file ('w0.npy') and 1 .safetensors file ('w1.safetensors')");
}

TEST_F(DumpManifestTest, NoWorkerFilesListsWhatTheDirectoryHolds) {
  EXPECT_CONTAINS(error(), dir_.path().string() + ": expected one .npy or .safetensors file per worker, found an "
                                                  "empty directory");
  dir_.write("model.pt", "x");
  dir_.write("notes.txt", "x");
  dir_.write("logs/run.log", "x");
  EXPECT_CONTAINS(error(), "found only 'logs/', 'model.pt', 'notes.txt'");
}

TEST_F(DumpManifestTest, AMissingDirectoryIsNotFoundAndAFileIsNoDirectory) {
  auto m = make_dump_manifest(dir_ / "nowhere", options_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(m.status().message(), (dir_ / "nowhere").string() + ": no such directory");
  m = make_dump_manifest(dir_.write("file.npy", "x"), options_);
  ASSERT_FALSE(m.ok());
  EXPECT_CONTAINS(m.status().message(), "file.npy: expected a directory of per-worker gradient files, found a file");
}

TEST_F(DumpManifestTest, FilesWithoutNumbersOrWithTheSameNumberAreRefused) {
  write_npy_workers({"worker0.npy", "final.npy", "last.npy"}, 0);
  EXPECT_CONTAINS(error(), dir_.path().string() + ": expected a number in every worker file's name (it orders the "
                                                  "workers), found none in 'final.npy', 'last.npy'");
  fs::remove(dir_ / "final.npy");
  fs::remove(dir_ / "last.npy");
  write_npy_workers({"worker00.npy", "worker1.npy", "worker01.npy"}, 0);
  EXPECT_CONTAINS(error(),
                  "expected one worker file per number, found 'worker0.npy' and 'worker00.npy' both numbered 0");
  EXPECT_CONTAINS(error(), "found 'worker01.npy' and 'worker1.npy' both numbered 1");
}

// ---- .npy files ---------------------------------------------------------------------------------

TEST_F(DumpManifestTest, NpyFilesThatDoNotFitAreRefusedTogether) {
  write_npy_workers({"w0.npy"}, 2);
  dir_.write("w1.npy", npy_bytes("<f8", "(2, 24)", std::string(2 * 24 * 8, '\0')));
  dir_.write("w2.npy", npy_bytes("<f4", "(2, 3, 4)", f32_bytes(rows(2, 1))));
  dir_.write("w3.npy", npy_bytes("<f4", "(3, 24)", f32_bytes(rows(3, 3))));
  dir_.write("w4.npy", npy_bytes("<f2", "(2, 24)", f16_bytes(rows(4, 2))));
  dir_.write("w5.npy", npy_bytes("<f4", "(4, 6)", f32_bytes(rows(5, 1)), true));
  dir_.write("w6.npy", npy_bytes("<f4", "(2, 0)", ""));
  const std::string e = error();
  EXPECT_CONTAINS(e, path("w1.npy") + ": expected dtype float32 ('<f4') or float16 ('<f2'), got '<f8'");
  EXPECT_CONTAINS(e, path("w2.npy") + ": expected a 1-D array (one step) or a 2-D [steps, elements] array, found "
                                      "shape (2, 3, 4)");
  EXPECT_CONTAINS(e, path("w3.npy") + ": expected shape (2, 24) and dtype F32 as " + path("w0.npy") +
                         " has (every worker alike), found (3, 24) and F32");
  EXPECT_CONTAINS(e, path("w4.npy") + ": expected shape (2, 24) and dtype F32 as " + path("w0.npy") +
                         " has (every worker alike), found (2, 24) and F16");
  EXPECT_CONTAINS(e, path("w5.npy") + ": Fortran-ordered arrays are not supported");
  EXPECT_CONTAINS(e, path("w6.npy") + ": expected at least one value, found shape (2, 0)");
}

TEST_F(DumpManifestTest, GivenStepNumbersMustFitTheSteps) {
  write_npy_workers({"w0.npy", "w1.npy"}, 2);
  options_.steps = {1, 2, 3};
  EXPECT_CONTAINS(error(), "step numbers: expected 2 (one per row of the [2, 24] arrays), given 3: 1, 2, 3");
  options_.steps = {5, 5};
  EXPECT_CONTAINS(error(), "step numbers: expected them increasing, given 5, 5");
}

// ---- .safetensors files -------------------------------------------------------------------------

TEST_F(DumpManifestTest, SafetensorsFilesThatDoNotFitAreRefusedTogether) {
  write_st("w0.safetensors", 0, {"step0", "step1"}, {0, 1});
  write_st("w1.safetensors", 1, {"step0", "step1"}, {0, 1}, TensorDtype::kF16);
  write_st("w2.safetensors", 2, {"step0", "step1"}, {0, 1}, TensorDtype::kBF16, 20);
  write_st("w3.safetensors", 3, {"step0", "step2"}, {0, 1});
  write_st("w4.safetensors", 4, {}, {});
  const std::string e = error();
  EXPECT_CONTAINS(e, path("w1.safetensors") + ": tensor 'step0': expected dtype BF16 as tensor 'step0' of " +
                         path("w0.safetensors") + " has, found F16");
  EXPECT_CONTAINS(e, path("w2.safetensors") + ": tensor 'step1': expected 24 elements as tensor 'step0' of " +
                         path("w0.safetensors") + " has, found 20 (shape [20])");
  EXPECT_CONTAINS(e, path("w3.safetensors") + ": expected the tensors of " + path("w0.safetensors") +
                         " (one per step, in every worker file), found no 'step1' and also 'step2'");
  EXPECT_CONTAINS(e, path("w4.safetensors") + ": expected one tensor per step, found no tensors");
}

TEST_F(DumpManifestTest, TensorNamesMustNumberTheSteps) {
  write_st("w0.safetensors", 0, {"grad", "momentum"}, {0, 1});
  EXPECT_CONTAINS(error(), path("w0.safetensors") + ": expected a number in every tensor's name (the step it holds), "
                                                    "found none in 'grad', 'momentum'");
  write_st("w0.safetensors", 0, {"a1", "b1"}, {0, 1});
  EXPECT_CONTAINS(error(), path("w0.safetensors") + ": expected one tensor per number, found 'a1' and 'b1' both "
                                                    "numbered 1");
  write_st("w0.safetensors", 0, {"step99999999999999999999"}, {0});
  EXPECT_CONTAINS(error(), "tensor 'step99999999999999999999': expected a step number below 2^64");
}

// ---- parameter lists ----------------------------------------------------------------------------

TEST_F(DumpManifestTest, AParameterListMustHoldTheElements) {
  write_npy_workers({"w0.npy", "w1.npy"}, 0);
  options_.params = dir_.write("params.json", R"([{"name": "w", "shape": [4, 5]}, {"name": "b", "shape": [5]}])");
  EXPECT_CONTAINS(error(), options_.params->string() + ": /: expected parameters of 24 elements in all (one worker's "
                                                       "gradient at one step), found 25 (over by 1)");
}

TEST_F(DumpManifestTest, BadParameterEntriesAreReportedAtTheirPointers) {
  write_npy_workers({"w0.npy", "w1.npy"}, 0);
  options_.params = dir_.write("params.json", R"([{"name": "w", "shape": [4, "5"]}, {"nam": "b", "shape": [4]},
    {"name": "w", "shape": [4]}, 7, {"name": "", "shape": 4}])");
  const std::string e = error();
  const std::string f = options_.params->string();
  EXPECT_CONTAINS(e, f + ": /0/shape/1: expected an integer in [0, 2^44], found string \"5\"");
  EXPECT_CONTAINS(e, f + ": /1/nam: unknown key 'nam' (did you mean 'name'?)");
  EXPECT_CONTAINS(e, f + ": /1: missing required key 'name'");
  EXPECT_CONTAINS(e, f + ": /2/name: expected a name of its own, found 'w' again (also /0/name)");
  EXPECT_CONTAINS(e, f + ": /3: expected an object {\"name\", \"shape\"}, found 7");
  EXPECT_CONTAINS(e, f + ": /4/name: expected a non-empty string");
  EXPECT_CONTAINS(e, f + ": /4/shape: expected an array of non-negative integers, found 4");

  options_.params = dir_.write("params.json", R"({"name": "w", "shape": [24]})");
  EXPECT_CONTAINS(error(), f + ": /: expected a non-empty array of {\"name\": str, \"shape\": [ints]} in flattening "
                               "order, found object");
  options_.params = dir_.write("params.json", "[{\"name\": \"w\",");
  EXPECT_CONTAINS(error(), f + ": invalid JSON");
  options_.params = dir_ / "absent.json";
  EXPECT_CONTAINS(error(StatusCode::kNotFound), (dir_ / "absent.json").string() + ": no such file");
}

// ---- GradientDump::open without a manifest ------------------------------------------------------

TEST_F(DumpManifestTest, AMissingManifestNamesTheCommandThatWritesOne) {
  const auto open_error = [&] {
    auto d = GradientDump::open(dir_.path());
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
    return d.ok() ? std::string() : d.status().message();
  };
  const std::string dir = dir_.path().string();
  EXPECT_EQ(open_error(), dir + "/manifest.json: no such file (a gradient dump directory holds manifest.json and one "
                                "file per worker)");
  write_npy_workers({"w0.npy"}, 0);
  EXPECT_EQ(open_error(), dir + " has no manifest.json; `ccsim manifest " + dir + "` writes one from its 1 .npy file");
  write_npy_workers({"w0.npy", "w1.npy", "w2.npy"}, 0);
  EXPECT_EQ(open_error(), dir + " has no manifest.json; `ccsim manifest " + dir + "` writes one from its 3 .npy files");
  write_st("w3.safetensors", 3, {"step0"}, {0});
  EXPECT_EQ(open_error(), dir + " has no manifest.json; `ccsim manifest " + dir + "` writes one from per-worker files "
                                "of one kind, and it holds 3 .npy and 1 .safetensors files");
}

}  // namespace
}  // namespace ccsim::traces
