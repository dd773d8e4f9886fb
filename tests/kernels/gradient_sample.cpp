#include "tests/kernels/gradient_sample.hpp"

#include <map>
#include <mutex>

#include "traces/gradient_dump.hpp"

namespace ccsim::test {

std::vector<float> shipped_gradient(uint32_t worker, uint64_t offset, uint64_t count, std::string& error) {
  // Each worker's vector is read once per process.
  static std::mutex mutex;
  static std::map<uint32_t, std::vector<float>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(worker);
  if (it == cache.end()) {
    auto dump = traces::GradientDump::open(std::string(CCSIM_SOURCE_DIR) + "/traces/data/gpt-bpe");
    if (!dump.ok()) {
      error = dump.status().message();
      return {};
    }
    auto g = dump->worker(worker, 0);
    if (!g.ok()) {
      error = g.status().message();
      return {};
    }
    it = cache.emplace(worker, std::vector<float>(g->values().begin(), g->values().end())).first;
  }
  const std::vector<float>& all = it->second;
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = all[(offset + i) % all.size()];
  return out;
}

}  // namespace ccsim::test
