// The ccsim command-line interface: run, validate, list, schema, bench, vnmse, bench-kernels, manifest.
// Exit codes: 0 success, 1 runtime failure, 2 bad input (scenario, options, referenced files).

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "algorithms/kernel_profile.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "topology/builders/builders.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/topology.hpp"
#include "sim/base/json_text.hpp"
#include "sim/base/units.hpp"
#include "sim/sim_bench.hpp"
#include "traces/device_profile.hpp"
#include "traces/dump_manifest.hpp"
#include "tools/app/kernel_table.hpp"
#include "tools/app/outputs.hpp"
#include "tools/app/run_collective.hpp"
#include "tools/app/run_training.hpp"
#include "tools/app/scenario_io.hpp"
#include "tools/app/sweep.hpp"
#include "tools/app/vnmse.hpp"
#include "tools/cli/cli_common.hpp"

namespace po = boost::program_options;
using namespace ccsim;
using namespace ccsim::cli;

namespace {

const char* kTopUsage =
    "usage: ccsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run SCENARIO      simulate a scenario and write its outputs\n"
    "  validate FILE...  check scenario files without running them\n"
    "  list              algorithms, collectives, topologies and gradient sources of this build\n"
    "  schema            print the JSON Schema of scenario files\n"
    "  bench             wall time of simulating large collectives (flow network + schedules)\n"
    "  vnmse             compression error of schemes on a gradient dump through a collective\n"
    "  bench-kernels     measure the compression kernels and write a device cost profile\n"
    "  sweep SWEEP       run a scenario over axes of values into one table (resumable, shardable)\n"
    "  manifest DIR      write the manifest.json of a directory of per-worker .npy or .safetensors files\n"
    "\n"
    "options:\n"
    "  -h, --help        this help (`ccsim <command> --help` for a command's options)\n"
    "  --version         print the version\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 bad input\n";

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("run options");
  desc.add_options()("help,h", "show this help")
      ("scenario", po::value<std::string>()->required(), "scenario JSON file")
      ("out,o", po::value<std::string>(), "output folder (default: outputs.dir, else out/<name>)")
      ("set,s", po::value<std::vector<std::string>>()->composing(),
       "override a scenario value: PATH=VALUE, PATH a JSON Pointer (/cluster/nodes) or dotted (cluster.nodes); "
       "VALUE is JSON, else a string; repeatable")
      ("seed", po::value<int64_t>(), "override the scenario's seed")
      ("max-flows", po::value<std::string>(), "most transfers the run may simulate (default 2e8); a larger run is "
                                              "refused with its estimate")
      ("threads", po::value<int>(), "worker threads for the numerics (results do not depend on it)")
      ("simulate-all", "simulate every bucket phase of a training run, even one that repeats an earlier run, "
                       "instead of replaying it (the outputs are the same; for checking)");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim run SCENARIO [--out DIR] [--set PATH=VALUE ...] [--seed N] [--max-flows N] [--simulate-all]"))
    return kExitOk;
  if (vm.count("threads")) kern::set_worker_threads(vm["threads"].as<int>());

  app::Overrides ov;
  if (vm.count("set")) ov.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("seed")) ov.seed = vm["seed"].as<int64_t>();
  if (vm.count("max-flows") && !parse_max_flows(vm["max-flows"].as<std::string>(), ov.max_flows)) return kExitBadInput;
  const std::string file = vm["scenario"].as<std::string>();
  auto loaded = app::load_scenario(file, ov);
  if (!loaded.ok()) return report(loaded.status());
  std::string out_dir = vm.count("out") ? vm["out"].as<std::string>() : loaded->scenario.outputs.dir;

  // Any kind of run: simulate, write every output (or none), print the summary. On a terminal, a
  // status line says which scheme is being simulated (cleared before the summary).
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  app::RunHooks hooks;
  hooks.replay_phases = vm.count("simulate-all") == 0;
  if (tty)
    hooks.progress = [&](size_t i, size_t n, const std::string& scheme) {
      const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << fmt::format("\r\033[Kccsim: scheme {}/{} ({}), {:.0f} s so far", i + 1, n, scheme, at) << std::flush;
    };
  Result<std::string> summary = app::run_and_write(*loaded, out_dir, hooks);
  if (tty) std::cerr << "\r\033[K" << std::flush;
  if (!summary.ok()) return report(summary.status());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << *summary << fmt::format("  wall time   {:.2f} s\n", wall);
  return kExitOk;
}

int cmd_validate(const std::vector<std::string>& args) {
  po::options_description desc("validate options");
  desc.add_options()("help,h", "show this help")("files", po::value<std::vector<std::string>>()->required(),
                                                 "scenario JSON files (a *.sweep.json file: every run of the sweep)")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override a value before validating (as in run)")(
      "max-flows", po::value<std::string>(), "most transfers the run may simulate (as in run)");
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim validate SCENARIO... [--set PATH=VALUE ...] [--max-flows N]")) return kExitOk;
  app::Overrides ov;
  if (vm.count("set")) ov.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("max-flows") && !parse_max_flows(vm["max-flows"].as<std::string>(), ov.max_flows)) return kExitBadInput;
  int rc = kExitOk;
  for (const auto& f : vm["files"].as<std::vector<std::string>>()) {
    if (f.size() > 11 && f.compare(f.size() - 11, 11, ".sweep.json") == 0) {  // a sweep: every run checked
      Result<app::Sweep> sw = app::load_sweep(f);
      const Status st = sw.ok() ? app::check_sweep(*sw, ov) : sw.status();
      if (st.ok()) std::cout << fmt::format("ok: {} ({} runs)\n", f, sw->runs.size());
      else rc = std::max(rc, report(st));
      continue;
    }
    auto loaded = app::load_scenario(f, ov);
    if (loaded.ok()) {
      std::cout << "ok: " << f << "\n";
    } else {
      const int code = report(loaded.status());
      rc = std::max(rc, code);
    }
  }
  return rc;
}

int cmd_list(const std::vector<std::string>& args) {
  po::options_description desc("list options");
  desc.add_options()("help,h", "show this help");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim list")) return kExitOk;

  std::cout << "compression algorithms (compression[].scheme, parameters in compression[].params):\n";
  for (const auto& info : algo::CompressorRegistry::global().all()) {
    std::cout << fmt::format("  {:<12} {}\n", info.name, info.description);
    for (const auto& p : info.params.specs()) {
      std::string range;
      if (p.type == algo::ParamType::kChoice) {
        for (const auto& c : p.choices) range += (range.empty() ? "" : "|") + c;
      } else if (p.min) {
        range = fmt::format("[{}, {}]{}", *p.min, *p.max, p.power_of_two ? ", power of two" : "");
      }
      std::cout << fmt::format("      {:<12} default {:<12} {}  {}\n", p.name, p.default_value.dump(), range,
                               p.description);
    }
  }
  std::cout << "\ncollectives (collective.operation / collective.algorithm):\n";
  for (const auto& c : topo::known_collectives())
    std::cout << fmt::format("  {:<15} {:<18} {}\n", topo::collective_op_name(c.operation), c.algorithm, c.description);
  std::cout << "\ntopologies (cluster.topology):\n";
  for (const auto& t : topo::known_topologies()) std::cout << fmt::format("  {:<10} {}\n", t.name, t.description);
  std::cout << "\ngradient sources (gradients.source):\n"
            << "  synthetic  generated per rank: layered scales, lognormal local envelope, cross-worker correlation\n"
            << "  npy        one NumPy .npy file (float32/float16) per worker, listed in gradients.files (collective runs)\n"
            << "  dump       a gradient dump's directory (manifest.json, one file per worker) in gradients.dump, at\n"
            << "             gradients.steps: a collective run reduces one step, a training run measures its\n"
            << "             convergence calibration's vNMSE on them\n";
  return kExitOk;
}

int cmd_schema(const std::vector<std::string>& args) {
  po::options_description desc("schema options");
  desc.add_options()("help,h", "show this help");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim schema  (prints scenarios/schema.json's content)")) return kExitOk;
  std::cout << app::scenario_schema().dump(2) << "\n";
  return kExitOk;
}

// Parses "64,256,1024" into rank counts.
std::vector<uint32_t> parse_ranks(const std::string& text) {
  std::vector<uint32_t> out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    size_t used = 0;
    const unsigned long v = std::stoul(part, &used);
    if (used != part.size() || v < 2 || v > (1u << 20))
      throw po::error("--ranks: expected integers in [2, 1048576], got '" + part + "'");
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

int cmd_bench(const std::vector<std::string>& args) {
  po::options_description desc("bench options");
  desc.add_options()("help,h", "show this help")(
      "suite", po::value<std::string>()->default_value("standard"),
      "standard: ring all-reduce on one switch at 1024 and 2048 ranks, ring all-reduce on a fat-tree at 64, 256, "
      "1024, 4096 ranks, butterfly all-reduce on a fat-tree at 64, 256, 1024, 4096 ranks; quick: 64 and 256 "
      "ranks only; custom: --topology/--ranks/--algorithm")("topology",
                                                            po::value<std::string>()->default_value("fat_tree"),
                                                            "custom: star, fat_tree, leaf_spine, torus, ring")(
      "ranks", po::value<std::string>()->default_value("64,256"), "custom: comma-separated rank counts")(
      "algorithm", po::value<std::string>()->default_value("ring"), "custom: all-reduce algorithm")(
      "size", po::value<std::string>()->default_value("1GB"), "tensor size per rank (fp32, uncompressed)")(
      "bandwidth", po::value<std::string>()->default_value("100Gbps"),
      "NIC bandwidth")("latency", po::value<std::string>()->default_value("1us"), "link latency");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(
          args, desc, pos, vm,
          "usage: ccsim bench [--suite standard|quick|custom] [--topology T --ranks N,.. --algorithm A] [--size 1GB]"))
    return kExitOk;
  auto bytes = parse_quantity(vm["size"].as<std::string>(), UnitKind::kBytes);
  auto bw = parse_quantity(vm["bandwidth"].as<std::string>(), UnitKind::kBandwidth);
  auto lat = parse_quantity(vm["latency"].as<std::string>(), UnitKind::kTime);
  for (const auto* r : {&bytes, &bw, &lat})
    if (!r->ok()) return report(r->status());
  if (*bytes < 4 || static_cast<uint64_t>(*bytes) % 4 != 0)
    throw po::error("--size: expected a positive multiple of 4 bytes");

  sim::BenchCase shape;
  shape.bytes = static_cast<uint64_t>(*bytes);
  shape.nic_Bps = *bw;
  shape.latency_s = *lat;
  const std::string suite = vm["suite"].as<std::string>();
  std::vector<sim::BenchCase> cases;
  if (suite == "custom") {
    for (uint32_t n : parse_ranks(vm["ranks"].as<std::string>())) {
      cases.push_back(shape);
      cases.back().topology = vm["topology"].as<std::string>();
      cases.back().ranks = n;
      cases.back().algorithm = vm["algorithm"].as<std::string>();
    }
  } else {
    auto standard = sim::bench_suite(suite, shape);
    if (!standard.ok()) throw po::error(standard.status().message());
    cases = std::move(*standard);
  }
  std::cout << fmt::format("ccsim {} bench: all-reduce of {} per rank (fp32, uncompressed), NIC {}, link latency {}; "
                           "single-threaded\n\n",
                           app::ccsim_version(), format_quantity(*bytes, UnitKind::kBytes),
                           format_quantity(*bw, UnitKind::kBandwidth), format_quantity(*lat, UnitKind::kTime));
  std::cout << fmt::format("{:<10} {:>6} {:<10} {:>10} {:>9} {:>8} {:>12} {:>12} {:>9} {:>11} {:>8} {:>9} {:>8}\n",
                           "topology", "ranks", "algorithm", "flows", "events", "solves", "filled/solve", "simulated",
                           "wall", "flows/s", "active", "window", "RSS MiB");
  for (const sim::BenchCase& c : cases) {
    auto r = sim::run_bench_case(c);
    if (!r.ok()) return report(r.status());
    const double filled = r->solves > 0 ? static_cast<double>(r->filled_flows) / static_cast<double>(r->solves) : 0.0;
    std::cout << fmt::format("{:<10} {:>6} {:<10} {:>10} {:>9} {:>8} {:>12.1f} {:>12} {:>8.3f}s {:>11.3e} {:>8} {:>9} "
                             "{:>8.1f}\n",
                             c.topology, r->ranks, c.algorithm, r->flows, r->events, r->solves, filled,
                             format_quantity(r->simulated_s, UnitKind::kTime), r->wall_s,
                             static_cast<double>(r->flows) / r->wall_s, r->peak_active_flows, r->peak_window_ops,
                             r->peak_rss_mib)
              << std::flush;
  }
  return kExitOk;
}

// Parses "0,50,200" into step numbers.
std::vector<uint64_t> parse_steps(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    size_t used = 0;
    uint64_t v = 0;
    try {
      v = std::stoull(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size())
      throw po::error("--steps: expected comma-separated step numbers, got '" + part + "'");
    out.push_back(v);
  }
  return out;
}

int cmd_bench_kernels(const std::vector<std::string>& args) {
  po::options_description desc("bench-kernels options");
  desc.add_options()("help,h", "show this help")("out,o", po::value<std::string>()->required(),
                                                 "device cost profile to write (JSON, format ccsim-device-profile)")(
      "device", po::value<std::string>()->default_value("cpu"), "cpu (the CPU reference kernels) or cuda")(
      "min-size", po::value<std::string>()->default_value("64KB"), "smallest chunk (fp32 input bytes)")(
      "max-size", po::value<std::string>()->default_value("1GB"), "largest chunk; sizes grow by 4x from --min-size")(
      "repeats", po::value<uint32_t>()->default_value(5), "timed runs per point (the median is kept)")(
      "algo,a", po::value<std::vector<std::string>>()->composing(),
      "scheme to measure, default parameters (repeatable; default: every registered scheme)")(
      "threads", po::value<int>(), "CPU worker threads (default: all cores)")(
      "seed", po::value<uint64_t>()->default_value(1), "seed of the synthetic gradients measured on");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim bench-kernels --out FILE [--device cpu|cuda] [--min-size 64KB] "
                                  "[--max-size 1GB] [--repeats 5] [--algo NAME ...]"))
    return kExitOk;
  if (vm.count("threads")) kern::set_worker_threads(vm["threads"].as<int>());
  algo::KernelBenchOptions o;
  o.device = vm["device"].as<std::string>();
  for (const char* key : {"min-size", "max-size"}) {
    auto bytes = parse_quantity(vm[key].as<std::string>(), UnitKind::kBytes);
    if (!bytes.ok()) return report(bytes.status().with_context(fmt::format("--{}", key)));
    (std::string(key) == "min-size" ? o.min_bytes : o.max_bytes) = static_cast<uint64_t>(*bytes);
  }
  o.repeats = vm["repeats"].as<uint32_t>();
  o.seed = vm["seed"].as<uint64_t>();
  if (vm.count("algo")) o.schemes = vm["algo"].as<std::vector<std::string>>();
  auto profile =
      algo::bench_kernels(o, [](const std::string& what) { std::cerr << "bench-kernels: " << what << "\n"; });
  if (!profile.ok()) return report(profile.status());
  const std::string out = vm["out"].as<std::string>();
  if (Status st = app::write_files_atomically({{out, traces::device_profile_to_json(*profile).dump(2) + "\n"}});
      !st.ok())
    return report(st);
  std::cout << app::format_kernel_bench(*profile) << fmt::format("\n  profile written to {}\n", out);
  return kExitOk;
}

int cmd_vnmse(const std::vector<std::string>& args) {
  po::options_description desc("vnmse options");
  desc.add_options()("help,h", "show this help")
      ("gradients,g", po::value<std::string>(), "gradient dump directory (with manifest.json)")
      ("synthetic", po::value<std::string>(),
       "instead of a dump: ROWSxCOLS (or N) i.i.d. N(0,1) entries drawn per rank, one step (default 8 ranks)")
      ("structure", po::value<std::string>(),
       "with --synthetic: KEY=VALUE,... draws the entries from the scenario generator instead of i.i.d. normals "
       "(layers, scale_decades, correlation, envelope_sigma, envelope_span, envelope_correlation; others keep "
       "its defaults)")
      ("algo,a", po::value<std::vector<std::string>>()->required()->composing(),
       "compression scheme, NAME or NAME:KEY=VALUE,KEY=VALUE (see `ccsim list`); repeatable")
      ("param,p", po::value<std::vector<std::string>>()->composing(),
       "KEY=VALUE given to every --algo; repeatable")
      ("collective,c", po::value<std::string>()->default_value("ring"), "collective algorithm (see `ccsim list`)")
      ("op", po::value<std::string>()->default_value("allreduce"),
       "collective operation: allreduce, reduce_scatter, allgather, broadcast, alltoall")
      ("ranks,n", po::value<uint32_t>()->default_value(0), "ranks (0: the dump's workers; rank r reads worker r mod W)")
      ("steps", po::value<std::string>(), "dumped training steps to use, comma-separated (default: all, in order)")
      ("seeds", po::value<uint32_t>()->default_value(1), "repetitions with seeds seed, seed+1, ... (spread and bias)")
      ("seed", po::value<uint64_t>()->default_value(0), "first seed")
      ("warmup", po::value<uint32_t>()->default_value(0),
       "rounds run on each step's gradients before the measured one, so that schemes adapting across rounds "
       "(OmniReduce's k, MX's mu) are measured settled")
      ("gpus-per-node", po::value<uint32_t>()->default_value(1), "ranks per node for hierarchical collectives")
      ("segments", po::value<uint32_t>()->default_value(1), "pipelined segments per chunk")
      ("max-elements", po::value<uint64_t>()->default_value(uint64_t{1} << 26),
       "entries per worker above which whole buckets are sampled")
      ("bucket", po::value<uint64_t>()->default_value(uint64_t{1} << 20), "sampling bucket size (entries)")
      ("ddp-bucket", po::value<std::string>(),
       "compress and reduce each PyTorch DDP bucket of the layers on its own, as a DDP communication hook does: "
       "bucket_cap in bytes of fp32 gradient (e.g. 25MB), layers packed from the last, never split")
      ("ddp-first-bucket", po::value<std::string>(), "with --ddp-bucket: the first (last layers') bucket's cap")
      ("detail", "also print vNMSE per hop depth and per layer")
      ("csv", po::value<std::string>()->default_value("out/vnmse.csv"), "CSV output file ('-' for none)")
      ("threads", po::value<int>(), "worker threads (results do not depend on it)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse(args, desc, pos, vm,
             "usage: ccsim vnmse (--gradients DIR | --synthetic RxC) --algo NAME[:K=V,..] [--param K=V ...] "
             "[--collective ring] "
             "[--ranks N] [--steps 50,200] [--seeds K] [--warmup R] [--ddp-bucket 25MB]"))
    return kExitOk;
  if (vm.count("threads")) kern::set_worker_threads(vm["threads"].as<int>());
  app::VnmseOptions o;
  if (vm.count("gradients")) o.gradients = vm["gradients"].as<std::string>();
  if (vm.count("synthetic")) o.synthetic = vm["synthetic"].as<std::string>();
  if (vm.count("structure")) o.structure = vm["structure"].as<std::string>();
  o.algos = vm["algo"].as<std::vector<std::string>>();
  if (vm.count("param")) o.params = vm["param"].as<std::vector<std::string>>();
  o.algorithm = vm["collective"].as<std::string>();
  o.operation = vm["op"].as<std::string>();
  o.ranks = vm["ranks"].as<uint32_t>();
  if (vm.count("steps")) o.steps = parse_steps(vm["steps"].as<std::string>());
  o.seeds = vm["seeds"].as<uint32_t>();
  o.seed = vm["seed"].as<uint64_t>();
  o.warmup = vm["warmup"].as<uint32_t>();
  o.gpus_per_node = vm["gpus-per-node"].as<uint32_t>();
  o.segments = vm["segments"].as<uint32_t>();
  o.max_elements = vm["max-elements"].as<uint64_t>();
  o.bucket = vm["bucket"].as<uint64_t>();
  if (vm.count("ddp-bucket")) o.ddp_bucket = vm["ddp-bucket"].as<std::string>();
  if (vm.count("ddp-first-bucket")) o.ddp_first_bucket = vm["ddp-first-bucket"].as<std::string>();
  auto rep = app::run_vnmse(o);
  if (!rep.ok()) return report(rep.status());
  const std::string csv = vm["csv"].as<std::string>();
  if (csv != "-") {
    std::error_code ec;
    const std::filesystem::path path(csv);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return report(io_error(fmt::format("{}: cannot create its folder: {}", csv, ec.message())));
    if (Status st = app::write_files_atomically({{path, app::vnmse_csv(*rep)}}); !st.ok()) return report(st);
  }
  std::cout << app::format_vnmse(*rep, vm.count("detail") > 0);
  if (csv != "-") std::cout << "\nwrote " << csv << "\n";
  return kExitOk;
}

int cmd_manifest(const std::vector<std::string>& args) {
  po::options_description desc("manifest options");
  desc.add_options()("help,h", "show this help")
      ("dir", po::value<std::string>()->required(), "directory of per-worker .npy or .safetensors gradient files")
      ("params", po::value<std::string>(),
       "parameter list (JSON array of {\"name\", \"shape\"} in flattening order) giving the layers (default: one "
       "layer 'gradient')")
      ("model", po::value<std::string>()->default_value(traces::ManifestOptions().model), "provenance.model")
      ("dataset", po::value<std::string>()->default_value(traces::ManifestOptions().dataset), "provenance.dataset")
      ("steps", po::value<std::string>(),
       "training iterations of the dumped steps, comma-separated (default: rows 0..S-1 of 2-D .npy arrays, the "
       "numbers in the tensor names of .safetensors files)")
      ("force", "replace an existing manifest.json")
      ("print", "print the manifest on stdout instead of writing it");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm,
             "usage: ccsim manifest DIR [--params FILE] [--model TEXT] [--dataset TEXT] [--steps N,N,...] [--force] "
             "[--print]"))
    return kExitOk;
  const std::filesystem::path dir = vm["dir"].as<std::string>();
  const std::filesystem::path path = dir / "manifest.json";
  const bool print = vm.count("print") > 0;
  std::error_code ec;
  if (!print && vm.count("force") == 0 && std::filesystem::exists(path, ec))
    return report(invalid_argument(fmt::format("{}: exists already; give --force to replace it (or --print to see "
                                               "the new one)", path.string())));
  traces::ManifestOptions o;
  if (vm.count("params")) o.params = vm["params"].as<std::string>();
  o.model = vm["model"].as<std::string>();
  o.dataset = vm["dataset"].as<std::string>();
  if (vm.count("steps")) o.steps = parse_steps(vm["steps"].as<std::string>());
  std::vector<std::string> words = {"ccsim", "manifest"};
  words.insert(words.end(), args.begin(), args.end());
  o.generator = traces::command_line(words);
  auto manifest = traces::make_dump_manifest(dir, o);
  if (!manifest.ok()) return report(manifest.status());
  const std::string summary = traces::manifest_summary(*manifest) + (o.params ? "" : " (--params FILE gives the "
                                                                                     "model's layers)");
  if (print) {
    std::cout << traces::manifest_text(*manifest);
    std::cerr << "ccsim: " << summary << "\n";
    return kExitOk;
  }
  if (Status st = app::write_files_atomically({{path, traces::manifest_text(*manifest)}}); !st.ok()) return report(st);
  std::cout << fmt::format("wrote {}: {}\n", path.string(), summary);
  return kExitOk;
}

}  // namespace

namespace {
// glibc gives the top of its heap back to the kernel whenever more than the trim threshold lies free
// there, and moves that threshold with the sizes it last mapped. A run that builds and drops a
// schedule per collective then had the same pages mapped again and again, or not, depending on
// which allocation happened to sit above them: a 3D-parallel round's fp32 rings took 256 k page
// faults in one build and 41 k in the next for the same work. Fixed thresholds (blocks under
// 32 MiB from the heap; its top kept until 64 MiB are free) take 8 k in both. The peak resident
// memory can grow by the freed blocks the heap keeps (EDGC's 3D scenarios: docs/performance.md).
void set_allocator_thresholds() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}
}  // namespace

int main(int argc, char** argv) {
  set_allocator_thresholds();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kTopUsage;
    return kExitBadInput;
  }
  const std::string cmd = args.front();
  if (cmd == "--version" || cmd == "-V") {
    std::cout << "ccsim " << app::ccsim_version() << "\n";
    return kExitOk;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kTopUsage;
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // Paths and values end up in JSON outputs and messages, which hold UTF-8 only.
  for (size_t i = 0; i < args.size(); ++i)
    if (Status st = check_utf8(args[i], fmt::format("argument {}", i + 1)); !st.ok()) {
      std::cerr << "ccsim: " << st.message() << "\n";
      return kExitBadInput;
    }
  try {
    if (cmd == "run") return cmd_run(rest);
    if (cmd == "validate") return cmd_validate(rest);
    if (cmd == "list") return cmd_list(rest);
    if (cmd == "schema") return cmd_schema(rest);
    if (cmd == "bench") return cmd_bench(rest);
    if (cmd == "vnmse") return cmd_vnmse(rest);
    if (cmd == "bench-kernels") return cmd_bench_kernels(rest);
    if (cmd == "manifest") return cmd_manifest(rest);
    if (cmd == "sweep") return cmd_sweep(rest);
  } catch (const po::error& e) {
    std::cerr << "ccsim " << cmd << ": " << e.what() << " (see `ccsim " << cmd << " --help`)\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "ccsim " << cmd << ": runtime failure: " << e.what() << "\n";
    return kExitRuntime;
  }
  std::cerr << "ccsim: unknown command '" << cmd << "'\n\n" << kTopUsage;
  return kExitBadInput;
}
