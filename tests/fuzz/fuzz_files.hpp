#pragma once
/// \file
/// What every fuzz target shares: the libFuzzer entry point it defines, and a private folder (one
/// per process, removed at exit: tests/tools/temp_dir.hpp) where a target writes the bytes it is
/// given as a file, since ccsim's readers read files, beside the small valid helper files a
/// scenario may refer to.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "tests/tools/temp_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ccsim::fuzz {

/// The process's folder, with the valid helper files scenarios in the corpora name: trace.json (a
/// two-layer compute trace), profile.json (a kernel-cost profile), cdf.json (a straggler CDF),
/// g0.npy .. g3.npy (four workers' 64 fp32 gradients).
const testing::TempDir& fuzz_dir();

/// Bytes as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ccsim::fuzz
