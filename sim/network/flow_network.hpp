#pragma once
/// \file
/// Flow-level network: each transfer is a fluid flow along a route of directed links; concurrent
/// flows share links max-min fairly, computed by progressive filling (raise every unfrozen flow's
/// rate together; when a link saturates, freeze the flows crossing it; repeat), with optional
/// per-flow rate caps. Rates are re-solved once per simulated instant in which flows started or
/// finished (SimGrid's "time to next completion / advance" protocol, driven by the engine's
/// instant-end hook). A flow's bytes drain at its changing rate; its completion is reported one
/// route latency after the last byte leaves (store-and-forward of the last bit, no queueing).

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sim/engine.hpp"

namespace ccsim::sim {

using FlowId = uint32_t;

/// A directed link as the network model sees it.
struct LinkSpec {
  double capacity_Bps = 0;
};

/// Per-link counters.
struct LinkStats {
  double bytes = 0;         ///< bytes carried so far
  double busy_s = 0;        ///< time with at least one flow on the link
  uint32_t max_flows = 0;   ///< most flows sharing the link at once
};

/// Computes max-min fair rates by progressive filling from scratch.
/// `routes[f]` lists the links of flow f; `caps[f]` its rate cap (infinity for none).
/// Returns each flow's rate. Flows with an empty route get their cap (or infinity).
std::vector<double> max_min_rates(const std::vector<double>& capacity, const std::vector<std::vector<uint32_t>>& routes,
                                  const std::vector<double>& caps);

/// The flow network, bound to an engine.
class FlowNetwork {
 public:
  FlowNetwork(Engine& engine, std::vector<LinkSpec> links);
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  /// Starts a flow of `bytes` along `route` now; `on_done` runs `latency` after its last byte is
  /// sent. `rate_cap_Bps` bounds its rate (a NIC injection limit). REQUIRES: bytes >= 0.
  FlowId start_flow(std::vector<uint32_t> route, double bytes, Duration latency, std::function<void()> on_done,
                    double rate_cap_Bps = std::numeric_limits<double>::infinity());

  /// Current rate of an active flow (0 if finished).
  double rate(FlowId f) const;
  size_t active_flows() const { return active_.size(); }
  /// Link counters, brought up to date to the engine's current time.
  const std::vector<LinkStats>& link_stats();
  /// Number of rate solves so far.
  uint64_t solves() const { return solves_; }
  /// Largest ratio of a link's summed flow rates to its capacity seen in any solve (≤ 1 + 1e-9).
  double max_link_load() const { return max_link_load_; }

 private:
  struct Flow {
    std::vector<uint32_t> route;
    double remaining = 0;
    double rate = 0;
    double cap = 0;
    Duration latency;
    std::function<void()> on_done;
    bool active = false;
  };

  void advance_to_now();
  void solve();
  void on_completion_event();

  Engine& engine_;
  std::vector<LinkSpec> links_;
  std::vector<LinkStats> stats_;
  std::vector<uint32_t> link_flows_;  // active flows per link
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<FlowId> active_;
  SimTime last_update_ = SimTime::zero();
  bool dirty_ = false;
  EventId next_completion_;
  uint64_t solves_ = 0;
  double max_link_load_ = 0;
};

}  // namespace ccsim::sim
