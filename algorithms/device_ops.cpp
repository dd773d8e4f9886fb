#include "algorithms/device_ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cuda/block_cuda.hpp"

namespace ccsim::algo {
namespace detail {

using topo::KernelKind;

kern::GroupQuantFormat int_groups(uint32_t bits, uint32_t group) {
  kern::GroupQuantFormat f;
  f.element = kern::GroupElement::kInt;
  f.bits = bits;
  f.group = group;
  f.rounding = kern::Rounding::kNearest;
  f.hadamard = false;
  return f;
}

CollectiveKernels group_kernels(const kern::GroupQuantFormat& leaf_f, const kern::GroupQuantFormat& sum_f, uint64_t n,
                                const kern::RngKey& key) {
  CollectiveKernels o;
  o.encode_leaf = [=](const float* x, uint8_t* out, kern::CudaStream s) {
    return kern::group_quant_encode_cuda(x, n, leaf_f, key, 0, out, s);
  };
  o.encode_full = [=](const float* x, uint8_t* out, kern::CudaStream s) {
    return kern::group_quant_encode_cuda(x, n, sum_f, key, 0, out, s);
  };
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::group_quant_decode_cuda(in, n, sum_f, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::group_quant_decode_accumulate_cuda(in, n, leaf_f, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::group_quant_decode_accumulate_encode_cuda(in, n, leaf_f, acc, sum_f, key, 0, out, s);
  };
  return o;
}

Status plan_once(DeviceContext& c) {
  if (c.planned) return ok_status();
  c.planned = true;
  if (c.comp->plan_format(c.n, kRanks).empty()) return ok_status();
  const std::vector<std::span<const float>> ins = {c.tensor(0), c.tensor(1), c.tensor(2), c.tensor(3)};
  return plan_round(*c.comp, ins, NumericsOptions{c.seed, c.round, false}).status();
}

PlanStats cpu_plan_local(const DeviceContext& c) {
  const PlanFormat f = c.comp->plan_format(c.n, kRanks);
  PlanStats s;
  s.sum.assign(f.sum_entries, 0.0);
  s.max.assign(f.max_entries, 0.0f);
  s.bits.assign(f.bit_words, 0);
  c.comp->plan_local(c.tensor(kTimedRank), kTimedRank, c.plan_key(kTimedRank), s);
  return s;
}

std::vector<float> cpu_prepare(const DeviceContext& c) {
  std::vector<float> out(c.comp->reduced_elements(c.n));
  c.comp->prepare(c.tensor(kTimedRank), out, kTimedRank, kRanks, c.prepare_key(kTimedRank));
  return out;
}

std::vector<float> full_sum(std::vector<float> prepared) {
  for (float& v : prepared) v *= static_cast<float>(kRanks);
  return prepared;
}

Status add_checked_case(const DeviceContext& c, KernelKind kind, std::function<Status(kern::CudaStream)> launch,
                        const std::function<Status()>& check, std::vector<DeviceCase>& out) {
  const std::string context = fmt::format("{} {}", c.scheme, topo::kernel_kind_name(kind));
  CCSIM_RETURN_IF_ERROR(launch(nullptr).with_context(context));
  CCSIM_RETURN_IF_ERROR(c.dev->synchronize());
  CCSIM_RETURN_IF_ERROR(check().with_context(fmt::format("{} of a tensor of {} elements", context, c.n)));
  out.push_back({kind, 0, std::move(launch)});
  return ok_status();
}

Status same_bytes(const DeviceContext& c, const void* cpu, uint64_t bytes, const void* d_out) {
  std::vector<uint8_t> gpu(bytes);
  CCSIM_RETURN_IF_ERROR(c.dev->download(gpu.data(), d_out, bytes));
  if (bytes != 0 && std::memcmp(gpu.data(), cpu, bytes) != 0)
    return internal_error(fmt::format("the CUDA output differs from the CPU compressor's ({} bytes): the kernel does "
                                      "not reproduce the scheme", bytes));
  return ok_status();
}

Status finish_case(const DeviceContext& c, const std::vector<float>& sum, uint64_t n,
                   std::function<Status(const float*, float*, kern::CudaStream)> launch,
                   std::vector<DeviceCase>& out) {
  std::vector<float> tensor(n);
  c.comp->finish(sum, tensor, kTimedRank, kRanks);
  CCSIM_ASSIGN_OR_RETURN(void* d_sum, c.dev->allocate(4 * sum.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_tensor, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_sum, sum.data(), 4 * sum.size()));
  const auto* sums = static_cast<const float*>(d_sum);
  auto* finished = static_cast<float*>(d_tensor);
  return add_round_case(
      c, KernelKind::kFinish, [=](kern::CudaStream s) { return launch(sums, finished, s); }, tensor, d_tensor, out);
}

Status prepare_finish_cases(const DeviceContext& c, std::function<Status(float*, kern::CudaStream)> prepare,
                            std::function<Status(const float*, float*, kern::CudaStream)> finish,
                            std::vector<DeviceCase>& out) {
  const std::vector<float> prepared = cpu_prepare(c);
  CCSIM_ASSIGN_OR_RETURN(void* d_prepared, c.dev->allocate(4 * std::max<uint64_t>(prepared.size(), 1)));
  auto* prepared_out = static_cast<float*>(d_prepared);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPrepare, [=](kern::CudaStream s) { return prepare(prepared_out, s); }, prepared, d_prepared,
      out));
  if (!finish) return ok_status();
  return finish_case(c, full_sum(prepared), c.n, std::move(finish), out);
}

namespace {

// The device buffers of the collective cases: x (rank 0's prepared vector), acc (rank 1's), a leaf
// message, a fully reduced message and an output buffer sized for any message.
struct Buffers {
  const float* x = nullptr;
  float* acc = nullptr;
  const uint8_t* leaf = nullptr;
  const uint8_t* full = nullptr;
  uint8_t* out = nullptr;
};

// The compressor of `scheme` made with `params` by the global registry.
Result<std::unique_ptr<Compressor>> make(const std::string& scheme, std::string_view params) {
  return CompressorRegistry::global().create(scheme, nlohmann::json::parse(params));
}

// Builds the messages on the device and checks the leaf message against the CPU compressor's
// (device_ops.hpp); then adds the four cases.
Status add_collective_cases(DeviceContext& c, const CollectiveKernels& ops, std::span<const float> a,
                            std::span<const float> b, std::span<const float> full, std::vector<DeviceCase>& out) {
  const uint64_t n = c.n;
  const TensorSpec spec{0, n};
  const uint64_t leaf_bytes = c.comp->wire_bytes(spec, kLeaf), full_bytes = c.comp->wire_bytes(spec, kFull);
  const uint64_t out_bytes = std::max({leaf_bytes, full_bytes, c.comp->wire_bytes(spec, kSecond)});
  kern::CudaBench& dev = *c.dev;
  CCSIM_ASSIGN_OR_RETURN(void* d_x, dev.allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_acc, dev.allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_tmp, dev.allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_leaf, dev.allocate(leaf_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_full, dev.allocate(full_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_out, dev.allocate(out_bytes));
  Buffers buf{static_cast<const float*>(d_x), static_cast<float*>(d_acc), static_cast<const uint8_t*>(d_leaf),
              static_cast<const uint8_t*>(d_full), static_cast<uint8_t*>(d_out)};
  CCSIM_RETURN_IF_ERROR(dev.upload(d_x, a.data(), 4 * n));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_acc, b.data(), 4 * n));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_tmp, full.data(), 4 * n));
  // The messages, encoded on the device; their sizes are checked by encoding the same vectors on the
  // CPU and comparing the device's bytes with them (a different format would differ).
  CCSIM_RETURN_IF_ERROR(ops.encode_leaf(buf.x, static_cast<uint8_t*>(d_leaf), nullptr));
  CCSIM_RETURN_IF_ERROR(ops.encode_full(static_cast<const float*>(d_tmp), static_cast<uint8_t*>(d_full), nullptr));
  CCSIM_RETURN_IF_ERROR(dev.synchronize());
  {
    std::vector<uint8_t> cpu(leaf_bytes), gpu(leaf_bytes);
    c.comp->encode(a, spec, kLeaf, c.collective_key(), cpu);
    CCSIM_RETURN_IF_ERROR(dev.download(gpu.data(), d_leaf, leaf_bytes));
    if (cpu != gpu)
      return internal_error(fmt::format("{}: the CUDA leaf message of {} elements differs from the CPU compressor's "
                                        "({} bytes): the bench's format is not the scheme's default",
                                        c.scheme, n, leaf_bytes));
  }
  out.push_back({KernelKind::kEncode, c.comp->memory_bytes(KernelKind::kEncode, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.encode_leaf(buf.x, buf.out, s); }});
  out.push_back({KernelKind::kDecode, c.comp->memory_bytes(KernelKind::kDecode, spec, kFull),
                 [=](kern::CudaStream s) { return ops.decode_full(buf.full, buf.acc, s); }});
  out.push_back({KernelKind::kDecodeAccumulate, c.comp->memory_bytes(KernelKind::kDecodeAccumulate, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.decode_accumulate_leaf(buf.leaf, buf.acc, s); }});
  out.push_back({KernelKind::kDecodeAccumulateEncode,
                 c.comp->memory_bytes(KernelKind::kDecodeAccumulateEncode, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.fused(buf.leaf, buf.acc, buf.out, s); }});
  return ok_status();
}

// The four collective ops of `scheme` (default parameters) on a chunk of n elements laid out as one
// column, its round 0 planned over x0, x1, x0, x1 (device_ops.hpp).
Status collective_cases(const std::string& scheme, CollectiveBuilder build, uint64_t n, std::span<const float> x0,
                        std::span<const float> x1, uint64_t seed, kern::CudaBench& dev,
                        std::vector<DeviceCase>& out) {
  CCSIM_ASSIGN_OR_RETURN(auto comp, make(scheme, "{}"));
  const LayerShape layer{0, n, n, 1};
  comp->set_layout(std::span<const LayerShape>(&layer, 1));
  const std::span<const float> a0 = x0.first(n), a1 = x1.first(n);
  if (!comp->plan_format(n, kRanks).empty()) {
    const std::vector<std::span<const float>> ins = {a0, a1, a0, a1};
    CCSIM_RETURN_IF_ERROR(plan_round(*comp, ins, NumericsOptions{seed, 0, false}).status());
  }
  // A scheme that pads its reduced vector (THC: to its rotation block) is timed on the first n
  // entries of it, a chunk as the collective hands one to its ops; one that reduces fewer entries
  // than the tensor has (low-rank factors) has no elementwise collective ops to time here.
  const uint64_t reduced = comp->reduced_elements(n);
  if (reduced < n)
    return internal_error(fmt::format("{}: the CUDA bench expects a reduced vector of at least {} elements, got {}",
                                      scheme, n, reduced));
  std::vector<float> a(reduced), b(reduced), full(n);
  comp->prepare(a0, a, 0, kRanks, kern::RngKey{seed, 0, 0, kPrepareStream});
  comp->prepare(a1, b, 1, kRanks, kern::RngKey{seed, 0, 1, kPrepareStream});
  a.resize(n);
  b.resize(n);
  for (uint64_t i = 0; i < n; ++i) full[i] = b[i] * static_cast<float>(kRanks);
  CCSIM_RETURN_IF_ERROR(comp->can_implement(TensorSpec{0, n}));
  DeviceContext c;
  c.scheme = scheme;
  c.comp = comp.get();
  c.n = n;
  c.seed = seed;
  c.x0 = a0;
  c.x1 = a1;
  c.dev = &dev;
  CCSIM_ASSIGN_OR_RETURN(CollectiveKernels ops, build(c));
  return add_collective_cases(c, ops, a, b, full, out);
}

// The round cases of `scheme` made with `params` on a tensor of n elements: a fresh compressor laid
// out as bench_layer(n), rank kTimedRank's tensor uploaded, `build`'s checked cases, and their
// declared memory traffic after the round's plan (as the timing interpreter asks for it).
Status round_cases(const std::string& scheme, const RoundDeviceOps& ops, uint64_t n, std::span<const float> x0,
                   std::span<const float> x1, uint64_t seed, kern::CudaBench& dev, std::vector<DeviceCase>& out) {
  CCSIM_ASSIGN_OR_RETURN(auto comp, make(scheme, ops.params));
  const LayerShape layer = bench_layer(n);
  comp->set_layout(std::span<const LayerShape>(&layer, 1));
  DeviceContext c;
  c.scheme = scheme;
  c.comp = comp.get();
  c.n = n;
  c.seed = seed;
  c.x0 = x0.first(n);
  c.x1 = x1.first(n);
  c.dev = &dev;
  CCSIM_ASSIGN_OR_RETURN(void* d_x, dev.allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_x, c.tensor(kTimedRank).data(), 4 * n));
  c.d_x = static_cast<const float*>(d_x);
  const size_t first = out.size();
  CCSIM_RETURN_IF_ERROR(ops.build(c, out));
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  for (size_t i = first; i < out.size(); ++i) {
    out[i].bytes = comp->memory_bytes(out[i].kind, TensorSpec{0, n}, HopContext{1, kRanks});
    out[i].params = ops.params;
  }
  return ok_status();
}

}  // namespace
}  // namespace detail

Status device_cases(const CompressorInfo& info, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                    uint64_t seed, kern::CudaBench& dev, std::vector<DeviceCase>& out) {
  if (info.device_ops == nullptr) return invalid_argument(fmt::format("no CUDA kernels for scheme '{}'", info.name));
  const DeviceOps& ops = *info.device_ops;
  if (ops.collective != nullptr)
    CCSIM_RETURN_IF_ERROR(detail::collective_cases(info.name, ops.collective, n, x0, x1, seed, dev, out));
  for (const RoundDeviceOps& r : ops.rounds)
    CCSIM_RETURN_IF_ERROR(detail::round_cases(info.name, r, n, x0, x1, seed, dev, out));
  return ok_status();
}

Result<std::vector<kern::KernelCostCurve>> measure_device_kernels(const CompressorInfo& info,
                                                                  std::span<const uint64_t> sizes,
                                                                  std::span<const float> x0, std::span<const float> x1,
                                                                  uint64_t seed, uint32_t repeats,
                                                                  kern::CudaBench& dev) {
  std::vector<kern::KernelCostCurve> curves;
  auto curve_of = [&](const DeviceCase& c) -> kern::KernelCostCurve& {
    const std::string op(topo::kernel_kind_name(c.kind));
    for (auto& k : curves)
      if (k.op == op && k.params == c.params) return k;
    return curves.emplace_back(kern::KernelCostCurve{info.name, op, c.params, 0, {}});
  };
  std::vector<uint64_t> points = {256};  // the launch-overhead point
  for (uint64_t n : sizes) points.push_back(n);
  for (size_t si = 0; si < points.size(); ++si) {
    std::vector<DeviceCase> cases;
    CCSIM_RETURN_IF_ERROR(device_cases(info, points[si], x0, x1, seed, dev, cases));
    CCSIM_RETURN_IF_ERROR(dev.synchronize());
    for (const DeviceCase& c : cases) {
      double t = 0;
      CCSIM_RETURN_IF_ERROR(dev.median_seconds(repeats, c.launch, t));
      kern::KernelCostCurve& k = curve_of(c);
      if (si == 0)
        k.launch_s = t;
      else
        k.points.push_back({points[si], c.bytes, t});
    }
    dev.release_all();
  }
  std::erase_if(curves, [](const kern::KernelCostCurve& c) { return c.points.empty(); });
  return curves;
}

}  // namespace ccsim::algo
