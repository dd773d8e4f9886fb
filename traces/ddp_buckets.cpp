#include "traces/ddp_buckets.hpp"

namespace ccsim::traces {

std::vector<GradientBucket> make_ddp_buckets(std::span<const uint64_t> layer_params, uint64_t bucket_bytes,
                                             uint64_t first_bucket_bytes, uint32_t bytes_per_param) {
  std::vector<GradientBucket> out;
  GradientBucket cur;
  for (size_t i = layer_params.size(); i-- > 0;) {
    cur.layers.push_back(static_cast<uint32_t>(i));
    cur.params += layer_params[i];
    const uint64_t cap = out.empty() && first_bucket_bytes > 0 ? first_bucket_bytes : bucket_bytes;
    if (cur.params * bytes_per_param >= cap && cur.params > 0) {
      out.push_back(std::move(cur));
      cur = {};
    }
  }
  if (!cur.layers.empty()) {
    if (cur.params == 0 && !out.empty()) {
      for (uint32_t l : cur.layers) out.back().layers.push_back(l);
    } else {
      out.push_back(std::move(cur));
    }
  }
  return out;
}

}  // namespace ccsim::traces
