// OmniReduce's device ops (algorithms/device_ops.hpp): its round ops (kernels/cuda/select_cuda.hpp,
// round_cuda.hpp). Its collective sends fp32, which has no CUDA codec.
#include <fmt/format.h>

#include <functional>
#include <utility>
#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "kernels/cuda/round_cuda.hpp"
#include "kernels/cuda/select_cuda.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// plan_local, the chunk norms and the bitmap of the local top-k chunks (k of the round before its
// plan, as plan_round() calls plan_local); prepare and finish under the round's union.
Status omnireduce_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const auto* omni = dynamic_cast<const OmniReduceCompressor*>(c.comp);
  if (omni == nullptr) return internal_error("omnireduce: the registry made another compressor");
  const uint64_t n = c.n, chunk = omni->alignment();  // alignment() is the chunk
  const uint64_t chunks = omni->chunks_of(n), k = omni->local_k(chunks), words = kern::topk_bitmap_words(chunks);
  const PlanStats stats = cpu_plan_local(c);
  if (chunks != (n + chunk - 1) / chunk || stats.bits.size() != words)
    return internal_error(fmt::format("omnireduce: {} chunks of {} elements in {} bitmap words for a tensor of {}",
                                      chunks, chunk, stats.bits.size(), n));
  size_t temp_bytes = 0;
  CCSIM_RETURN_IF_ERROR(kern::omnireduce_select_cuda(nullptr, temp_bytes, c.d_x, n, chunk, k, nullptr));
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_bitmap, c.dev->allocate(8 * words));
  const float* d_x = c.d_x;
  auto* bitmap = static_cast<uint64_t*>(d_bitmap);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, topo::KernelKind::kPlanLocal,
      [=](kern::CudaStream s) {
        size_t bytes = temp_bytes;
        return kern::omnireduce_select_cuda(d_temp, bytes, d_x, n, chunk, k, bitmap, s);
      },
      stats.bits, d_bitmap, out));

  // prepare under the round's union (the committed bitmap, uploaded): the union's prefix on the
  // device, then the gather (compact) or the mask (sparse); finish scatters back.
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  if (omni->union_bitmap().size() != words || omni->union_prefix().size() != chunks + 1)
    return internal_error(fmt::format("omnireduce: a union of {} words and {} prefix entries for {} chunks",
                                      omni->union_bitmap().size(), omni->union_prefix().size(), chunks));
  CCSIM_ASSIGN_OR_RETURN(void* d_union_v, c.dev->allocate(8 * words));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_union_v, omni->union_bitmap().data(), 8 * words));
  const uint64_t prefix_temp = kern::omnireduce_prefix_cuda_temp_bytes();
  CCSIM_ASSIGN_OR_RETURN(void* d_prefix_temp, c.dev->allocate(prefix_temp));
  CCSIM_ASSIGN_OR_RETURN(void* d_prefix_v, c.dev->allocate(8 * (chunks + 1)));
  const auto* in_union = static_cast<const uint64_t*>(d_union_v);
  auto* prefix = static_cast<uint64_t*>(d_prefix_v);
  const bool compact = omni->compact();
  const uint64_t* own = nullptr;  // send=own: the timed rank's own top-k chunks, uploaded
  if (omni->sends_own()) {
    const std::span<const uint64_t> bits = omni->own_bitmap(kTimedRank);
    if (bits.size() != words) return internal_error(fmt::format("omnireduce: {} own bitmap words", bits.size()));
    CCSIM_ASSIGN_OR_RETURN(void* d_own_v, c.dev->allocate(8 * words));
    CCSIM_RETURN_IF_ERROR(c.dev->upload(d_own_v, bits.data(), 8 * words));
    own = static_cast<const uint64_t*>(d_own_v);
  }
  std::function<Status(const float*, float*, kern::CudaStream)> finish;  // sparse: a copy (no round op)
  if (compact)
    finish = [=](const float* sum, float* tensor, kern::CudaStream s) {
      return kern::omnireduce_finish_cuda(sum, n, chunk, in_union, prefix, true, tensor, s);
    };
  return prepare_finish_cases(
      c, [=](float* prepared, kern::CudaStream s) {
        const Status st = kern::omnireduce_prefix_cuda(in_union, n, chunk, d_prefix_temp, prefix_temp, prefix, s);
        return st.ok() ? kern::omnireduce_prepare_cuda(d_x, n, chunk, in_union, prefix, own, compact, prepared, s) : st;
      },
      std::move(finish), out);
}

}  // namespace
}  // namespace detail

const DeviceOps& OmniReduceCompressor::device_ops() {
  static const DeviceOps kOps{nullptr, {{"{}", detail::omnireduce_round_cases}}};
  return kOps;
}

}  // namespace ccsim::algo
