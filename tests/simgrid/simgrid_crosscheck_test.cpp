// Cross-check of ccsim's flow model (sim/network/flow_network.hpp, sim/schedule_runner.hpp) against
// SimGrid's flow-level max-min solver. Built only when libsimgrid-dev is installed (see the end of
// tests/CMakeLists.txt); written against SimGrid 3.32 (Debian bookworm).
//
// SimGrid configuration, the command line of every SimGrid run (kSimgridArgs, from max_min_config.hpp):
//   --cfg=network/model:CM02            Casanova-Marchal max-min sharing, without LV08's corrections;
//   --cfg=network/latency-factor:1      CM02's own defaults, also set explicitly: no latency or
//   --cfg=network/bandwidth-factor:1    bandwidth correction factor, and no weight-S term in a
//   --cfg=network/weight-S:0            flow's sharing penalty
//   --cfg=network/TCP-gamma:0           no TCP-window bound gamma / (2 * latency) on a flow's rate
//   --cfg=network/crosstraffic:0        no reverse-path ACK load (5% of the rate on the back route)
//   --cfg=surf/precision:1e-12          events closer than 1 ps merge (default 1e-9 s)
//   --cfg=maxmin/precision:1e-5         SimGrid's default, relative to a link's bandwidth
//   --cfg=network/optim:Lazy            when every link has zero latency, Full otherwise (see below)
//   --cfg=contexts/stack-size:256       KiB per actor (the driver's actors are tiny; 8 MiB by default)
// Platform: one full-routing zone; every ccsim directed link is one SimGrid link (SHARED policy,
// same bandwidth and latency); every transfer's route is an explicit non-symmetrical SimGrid route
// listing exactly ccsim's links. SimGrid routes belong to host pairs while ccsim's ECMP may route
// two transfers between the same ranks differently, so a rank gets one sending host per distinct
// route it uses towards a destination. A flow's rate cap is a private link of that bandwidth at
// the end of its route (the same max-min constraint; SimGrid 3.32 ignores Comm::set_rate() on
// host-to-host comms). Transfers are host-to-host comms (Comm::sendto), one short-lived actor
// each, started when their dependencies are done; hosts and CPUs play no part in the timing.
//
// Tolerance: with zero latency CM02 is plain max-min fairness (every flow's sharing penalty is
// 1), so completion times agree up to rounding. ccsim rounds each completion up to the next
// picosecond, so times differ by a few ps; every flow here lasts at least 10 us, and the tests
// assert kRelTol = 1e-6 relative. Measured (each test prints its own): random flows at most
// 2.5e-8 relative (about 2 ps), collectives 4.3e-8 (42 ps, butterfly on the fat-tree). SimGrid's
// default precisions give the same numbers; maxmin/precision 1e-9 makes SimGrid abort ("Cannot
// saturate more a constraint that has no active element") on RTT-weighted problems.
//
// Where the models disagree (printed and asserted as such, never hidden by the tolerance):
//  * CM02 shares a link in proportion to 1 / route latency (a flow's sharing penalty is its route
//    latency: RTT unfairness, independent of the latency's scale); ccsim shares equally. The two
//    agree when all concurrent flows have the same route latency (or none).
//  * CM02 pays a flow's latency before its bytes start to compete for bandwidth; ccsim after its
//    last byte. Same completion time for a flow alone.
//  * SimGrid 3.32 bug: with network/optim:Lazy, a flow whose route has latency > 0 and whose
//    bottleneck is a zero-latency link used by no other flow overruns that link (it got 2 GB/s
//    through a 1 GB/s link); network/optim:Full is correct, hence Full whenever latency is nonzero.
//
// SimGrid keeps one engine per process and cannot restart it, so each SimGrid simulation runs in a
// forked child that sends its results back through a pipe.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simgrid/s4u.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/check.hpp"
#include "sim/network/flow_network.hpp"
#include "sim/schedule_runner.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"

#include "max_min_config.hpp"

namespace ccsim::sim {
namespace {

namespace sg4 = simgrid::s4u;

constexpr double kRelTol = 1e-6;

const std::vector<std::string> kSimgridArgs = simgrid_cfg::max_min_args("ccsim_simgrid_crosscheck");

// ---- the problem both simulators run ------------------------------------------------------------

struct NetLink {
  double capacity_Bps = 0;
  double latency_s = 0;
};

/// A transfer (from endpoint `src` to `dst` along `route`) or, when !transfer, an instantaneous op
/// (a free kernel). An op starts when all its dependencies have finished, and not before `start`.
struct NetOp {
  bool transfer = false;
  uint32_t src = 0;
  uint32_t dst = 0;
  std::vector<topo::LinkId> route;
  uint64_t bytes = 0;
  double rate_cap_Bps = FlowNetwork::kNoCap;
  SimTime start;
  std::vector<uint32_t> deps;  ///< op indices
};

struct NetProblem {
  std::vector<NetLink> links;
  std::vector<NetOp> ops;
};

/// One simulator's answer: each op's end time and the wall time it took.
struct RunResult {
  std::vector<double> end_s;
  double setup_s = 0;  ///< SimGrid: building the platform
  double run_s = 0;    ///< simulating (ccsim: including the schedule's generation)
  std::string error;   ///< non-empty when the SimGrid child failed
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- SimGrid side ---------------------------------------------------------------------------------

/// The SimGrid platform of a problem (see the file comment): transfer i runs from src_host[i] to
/// dst_host[i] along exactly its ccsim route (plus its private cap link, if capped).
struct SgPlatform {
  std::vector<sg4::Host*> src_host, dst_host;
  sg4::Host* driver = nullptr;  ///< where the driver's actors live (no CPU is used)

  explicit SgPlatform(const NetProblem& p) {
    std::vector<NetLink> all_links = p.links;
    // Distinct routes per (src, dst) pair: the k-th one is sent from host (src, k) to host (dst, 0).
    std::map<std::pair<uint32_t, uint32_t>, std::vector<std::vector<topo::LinkId>>> routes;
    std::vector<uint32_t> alias(p.ops.size(), 0);
    std::vector<uint32_t> hosts_of;  // per endpoint
    auto need = [&](uint32_t e, uint32_t count) {
      if (hosts_of.size() <= e) hosts_of.resize(e + 1, 0);
      hosts_of[e] = std::max(hosts_of[e], count);
    };
    std::vector<topo::LinkId> route;
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const NetOp& op = p.ops[i];
      if (!op.transfer) continue;
      route = op.route;
      if (op.rate_cap_Bps != FlowNetwork::kNoCap) {
        route.push_back(static_cast<topo::LinkId>(all_links.size()));
        all_links.push_back(NetLink{op.rate_cap_Bps, 0});
      }
      auto& list = routes[{op.src, op.dst}];
      const auto it = std::find(list.begin(), list.end(), route);
      alias[i] = static_cast<uint32_t>(it - list.begin());
      if (it == list.end()) list.push_back(route);
      need(op.src, alias[i] + 1);
      need(op.dst, 1);
    }
    auto* zone = sg4::create_full_zone("ccsim");
    std::vector<std::vector<sg4::Host*>> hosts(hosts_of.size());
    for (uint32_t e = 0; e < hosts_of.size(); ++e)
      for (uint32_t k = 0; k < hosts_of[e]; ++k)
        hosts[e].push_back(zone->create_host(fmt::format("e{}.{}", e, k), 1e9)->seal());
    driver = zone->create_host("driver", 1e9)->seal();
    std::vector<sg4::Link*> links;
    links.reserve(all_links.size());
    for (size_t l = 0; l < all_links.size(); ++l)
      links.push_back(zone->create_link(fmt::format("l{}", l), all_links[l].capacity_Bps)
                          ->set_latency(all_links[l].latency_s)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                          ->seal());
    for (const auto& [pair, list] : routes)
      for (size_t k = 0; k < list.size(); ++k) {
        std::vector<sg4::LinkInRoute> hops;
        for (topo::LinkId l : list[k]) hops.emplace_back(links[l]);
        zone->add_route(hosts[pair.first][k]->get_netpoint(), hosts[pair.second][0]->get_netpoint(), nullptr, nullptr,
                        hops, /*symmetrical=*/false);
      }
    zone->seal();
    src_host.assign(p.ops.size(), nullptr);
    dst_host.assign(p.ops.size(), nullptr);
    for (size_t i = 0; i < p.ops.size(); ++i)
      if (p.ops[i].transfer) {
        src_host[i] = hosts[p.ops[i].src][alias[i]];
        dst_host[i] = hosts[p.ops[i].dst][0];
      }
  }
};

/// Runs a problem's ops on a SimGrid platform: an op starts when its dependencies are done (and
/// not before its start time); a transfer is one short-lived actor doing a host-to-host send, an
/// instantaneous op finishes on the spot. O(1) SimGrid calls per transfer.
struct SgDriver {
  const NetProblem& p;
  const SgPlatform* platform = nullptr;
  std::vector<uint32_t> pending, succ_begin, succ, work;
  std::vector<double> end_s;

  explicit SgDriver(const NetProblem& problem)
      : p(problem), pending(p.ops.size(), 0), succ_begin(p.ops.size() + 1, 0), end_s(p.ops.size(), -1.0) {
    for (const NetOp& op : p.ops)
      for (uint32_t d : op.deps) ++succ_begin[d + 1];
    for (size_t i = 0; i < p.ops.size(); ++i) succ_begin[i + 1] += succ_begin[i];
    succ.resize(succ_begin.back());
    std::vector<uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
    for (size_t i = 0; i < p.ops.size(); ++i) {
      pending[i] = static_cast<uint32_t>(p.ops[i].deps.size());
      for (uint32_t d : p.ops[i].deps) succ[fill[d]++] = static_cast<uint32_t>(i);
    }
  }

  /// Op i's dependencies are done: start it (a transfer) or finish it (an instantaneous op).
  void ready(uint32_t i) {
    if (!p.ops[i].transfer) {
      finish(i);
      return;
    }
    sg4::Actor::create("transfer", platform->driver, [this, i] {
      const NetOp& op = p.ops[i];
      if (op.start > SimTime::zero()) sg4::this_actor::sleep_until(op.start.seconds());
      sg4::Comm::sendto(platform->src_host[i], platform->dst_host[i], op.bytes);
      finish(i);
    });
  }

  void finish(uint32_t first) {
    const double now_s = sg4::Engine::get_clock();
    work.push_back(first);
    while (!work.empty()) {
      const uint32_t i = work.back();
      work.pop_back();
      end_s[i] = now_s;
      for (uint32_t k = succ_begin[i]; k < succ_begin[i + 1]; ++k) {
        const uint32_t s = succ[k];
        if (--pending[s] != 0) continue;
        if (p.ops[s].transfer)
          ready(s);
        else
          work.push_back(s);
      }
    }
  }
};

/// Simulates `p` with SimGrid in this process (once per process), with network/optim `optim`.
/// Returns {setup_s, run_s, end_s...}.
std::vector<double> simgrid_simulate(const NetProblem& p, const std::string& optim) {
  std::vector<std::string> args = kSimgridArgs;
  args.push_back("--cfg=network/optim:" + optim);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  sg4::Engine engine(&argc, argv.data());

  SgDriver driver(p);
  const auto t0 = std::chrono::steady_clock::now();
  const SgPlatform platform(p);
  driver.platform = &platform;
  const double setup_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].deps.empty()) driver.ready(i);
  engine.run();
  std::vector<double> out = {setup_s, seconds_since(t1)};
  out.insert(out.end(), driver.end_s.begin(), driver.end_s.end());
  return out;
}

/// Runs `fn` in a forked child and returns the doubles it produced. On failure (the child crashed
/// or SimGrid aborted), the returned vector is empty and `error` says why.
std::vector<double> run_in_child(const std::function<std::vector<double>()>& fn, std::string& error) {
  int fds[2];
  if (pipe(fds) != 0) {
    error = "pipe() failed";
    return {};
  }
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    error = "fork() failed";
    return {};
  }
  if (pid == 0) {
    close(fds[0]);
    const std::vector<double> v = fn();
    const auto* data = reinterpret_cast<const char*>(v.data());
    size_t left = v.size() * sizeof(double);
    while (left > 0) {
      const ssize_t w = write(fds[1], data, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) _exit(3);
      data += w;
      left -= static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::vector<char> bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || bytes.size() % sizeof(double) != 0) {
    error = fmt::format("SimGrid child failed (wait status {:#x}, {} bytes of results)", status, bytes.size());
    return {};
  }
  std::vector<double> v(bytes.size() / sizeof(double));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

/// SimGrid's default Lazy update when every link has zero latency, Full otherwise (Lazy mishandles
/// zero-latency bottlenecks on routes with latency in SimGrid 3.32; see the file comment).
std::string default_optim(const NetProblem& p) {
  const bool latency = std::any_of(p.links.begin(), p.links.end(), [](const NetLink& l) { return l.latency_s > 0; });
  return latency ? "Full" : "Lazy";
}

RunResult simgrid_run(const NetProblem& p) {
  RunResult r;
  const std::string optim = default_optim(p);
  const std::vector<double> v = run_in_child([&p, &optim] { return simgrid_simulate(p, optim); }, r.error);
  if (!r.error.empty()) return r;
  if (v.size() != p.ops.size() + 2) {
    r.error = fmt::format("SimGrid returned {} values for {} ops", v.size(), p.ops.size());
    return r;
  }
  r.setup_s = v[0];
  r.run_s = v[1];
  r.end_s.assign(v.begin() + 2, v.end());
  return r;
}

// ---- ccsim side -----------------------------------------------------------------------------------

/// Independent flows on a FlowNetwork: each starts at its time; its end is its on_done time.
RunResult ccsim_flows(const NetProblem& p) {
  const auto t0 = std::chrono::steady_clock::now();
  Engine engine;
  std::vector<LinkSpec> specs;
  for (const NetLink& l : p.links) specs.push_back(LinkSpec{l.capacity_Bps});
  FlowNetwork network(engine, specs);
  RunResult r;
  r.end_s.assign(p.ops.size(), -1.0);
  for (size_t i = 0; i < p.ops.size(); ++i)
    engine.schedule_at(p.ops[i].start, [&, i] {
      const NetOp& op = p.ops[i];
      double latency_s = 0;
      for (topo::LinkId l : op.route) latency_s += p.links[l].latency_s;
      network.start_flow(
          op.route, static_cast<double>(op.bytes), Duration::from_seconds(latency_s),
          [&, i] { r.end_s[i] = engine.now().seconds(); }, op.rate_cap_Bps);
    });
  engine.run();
  r.run_s = seconds_since(t0);
  return r;
}

struct Diff {
  double max_rel = 0;
  double max_abs_s = 0;
  size_t worst = 0;  ///< op with the largest relative difference
};

/// Differences of the end times of `a` against `b` (transfers only when `transfers_only`).
Diff compare(const NetProblem& p, const RunResult& a, const RunResult& b, bool transfers_only) {
  Diff d;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (transfers_only && !p.ops[i].transfer) continue;
    const double abs_s = std::abs(a.end_s[i] - b.end_s[i]);
    const double rel = abs_s / std::max(std::abs(b.end_s[i]), 1e-300);
    d.max_abs_s = std::max(d.max_abs_s, abs_s);
    if (rel > d.max_rel || std::isnan(rel)) {
      d.max_rel = rel;
      d.worst = i;
    }
  }
  return d;
}

std::string describe(const NetProblem& p) {
  std::string s;
  for (size_t l = 0; l < p.links.size(); ++l)
    s += fmt::format("  link {}: {} B/s, {} s\n", l, p.links[l].capacity_Bps, p.links[l].latency_s);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const NetOp& op = p.ops[i];
    s += fmt::format("  flow {}: {} bytes from {} ps, cap {} B/s, links", i, op.bytes, op.start.ps(), op.rate_cap_Bps);
    for (topo::LinkId l : op.route) s += fmt::format(" {}", l);
    s += "\n";
  }
  return s;
}

// ---- 1. random flow sets --------------------------------------------------------------------------

struct RandomSpec {
  bool staggered = false;        ///< start times in [0, 2 ms]; else all at t = 0
  bool round_values = false;     ///< every other instance on a coarse grid: ties, simultaneous events
  bool caps = false;             ///< a quarter of the flows get a rate cap
  double link_latency_s = 0;     ///< every link's latency
  uint32_t fixed_route_len = 0;  ///< 0: 1..4 links
  bool random_latency = false;   ///< each link its own latency in [0.1, 5] us
};

/// Random links (1-100 GB/s) and 1-24 flows of 1-100 MB over random routes of 1-4 distinct links
/// (both models see a route as a set of constraints; it need not be a path). Every flow lasts at
/// least 10 us, so ccsim's picosecond rounding stays well below kRelTol.
NetProblem random_problem(uint64_t seed, const RandomSpec& spec) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  NetProblem p;
  const uint32_t num_links = pick(std::max(4u, spec.fixed_route_len), 10);
  for (uint32_t l = 0; l < num_links; ++l) {
    const double capacity_Bps = spec.round_values ? 1e9 * pick(1, 8) : uniform(1e9, 1e11);
    const double latency_s = spec.random_latency ? 1e-7 * pick(1, 50) : spec.link_latency_s;
    p.links.push_back(NetLink{capacity_Bps, latency_s});
  }
  const uint32_t num_flows = pick(1, 24);
  for (uint32_t f = 0; f < num_flows; ++f) {
    NetOp op;
    op.transfer = true;
    op.src = 2 * f;
    op.dst = 2 * f + 1;
    const uint32_t hops = spec.fixed_route_len ? spec.fixed_route_len : pick(1, 4);
    while (op.route.size() < hops) {
      const uint32_t l = pick(0, num_links - 1);
      if (std::find(op.route.begin(), op.route.end(), l) == op.route.end()) op.route.push_back(l);
    }
    op.bytes = spec.round_values ? (uint64_t{1} << 20) * pick(1, 64) : static_cast<uint64_t>(uniform(1e6, 1e8));
    if (spec.caps && pick(0, 3) == 0) op.rate_cap_Bps = spec.round_values ? 1e9 * pick(1, 4) : uniform(5e8, 5e10);
    if (spec.staggered)
      op.start = SimTime::from_ps(spec.round_values ? int64_t{1'000'000} * pick(0, 2000)
                                                    : static_cast<int64_t>(uniform(0, 2e9)));
    p.ops.push_back(std::move(op));
  }
  return p;
}

/// Runs `instances` random problems through both simulators; asserts agreement within `tol`
/// unless tol == 0. Returns the largest relative difference.
double check_random(const std::string& what, const RandomSpec& spec, uint64_t seed0, int instances, double tol) {
  Diff worst;
  for (int k = 0; k < instances; ++k) {
    const uint64_t seed = seed0 + static_cast<uint64_t>(k);
    RandomSpec s = spec;
    s.round_values = spec.round_values && k % 2 == 0;
    const NetProblem p = random_problem(seed, s);
    SCOPED_TRACE(fmt::format("{}: seed {} ({} links, {} flows)", what, seed, p.links.size(), p.ops.size()));
    const RunResult ours = ccsim_flows(p);
    const RunResult theirs = simgrid_run(p);
    if (!theirs.error.empty()) {
      ADD_FAILURE() << theirs.error;
      continue;
    }
    const Diff d = compare(p, ours, theirs, false);
    worst.max_abs_s = std::max(worst.max_abs_s, d.max_abs_s);
    worst.max_rel = std::max(worst.max_rel, d.max_rel);
    if (tol > 0) {
      EXPECT_LE(d.max_rel, tol) << "flow " << d.worst << ": ccsim " << ours.end_s[d.worst] << " s, SimGrid "
                                << theirs.end_s[d.worst] << " s\n"
                                << describe(p);
    }
  }
  std::cout << fmt::format("[simgrid] {}: {} instances, max difference {:.3g} relative, {:.3g} ps\n", what,
                           instances, worst.max_rel, worst.max_abs_s * 1e12);
  return worst.max_rel;
}

TEST(SimgridCrosscheck, RandomFlowsStartingTogetherMatch) {
  check_random("random flows, t=0, latency 0", RandomSpec{}, 1000, 50, kRelTol);
}

TEST(SimgridCrosscheck, RandomFlowsWithRateCapsMatch) {
  check_random("random flows with rate caps, t=0, latency 0", RandomSpec{.round_values = true, .caps = true}, 2000,
               30, kRelTol);
}

TEST(SimgridCrosscheck, RandomFlowsWithStaggeredStartsMatch) {
  check_random("random flows, staggered starts, latency 0", RandomSpec{.staggered = true, .round_values = true},
               3000, 50, kRelTol);
}

// Every route two links of 1 us and simultaneous starts: CM02's latency-first and RTT weighting
// change nothing, so the times must agree.
TEST(SimgridCrosscheck, RandomFlowsWithEqualRouteLatencyMatch) {
  check_random("random flows with caps, every route 2 x 1 us, t=0",
               RandomSpec{.caps = true, .link_latency_s = 1e-6, .fixed_route_len = 2}, 4000, 30, kRelTol);
}

// The disagreement in its simplest form: two 1 MB flows share a 1 GB/s link, their routes have 1 us
// and 3 us of latency. ccsim: both at 0.5 GB/s from t = 0, bytes out at 2 ms. CM02: flow 0 alone
// from 1 us to 3 us, then shares 3:1 (penalty = route latency), i.e. 0.75 and 0.25 GB/s.
TEST(SimgridCrosscheck, Cm02WeightsSharesByInverseRouteLatency) {
  NetProblem p;
  p.links = {{1e9, 0}, {1e12, 1e-6}, {1e12, 3e-6}};
  for (uint32_t f = 0; f < 2; ++f) {
    NetOp op;
    op.transfer = true;
    op.src = 2 * f;
    op.dst = 2 * f + 1;
    op.route = {0, f + 1};
    op.bytes = 1'000'000;
    p.ops.push_back(op);
  }
  const RunResult ours = ccsim_flows(p);
  const RunResult theirs = simgrid_run(p);
  ASSERT_TRUE(theirs.error.empty()) << theirs.error;
  EXPECT_NEAR(ours.end_s[0], 2e-3 + 1e-6, 1e-12);
  EXPECT_NEAR(ours.end_s[1], 2e-3 + 3e-6, 1e-12);
  const double sg_first_s = 3e-6 + (1e6 - 2e-6 * 1e9) / 0.75e9;
  EXPECT_NEAR(theirs.end_s[0], sg_first_s, 1e-12);
  EXPECT_NEAR(theirs.end_s[1], 1e-6 + 2e6 / 1e9, 1e-12);
  std::cout << fmt::format(
      "[simgrid] 2 flows, route latency 1 us vs 3 us: ccsim {:.7g} / {:.7g} s, SimGrid CM02 {:.7g} / {:.7g} s\n",
      ours.end_s[0], ours.end_s[1], theirs.end_s[0], theirs.end_s[1]);
}

// Different route latencies: the models differ by design (see the file comment); the size of the
// difference is printed, and it must be visible (else the file comment is stale).
TEST(SimgridCrosscheck, RandomFlowsWithUnequalLatencyDiffer) {
  const double max_rel = check_random("random flows, link latencies 0.1-5 us (differ by design)",
                                      RandomSpec{.random_latency = true}, 5000, 30, 0);
  EXPECT_GT(max_rel, 1e-3) << "CM02 and ccsim now agree with unequal latencies: update the file comment";
}

// ---- 2. collectives -------------------------------------------------------------------------------

// Uncompressed fp32 on the wire, kernels free (as tests/sim/collective_timing_test.cpp).
void bind_fp32(topo::Schedule& s, topo::OpId first, topo::OpId end) {
  for (topo::OpId id = first; id < end; ++id) {
    topo::Op& op = s.mutable_op(id);
    op.bytes = op.kind == topo::OpKind::kTransfer ? 4 * s.op_elements(op) : 0;
  }
}

/// The materialized, bound schedule as a NetProblem, with the routes ScheduleRunner::dispatch()
/// picks (identity rank map, ECMP salt 0: key = ecmp_hash(src, dst, op id)).
NetProblem collective_problem(const topo::Topology& t, const topo::CollectiveInfo& info, uint64_t elements) {
  topo::Schedule s = info.build(t.num_ranks(), elements, {});
  bind_fp32(s, s.id_base(), s.id_end());
  NetProblem p;
  for (const topo::Link& l : t.links()) p.links.push_back(NetLink{l.capacity_Bps, l.latency_s});
  p.ops.reserve(s.ops().size());
  for (topo::OpId id = 0; id < s.id_end(); ++id) {
    const topo::Op& op = s.op(id);
    NetOp n;
    n.deps.assign(s.deps(op).begin(), s.deps(op).end());
    if (op.kind == topo::OpKind::kTransfer) {
      n.transfer = true;
      n.src = op.rank;
      n.dst = op.peer;
      n.bytes = op.bytes;
      t.route(op.rank, op.peer, topo::ecmp_hash(op.rank, op.peer, id), n.route);
    }
    p.ops.push_back(std::move(n));
  }
  return p;
}

/// ccsim's ScheduleRunner, streaming the schedule from its generator (as the simulator does).
RunResult ccsim_collective(const topo::Topology& t, const topo::CollectiveInfo& info, uint64_t elements) {
  const auto t0 = std::chrono::steady_clock::now();
  auto gen = info.make(t.num_ranks(), elements, {});
  Engine engine;
  FlowNetwork network(engine, link_specs(t));
  RunnerOptions options;
  options.record_ops = true;
  ScheduleRunner runner(engine, network, t, *gen, bind_fp32, KernelCostModel{}, options);
  runner.start();
  engine.run();
  RunResult r;
  r.run_s = seconds_since(t0);
  EXPECT_TRUE(runner.done());
  for (SimTime e : runner.timing().op_end) r.end_s.push_back(e.seconds());
  return r;
}

const topo::CollectiveInfo* find_allreduce(const std::string& algorithm) {
  for (const auto& c : topo::known_collectives())
    if (c.operation == topo::CollectiveOp::kAllReduce && c.algorithm == algorithm) return &c;
  return nullptr;
}

/// The all-reduce algorithms compared: ring, and butterfly when this build has it.
std::vector<std::string> allreduce_algorithms() {
  std::vector<std::string> a = {"ring"};
  if (find_allreduce("butterfly") != nullptr) a.push_back("butterfly");
  return a;
}

topo::Topology cluster(const std::string& shape, uint32_t n, double latency_s) {
  topo::ClusterSpec spec;
  spec.topology = shape;
  spec.nodes = n;
  spec.nic_Bps = 12.5e9;
  spec.link_latency_s = latency_s;
  if (shape == "fat_tree") spec.k = 4;
  auto t = topo::build_topology(spec);
  CCSIM_CHECK(t.ok(), "{}", t.status().message());
  return std::move(*t);
}

struct CollectiveOutcome {
  Diff per_transfer;       ///< over every transfer's end time
  double total_rel = 0;    ///< of the collective's duration
  RunResult ours, theirs;  ///< for their wall times
  size_t transfers = 0;
};

/// All-reduce of `elements` fp32 with `algorithm` on `t` in both simulators; asserts agreement of
/// every transfer's end time within `tol` unless tol == 0.
CollectiveOutcome check_collective(const topo::Topology& t, const std::string& algorithm, uint64_t elements,
                                   double tol) {
  CollectiveOutcome o;
  const topo::CollectiveInfo* info = find_allreduce(algorithm);
  if (info == nullptr) {
    ADD_FAILURE() << "no allreduce algorithm " << algorithm;
    return o;
  }
  if (const Status st = info->check(t.num_ranks(), elements, {}); !st.ok()) {
    ADD_FAILURE() << st.message();
    return o;
  }
  o.ours = ccsim_collective(t, *info, elements);
  const NetProblem p = collective_problem(t, *info, elements);
  o.theirs = simgrid_run(p);
  if (!o.theirs.error.empty()) {
    ADD_FAILURE() << o.theirs.error;
    return o;
  }
  if (o.ours.end_s.size() != p.ops.size()) {
    ADD_FAILURE() << "ccsim ran " << o.ours.end_s.size() << " ops, the materialized schedule has " << p.ops.size();
    return o;
  }
  o.per_transfer = compare(p, o.ours, o.theirs, true);
  const double ours_s = *std::max_element(o.ours.end_s.begin(), o.ours.end_s.end());
  const double theirs_s = *std::max_element(o.theirs.end_s.begin(), o.theirs.end_s.end());
  o.total_rel = std::abs(ours_s - theirs_s) / theirs_s;
  o.transfers =
      static_cast<size_t>(std::count_if(p.ops.begin(), p.ops.end(), [](const NetOp& op) { return op.transfer; }));
  std::cout << fmt::format(
      "[simgrid] {} all-reduce of {} MiB on {} ({} transfers): ccsim {:.9g} s, SimGrid {:.9g} s; "
      "max per-transfer difference {:.3g} relative, {:.3g} ps\n",
      algorithm, static_cast<double>(elements) * 4 / (1 << 20), t.description(), o.transfers, ours_s, theirs_s,
      o.per_transfer.max_rel, o.per_transfer.max_abs_s * 1e12);
  if (tol > 0) {
    EXPECT_LE(o.total_rel, tol);
    const size_t w = o.per_transfer.worst;
    EXPECT_LE(o.per_transfer.max_rel, tol)
        << "op " << w << ": ccsim " << o.ours.end_s[w] << " s, SimGrid " << o.theirs.end_s[w] << " s";
  }
  return o;
}

TEST(SimgridCrosscheck, CollectivesOnStarAndFatTreeMatch) {
  for (const std::string shape : {"star", "fat_tree"})
    for (uint32_t n : {4u, 8u, 16u})
      for (const std::string& algorithm : allreduce_algorithms()) {
        SCOPED_TRACE(fmt::format("{} all-reduce on {} n={}", algorithm, shape, n));
        check_collective(cluster(shape, n, 0), algorithm, 1ull << 20, kRelTol);
      }
}

// With 1 us links every star route has the same latency (two links), so the latency cannot change
// how links are shared.
TEST(SimgridCrosscheck, CollectivesOnStarWithLatencyMatch) {
  for (uint32_t n : {4u, 8u, 16u})
    for (const std::string& algorithm : allreduce_algorithms()) {
      SCOPED_TRACE(fmt::format("{} all-reduce n={}", algorithm, n));
      check_collective(cluster("star", n, 1e-6), algorithm, 1ull << 20, kRelTol);
    }
}

// Fat-tree routes have 2, 4 or 6 links of 1 us. The ring's transfers never share a link, so they
// must match; the butterfly's do share, between routes of different latency, where CM02's RTT
// weighting makes the models differ by design (printed, not asserted).
TEST(SimgridCrosscheck, CollectivesOnFatTreeWithLatency) {
  for (uint32_t n : {8u, 16u}) {
    SCOPED_TRACE(fmt::format("n={}", n));
    check_collective(cluster("fat_tree", n, 1e-6), "ring", 1ull << 20, kRelTol);
    if (find_allreduce("butterfly") != nullptr)
      check_collective(cluster("fat_tree", n, 1e-6), "butterfly", 1ull << 20, 0);
  }
}

// ---- 3. one larger case, for wall time ----------------------------------------------------------

TEST(SimgridCrosscheck, LargeRingAllReduceWallTime) {
  const uint32_t n = 256;
  const uint64_t elements = uint64_t{1} << 24;  // 64 MiB of fp32: 256 KiB shards, 21 us per transfer
  const CollectiveOutcome o = check_collective(cluster("star", n, 0), "ring", elements, kRelTol);
  std::cout << fmt::format(
      "[simgrid] wall time, ring all-reduce n={} on a star ({} flows): ccsim {:.3f} s (generation + simulation); "
      "SimGrid {:.3f} s simulation + {:.3f} s platform\n",
      n, o.transfers, o.ours.run_s, o.theirs.run_s, o.theirs.setup_s);
}

}  // namespace
}  // namespace ccsim::sim
