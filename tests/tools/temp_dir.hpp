#pragma once
/// \file
/// Test helpers: a uniquely named temporary folder removed on destruction, and a scoped change of
/// the working directory.

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>

namespace ccsim::testing {

/// A fresh folder under std::filesystem::temp_directory_path(); removed (recursively) by the
/// destructor. Not copyable.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "ccsim-test") {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = std::filesystem::temp_directory_path() /
              fmt::format("{}-{}-{}-{:08x}", tag, static_cast<long>(::getpid()), counter++, rd());
      if (std::filesystem::create_directory(path_)) return;
    }
    throw std::runtime_error("cannot create a temporary folder");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// `path() / relative`.
  std::filesystem::path operator/(const std::filesystem::path& relative) const { return path_ / relative; }
  /// Writes `content` to `path() / relative` (creating parent folders) and returns the full path.
  std::filesystem::path write(const std::filesystem::path& relative, const std::string& content) const {
    const std::filesystem::path p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + p.string());
    return p;
  }

 private:
  std::filesystem::path path_;
};

/// Changes the working directory for the lifetime of the object.
class ScopedCurrentPath {
 public:
  explicit ScopedCurrentPath(const std::filesystem::path& p) : saved_(std::filesystem::current_path()) {
    std::filesystem::current_path(p);
  }
  ~ScopedCurrentPath() {
    std::error_code ec;
    std::filesystem::current_path(saved_, ec);
  }
  ScopedCurrentPath(const ScopedCurrentPath&) = delete;
  ScopedCurrentPath& operator=(const ScopedCurrentPath&) = delete;

 private:
  std::filesystem::path saved_;
};

/// The whole content of a file ("" if it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace ccsim::testing
