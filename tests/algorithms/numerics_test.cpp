#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "tests/algorithms/scheme_helpers.hpp"
#include "kernels/parallel.hpp"
#include "tests/algorithms/unbiased.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {
namespace {

using testing::make;  // the registry's compressor, expected to exist

std::vector<std::span<float>> views(std::vector<std::vector<float>>& bufs) {
  std::vector<std::span<float>> v;
  for (auto& b : bufs) v.emplace_back(b);
  return v;
}

std::vector<std::vector<float>> run_ring(Compressor& comp, std::vector<std::vector<float>> bufs, uint64_t seed = 1) {
  const auto n = static_cast<uint32_t>(bufs.size());
  topo::Schedule s = topo::make_allreduce_ring(n, bufs[0].size(), {comp.alignment()});
  bind_schedule(s, comp);
  auto v = views(bufs);
  auto stats = run_numerics(s, comp, v, {seed, 0});
  EXPECT_TRUE(stats.ok());
  EXPECT_EQ(stats->wire_bytes, s.wire_bytes());
  return bufs;
}

// Rank r contributes 2^r to every element, so a missing or doubled contribution changes the sum.
TEST(RingNumerics, DeliversTheExactSumOnIntegers) {
  auto fp32 = make("fp32");
  for (uint32_t n : {2u, 3u, 5u, 8u, 16u}) {
    for (uint64_t elements : {1ull, 7ull, 1000ull, 4099ull}) {
      SCOPED_TRACE(fmt::format("n={} elements={}", n, elements));
      std::vector<std::vector<float>> bufs(n, std::vector<float>(elements));
      for (uint32_t r = 0; r < n; ++r)
        for (uint64_t i = 0; i < elements; ++i) bufs[r][i] = std::ldexp(1.0f, static_cast<int>(r)) * static_cast<float>(1 + i % 3);
      const auto out = run_ring(*fp32, bufs);
      for (uint32_t r = 0; r < n; ++r)
        for (uint64_t i = 0; i < elements; ++i)
          ASSERT_EQ(out[r][i], (std::ldexp(1.0f, static_cast<int>(n)) - 1.0f) * static_cast<float>(1 + i % 3)) << "rank " << r;
    }
  }
}

// The synthetic generator gives any worker alone what it gives all at once (a run plans metadata
// phases one rank at a time from it).
TEST(SyntheticGradients, OneWorkerAtATimeEqualsAllAtOnce) {
  traces::SyntheticGradientSpec spec;
  spec.elements = 40000;
  spec.envelope_correlation = 0.5;  // each worker's own envelope too
  std::vector<std::vector<float>> all(4, std::vector<float>(spec.elements));
  auto v = views(all);
  traces::generate_synthetic_gradients(spec, 9, v);
  for (uint32_t w = 0; w < 4; ++w) {
    std::vector<float> one(spec.elements);
    const std::span<float> view(one);
    traces::generate_synthetic_gradients(spec, 9, std::span<const std::span<float>>(&view, 1), w);
    EXPECT_EQ(one, all[w]) << "worker " << w;
  }
}

// A metadata phase accumulated one rank at a time fixes the same plan as plan_round on all ranks
// at once: the same bytes on the wire, and the same encoded messages.
TEST(PlanAccumulator, EqualsPlanningEveryRankAtOnce) {
  for (const char* name : {"dynamiq", "mxfp8", "thc", "omnireduce"}) {
    SCOPED_TRACE(name);
    traces::SyntheticGradientSpec spec;
    spec.elements = 1 << 16;
    std::vector<std::vector<float>> bufs(4, std::vector<float>(spec.elements));
    auto v = views(bufs);
    traces::generate_synthetic_gradients(spec, 21, v);
    const std::vector<std::span<const float>> ins(bufs.begin(), bufs.end());
    auto a = make(name), b = make(name);
    ASSERT_TRUE(plan_round(*a, ins, {3, 0}).ok());
    PlanAccumulator acc(*b, spec.elements, 4, {3, 0});
    for (const auto& x : ins) acc.add(x);
    const auto report = acc.commit();
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_TRUE(report->ran);
    const uint64_t n = a->reduced_elements(spec.elements);
    ASSERT_EQ(n, b->reduced_elements(spec.elements));
    const TensorSpec whole{0, n};
    ASSERT_EQ(a->wire_bytes(whole, {1, 4}), b->wire_bytes(whole, {1, 4}));
    std::vector<float> x(n);
    a->prepare(bufs[1], x, 1, 4, {3, 0, 1, kPrepareStream});
    std::vector<uint8_t> ea(a->wire_bytes(whole, {1, 4})), eb(ea.size());
    a->encode(x, whole, {1, 4}, {3, 0, 1, 7}, ea);
    b->encode(x, whole, {1, 4}, {3, 0, 1, 7}, eb);
    EXPECT_EQ(ea, eb);
  }
}

TEST(RingNumerics, EveryRankEndsWithTheSameValues) {
  for (const char* name : {"bf16", "int8"}) {
    auto comp = make(name);
    std::vector<std::vector<float>> bufs(6, std::vector<float>(3000));
    traces::SyntheticGradientSpec spec;
    spec.elements = 3000;
    auto v = views(bufs);
    traces::generate_synthetic_gradients(spec, 5, v);
    const auto out = run_ring(*comp, bufs);
    for (size_t r = 1; r < out.size(); ++r) EXPECT_EQ(out[r], out[0]) << name << " rank " << r;
  }
}

TEST(RingNumerics, Int8AllReduceIsUnbiasedOverSeeds) {
  auto comp = make("int8", {{"block", 32}});
  const uint32_t n = 4;
  const uint64_t elements = 256;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(elements));
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t i = 0; i < elements; ++i) bufs[r][i] = std::sin(static_cast<float>(i * (r + 1)) * 0.3f);
  std::vector<double> exact(elements, 0.0);
  for (const auto& b : bufs)
    for (uint64_t i = 0; i < elements; ++i) exact[i] += b[i];
  testing::UnbiasednessSampler sampler(exact);
  for (int t = 0; t < 2000; ++t) sampler.add(run_ring(*comp, bufs, static_cast<uint64_t>(t))[0]);
  EXPECT_TRUE(sampler.unbiased());
}

TEST(RingNumerics, ErrorGrowsFromFp32ToBf16ToInt8) {
  const uint32_t n = 8;
  const uint64_t elements = 1 << 16;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(elements));
  traces::SyntheticGradientSpec spec;
  spec.elements = elements;
  auto v = views(bufs);
  traces::generate_synthetic_gradients(spec, 11, v);
  std::vector<float> exact(elements, 0.0f);
  for (uint64_t i = 0; i < elements; ++i) {
    double s = 0;
    for (const auto& b : bufs) s += b[i];
    exact[i] = static_cast<float>(s);
  }
  auto err = [&](const char* name) {
    auto comp = make(name);
    const auto out = run_ring(*comp, bufs);
    std::vector<ErrorStats> e;
    for (const auto& o : out) e.push_back(error_stats(exact, o));
    return vnmse(e);
  };
  const double e32 = err("fp32"), e16 = err("bf16"), e8 = err("int8");
  EXPECT_LT(e32, 1e-12);
  // bf16 keeps 8 significant bits: per-element relative error up to 2^-9 per rounding.
  EXPECT_GT(e16, 1e-7);
  EXPECT_LT(e16, 1e-4);
  EXPECT_GT(e8, e16);
  EXPECT_LT(e8, 1e-2);
}

TEST(RingNumerics, RepeatableAndIndependentOfThreadCount) {
  auto comp = make("int8");
  std::vector<std::vector<float>> bufs(4, std::vector<float>(200000));
  traces::SyntheticGradientSpec spec;
  spec.elements = 200000;
  auto v = views(bufs);
  traces::generate_synthetic_gradients(spec, 3, v);
  kern::set_worker_threads(1);
  const auto a = run_ring(*comp, bufs, 9);
  kern::set_worker_threads(3);
  const auto b = run_ring(*comp, bufs, 9);
  const auto c = run_ring(*comp, bufs, 10);
  kern::set_worker_threads(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // a different seed draws different rounding
}

/// A test scheme with every round phase: the metadata phase agrees on per-block sums (the mean
/// over ranks), global maxima and a bitmap of non-zero blocks; prepare() subtracts the agreed mean,
/// finish() adds ranks × mean back; messages are plain fp32 whose wire size grows with the number of
/// non-zero blocks (a data-dependent wire size, so binding must follow the plan).
class PlannedFp32 final : public UnfusedHopCompressor {
 public:
  static constexpr uint64_t kBlock = 64;
  std::string_view name() const override { return "planned_fp32"; }
  PlanFormat plan_format(uint64_t elements, uint32_t) const override {
    const uint64_t blocks = (elements + kBlock - 1) / kBlock;
    return PlanFormat{blocks, 1, (blocks + 63) / 64, 8};
  }
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey&, PlanStats& out) const override {
    for (uint64_t i = 0; i < x.size(); ++i) {
      out.sum[i / kBlock] += x[i];
      out.max[0] = std::max(out.max[0], std::fabs(x[i]));
      if (x[i] != 0) out.bits[i / kBlock / 64] |= uint64_t{1} << (i / kBlock % 64);
    }
    ++calls[rank];
  }
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override {
    mean.assign(combined.sum.size(), 0.0f);
    for (size_t b = 0; b < mean.size(); ++b) {
      const uint64_t count = std::min(kBlock, elements - b * kBlock);
      mean[b] = static_cast<float>(combined.sum[b] / (static_cast<double>(count) * ranks));
    }
    global_max = combined.max[0];
    nonzero_blocks = 0;
    for (uint64_t w : combined.bits) nonzero_blocks += static_cast<uint64_t>(std::popcount(w));
    return ok_status();
  }
  void prepare(std::span<const float> x, std::span<float> out, uint32_t, uint32_t, const kern::RngKey&) override {
    for (uint64_t i = 0; i < x.size(); ++i) out[i] = x[i] - mean[i / kBlock];
  }
  void finish(std::span<const float> x, std::span<float> out, uint32_t, uint32_t ranks) override {
    for (uint64_t i = 0; i < x.size(); ++i) out[i] = x[i] + static_cast<float>(ranks) * mean[i / kBlock];
  }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override { return 4 * spec.count + 8 * nonzero_blocks; }
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey&,
              std::span<uint8_t> out) override {
    std::fill(out.begin(), out.end(), uint8_t{0});
    std::memcpy(out.data(), x.data(), 4 * x.size());
    ASSERT_EQ(out.size(), wire_bytes(spec, hop));
  }
  void decode(std::span<const uint8_t> in, const TensorSpec&, const HopContext&, std::span<float> out) override {
    std::memcpy(out.data(), in.data(), 4 * out.size());
  }
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec&, const HopContext&, std::span<float> acc) override {
    for (size_t i = 0; i < acc.size(); ++i) {
      float v;
      std::memcpy(&v, in.data() + 4 * i, 4);
      acc[i] += v;
    }
  }
  bool unbiased() const override { return true; }
  Determinism determinism() const override { return Determinism::kRunToRun; }

  std::vector<float> mean;
  float global_max = 0;
  uint64_t nonzero_blocks = 0;
  mutable std::vector<int> calls = std::vector<int>(8, 0);
};

TEST(RoundPhases, PlanCombinesEveryRankThenPrepareAndFinishFrameTheCollective) {
  const uint32_t n = 5;
  const uint64_t elements = 1000;  // 16 blocks, the last one partial; blocks 3 and 9 are zero everywhere
  std::vector<std::vector<float>> bufs(n, std::vector<float>(elements));
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t i = 0; i < elements; ++i)
      bufs[r][i] = (i / 64 == 3 || i / 64 == 9) ? 0.0f : static_cast<float>(r + 1) * 0.25f + static_cast<float>(i % 7);
  bufs[2][500] = -40.0f;  // the global maximum magnitude
  PlannedFp32 comp;
  std::vector<std::span<const float>> ins(bufs.begin(), bufs.end());
  auto report = plan_round(comp, ins, {3, 0});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ran);
  EXPECT_EQ(report->wire_bytes_per_rank, 16 * 8 + 4 + 8);
  EXPECT_EQ(comp.calls, (std::vector<int>{1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(comp.global_max, 40.0f);
  EXPECT_EQ(comp.nonzero_blocks, 14u);
  // Block 0's agreed mean: the average over ranks and elements, computed independently.
  double sum0 = 0;
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t i = 0; i < 64; ++i) sum0 += bufs[r][i];
  EXPECT_FLOAT_EQ(comp.mean[0], static_cast<float>(sum0 / (64.0 * n)));

  // Bound after the plan: every transfer carries 8 bytes per non-zero block on top of the payload.
  topo::Schedule s = topo::make_allreduce_ring(n, elements, {1});
  bind_schedule(s, comp);
  uint64_t expected_wire = 0;
  for (const auto& op : s.ops())
    if (op.kind == topo::OpKind::kTransfer) expected_wire += 4 * s.chunks()[op.chunk].count + 8 * 14;
  auto out = bufs;
  auto v = views(out);
  auto stats = run_numerics(s, comp, v, {3, 0});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->wire_bytes, expected_wire);
  // prepare() and finish() cancel: every rank ends with the sum (to fp32 rounding of the shifts).
  for (uint32_t r = 0; r < n; ++r)
    for (uint64_t i = 0; i < elements; ++i) {
      double exact = 0;
      for (uint32_t q = 0; q < n; ++q) exact += bufs[q][i];
      ASSERT_NEAR(out[r][i], exact, 1e-4 * (1 + std::fabs(exact))) << "rank " << r << " element " << i;
    }
  // Without a metadata phase nothing runs.
  auto fp32 = make("fp32");
  auto none = plan_round(*fp32, ins, {3, 0});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->ran);
  EXPECT_EQ(none->wire_bytes_per_rank, 0u);
}

TEST(Vnmse, NeverNaNOnDegenerateInputs) {
  auto comp = make("int8");
  const std::vector<std::vector<float>> cases = {std::vector<float>(1000, 0.0f), std::vector<float>(1000, 3.0f),
                                                 std::vector<float>(1000, 1e-40f), std::vector<float>(1000, 1e37f)};
  for (const auto& c : cases) {
    std::vector<std::vector<float>> bufs(4, c);
    const auto out = run_ring(*comp, bufs);
    std::vector<float> exact(c.size());
    for (size_t i = 0; i < c.size(); ++i) exact[i] = 4 * c[i];
    std::vector<ErrorStats> e;
    for (const auto& o : out) e.push_back(error_stats(exact, o));
    const double x = vnmse(e);
    EXPECT_FALSE(std::isnan(x)) << c[0];
    EXPECT_LT(x, 1e-3) << c[0];
  }
  EXPECT_EQ(vnmse(std::vector<ErrorStats>{{0, 0}}), 0.0);
  EXPECT_TRUE(std::isinf(vnmse(std::vector<ErrorStats>{{1, 0}})));
}

}  // namespace
}  // namespace ccsim::algo
