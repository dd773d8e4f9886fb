#pragma once
/// \file
/// PyTorch DDP's gradient buckets (part of mapping a model onto data parallelism): the layers are
/// walked from the last to the first (the order backward produces their gradients) and packed into
/// buckets, a bucket closed once it holds at least its cap of gradient bytes (`bucket_cap`; the
/// first bucket may have a smaller cap). A layer is never split; layers without parameters join the
/// bucket being filled (the last such run joins the bucket before it).

#include <cstdint>
#include <span>
#include <vector>

namespace ccsim::traces {

/// Layers synchronized together.
struct GradientBucket {
  std::vector<uint32_t> layers;  ///< in backward order (descending layer index)
  uint64_t params = 0;           ///< gradient entries of its layers
};

/// The buckets of layers with `layer_params` parameters each (model order), `bytes_per_param` bytes
/// of gradient per parameter, caps `bucket_bytes` and `first_bucket_bytes` (0: as the others).
std::vector<GradientBucket> make_ddp_buckets(std::span<const uint64_t> layer_params, uint64_t bucket_bytes,
                                             uint64_t first_bucket_bytes, uint32_t bytes_per_param);

}  // namespace ccsim::traces
