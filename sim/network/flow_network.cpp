#include "sim/network/flow_network.hpp"

#include <algorithm>
#include <cmath>

#include "sim/base/check.hpp"

namespace ccsim::sim {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// Two fair shares within this relative distance are the same bottleneck level.
constexpr double kTieRel = 1e-12;
}  // namespace

std::vector<double> max_min_rates(const std::vector<double>& capacity, const std::vector<std::vector<uint32_t>>& routes,
                                  const std::vector<double>& caps) {
  const size_t nf = routes.size(), nl = capacity.size();
  std::vector<double> rate(nf, 0.0), remaining(capacity);
  std::vector<uint32_t> count(nl, 0);
  std::vector<char> frozen(nf, 0);
  std::vector<std::vector<uint32_t>> flows_on(nl);
  size_t unfrozen = 0;
  for (size_t f = 0; f < nf; ++f) {
    if (routes[f].empty()) {
      rate[f] = caps[f];
      frozen[f] = 1;
      continue;
    }
    ++unfrozen;
    for (uint32_t l : routes[f]) {
      ++count[l];
      flows_on[l].push_back(static_cast<uint32_t>(f));
    }
  }
  while (unfrozen > 0) {
    double level = kInf;
    for (size_t l = 0; l < nl; ++l)
      if (count[l] > 0) level = std::min(level, std::max(0.0, remaining[l]) / count[l]);
    for (size_t f = 0; f < nf; ++f)
      if (!frozen[f]) level = std::min(level, caps[f]);
    CCSIM_CHECK(std::isfinite(level), "progressive filling found no bottleneck");
    const double tie = level * (1 + kTieRel);
    auto freeze = [&](size_t f) {
      frozen[f] = 1;
      rate[f] = level;
      --unfrozen;
      for (uint32_t l : routes[f]) {
        remaining[l] -= level;
        --count[l];
      }
    };
    // Freeze flows at their cap first, then every flow crossing a saturated link.
    for (size_t f = 0; f < nf; ++f)
      if (!frozen[f] && caps[f] <= tie) freeze(f);
    std::vector<uint32_t> saturated;
    for (size_t l = 0; l < nl; ++l)
      if (count[l] > 0 && std::max(0.0, remaining[l]) / count[l] <= tie) saturated.push_back(static_cast<uint32_t>(l));
    for (uint32_t l : saturated)
      for (uint32_t f : flows_on[l])
        if (!frozen[f]) freeze(f);
  }
  return rate;
}

FlowNetwork::FlowNetwork(Engine& engine, std::vector<LinkSpec> links)
    : engine_(engine), links_(std::move(links)), stats_(links_.size()), link_flows_(links_.size(), 0) {
  for (const auto& l : links_) CCSIM_CHECK(l.capacity_Bps > 0, "link capacity must be positive");
  engine_.on_instant_end([this] {
    if (dirty_) solve();
  });
}

FlowId FlowNetwork::start_flow(std::vector<uint32_t> route, double bytes, Duration latency,
                               std::function<void()> on_done, double rate_cap_Bps) {
  CCSIM_CHECK(bytes >= 0 && std::isfinite(bytes), "flow of {} bytes", bytes);
  for (uint32_t l : route) CCSIM_CHECK(l < links_.size(), "route names link {} of {}", l, links_.size());
  advance_to_now();
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f = Flow{std::move(route), bytes, 0.0, rate_cap_Bps, latency, std::move(on_done), false};
  if (bytes == 0 || f.route.empty()) {
    // Nothing to share: only the latency (and, for a capped local copy, bytes/cap).
    const double drain = (bytes == 0) ? 0.0 : (std::isfinite(rate_cap_Bps) ? bytes / rate_cap_Bps : 0.0);
    auto cb = std::move(f.on_done);
    free_ids_.push_back(id);
    engine_.schedule_in(Duration::from_seconds_ceil(drain) + latency, std::move(cb));
    return id;
  }
  f.active = true;
  active_.push_back(id);
  for (uint32_t l : f.route) ++link_flows_[l];
  dirty_ = true;
  return id;
}

double FlowNetwork::rate(FlowId id) const { return id < flows_.size() && flows_[id].active ? flows_[id].rate : 0.0; }

const std::vector<LinkStats>& FlowNetwork::link_stats() {
  advance_to_now();
  return stats_;
}

void FlowNetwork::advance_to_now() {
  const SimTime now = engine_.now();
  if (now == last_update_) return;
  const double dt = (now - last_update_).seconds();
  for (FlowId id : active_) {
    Flow& f = flows_[id];
    const double moved = std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    for (uint32_t l : f.route) stats_[l].bytes += moved;
  }
  for (size_t l = 0; l < links_.size(); ++l)
    if (link_flows_[l] > 0) stats_[l].busy_s += dt;
  last_update_ = now;
}

void FlowNetwork::solve() {
  advance_to_now();
  dirty_ = false;
  ++solves_;
  std::vector<double> capacity(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) capacity[l] = links_[l].capacity_Bps;
  std::vector<std::vector<uint32_t>> routes;
  std::vector<double> caps;
  routes.reserve(active_.size());
  caps.reserve(active_.size());
  for (FlowId id : active_) {
    routes.push_back(flows_[id].route);
    caps.push_back(flows_[id].cap);
  }
  const std::vector<double> rates = max_min_rates(capacity, routes, caps);
  std::vector<double> load(links_.size(), 0.0);
  double earliest = kInf;
  for (size_t i = 0; i < active_.size(); ++i) {
    Flow& f = flows_[active_[i]];
    f.rate = rates[i];
    CCSIM_CHECK(f.rate > 0, "flow got a zero rate");
    for (uint32_t l : f.route) {
      load[l] += f.rate;
      stats_[l].max_flows = std::max(stats_[l].max_flows, link_flows_[l]);
    }
    earliest = std::min(earliest, f.remaining / f.rate);
  }
  for (size_t l = 0; l < links_.size(); ++l) {
    const double ratio = load[l] / links_[l].capacity_Bps;
    max_link_load_ = std::max(max_link_load_, ratio);
    CCSIM_CHECK(ratio <= 1 + 1e-9, "link {} carries {} of its capacity", l, ratio);
  }
  engine_.cancel(next_completion_);
  next_completion_ = EventId{};
  if (!active_.empty())
    next_completion_ = engine_.schedule_in(Duration::from_seconds_ceil(earliest), [this] { on_completion_event(); });
}

void FlowNetwork::on_completion_event() {
  next_completion_ = EventId{};
  advance_to_now();
  // A flow is done when less than a picosecond of sending is left at its rate.
  std::vector<FlowId> still;
  still.reserve(active_.size());
  for (FlowId id : active_) {
    Flow& f = flows_[id];
    if (f.remaining <= f.rate * 1e-12 * 1.5) {
      for (uint32_t l : f.route) {
        stats_[l].bytes += f.remaining;
        --link_flows_[l];
      }
      f.remaining = 0;
      f.active = false;
      engine_.schedule_in(f.latency, std::move(f.on_done));
      f.on_done = nullptr;
      free_ids_.push_back(id);
    } else {
      still.push_back(id);
    }
  }
  active_.swap(still);
  dirty_ = true;
}

}  // namespace ccsim::sim
