#pragma once
/// \file
/// A map from picosecond times to small indices, kept in one flat array (open addressing with
/// linear probing, at most half full, deletion by backward shift: no tombstones, so lookups stay
/// short however many keys come and go). The flow network finds the completion batch of a time
/// through it once per scheduled completion; a node-based map spent most of that in cache misses.

#include <cstdint>
#include <vector>

namespace ccsim::sim {

class TimeIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  size_t size() const { return size_; }

  /// The value stored at `key`, or kNone.
  uint32_t find(int64_t key) const {
    if (size_ == 0) return kNone;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.value == kNone) return kNone;
      if (e.key == key) return e.value;
    }
  }

  /// Stores `value` at `key`, which must be absent. REQUIRES: value != kNone.
  void insert(int64_t key, uint32_t value) {
    if (2 * (size_ + 1) > table_.size()) grow();
    size_t i = home(key);
    while (table_[i].value != kNone) i = (i + 1) & mask_;
    table_[i] = Entry{key, value};
    ++size_;
  }

  /// Removes `key`; returns whether it was present.
  bool erase(int64_t key) {
    if (size_ == 0) return false;
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (table_[i].value == kNone) return false;
      if (table_[i].key == key) break;
    }
    // Backward shift: move later members of the probe run into the hole while their home allows.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (table_[j].value == kNone) break;
      const size_t h = home(table_[j].key);
      // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
      const bool home_after_hole = ((j - h) & mask_) < ((j - i) & mask_);
      if (home_after_hole) continue;
      table_[i] = table_[j];
      i = j;
    }
    table_[i].value = kNone;
    --size_;
    return true;
  }

 private:
  struct Entry {
    int64_t key = 0;
    uint32_t value = kNone;
  };

  size_t home(int64_t key) const {
    // A 64-bit finalizer (MurmurHash3's fmix64): nearby times land far apart.
    auto x = static_cast<uint64_t>(key);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return static_cast<size_t>(x) & mask_;
  }

  void grow() {
    std::vector<Entry> old = std::move(table_);
    table_.assign(old.empty() ? 64 : 2 * old.size(), Entry{});
    mask_ = table_.size() - 1;
    size_ = 0;
    for (const Entry& e : old)
      if (e.value != kNone) insert(e.key, e.value);
  }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace ccsim::sim
