// `ccsim sweep` as a user runs it: the table does not depend on how the sweep was run (at once,
// killed and resumed, in shards, under mpirun), numerics are computed once per content, and every
// run is checked before the first starts.

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "tests/tools/cli_run.hpp"

namespace ccsim::testing {
namespace {

namespace fs = std::filesystem;

// A collective run of a few milliseconds: ring all-reduce, two schemes with numerics.
const char* kBase = R"({
  "name": "sweep-base",
  "seed": 1,
  "cluster": { "topology": "star", "nodes": 8, "nic_bandwidth": "100Gbps", "link_latency": "1us" },
  "collective": { "operation": "allreduce", "algorithm": "ring" },
  "gradients": { "source": "synthetic", "size": "2MB" },
  "compression": [ { "scheme": "bf16" }, { "scheme": "int8", "params": { "block": 256, "rounding": "stochastic" } } ]
})";

// 4 x 3 x 2 x (2 zipped) = 48 runs.
const char* kSweep48 = R"({
  "base": "base.json",
  "axes": { "cluster.nic_bandwidth": ["10Gbps", "25Gbps", "100Gbps", "400Gbps"],
            "cluster.nodes": [2, 4, 8],
            "collective.algorithm": ["ring", "butterfly"] },
  "zip": { "compression.1.params.block": [64, 256], "seed": [1, 2] }
})";

size_t finished_runs(const fs::path& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "runs", ec))
    if (e.path().filename().string().front() != '.') ++n;
  return n;
}

size_t lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// The values of column `name` in a CSV without quoted commas before it.
std::vector<std::string> column(const std::string& csv, const std::string& name) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  std::stringstream hs(line);
  for (std::string f; std::getline(hs, f, ',');) head.push_back(f);
  const size_t at = static_cast<size_t>(std::find(head.begin(), head.end(), name) - head.begin());
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool q = false;
    for (char c : line) {
      if (c == '"') q = !q;
      if (c == ',' && !q) cells.push_back(cell), cell.clear();
      else cell += c;
    }
    cells.push_back(cell);
    out.push_back(at < cells.size() ? cells[at] : "?");
  }
  return out;
}

class SweepCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_.write("base.json", kBase); }
  std::string sweep(const std::string& file, const std::string& out, const std::string& extra = "") {
    return fmt::format("sweep {} --out {}{}", quote((dir_ / file).string()), quote((dir_ / out).string()), extra);
  }
  TempDir dir_{"ccsim-sweep"};
};

TEST_F(SweepCli, FortyEightRunsKilledAndResumedGiveTheSameTable) {
  dir_.write("s.json", kSweep48);
  const Outcome whole = ccsim(sweep("s.json", "whole"), dir_);
  ASSERT_EQ(whole.code, 0) << show(whole);
  const std::string table = read_file(dir_ / "whole" / "sweep.csv");
  EXPECT_EQ(lines(table), 1u + 48 * 2) << "a header and one row per (run, scheme)";
  EXPECT_TRUE(contains(whole.out, "table       ")) << whole.out;

  // Killed (SIGKILL) once at least 5 runs have finished, then rerun.
  const fs::path cut = dir_ / "cut";
  const std::string script = fmt::format(
      "{} {} >/dev/null 2>&1 & p=$!; while [ \"$(ls {} 2>/dev/null | wc -l)\" -lt 5 ]; do sleep 0.005; done; "
      "kill -9 $p; wait $p; exit 0",
      quote(CCSIM_BINARY), sweep("s.json", "cut"), quote((cut / "runs").string()));
  double peak = 0;
  ASSERT_EQ(run_shell(script, peak), 0);
  const size_t done = finished_runs(cut);
  ASSERT_GE(done, 5u);
  ASSERT_LT(done, 48u) << "the sweep finished before it was killed; the runs are too fast for this test";
  EXPECT_FALSE(fs::exists(cut / "sweep.csv"));

  const Outcome resumed = ccsim(sweep("s.json", "cut"), dir_);
  ASSERT_EQ(resumed.code, 0) << show(resumed);
  EXPECT_TRUE(contains(resumed.out, fmt::format("resumed     {} of 48 runs already finished", done))) << resumed.out;
  EXPECT_EQ(read_file(cut / "sweep.csv"), table);
  for (const auto& e : fs::directory_iterator(cut / "runs"))
    EXPECT_NE(e.path().filename().string().front(), '.') << "a killed run's partial folder is left: " << e.path();

  // A third run has nothing left to do and rewrites the same bytes.
  const Outcome again = ccsim(sweep("s.json", "cut"), dir_);
  ASSERT_EQ(again.code, 0) << show(again);
  EXPECT_TRUE(contains(again.out, "resumed     48 of 48 runs already finished")) << again.out;
  EXPECT_EQ(read_file(cut / "sweep.csv"), table);
}

TEST_F(SweepCli, ShardsThenMergeGiveTheSameTable) {
  dir_.write("s.json", kSweep48);
  const Outcome whole = ccsim(sweep("s.json", "whole"), dir_);
  ASSERT_EQ(whole.code, 0) << show(whole);
  const std::string table = read_file(dir_ / "whole" / "sweep.csv");
  for (int i = 1; i <= 2; ++i) ASSERT_EQ(ccsim(sweep("s.json", "sh", fmt::format(" --shard {}/3", i)), dir_).code, 0);
  EXPECT_EQ(finished_runs(dir_ / "sh"), 32u) << "shards take runs k mod 3";
  EXPECT_FALSE(fs::exists(dir_ / "sh" / "sweep.csv"));
  const Outcome early = ccsim("sweep --merge " + quote((dir_ / "sh").string()), dir_);
  EXPECT_EQ(early.code, 1) << show(early);
  EXPECT_TRUE(contains(early.err, "16 of 48 runs have not finished (0002, 0005,")) << early.err;

  const Outcome last = ccsim(sweep("s.json", "sh", " --shard 3/3"), dir_);
  ASSERT_EQ(last.code, 0) << show(last);
  EXPECT_EQ(read_file(dir_ / "sh" / "sweep.csv"), table) << "the last shard to finish writes the table";
  fs::remove(dir_ / "sh" / "sweep.csv");
  const Outcome merged = ccsim("sweep --merge " + quote((dir_ / "sh").string()), dir_);
  ASSERT_EQ(merged.code, 0) << show(merged);
  EXPECT_EQ(read_file(dir_ / "sh" / "sweep.csv"), table);
}

TEST_F(SweepCli, MpiRanksGiveTheSameTable) {
#if !defined(CCSIM_MPIRUN)
  GTEST_SKIP() << "built without MPI (libopenmpi-dev)";
#else
  dir_.write("s.json", kSweep48);
  const Outcome whole = ccsim(sweep("s.json", "whole"), dir_);
  ASSERT_EQ(whole.code, 0) << show(whole);
  // OpenMPI's dlopen'ed components leave allocations at MPI_Finalize that LeakSanitizer reports
  // (their frames are unloaded, so no suppression can name them); leak checking stays on for ccsim's
  // own code in every other sweep test, which runs the same paths without MPI.
  const std::string cmd = fmt::format(
      "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" "
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 {} "
      "--oversubscribe -np 2 {} {} >{} 2>&1",
      quote(CCSIM_MPIRUN), quote(CCSIM_BINARY), sweep("s.json", "mpi"), quote((dir_ / "mpi.log").string()));
  double peak = 0;
  const int status = run_shell(cmd, peak);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_ / "mpi.log");
  EXPECT_TRUE(contains(read_file(dir_ / "mpi.log"), "shard 2/2")) << "two ranks ran: " << read_file(dir_ / "mpi.log");
  EXPECT_EQ(read_file(dir_ / "mpi" / "sweep.csv"), read_file(dir_ / "whole" / "sweep.csv"));
#endif
}

TEST_F(SweepCli, BandwidthSweepComputesTheNumericsOnce) {
  dir_.write("bw.json", R"({ "base": "base.json",
    "axes": { "cluster.nic_bandwidth": ["10Gbps", "25Gbps", "100Gbps", "400Gbps"] } })");
  const Outcome o = ccsim(sweep("bw.json", "bw"), dir_);
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "numerics 2 computed, 6 reused")) << o.out;
  const std::string table = read_file(dir_ / "bw" / "sweep.csv");
  const auto vnmse = column(table, "vnmse"), time = column(table, "time_s");
  ASSERT_EQ(vnmse.size(), 8u);
  for (size_t r = 2; r < 8; ++r) EXPECT_EQ(vnmse[r], vnmse[r % 2]) << "row " << r;
  EXPECT_NE(time[0], time[2]) << "the timing does change with bandwidth";
  // A reused figure is the one a run of its own computes, to the last bit.
  const Outcome alone = ccsim(fmt::format("run {} --set cluster.nic_bandwidth=400Gbps --out {}",
                                          quote((dir_ / "base.json").string()), quote((dir_ / "alone").string())),
                              dir_);
  ASSERT_EQ(alone.code, 0) << show(alone);
  EXPECT_EQ(read_file(dir_ / "bw" / "runs" / "0003" / "results.csv"), read_file(dir_ / "alone" / "results.csv"));
  EXPECT_EQ(read_file(dir_ / "bw" / "runs" / "0003" / "summary.json"), read_file(dir_ / "alone" / "summary.json"));
  // The cache lives in the sweep's folder: a sweep into another folder computes its own.
  const Outcome again = ccsim(sweep("bw.json", "bw2"), dir_);
  EXPECT_TRUE(contains(again.out, "numerics 2 computed, 6 reused")) << again.out;
}

// A training run's calibration vNMSE (docs/tta.md) is numerics too: measured once per content.
TEST_F(SweepCli, TrainingCalibrationVnmseIsMeasuredOnce) {
  const std::string src = CCSIM_SOURCE_DIR;
  dir_.write("train.json", fmt::format(R"({{ "name": "tr", "seed": 1,
    "cluster": {{ "nodes": 4, "nic_bandwidth": "10Gbps" }},
    "workload": {{ "trace": "{}/traces/models/resnet50-aqgb-4blocks.json", "rounds": 3 }},
    "compression": [ {{ "scheme": "fp32" }}, {{ "scheme": "dynamiq" }} ],
    "convergence": {{ "calibration": "{}/traces/convergence/gpt-ring8.json", "baseline": "fp32",
                      "vnmse_elements": 65536 }} }})", src, src));
  dir_.write("t.json", R"({ "base": "train.json", "axes": { "cluster.nic_bandwidth": ["10Gbps", "25Gbps"] } })");
  const Outcome o = ccsim(sweep("t.json", "t"), dir_);
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "numerics 2 computed, 2 reused")) << o.out;
  const Outcome alone = ccsim(fmt::format("run {} --set cluster.nic_bandwidth=25Gbps --out {}",
                                          quote((dir_ / "train.json").string()), quote((dir_ / "alone").string())),
                              dir_);
  ASSERT_EQ(alone.code, 0) << show(alone);
  for (const char* f : {"tta.csv", "summary.json", "results.csv"})
    EXPECT_EQ(read_file(dir_ / "t" / "runs" / "0001" / f), read_file(dir_ / "alone" / f)) << f;
}

// Entries that differ only in their own collective algorithm have different numerics: the cache
// keeps them apart, within a run and across runs.
TEST_F(SweepCli, EntriesOnTheirOwnAlgorithmsKeepTheirOwnNumerics) {
  dir_.write("algos.json", R"({
    "name": "algos", "seed": 3,
    "cluster": { "topology": "star", "nodes": 8, "nic_bandwidth": "100Gbps", "link_latency": "1us" },
    "collective": { "operation": "allreduce", "algorithm": "ring" },
    "gradients": { "source": "synthetic", "size": "1MB" },
    "compression": [ { "scheme": "int8", "label": "on-ring" },
                     { "scheme": "int8", "label": "on-butterfly", "algorithm": "butterfly" } ] })");
  dir_.write("a.json", R"({ "base": "algos.json", "axes": { "cluster.nic_bandwidth": ["25Gbps", "100Gbps"] } })");
  const Outcome o = ccsim(sweep("a.json", "a"), dir_);
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "numerics 2 computed, 2 reused")) << o.out;
  const auto vnmse = column(read_file(dir_ / "a" / "sweep.csv"), "vnmse");
  ASSERT_EQ(vnmse.size(), 4u);
  EXPECT_NE(vnmse[0], vnmse[1]) << "ring and butterfly reduce in different orders";
  const Outcome alone = ccsim(fmt::format("run {} --out {}", quote((dir_ / "algos.json").string()),
                                          quote((dir_ / "alone").string())),
                              dir_);
  ASSERT_EQ(alone.code, 0) << show(alone);
  EXPECT_EQ(read_file(dir_ / "a" / "runs" / "0001" / "results.csv"), read_file(dir_ / "alone" / "results.csv"));
}

TEST_F(SweepCli, EveryRunIsCheckedBeforeTheFirstStarts) {
  dir_.write("bad.json", R"({ "base": "base.json",
    "axes": { "cluster.nodes": [8, 0], "compression.1.params.block": [256, 7] } })");
  const Outcome o = ccsim(sweep("bad.json", "bad"), dir_);
  EXPECT_EQ(o.code, 2) << show(o);
  // Runs 0001 (block 7), 0002 (nodes 0) and 0003 (both) are reported, each with its values.
  EXPECT_TRUE(contains(o.err, "run 0001 (cluster.nodes=8, compression.1.params.block=7)")) << o.err;
  EXPECT_TRUE(contains(o.err, "run 0002 (cluster.nodes=0, compression.1.params.block=256)")) << o.err;
  EXPECT_TRUE(contains(o.err, "run 0003 (cluster.nodes=0, compression.1.params.block=7)")) << o.err;
  EXPECT_FALSE(contains(o.err, "run 0000")) << o.err;
  EXPECT_TRUE(contains(o.err, "/cluster/nodes")) << o.err;
  EXPECT_FALSE(fs::exists(dir_ / "bad")) << "nothing is written when a run would be rejected";
}

TEST_F(SweepCli, BadSweepFilesAreRejectedWithWhereAndWhat) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {R"({ "base": "base.json", "axis": {} })", "/axis: unknown key 'axis' (did you mean 'axes'?)"},
      {R"({ "axes": { "seed": [1] } })", "missing 'base'"},
      {R"({ "base": "base.json", "set": [1] })", "/set: expected an object of PATH: value"},
      {R"({ "base": "nope.json" })", "nope.json: no such scenario file"},
      {R"({ "base": "base.json", "axes": { "seed": [] } })", "/axes/seed: expected a non-empty array of values"},
      {R"({ "base": "base.json", "zip": { "seed": [1, 2], "cluster.nodes": [4] } })",
       "/zip/cluster.nodes: expected 2 values (as seed in this zip group), got 1"},
      {R"({ "base": "base.json", "axes": { "seed": [1] }, "zip": { "seed": [2] } })",
       "/zip/seed: this path is already an axis of the sweep"},
      {R"({ "base": "base.json", "axes": { "cluster.nodez": [4] } })", "nodez"},
      {R"({ "base": "base.json", )", "invalid JSON"},
      {R"({ "base": "base.json", "axes": { "seed": [1,2,3,4,5,6,7,8,9,10], "cluster.nodes": [1,2,3,4,5,6,7,8,9,10],
            "gradients.size": [1,2,3,4,5,6,7,8,9,10], "collective.segments": [1,2,3,4,5,6,7,8,9,10],
            "cluster.link_latency": [1,2,3,4,5,6,7,8,9,10], "compression.0.params.x": [1,2,3,4,5,6,7,8,9,10] } })",
       "the axes make 1000000 runs, more than 100000"},
  };
  for (const Case& c : cases) {
    dir_.write("x.json", c.text);
    const Outcome o = ccsim(sweep("x.json", "x"), dir_);
    EXPECT_EQ(o.code, 2) << c.text << "\n" << show(o);
    EXPECT_TRUE(contains(o.err, c.expect)) << c.text << "\n" << o.err;
    EXPECT_FALSE(fs::exists(dir_ / "x")) << c.text;
  }
  // A folder holding another sweep's runs is not mixed with this one's.
  dir_.write("a.json", R"({ "base": "base.json", "axes": { "seed": [1, 2] } })");
  ASSERT_EQ(ccsim(sweep("a.json", "mix"), dir_).code, 0);
  dir_.write("a.json", R"({ "base": "base.json", "axes": { "seed": [1, 3] } })");
  const Outcome mixed = ccsim(sweep("a.json", "mix"), dir_);
  EXPECT_EQ(mixed.code, 2) << show(mixed);
  EXPECT_TRUE(contains(mixed.err, "holds another sweep")) << mixed.err;
}

TEST_F(SweepCli, InlineBaseAndDryRun) {
  dir_.write("inline.json", fmt::format(R"({{ "name": "inl", "base": {}, "axes": {{ "seed": [1, 2, 3] }} }})", kBase));
  const Outcome o = ccsim(fmt::format("sweep {} --dry-run", quote((dir_ / "inline.json").string())), dir_);
  ASSERT_EQ(o.code, 0) << show(o);
  EXPECT_TRUE(contains(o.out, "run 0002 (seed=3)")) << o.out;
  EXPECT_TRUE(contains(o.out, "3 runs, all valid; outputs would go to out/inl")) << o.out;
}

// "set" gives every run a value without making it an axis (no column).
TEST_F(SweepCli, SetAppliesToEveryRunWithoutAColumn) {
  dir_.write("set.json", R"({ "base": "base.json", "set": { "cluster.nodes": 4, "compression.1.params.block": 64 },
    "axes": { "seed": [1, 2] } })");
  const Outcome o = ccsim(sweep("set.json", "set"), dir_);
  ASSERT_EQ(o.code, 0) << show(o);
  const std::string table = read_file(dir_ / "set" / "sweep.csv");
  EXPECT_EQ(table.substr(0, table.find('\n')).find("cluster.nodes"), std::string::npos) << table;
  for (const std::string& ranks : column(table, "ranks")) EXPECT_EQ(ranks, "4");
  EXPECT_EQ(column(table, "label")[1], "int8(block=64)");
  dir_.write("bad-set.json", R"({ "base": "base.json", "set": { "cluster.nodes": -4 } })");
  const Outcome bad = ccsim(sweep("bad-set.json", "bad-set"), dir_);
  EXPECT_EQ(bad.code, 2) << show(bad);
  EXPECT_TRUE(contains(bad.err, "/cluster/nodes")) << bad.err;
}

}  // namespace
}  // namespace ccsim::testing
