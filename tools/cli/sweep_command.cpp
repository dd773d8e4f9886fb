// `ccsim sweep`: runs a sweep file's runs (all, one shard, or this MPI rank's), then writes the
// sweep's table once every run has finished; `--merge DIR` writes it from a finished folder.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/parallel.hpp"
#include "tools/app/outputs.hpp"
#include "tools/app/sweep.hpp"
#include "tools/cli/cli_common.hpp"
#include "tools/cli/mpi_world.hpp"

namespace po = boost::program_options;

namespace ccsim::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string clock_text(double s) {
  const auto t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// Progress of this process's runs: a redrawn bar with ETA on a terminal, a line per run otherwise.
class SweepProgress {
 public:
  SweepProgress(size_t total, std::string who) : total_(total), who_(std::move(who)), tty_(::isatty(STDERR_FILENO)) {}

  app::RunHooks hooks(const std::string& id) {
    app::RunHooks h;
    if (tty_)
      h.progress = [this, id](size_t i, size_t n, const std::string& scheme) {
        draw(fmt::format("run {} scheme {}/{} ({})", id, i + 1, n, scheme));
      };
    return h;
  }
  void finished(const std::string& desc, double run_s) {
    ++done_;
    if (tty_) return draw("");
    std::cerr << fmt::format("ccsim: {}{}/{} done in {:.2f} s: {}\n", who_, done_, total_, run_s, desc);
  }
  void clear() const {
    if (tty_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  void draw(const std::string& now) const {
    const double at = std::chrono::duration<double>(Clock::now() - t0_).count();
    constexpr size_t kWidth = 24;
    const size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
    const std::string eta = done_ == 0 ? std::string("--")
                                       : clock_text(at / static_cast<double>(done_) *
                                                    static_cast<double>(total_ - done_));
    std::cerr << fmt::format("\r\033[Kccsim: {}[{}{}] {}/{} runs, {} elapsed, ETA {}{}", who_,
                             std::string(filled, '#'), std::string(kWidth - filled, '.'), done_, total_,
                             clock_text(at), eta, now.empty() ? "" : " | " + now)
              << std::flush;
  }

  size_t total_ = 0, done_ = 0;
  std::string who_;
  bool tty_ = false;
  Clock::time_point t0_ = Clock::now();
};

// "i/N" into (i - 1, N): shards count from 1.
bool parse_shard(const std::string& text, uint32_t& shard, uint32_t& shards) {
  unsigned long i = 0, n = 0;
  char slash = 0, extra = 0;
  std::istringstream in(text);
  if (!(in >> i >> slash >> n) || slash != '/' || (in >> extra) || n < 1 || n > 100000 || i < 1 || i > n) {
    std::cerr << fmt::format("ccsim: --shard: expected i/N with 1 <= i <= N (e.g. 2/3), got '{}'\n", text);
    return false;
  }
  shard = static_cast<uint32_t>(i - 1);
  shards = static_cast<uint32_t>(n);
  return true;
}

// Writes sweep.csv when every run has finished; says what it did.
int merge(const std::string& dir, bool required) {
  Result<app::MergeResult> m = app::merge_sweep(dir);
  if (!m.ok()) return report(m.status());
  if (!m->missing.empty()) {
    const std::string ids = fmt::format("{}{}", fmt::join(m->missing.begin(),
                                                          m->missing.begin() + std::min<size_t>(m->missing.size(), 8),
                                                          ", "), m->missing.size() > 8 ? ", ..." : "");
    std::cerr << fmt::format("ccsim: {}/sweep.csv not written yet: {} of {} runs have not finished ({})\n", dir,
                             m->missing.size(), m->runs, ids);
    return required ? kExitRuntime : kExitOk;
  }
  std::cout << fmt::format("  table       {}/sweep.csv ({} rows from {} runs)\n", dir, m->rows, m->runs);
  return kExitOk;
}

struct SweepArgs {
  std::string file, out;
  uint32_t shard = 0, shards = 1;
  bool dry_run = false;
  app::Overrides ov;
};

int run_sweep(const SweepArgs& a, const MpiWorld& world) {
  Result<app::Sweep> sw = app::load_sweep(a.file);
  if (!sw.ok()) return report(sw.status());
  if (Status st = app::check_sweep(*sw, a.ov); !st.ok()) return report(st);
  const std::string dir = a.out.empty() ? sw->out_dir : a.out;
  if (a.dry_run) {
    for (size_t k = 0; k < sw->runs.size(); ++k) std::cout << app::sweep_run_desc(*sw, k) << "\n";
    std::cout << fmt::format("ok: {} ({} runs, all valid; outputs would go to {})\n", a.file, sw->runs.size(), dir);
    return kExitOk;
  }
  if (Status st = app::prepare_sweep_dir(*sw, dir); !st.ok()) return report(st);
  const std::vector<size_t> todo = app::pending_runs(*sw, dir, a.shard, a.shards);
  const std::string who = a.shards > 1 ? fmt::format("shard {}/{}: ", a.shard + 1, a.shards) : "";
  size_t mine = 0;
  for (size_t k = a.shard; k < sw->runs.size(); k += a.shards) ++mine;
  std::cout << fmt::format("ccsim {} | sweep {} | {} runs{}\n", app::ccsim_version(), sw->name, sw->runs.size(),
                           a.shards > 1 ? fmt::format(", {}{} of them", who, mine) : "");
  if (todo.size() < mine) std::cout << fmt::format("  resumed     {} of {} runs already finished in {}\n",
                                                   mine - todo.size(), mine, dir);
  app::NumericsCache cache(std::filesystem::path(dir) / "numerics");
  SweepProgress progress(todo.size(), who);
  const auto t0 = Clock::now();
  for (size_t k : todo) {
    const auto r0 = Clock::now();
    app::RunHooks hooks = progress.hooks(sw->runs[k].id);
    hooks.numerics = &cache;
    Status st = app::run_sweep_run(*sw, k, dir, a.ov, hooks);
    progress.clear();
    if (!st.ok()) {
      std::cerr << fmt::format("ccsim: {} failed; finished runs are kept, and a rerun resumes\n",
                               app::sweep_run_desc(*sw, k));
      return world.fail(report(st));
    }
    progress.finished(app::sweep_run_desc(*sw, k), std::chrono::duration<double>(Clock::now() - r0).count());
  }
  progress.clear();
  std::cout << fmt::format("  ran         {} runs in {:.2f} s; numerics {} computed, {} reused (by content, {}/numerics)\n",
                           todo.size(), std::chrono::duration<double>(Clock::now() - t0).count(), cache.computed(),
                           cache.reused(), dir);
  world.barrier();
  if (!world.leader()) return kExitOk;
  return merge(dir, world.size() > 1);
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  po::options_description desc("sweep options");
  desc.add_options()("help,h", "show this help")("sweep", po::value<std::string>(), "sweep JSON file")(
      "out,o", po::value<std::string>(), "output folder (default: the sweep's \"out\", else out/<name>)")(
      "shard", po::value<std::string>(), "run only shard i of N (i/N, from 1): runs k with k mod N = i - 1")(
      "merge", po::value<std::string>(), "write DIR/sweep.csv from a sweep folder whose runs have all finished")(
      "dry-run", "check every run and list them; run nothing")(
      "max-flows", po::value<std::string>(), "most transfers each run may simulate (as in run)")(
      "threads", po::value<int>(), "worker threads for the numerics (results do not depend on it)");
  po::positional_options_description pos;
  pos.add("sweep", 1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm,
             "usage: ccsim sweep SWEEP [--out DIR] [--shard i/N] [--dry-run] [--threads N]\n"
             "       ccsim sweep --merge DIR\n"
             "       mpirun -np N ccsim sweep SWEEP [--out DIR]   (with MPI support built in)"))
    return kExitOk;
  if (vm.count("merge")) {
    if (vm.count("sweep") || vm.count("shard")) {
      std::cerr << "ccsim: sweep --merge DIR takes no sweep file or --shard\n";
      return kExitBadInput;
    }
    return merge(vm["merge"].as<std::string>(), true);
  }
  if (!vm.count("sweep")) {
    std::cerr << "ccsim: sweep: expected a sweep file (see `ccsim sweep --help`)\n";
    return kExitBadInput;
  }
  SweepArgs a;
  a.file = vm["sweep"].as<std::string>();
  if (vm.count("out")) a.out = vm["out"].as<std::string>();
  a.dry_run = vm.count("dry-run") > 0;
  if (vm.count("threads")) kern::set_worker_threads(vm["threads"].as<int>());
  if (vm.count("max-flows") && !parse_max_flows(vm["max-flows"].as<std::string>(), a.ov.max_flows)) return kExitBadInput;
  if (vm.count("shard") && !parse_shard(vm["shard"].as<std::string>(), a.shard, a.shards)) return kExitBadInput;
  Result<MpiWorld> world = MpiWorld::start();
  if (!world.ok()) return report(world.status());
  if (world->size() > 1) {
    if (vm.count("shard")) {
      std::cerr << "ccsim: sweep: --shard and mpirun both split the sweep; use one\n";
      return kExitBadInput;
    }
    a.shard = static_cast<uint32_t>(world->rank());
    a.shards = static_cast<uint32_t>(world->size());
  }
  return run_sweep(a, *world);
}

}  // namespace ccsim::cli
