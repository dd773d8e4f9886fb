// `ccsim manifest DIR`, run as a user would: per-worker .npy files written without NumPy, the
// manifest written next to them and read by `ccsim vnmse`; the hint a dump without a manifest
// gives; no overwrite without --force; --print; bad input exits 2 with one line.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
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

constexpr uint64_t kElements = 4096;

class ManifestCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // Three workers' gradients at two steps, as a user's script saves them: rank_R.npy, [2, 4096].
    for (uint32_t r = 0; r < 3; ++r) {
      std::vector<float> v(2 * kElements);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919 + r * 104729) % 2001) / 1000.0f - 1.0f;
      ASSERT_TRUE(traces::write_npy_f32((dump_ / fmt::format("rank_{}.npy", r)).string(), {2, kElements}, v).ok());
    }
  }
  Outcome run(const std::string& args) { return ccsim(args, scratch_); }
  std::string dir() const { return quote(dump_.path().string()); }
  fs::path manifest() const { return dump_ / "manifest.json"; }

  TempDir scratch_{"ccsim-manifest-io"};
  TempDir dump_{"ccsim-manifest-dump"};
};

TEST_F(ManifestCli, WritesAManifestThatVnmseReads) {
  const Outcome m = run("manifest " + dir() + " --model 'tiny MLP'");
  ASSERT_EQ(m.code, 0) << show(m);
  EXPECT_EQ(m.out, fmt::format("wrote {}: 3 workers (rank_0.npy, rank_1.npy, rank_2.npy), 2 steps (0, 1), 4096 F32 "
                               "elements, one layer 'gradient' (--params FILE gives the model's layers)\n",
                               manifest().string()))
      << show(m);
  EXPECT_EQ(m.err, "");
  const json j = json::parse(read_file(manifest()));
  EXPECT_EQ(j["provenance"]["model"], "tiny MLP");
  EXPECT_EQ(j["provenance"]["generator"], "ccsim manifest " + dump_.path().string() + " --model 'tiny MLP'");
  EXPECT_EQ(files_under(dump_.path()), (std::vector<std::string>{"manifest.json", "rank_0.npy", "rank_1.npy",
                                                                  "rank_2.npy"}));

  const Outcome v = run("vnmse --gradients " + dir() + " --algo int8 --csv -");
  EXPECT_EQ(v.code, 0) << show(v);
  EXPECT_TRUE(contains(v.out, "3 workers, 4096 entries per worker")) << show(v);
}

TEST_F(ManifestCli, ADumpWithoutAManifestNamesTheCommand) {
  const Outcome v = run("vnmse --gradients " + dir() + " --algo int8 --csv -");
  EXPECT_EQ(v.code, 2) << show(v);
  EXPECT_EQ(v.err, fmt::format("ccsim: {} has no manifest.json; `ccsim manifest {}` writes one from its 3 .npy files\n",
                               dump_.path().string(), dump_.path().string()))
      << show(v);
}

TEST_F(ManifestCli, RefusesToReplaceAManifestWithoutForce) {
  ASSERT_EQ(run("manifest " + dir()).code, 0);
  const std::string before = read_file(manifest());
  Outcome o = run("manifest " + dir() + " --steps 10,20");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_EQ(o.err, fmt::format("ccsim: {}: exists already; give --force to replace it (or --print to see the new "
                               "one)\n", manifest().string()));
  EXPECT_EQ(read_file(manifest()), before);
  o = run("manifest " + dir() + " --steps 10,20 --force");
  EXPECT_EQ(o.code, 0) << show(o);
  EXPECT_EQ(json::parse(read_file(manifest()))["steps"], json::parse(R"([{"step": 10}, {"step": 20}])"));
  EXPECT_EQ(files_under(dump_.path()).size(), 4u) << "a temporary file was left behind";
}

TEST_F(ManifestCli, PrintWritesTheManifestToStdoutOnly) {
  const Outcome o = run("manifest " + dir() + " --print");
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_EQ(json::parse(o.out)["workers"], json({"rank_0.npy", "rank_1.npy", "rank_2.npy"}));
  EXPECT_TRUE(contains(o.err, "ccsim: 3 workers (")) << show(o);
  EXPECT_FALSE(fs::exists(manifest()));
}

TEST_F(ManifestCli, BadInputExitsTwoWithOneLine) {
  dump_.write("extra.safetensors", "x");
  Outcome o = run("manifest " + dir());
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_EQ(o.err, fmt::format("ccsim: {}: expected per-worker files of one kind, all .npy or all .safetensors, found "
                               "3 .npy files ('rank_0.npy', 'rank_1.npy', 'rank_2.npy') and 1 .safetensors file "
                               "('extra.safetensors')\n", dump_.path().string()));
  fs::remove(dump_ / "extra.safetensors");
  o = run("manifest " + dir() + " --steps 1,x");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "--steps: expected comma-separated step numbers, got 'x'")) << show(o);
  o = run("manifest " + dir() + " --params " + quote((dump_ / "absent.json").string()));
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_TRUE(contains(o.err, "absent.json: no such file")) << show(o);
  o = run("manifest");
  EXPECT_EQ(o.code, 2) << show(o);
  EXPECT_FALSE(fs::exists(manifest()));
}

TEST_F(ManifestCli, HelpShowsTheCommandAndItsOptions) {
  Outcome o = run("--help");
  EXPECT_TRUE(contains(o.out, "\n  manifest DIR ")) << show(o);
  o = run("manifest --help");
  EXPECT_EQ(o.code, 0) << show(o);
  for (const char* word : {"usage: ccsim manifest DIR [--params FILE] [--model TEXT] [--dataset TEXT] "
                           "[--steps N,N,...] [--force] [--print]", "--params", "--force", "--print"})
    EXPECT_TRUE(contains(o.out, word)) << word << "\n" << show(o);
}

}  // namespace
}  // namespace ccsim
