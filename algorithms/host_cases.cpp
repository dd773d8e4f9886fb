#include "algorithms/host_cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "algorithms/device_ops.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"

namespace ccsim::algo {
namespace {

using topo::KernelKind;
constexpr uint32_t kRanks = kDeviceRanks;

// What the cases work on: the two ranks' chunks, prepared vectors, messages and outputs.
struct Buffers {
  std::vector<float> a, b, full, acc, out_tensor, out_prepared;
  std::vector<uint8_t> leaf_msg, full_msg, leaf_out, second_out;
  PlanStats stats;
};

void add_collective_cases(Compressor& comp, const TensorSpec& spec, uint64_t seed, Buffers& buf,
                          std::vector<HostCase>& out) {
  const HopContext leaf{1, kRanks}, second{2, kRanks}, full{kRanks, kRanks};
  const kern::RngKey key{seed, 0, 0, 1};
  buf.leaf_msg.resize(comp.wire_bytes(spec, leaf));
  buf.full_msg.resize(comp.wire_bytes(spec, full));
  buf.leaf_out.resize(buf.leaf_msg.size());
  buf.second_out.resize(comp.wire_bytes(spec, second));
  buf.acc.resize(spec.count);
  comp.encode(buf.a, spec, leaf, key, buf.leaf_msg);
  comp.encode(buf.full, spec, full, key, buf.full_msg);
  Buffers* b = &buf;
  Compressor* c = &comp;
  auto reset_acc = [b] { std::copy(b->b.begin(), b->b.end(), b->acc.begin()); };
  auto bytes = [&](KernelKind k, const HopContext& hop) { return comp.memory_bytes(k, spec, hop); };
  out.push_back({KernelKind::kEncode, spec.count, bytes(KernelKind::kEncode, leaf), [] {},
                 [=] { c->encode(b->a, spec, leaf, key, b->leaf_out); }});
  out.push_back({KernelKind::kDecode, spec.count, bytes(KernelKind::kDecode, full), [] {},
                 [=] { c->decode(b->full_msg, spec, full, b->acc); }});
  out.push_back({KernelKind::kDecodeAccumulate, spec.count, bytes(KernelKind::kDecodeAccumulate, leaf), reset_acc,
                 [=] { c->decode_accumulate(b->leaf_msg, spec, leaf, b->acc); }});
  out.push_back({KernelKind::kDecodeAccumulateEncode, spec.count, bytes(KernelKind::kDecodeAccumulateEncode, leaf),
                 reset_acc,
                 [=] { c->decode_accumulate_encode(b->leaf_msg, spec, leaf, b->acc, second, key, b->second_out); }});
}

void add_round_cases(Compressor& comp, uint64_t n, std::span<const float> x, uint64_t seed, bool launch_point,
                     Buffers& buf, std::vector<HostCase>& out) {
  const PlanFormat format = comp.plan_format(n, kRanks);
  std::vector<KernelKind> round = round_ops(comp, n, kRanks);
  if (launch_point) {
    round = {KernelKind::kPrepare, KernelKind::kFinish};
    if (!format.empty()) round.insert(round.begin(), KernelKind::kPlanLocal);
  }
  buf.out_tensor.resize(n);
  buf.out_prepared.resize(buf.a.size());
  Buffers* b = &buf;
  Compressor* c = &comp;
  for (const KernelKind kind : round) {
    const uint64_t bytes = comp.memory_bytes(kind, TensorSpec{0, n}, HopContext{1, kRanks});
    std::function<void()> run;
    if (kind == KernelKind::kPlanLocal) {
      run = [=] {
        b->stats.sum.assign(format.sum_entries, 0.0);
        b->stats.max.assign(format.max_entries, 0.0f);
        b->stats.bits.assign(format.bit_words, 0);
        c->plan_local(x, 0, kern::RngKey{seed, 0, 0, kPlanStream}, b->stats);
      };
    } else if (kind == KernelKind::kPrepare) {
      run = [=] { c->prepare(x, b->out_prepared, 0, kRanks, kern::RngKey{seed, 0, 0, kPrepareStream}); };
    } else {
      run = [=] { c->finish(b->full, b->out_tensor, 0, kRanks); };
    }
    out.push_back({kind, n, bytes, [] {}, std::move(run)});
  }
}

}  // namespace

Result<HostCases> host_cases(Compressor& comp, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                             uint64_t seed, bool collective_ops, bool launch_point) {
  HostCases out;
  auto buf = std::make_shared<Buffers>();
  out.buffers = buf;
  const std::span<const float> x_a = x0.first(n), x_b = x1.first(n);
  const LayerShape layer = bench_layer(n);
  comp.set_layout(std::span<const LayerShape>(&layer, 1));
  if (!comp.plan_format(n, kRanks).empty()) {
    const std::vector<std::span<const float>> ins = {x_a, x_b, x_a, x_b};
    CCSIM_RETURN_IF_ERROR(plan_round(comp, ins, NumericsOptions{seed, 0, false}).status());
  }
  // The prepared vectors: rank 0's as the incoming message, rank 1's as the accumulator, and
  // kRanks times rank 1's as a fully reduced chunk.
  const uint64_t m = comp.reduced_elements(n);
  if (m == 0) {
    out.skipped = fmt::format("reduces nothing from {} elements", n);
    return out;
  }
  buf->a.resize(m);
  buf->b.resize(m);
  comp.prepare(x_a, buf->a, 0, kRanks, kern::RngKey{seed, 0, 0, kPrepareStream});
  comp.prepare(x_b, buf->b, 1, kRanks, kern::RngKey{seed, 0, 1, kPrepareStream});
  const TensorSpec spec{0, m};
  if (Status st = comp.can_implement(spec); !st.ok()) {
    out.skipped = st.message();
    return out;
  }
  buf->full = buf->b;
  for (float& v : buf->full) v *= static_cast<float>(kRanks);
  if (collective_ops) add_collective_cases(comp, spec, seed, *buf, out.cases);
  add_round_cases(comp, n, x_a, seed, launch_point, *buf, out.cases);
  return out;
}

double median_seconds(uint32_t repeats, const std::function<void()>& reset, const std::function<void()>& op) {
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  reset();
  op();
  std::vector<double> t;
  for (uint32_t r = 0; r < repeats; ++r) {
    reset();
    const double t0 = now();
    op();
    t.push_back(now() - t0);
  }
  std::nth_element(t.begin(), t.begin() + static_cast<ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

Result<std::vector<kern::KernelCostCurve>> measure_host_kernels(const std::string& scheme, std::string_view params,
                                                                bool round_only, std::span<const uint64_t> sizes,
                                                                std::span<const float> x0, std::span<const float> x1,
                                                                uint64_t seed, uint32_t repeats, std::string& skipped) {
  auto made = CompressorRegistry::global().create(scheme, nlohmann::json::parse(params));
  if (!made.ok()) return made.status();
  // One curve per kernel kind (KernelKind order: the collective ops, then the round ops).
  std::vector<kern::KernelCostCurve> curves(topo::kNumKernelKinds);
  for (size_t k = 0; k < curves.size(); ++k)
    curves[k] = {scheme, std::string(topo::kernel_kind_name(static_cast<KernelKind>(k))), std::string(params), 0, {}};
  const uint64_t align = std::max<uint64_t>((*made)->alignment(), 1);
  auto aligned = [align](uint64_t n) { return std::max(align, n / align * align); };
  std::vector<uint64_t> points = {aligned(256)};  // the launch-overhead point
  for (uint64_t n : sizes) points.push_back(aligned(n));
  for (size_t si = 0; si < points.size(); ++si) {
    if (si > 1 && points[si] <= points[si - 1]) continue;
    CCSIM_ASSIGN_OR_RETURN(const HostCases cases, host_cases(**made, points[si], x0, x1, seed, !round_only, si == 0));
    if (!cases.skipped.empty()) {
      skipped = cases.skipped;
      return std::vector<kern::KernelCostCurve>{};
    }
    for (const HostCase& c : cases.cases) {
      kern::KernelCostCurve& curve = curves[static_cast<size_t>(c.kind)];
      const double t = median_seconds(repeats, c.reset, c.run);
      if (si == 0)
        curve.launch_s = t;
      else
        curve.points.push_back({c.elements, c.bytes, t});
    }
  }
  std::erase_if(curves, [](const kern::KernelCostCurve& c) { return c.points.empty(); });
  return curves;
}

}  // namespace ccsim::algo
