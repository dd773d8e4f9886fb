// The SDP4Bit schemes' device ops (algorithms/device_ops.hpp): group quantization at their defaults
// (kernels/cuda/block_cuda.hpp) and the round ops of TLq-HS and qWD (kernels/cuda/round_cuda.hpp).
#include <fmt/format.h>

#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/int4/sdp4bit_q.hpp"
#include "kernels/cuda/round_cuda.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// The collective ops of a scheme whose leaf messages are int `leaf_bits` and sums int4, in groups of `group`.
template <uint32_t leaf_bits, uint32_t group>
Result<CollectiveKernels> int_group_kernels(const DeviceContext& c) {
  return group_kernels(int_groups(leaf_bits, group), int_groups(4, group), c.n, c.collective_key());
}

// SDP4Bit TLq-HS (round params: hadamard on): prepare and finish, H_32 on every complete
// 32-element block.
Status tlq_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const uint64_t n = c.n;
  const float* d_x = c.d_x;
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  return prepare_finish_cases(
      c, [=](float* prepared, kern::CudaStream s) { return kern::sdp4bit_hadamard_cuda(d_x, n, prepared, s); },
      [=](const float* sum, float* tensor, kern::CudaStream s) {
        return kern::sdp4bit_hadamard_cuda(sum, n, tensor, s);
      },
      out);
}

// SDP4Bit qWD in its second round, against the reference R the first one left (R = 0 before it):
// prepare x - R, and finish reduced + R of a rank that is not the last (R is kept).
Status qwd_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const auto* w = dynamic_cast<const Sdp4bitWeightCompressor*>(c.comp);
  if (w == nullptr) return internal_error("sdp4bit_qwd: the registry made another compressor");
  const uint64_t n = c.n;
  const float* d_x = c.d_x;
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  {  // round 0: rank 0's prepare sets R = 0, the last rank's finish sets R to the round's result
    std::vector<float> first(n), result(n);
    c.comp->prepare(c.tensor(0), first, 0, kRanks, c.prepare_key(0));
    c.comp->finish(full_sum(first), result, kRanks - 1, kRanks);
  }
  if (w->reference().size() != n)
    return internal_error(fmt::format("sdp4bit_qwd: a reference of {} entries for {}", w->reference().size(), n));
  CCSIM_ASSIGN_OR_RETURN(void* d_ref, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_ref, w->reference().data(), 4 * n));
  auto* reference = static_cast<float*>(d_ref);
  static_assert(kTimedRank + 1 < kRanks, "the timed finish keeps R");
  return prepare_finish_cases(
      c, [=](float* prepared, kern::CudaStream s) {
        return kern::sdp4bit_qwd_prepare_cuda(d_x, n, reference, prepared, s);
      },
      [=](const float* sum, float* tensor, kern::CudaStream s) {
        return kern::sdp4bit_qwd_finish_cuda(sum, n, reference, false, tensor, s);
      },
      out);
}

}  // namespace
}  // namespace detail

const DeviceOps& Sdp4bitQuantCompressor::device_ops() {  // int4, groups of 128
  static const DeviceOps kOps{detail::int_group_kernels<4, 128>};
  return kOps;
}

const DeviceOps& Sdp4bitTlqCompressor::device_ops() {  // int8 at a leaf, int4 sums, groups of 128
  static const DeviceOps kOps{detail::int_group_kernels<8, 128>, {{R"({"hadamard":true})", detail::tlq_round_cases}}};
  return kOps;
}

const DeviceOps& Sdp4bitWeightCompressor::qw_device_ops() {  // int4, groups of 2048
  static const DeviceOps kOps{detail::int_group_kernels<4, 2048>};
  return kOps;
}

const DeviceOps& Sdp4bitWeightCompressor::qwd_device_ops() {
  static const DeviceOps kOps{detail::int_group_kernels<4, 2048>, {{"{}", detail::qwd_round_cases}}};
  return kOps;
}

}  // namespace ccsim::algo
