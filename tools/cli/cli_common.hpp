#pragma once
/// \file
/// What every ccsim command shares: exit codes, error reports and option parsing.

#include <boost/program_options.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::cli {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;

/// Prints `s` on stderr, "ccsim: " before each line; its exit code (2 input error, else 1).
int report(const Status& s);

/// Parses `args` against `desc` (+ positionals); prints help and returns false when asked to.
bool parse(const std::vector<std::string>& args, const boost::program_options::options_description& desc,
           const boost::program_options::positional_options_description& pos,
           boost::program_options::variables_map& vm, const std::string& usage);

/// --max-flows: a count of transfers, as an integer or in exponent form ("1e9"); false (after the
/// message) for anything else.
bool parse_max_flows(const std::string& text, uint64_t& out);

/// `ccsim sweep` (sweep_command.cpp).
int cmd_sweep(const std::vector<std::string>& args);

}  // namespace ccsim::cli
