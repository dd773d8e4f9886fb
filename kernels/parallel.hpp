#pragma once
/// \file
/// parallel_for over an index range with std::thread. Work is split into fixed, thread-count
/// independent pieces, and every kernel draws randomness from a counter-based generator keyed by
/// element index, so results are identical whatever the number of threads.

#include <cstdint>
#include <functional>

namespace ccsim::kern {

/// Number of worker threads used by parallel_for (default: hardware concurrency; the
/// CCSIM_THREADS environment variable overrides it).
int worker_threads();
/// Overrides the thread count for this process (tests use it to prove thread-count independence).
void set_worker_threads(int n);

/// While one lives, parallel_for() calls made on its thread run inline: for a caller that already
/// gives every thread a share of its work (each share's kernels then run on that share's thread).
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool was_;
};

/// Calls `fn(begin, end)` on disjoint pieces covering [0, count). Pieces are at least `grain`
/// long; runs inline when the range is small, only one thread is configured, or a SerialScope
/// lives on the calling thread.
/// REQUIRES: `fn` writes only to data indexed inside its own piece.
void parallel_for(uint64_t count, uint64_t grain, const std::function<void(uint64_t, uint64_t)>& fn);

}  // namespace ccsim::kern
