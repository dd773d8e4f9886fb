// DynamiQ's device ops (algorithms/device_ops.hpp): the codec under the committed plan and the
// round ops (kernels/cuda/dynamiq_cuda.hpp, round_cuda.hpp).
#include <fmt/format.h>

#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/dynamiq/dynamiq.hpp"
#include "kernels/cuda/dynamiq_cuda.hpp"
#include "kernels/cuda/round_cuda.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// DynamiQ at its defaults under the CPU compressor's committed plan (widths, layout and grids uploaded).
Result<CollectiveKernels> dynamiq_kernels(const DeviceContext& c) {
  const auto* dq = dynamic_cast<const DynamiqCompressor*>(c.comp);
  if (dq == nullptr) return internal_error("dynamiq: the registry made another compressor");
  const DynamiqCompressor::Options opt{};
  const uint64_t n = c.n;
  const kern::RngKey key = c.collective_key();
  kern::CudaBench& dev = *c.dev;
  std::vector<uint8_t> widths(dq->super_groups());
  for (uint64_t j = 0; j < widths.size(); ++j) widths[j] = static_cast<uint8_t>(dq->width_of(j));
  CCSIM_ASSIGN_OR_RETURN(
      kern::DynamiqCudaLayout layout,
      kern::dynamiq_cuda_layout(widths, n, opt.super_group, opt.group, opt.hierarchical, opt.reorder));
  const std::vector<float> levels = kern::dynamiq_cuda_levels(opt.nonuniform, opt.eps4, opt.eps8, opt.eps16);
  CCSIM_ASSIGN_OR_RETURN(void* d_widths, dev.allocate(layout.widths.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_offsets, dev.allocate(8 * layout.block_offset.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_levels, dev.allocate(4 * levels.size()));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_widths, layout.widths.data(), layout.widths.size()));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_offsets, layout.block_offset.data(), 8 * layout.block_offset.size()));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_levels, levels.data(), 4 * levels.size()));
  kern::DynamiqCudaPlan plan;
  plan.elements = n;
  plan.super_group = opt.super_group;
  plan.group = opt.group;
  plan.hierarchical = opt.hierarchical;
  plan.correlated = opt.correlated;
  plan.d_widths = static_cast<const uint8_t*>(d_widths);
  plan.d_block_offset = static_cast<const uint64_t*>(d_offsets);
  plan.d_levels = static_cast<const float*>(d_levels);
  CollectiveKernels o;
  o.encode_leaf = [=](const float* x, uint8_t* out, kern::CudaStream s) {
    return kern::dynamiq_encode_cuda(x, 0, n, plan, key, kRanks, out, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::dynamiq_decode_cuda(in, 0, n, plan, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::dynamiq_decode_accumulate_cuda(in, 0, n, plan, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::dynamiq_decode_accumulate_encode_cuda(in, 0, n, plan, acc, key, kRanks, out, s);
  };
  return o;
}

// plan_local, the sums and sums of squares of every super-group (doubles); prepare and finish
// under the round's plan.
Status dynamiq_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const uint32_t sg = DynamiqCompressor::Options{}.super_group;  // the default, as dynamiq_kernels()
  const uint64_t n = c.n, groups = (n + sg - 1) / sg;
  const PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != 2 * groups)
    return internal_error(fmt::format("dynamiq: {} statistics for {} super-groups of {} entries", stats.sum.size(),
                                      groups, sg));
  CCSIM_ASSIGN_OR_RETURN(void* d_sums, c.dev->allocate(8 * 2 * groups));
  const float* d_x = c.d_x;
  auto* sums = static_cast<double*>(d_sums);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, topo::KernelKind::kPlanLocal,
      [=](kern::CudaStream s) { return kern::dynamiq_statistics_cuda(d_x, n, sg, sums, s); }, stats.sum, d_sums,
      out));

  // prepare and finish under the round's plan: its super-group order and means, uploaded.
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const auto* dq = dynamic_cast<const DynamiqCompressor*>(c.comp);
  if (dq == nullptr) return internal_error("dynamiq: the registry made another compressor");
  if (dq->order().size() != groups || dq->means().size() != groups)
    return internal_error(fmt::format("dynamiq: a plan of {} super-groups for {}", dq->order().size(), groups));
  CCSIM_ASSIGN_OR_RETURN(void* d_order_v, c.dev->allocate(4 * groups));
  CCSIM_ASSIGN_OR_RETURN(void* d_mean_v, c.dev->allocate(4 * groups));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_order_v, dq->order().data(), 4 * groups));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_mean_v, dq->means().data(), 4 * groups));
  const auto* order = static_cast<const uint32_t*>(d_order_v);
  const auto* mean = static_cast<const float*>(d_mean_v);
  return prepare_finish_cases(
      c, [=](float* prepared, kern::CudaStream s) {
        return kern::dynamiq_prepare_cuda(d_x, n, sg, order, mean, prepared, s);
      },
      [=](const float* sum, float* tensor, kern::CudaStream s) {
        return kern::dynamiq_finish_cuda(sum, n, sg, order, mean, kRanks, tensor, s);
      },
      out);
}

}  // namespace
}  // namespace detail

const DeviceOps& DynamiqCompressor::device_ops() {
  static const DeviceOps kOps{detail::dynamiq_kernels, {{"{}", detail::dynamiq_round_cases}}};
  return kOps;
}

}  // namespace ccsim::algo
