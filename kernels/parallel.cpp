#include "kernels/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ccsim::kern {
namespace {
std::atomic<int> g_threads{0};
thread_local bool t_serial = false;

int default_threads() {
  if (const char* env = std::getenv("CCSIM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

int worker_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_worker_threads(int n) { g_threads.store(std::max(1, n), std::memory_order_relaxed); }

SerialScope::SerialScope() : was_(t_serial) { t_serial = true; }
SerialScope::~SerialScope() { t_serial = was_; }

void parallel_for(uint64_t count, uint64_t grain, const std::function<void(uint64_t, uint64_t)>& fn) {
  grain = std::max<uint64_t>(grain, 1);
  const uint64_t max_pieces = (count + grain - 1) / grain;
  const uint64_t threads =
      t_serial ? 1 : std::min<uint64_t>(static_cast<uint64_t>(worker_threads()), max_pieces);
  if (threads <= 1) {
    if (count > 0) fn(0, count);
    return;
  }
  const uint64_t piece = (count + threads - 1) / threads;
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (uint64_t t = 1; t < threads; ++t) {
    const uint64_t b = t * piece, e = std::min(count, b + piece);
    if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(0, std::min(count, piece));
  for (auto& th : pool) th.join();
}

}  // namespace ccsim::kern
