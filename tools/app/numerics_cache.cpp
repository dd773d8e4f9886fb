#include "tools/app/numerics_cache.hpp"

#include "tools/app/outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>


namespace ccsim::app {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// FNV-1a, 64 bits: names the key's file (the file holds the key itself).
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::optional<json> read_entry(const fs::path& file, const json& key) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  json entry = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object() || !entry.contains("key") || !entry.contains("value") || entry["key"] != key)
    return std::nullopt;
  return entry["value"];
}

}  // namespace

NumericsCache::NumericsCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path NumericsCache::file_of(const std::string& key_text) const {
  return dir_ / fmt::format("{:016x}.json", fnv1a(key_text));
}

std::optional<json> NumericsCache::find(const json& key) {
  const std::string text = key.dump();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(text); it != memory_.end()) {
    ++reused_;
    return it->second;
  }
  if (dir_.empty()) return std::nullopt;
  std::optional<json> v = read_entry(file_of(text), key);
  if (v) {
    memory_.emplace(text, *v);
    ++reused_;
  }
  return v;
}

void NumericsCache::store(const json& key, const json& value) {
  const std::string text = key.dump();
  std::lock_guard<std::mutex> lock(mutex_);
  ++computed_;
  memory_[text] = value;
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // A failed write only loses the reuse: the run's result does not depend on it.
  (void)write_files_atomically({{file_of(text), json{{"key", key}, {"value", value}}.dump(1) + "\n"}});
}

Result<json> cached_numerics(NumericsCache* cache, const json& key, const std::function<Result<json>()>& compute) {
  if (cache != nullptr) {
    if (std::optional<json> hit = cache->find(key)) return *hit;
  }
  CCSIM_ASSIGN_OR_RETURN(json value, compute());
  if (cache != nullptr) cache->store(key, value);
  return value;
}

json cache_number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

double cached_number(const json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

json file_stamps(const std::string& path) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.emplace_back(path);
  }
  json out = json::array();
  for (const fs::path& f : files) {
    const auto size = fs::file_size(f, ec);
    const auto mtime = fs::last_write_time(f, ec).time_since_epoch().count();
    out.push_back({f.filename().string(), ec ? -1 : static_cast<int64_t>(size), static_cast<int64_t>(mtime)});
  }
  return out;
}

}  // namespace ccsim::app
