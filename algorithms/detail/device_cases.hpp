#pragma once
/// \file
/// What the schemes' device ops (algorithms/<family>/<family>_device.cpp) share: the codecs several
/// schemes use for their collective ops, and the round cases' checks against the CPU compressor
/// (algorithms/device_ops.hpp gives the contract). Defined in algorithms/device_ops.cpp; compiled
/// only where the build has CUDA.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "algorithms/device_ops.hpp"
#include "kernels/quant/group_quant.hpp"

namespace ccsim::algo::detail {

inline constexpr uint32_t kRanks = kDeviceRanks;
inline constexpr uint32_t kTimedRank = kDeviceTimedRank;
inline constexpr HopContext kLeaf{1, kRanks}, kSecond{2, kRanks}, kFull{kRanks, kRanks};

// ---- Collective ops -------------------------------------------------------------------------------

/// Integer group quantization of `bits` bits in groups of `group`, round to nearest, no Hadamard.
kern::GroupQuantFormat int_groups(uint32_t bits, uint32_t group);

/// The collective ops of a group-quantization scheme: leaf messages in `leaf_f`, partial and full
/// sums in `sum_f` (kernels/cuda/block_cuda.hpp), on n elements under `key`.
CollectiveKernels group_kernels(const kern::GroupQuantFormat& leaf_f, const kern::GroupQuantFormat& sum_f, uint64_t n,
                                const kern::RngKey& key);

/// The collective ops of an elementwise 16-bit codec (BF16, FP16): its four host entry points.
template <class Enc, class Dec, class DecAcc, class Fused>
CollectiveKernels elem16_kernels(Enc enc, Dec dec, DecAcc dec_acc, Fused fused, uint64_t n) {
  CollectiveKernels o;
  o.encode_leaf = [=](const float* x, uint8_t* out, kern::CudaStream s) {
    return enc(x, n, reinterpret_cast<uint16_t*>(out), s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return dec(reinterpret_cast<const uint16_t*>(in), n, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return dec_acc(reinterpret_cast<const uint16_t*>(in), n, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return fused(reinterpret_cast<const uint16_t*>(in), n, acc, reinterpret_cast<uint16_t*>(out), s);
  };
  return o;
}

// ---- Round ops ------------------------------------------------------------------------------------

/// The round's plan on the CPU, once: plan_round() over the kRanks tensors, keys {seed, round, r,
/// kPlanStream}. Nothing to plan for a scheme without a metadata phase.
Status plan_once(DeviceContext& c);

/// Rank kTimedRank's metadata statistics on the CPU, as plan_round() computes them: sized by
/// plan_format(), under the rank's plan key.
PlanStats cpu_plan_local(const DeviceContext& c);

/// Rank kTimedRank's prepared vector on the CPU (reduced_elements(n) entries), under its prepare key.
/// REQUIRES: plan_once().
std::vector<float> cpu_prepare(const DeviceContext& c);

/// A fully reduced vector for finish(): kRanks times a prepared vector (as the collective cases'
/// fully reduced message).
std::vector<float> full_sum(std::vector<float> prepared);

/// Runs `launch` once (on the legacy default stream, as the set-up launches), then `check` (which
/// compares what it wrote with the CPU compressor's output), and adds it as the case of `kind`.
/// A failed check is an internal error naming the scheme, op and size.
Status add_checked_case(const DeviceContext& c, topo::KernelKind kind, std::function<Status(kern::CudaStream)> launch,
                        const std::function<Status()>& check, std::vector<DeviceCase>& out);

/// The `bytes` at d_out equal the CPU compressor's `cpu`, byte for byte.
Status same_bytes(const DeviceContext& c, const void* cpu, uint64_t bytes, const void* d_out);

/// add_checked_case() with the check that the `cpu.size()` values at d_out equal `cpu`, byte for byte.
template <class T>
Status add_round_case(const DeviceContext& c, topo::KernelKind kind, std::function<Status(kern::CudaStream)> launch,
                      const std::vector<T>& cpu, const void* d_out, std::vector<DeviceCase>& out) {
  return add_checked_case(
      c, kind, std::move(launch), [&] { return same_bytes(c, cpu.data(), cpu.size() * sizeof(T), d_out); }, out);
}

/// The finish case of a scheme whose finish reads a reduced vector and writes the tensor (n
/// elements): `sum` uploaded, the CPU compressor's finish of it as rank kTimedRank (of kRanks) to
/// check `launch(d_sum, d_tensor, stream)` against. REQUIRES: plan_once().
Status finish_case(const DeviceContext& c, const std::vector<float>& sum, uint64_t n,
                   std::function<Status(const float*, float*, kern::CudaStream)> launch,
                   std::vector<DeviceCase>& out);

/// The prepare case, `prepare(d_prepared, stream)` checked against rank kTimedRank's cpu_prepare(),
/// then, unless `finish` is empty, the finish case of kRanks times that prepared vector
/// (finish_case()). REQUIRES: plan_once().
Status prepare_finish_cases(const DeviceContext& c, std::function<Status(float*, kern::CudaStream)> prepare,
                            std::function<Status(const float*, float*, kern::CudaStream)> finish,
                            std::vector<DeviceCase>& out);

}  // namespace ccsim::algo::detail
