#pragma once
/// \file
/// Compression numerics reused between runs whose numerics inputs are equal. A sweep's runs that
/// differ only in timing (bandwidth, topology, tenants, stragglers, kernel costs) push the same
/// tensors through the same schedule with the same scheme and seed, so their vNMSE is the same
/// number; the cache lets the second run read it instead of recomputing it.
///
/// An entry is keyed by a JSON document holding every input the numerics read (the scheme and its
/// parameters, the collective's schedule inputs, the tensor's size, layers, source and seed, and
/// each gradient file's name, size and modification time). It lives in memory and, given a folder,
/// in one file per key there (written atomically), so that a sweep's shards and a resumed sweep
/// share it. The file name is a hash of the key; the file holds the whole key, and an entry is
/// used only when its key equals the request's, so a hash collision costs a recomputation, never a
/// wrong result. Values are stored with round-trip precision (NaN as null): a reused figure is
/// bit-identical to a recomputed one.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "sim/base/status.hpp"

namespace ccsim::app {

class NumericsCache {
 public:
  /// In memory only (empty `dir`), or also in `dir` (created on the first store).
  explicit NumericsCache(std::filesystem::path dir = {});

  /// The value stored under `key` (in memory, else in the folder), counted as reused; nullopt when
  /// there is none.
  std::optional<nlohmann::json> find(const nlohmann::json& key);
  /// Stores `value` under `key`, counted as computed. A folder that cannot be written only loses
  /// the reuse (the run's result does not depend on it).
  void store(const nlohmann::json& key, const nlohmann::json& value);

  uint64_t computed() const { return computed_; }
  uint64_t reused() const { return reused_; }

 private:
  std::filesystem::path file_of(const std::string& key_text) const;

  std::filesystem::path dir_;
  std::map<std::string, nlohmann::json> memory_;  ///< by the key's compact text
  std::mutex mutex_;
  uint64_t computed_ = 0;
  uint64_t reused_ = 0;
};

/// `compute()`'s value, or the cached one for `key` when `cache` holds it (then `compute` is not
/// called); a computed value is stored.
Result<nlohmann::json> cached_numerics(NumericsCache* cache, const nlohmann::json& key,
                                       const std::function<Result<nlohmann::json>()>& compute);

/// A double for a cached value (NaN as null) and back.
nlohmann::json cache_number(double v);
double cached_number(const nlohmann::json& v);

/// Identity of the files behind a path (a file, or each regular file of a folder, sorted): name,
/// size and modification time, for a cache key.
nlohmann::json file_stamps(const std::string& path);

}  // namespace ccsim::app
