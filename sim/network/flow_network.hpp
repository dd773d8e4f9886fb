#pragma once
/// \file
/// Flow-level network: each transfer is a fluid flow along a route of directed links; concurrent
/// flows share links max-min fairly, computed by progressive filling (find the tightest
/// constraint — a link's remaining capacity over its unfrozen flows, or a flow's rate cap — freeze
/// the flows it binds at that rate, subtract, repeat), with optional per-flow rate caps (NIC
/// injection limits).
///
/// Rates are re-solved once per simulated instant in which flows started or finished (driven by
/// the engine's instant-end hook) and only over the part of the flow–link graph that the changes
/// can reach. A flow's completion time is recomputed only when its rate changes; completions (and
/// deliveries, one latency later) due at the same picosecond share one engine event, so a
/// synchronous step of n flows costs O(1) events, not O(n). A flow's bytes drain at its changing
/// rate; its completion is reported one route latency after the last byte leaves
/// (store-and-forward of the last bit, no queueing).
///
/// Ties between constraints are broken by (rate, caps before links, link index), so the
/// incremental solver and the from-scratch reference max_min_rates() give bit-identical rates.
///
/// Slack links are left out. A link shared by two to four flows whose load is below (1 - 2^-10) of
/// its capacity is slack (links shared by more flows come back to saturation too often to pay). A
/// link that acts in a filling (freezes its flows at its share) ends saturated to within
/// (2n+2)·2^-53 of its capacity (n: its flows), so a slack link never acted in the filling that
/// gave the current rates; leaving out a constraint that never acts changes no action, and the
/// flows left out of a region keep the rates their own filling gave them. So a re-solve walks and
/// fills only the flows reached from the changed links through binding links (and the links crossed
/// by an arriving flow): max-min rates of one such region do not depend on any other. After a
/// region is filled, each slack link its flows cross is summed at the new rates; one that would no
/// longer be slack is marked binding for the rest of the solve and the region is walked and filled
/// again, wider. A slack link that the new rates leave slack cannot act in the new filling either:
/// the flows it would freeze get, without it, no less than the share it would give them, less the
/// filling's rounding (ulps per action), which its margin covers many times over.
///
/// Inside a region, a re-solve after removals alone re-fills only the part whose rates can
/// change. Every action of a filling (a constraint freezing its flows) takes a stamp from one
/// increasing counter, and each flow keeps the stamp that froze it, so the stamps list a valid
/// filling order on every binding link (a link found binding although it was slack had its flows
/// stamped by separate fillings: a region meeting one is filled whole). Removing a flow leaves
/// every action stamped before its own unchanged (the links it crossed only get larger shares,
/// never winning earlier), so only the flows stamped at or after the lowest removed stamp that are
/// connected to the changed links through such flows and binding links are re-filled, from each
/// link's remaining capacity at that point: its capacity less the rates of its flows stamped before
/// it, subtracted in stamp order (the filling's own arithmetic; flows frozen by one action subtract
/// the same value). A region where a flow arrived is re-filled whole. In the order of their lowest
/// removed stamp, each changed binding link not yet reached grows a region from itself. A region
/// that reaches a later changed link covers its removals too (their stamps are higher); one that
/// does not shares no binding link with it, only flows stamped below its threshold, which keep
/// their rates. So a removal costs what it re-fills. Link counters do not depend on when a link is
/// brought up to date: busy time is kept in exact picoseconds (a timeline, whose bins add each
/// stretch of constant load, has every link of a changed component, through every link, brought up
/// to date).
///
/// Rounding can leave a link's share an ulp below its previous one after a freeze; the filling
/// then gives that link a fresh heap entry, so the order of actions is exactly the eager one of
/// max_min_rates() (equal-capacity networks, such as fat-trees, hit this).

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "sim/network/time_index.hpp"

namespace ccsim::sim {

using FlowId = uint32_t;

/// A directed link as the network model sees it.
struct LinkSpec {
  double capacity_Bps = 0;
};

/// Per-link counters.
struct LinkStats {
  double bytes = 0;         ///< bytes carried so far: the sizes of the flows completed across the link
                            ///< (exact), plus what the flows still on it have sent
  double busy_s = 0;        ///< time with at least one flow on the link
  uint32_t max_flows = 0;   ///< most flows sharing the link at once
};

/// Computes max-min fair rates by straightforward progressive filling from scratch (the reference
/// the incremental solver is tested against). `routes[f]` lists the links of flow f; `caps[f]` its
/// rate cap (infinity for none). Returns each flow's rate. Flows with an empty route get their cap.
std::vector<double> max_min_rates(const std::vector<double>& capacity, const std::vector<std::vector<uint32_t>>& routes,
                                  const std::vector<double>& caps);

/// Counters describing the work a network did.
struct FlowNetworkCounters {
  uint64_t flows_started = 0;
  uint64_t solves = 0;            ///< instants with a re-solve
  uint64_t solved_flows = 0;      ///< sum over solves of the flows visited: the components walked (where a
                                  ///< flow arrived) and the flows re-filled after removals
  uint64_t refilled_flows = 0;    ///< sum over solves of the flows re-filled (whole components where a flow
                                  ///< arrived, flows at or above the threshold after removals)
  uint64_t full_fills = 0;        ///< multi-flow components re-filled whole (a flow arrived)
  uint64_t partial_fills = 0;     ///< re-fills after removals alone (no component walked)
  uint64_t widenings = 0;         ///< regions filled again because a slack link they left out would bind
  uint64_t rate_changes = 0;      ///< completion events scheduled or rescheduled
  size_t peak_active_flows = 0;
};

/// A network's counters at an idle point (no flow in flight): FlowNetwork::idle_mark().
struct IdleMark {
  std::vector<double> bytes;       ///< per link: sizes of the flows completed across it
  std::vector<int64_t> busy_ps;    ///< per link: time with a flow on it
  FlowNetworkCounters counters;
};

/// What the flows between two idle points added to a network's counters, to be added again later
/// without running them (FlowNetwork::add_delta). Every figure is a sum of integers or a maximum,
/// so adding it gives the same bits as running the flows again would.
struct NetworkDelta {
  struct Link {
    uint32_t link = 0;
    double bytes = 0;       ///< an integer: the sizes of the flows completed across the link
    int64_t busy_ps = 0;
    uint32_t max_flows = 0; ///< the link's peak sharing after the run (a maximum)
  };
  std::vector<Link> links;        ///< the links whose counters moved
  FlowNetworkCounters counters;   ///< sums; peak_active_flows is the peak after the run
  double max_link_load = 0;       ///< after the run
};

/// The flow network, bound to an engine.
class FlowNetwork {
 public:
  static constexpr double kNoCap = std::numeric_limits<double>::infinity();

  FlowNetwork(Engine& engine, std::vector<LinkSpec> links);
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  /// Starts a flow of `bytes` along `route` now; `on_done` runs `latency` after its last byte is
  /// sent. `rate_cap_Bps` bounds its rate. The route is copied. REQUIRES: bytes >= 0, finite.
  FlowId start_flow(std::span<const uint32_t> route, double bytes, Duration latency, Engine::Callback on_done,
                    double rate_cap_Bps = kNoCap);

  /// Current rate of an active flow (0 if finished).
  double rate(FlowId f) const;
  size_t active_flows() const { return active_count_; }
  /// Link counters, brought up to date to the engine's current time.
  const std::vector<LinkStats>& link_stats();
  const FlowNetworkCounters& counters() const { return counters_; }
  /// Largest ratio of a link's summed flow rates to its capacity after any solve (≤ 1 + 1e-9).
  double max_link_load() const { return max_link_load_; }
  size_t num_links() const { return links_.size(); }

  /// Whether no flow is in flight.
  bool idle() const { return active_count_ == 0; }
  /// The counters now, brought up to date. REQUIRES: idle().
  IdleMark idle_mark();
  /// What the network's counters gained since `mark` (REQUIRES: idle(), no timeline), or nothing
  /// when a link's byte count is not an integer below 2^53 (flows of fractional sizes), since such
  /// a sum could not be added again with the same rounding.
  std::optional<NetworkDelta> delta_since(const IdleMark& mark);
  /// Whether add_delta(d) keeps every byte count an exact integer (below 2^53).
  bool can_add(const NetworkDelta& d) const;
  /// Adds a delta as if its flows had run again from now. REQUIRES: idle(), no timeline, can_add(d).
  void add_delta(const NetworkDelta& d);
  /// Detaches the pending completion batches, all stale while no flow is in flight: a flow started
  /// later gets a batch of its own even when due at the same picosecond as a stale one, so the
  /// order of what follows does not depend on the flows that came before. Their engine events
  /// still fire, doing nothing. Returns false, changing nothing, when not idle or when a batch
  /// still holds deliveries (completions whose latency has not passed).
  bool detach_batches();
  /// The times of the pending completion batches not detached, all stale while no flow is in
  /// flight: engine events still to fire, doing nothing but moving the clock.
  std::vector<int64_t> stale_batch_times() const;

  /// Records, from now on, each link's carried bytes in consecutive bins of width `bin` starting
  /// at time zero (utilization over time). REQUIRES: bin > 0; call before the first flow.
  void record_timeline(Duration bin);
  Duration timeline_bin() const { return bin_; }
  /// timeline()[l][b]: bytes link l carried in [b·bin, (b+1)·bin) (brought up to date by link_stats()).
  const std::vector<std::vector<double>>& timeline() const { return timeline_; }

 private:
  // Fields are ordered so that what the solver reads for every flow of a component (the walk, the
  // filling, applying rates) shares the first cache line.
  struct Flow {
    uint32_t route_off = 0;
    uint32_t route_len = 0;
    uint64_t mark = 0;     // the epoch of the last walk that reached it
    double new_rate = 0;   // solver scratch (< 0: not frozen yet)
    double rate = 0;
    uint64_t stamp = 0;    // the filling action that froze it (increasing along the filling order)
    double cap = kNoCap;
    int64_t due_ps = -1;   // completion time in the batches, -1 while unsolved
    double size = 0;       // bytes the flow carries in all
    double remaining = 0;  // bytes left at time `last`
    SimTime last;
    Duration latency;
    Engine::Callback on_done;
    bool active = false;
  };
  // The walk's and the filling's fields first (one cache line), the counters after.
  struct LinkState {
    uint32_t mark = 0;          // the epoch of the last walk that reached it
    bool slack = false;         // left out of re-solves (set where its load is summed)
    std::vector<FlowId> flows;  // active flows crossing the link
    double rem = 0;             // solver scratch
    double heap_key = 0;        // solver scratch: the key of the link's newest heap entry
    uint32_t cnt = 0;
    uint32_t version = 0;
    double capacity = 0;
    uint64_t removed = UINT64_MAX;  // the lowest stamp of the flows that left it since the last solve
    uint64_t forced = 0;        // the last solve that found it binding although it was slack
    bool dirty = false;
    bool arrived = false;       // a flow started on it since the last solve
    double load = 0;            // sum of their rates
    SimTime last_change;
    LinkStats stats;            // peak sharing; busy time and bytes are filled in by link_stats()
    int64_t busy_ps = 0;        // time with a flow on the link, exact whatever the flush points
    double done_bytes = 0;      // sizes of the completed flows that crossed the link
  };

  std::span<uint32_t> route_of(const Flow& f) { return {route_pool_.data() + f.route_off, f.route_len}; }
  std::span<uint32_t> pos_of(const Flow& f) { return {pos_pool_.data() + f.route_off, f.route_len}; }
  uint32_t alloc_route(uint32_t len);
  void free_route(uint32_t off, uint32_t len);
  void mark_dirty(uint32_t link);
  void flush_link(LinkState& l);
  void solve();
  /// For a binding link: whether a walk of this solve went through it (a slack one is marked too).
  bool covered(uint32_t link) const { return links_[link].mark > solve_base_; }
  bool reach(uint32_t l, uint32_t visit);
  void solve_whole(uint32_t seed);
  double walk_component(uint32_t seed, uint32_t visit);
  void solve_component(size_t flows_begin, double private_min);
  bool widen();
  double new_load(const LinkState& L) const;
  void refill_removals();
  void flush_components();
  bool select_refill(uint32_t seed, uint64_t threshold);
  void fill_single(FlowId id);
  void set_checkpoint();
  void fill(std::span<const uint32_t> links, std::span<const FlowId> flows);
  void freeze(Flow& f, double rate, uint64_t stamp);
  void apply_rates();
  void complete(FlowId id);
  /// The batch due at `t_ps`, created (with its engine event) if needed.
  uint32_t batch_at(int64_t t_ps);
  /// The pending batches still in the index (not free, not detached).
  std::vector<uint32_t> attached_batches() const;
  void fire_batch(uint32_t b);

  Engine& engine_;
  std::vector<LinkState> links_;
  std::vector<LinkStats> stats_out_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<uint32_t> route_pool_;  // link ids of every flow's route
  std::vector<uint32_t> pos_pool_;    // flow's index in each route link's `flows`
  std::vector<std::vector<uint32_t>> free_routes_;  // by length
  std::vector<uint32_t> dirty_links_;
  uint64_t action_seq_ = 0;  // stamps handed out so far
  size_t active_count_ = 0;
  uint32_t epoch_ = 0;       // walks' marks; started again from 0 before it could wrap
  uint32_t solve_base_ = 0;  // the epoch before this solve's first walk
  uint64_t solve_id_ = 0;
  bool forced_any_ = false;  // a slack link was found binding in this solve
  FlowNetworkCounters counters_;
  double max_link_load_ = 0;
  Duration bin_ = Duration::zero();
  std::vector<std::vector<double>> timeline_;
  // Solver scratch, kept to avoid reallocation.
  std::vector<uint32_t> comp_flows_, stack_;
  std::vector<uint32_t> slack_links_;                    // the slack links a region's flows cross
  std::vector<uint32_t> refill_links_, refill_flows_;  // the part of a component re-filled
  std::vector<std::pair<uint64_t, uint32_t>> removal_seeds_;  // (removed stamp, link) of a re-solve
  std::vector<uint32_t> load_links_, changed_flows_;           // what apply_rates() updates
  std::vector<std::pair<uint64_t, double>> below_;       // a link's flows under the threshold
  uint32_t refill_visit_ = 0;  // the mark of the flows and links of the removal region being re-filled
  /// A heap entry: a flow's cap or a link's share. 16 bytes: the kind is the top bit of `key`
  /// (caps 0, links 1) above the flow or link index, so (value, key) is the heap order.
  struct Constraint {
    static constexpr uint32_t kLinkBit = 1u << 31;
    double value;
    uint32_t key;
    uint32_t version;
    static Constraint cap(double v, FlowId f) { return {v, f, 0}; }
    static Constraint link(double v, uint32_t l, uint32_t version) { return {v, l | kLinkBit, version}; }
    bool is_link() const { return (key & kLinkBit) != 0; }
    uint32_t index() const { return key & ~kLinkBit; }
  };
  std::vector<Constraint> heap_;     // 4-ary, smallest (value, key) first
  std::vector<Constraint> private_;  // flows' private-link entries, outside the heap
  double fill_entries(std::span<const uint32_t> links, std::span<const FlowId> flows);
  void enter_link(uint32_t l);
  double enter_flows(std::span<const FlowId> flows);
  template <bool kWhole>
  void enter_flow(FlowId id, double& smallest);
  void fill_run(double private_min, size_t unfrozen);
  void sort_private();
  void act(const LinkState& L, double value, size_t& unfrozen);
  void heap_make();
  void heap_pop();
  void heap_push(Constraint c);
  void heap_sift_down(size_t i, Constraint c);  // puts `c` at slot i (or below): the root when re-keying the top
  /// Completions and deliveries due at one instant (stale completions are skipped when fired).
  struct Batch {
    int64_t time_ps = 0;
    bool detached = false;  // left by detach_batches(): fires as a no-op, not in the index
    std::vector<FlowId> completions;
    std::vector<Engine::Callback> deliveries;
  };
  TimeIndex batch_index_;  // pending batches by time
  std::vector<Batch> batches_;
  std::vector<uint32_t> free_batches_;
  int64_t last_batch_time_ = -1;
  uint32_t last_batch_ = 0;
};

}  // namespace ccsim::sim
