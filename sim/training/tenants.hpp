#pragma once
/// \file
/// Background tenants sharing the training job's links (DynamiQ §5.2 runs three other jobs doing
/// ring all-reduces in a loop). Their flows enter the same flow network, so every link is shared
/// max-min fairly between the job and the tenants.
///
///  * ring_allreduce: `count` independent jobs, each running a ring all-reduce of `bytes` (fp32
///    elements, uncompressed) over `ranks` back to back, from `start` until stopped;
///  * constant: one flow from `src` to `dst` capped at `rate` (a rate-limited, always backlogged
///    source), restarted every `period` so it never ends;
///  * onoff: like constant, but each burst carries rate × `on` bytes (it lasts `on` when the flow
///    gets its full rate, longer under contention), then the source is silent for `off`.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/enum_names.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/status.hpp"
#include "topology/topology.hpp"

namespace ccsim::sim {

/// The kinds of background tenant.
enum class TenantKind : uint8_t { kRingAllReduce, kConstant, kOnOff };
/// Their names, in the order scenario files list them.
inline constexpr EnumName<TenantKind> kTenantKinds[] = {
    {TenantKind::kRingAllReduce, "ring_allreduce"}, {TenantKind::kConstant, "constant"}, {TenantKind::kOnOff, "onoff"}};

/// One tenant kind with its parameters.
struct TenantSpec {
  TenantKind kind = TenantKind::kRingAllReduce;
  uint32_t count = 1;               ///< ring_allreduce: number of jobs
  uint64_t bytes = 1ull << 30;      ///< ring_allreduce: tensor bytes per all-reduce
  std::vector<topo::Rank> ranks;    ///< ring_allreduce: members, in ring order (empty: every rank)
  topo::Rank src = 0, dst = 1;      ///< constant, onoff
  double rate_Bps = 0;              ///< constant, onoff
  double on_s = 0, off_s = 0;       ///< onoff
  double period_s = 1e-3;           ///< constant: flow restart period
  double start_s = 0;               ///< first activity
};

/// A tenant's fields in a scenario file (sim/base/json_fields.hpp).
template <class V>
void visit(V& v, TenantSpec& c) {
  v.choice("kind", c.kind, kTenantKinds,
           "ring_allreduce: jobs doing ring all-reduces back to back; constant: a rate-capped flow; onoff: the same, "
           "sending rate x on then pausing off");
  v.integer("count", c.count, 1, 1 << 16, "ring_allreduce: number of jobs");
  v.bytes("size", c.bytes, "ring_allreduce: bytes per all-reduce (fp32)");
  v.integer_list("ranks", c.ranks, 0, 1 << 20, "ring_allreduce: ranks in ring order (empty: the training job's)");
  v.integer("src", c.src, 0, 1 << 20, "constant/onoff: source rank");
  v.integer("dst", c.dst, 0, 1 << 20, "constant/onoff: destination rank");
  v.quantity("rate", c.rate_Bps, UnitKind::kBandwidth, Sign::kNonNegative, "constant/onoff: rate cap");
  v.quantity("on", c.on_s, UnitKind::kTime, Sign::kNonNegative, "onoff: sending period");
  v.quantity("off", c.off_s, UnitKind::kTime, Sign::kNonNegative, "onoff: silent period");
  v.quantity("period", c.period_s, UnitKind::kTime, Sign::kPositive, "constant: flow restart period");
  v.quantity("start", c.start_s, UnitKind::kTime, Sign::kNonNegative, "first activity");
}

/// What the tenants moved.
struct TenantStats {
  std::string name;
  uint64_t iterations = 0;  ///< all-reduces completed / flows completed
  double bytes = 0;         ///< bytes delivered
};

/// Runs the tenants on an engine and network until stop().
class TenantTraffic {
 public:
  /// Every problem of `specs` on `topology` (ranks exist, rates positive, ...), each at a JSON
  /// Pointer relative to the list of specs ("/1/dst"). A ring without ranks spans every rank.
  static std::vector<Diagnostic> problems(const topo::Topology& topology, std::span<const TenantSpec> specs);
  /// REQUIRES: problems() is empty (else an input error listing them).
  static Result<std::unique_ptr<TenantTraffic>> make(Engine& engine, FlowNetwork& network,
                                                     const topo::Topology& topology, std::vector<TenantSpec> specs,
                                                     uint64_t ecmp_salt);
  TenantTraffic(const TenantTraffic&) = delete;
  TenantTraffic& operator=(const TenantTraffic&) = delete;
  ~TenantTraffic();

  void start();
  /// No new all-reduce or flow starts after this (those in flight finish).
  void stop() { stopped_ = true; }
  const std::vector<TenantStats>& stats() const { return stats_; }
  std::string describe() const;

 private:
  struct Loop;
  TenantTraffic(Engine& engine, FlowNetwork& network, const topo::Topology& topology, std::vector<TenantSpec> specs,
                uint64_t salt);
  void start_ring(size_t loop);
  void start_flow(size_t loop);

  Engine& engine_;
  FlowNetwork& network_;
  const topo::Topology& topology_;
  std::vector<TenantSpec> specs_;
  uint64_t salt_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::vector<TenantStats> stats_;
  bool stopped_ = false;
};

}  // namespace ccsim::sim
