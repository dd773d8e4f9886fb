#pragma once
/// \file
/// CCSIM_CHECK: always-on invariant checks (STYLE rule 5). A failed check is a bug in ccsim, not
/// a user error: it prints the condition, the location and a fmt-formatted message, then aborts.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace ccsim::detail {
[[noreturn]] inline void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ccsim: internal check failed: %s at %s:%d%s%s\n", cond, file, line, msg.empty() ? "" : ": ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace ccsim::detail

/// CCSIM_CHECK(cond) or CCSIM_CHECK(cond, "fmt {}", args...).
#define CCSIM_CHECK(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) [[unlikely]]                                                                    \
      ::ccsim::detail::check_failed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
