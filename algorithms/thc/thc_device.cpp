// THC's device ops (algorithms/device_ops.hpp): the collective's field pack/unpack on the lattice
// codes and the round ops (kernels/cuda/thc_cuda.hpp).
#include <fmt/format.h>

#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/thc/thc.hpp"
#include "kernels/cuda/thc_cuda.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// The collective's ops on the lattice codes: b-bit fields (8 bits for 4 ranks).
Result<CollectiveKernels> thc_kernels(const DeviceContext& c) {
  const uint64_t n = c.n;
  const auto bits = static_cast<uint32_t>(c.comp->wire_bytes(TensorSpec{0, n}, kLeaf) * 8 / n);
  CollectiveKernels o;
  o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
    return kern::thc_pack_cuda(in, n, bits, out, nullptr, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::thc_unpack_cuda(in, n, bits, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::thc_unpack_accumulate_cuda(in, n, bits, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::thc_unpack_accumulate_pack_cuda(in, n, bits, acc, out, nullptr, s);
  };
  return o;
}

// As tests/kernels/thc_cuda_test.cu drives the kernels: plan_local (the one max entry, with the
// plan key's shared signs), then, under the CPU's committed lattice and the round's shared sign key,
// prepare (the lattice codes) and finish (of kRanks times those codes).
Status thc_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  using topo::KernelKind;
  auto* thc = dynamic_cast<ThcCompressor*>(c.comp);
  if (thc == nullptr) return internal_error("thc: the registry made another compressor");
  const uint64_t n = c.n, block = thc->rotation_block_for(n), padded = thc->reduced_elements(n);
  if (padded != kern::thc_padded_elements(n, block))
    return internal_error(fmt::format("thc: {} reduced elements for a tensor of {} in blocks of {}", padded, n, block));
  const float* d_x = c.d_x;

  const PlanStats stats = cpu_plan_local(c);
  if (stats.max.size() != 1) return internal_error(fmt::format("thc: {} max entries, expected 1", stats.max.size()));
  const uint64_t temp_bytes = kern::thc_plan_local_cuda_temp_bytes(n, block);
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_entry, c.dev->allocate(sizeof(float)));
  const kern::RngKey plan_signs = ThcCompressor::shared_key(c.plan_key(kTimedRank));
  auto* entry = static_cast<float*>(d_entry);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPlanLocal,
      [=](kern::CudaStream s) {
        return kern::thc_plan_local_cuda(d_x, n, block, plan_signs, d_temp, temp_bytes, entry, s);
      },
      stats.max, d_entry, out));

  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const kern::ThcLattice lattice = thc->committed_lattice();
  const kern::RngKey code_key = c.prepare_key(kTimedRank), signs = ThcCompressor::shared_key(code_key);
  const std::vector<float> codes = cpu_prepare(c);
  CCSIM_ASSIGN_OR_RETURN(void* d_codes, c.dev->allocate(4 * padded));
  auto* codes_out = static_cast<float*>(d_codes);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPrepare,
      [=](kern::CudaStream s) {
        return kern::thc_prepare_cuda(d_x, n, block, lattice, signs, code_key, codes_out, s);
      },
      codes, d_codes, out));

  // finish's CPU side needs the planned ranks (kRanks).
  const std::vector<float> sum = full_sum(codes);
  std::vector<float> tensor(n);
  thc->finish(sum, tensor, kTimedRank, kRanks);
  CCSIM_ASSIGN_OR_RETURN(void* d_sum, c.dev->allocate(4 * padded));
  CCSIM_ASSIGN_OR_RETURN(void* d_out, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_sum, sum.data(), 4 * padded));
  auto* sums = static_cast<float*>(d_sum);
  auto* finished = static_cast<float*>(d_out);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kFinish,
      [=](kern::CudaStream s) { return kern::thc_finish_cuda(sums, n, block, lattice, kRanks, signs, finished, s); },
      tensor, d_out, out));
  // A rotation of more than one pass works in place in d_sum: the timed launches start from the sums
  // again (the later ones rotate what the earlier left there: the same passes over the same bytes).
  return c.dev->upload(d_sum, sum.data(), 4 * padded);
}

}  // namespace
}  // namespace detail

const DeviceOps& ThcCompressor::device_ops() {
  static const DeviceOps kOps{detail::thc_kernels, {{"{}", detail::thc_round_cases}}};
  return kOps;
}

}  // namespace ccsim::algo
