// EQuARX (paper 004) next to ccsim: the shipped scenarios of scenarios/papers/equarx/ run, and
// their simulated times (deterministic, in picoseconds) are pinned, with the paper's comparisons
// they reproduce: Fig. 6 (int8 EQuARX at about 55% of BF16's time above 2 MiB), Fig. 7 (each
// flavour's speedup over BF16 and the order of their MSE), Table I (Gemma 3 prefill speedups from
// the all-reduce times, docs/papers.md's model). The numbers are docs/papers.md's.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tools/app/run_collective.hpp"
#include "tools/app/scenario_io.hpp"

namespace ccsim::app {
namespace {

const std::filesystem::path kDir = std::filesystem::path(CCSIM_SOURCE_DIR) / "scenarios/papers/equarx";

// Simulated time (ps) and vNMSE per label of a shipped scenario, run with `sets` applied.
struct Entry {
  int64_t ps = 0;
  double vnmse = 0;
  uint64_t wire_bytes = 0;
  double serving_s = 0;  ///< the serving pass's latency (scenarios with a serving block)
};
std::map<std::string, Entry> run(const std::string& file, std::vector<std::string> sets) {
  Overrides o;
  o.sets = std::move(sets);
  std::map<std::string, Entry> out;
  const auto loaded = load_scenario((kDir / file).string(), o);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  if (!loaded.ok()) return out;
  const auto report = run_scenario(*loaded);
  EXPECT_TRUE(report.ok()) << report.status().message();
  if (!report.ok()) return out;
  for (const auto& r : report->results)
    out[r.label] = {std::llround(r.timing.time_s * 1e12), r.vnmse, r.timing.wire_bytes, r.serving_latency_s};
  return out;
}

// Timing only: a numerics budget too small for any sample (vNMSE not measured).
const std::vector<std::string> kNoNumerics = {"gradients.numerics_memory=1MiB"};

TEST(EquarxPaper, Figure6EquarxTakesAbout55PercentOfBf16AboveTwoMiB) {
  // BF16 tensor size -> (BF16 ps, EQuARX ps) on the 4x2 torus, full loop, RS + AG int8.
  const std::map<std::string, std::pair<int64_t, int64_t>> expected = {
      {"8MiB", {164'800'640, 95'987'840}},
      {"32MiB", {605'202'560, 329'951'360}},
      {"128MiB", {2'366'810'240, 1'265'805'440}}};
  for (const auto& [size, ps] : expected) {
    SCOPED_TRACE(size);
    auto r = run("fig6-bf16-" + size + ".json", kNoNumerics);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r["bf16"].ps, ps.first);
    EXPECT_EQ(r["equarx-int8"].ps, ps.second);
    const double ratio = static_cast<double>(r["equarx-int8"].ps) / static_cast<double>(r["bf16"].ps);
    EXPECT_NEAR(ratio, 0.55, 0.055);  // within 10% of the paper's ~55%
  }
  // Below 2 MiB the hop latency dominates: the two are close.
  auto small = run("fig6-bf16-128KiB.json", kNoNumerics);
  EXPECT_GT(static_cast<double>(small["equarx-int8"].ps) / static_cast<double>(small["bf16"].ps), 0.9);
}

TEST(EquarxPaper, Figure7SpeedupsAndMseOrder) {
  // 2 MiB per rank of the same N(0, 1) distribution for the MSE (the timing is the whole tensor's).
  auto r = run("fig7-flavours-4x2.json", {"gradients.numerics_memory=128MiB"});
  ASSERT_EQ(r.size(), 8u);
  const int64_t bf16 = r["bf16"].ps;
  EXPECT_EQ(bf16, 605'202'560);
  struct Flavour {
    std::string label;
    int64_t ps;
    double paper_speedup;  // 0: the paper gives no number in its text
  };
  const std::vector<Flavour> flavours = {{"full-loop-rs-ag", 329'951'360, 1.8}, {"full-loop-rs", 467'576'960, 0},
                                         {"full-loop-ag", 467'576'960, 1.3},    {"semi-loop-rs-ag", 366'515'840, 1.6},
                                         {"semi-loop-rs", 523'802'240, 0},      {"semi-loop-ag", 523'802'240, 0},
                                         {"naive-fp8-e5m2", 311'601'280, 1.9}};
  for (const auto& f : flavours) {
    SCOPED_TRACE(f.label);
    EXPECT_EQ(r[f.label].ps, f.ps);
    const double speedup = static_cast<double>(bf16) / static_cast<double>(r[f.label].ps);
    if (f.paper_speedup > 0) {
      EXPECT_NEAR(speedup, f.paper_speedup, 0.15 * f.paper_speedup);
    }
  }
  // MSE of the sum of 8 unit normals = 8 x vNMSE; the paper's order: naive FP8 (0.13) > full loop
  // RS + AG (0.0014) > semi loop RS + AG (0.001) > full loop AG only (0.0003), each within 2x.
  auto mse = [&](const std::string& label) { return 8.0 * r[label].vnmse; };
  EXPECT_GT(mse("naive-fp8-e5m2"), mse("full-loop-rs-ag"));
  EXPECT_GT(mse("full-loop-rs-ag"), mse("semi-loop-rs-ag"));
  EXPECT_GT(mse("semi-loop-rs-ag"), mse("full-loop-ag"));
  EXPECT_GT(mse("full-loop-ag"), mse("bf16"));
  const std::vector<std::pair<std::string, double>> paper_mse = {
      {"naive-fp8-e5m2", 0.13}, {"full-loop-rs-ag", 0.0014}, {"semi-loop-rs-ag", 0.001}, {"full-loop-ag", 0.0003}};
  for (const auto& [label, paper] : paper_mse) {
    EXPECT_GT(mse(label), paper / 2) << label;
    EXPECT_LT(mse(label), paper * 2) << label;
  }
}

TEST(EquarxPaper, AllGatherOnlyFlavourSendsItsReduceScatterInBf16) {
  // Ring_bidir on 8 ranks of E = 2^24 entries: each rank sends 7 steps x 2 halves of E/16 entries
  // per phase; reduce-scatter at 2 bytes per entry (BF16), all-gather int8 plus an fp32 scale per
  // 64 entries. BF16 sends 2 bytes per entry in both phases.
  auto r = run("fig7-flavours-4x2.json", kNoNumerics);
  const uint64_t half = (uint64_t{1} << 24) / 16, steps = 7 * 2, ranks = 8;
  const uint64_t rs_bf16 = steps * half * 2, ag_int8 = steps * (half + 4 * half / 64);
  EXPECT_EQ(r["full-loop-ag"].wire_bytes, ranks * (rs_bf16 + ag_int8));
  EXPECT_EQ(r["full-loop-rs"].wire_bytes, ranks * (ag_int8 + rs_bf16));
  EXPECT_EQ(r["bf16"].wire_bytes, ranks * 2 * rs_bf16);
  EXPECT_EQ(r["full-loop-rs-ag"].wire_bytes, ranks * 2 * ag_int8);
}

// Table I: prefill latency = layers x compute per layer + 2 x layers all-reduces of the (S, hidden)
// activation. Compute from the model's FLOPs (Gemma 3 configs: 5 sliding-window layers of 1024
// tokens per global layer; logits of the last token only) on tp TPU v5e at 197 TFLOP/s and 60% MFU.
struct Gemma {
  std::string name;
  uint64_t hidden, layers, heads, kv_heads, head_dim, intermediate, tp;
};

double prefill_flops(const Gemma& m, uint64_t s) {
  const double attn_params = static_cast<double>(m.hidden * m.head_dim * (2 * m.heads + 2 * m.kv_heads));
  const double mlp_params = 3.0 * static_cast<double>(m.hidden * m.intermediate);
  const double linear = 2.0 * (attn_params + mlp_params) * static_cast<double>(s * m.layers);
  // QK^T and PV: 4 x heads x head_dim FLOPs per (query, key) pair; causal.
  const uint64_t global_layers = m.layers / 6, window = 1024;
  const double pair = 4.0 * static_cast<double>(m.heads * m.head_dim);
  const double global_pairs = static_cast<double>(s * (s + 1) / 2);
  const double local_pairs = static_cast<double>(s <= window ? s * (s + 1) / 2 : window * (window + 1) / 2 +
                                                                                 (s - window) * window);
  return linear + pair * (static_cast<double>(global_layers) * global_pairs +
                          static_cast<double>(m.layers - global_layers) * local_pairs);
}

TEST(EquarxPaper, TableOnePrefillSpeedups) {
  const Gemma g12{"12b", 3840, 48, 16, 8, 256, 15360, 4}, g27{"27b", 5376, 62, 32, 16, 128, 21504, 16};
  struct Row {
    const Gemma* model;
    uint64_t tokens;
    double paper_base_ms, paper_full, paper_semi;
    double full, semi;  // ccsim's speedups
  };
  const std::vector<Row> rows = {
      {&g12, 2048, 116.17, 1.10, 1.06, 1.098, 1.060}, {&g12, 4096, 243.94, 1.10, 1.06, 1.097, 1.059},
      {&g12, 8192, 604.12, 1.09, 1.06, 1.096, 1.058}, {&g27, 2048, 111.44, 1.27, 1.28, 1.272, 1.278},
      {&g27, 4096, 242.57, 1.23, 1.25, 1.278, 1.268}, {&g27, 8192, 550.36, 1.21, 1.22, 1.281, 1.262}};
  constexpr double kFlops = 197e12 * 0.6;
  for (const Row& row : rows) {
    const Gemma& m = *row.model;
    SCOPED_TRACE(m.name + " prefill " + std::to_string(row.tokens));
    auto r = run("table1-gemma3-" + m.name + "-prefill" + std::to_string(row.tokens) + ".json", kNoNumerics);
    ASSERT_EQ(r.size(), 3u);
    const double compute = prefill_flops(m, row.tokens) / static_cast<double>(m.tp) / kFlops;
    auto latency = [&](const std::string& label) {
      return compute + 2.0 * static_cast<double>(m.layers) * static_cast<double>(r[label].ps) * 1e-12;
    };
    // ccsim's serving pass (the scenario's layer_compute, to the picosecond) against this formula.
    for (const char* label : {"bf16", "equarx-full-loop", "equarx-semi-loop"})
      EXPECT_NEAR(r[label].serving_s, latency(label), 1e-6 * latency(label)) << label;
    const double base = r["bf16"].serving_s;
    const double full = base / r["equarx-full-loop"].serving_s, semi = base / r["equarx-semi-loop"].serving_s;
    EXPECT_NEAR(full, row.full, 5e-4);
    EXPECT_NEAR(semi, row.semi, 5e-4);
    // Within 10% of the paper's speedups; the BF16 latency within 25% (at 8192 tokens the paper's
    // compute grows faster than the FLOPs: ccsim's constant MFU is 20% short there).
    EXPECT_NEAR(full, row.paper_full, 0.10 * row.paper_full);
    EXPECT_NEAR(semi, row.paper_semi, 0.10 * row.paper_semi);
    EXPECT_NEAR(base * 1e3, row.paper_base_ms, 0.25 * row.paper_base_ms);
  }
  // The all-reduces themselves, pinned (ps) at 2048 tokens: BF16, full loop, semi loop.
  auto r12 = run("table1-gemma3-12b-prefill2048.json", kNoNumerics);
  EXPECT_EQ(r12["bf16"].ps, 241'929'600);
  EXPECT_EQ(r12["equarx-full-loop"].ps, 131'337'600);
  EXPECT_EQ(r12["equarx-semi-loop"].ps, 171'116'800);
  auto r27 = run("table1-gemma3-27b-prefill2048.json", kNoNumerics);
  EXPECT_EQ(r27["bf16"].ps, 450'876'800);
  EXPECT_EQ(r27["equarx-full-loop"].ps, 257'340'800);
  EXPECT_EQ(r27["equarx-semi-loop"].ps, 253'963'520);
}

}  // namespace
}  // namespace ccsim::app
