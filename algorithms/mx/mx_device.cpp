// The MX schemes' device ops (algorithms/device_ops.hpp): the MX codec under the committed block
// scales (kernels/cuda/block_cuda.hpp), and the round ops of block and layer scaling
// (kernels/cuda/round_cuda.hpp).
#include <fmt/format.h>

#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/mx/mx.hpp"
#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/round_cuda.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// MX with the default global block scaling: every message of a round uses the committed round's
// agreed scale codes.
template <kern::MinifloatKind element>
Result<CollectiveKernels> mx_kernels(const DeviceContext& c) {
  const auto* mx = dynamic_cast<const MxCompressor*>(c.comp);
  if (mx == nullptr) return internal_error("mx: the registry made another compressor");
  const uint64_t n = c.n;
  const kern::RngKey key = c.collective_key();
  kern::MxFormat f;
  f.element = element;
  const uint64_t blocks = (n + f.block - 1) / f.block;
  const std::span<const uint32_t> codes = mx->block_codes();
  if (codes.size() != blocks)
    return internal_error(fmt::format("mx: {} committed block codes for {} blocks", codes.size(), blocks));
  CCSIM_ASSIGN_OR_RETURN(void* d_codes, c.dev->allocate(4 * blocks));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_codes, codes.data(), 4 * blocks));
  const auto* sc = static_cast<const uint32_t*>(d_codes);
  CollectiveKernels o;
  o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
    return kern::mx_encode_with_scales_cuda(in, n, f, sc, key, 0, out, nullptr, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::mx_decode_cuda(in, n, f, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::mx_decode_accumulate_cuda(in, n, f, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::mx_decode_accumulate_encode_cuda(in, n, f, acc, sc, key, 0, 0.0f, out, nullptr, s);
  };
  return o;
}

// MX with its default block scaling: plan_local, the largest magnitude of every block (prepare and
// finish are copies: encode applies the agreed scale codes).
Status mx_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const uint64_t n = c.n, block = c.comp->alignment();  // alignment() is the MX block
  const PlanStats stats = cpu_plan_local(c);
  if (stats.max.size() != (n + block - 1) / block)
    return internal_error(fmt::format("{}: {} maxima for {} elements in blocks of {}", c.scheme, stats.max.size(), n,
                                      block));
  CCSIM_ASSIGN_OR_RETURN(void* d_max, c.dev->allocate(4 * stats.max.size()));
  const float* d_x = c.d_x;
  auto* maxima = static_cast<float*>(d_max);
  return add_round_case(
      c, topo::KernelKind::kPlanLocal,
      [=](kern::CudaStream s) { return kern::block_max_abs_cuda(d_x, n, static_cast<uint32_t>(block), maxima, s); },
      stats.max, d_max, out);
}

// MX with layer scaling (round params: global_scaling layer), under the CPU's committed plan of
// the bench's one layer: plan_local, the largest magnitude of every layer; prepare and finish,
// the multiply by every layer's agreed factor (to_fpx, then from_fpx).
Status mx_layer_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  const auto* mx = dynamic_cast<const MxCompressor*>(c.comp);
  if (mx == nullptr) return internal_error(fmt::format("{}: the registry made another compressor", c.scheme));
  const uint64_t n = c.n;
  const PlanStats stats = cpu_plan_local(c);
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const std::span<const MxCompressor::LayerScale> scales = mx->layer_scales();
  if (scales.empty() || stats.max.size() != scales.size())
    return internal_error(fmt::format("{}: {} layer maxima and {} layer scales for {} elements", c.scheme,
                                      stats.max.size(), scales.size(), n));
  std::vector<uint64_t> offsets;
  std::vector<float> to_fpx, from_fpx;
  for (const auto& s : scales) {
    offsets.push_back(s.offset);
    to_fpx.push_back(s.to_fpx);
    from_fpx.push_back(s.from_fpx);
  }
  offsets.push_back(n);
  const uint64_t layers = scales.size(), temp_bytes = kern::layer_max_abs_cuda_temp_bytes(layers);
  CCSIM_ASSIGN_OR_RETURN(void* d_offsets_v, c.dev->allocate(8 * offsets.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_to_v, c.dev->allocate(4 * layers));
  CCSIM_ASSIGN_OR_RETURN(void* d_from_v, c.dev->allocate(4 * layers));
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_max, c.dev->allocate(4 * layers));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_offsets_v, offsets.data(), 8 * offsets.size()));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_to_v, to_fpx.data(), 4 * layers));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_from_v, from_fpx.data(), 4 * layers));
  const float* d_x = c.d_x;
  const auto* d_offsets = static_cast<const uint64_t*>(d_offsets_v);
  const auto* d_to = static_cast<const float*>(d_to_v);
  const auto* d_from = static_cast<const float*>(d_from_v);
  auto* maxima = static_cast<float*>(d_max);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, topo::KernelKind::kPlanLocal,
      [=](kern::CudaStream s) {
        return kern::layer_max_abs_cuda(d_x, n, d_offsets, layers, d_temp, temp_bytes, maxima, s);
      },
      stats.max, d_max, out));
  return prepare_finish_cases(
      c, [=](float* prepared, kern::CudaStream s) {
        return kern::scale_layers_cuda(d_x, n, d_offsets, layers, d_to, prepared, s);
      },
      [=](const float* sum, float* tensor, kern::CudaStream s) {
        return kern::scale_layers_cuda(sum, n, d_offsets, layers, d_from, tensor, s);
      },
      out);
}

// The collective ops, plan_local of the default block scaling, and the round ops of layer scaling
// (the scheme's round_variants).
template <kern::MinifloatKind element>
const DeviceOps& mx_ops() {
  static const DeviceOps kOps{mx_kernels<element>,
                              {{"{}", mx_round_cases}, {R"({"global_scaling":"layer"})", mx_layer_round_cases}}};
  return kOps;
}

}  // namespace
}  // namespace detail

const DeviceOps& MxCompressor::device_ops(kern::MinifloatKind element) {
  using kern::MinifloatKind;
  CCSIM_CHECK(element == MinifloatKind::kFp8E4M3 || element == MinifloatKind::kFp6E3M2 ||
                  element == MinifloatKind::kFp4E2M1,
              "MX element formats are E4M3, E3M2 and E2M1");
  if (element == MinifloatKind::kFp8E4M3) return detail::mx_ops<MinifloatKind::kFp8E4M3>();
  if (element == MinifloatKind::kFp6E3M2) return detail::mx_ops<MinifloatKind::kFp6E3M2>();
  return detail::mx_ops<MinifloatKind::kFp4E2M1>();
}

}  // namespace ccsim::algo
