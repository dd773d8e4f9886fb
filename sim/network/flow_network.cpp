#include "sim/network/flow_network.hpp"

#include <algorithm>
#include <cmath>

#include "sim/base/check.hpp"

namespace ccsim::sim {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A constraint's fair share; a link whose remaining capacity went below zero by rounding shares 0.
double share(double rem, uint32_t cnt) { return std::max(0.0, rem) / cnt; }
}  // namespace

std::vector<double> max_min_rates(const std::vector<double>& capacity, const std::vector<std::vector<uint32_t>>& routes,
                                  const std::vector<double>& caps) {
  const size_t nf = routes.size(), nl = capacity.size();
  std::vector<double> rate(nf, 0.0), rem(capacity);
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
  auto freeze = [&](size_t f, double v) {
    frozen[f] = 1;
    rate[f] = v;
    --unfrozen;
    for (uint32_t l : routes[f]) {
      rem[l] -= v;
      --count[l];
    }
  };
  while (unfrozen > 0) {
    // The tightest constraint, ties broken by (value, caps before links, index).
    double best = kInf;
    int kind = 2;
    size_t index = 0;
    for (size_t f = 0; f < nf; ++f)
      if (!frozen[f] && caps[f] < best) {
        best = caps[f];
        kind = 0;
        index = f;
      }
    for (size_t l = 0; l < nl; ++l)
      if (count[l] > 0 && share(rem[l], count[l]) < best) {
        best = share(rem[l], count[l]);
        kind = 1;
        index = l;
      }
    CCSIM_CHECK(kind != 2, "progressive filling found no bottleneck");
    if (kind == 0) {
      freeze(index, best);
    } else {
      for (uint32_t f : flows_on[index])
        if (!frozen[f]) freeze(f, best);
    }
  }
  return rate;
}

FlowNetwork::FlowNetwork(Engine& engine, std::vector<LinkSpec> links) : engine_(engine), links_(links.size()) {
  CCSIM_CHECK(links.size() < Constraint::kLinkBit, "{} links: at most 2^31 - 1", links.size());
  for (size_t l = 0; l < links.size(); ++l) {
    CCSIM_CHECK(links[l].capacity_Bps > 0, "link {} capacity must be positive", l);
    links_[l].capacity = links[l].capacity_Bps;
  }
  engine_.on_instant_end([this] {
    if (!dirty_links_.empty()) solve();
  });
}

void FlowNetwork::record_timeline(Duration bin) {
  CCSIM_CHECK(bin > Duration::zero(), "timeline bin must be positive");
  CCSIM_CHECK(counters_.flows_started == 0, "record_timeline after flows started");
  bin_ = bin;
  timeline_.assign(links_.size(), {});
}

uint32_t FlowNetwork::alloc_route(uint32_t len) {
  if (len < free_routes_.size() && !free_routes_[len].empty()) {
    const uint32_t off = free_routes_[len].back();
    free_routes_[len].pop_back();
    return off;
  }
  const auto off = static_cast<uint32_t>(route_pool_.size());
  route_pool_.resize(route_pool_.size() + len);
  pos_pool_.resize(route_pool_.size());
  return off;
}

void FlowNetwork::free_route(uint32_t off, uint32_t len) {
  if (len >= free_routes_.size()) free_routes_.resize(len + 1);
  free_routes_[len].push_back(off);
}

void FlowNetwork::mark_dirty(uint32_t link) {
  if (links_[link].dirty) return;
  links_[link].dirty = true;
  dirty_links_.push_back(link);
}

FlowId FlowNetwork::start_flow(std::span<const uint32_t> route, double bytes, Duration latency,
                               Engine::Callback on_done, double rate_cap_Bps) {
  CCSIM_CHECK(bytes >= 0 && std::isfinite(bytes), "flow of {} bytes", bytes);
  CCSIM_CHECK(rate_cap_Bps > 0, "flow rate cap must be positive");
  ++counters_.flows_started;
  if (bytes == 0 || route.empty()) {
    // Nothing to share: only the latency (and, for a capped local copy, bytes/cap).
    const double drain = (bytes == 0) ? 0.0 : (std::isfinite(rate_cap_Bps) ? bytes / rate_cap_Bps : 0.0);
    engine_.schedule_in(Duration::from_seconds_ceil(drain) + latency, std::move(on_done));
    return UINT32_MAX;
  }
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    CCSIM_CHECK(flows_.size() < Constraint::kLinkBit, "more than 2^31 - 1 flows at once");
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  const auto len = static_cast<uint32_t>(route.size());
  const uint32_t off = alloc_route(len);
  Flow& f = flows_[id];
  f.route_off = off;
  f.route_len = len;
  f.size = bytes;
  f.remaining = bytes;
  f.rate = 0;
  f.cap = rate_cap_Bps;
  f.last = engine_.now();
  f.latency = latency;
  f.due_ps = -1;
  f.on_done = std::move(on_done);
  f.active = true;
  for (uint32_t i = 0; i < len; ++i) {
    const uint32_t l = route[i];
    CCSIM_CHECK(l < links_.size(), "route names link {} of {}", l, links_.size());
    LinkState& L = links_[l];
    route_pool_[off + i] = l;
    pos_pool_[off + i] = static_cast<uint32_t>(L.flows.size());
    L.flows.push_back(id);
    L.stats.max_flows = std::max(L.stats.max_flows, static_cast<uint32_t>(L.flows.size()));
    mark_dirty(l);
  }
  ++active_count_;
  counters_.peak_active_flows = std::max(counters_.peak_active_flows, active_count_);
  return id;
}

double FlowNetwork::rate(FlowId id) const { return id < flows_.size() && flows_[id].active ? flows_[id].rate : 0.0; }

void FlowNetwork::flush_link(LinkState& L) {
  const SimTime now = engine_.now();
  if (now == L.last_change) return;
  const double dt = (now - L.last_change).seconds();
  if (L.load > 0) {
    L.stats.busy_s += dt;
    if (bin_ > Duration::zero()) {
      auto& bins = timeline_[&L - links_.data()];
      // Spread load over the bins [last_change, now) overlaps, in picoseconds.
      int64_t t = L.last_change.ps();
      const int64_t end = now.ps(), w = bin_.ps();
      while (t < end) {
        const auto b = static_cast<size_t>(t / w);
        const int64_t stop = std::min(end, static_cast<int64_t>(b + 1) * w);
        if (bins.size() <= b) bins.resize(b + 1, 0.0);
        bins[b] += L.load * static_cast<double>(stop - t) * 1e-12;
        t = stop;
      }
    }
  }
  L.last_change = now;
}

const std::vector<LinkStats>& FlowNetwork::link_stats() {
  stats_out_.resize(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) {
    flush_link(links_[l]);
    stats_out_[l] = links_[l].stats;
    double bytes = links_[l].done_bytes;
    for (FlowId id : links_[l].flows) {
      const Flow& f = flows_[id];
      const double sent_since = f.rate * (engine_.now() - f.last).seconds();
      bytes += f.size - std::max(0.0, f.remaining - sent_since);
    }
    stats_out_[l].bytes = bytes;
  }
  return stats_out_;
}

uint32_t FlowNetwork::batch_at(int64_t t_ps) {
  if (t_ps == last_batch_time_) return last_batch_;
  uint32_t b = batch_index_.find(t_ps);
  if (b == TimeIndex::kNone) {
    if (!free_batches_.empty()) {
      b = free_batches_.back();
      free_batches_.pop_back();
    } else {
      b = static_cast<uint32_t>(batches_.size());
      batches_.emplace_back();
    }
    batches_[b].time_ps = t_ps;
    batch_index_.insert(t_ps, b);
    engine_.schedule_at(SimTime::from_ps(t_ps), [this, b] { fire_batch(b); });
  }
  last_batch_time_ = t_ps;
  last_batch_ = b;
  return b;
}

void FlowNetwork::fire_batch(uint32_t b) {
  // The engine fires a batch at its time: reading it from the clock rather than the batch (often a
  // cache miss) lets the index's probe and the batch's load overlap.
  const int64_t t = engine_.now().ps();
  CCSIM_CHECK(batches_[b].time_ps == t, "batch {} due at {} ps fired at {} ps", b, batches_[b].time_ps, t);
  batch_index_.erase(t);
  if (last_batch_time_ == t) last_batch_time_ = -1;
  // Take the contents out first: callbacks may create new batches (and reuse this one).
  std::vector<FlowId> completions;
  std::vector<Engine::Callback> deliveries;
  completions.swap(batches_[b].completions);
  deliveries.swap(batches_[b].deliveries);
  free_batches_.push_back(b);
  for (FlowId id : completions)
    if (flows_[id].active && flows_[id].due_ps == t) complete(id);
  for (auto& cb : deliveries) cb();
  // Hand the storage back for reuse if the slot is still free.
  if (!free_batches_.empty() && free_batches_.back() == b) {
    completions.clear();
    deliveries.clear();
    batches_[b].completions.swap(completions);
    batches_[b].deliveries.swap(deliveries);
  }
}

void FlowNetwork::solve() {
  ++counters_.solves;
  comp_links_.clear();
  comp_flows_.clear();
  // One connected component of the flow–link graph per unvisited changed link.
  ++epoch_;
  ++refill_epoch_;
  const uint64_t visit = epoch_;
  for (uint32_t seed : dirty_links_) {
    if (links_[seed].mark == visit) continue;
    const size_t links_begin = comp_links_.size(), flows_begin = comp_flows_.size();
    walk_component(seed, visit);
    solve_component(links_begin, flows_begin);
  }
  counters_.solved_flows += comp_flows_.size();
  apply_rates();
  for (uint32_t l : dirty_links_) {
    links_[l].dirty = false;
    links_[l].removed = UINT64_MAX;
  }
  dirty_links_.clear();
}

void FlowNetwork::walk_component(uint32_t seed, uint64_t visit) {
  links_[seed].mark = visit;
  stack_.push_back(seed);
  while (!stack_.empty()) {
    const uint32_t l = stack_.back();
    stack_.pop_back();
    comp_links_.push_back(l);
    if (links_[l].dirty) links_[l].refill_mark = refill_epoch_;  // its load changes with its flows
    for (FlowId id : links_[l].flows) {
      Flow& f = flows_[id];
      if (f.mark == visit) continue;
      f.mark = visit;
      f.new_rate = f.rate;  // kept unless re-filled
      comp_flows_.push_back(id);
      for (uint32_t l2 : route_of(f))
        if (links_[l2].mark != visit) {
          links_[l2].mark = visit;
          stack_.push_back(l2);
        }
    }
  }
}

void FlowNetwork::solve_component(size_t links_begin, size_t flows_begin) {
  const std::span<const uint32_t> links(comp_links_.data() + links_begin, comp_links_.size() - links_begin);
  const std::span<const FlowId> flows(comp_flows_.data() + flows_begin, comp_flows_.size() - flows_begin);
  if (flows.empty()) return;
  if (flows.size() == 1) {
    fill_single(flows[0]);
    for (uint32_t l : links) links_[l].refill_mark = refill_epoch_;
    ++counters_.refilled_flows;
    return;
  }
  const uint64_t threshold = refill_threshold(links_begin);
  if (threshold != 0) {
    select_refill(links_begin, threshold);
    set_checkpoint();
    fill(refill_links_, refill_flows_);
    counters_.refilled_flows += refill_flows_.size();
    return;
  }
  // The whole component, from the links' capacities.
  for (uint32_t l : links) {
    LinkState& L = links_[l];
    L.refill_mark = refill_epoch_;
    L.rem = L.capacity;
    L.cnt = static_cast<uint32_t>(L.flows.size());
  }
  fill(links, flows);
  counters_.refilled_flows += flows.size();
  ++counters_.full_fills;
}

void FlowNetwork::fill_single(FlowId id) {
  // The tightest of its cap and its links' capacities, as progressive filling would find.
  Flow& f = flows_[id];
  double v = f.cap;
  for (uint32_t l : route_of(f)) v = std::min(v, share(links_[l].capacity, 1));
  f.new_rate = v;
  f.stamp = ++action_seq_;
}

uint64_t FlowNetwork::refill_threshold(size_t links_begin) const {
  // The lowest stamp removed from the component's changed links; 0 (the whole component) where a
  // flow arrived.
  uint64_t t = UINT64_MAX;
  for (size_t i = links_begin; i < comp_links_.size(); ++i) {
    const LinkState& L = links_[comp_links_[i]];
    if (!L.dirty) continue;
    t = std::min(t, L.removed);
    for (FlowId id : L.flows)
      if (flows_[id].due_ps < 0) return 0;
  }
  return t == UINT64_MAX ? 0 : t;
}

void FlowNetwork::select_refill(size_t links_begin, uint64_t threshold) {
  // The flows at or above the threshold (and the unsolved ones) connected to the changed links
  // through such flows, and their links.
  refill_links_.clear();
  refill_flows_.clear();
  for (size_t i = links_begin; i < comp_links_.size(); ++i) {
    const uint32_t l = comp_links_[i];
    if (links_[l].dirty) stack_.push_back(l);
  }
  while (!stack_.empty()) {
    const uint32_t l = stack_.back();
    stack_.pop_back();
    refill_links_.push_back(l);
    for (FlowId id : links_[l].flows) {
      Flow& f = flows_[id];
      if (f.refill_mark == refill_epoch_ || f.stamp < threshold) continue;
      f.refill_mark = refill_epoch_;
      refill_flows_.push_back(id);
      for (uint32_t l2 : route_of(f))
        if (links_[l2].refill_mark != refill_epoch_) {
          links_[l2].refill_mark = refill_epoch_;
          stack_.push_back(l2);
        }
    }
  }
}

void FlowNetwork::set_checkpoint() {
  // Each link's state when the filling reaches the threshold: its capacity less its flows below
  // the threshold, subtracted in key order (flows frozen by one action subtract the same value).
  for (uint32_t l : refill_links_) {
    LinkState& L = links_[l];
    below_.clear();
    L.cnt = 0;
    for (FlowId id : L.flows) {
      const Flow& f = flows_[id];
      if (f.refill_mark == refill_epoch_) {
        ++L.cnt;
      } else {
        below_.emplace_back(f.stamp, f.rate);
      }
    }
    if (below_.size() > 1) std::sort(below_.begin(), below_.end());
    L.rem = L.capacity;
    for (const auto& [stamp, rate] : below_) L.rem -= rate;
  }
}

void FlowNetwork::apply_rates() {
  // Link loads (integrating the old ones first), then flows whose rate changed. Every link of a
  // touched component is integrated up to now; only re-filled links can change their load.
  const SimTime now = engine_.now();
  for (uint32_t l : comp_links_) {
    LinkState& L = links_[l];
    flush_link(L);
    if (L.refill_mark != refill_epoch_) continue;
    double load = 0;
    for (FlowId id : L.flows) load += flows_[id].new_rate;
    L.load = load;
    const double ratio = load / L.capacity;
    max_link_load_ = std::max(max_link_load_, ratio);
    CCSIM_CHECK(ratio <= 1 + 1e-9, "link {} carries {} of its capacity", l, ratio);
  }
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    CCSIM_CHECK(f.new_rate > 0, "flow {} got rate {}", id, f.new_rate);
    if (f.new_rate == f.rate && f.due_ps >= 0) continue;
    if (f.rate > 0) f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last).seconds());
    f.last = now;
    f.rate = f.new_rate;
    f.due_ps = (now + Duration::from_seconds_ceil(f.remaining / f.rate)).ps();
    ++counters_.rate_changes;
    batches_[batch_at(f.due_ps)].completions.push_back(id);
  }
}

void FlowNetwork::freeze(Flow& f, double rate, uint64_t stamp) {
  f.new_rate = rate;
  f.stamp = stamp;
  for (uint32_t l : route_of(f)) {
    LinkState& L = links_[l];
    L.rem -= rate;
    --L.cnt;
    ++L.version;
    if (L.cnt == 0) continue;
    // Rounding can lower a share by an ulp: then the link gets a fresh entry at its lower key, so
    // that every link keeps an entry no larger than its share.
    const double s = share(L.rem, L.cnt);
    if (s < L.heap_key) {
      L.heap_key = s;
      heap_.push_back(Constraint::link(s, l, L.version));
      std::push_heap(heap_.begin(), heap_.end(), ConstraintLater{});
    }
  }
}

void FlowNetwork::fill(std::span<const uint32_t> links, std::span<const FlowId> flows) {
  // Progressive filling, tightest constraint first (ties: value, caps before links, index), from
  // each link's `rem` over its `cnt` unfrozen flows.
  heap_.clear();
  for (uint32_t l : links) {
    LinkState& L = links_[l];
    ++L.version;
    L.heap_key = kNoCap;
    if (L.cnt > 1) {
      L.heap_key = share(L.rem, L.cnt);
      heap_.push_back(Constraint::link(L.heap_key, l, L.version));
    }
  }
  // A link crossed by one unfrozen flow keeps its key until that flow freezes, after which it has
  // none: of a flow's private links only the smallest key can ever act, so only it enters.
  for (FlowId id : flows) {
    Flow& f = flows_[id];
    f.new_rate = -1;
    if (std::isfinite(f.cap)) heap_.push_back(Constraint::cap(f.cap, id));
    const Constraint* best = nullptr;
    Constraint c;
    for (uint32_t l : route_of(f)) {
      const LinkState& L = links_[l];
      if (L.cnt != 1) continue;
      const Constraint k = Constraint::link(share(L.rem, 1), l, L.version);
      if (best == nullptr || ConstraintLater{}(c, k)) {
        c = k;
        best = &c;
      }
    }
    if (best != nullptr) {
      links_[c.index()].heap_key = c.value;
      heap_.push_back(c);
    }
  }
  std::make_heap(heap_.begin(), heap_.end(), ConstraintLater{});
  // Every link has an entry no larger than its share (shares rise as flows freeze; where rounding
  // lowers one, freeze() adds an entry), so a stale entry is re-keyed when it surfaces and an
  // entry is acted on only when it is current: the order of actions is the eager one, and each
  // action's flows take the next stamp.
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), ConstraintLater{});
    const Constraint c = heap_.back();
    heap_.pop_back();
    if (!c.is_link()) {
      Flow& f = flows_[c.index()];
      if (f.new_rate >= 0) continue;
      freeze(f, c.value, ++action_seq_);
      continue;
    }
    LinkState& L = links_[c.index()];
    if (L.cnt == 0) continue;
    if (c.version != L.version) {
      L.heap_key = share(L.rem, L.cnt);
      heap_.push_back(Constraint::link(L.heap_key, c.index(), L.version));
      std::push_heap(heap_.begin(), heap_.end(), ConstraintLater{});
      continue;
    }
    const uint64_t stamp = ++action_seq_;
    for (FlowId id : L.flows)
      if (flows_[id].new_rate < 0) freeze(flows_[id], c.value, stamp);
  }
}

void FlowNetwork::complete(FlowId id) {
  Flow& f = flows_[id];
  f.due_ps = -1;
  for (uint32_t i = 0; i < f.route_len; ++i) {
    const uint32_t l = route_pool_[f.route_off + i];
    const uint32_t p = pos_pool_[f.route_off + i];
    LinkState& L = links_[l];
    L.done_bytes += f.size;
    L.removed = std::min(L.removed, f.stamp);
    const FlowId moved = L.flows.back();
    L.flows[p] = moved;
    L.flows.pop_back();
    if (moved != id) {
      const Flow& m = flows_[moved];
      for (uint32_t j = 0; j < m.route_len; ++j)
        if (route_pool_[m.route_off + j] == l) {
          pos_pool_[m.route_off + j] = p;
          break;
        }
    }
    mark_dirty(l);
  }
  free_route(f.route_off, f.route_len);
  f.active = false;
  f.rate = 0;
  f.remaining = 0;
  --active_count_;
  Engine::Callback cb = std::move(f.on_done);
  f.on_done = nullptr;
  const Duration latency = f.latency;
  free_ids_.push_back(id);
  if (latency == Duration::zero()) {
    cb();
  } else {
    batches_[batch_at((engine_.now() + latency).ps())].deliveries.push_back(std::move(cb));
  }
}

}  // namespace ccsim::sim
