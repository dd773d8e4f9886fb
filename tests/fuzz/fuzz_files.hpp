#pragma once
/// \file
/// What every fuzz target shares: the libFuzzer entry point it defines, and a private folder (one
/// per process, removed at exit) where a target writes the bytes it is given as a file, since
/// ccsim's readers read files, beside the small valid helper files a scenario may refer to.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ccsim::fuzz {

/// A temporary folder for this process.
class FuzzDir {
 public:
  FuzzDir() {
    dir_ = std::filesystem::temp_directory_path() / ("ccsim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~FuzzDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  FuzzDir(const FuzzDir&) = delete;
  FuzzDir& operator=(const FuzzDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }
  /// Writes `bytes` to `name` in the folder (replacing it) and returns its path.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const std::filesystem::path p = dir_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  std::filesystem::path dir_;
};

/// The process's folder, with the valid helper files scenarios in the corpora name: trace.json (a
/// two-layer compute trace), profile.json (a kernel-cost profile), cdf.json (a straggler CDF),
/// g0.npy .. g3.npy (four workers' 64 fp32 gradients).
const FuzzDir& fuzz_dir();

/// Bytes as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ccsim::fuzz
