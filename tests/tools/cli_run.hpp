#pragma once
/// \file
/// Running the real ccsim binary (CCSIM_BINARY, defined for the cli_test target) from a test:
/// shell quoting, captured stdout/stderr and exit code, and a sorted listing of an output folder.

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/temp_dir.hpp"

namespace ccsim::testing {

/// `s` as one single-quoted shell word.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// What one run of the binary did.
struct Outcome {
  int code = -1;  ///< exit status; -1 when killed by a signal
  std::string out;
  std::string err;
  double peak_rss_bytes = 0;  ///< the largest resident size this run reached (the shell or ccsim)
};

/// Runs `cmd` through /bin/sh; its wait status, and in `peak_bytes` the largest resident size it or
/// a child it waited for reached (wait4 reports the child's usage with its children's).
inline int run_shell(const std::string& cmd, double& peak_bytes) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = -1;
  struct rusage u {};
  if (pid < 0 || ::wait4(pid, &status, 0, &u) != pid) return -1;
  peak_bytes = static_cast<double>(u.ru_maxrss) * 1024;
  return status;
}

/// Runs `ccsim ARGS` (ARGS already shell-quoted) with stdout and stderr captured into `scratch`.
inline Outcome ccsim(const std::string& args, const TempDir& scratch) {
  static int n = 0;
  const std::filesystem::path out = scratch / fmt::format("stdout.{}.txt", n);
  const std::filesystem::path err = scratch / fmt::format("stderr.{}.txt", n);
  ++n;
  const std::string cmd =
      fmt::format("{} {} >{} 2>{}", quote(CCSIM_BINARY), args, quote(out.string()), quote(err.string()));
  Outcome o;
  const int status = run_shell(cmd, o.peak_rss_bytes);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = read_file(out);
  o.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return o;
}

/// An outcome for failure messages.
inline std::string show(const Outcome& o) {
  return fmt::format("exit {}\n--- stdout\n{}--- stderr\n{}", o.code, o.out, o.err);
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

/// Files (not folders) under `dir`, relative, sorted.
inline std::vector<std::string> files_under(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ccsim::testing
