// Google Benchmark suite for the CPU reference compression kernels (built with
// -DCCSIM_BUILD_BENCHMARKS=ON; not a test). For every registered scheme at its default parameters
// (and a few named variants), on one worker thread, over a 2^22-entry chunk of gradient-like data,
// the collective of 2 ranks (dynamiq_8ranks: 8, where DynamiQ's correlated rounding walks longer):
//   BM_Kernel/<scheme>/encode                  leaf: x -> message
//   BM_Kernel/<scheme>/decode                  message -> x
//   BM_Kernel/<scheme>/decode_accumulate       acc += decode(message)
//   BM_Kernel/<scheme>/decode_accumulate_encode  the fused intermediate hop
//   BM_Round/<scheme>                          the round phases on 2 ranks: plan_local, plan_commit,
//                                              prepare and finish (schemes with a metadata phase;
//                                              for powersgd/edgc this is the whole low-rank work,
//                                              their chunk kernels only move the factors)
// bytes/s counts fp32 input (4 bytes per entry), so the reported rate is GB/s of fp32 per core.
// A baseline in the same process for ratios: every case times a copy of the fp32 chunk right before
// and right after itself and reports `x_memcpy`, its rate as a fraction of the two copies' mean
// (`memcpy_GBps`); BM_Memcpy, run first, shows the copy alone.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"

namespace ccsim {
namespace {

constexpr uint64_t kEntries = uint64_t{1} << 22;

// Layered scales over four decades, heavy-tailed entries (as the synthetic gradients).
const std::vector<float>& data(uint32_t rank) {
  static std::vector<std::vector<float>> cache;
  while (cache.size() <= rank) {
    std::mt19937 gen(static_cast<uint32_t>(cache.size()) + 1);
    std::student_t_distribution<float> t(4.0f);
    std::uniform_real_distribution<float> decade(-4.0f, 0.0f);
    std::vector<float> x(kEntries);
    float scale = 1.0f;
    for (uint64_t i = 0; i < kEntries; ++i) {
      if (i % 4096 == 0) scale = std::pow(10.0f, decade(gen));
      x[i] = scale * t(gen);
    }
    cache.push_back(std::move(x));
  }
  return cache[rank];
}

// The tensor seen as one 2048 x 2048 matrix (what low-rank schemes compress).
const algo::LayerShape kLayer{0, kEntries, 2048, kEntries / 2048};

// A compressor ready to code chunks of the tensor: created, laid out as one square-ish matrix,
// and planned on two ranks.
std::unique_ptr<algo::Compressor> ready(const std::string& name, const nlohmann::json& params) {
  auto made = algo::CompressorRegistry::global().create(name, params);
  if (!made.ok()) return nullptr;
  std::unique_ptr<algo::Compressor> c = std::move(*made);
  c->set_layout({&kLayer, 1});
  const std::vector<std::span<const float>> ins = {data(0), data(1)};
  if (!algo::plan_round(*c, ins, {1, 0}).ok()) return nullptr;
  return c;
}

// The rate, in bytes/s, of copying the fp32 chunk (data(0)) into `out`, timed over at least 20 ms.
double copy_rate(std::vector<float>& out) {
  const std::vector<float>& in = data(0);
  out.resize(kEntries);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t copies = 0;
  double seconds = 0;
  while (seconds < 0.02) {
    std::memcpy(out.data(), in.data(), 4 * kEntries);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    ++copies;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return static_cast<double>(copies) * 4.0 * static_cast<double>(kEntries) / seconds;
}

// The in-run baseline of one case: the copy of the same chunk timed right before and right after
// it, so that the ratio follows what the machine (shared, its speed drifting within minutes) did
// around the case rather than at the start of the run.
class CopyBaseline {
 public:
  CopyBaseline() : before_(copy_rate(scratch_)) {}
  // Sets x_memcpy, the case's rate (`bytes` processed in all) over the mean of the two copies'
  // rates, and memcpy_GBps, that mean.
  void set(benchmark::State& state, double bytes) {
    const double mean = 0.5 * (before_ + copy_rate(scratch_));
    state.counters["x_memcpy"] = benchmark::Counter(bytes / mean, benchmark::Counter::kIsRate);
    state.counters["memcpy_GBps"] = mean * 1e-9;
  }

 private:
  std::vector<float> scratch_;
  double before_;
};

enum class Op { kEncode, kDecode, kDecodeAccumulate, kFused };

void BM_Kernel(benchmark::State& state, std::string name, nlohmann::json params, Op op, uint32_t ranks) {
  kern::set_worker_threads(1);
  auto c = ready(name, params);
  if (!c) {
    state.SkipWithError("cannot create or plan the scheme");
    return;
  }
  const uint64_t n = c->reduced_elements(kEntries);
  std::vector<float> x(n), acc(n);
  c->prepare(data(0), x, 0, 2, kern::RngKey{1, 0, 0, 0});
  const algo::TensorSpec spec{0, n};
  const algo::HopContext leaf{1, ranks}, full{2, ranks};
  std::vector<uint8_t> msg(c->wire_bytes(spec, leaf)), out(c->wire_bytes(spec, full));
  c->encode(x, spec, leaf, kern::RngKey{1, 0, 0, 1}, msg);
  uint32_t stream = 2;
  CopyBaseline baseline;
  for (auto _ : state) {
    const kern::RngKey key{1, 0, 0, stream++};
    switch (op) {
      case Op::kEncode: c->encode(x, spec, leaf, key, msg); break;
      case Op::kDecode: c->decode(msg, spec, leaf, acc); break;
      case Op::kDecodeAccumulate: c->decode_accumulate(msg, spec, leaf, acc); break;
      case Op::kFused:
        state.PauseTiming();
        std::memcpy(acc.data(), x.data(), 4 * n);
        state.ResumeTiming();
        c->decode_accumulate_encode(msg, spec, leaf, acc, full, key, out);
        break;
    }
    benchmark::DoNotOptimize(msg.data());
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(4 * n));
  baseline.set(state, static_cast<double>(state.iterations()) * 4.0 * static_cast<double>(n));
  state.counters["wire_bits_per_entry"] = 8.0 * static_cast<double>(msg.size()) / static_cast<double>(n);
}

void BM_Round(benchmark::State& state, std::string name, nlohmann::json params) {
  kern::set_worker_threads(1);
  auto c = ready(name, params);
  if (!c) {
    state.SkipWithError("cannot create or plan the scheme");
    return;
  }
  std::vector<float> reduced, out(kEntries);
  uint32_t round = 1;
  CopyBaseline baseline;
  for (auto _ : state) {
    const std::vector<std::span<const float>> ins = {data(0), data(1)};
    auto plan = algo::plan_round(*c, ins, {1, round++});
    if (!plan.ok()) state.SkipWithError(plan.status().message().c_str());
    reduced.resize(c->reduced_elements(kEntries));  // a plan may change it (OmniReduce's union)
    c->prepare(data(0), reduced, 0, 2, kern::RngKey{1, round, 0, 0});
    c->finish(reduced, out, 0, 2);
    benchmark::DoNotOptimize(out.data());
  }
  // Two ranks' plan_local, one prepare and one finish per iteration, per entry of one rank's tensor.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(4 * kEntries));
  baseline.set(state, static_cast<double>(state.iterations()) * 4.0 * static_cast<double>(kEntries));
}

void BM_Memcpy(benchmark::State& state) {
  const std::vector<float>& in = data(0);  // generated outside the timed loop
  std::vector<float> out(kEntries);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), 4 * kEntries);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(4 * kEntries));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

// Every scheme at its defaults, plus the variants whose kernels differ.
int register_all() {
  struct Variant {
    std::string label, name;
    nlohmann::json params;
    uint32_t ranks = 2;  // the collective's ranks as the kernels see them (DynamiQ's correlated rounding)
  };
  std::vector<Variant> variants;
  for (const auto& info : algo::CompressorRegistry::global().all())
    variants.push_back({info.name, info.name, nlohmann::json::object()});
  variants.push_back({"dynamiq_uncorrelated", "dynamiq", {{"correlated", false}}});
  variants.push_back({"dynamiq_8ranks", "dynamiq", nlohmann::json::object(), 8});
  variants.push_back({"equarx_e4m3", "equarx", {{"format", "e4m3"}}});
  variants.push_back({"qsgd_8bit", "qsgd", {{"bits", 8}}});
  variants.push_back({"tfp_k12_rr", "tfp", {{"k", 12}, {"random_rounding", true}}});
  for (const auto& v : variants) {
    const std::pair<const char*, Op> ops[] = {{"encode", Op::kEncode},
                                              {"decode", Op::kDecode},
                                              {"decode_accumulate", Op::kDecodeAccumulate},
                                              {"decode_accumulate_encode", Op::kFused}};
    for (const auto& [label, op] : ops)
      benchmark::RegisterBenchmark(("BM_Kernel/" + v.label + "/" + label).c_str(), BM_Kernel, v.name, v.params, op,
                                   v.ranks)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    auto c = algo::CompressorRegistry::global().create(v.name, v.params);
    if (c.ok()) (*c)->set_layout({&kLayer, 1});
    if (c.ok() && !(*c)->plan_format(kEntries, 2).empty())
      benchmark::RegisterBenchmark(("BM_Round/" + v.label).c_str(), BM_Round, v.name, v.params)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace ccsim

BENCHMARK_MAIN();
