// Gradient dump directories: manifest validation against the worker files (each error names the
// manifest and the JSON Pointer), reading whole workers and single layers in every storage type,
// and the properties of the shipped real dump traces/data/gpt-bpe.

#include "traces/gradient_dump.hpp"

#include "traces/npy.hpp"
#include "traces/safetensors.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define EXPECT_CONTAINS(haystack, needle)                                                                              \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (haystack)

// A small dump: 3 workers, 20 elements in layers a [2,3] | b [12] | c [2], steps 0 and 10.
// Every value is a multiple of 1/4 below 64, so F16 and BF16 store it exactly.
class GradientDumpTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kWorkers = 3;
  static constexpr uint64_t kElements = 20;

  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("ccsim_gd_{}_{}", info->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    manifest_ = {
        {"format", "ccsim-gradient-dump"},
        {"version", 1},
        {"dtype", "BF16"},
        {"elements", kElements},
        {"workers", {"worker0.safetensors", "worker1.safetensors", "worker2.safetensors"}},
        {"steps", {{{"step", 0}, {"tensor", "step0"}, {"loss", 4.5}}, {{"step", 10}, {"tensor", "step10"}}}},
        {"layers",
         {{{"name", "a"}, {"shape", {2, 3}}, {"offset", 0}, {"count", 6}},
          {{"name", "b"}, {"shape", {12}}, {"offset", 6}, {"count", 12}},
          {{"name", "c"}, {"shape", {2}}, {"offset", 18}, {"count", 2}}}},
        {"provenance",
         {{"model", "unit-test model"}, {"dataset", "none"}, {"generator", "gradient_dump_test"}, {"extra", 42}}},
    };
  }
  void TearDown() override { fs::remove_all(dir_); }

  static float value(uint32_t w, size_t step, uint64_t i) {
    return 0.25f * static_cast<float>((i + 1) * (w + 1)) * (step == 0 ? 1.0f : -0.5f);
  }
  static std::vector<float> gradient(uint32_t w, size_t step, uint64_t n = kElements) {
    std::vector<float> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = value(w, step, i);
    return v;
  }

  // Writes worker w's safetensors file with tensors step0 and step10 (`n` elements each).
  void write_worker(uint32_t w, TensorDtype dtype, uint64_t n = kElements) const {
    const auto g0 = gradient(w, 0, n), g1 = gradient(w, 1, n);
    const std::vector<SafetensorsTensorData> t = {{"step0", dtype, {n}, g0}, {"step10", dtype, {n}, g1}};
    ASSERT_TRUE(write_safetensors(dir_ / fmt::format("worker{}.safetensors", w), t).ok());
  }
  void write_all(TensorDtype dtype) {
    manifest_["dtype"] = std::string(dtype_name(dtype));
    for (uint32_t w = 0; w < kWorkers; ++w) write_worker(w, dtype);
  }
  void write_manifest() const { std::ofstream(dir_ / "manifest.json") << manifest_.dump(2); }

  // Opens the dump, which must fail with `code`; returns the message.
  std::string open_error(StatusCode code = StatusCode::kInvalidArgument) const {
    write_manifest();
    auto r = GradientDump::open(dir_);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.status().code(), code) << r.status().message();
    return r.status().message();
  }
  std::string manifest_path() const { return (dir_ / "manifest.json").string(); }

  fs::path dir_;
  json manifest_;
};

TEST_F(GradientDumpTest, ReadsEveryDtypeExactly) {
  for (TensorDtype dtype : {TensorDtype::kF32, TensorDtype::kF16, TensorDtype::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    write_all(dtype);
    write_manifest();
    auto d = GradientDump::open(dir_);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->workers(), kWorkers);
    EXPECT_EQ(d->elements(), kElements);
    EXPECT_EQ(d->dtype(), dtype);
    EXPECT_EQ(d->file_format(), GradientFileFormat::kSafetensors);
    ASSERT_EQ(d->steps(), 2u);
    EXPECT_EQ(d->step_info()[1].step, 10u);
    EXPECT_EQ(d->step_info()[1].tensor, "step10");
    EXPECT_EQ(d->step_info()[0].loss, 4.5);
    EXPECT_FALSE(d->step_info()[1].loss.has_value());
    ASSERT_EQ(d->layers().size(), 3u);
    EXPECT_EQ(d->layers()[1].name, "b");
    EXPECT_EQ(d->layers()[0].shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(d->worker_file(2), dir_ / "worker2.safetensors");
    for (uint32_t w = 0; w < kWorkers; ++w) {
      for (size_t s = 0; s < 2; ++s) {
        auto g = d->worker(w, s);
        ASSERT_TRUE(g.ok()) << g.status().message();
        EXPECT_EQ(g->is_mapped(), dtype == TensorDtype::kF32);
        EXPECT_EQ(std::vector<float>(g->values().begin(), g->values().end()), gradient(w, s));
        for (size_t l = 0; l < 3; ++l) {
          auto layer = d->layer(w, s, l);
          ASSERT_TRUE(layer.ok());
          const auto& info = d->layers()[l];
          EXPECT_EQ(*layer, std::vector<float>(g->values().begin() + static_cast<ptrdiff_t>(info.offset),
                                               g->values().begin() + static_cast<ptrdiff_t>(info.offset + info.count)));
        }
      }
    }
  }
}

TEST_F(GradientDumpTest, GradientVectorsOutliveTheDump) {
  write_all(TensorDtype::kF32);
  write_manifest();
  GradientVector g;
  {
    auto d = GradientDump::open(dir_);
    ASSERT_TRUE(d.ok());
    g = std::move(d->worker(1, 1)).value();
  }
  EXPECT_TRUE(g.is_mapped());
  EXPECT_EQ(g[19], value(1, 1, 19));
}

TEST_F(GradientDumpTest, ReadsNpyWorkers) {
  manifest_["dtype"] = "F32";
  manifest_["workers"] = {"w0.npy", "w1.npy", "w2.npy"};
  manifest_["steps"] = {{{"step", 0}}, {{"step", 10}}};
  for (uint32_t w = 0; w < kWorkers; ++w) {
    auto both = gradient(w, 0);
    const auto second = gradient(w, 1);
    both.insert(both.end(), second.begin(), second.end());
    ASSERT_TRUE(write_npy_f32((dir_ / fmt::format("w{}.npy", w)).string(), {2, kElements}, both).ok());
  }
  write_manifest();
  auto d = GradientDump::open(dir_);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->file_format(), GradientFileFormat::kNpy);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    for (size_t s = 0; s < 2; ++s) {
      auto g = d->worker(w, s);
      ASSERT_TRUE(g.ok());
      EXPECT_TRUE(g->is_mapped());
      EXPECT_EQ(std::vector<float>(g->values().begin(), g->values().end()), gradient(w, s));
    }
  }
  EXPECT_EQ(*d->layer(2, 1, 2), (std::vector<float>{value(2, 1, 18), value(2, 1, 19)}));

  // A tensor name has no meaning for .npy files; a wrong element count is reported per worker.
  manifest_["steps"][1]["tensor"] = "step10";
  EXPECT_CONTAINS(open_error(), "/steps/1/tensor: expected no tensor name for .npy worker files");
  manifest_["steps"] = {{{"step", 0}}};
  EXPECT_CONTAINS(open_error(), "/workers/0: " + (dir_ / "w0.npy").string() +
                                    ": expected 20 values (/elements = 20 × 1 step(s)), found 40");
}

TEST_F(GradientDumpTest, NonFiniteValuesAreInputErrorsNamingWhere) {
  // Worker 1's step 10 holds a NaN at element 9 (layer b, entry 3) and +inf at 19 (layer c); the
  // other vectors are finite. In F32 (mapped) and BF16 (widened) alike, reading that vector or
  // one of those layers is an input error naming the file, worker, step, first index, layer, count.
  for (const TensorDtype dtype : {TensorDtype::kF32, TensorDtype::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    write_all(dtype);
    auto g1 = gradient(1, 1);
    g1[9] = std::numeric_limits<float>::quiet_NaN();
    g1[19] = std::numeric_limits<float>::infinity();
    const auto g0 = gradient(1, 0);
    const fs::path file = dir_ / "worker1.safetensors";
    const std::vector<SafetensorsTensorData> t = {{"step0", dtype, {kElements}, g0}, {"step10", dtype, {kElements}, g1}};
    ASSERT_TRUE(write_safetensors(file, t).ok());
    write_manifest();
    auto d = GradientDump::open(dir_);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_TRUE(d->worker(1, 0).ok());
    EXPECT_TRUE(d->worker(0, 1).ok());
    auto bad = d->worker(1, 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(bad.status().is_input_error());
    EXPECT_CONTAINS(bad.status().message(), file.string() + ": worker 1, step 1 (iteration 10): 2 non-finite value(s) "
                                            "(NaN or inf), the first at index 9 (layer 'b', entry 3): nan");
    EXPECT_TRUE(d->layer(1, 1, 0).ok());  // layer a is finite
    auto c = d->layer(1, 1, 2);
    ASSERT_FALSE(c.ok());
    EXPECT_CONTAINS(c.status().message(), "1 non-finite value(s) (NaN or inf), the first at index 19 (layer 'c', "
                                          "entry 1): inf");
  }
}

TEST_F(GradientDumpTest, OneStepDumpNeedsNoStepsList) {
  manifest_.erase("steps");
  for (uint32_t w = 0; w < kWorkers; ++w) {
    const auto g = gradient(w, 0);
    ASSERT_TRUE(write_safetensors(dir_ / fmt::format("worker{}.safetensors", w),
                                  std::vector<SafetensorsTensorData>{{"grad", TensorDtype::kBF16, {4, 5}, g}})
                    .ok());
  }
  write_manifest();
  auto d = GradientDump::open(dir_);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->steps(), 1u);
  EXPECT_EQ((*d->worker(2)).values()[5], value(2, 0, 5));
  // The manifest named directly opens the same dump.
  auto m = GradientDump::open(dir_ / "manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->dir(), dir_);
  EXPECT_EQ((*m->worker(2)).values()[5], value(2, 0, 5));
}

TEST_F(GradientDumpTest, ExposesProvenanceAndFindsLayers) {
  write_all(TensorDtype::kBF16);
  write_manifest();
  auto d = GradientDump::open(dir_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->provenance().model, "unit-test model");
  EXPECT_EQ(d->provenance().dataset, "none");
  EXPECT_EQ(d->provenance().generator, "gradient_dump_test");
  EXPECT_EQ(json::parse(d->provenance().json)["extra"], 42);
  EXPECT_EQ(*d->find_layer("c"), 2u);
  const auto missing = d->find_layer("bb");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(missing.status().message(), "no layer 'bb' (did you mean 'b'?)");
}

TEST_F(GradientDumpTest, RejectsIndicesOutOfRange) {
  write_all(TensorDtype::kBF16);
  write_manifest();
  auto d = GradientDump::open(dir_);
  ASSERT_TRUE(d.ok());
  EXPECT_CONTAINS(d->worker(3, 0).status().message(), "expected a worker index < 3, found 3");
  EXPECT_CONTAINS(d->worker(0, 2).status().message(), "expected a step index < 2, found 2");
  EXPECT_CONTAINS(d->layer(0, 0, 3).status().message(), "expected a layer index < 3, found 3");
  std::vector<float> wrong(5);
  EXPECT_CONTAINS(d->read_layer(0, 0, 0, wrong).message(), "layer 'a': expected an output of 6 elements, found 5");
}

// ---- manifest validation ---------------------------------------------------------------------

TEST_F(GradientDumpTest, MissingManifestIsNotFound) {
  auto r = GradientDump::open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(r.status().message(), manifest_path() + ": no such file");
}

TEST_F(GradientDumpTest, MissingWorkerFileIsNotFound) {
  write_all(TensorDtype::kBF16);
  fs::remove(dir_ / "worker1.safetensors");
  const std::string m = open_error(StatusCode::kNotFound);
  EXPECT_CONTAINS(m, manifest_path() + ": /workers/1: " + (dir_ / "worker1.safetensors").string() + ": no such file");
}

TEST_F(GradientDumpTest, GapBetweenLayers) {
  write_all(TensorDtype::kBF16);
  manifest_["layers"][1] = {{"name", "b"}, {"shape", {10}}, {"offset", 8}, {"count", 10}};
  const std::string m = open_error();
  EXPECT_EQ(m,
            manifest_path() + ": /layers/1/offset: expected 6 (the end of layer 0 'a'), found 8 (a gap of 2 elements)");
}

TEST_F(GradientDumpTest, OverlappingLayers) {
  write_all(TensorDtype::kBF16);
  manifest_["layers"][1] = {{"name", "b"}, {"shape", {14}}, {"offset", 4}, {"count", 14}};
  EXPECT_EQ(open_error(),
            manifest_path() +
                ": /layers/1/offset: expected 6 (the end of layer 0 'a'), found 4 (an overlap of 2 elements)");
  manifest_["layers"][0]["offset"] = 1;
  EXPECT_CONTAINS(open_error(), "/layers/0/offset: expected 0 (the start of the vector), found 1");
}

TEST_F(GradientDumpTest, CountThatDisagreesWithShape) {
  write_all(TensorDtype::kBF16);
  manifest_["layers"][1]["count"] = 11;
  // One error: the next layer's offset is not judged against a count already known to be wrong.
  EXPECT_EQ(open_error(), manifest_path() + ": /layers/1/count: expected 12 (the product of shape [12]), found 11");
}

TEST_F(GradientDumpTest, LayersThatStopShortOfTheVector) {
  write_all(TensorDtype::kBF16);
  manifest_["layers"].erase(2);
  EXPECT_EQ(
      open_error(),
      manifest_path() +
          ": /layers/1: expected the last layer to end at /elements = 20, found it ends at 18 (a gap of 2 elements)");
}

TEST_F(GradientDumpTest, WorkerWithTheWrongNumberOfElements) {
  write_all(TensorDtype::kBF16);
  write_worker(2, TensorDtype::kBF16, 19);
  const std::string m = open_error();
  EXPECT_CONTAINS(m, manifest_path() + ": /workers/2: " + (dir_ / "worker2.safetensors").string() +
                         ": tensor 'step0': expected 20 elements (/elements), found 19 (shape [19])");
}

TEST_F(GradientDumpTest, WorkerWithTheWrongDtypeOrMissingStep) {
  write_all(TensorDtype::kBF16);
  write_worker(0, TensorDtype::kF16);
  manifest_["steps"][1]["tensor"] = "step11";
  const std::string m = open_error();
  EXPECT_CONTAINS(m, "/workers/0: " + (dir_ / "worker0.safetensors").string() +
                         ": tensor 'step0': expected dtype BF16 (/dtype), found F16");
  EXPECT_CONTAINS(m, "/workers/1: " + (dir_ / "worker1.safetensors").string() +
                         ": expected a tensor 'step11' (/steps/1/tensor), found only 'step0', 'step10'");
}

TEST_F(GradientDumpTest, ReportsEveryManifestErrorAtOnce) {
  write_all(TensorDtype::kBF16);
  manifest_["format"] = "something-else";
  manifest_["version"] = 2;
  manifest_["dtype"] = "F64";
  manifest_["layer"] = manifest_["layers"];
  manifest_["workers"][1] = "worker1.bin";
  manifest_["steps"][1]["step"] = 0;
  manifest_["layers"][2]["name"] = "a";
  manifest_["provenance"].erase("dataset");
  const std::string m = open_error();
  EXPECT_CONTAINS(m, "/layer: unknown key 'layer' (did you mean 'layers'?)");
  EXPECT_CONTAINS(m, "/format: expected \"ccsim-gradient-dump\", found string \"something-else\"");
  EXPECT_CONTAINS(m, "/version: expected 1 (the only version this build reads), found 2");
  EXPECT_CONTAINS(m, "/dtype: unsupported dtype 'F64'");
  EXPECT_CONTAINS(m, "/workers/1: expected a .safetensors or .npy file, found 'worker1.bin'");
  EXPECT_CONTAINS(m, "/steps/1/step: expected steps in increasing order, > 0 (/steps/0/step), found 0");
  EXPECT_CONTAINS(m, "/layers/2/name: expected a unique layer name, found 'a' again");
  EXPECT_CONTAINS(m, "/provenance: missing required key 'dataset'");
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 7) << m;  // eight errors, one per line
  for (size_t start = 0; start < m.size();) {               // each line names the manifest
    EXPECT_EQ(m.compare(start, manifest_path().size(), manifest_path()), 0) << m.substr(start);
    const size_t nl = m.find('\n', start);
    start = nl == std::string::npos ? m.size() : nl + 1;
  }
}

TEST_F(GradientDumpTest, RejectsMalformedManifests) {
  write_all(TensorDtype::kBF16);
  std::ofstream(dir_ / "manifest.json") << "{\"format\": ";
  auto r = GradientDump::open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), manifest_path() + ": invalid JSON");

  manifest_["workers"] = json::array();
  manifest_["elements"] = 0;
  manifest_["layers"][0]["shape"] = {2, -3};
  manifest_["steps"][0].erase("tensor");
  const std::string m = open_error();
  EXPECT_CONTAINS(m, "/workers: expected a non-empty array of file names, found array []");
  EXPECT_CONTAINS(m, "/elements: expected at least 1 element, found 0");
  EXPECT_CONTAINS(m, "/layers/0/shape/1: expected a non-negative integer, found -3");
  EXPECT_CONTAINS(m, "/steps/0: missing required key 'tensor'");
}

// ---- the shipped dump ------------------------------------------------------------------------

const fs::path kShippedDump = fs::path(CCSIM_SOURCE_DIR) / "traces" / "data" / "gpt-bpe";

class ShippedDump : public ::testing::Test {
 protected:
  // Opened once, in the first test's SetUp: a failure there fails the test (a failure in
  // SetUpTestSuite would only mark the suite's tests as skipped).
  void SetUp() override {
    if (dump_ != nullptr) return;
    auto d = GradientDump::open(kShippedDump);
    ASSERT_TRUE(d.ok()) << d.status().message();
    dump_ = new GradientDump(std::move(d).value());
  }
  static void TearDownTestSuite() {
    delete dump_;
    dump_ = nullptr;
  }

  static std::vector<float> grad(uint32_t w, size_t s) {
    auto g = dump_->worker(w, s);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return {g->values().begin(), g->values().end()};
  }
  static double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
  }
  static double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    return dot(a, b) / std::sqrt(dot(a, a) * dot(b, b));
  }

  static GradientDump* dump_;
};

GradientDump* ShippedDump::dump_ = nullptr;

TEST_F(ShippedDump, HasEightWorkersAndSeveralStepsWithFallingLoss) {
  ASSERT_NE(dump_, nullptr);
  EXPECT_EQ(dump_->workers(), 8u);
  EXPECT_EQ(dump_->dtype(), TensorDtype::kBF16);
  ASSERT_GE(dump_->steps(), 2u);
  EXPECT_EQ(dump_->step_info()[0].step, 50u);
  for (size_t s = 0; s < dump_->steps(); ++s) {
    ASSERT_TRUE(dump_->step_info()[s].loss.has_value()) << s;
    if (s > 0) {
      EXPECT_LT(*dump_->step_info()[s].loss, *dump_->step_info()[s - 1].loss) << "training loss must fall";
    }
  }
  EXPECT_GT(dump_->elements(), 50'000u);
  EXPECT_FALSE(dump_->provenance().model.empty());
  EXPECT_CONTAINS(dump_->provenance().dataset, "license");
}

TEST_F(ShippedDump, LayersTileTheVector) {
  ASSERT_NE(dump_, nullptr);
  uint64_t cursor = 0;
  std::set<std::string> names;
  for (const auto& l : dump_->layers()) {
    EXPECT_EQ(l.offset, cursor) << l.name;
    EXPECT_EQ(l.count, std::accumulate(l.shape.begin(), l.shape.end(), uint64_t{1}, std::multiplies<>())) << l.name;
    EXPECT_TRUE(names.insert(l.name).second) << l.name;
    cursor += l.count;
  }
  EXPECT_EQ(cursor, dump_->elements());
  EXPECT_GE(dump_->layers().size(), 10u);
}

TEST_F(ShippedDump, GradientsAreFiniteAndNonZero) {
  ASSERT_NE(dump_, nullptr);
  for (size_t s = 0; s < dump_->steps(); ++s) {
    for (uint32_t w = 0; w < dump_->workers(); ++w) {
      const auto g = grad(w, s);
      ASSERT_EQ(g.size(), dump_->elements());
      EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float x) { return std::isfinite(x); }))
          << "worker " << w << " step " << s;
      EXPECT_GT(dot(g, g), 0.0) << "worker " << w << " step " << s;
    }
  }
}

// One 64-token sequence per worker and step (the DynamiQ paper's batch size of 1): the workers'
// gradients are mostly micro-batch noise, so they differ and are far from copies of each other,
// whatever their sign of correlation.
TEST_F(ShippedDump, WorkersDiffer) {
  ASSERT_NE(dump_, nullptr);
  for (size_t s = 0; s < dump_->steps(); ++s) {
    std::vector<std::vector<float>> g;
    for (uint32_t w = 0; w < dump_->workers(); ++w) g.push_back(grad(w, s));
    for (size_t a = 0; a < g.size(); ++a) {
      for (size_t b = a + 1; b < g.size(); ++b) {
        EXPECT_NE(g[a], g[b]) << "workers " << a << " and " << b << " at step index " << s;
        EXPECT_LT(std::abs(cosine(g[a], g[b])), 0.9) << "workers " << a << " and " << b << " are near copies";
      }
    }
  }
}

// The structure that decides DynamiQ's bit allocation (docs/compression.md): a sequence holds at most
// 65 distinct tokens (64 inputs and the last target), so at most 65 rows of the 4096-row tied token
// embedding get an input or target gradient; every other row gets only the softmax's small share.
TEST_F(ShippedDump, TokenEmbeddingGradientLivesInTheRowsOfTheBatchTokens) {
  ASSERT_NE(dump_, nullptr);
  const auto& emb = dump_->layers().front();
  ASSERT_EQ(emb.name, "tok_emb.weight");
  ASSERT_EQ(emb.shape, (std::vector<uint64_t>{4096, 64}));
  for (size_t s = 0; s < dump_->steps(); ++s) {
    for (uint32_t w = 0; w < dump_->workers(); ++w) {
      auto v = dump_->layer(w, s, 0);
      ASSERT_TRUE(v.ok());
      std::vector<double> rows(4096, 0.0);
      for (size_t i = 0; i < v->size(); ++i) rows[i / 64] += static_cast<double>((*v)[i]) * (*v)[i];
      std::sort(rows.begin(), rows.end(), std::greater<>());
      const double total = std::accumulate(rows.begin(), rows.end(), 0.0);
      const double top = std::accumulate(rows.begin(), rows.begin() + 65, 0.0);
      SCOPED_TRACE(fmt::format("worker {} step {}", w, dump_->step_info()[s].step));
      EXPECT_GT(top / total, 0.95);
      EXPECT_LT(rows[2048] / rows[0], 1e-5);  // the median row
    }
  }
}

TEST_F(ShippedDump, LayerRmsSpansMoreThanAnOrderOfMagnitude) {
  ASSERT_NE(dump_, nullptr);
  for (size_t s = 0; s < dump_->steps(); ++s) {
    double lo = INFINITY, hi = 0;
    for (size_t l = 0; l < dump_->layers().size(); ++l) {
      auto v = dump_->layer(0, s, l);
      ASSERT_TRUE(v.ok());
      const double rms = std::sqrt(dot(*v, *v) / static_cast<double>(v->size()));
      lo = std::min(lo, rms);
      hi = std::max(hi, rms);
    }
    EXPECT_GT(hi / lo, 10.0) << fmt::format("step {}: layer RMS from {:.3g} to {:.3g}", dump_->step_info()[s].step, lo,
                                            hi);
  }
}

TEST_F(ShippedDump, ReadingOneLayerMatchesTheWholeVector) {
  ASSERT_NE(dump_, nullptr);
  const size_t s = dump_->steps() - 1;
  const auto g = grad(7, s);
  for (size_t l = 0; l < dump_->layers().size(); ++l) {
    const auto& info = dump_->layers()[l];
    auto v = dump_->layer(7, s, l);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(std::equal(v->begin(), v->end(), g.begin() + static_cast<ptrdiff_t>(info.offset))) << info.name;
  }
}

}  // namespace
}  // namespace ccsim::traces
