#include "tools/cli/cli_common.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <sstream>

namespace po = boost::program_options;

namespace ccsim::cli {

int report(const Status& s) {
  // One "ccsim: " per line, so every error of a multi-error report reads the same.
  std::string line;
  std::istringstream lines(s.message());
  while (std::getline(lines, line)) std::cerr << "ccsim: " << line << "\n";
  return s.is_input_error() ? kExitBadInput : kExitRuntime;
}

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

bool parse_max_flows(const std::string& text, uint64_t& out) {
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v >= 1) || v > 1.8e19 || v != std::floor(v)) {
    std::cerr << fmt::format("ccsim: --max-flows: expected a whole number of transfers of at least 1 (e.g. 5e8), got "
                             "'{}'\n", text);
    return false;
  }
  out = static_cast<uint64_t>(v);
  return true;
}

}  // namespace ccsim::cli
