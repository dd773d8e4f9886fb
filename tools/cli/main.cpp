// The ccsim command-line interface: run, validate, list, schema.
// Exit codes: 0 success, 1 runtime failure, 2 bad input (scenario, options, referenced files).

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/topology.hpp"
#include "tools/app/runner.hpp"
#include "tools/app/scenario_io.hpp"

namespace po = boost::program_options;
using namespace ccsim;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;

int report(const Status& s) {
  // One "ccsim: " per line, so every error of a multi-error report reads the same.
  std::string line;
  std::istringstream lines(s.message());
  while (std::getline(lines, line)) std::cerr << "ccsim: " << line << "\n";
  return s.is_input_error() ? kExitBadInput : kExitRuntime;
}

const char* kTopUsage =
    "usage: ccsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run SCENARIO      simulate a scenario and write its outputs\n"
    "  validate FILE...  check scenario files without running them\n"
    "  list              algorithms, collectives, topologies and gradient sources of this build\n"
    "  schema            print the JSON Schema of scenario files\n"
    "\n"
    "options:\n"
    "  -h, --help        this help (`ccsim <command> --help` for a command's options)\n"
    "  --version         print the version\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 bad input\n";

// Parses `args` against `desc` (+ positionals); prints help and returns false when asked to.
bool parse(const std::vector<std::string>& args, const po::options_description& desc,
           const po::positional_options_description& pos, po::variables_map& vm, const std::string& usage) {
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n" << desc << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("run options");
  desc.add_options()("help,h", "show this help")
      ("scenario", po::value<std::string>()->required(), "scenario JSON file")
      ("out,o", po::value<std::string>(), "output folder (default: outputs.dir, else out/<name>)")
      ("set,s", po::value<std::vector<std::string>>()->composing(),
       "override a scenario value: PATH=VALUE, PATH a JSON Pointer (/cluster/nodes) or dotted (cluster.nodes); "
       "VALUE is JSON, else a string; repeatable")
      ("seed", po::value<int64_t>(), "override the scenario's seed")
      ("threads", po::value<int>(), "worker threads for the numerics (results do not depend on it)");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim run SCENARIO [--out DIR] [--set PATH=VALUE ...] [--seed N]")) return kExitOk;
  if (vm.count("threads")) kern::set_worker_threads(vm["threads"].as<int>());

  app::Overrides ov;
  if (vm.count("set")) ov.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("seed")) ov.seed = vm["seed"].as<int64_t>();
  const std::string file = vm["scenario"].as<std::string>();
  auto loaded = app::load_scenario(file, ov);
  if (!loaded.ok()) return report(loaded.status());
  std::string out_dir = vm.count("out") ? vm["out"].as<std::string>() : loaded->scenario.outputs.dir;

  const auto t0 = std::chrono::steady_clock::now();
  auto rep = app::run_scenario(*loaded);
  if (!rep.ok()) return report(rep.status().with_context(file));
  Status w = app::write_outputs(*rep, out_dir);
  if (!w.ok()) return report(w);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << app::format_summary(*rep, out_dir) << fmt::format("  wall time   {:.2f} s\n", wall);
  return kExitOk;
}

int cmd_validate(const std::vector<std::string>& args) {
  po::options_description desc("validate options");
  desc.add_options()("help,h", "show this help")("files", po::value<std::vector<std::string>>()->required(),
                                                 "scenario JSON files")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override a value before validating (as in run)");
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  if (!parse(args, desc, pos, vm, "usage: ccsim validate SCENARIO... [--set PATH=VALUE ...]")) return kExitOk;
  app::Overrides ov;
  if (vm.count("set")) ov.sets = vm["set"].as<std::vector<std::string>>();
  int rc = kExitOk;
  for (const auto& f : vm["files"].as<std::vector<std::string>>()) {
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
    std::cout << fmt::format("  {:<10} {}\n", info.name, info.description);
    for (const auto& p : info.params.specs()) {
      std::string range;
      if (p.type == algo::ParamType::kChoice) {
        for (const auto& c : p.choices) range += (range.empty() ? "" : "|") + c;
      } else if (p.min) {
        range = fmt::format("[{}, {}]{}", *p.min, *p.max, p.power_of_two ? ", power of two" : "");
      }
      std::cout << fmt::format("      {:<12} default {:<12} {}  {}\n", p.name, p.default_value.dump(), range, p.description);
    }
  }
  std::cout << "\ncollectives (collective.operation / collective.algorithm):\n";
  for (const auto& c : topo::known_collectives())
    std::cout << fmt::format("  {:<10} {:<10} {}\n", c.operation, c.algorithm, c.description);
  std::cout << "\ntopologies (cluster.topology):\n";
  for (const auto& t : topo::known_topologies()) std::cout << fmt::format("  {:<10} {}\n", t.name, t.description);
  std::cout << "\ngradient sources (gradients.source):\n"
            << "  synthetic  generated per rank: layered scales, lognormal local envelope, cross-worker correlation\n"
            << "  npy        one NumPy .npy file (float32/float16) per worker, listed in gradients.files\n";
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

}  // namespace

int main(int argc, char** argv) {
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
  try {
    if (cmd == "run") return cmd_run(rest);
    if (cmd == "validate") return cmd_validate(rest);
    if (cmd == "list") return cmd_list(rest);
    if (cmd == "schema") return cmd_schema(rest);
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
