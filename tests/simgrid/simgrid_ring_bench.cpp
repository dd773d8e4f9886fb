// The ring all-reduce on one switch, written as a SimGrid 3.32 user would write it, for timing
// SimGrid side by side with `ccsim bench` (tools/bench-simgrid runs both, interleaved, as whole
// processes, and checks that they simulate the same time).
//
// Platform: n hosts on a star, each with its own up link and down link (the NIC bandwidth and the
// link latency apply to each), as ccsim's `star` topology; the route from rank r to rank r+1 is
// r's up link then r+1's down link. SimGrid runs in its plain max-min configuration
// (max_min_config.hpp), so a transfer alone takes its two latencies plus its bytes over the NIC
// bandwidth, as in ccsim.
//
// The all-reduce: one actor per rank; in each of the 2(n-1) steps (reduce-scatter, then
// all-gather) a rank sends one shard of size/n bytes to the next rank's mailbox and receives one
// from the previous rank, and moves on when both are done.
//
// Usage: simgrid_ring_bench [--ranks N] [--bytes B] [--bandwidth BYTES_PER_S] [--latency S]
//                           [--optim Lazy|Full]
// Prints one line: ranks, transfers, the simulated time (s, 9 significant digits), the wall time
// of building the platform and of the simulation.
#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "max_min_config.hpp"

namespace sg4 = simgrid::s4u;

namespace {

struct Options {
  uint32_t ranks = 1024;
  double bytes = 1073741824.0;  // 1 GiB of fp32 per rank
  double bandwidth_Bps = 12.5e9;
  double latency_s = 1e-6;
  std::string optim = "Lazy";
};

[[noreturn]] void usage(std::string_view why) {
  fmt::print(stderr, "simgrid_ring_bench: {}\nusage: simgrid_ring_bench [--ranks N] [--bytes B] "
             "[--bandwidth BYTES_PER_S] [--latency S] [--optim Lazy|Full]\n", why);
  std::exit(2);
}

double number(std::string_view flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0)) usage(fmt::format("{} expects a positive number, got '{}'", flag, text));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) usage(fmt::format("{} needs a value", flag));
    const char* value = argv[++i];
    if (flag == "--ranks") {
      const double n = number(flag, value);
      if (n < 2 || n > 65536 || n != static_cast<uint32_t>(n)) usage("--ranks expects an integer in [2, 65536]");
      o.ranks = static_cast<uint32_t>(n);
    } else if (flag == "--bytes") {
      o.bytes = number(flag, value);
    } else if (flag == "--bandwidth") {
      o.bandwidth_Bps = number(flag, value);
    } else if (flag == "--latency") {
      o.latency_s = number(flag, value);
    } else if (flag == "--optim") {
      o.optim = value;
      if (o.optim != "Lazy" && o.optim != "Full") usage("--optim expects Lazy or Full");
    } else {
      usage(fmt::format("unknown option '{}'", flag));
    }
  }
  return o;
}

/// The star: hosts[r], with r's up link and down link; routes r -> r+1 only (all the ring uses).
std::vector<sg4::Host*> build_star(const Options& o) {
  auto* zone = sg4::create_full_zone("star");
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Link*> up, down;
  for (uint32_t r = 0; r < o.ranks; ++r) {
    hosts.push_back(zone->create_host(fmt::format("h{}", r), 1e9)->seal());
    for (auto* list : {&up, &down})
      list->push_back(zone->create_link(fmt::format("{}{}", list == &up ? "up" : "down", r), o.bandwidth_Bps)
                          ->set_latency(o.latency_s)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                          ->seal());
  }
  for (uint32_t r = 0; r < o.ranks; ++r) {
    const uint32_t next = (r + 1) % o.ranks;
    const std::vector<sg4::LinkInRoute> hops = {sg4::LinkInRoute(up[r]), sg4::LinkInRoute(down[next])};
    zone->add_route(hosts[r]->get_netpoint(), hosts[next]->get_netpoint(), nullptr, nullptr, hops,
                    /*symmetrical=*/false);
  }
  zone->seal();
  return hosts;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<std::string> args = ccsim::simgrid_cfg::max_min_args("simgrid_ring_bench");
  args.push_back("--cfg=network/optim:" + o.optim);
  std::vector<char*> sg_argv;
  for (auto& a : args) sg_argv.push_back(a.data());
  sg_argv.push_back(nullptr);
  int sg_argc = static_cast<int>(args.size());
  sg4::Engine engine(&sg_argc, sg_argv.data());

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<sg4::Host*> hosts = build_star(o);
  const double setup_s = seconds_since(t0);

  const double shard = o.bytes / o.ranks;
  const uint32_t steps = 2 * (o.ranks - 1);
  static int token = 0;
  for (uint32_t r = 0; r < o.ranks; ++r)
    sg4::Actor::create(fmt::format("rank{}", r), hosts[r], [r, &o, shard, steps] {
      sg4::Mailbox* in = sg4::Mailbox::by_name(fmt::format("m{}", r));
      sg4::Mailbox* out = sg4::Mailbox::by_name(fmt::format("m{}", (r + 1) % o.ranks));
      for (uint32_t s = 0; s < steps; ++s) {
        sg4::CommPtr send = out->put_async(&token, static_cast<uint64_t>(shard));
        in->get<int>();
        send->wait();
      }
    });
  const auto t1 = std::chrono::steady_clock::now();
  engine.run();
  const double run_s = seconds_since(t1);
  fmt::print("simgrid ring ranks={} transfers={} simulated_s={:.9g} setup_s={:.3f} run_s={:.3f} optim={}\n", o.ranks,
             static_cast<uint64_t>(o.ranks) * steps, sg4::Engine::get_clock(), setup_s, run_s, o.optim);
  return 0;
}
