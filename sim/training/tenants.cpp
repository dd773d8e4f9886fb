#include "sim/training/tenants.hpp"

#include <fmt/format.h>

#include "sim/base/check.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::sim {

struct TenantTraffic::Loop {
  size_t spec = 0;
  size_t stat = 0;
  uint32_t instance = 0;
  std::unique_ptr<topo::ScheduleGenerator> generator;
  std::unique_ptr<ScheduleRunner> runner;
  std::vector<uint32_t> route;
  bool on = true;
};

TenantTraffic::TenantTraffic(Engine& engine, FlowNetwork& network, const topo::Topology& topology,
                             std::vector<TenantSpec> specs, uint64_t salt)
    : engine_(engine), network_(network), topology_(topology), specs_(std::move(specs)), salt_(salt) {}

TenantTraffic::~TenantTraffic() = default;

std::vector<Diagnostic> TenantTraffic::problems(const topo::Topology& topology, std::span<const TenantSpec> specs) {
  const uint32_t n = topology.num_ranks();
  std::vector<Diagnostic> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TenantSpec& t = specs[i];
    auto bad = [&](const std::string& field, std::string message) {
      out.push_back({fmt::format("/{}/{}", i, field), std::move(message)});
    };
    if (t.kind == TenantKind::kRingAllReduce) {
      const size_t members = t.ranks.empty() ? n : t.ranks.size();
      if (members < 2) bad("ranks", "a ring needs at least 2 ranks");
      for (size_t k = 0; k < t.ranks.size(); ++k)
        if (t.ranks[k] >= n)
          bad(fmt::format("ranks/{}", k), fmt::format("expected a rank below {}, got {}", n, t.ranks[k]));
      if (t.bytes < 4 * members)
        bad("size", fmt::format("expected at least 4 bytes per ring member ({} B), got {} B", 4 * members, t.bytes));
      if (t.count < 1) bad("count", "expected at least 1, got 0");
      continue;
    }
    if (t.src >= n) bad("src", fmt::format("expected a rank below {}, got {}", n, t.src));
    if (t.dst >= n) bad("dst", fmt::format("expected a rank below {}, got {}", n, t.dst));
    if (t.src == t.dst) bad("dst", fmt::format("expected a rank other than src ({})", t.src));
    if (!(t.rate_Bps > 0)) bad("rate", "expected a positive rate");
    if (t.kind == TenantKind::kOnOff && !(t.on_s > 0 && t.off_s >= 0))
      bad("on", fmt::format("expected on > 0 and off >= 0, got on {} s, off {} s", t.on_s, t.off_s));
    if (!(t.period_s > 0)) bad("period", "expected a positive period");
  }
  return out;
}

Result<std::unique_ptr<TenantTraffic>> TenantTraffic::make(Engine& engine, FlowNetwork& network,
                                                           const topo::Topology& topology,
                                                           std::vector<TenantSpec> specs, uint64_t ecmp_salt) {
  if (const std::vector<Diagnostic> bad = problems(topology, specs); !bad.empty())
    return invalid_argument_at(bad.front().path, bad.front().message);
  const uint32_t n = topology.num_ranks();
  for (TenantSpec& t : specs)
    if (t.kind == TenantKind::kRingAllReduce && t.ranks.empty())
      for (uint32_t r = 0; r < n; ++r) t.ranks.push_back(r);
  std::unique_ptr<TenantTraffic> tt(new TenantTraffic(engine, network, topology, std::move(specs), ecmp_salt));
  for (size_t i = 0; i < tt->specs_.size(); ++i) {
    const TenantSpec& t = tt->specs_[i];
    const uint32_t count = t.kind == TenantKind::kRingAllReduce ? t.count : 1;
    const std::string_view kind = enum_name<TenantKind>(kTenantKinds, t.kind);
    for (uint32_t c = 0; c < count; ++c) {
      auto loop = std::make_unique<Loop>();
      loop->spec = i;
      loop->instance = c;
      loop->stat = tt->stats_.size();
      tt->stats_.push_back(
          TenantStats{count > 1 ? fmt::format("{}#{}[{}]", kind, i, c) : fmt::format("{}#{}", kind, i), 0, 0});
      if (t.kind != TenantKind::kRingAllReduce)
        topology.route(t.src, t.dst, ecmp_salt ^ (0x7E4A47ull + i), loop->route);
      tt->loops_.push_back(std::move(loop));
    }
  }
  return tt;
}

void TenantTraffic::start() {
  for (size_t i = 0; i < loops_.size(); ++i) {
    const TenantSpec& t = specs_[loops_[i]->spec];
    engine_.schedule_in(Duration::from_seconds(t.start_s), [this, i, ring = t.kind == TenantKind::kRingAllReduce] {
      ring ? start_ring(i) : start_flow(i);
    });
  }
}

void TenantTraffic::start_ring(size_t li) {
  if (stopped_) return;
  Loop& loop = *loops_[li];
  const TenantSpec& t = specs_[loop.spec];
  const uint32_t n = static_cast<uint32_t>(t.ranks.size());
  topo::CollectiveOptions opts;
  loop.generator = topo::make_ring(topo::CollectiveOp::kAllReduce, n, t.bytes / 4, opts, false);
  RunnerOptions ro;
  ro.rank_map = t.ranks;
  ro.ecmp_salt = salt_ + 0x1000 * (li + 1);
  // Uncompressed fp32; kernels are free.
  auto bind_fp32 = [](topo::Schedule& sched, topo::OpId first, topo::OpId end) {
    bind_uncompressed(sched, first, end, 4);
  };
  loop.runner = std::make_unique<ScheduleRunner>(engine_, network_, topology_, *loop.generator, bind_fp32,
                                                 KernelCostModel{}, std::move(ro));
  loop.runner->start([this, li](const ScheduleTiming& timing) {
    TenantStats& s = stats_[loops_[li]->stat];
    ++s.iterations;
    s.bytes += static_cast<double>(timing.wire_bytes);
    // Restart in a fresh event (the runner must not be destroyed inside its own callback).
    engine_.schedule_in(Duration::zero(), [this, li] { start_ring(li); });
  });
}

void TenantTraffic::start_flow(size_t li) {
  if (stopped_) return;
  Loop& loop = *loops_[li];
  const TenantSpec& t = specs_[loop.spec];
  const double span = t.kind == TenantKind::kOnOff ? t.on_s : t.period_s;
  const double bytes = t.rate_Bps * span;
  const Duration latency = Duration::from_seconds(topology_.route_latency_s(t.src, t.dst));
  network_.start_flow(loop.route, bytes, latency, [this, li, bytes] {
    TenantStats& s = stats_[loops_[li]->stat];
    ++s.iterations;
    s.bytes += bytes;
    const TenantSpec& ts = specs_[loops_[li]->spec];
    if (ts.kind == TenantKind::kOnOff && ts.off_s > 0) {
      engine_.schedule_in(Duration::from_seconds(ts.off_s), [this, li] { start_flow(li); });
    } else {
      start_flow(li);
    }
  }, t.rate_Bps);
}

std::string TenantTraffic::describe() const {
  if (specs_.empty()) return "none";
  std::string out;
  for (const auto& t : specs_) {
    if (!out.empty()) out += "; ";
    if (t.kind == TenantKind::kRingAllReduce)
      out += fmt::format("{} ring all-reduce loop(s) of {} B over {} ranks", t.count, t.bytes, t.ranks.size());
    else if (t.kind == TenantKind::kConstant)
      out += fmt::format("constant {} -> {} at {:.4g} Gbps", t.src, t.dst, t.rate_Bps * 8e-9);
    else
      out += fmt::format("on/off {} -> {} at {:.4g} Gbps, on {} s / off {} s", t.src, t.dst, t.rate_Bps * 8e-9, t.on_s,
                         t.off_s);
  }
  return out;
}

}  // namespace ccsim::sim
