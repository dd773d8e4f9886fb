#include "sim/network/flow_network.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "sim/base/check.hpp"

namespace ccsim::sim {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// A shared link whose load is below (1 - kSlackMargin) of its capacity is slack: it never binds.
constexpr double kSlackMargin = 1.0 / 1024;
/// Only links shared by at most this many flows are left out when slack. Finding a slack link
/// binding costs its region a second, whole filling, and a link that many flows share comes back to
/// saturation as soon as a few of them speed up (SDP4Bit's all-to-alls on shared NICs: of the
/// slack links found binding, 93 % carried five flows or more; the fat-tree butterfly: 0.4 %).
constexpr size_t kMaxSlackFlows = 4;

/// Whether a load leaves a link slack: short of its capacity by more than kSlackMargin of it.
bool leaves_slack(double load, double capacity) { return load < capacity * (1 - kSlackMargin); }

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
    L.arrived = true;
    L.slack = false;
  }
  ++active_count_;
  counters_.peak_active_flows = std::max(counters_.peak_active_flows, active_count_);
  return id;
}

double FlowNetwork::rate(FlowId id) const { return id < flows_.size() && flows_[id].active ? flows_[id].rate : 0.0; }

void FlowNetwork::flush_link(LinkState& L) {
  const SimTime now = engine_.now();
  if (now == L.last_change) return;
  if (L.load > 0) {
    L.busy_ps += (now - L.last_change).ps();
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
    stats_out_[l].busy_s = Duration::from_ps(links_[l].busy_ps).seconds();
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

IdleMark FlowNetwork::idle_mark() {
  CCSIM_CHECK(idle(), "idle_mark with {} flows in flight", active_count_);
  IdleMark m;
  m.bytes.resize(links_.size());
  m.busy_ps.resize(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) {
    flush_link(links_[l]);
    m.bytes[l] = links_[l].done_bytes;
    m.busy_ps[l] = links_[l].busy_ps;
  }
  m.counters = counters_;
  return m;
}

namespace {
/// Whether a byte count is an integer that doubles hold exactly, with room to add.
bool exact_bytes(double b) { return b >= 0 && b < 0x1p53 && b == std::floor(b); }

/// The counters that are sums (peak_active_flows is a maximum).
constexpr uint64_t FlowNetworkCounters::*kSummedCounters[] = {
    &FlowNetworkCounters::flows_started,  &FlowNetworkCounters::solves,        &FlowNetworkCounters::solved_flows,
    &FlowNetworkCounters::refilled_flows, &FlowNetworkCounters::full_fills,    &FlowNetworkCounters::partial_fills,
    &FlowNetworkCounters::widenings,      &FlowNetworkCounters::rate_changes};
}  // namespace

std::optional<NetworkDelta> FlowNetwork::delta_since(const IdleMark& mark) {
  CCSIM_CHECK(idle() && bin_ == Duration::zero(), "delta_since needs an idle network without a timeline");
  const IdleMark now = idle_mark();
  NetworkDelta d;
  for (uint32_t l = 0; l < links_.size(); ++l) {
    if (now.bytes[l] == mark.bytes[l] && now.busy_ps[l] == mark.busy_ps[l]) continue;
    if (!exact_bytes(now.bytes[l]) || !exact_bytes(mark.bytes[l])) return std::nullopt;
    d.links.push_back({l, now.bytes[l] - mark.bytes[l], now.busy_ps[l] - mark.busy_ps[l], links_[l].stats.max_flows});
  }
  d.counters = counters_;
  for (auto m : kSummedCounters) d.counters.*m -= mark.counters.*m;
  d.max_link_load = max_link_load_;
  return d;
}

bool FlowNetwork::can_add(const NetworkDelta& d) const {
  for (const NetworkDelta::Link& x : d.links)
    if (!exact_bytes(links_[x.link].done_bytes + x.bytes)) return false;
  return true;
}

void FlowNetwork::add_delta(const NetworkDelta& d) {
  CCSIM_CHECK(idle() && bin_ == Duration::zero() && can_add(d), "add_delta needs an idle network without a timeline");
  for (const NetworkDelta::Link& x : d.links) {
    LinkState& L = links_[x.link];
    flush_link(L);
    L.done_bytes += x.bytes;
    L.busy_ps += x.busy_ps;
    L.stats.max_flows = std::max(L.stats.max_flows, x.max_flows);
  }
  for (auto m : kSummedCounters) counters_.*m += d.counters.*m;
  counters_.peak_active_flows = std::max(counters_.peak_active_flows, d.counters.peak_active_flows);
  max_link_load_ = std::max(max_link_load_, d.max_link_load);
}

std::vector<uint32_t> FlowNetwork::attached_batches() const {
  std::vector<char> is_free(batches_.size(), 0);
  for (uint32_t b : free_batches_) is_free[b] = 1;
  std::vector<uint32_t> out;
  for (uint32_t b = 0; b < batches_.size(); ++b)
    if (!is_free[b] && !batches_[b].detached) out.push_back(b);
  return out;
}

bool FlowNetwork::detach_batches() {
  if (!idle()) return false;
  const std::vector<uint32_t> pending = attached_batches();
  for (uint32_t b : pending)
    if (!batches_[b].deliveries.empty()) return false;
  for (uint32_t b : pending) {
    Batch& B = batches_[b];
    batch_index_.erase(B.time_ps);
    B.completions.clear();  // every one stale: no flow is in flight
    B.detached = true;
  }
  last_batch_time_ = -1;
  return true;
}

std::vector<int64_t> FlowNetwork::stale_batch_times() const {
  CCSIM_CHECK(idle(), "stale_batch_times with {} flows in flight", active_count_);
  std::vector<int64_t> t;
  for (uint32_t b : attached_batches()) t.push_back(batches_[b].time_ps);
  return t;
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
  if (batches_[b].detached) {  // stale, and no longer in the index (another batch may hold its time)
    batches_[b].detached = false;
    free_batches_.push_back(b);
    return;
  }
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
  ++solve_id_;
  forced_any_ = false;
  // Marks compare equal to one walk's epoch, and covered() to this solve's: a solve takes far fewer
  // than 2^31 epochs, so starting again from 0 between solves, every mark cleared, keeps them apart.
  if (epoch_ > (1u << 31)) {
    for (LinkState& L : links_) L.mark = 0;
    for (Flow& f : flows_) f.mark = 0;
    epoch_ = 0;
  }
  comp_flows_.clear();
  if (bin_ > Duration::zero()) flush_components();
  solve_base_ = epoch_;
  // A region where a flow arrived is walked and filled whole: one per changed link crossed by an
  // arriving flow that no earlier region reached.
  for (uint32_t seed : dirty_links_)
    if (links_[seed].arrived && !covered(seed)) solve_whole(seed);
  refill_removals();
  apply_rates();
  for (uint32_t l : dirty_links_) {
    links_[l].dirty = false;
    links_[l].arrived = false;
    links_[l].removed = UINT64_MAX;
  }
  dirty_links_.clear();
}

bool FlowNetwork::reach(uint32_t l, uint32_t visit) {
  // Whether a walk marked `visit` goes on through link l: a binding link not yet reached. A slack
  // one is noted for widen(); its state only keeps freeze() from ever giving it a heap entry.
  LinkState& L = links_[l];
  if (L.mark == visit) return false;
  L.mark = visit;
  if (!L.slack) return true;
  L.rem = L.capacity;
  L.cnt = static_cast<uint32_t>(L.flows.size());
  L.heap_key = -1;
  slack_links_.push_back(l);
  return false;
}

void FlowNetwork::solve_whole(uint32_t seed) {
  // The flows reached from `seed` through binding links, filled whole from their links'
  // capacities; filled again, wider, while a slack link they cross would bind at the new rates.
  const size_t begin = comp_flows_.size();
  for (;;) {
    comp_flows_.resize(begin);
    const double private_min = walk_component(seed, ++epoch_);
    counters_.solved_flows += comp_flows_.size() - begin;
    solve_component(begin, private_min);
    if (!widen()) return;
    ++counters_.widenings;
  }
}

double FlowNetwork::new_load(const LinkState& L) const {
  // Outside the regions re-filled in this solve, a flow's new rate is its rate.
  double load = 0;
  for (FlowId id : L.flows) load += flows_[id].new_rate;
  return load;
}

bool FlowNetwork::widen() {
  // Marks the slack links the last region crossed that its new rates leave binding; true if any.
  bool widened = false;
  for (uint32_t l : slack_links_) {
    LinkState& L = links_[l];
    if (!leaves_slack(new_load(L), L.capacity)) {
      L.forced = solve_id_;
      L.slack = false;
      forced_any_ = true;
      widened = true;
    }
  }
  return widened;
}

void FlowNetwork::refill_removals() {
  // The changed binding links that no arrival's region reached saw removals only. From the lowest
  // removed stamp up, each such link not yet reached grows a region: the flows stamped at or above
  // its removed stamp connected to it through such flows and binding links. Every action stamped
  // below that stamp is unchanged there (a region reaching a later changed link covers it; one
  // that does not shares no binding link and no flow at or above its stamp with it), so each
  // region is re-filled on its own. A region that meets a link found binding in this solve, or
  // whose new rates would make a slack link bind, is filled whole instead.
  removal_seeds_.clear();
  for (uint32_t l : dirty_links_) {
    const LinkState& L = links_[l];
    // A link left without flows has nothing to re-fill (apply_rates() zeroes its load), and a slack
    // one stays slack.
    if (!covered(l) && !L.flows.empty() && !L.slack) removal_seeds_.emplace_back(L.removed, l);
  }
  std::sort(removal_seeds_.begin(), removal_seeds_.end());
  for (const auto& [removed, seed] : removal_seeds_) {
    if (covered(seed)) continue;
    if (!select_refill(seed, removed == UINT64_MAX ? 0 : removed)) {
      solve_whole(seed);
      continue;
    }
    set_checkpoint();
    if (!refill_flows_.empty()) {
      fill(refill_links_, refill_flows_);
      ++counters_.partial_fills;
    }
    counters_.refilled_flows += refill_flows_.size();
    counters_.solved_flows += refill_flows_.size();
    if (widen()) {
      ++counters_.widenings;
      solve_whole(seed);
      continue;
    }
    comp_flows_.insert(comp_flows_.end(), refill_flows_.begin(), refill_flows_.end());
  }
}

double FlowNetwork::walk_component(uint32_t seed, uint32_t visit) {
  // The region is filled whole, from its links' capacities: each binding link and flow enters the
  // filling as the walk reaches it. Returns the smallest private key.
  heap_.clear();
  private_.clear();
  slack_links_.clear();
  double smallest = kNoCap;
  links_[seed].mark = visit;
  stack_.push_back(seed);
  while (!stack_.empty()) {
    const uint32_t l = stack_.back();
    stack_.pop_back();
    LinkState& L = links_[l];
    L.rem = L.capacity;
    L.cnt = static_cast<uint32_t>(L.flows.size());
    enter_link(l);
    for (FlowId id : L.flows) {
      Flow& f = flows_[id];
      if (f.mark == visit) continue;
      f.mark = visit;
      comp_flows_.push_back(id);
      enter_flow<true>(id, smallest);
      for (uint32_t l2 : route_of(f))
        if (reach(l2, visit)) stack_.push_back(l2);
    }
  }
  return smallest;
}

void FlowNetwork::solve_component(size_t flows_begin, double private_min) {
  const std::span<const FlowId> flows(comp_flows_.data() + flows_begin, comp_flows_.size() - flows_begin);
  if (flows.size() == 1) {
    fill_single(flows[0]);  // the entries the walk made are not needed
    ++counters_.refilled_flows;
    return;
  }
  // The whole region: its links and flows entered the filling during the walk.
  fill_run(private_min, flows.size());
  counters_.refilled_flows += flows.size();
  ++counters_.full_fills;
}

void FlowNetwork::fill_single(FlowId id) {
  // The tightest of its cap and its links' capacities, as progressive filling would find. A link
  // it shares is slack (a binding one would have brought its other flows into the region).
  Flow& f = flows_[id];
  double v = f.cap;
  for (uint32_t l : route_of(f))
    if (links_[l].flows.size() == 1) v = std::min(v, share(links_[l].capacity, 1));
  f.new_rate = v;
  f.stamp = ++action_seq_;
}

void FlowNetwork::flush_components() {
  // A timeline's bins add each stretch of constant load on its own, so their bits depend on where
  // a link's time is cut: every link of a changed component (through every link) is brought up
  // to date at its old load, whatever part of it is re-filled.
  const uint32_t flushed = ++epoch_;
  for (uint32_t seed : dirty_links_) {
    if (links_[seed].mark == flushed) continue;
    links_[seed].mark = flushed;
    stack_.push_back(seed);
    while (!stack_.empty()) {
      LinkState& L = links_[stack_.back()];
      stack_.pop_back();
      flush_link(L);
      for (FlowId id : L.flows)
        for (uint32_t l2 : route_of(flows_[id]))
          if (links_[l2].mark != flushed) {
            links_[l2].mark = flushed;
            stack_.push_back(l2);
          }
    }
  }
}

bool FlowNetwork::select_refill(uint32_t seed, uint64_t threshold) {
  // The flows at or above the threshold connected to `seed` through such flows and binding links,
  // and those links. False if it meets a link found binding in this solve although it was slack:
  // that link's flows were stamped by separate fillings, so it has no checkpoint.
  refill_links_.clear();
  refill_flows_.clear();
  slack_links_.clear();
  const uint32_t visit = refill_visit_ = ++epoch_;
  links_[seed].mark = visit;
  stack_.push_back(seed);
  bool ok = true;
  while (!stack_.empty()) {
    const uint32_t l = stack_.back();
    stack_.pop_back();
    ok = ok && !(forced_any_ && links_[l].forced == solve_id_);
    refill_links_.push_back(l);
    for (FlowId id : links_[l].flows) {
      Flow& f = flows_[id];
      if (f.mark == visit || f.stamp < threshold) continue;
      f.mark = visit;
      refill_flows_.push_back(id);
      for (uint32_t l2 : route_of(f))
        if (reach(l2, visit)) stack_.push_back(l2);
    }
  }
  return ok;
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
      if (f.mark == refill_visit_) {
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
  // The flows whose rate changed (or that arrived) first; then the loads of the links they cross
  // and of the changed links, each integrated up to now at its old load first; then those flows'
  // completion times, in the order of the component. Every other link of a touched component
  // carries the same flows at the same rates, so its load and (busy time being exact) its counters
  // need nothing; a timeline, whose bins add each stretch of constant load on its own, still has
  // every link of the component brought up to date.
  const SimTime now = engine_.now();
  const uint32_t mark = ++epoch_;
  load_links_.clear();
  changed_flows_.clear();
  auto add_link = [&](uint32_t l) {
    if (links_[l].mark == mark) return;
    links_[l].mark = mark;
    load_links_.push_back(l);
  };
  for (uint32_t l : dirty_links_) add_link(l);
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    if (f.mark == mark) continue;  // re-filled by two regions of this solve (a widened one took the other in)
    f.mark = mark;
    CCSIM_CHECK(f.new_rate > 0, "flow {} got rate {}", id, f.new_rate);
    if (f.new_rate == f.rate && f.due_ps >= 0) continue;
    changed_flows_.push_back(id);
    for (uint32_t l : route_of(f)) add_link(l);
  }
  for (uint32_t l : load_links_) {
    LinkState& L = links_[l];
    flush_link(L);
    const double load = new_load(L);
    L.load = load;
    // Slack: shared by two to kMaxSlackFlows flows, its load short of its capacity by more than
    // kSlackMargin of it (the header says why such a link never binds). An arrival, or finding it
    // binding in a solve (widen()), clears it until its load is summed again.
    L.slack = L.flows.size() >= 2 && L.flows.size() <= kMaxSlackFlows && leaves_slack(load, L.capacity);
    const double ratio = load / L.capacity;
    max_link_load_ = std::max(max_link_load_, ratio);
    CCSIM_CHECK(ratio <= 1 + 1e-9, "link {} carries {} of its capacity", l, ratio);
  }
  for (FlowId id : changed_flows_) {
    Flow& f = flows_[id];
    if (f.rate > 0) f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last).seconds());
    f.last = now;
    f.rate = f.new_rate;
    f.due_ps = (now + Duration::from_seconds_ceil(f.remaining / f.rate)).ps();
    ++counters_.rate_changes;
    batches_[batch_at(f.due_ps)].completions.push_back(id);
  }
}

// The filling's heap: 4-ary, smallest (value, key) at the front. Values are shares and caps, never
// negative, so their bits ordered as integers order them as numbers: (value, key) is one 96-bit
// integer, compared without branches (ties of value are common: equal links share equally).
namespace {
__extension__ typedef unsigned __int128 OrderKey;  // GCC and Clang on 64-bit targets
OrderKey order_key(double value, uint32_t key) {
  return (static_cast<OrderKey>(std::bit_cast<uint64_t>(value)) << 32) | key;
}
}  // namespace

void FlowNetwork::heap_sift_down(size_t i, Constraint c) {
  Constraint* h = heap_.data();
  const size_t n = heap_.size();
  const OrderKey ck = order_key(c.value, c.key);
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best = first;
    OrderKey bk = order_key(h[first].value, h[first].key);
    const size_t last = std::min(first + 4, n);
    for (size_t j = first + 1; j < last; ++j) {
      const OrderKey k = order_key(h[j].value, h[j].key);
      const bool lt = k < bk;
      best = lt ? j : best;
      bk = lt ? k : bk;
    }
    if (!(bk < ck)) break;
    h[i] = h[best];
    i = best;
  }
  h[i] = c;
}

void FlowNetwork::heap_make() {
  for (size_t i = heap_.size() / 4 + 1; i-- > 0;)
    if (i < heap_.size()) heap_sift_down(i, heap_[i]);
}

void FlowNetwork::heap_pop() {
  const Constraint last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) heap_sift_down(0, last);
}

void FlowNetwork::heap_push(Constraint c) {
  heap_.push_back(c);
  Constraint* h = heap_.data();
  size_t i = heap_.size() - 1;
  const OrderKey ck = order_key(c.value, c.key);
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!(ck < order_key(h[parent].value, h[parent].key))) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = c;
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
      heap_push(Constraint::link(s, l, L.version));
    }
  }
}

double FlowNetwork::fill_entries(std::span<const uint32_t> links, std::span<const FlowId> flows) {
  // Shared links and caps enter the heap. A link crossed by one unfrozen flow keeps its key until
  // that flow freezes, after which it has none: of a flow's private links only the smallest key can
  // ever act, so only it enters, into `private_`. Returns the smallest private key.
  heap_.clear();
  private_.clear();
  for (uint32_t l : links) enter_link(l);
  return enter_flows(flows);
}

void FlowNetwork::enter_link(uint32_t l) {
  LinkState& L = links_[l];
  ++L.version;
  L.heap_key = kNoCap;
  if (L.cnt > 1) {
    L.heap_key = share(L.rem, L.cnt);
    heap_.push_back(Constraint::link(L.heap_key, l, L.version));
  }
}

double FlowNetwork::enter_flows(std::span<const FlowId> flows) {
  double smallest = kNoCap;
  for (FlowId id : flows) enter_flow<false>(id, smallest);
  return smallest;
}

template <bool kWhole>
void FlowNetwork::enter_flow(FlowId id, double& smallest) {
  // A flow enters with its cap, and with the smallest key of its private links. In a component
  // filled whole (kWhole) a link's count is its number of flows and its remaining capacity all of
  // it, known before the walk reaches the link. A private link's own key is never read again.
  Flow& f = flows_[id];
  f.new_rate = -1;
  if (std::isfinite(f.cap)) heap_.push_back(Constraint::cap(f.cap, id));
  bool found = false;
  Constraint c;
  for (uint32_t l : route_of(f)) {
    const LinkState& L = links_[l];
    if ((kWhole ? L.flows.size() : L.cnt) != 1) continue;
    const Constraint k = Constraint::link(share(kWhole ? L.capacity : L.rem, 1), l, L.version);
    if (!found || order_key(k.value, k.key) < order_key(c.value, c.key)) {
      c = k;
      found = true;
    }
  }
  if (found) {
    private_.push_back(c);
    smallest = std::min(smallest, c.value);
  }
}

void FlowNetwork::sort_private() {
  // The private entries still alive (a dead one's link has no unfrozen flow), in heap order.
  std::erase_if(private_, [&](const Constraint& c) { return links_[c.index()].cnt == 0; });
  std::sort(private_.begin(), private_.end(), [](const Constraint& a, const Constraint& b) {
    return order_key(a.value, a.key) < order_key(b.value, b.key);
  });
}

void FlowNetwork::act(const LinkState& L, double value, size_t& unfrozen) {
  const uint64_t stamp = ++action_seq_;
  for (FlowId id : L.flows)
    if (flows_[id].new_rate < 0) {
      freeze(flows_[id], value, stamp);
      --unfrozen;
    }
}

void FlowNetwork::fill(std::span<const uint32_t> links, std::span<const FlowId> flows) {
  fill_run(fill_entries(links, flows), flows.size());
}

void FlowNetwork::fill_run(double private_min, size_t unfrozen) {
  // Progressive filling of the entered links and flows, tightest constraint first (ties: value,
  // caps before links, index), from each link's `rem` over its `cnt` unfrozen flows.
  heap_make();
  // Every link has an entry no larger than its share (shares rise as flows freeze; where rounding
  // lowers one, freeze() adds an entry), so a stale entry is re-keyed when it surfaces and an
  // entry is acted on only when it is current: the order of actions is the eager one, and each
  // action's flows take the next stamp. A private entry is never stale (its link changes only
  // when its flow freezes, leaving nothing to bind), so private entries wait outside the heap until
  // its smallest key reaches theirs, and are then merged in order, the dead ones dropped unsorted.
  // Once every flow is frozen, what is left is dead: the filling ends there.
  constexpr size_t kWaiting = SIZE_MAX;
  size_t next = kWaiting;
  while (unfrozen > 0) {
    if (next == kWaiting && (heap_.empty() || heap_.front().value >= private_min)) {
      sort_private();
      next = 0;
    }
    if (next != kWaiting) {
      while (next < private_.size() && links_[private_[next].index()].cnt == 0) ++next;
      const Constraint* p = next < private_.size() ? &private_[next] : nullptr;
      if (p != nullptr &&
          (heap_.empty() || order_key(p->value, p->key) < order_key(heap_.front().value, heap_.front().key))) {
        ++next;
        act(links_[p->index()], p->value, unfrozen);
        continue;
      }
    }
    CCSIM_CHECK(!heap_.empty(), "progressive filling ran out of constraints with {} flows unfrozen", unfrozen);
    const Constraint c = heap_.front();
    if (!c.is_link()) {
      heap_pop();
      Flow& f = flows_[c.index()];
      if (f.new_rate >= 0) continue;
      freeze(f, c.value, ++action_seq_);
      --unfrozen;
      continue;
    }
    LinkState& L = links_[c.index()];
    if (L.cnt == 0) {
      heap_pop();
      continue;
    }
    if (c.version != L.version) {  // re-keyed in place: one sift instead of a pop and a push
      L.heap_key = share(L.rem, L.cnt);
      heap_sift_down(0, Constraint::link(L.heap_key, c.index(), L.version));
      continue;
    }
    heap_pop();
    act(L, c.value, unfrozen);
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
