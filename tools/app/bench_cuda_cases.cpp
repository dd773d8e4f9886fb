#include "tools/app/bench_cuda_cases.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/mx/mx.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/thc/thc.hpp"
#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/dynamiq_cuda.hpp"
#include "kernels/cuda/entropy_cuda.hpp"
#include "kernels/cuda/lowrank_cuda.hpp"
#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/cuda/round_cuda.hpp"
#include "kernels/cuda/select_cuda.hpp"
#include "kernels/cuda/thc_cuda.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/quant/group_quant.hpp"
#include "kernels/quant/mx.hpp"
#include "kernels/quant/qsgd.hpp"
#include "kernels/quant/tfp.hpp"
#include "kernels/stats/entropy.hpp"
#include "tools/app/bench_kernels.hpp"

namespace ccsim::app {
namespace {

using topo::KernelKind;
constexpr uint32_t kRanks = 4;  // as the CPU bench
const algo::HopContext kLeaf{1, kRanks}, kSecond{2, kRanks}, kFull{kRanks, kRanks};

// One op's launcher given the device buffers: x (rank 0's prepared vector), acc (rank 1's), a leaf
// message, a fully reduced message and an output buffer sized for any message.
struct Buffers {
  const float* x = nullptr;
  float* acc = nullptr;
  const uint8_t* leaf = nullptr;
  const uint8_t* full = nullptr;
  uint8_t* out = nullptr;
};

// The four ops of one scheme: encode(x -> out), decode(full -> acc), decode_accumulate(leaf -> acc)
// and the fused hop (leaf, acc -> out), plus how to make the leaf and full messages from a vector.
struct Ops {
  std::function<Status(const float* x, uint8_t* out, kern::CudaStream)> encode_leaf, encode_full;
  std::function<Status(const uint8_t* in, float* out, kern::CudaStream)> decode_full, decode_accumulate_leaf;
  std::function<Status(const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream)> fused;
};

kern::GroupQuantFormat int_groups(uint32_t bits, uint32_t group) {
  kern::GroupQuantFormat f;
  f.element = kern::GroupElement::kInt;
  f.bits = bits;
  f.group = group;
  f.rounding = kern::Rounding::kNearest;
  f.hadamard = false;
  return f;
}

// A scheme whose every message has one format `f` (group quantization).
Ops group_ops(const kern::GroupQuantFormat& leaf_f, const kern::GroupQuantFormat& sum_f, uint64_t n,
              const kern::RngKey& key) {
  Ops o;
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

// An elementwise 16-bit codec (BF16, FP16).
template <class Enc, class Dec, class DecAcc, class Fused>
Ops elem16_ops(Enc enc, Dec dec, DecAcc dec_acc, Fused fused, uint64_t n) {
  Ops o;
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

// MX with the default global block scaling: every message of a round uses the committed round's
// agreed scale codes.
Result<Ops> mx_ops(const algo::Compressor& comp, kern::MinifloatKind element, uint64_t n, const kern::RngKey& key,
                   kern::CudaBench& dev) {
  const auto* mx = dynamic_cast<const algo::MxCompressor*>(&comp);
  if (mx == nullptr) return internal_error("mx: the registry made another compressor");
  kern::MxFormat f;
  f.element = element;
  const uint64_t blocks = (n + f.block - 1) / f.block;
  const std::span<const uint32_t> codes = mx->block_codes();
  if (codes.size() != blocks)
    return internal_error(fmt::format("mx: {} committed block codes for {} blocks", codes.size(), blocks));
  CCSIM_ASSIGN_OR_RETURN(void* d_codes, dev.allocate(4 * blocks));
  CCSIM_RETURN_IF_ERROR(dev.upload(d_codes, codes.data(), 4 * blocks));
  const auto* c = static_cast<const uint32_t*>(d_codes);
  Ops o;
  o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
    return kern::mx_encode_with_scales_cuda(in, n, f, c, key, 0, out, nullptr, s);
  };
  o.encode_full = o.encode_leaf;
  o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
    return kern::mx_decode_cuda(in, n, f, out, s);
  };
  o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
    return kern::mx_decode_accumulate_cuda(in, n, f, acc, s);
  };
  o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
    return kern::mx_decode_accumulate_encode_cuda(in, n, f, acc, c, key, 0, 0.0f, out, nullptr, s);
  };
  return o;
}

// DynamiQ under the CPU compressor's committed plan (widths, layout and grids uploaded).
Result<Ops> dynamiq_ops(const algo::DynamiqCompressor& comp, const algo::DynamiqCompressor::Options& opt, uint64_t n,
                        const kern::RngKey& key, kern::CudaBench& dev) {
  std::vector<uint8_t> widths(comp.super_groups());
  for (uint64_t j = 0; j < widths.size(); ++j) widths[j] = static_cast<uint8_t>(comp.width_of(j));
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
  Ops o;
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

// The kernels of `scheme` at its default parameters (each must match the compressor's defaults;
// the wire sizes are checked against the compressor by the caller).
Result<Ops> scheme_ops(const std::string& scheme, const algo::Compressor& comp, uint64_t n, const kern::RngKey& key,
                       kern::CudaBench& dev) {
  if (scheme == "bf16") {
    return elem16_ops(kern::bf16_encode_cuda, kern::bf16_decode_cuda, kern::bf16_decode_accumulate_cuda,
                      kern::bf16_decode_accumulate_encode_cuda, n);
  }
  if (scheme == "fp16") {
    return elem16_ops(kern::fp16_encode_cuda, kern::fp16_decode_cuda, kern::fp16_decode_accumulate_cuda,
                      kern::fp16_decode_accumulate_encode_cuda, n);
  }
  if (scheme == "int8") {  // block 256, stochastic rounding
    kern::GroupQuantFormat f = int_groups(8, 256);
    f.rounding = kern::Rounding::kStochastic;
    return group_ops(f, f, n, key);
  }
  if (scheme == "equarx") return group_ops(int_groups(8, 64), int_groups(8, 64), n, key);  // int8, block 64
  if (scheme == "sdp4bit_q") return group_ops(int_groups(4, 128), int_groups(4, 128), n, key);
  if (scheme == "sdp4bit_tlq") return group_ops(int_groups(8, 128), int_groups(4, 128), n, key);  // int8 at a leaf
  if (scheme == "sdp4bit_qw" || scheme == "sdp4bit_qwd") {
    return group_ops(int_groups(4, 2048), int_groups(4, 2048), n, key);
  }
  if (scheme == "tfp") {  // k = 16 of fp32, truncation
    const kern::TfpFormat f{kern::TfpBase::kFloat32, 16};
    Ops o;
    o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
      return kern::tfp_encode_cuda(in, n, f, false, key, 0, out, s);
    };
    o.encode_full = o.encode_leaf;
    o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
      return kern::tfp_decode_cuda(in, n, f, out, s);
    };
    o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
      return kern::tfp_decode_accumulate_cuda(in, n, f, acc, s);
    };
    o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
      return kern::tfp_decode_accumulate_encode_cuda(in, n, f, acc, false, key, 0, out, s);
    };
    return o;
  }
  if (scheme == "qsgd") {  // bucket 512, 4 bits
    constexpr uint32_t kBucket = 512, kBits = 4;
    Ops o;
    o.encode_leaf = [=](const float* in, uint8_t* out, kern::CudaStream s) {
      return kern::qsgd_encode_cuda(in, n, kBucket, kBits, key, 0, out, s);
    };
    o.encode_full = o.encode_leaf;
    o.decode_full = [=](const uint8_t* in, float* out, kern::CudaStream s) {
      return kern::qsgd_decode_cuda(in, n, kBucket, kBits, out, s);
    };
    o.decode_accumulate_leaf = [=](const uint8_t* in, float* acc, kern::CudaStream s) {
      return kern::qsgd_decode_accumulate_cuda(in, n, kBucket, kBits, acc, s);
    };
    o.fused = [=](const uint8_t* in, float* acc, uint8_t* out, kern::CudaStream s) {
      return kern::qsgd_decode_accumulate_encode_cuda(in, n, kBucket, kBits, acc, key, 0, out, s);
    };
    return o;
  }
  if (scheme == "thc") {  // the collective's ops on the lattice codes: b-bit fields (8 bits for 4 ranks)
    const auto bits = static_cast<uint32_t>(comp.wire_bytes(algo::TensorSpec{0, n}, kLeaf) * 8 / n);
    Ops o;
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
  if (scheme == "mxfp8") return mx_ops(comp, kern::MinifloatKind::kFp8E4M3, n, key, dev);
  if (scheme == "mxfp6") return mx_ops(comp, kern::MinifloatKind::kFp6E3M2, n, key, dev);
  if (scheme == "mxfp4") return mx_ops(comp, kern::MinifloatKind::kFp4E2M1, n, key, dev);
  if (scheme == "dynamiq") {
    const auto* dq = dynamic_cast<const algo::DynamiqCompressor*>(&comp);
    if (dq == nullptr) return internal_error("dynamiq: the registry made another compressor");
    return dynamiq_ops(*dq, algo::DynamiqCompressor::Options{}, n, key, dev);
  }
  return invalid_argument(fmt::format("no CUDA kernels for scheme '{}'", scheme));
}

// The four collective ops of a scheme with scheme_ops() on a chunk of n elements (the file comment
// of bench_cuda_cases.hpp).
Status collective_cases(const std::string& scheme, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                        uint64_t seed, kern::CudaBench& dev, std::vector<CudaCase>& out) {
  CCSIM_ASSIGN_OR_RETURN(auto comp, algo::CompressorRegistry::global().create(scheme, nlohmann::json::object()));
  const algo::LayerShape layer{0, n, n, 1};
  comp->set_layout(std::span<const algo::LayerShape>(&layer, 1));
  const std::span<const float> a0 = x0.first(n), a1 = x1.first(n);
  if (!comp->plan_format(n, kRanks).empty()) {
    const std::vector<std::span<const float>> ins = {a0, a1, a0, a1};
    CCSIM_RETURN_IF_ERROR(algo::plan_round(*comp, ins, algo::NumericsOptions{seed, 0, false}).status());
  }
  if (comp->reduced_elements(n) != n)
    return internal_error(fmt::format("{}: the CUDA bench expects a reduced vector of {} elements", scheme, n));
  std::vector<float> a(n), b(n), full(n);
  comp->prepare(a0, a, 0, kRanks, kern::RngKey{seed, 0, 0, algo::kPrepareStream});
  comp->prepare(a1, b, 1, kRanks, kern::RngKey{seed, 0, 1, algo::kPrepareStream});
  for (uint64_t i = 0; i < n; ++i) full[i] = b[i] * static_cast<float>(kRanks);
  const algo::TensorSpec spec{0, n};
  CCSIM_RETURN_IF_ERROR(comp->can_implement(spec));
  const kern::RngKey key{seed, 0, 0, 1};
  CCSIM_ASSIGN_OR_RETURN(Ops ops, scheme_ops(scheme, *comp, n, key, dev));

  const uint64_t leaf_bytes = comp->wire_bytes(spec, kLeaf), full_bytes = comp->wire_bytes(spec, kFull);
  const uint64_t out_bytes = std::max({leaf_bytes, full_bytes, comp->wire_bytes(spec, kSecond)});
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
    comp->encode(a, spec, kLeaf, key, cpu);
    CCSIM_RETURN_IF_ERROR(dev.download(gpu.data(), d_leaf, leaf_bytes));
    if (cpu != gpu)
      return internal_error(fmt::format("{}: the CUDA leaf message of {} elements differs from the CPU compressor's "
                                        "({} bytes): the bench's format is not the scheme's default",
                                        scheme, n, leaf_bytes));
  }
  out.push_back({KernelKind::kEncode, comp->memory_bytes(KernelKind::kEncode, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.encode_leaf(buf.x, buf.out, s); }});
  out.push_back({KernelKind::kDecode, comp->memory_bytes(KernelKind::kDecode, spec, kFull),
                 [=](kern::CudaStream s) { return ops.decode_full(buf.full, buf.acc, s); }});
  out.push_back({KernelKind::kDecodeAccumulate, comp->memory_bytes(KernelKind::kDecodeAccumulate, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.decode_accumulate_leaf(buf.leaf, buf.acc, s); }});
  out.push_back({KernelKind::kDecodeAccumulateEncode,
                 comp->memory_bytes(KernelKind::kDecodeAccumulateEncode, spec, kLeaf),
                 [=](kern::CudaStream s) { return ops.fused(buf.leaf, buf.acc, buf.out, s); }});
  return ok_status();
}

// ---- Round ops -----------------------------------------------------------------------------------

// The rank whose round ops the cases run (not rank 0, whose keys are the closest to a default key: a
// kernel that ignored the rank could still match there).
constexpr uint32_t kTimedRank = 1;

// What a scheme's round cases work on: a fresh compressor whose layout is the tensor of n elements
// as one matrix layer (bench_layer(), as the CPU bench lays it out), the ranks' tensors (ranks 0 ..
// kRanks - 1 hold x0, x1, x0, x1, as the collective cases plan the round), rank kTimedRank's
// tensor uploaded to d_x, and the round the cases run (0 unless a scheme's cases advance it).
struct RoundContext {
  std::string scheme;
  algo::Compressor* comp = nullptr;
  uint64_t n = 0;
  uint64_t seed = 0;
  std::span<const float> x0, x1;
  const float* d_x = nullptr;
  kern::CudaBench* dev = nullptr;
  uint32_t round = 0;
  bool planned = false;

  std::span<const float> tensor(uint32_t rank) const { return rank % 2 == 0 ? x0 : x1; }
  // The keys the numerics interpreter draws (algorithms/numerics.cpp) in `round`.
  kern::RngKey plan_key(uint32_t rank) const { return {seed, round, rank, algo::kPlanStream}; }
  kern::RngKey prepare_key(uint32_t rank) const { return {seed, round, rank, algo::kPrepareStream}; }
};

// The round's plan on the CPU, once: plan_round() over the kRanks tensors, keys {seed, round, r,
// kPlanStream}. Nothing to plan for a scheme without a metadata phase.
Status plan_once(RoundContext& c) {
  if (c.planned) return ok_status();
  c.planned = true;
  if (c.comp->plan_format(c.n, kRanks).empty()) return ok_status();
  const std::vector<std::span<const float>> ins = {c.tensor(0), c.tensor(1), c.tensor(2), c.tensor(3)};
  return algo::plan_round(*c.comp, ins, algo::NumericsOptions{c.seed, c.round, false}).status();
}

// Rank kTimedRank's metadata statistics on the CPU, as plan_round() computes them: sized by
// plan_format(), under the rank's plan key.
algo::PlanStats cpu_plan_local(const RoundContext& c) {
  const algo::PlanFormat f = c.comp->plan_format(c.n, kRanks);
  algo::PlanStats s;
  s.sum.assign(f.sum_entries, 0.0);
  s.max.assign(f.max_entries, 0.0f);
  s.bits.assign(f.bit_words, 0);
  c.comp->plan_local(c.tensor(kTimedRank), kTimedRank, c.plan_key(kTimedRank), s);
  return s;
}

// Rank kTimedRank's prepared vector on the CPU (reduced_elements(n) entries), under its prepare key.
// REQUIRES: plan_once().
std::vector<float> cpu_prepare(const RoundContext& c) {
  std::vector<float> out(c.comp->reduced_elements(c.n));
  c.comp->prepare(c.tensor(kTimedRank), out, kTimedRank, kRanks, c.prepare_key(kTimedRank));
  return out;
}

// A fully reduced vector for finish(): kRanks times a prepared vector (as the collective cases' fully
// reduced message).
std::vector<float> full_sum(std::vector<float> prepared) {
  for (float& v : prepared) v *= static_cast<float>(kRanks);
  return prepared;
}

// Runs `launch` once (on the legacy default stream, as the set-up launches), then `check` (which
// compares what it wrote with the CPU compressor's output), and adds it as the case of `kind` (its
// bytes are filled in by round_cases()). A failed check is an internal error naming the scheme, op
// and size: the case would not time the scheme it names.
Status add_checked_case(const RoundContext& c, KernelKind kind, std::function<Status(kern::CudaStream)> launch,
                        const std::function<Status()>& check, std::vector<CudaCase>& out) {
  const std::string context = fmt::format("{} {}", c.scheme, topo::kernel_kind_name(kind));
  CCSIM_RETURN_IF_ERROR(launch(nullptr).with_context(context));
  CCSIM_RETURN_IF_ERROR(c.dev->synchronize());
  CCSIM_RETURN_IF_ERROR(check().with_context(fmt::format("{} of a tensor of {} elements", context, c.n)));
  out.push_back({kind, 0, std::move(launch)});
  return ok_status();
}

// The `cpu.size()` values at d_out equal the CPU compressor's `cpu`, byte for byte.
template <class T>
Status same_bytes(const RoundContext& c, const std::vector<T>& cpu, const void* d_out) {
  const uint64_t bytes = cpu.size() * sizeof(T);
  std::vector<T> gpu(cpu.size());
  CCSIM_RETURN_IF_ERROR(c.dev->download(gpu.data(), d_out, bytes));
  if (std::memcmp(gpu.data(), cpu.data(), bytes) != 0)
    return internal_error(fmt::format("the CUDA output differs from the CPU compressor's ({} bytes): the kernel does "
                                      "not reproduce the scheme", bytes));
  return ok_status();
}

// add_checked_case() with the check same_bytes(cpu, d_out).
template <class T>
Status add_round_case(const RoundContext& c, KernelKind kind, std::function<Status(kern::CudaStream)> launch,
                      const std::vector<T>& cpu, const void* d_out, std::vector<CudaCase>& out) {
  return add_checked_case(c, kind, std::move(launch), [&] { return same_bytes(c, cpu, d_out); }, out);
}

// The finish case of a scheme whose finish reads a reduced vector and writes the tensor (n
// elements): `sum` uploaded, the CPU compressor's finish of it as rank kTimedRank (of kRanks) to
// check `launch(d_sum, d_tensor, stream)` against. REQUIRES: plan_once().
Status finish_case(const RoundContext& c, const std::vector<float>& sum, uint64_t n,
                   std::function<Status(const float*, float*, kern::CudaStream)> launch, std::vector<CudaCase>& out) {
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

// The prepare case, `prepare(d_prepared, stream)` checked against rank kTimedRank's cpu_prepare(),
// then, unless `finish` is empty, the finish case of kRanks times that prepared vector (finish_case()).
// REQUIRES: plan_once().
Status prepare_finish_cases(const RoundContext& c, std::function<Status(float*, kern::CudaStream)> prepare,
                            std::function<Status(const float*, float*, kern::CudaStream)> finish,
                            std::vector<CudaCase>& out) {
  const std::vector<float> prepared = cpu_prepare(c);
  CCSIM_ASSIGN_OR_RETURN(void* d_prepared, c.dev->allocate(4 * std::max<uint64_t>(prepared.size(), 1)));
  auto* prepared_out = static_cast<float*>(d_prepared);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPrepare, [=](kern::CudaStream s) { return prepare(prepared_out, s); }, prepared, d_prepared,
      out));
  if (!finish) return ok_status();
  return finish_case(c, full_sum(prepared), c.n, std::move(finish), out);
}

// THC (kernels/cuda/thc_cuda.hpp), as tests/kernels/thc_cuda_test.cu drives it: plan_local (the one
// max entry, with the plan key's shared signs), then, under the CPU's committed lattice and the
// round's shared sign key, prepare (the lattice codes) and finish (of kRanks times those codes).
Status thc_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  auto* thc = dynamic_cast<algo::ThcCompressor*>(c.comp);
  if (thc == nullptr) return internal_error("thc: the registry made another compressor");
  const uint64_t n = c.n, block = thc->rotation_block_for(n), padded = thc->reduced_elements(n);
  if (padded != kern::thc_padded_elements(n, block))
    return internal_error(fmt::format("thc: {} reduced elements for a tensor of {} in blocks of {}", padded, n, block));
  const float* d_x = c.d_x;

  const algo::PlanStats stats = cpu_plan_local(c);
  if (stats.max.size() != 1) return internal_error(fmt::format("thc: {} max entries, expected 1", stats.max.size()));
  const uint64_t temp_bytes = kern::thc_plan_local_cuda_temp_bytes(n, block);
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_entry, c.dev->allocate(sizeof(float)));
  const kern::RngKey plan_signs = algo::ThcCompressor::shared_key(c.plan_key(kTimedRank));
  auto* entry = static_cast<float*>(d_entry);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPlanLocal,
      [=](kern::CudaStream s) {
        return kern::thc_plan_local_cuda(d_x, n, block, plan_signs, d_temp, temp_bytes, entry, s);
      },
      stats.max, d_entry, out));

  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const kern::ThcLattice lattice = thc->committed_lattice();
  const kern::RngKey code_key = c.prepare_key(kTimedRank), signs = algo::ThcCompressor::shared_key(code_key);
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

// DynamiQ (kernels/cuda/dynamiq_cuda.hpp): plan_local, the sums and sums of squares of every
// super-group (doubles).
Status dynamiq_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  const uint32_t sg = algo::DynamiqCompressor::Options{}.super_group;  // the default, as dynamiq_ops()
  const uint64_t n = c.n, groups = (n + sg - 1) / sg;
  const algo::PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != 2 * groups)
    return internal_error(fmt::format("dynamiq: {} statistics for {} super-groups of {} entries", stats.sum.size(),
                                      groups, sg));
  CCSIM_ASSIGN_OR_RETURN(void* d_sums, c.dev->allocate(8 * 2 * groups));
  const float* d_x = c.d_x;
  auto* sums = static_cast<double*>(d_sums);
  CCSIM_RETURN_IF_ERROR(add_round_case(
      c, KernelKind::kPlanLocal,
      [=](kern::CudaStream s) { return kern::dynamiq_statistics_cuda(d_x, n, sg, sums, s); }, stats.sum, d_sums,
      out));

  // prepare and finish under the round's plan: its super-group order and means, uploaded.
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const auto* dq = dynamic_cast<const algo::DynamiqCompressor*>(c.comp);
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

// OmniReduce (kernels/cuda/select_cuda.hpp): plan_local, the chunk norms and the bitmap of the local
// top-k chunks (k of the round before its plan, as plan_round() calls plan_local).
Status omnireduce_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  const auto* omni = dynamic_cast<const algo::OmniReduceCompressor*>(c.comp);
  if (omni == nullptr) return internal_error("omnireduce: the registry made another compressor");
  const uint64_t n = c.n, chunk = omni->alignment();  // alignment() is the chunk
  const uint64_t chunks = omni->chunks_of(n), k = omni->local_k(chunks), words = kern::topk_bitmap_words(chunks);
  const algo::PlanStats stats = cpu_plan_local(c);
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
      c, KernelKind::kPlanLocal,
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

// MX with its default block scaling: plan_local, the largest magnitude of every block (prepare and
// finish are copies: encode applies the agreed scale codes).
Status mx_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  const uint64_t n = c.n, block = c.comp->alignment();  // alignment() is the MX block
  const algo::PlanStats stats = cpu_plan_local(c);
  if (stats.max.size() != (n + block - 1) / block)
    return internal_error(fmt::format("{}: {} maxima for {} elements in blocks of {}", c.scheme, stats.max.size(), n,
                                      block));
  CCSIM_ASSIGN_OR_RETURN(void* d_max, c.dev->allocate(4 * stats.max.size()));
  const float* d_x = c.d_x;
  auto* maxima = static_cast<float*>(d_max);
  return add_round_case(
      c, KernelKind::kPlanLocal,
      [=](kern::CudaStream s) { return kern::block_max_abs_cuda(d_x, n, static_cast<uint32_t>(block), maxima, s); },
      stats.max, d_max, out);
}

// MX with layer scaling (round_params: global_scaling layer), under the CPU's committed plan of
// the bench's one layer: plan_local, the largest magnitude of every layer; prepare and finish,
// the multiply by every layer's agreed factor (to_fpx, then from_fpx).
Status mx_layer_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  const auto* mx = dynamic_cast<const algo::MxCompressor*>(c.comp);
  if (mx == nullptr) return internal_error(fmt::format("{}: the registry made another compressor", c.scheme));
  const uint64_t n = c.n;
  const algo::PlanStats stats = cpu_plan_local(c);
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const std::span<const algo::MxCompressor::LayerScale> scales = mx->layer_scales();
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
      c, KernelKind::kPlanLocal,
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

// SDP4Bit TLq-HS (round_params: hadamard on): prepare and finish, H_32 on every complete
// 32-element block.
Status tlq_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
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
Status qwd_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  const auto* w = dynamic_cast<const algo::Sdp4bitWeightCompressor*>(c.comp);
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

// ---- Low-rank schemes (PowerSGD, EDGC) -----------------------------------------------------------
// Their products run through cuBLAS, which adds a product's terms in another order than the CPU's
// Eigen (kernels/cuda/lowrank_cuda.hpp), so those outputs are checked against the CPU compressor's
// within twice the bound of a k-term fp32 sum (kern::fp32_sum_error_bound: each side within it of
// the exact value). Their elementwise steps are bit-identical.

// The bound of each entry of a product of k-term sums, given each entry's sum of |a_i||b_i| (+ |c|).
std::vector<double> sum_bound(std::vector<double> magnitude, uint64_t k) {
  for (double& m : magnitude) m = 2.0 * kern::fp32_sum_error_bound(m, k);
  return magnitude;
}

std::vector<double> magnitudes(std::span<const float> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(static_cast<double>(v[i]));
  return out;
}

// The floats at d_out are within `bound` of the CPU's `cpu`, entry by entry (NaN where the CPU has NaN).
Status within_bound(const RoundContext& c, const char* what, std::span<const float> cpu,
                    std::span<const double> bound, const void* d_out) {
  std::vector<float> gpu(cpu.size());
  CCSIM_RETURN_IF_ERROR(c.dev->download(gpu.data(), d_out, 4 * cpu.size()));
  for (size_t i = 0; i < cpu.size(); ++i) {
    const bool nan = std::isnan(cpu[i]), ok = nan ? std::isnan(gpu[i])
                                                  : std::fabs(static_cast<double>(gpu[i]) - cpu[i]) <= bound[i];
    if (!ok)
      return internal_error(fmt::format("{} entry {}: CUDA {} against the CPU compressor's {}, beyond the bound {} of "
                                        "the two summation orders",
                                        what, i, gpu[i], cpu[i], bound[i]));
  }
  return ok_status();
}

// The compressor's layer, checked to be the bench's one matrix layer, and compressed or not as the
// cases expect.
Result<algo::LayerShape> lowrank_layer(const RoundContext& c, const algo::LowRankCompressor& lr, bool compressed) {
  const algo::LayerShape layer = bench_layer(c.n);
  const std::vector<algo::LayerShape> layers = lr.layers_for(c.n);
  const bool is_compressed = lr.reduced_elements(c.n) == layer.cols * lr.rank() && lr.rank() > 0;
  if (layers.size() != 1 || layers[0].rows != layer.rows || is_compressed != compressed)
    return internal_error(fmt::format("{}: the bench's {} x {} layer of {} elements is {}compressed at rank {}",
                                      c.scheme, layer.rows, layer.cols, c.n, is_compressed ? "" : "not ",
                                      lr.rank()));
  return layer;
}

// PowerSGD (kernels/cuda/lowrank_cuda.hpp, round_cuda.hpp) in its steady state: round 1, after a
// complete round 0 on the CPU, so Q is the warm start and every rank has an error-feedback residual.
// plan_local: M = x + e, P = M Q; prepare: M = x + e in e's place, Q_i = M^T P^, e = M - P^ Q_i^T;
// finish (a rank that is not the last): P^ (sum Q)^T.
Status powersgd_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  auto* lr = dynamic_cast<algo::LowRankCompressor*>(c.comp);
  if (lr == nullptr) return internal_error(fmt::format("{}: the registry made another compressor", c.scheme));
  CCSIM_ASSIGN_OR_RETURN(const algo::LayerShape layer, lowrank_layer(c, *lr, true));
  const uint64_t n = c.n, rows = layer.rows, cols = layer.cols;
  const uint32_t r = lr->rank();
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  {  // round 0: every rank's prepare, the exact sum of what they prepared, every rank's finish
    const uint64_t m = lr->reduced_elements(n);
    std::vector<float> sum(m, 0.0f), v(m), t(n);
    for (uint32_t k = 0; k < kRanks; ++k) {
      c.comp->prepare(c.tensor(k), v, k, kRanks, c.prepare_key(k));
      for (uint64_t i = 0; i < m; ++i) sum[i] += v[i];
    }
    for (uint32_t k = 0; k < kRanks; ++k) c.comp->finish(sum, t, k, kRanks);
  }
  c.round = 1;
  c.planned = false;
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const std::span<const float> q = lr->q(0), p_hat = lr->p_hat(0), e_round = lr->residual(kTimedRank);
  if (q.size() != cols * r || p_hat.size() != rows * r || e_round.size() != n)
    return internal_error(fmt::format("{}: Q of {}, P^ of {} and a residual of {} entries for a {} x {} layer at "
                                      "rank {}",
                                      c.scheme, q.size(), p_hat.size(), e_round.size(), rows, cols, r));
  const std::vector<float> e0(e_round.begin(), e_round.end());
  std::vector<float> m(n);  // M = x + e, as the CPU forms it (no NaN in the bench's inputs)
  for (uint64_t i = 0; i < n; ++i) m[i] = c.tensor(kTimedRank)[i] + e0[i];
  CCSIM_ASSIGN_OR_RETURN(kern::CublasHandle handle, c.dev->cublas());
  CCSIM_ASSIGN_OR_RETURN(void* d_q_v, c.dev->allocate(4 * q.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_phat_v, c.dev->allocate(4 * p_hat.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_e_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_m_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_p_v, c.dev->allocate(4 * rows * r));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_q_v, q.data(), 4 * q.size()));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_phat_v, p_hat.data(), 4 * p_hat.size()));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_e_v, e0.data(), 4 * n));
  const float* d_x = c.d_x;
  const auto* d_q = static_cast<const float*>(d_q_v);
  const auto* d_phat = static_cast<const float*>(d_phat_v);
  auto* d_e = static_cast<float*>(d_e_v);
  auto* d_m = static_cast<float*>(d_m_v);
  auto* d_p = static_cast<float*>(d_p_v);

  // plan_local: the CPU's P (its metadata sums, fp32 values held as doubles).
  const algo::PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != rows * r)
    return internal_error(fmt::format("{}: {} metadata sums for P of {} x {}", c.scheme, stats.sum.size(), rows, r));
  const std::vector<float> cpu_p(stats.sum.begin(), stats.sum.end());
  const auto plan_local = [=](kern::CudaStream s) {
    CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_add_residual_cuda(d_x, n, d_e, d_m, s));
    return kern::lowrank_project_cuda(handle, d_m, rows, cols, d_q, r, d_p);
  };
  const auto plan_local_check = [&] {
    return within_bound(c, "P", cpu_p,
                        sum_bound(kern::lowrank_project_f64(m.data(), rows, cols, q.data(), r, true), cols), d_p);
  };
  CCSIM_RETURN_IF_ERROR(add_checked_case(c, KernelKind::kPlanLocal, plan_local, plan_local_check, out));

  // prepare, on its own copy of the residual (it updates it).
  const std::vector<float> cpu_q = cpu_prepare(c);
  const std::vector<float> e1(lr->residual(kTimedRank).begin(), lr->residual(kTimedRank).end());
  CCSIM_ASSIGN_OR_RETURN(void* d_ep_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_qi_v, c.dev->allocate(4 * cols * r));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_ep_v, e0.data(), 4 * n));
  auto* d_ep = static_cast<float*>(d_ep_v);
  auto* d_qi = static_cast<float*>(d_qi_v);
  const auto prepare = [=](kern::CudaStream s) {
    CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_add_residual_cuda(d_x, n, d_ep, d_ep, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_project_transposed_cuda(handle, d_ep, rows, cols, d_phat, r, d_qi));
    return kern::lowrank_subtract_cuda(handle, d_phat, d_qi, rows, cols, r, d_ep);
  };
  const auto prepare_check = [&]() -> Status {
    const std::vector<double> q_bound =
        sum_bound(kern::lowrank_project_transposed_f64(m.data(), rows, cols, p_hat.data(), r, true), rows);
    CCSIM_RETURN_IF_ERROR(within_bound(c, "Q_i", cpu_q, q_bound, d_qi));
    // e = M - P^ Q_i^T: its own sums' bound (|M| counting as a term), plus |P^| times Q_i's bound,
    // since the GPU subtracts its own Q_i.
    const std::vector<double> q_mag = magnitudes(cpu_q);
    std::vector<double> e_mag = kern::lowrank_expand_f64(p_hat.data(), q_mag.data(), rows, cols, r, true);
    for (uint64_t i = 0; i < n; ++i) e_mag[i] += std::fabs(static_cast<double>(m[i]));
    std::vector<double> e_bound = sum_bound(std::move(e_mag), r + 1);
    const std::vector<double> carried = kern::lowrank_expand_f64(p_hat.data(), q_bound.data(), rows, cols, r, true);
    for (uint64_t i = 0; i < n; ++i) e_bound[i] += carried[i];
    return within_bound(c, "e", e1, e_bound, d_ep);
  };
  CCSIM_RETURN_IF_ERROR(add_checked_case(c, KernelKind::kPrepare, prepare, prepare_check, out));
  // The timed launches go on from the residual the check left: the same passes over the same bytes.

  // finish of kRanks times rank kTimedRank's Q_i.
  const std::vector<float> sum = full_sum(cpu_q);
  std::vector<float> tensor(n);
  c.comp->finish(sum, tensor, kTimedRank, kRanks);
  CCSIM_ASSIGN_OR_RETURN(void* d_sum_v, c.dev->allocate(4 * sum.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_t_v, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_sum_v, sum.data(), 4 * sum.size()));
  const auto* d_sum = static_cast<const float*>(d_sum_v);
  auto* d_t = static_cast<float*>(d_t_v);
  return add_checked_case(
      c, KernelKind::kFinish,
      [=](kern::CudaStream s) {
        CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
        return kern::lowrank_expand_cuda(handle, d_phat, d_sum, rows, cols, r, d_t);
      },
      [&] {
        const std::vector<double> sum_mag = magnitudes(sum);
        return within_bound(c, "the tensor", tensor,
                            sum_bound(kern::lowrank_expand_f64(p_hat.data(), sum_mag.data(), rows, cols, r, true), r),
                            d_t);
      },
      out);
}

// EDGC at its defaults in round 0: warming up (nothing compressed) in a sampled round. plan_local
// is GDS's entropy sample of the matrix layer (kernels/cuda/entropy_cuda.hpp); prepare moves the
// uncompressed layer (x + e, then e = 0).
Status edgc_round_cases(RoundContext& c, std::vector<CudaCase>& out) {
  auto* ed = dynamic_cast<algo::EdgcCompressor*>(c.comp);
  if (ed == nullptr) return internal_error("edgc: the registry made another compressor");
  CCSIM_RETURN_IF_ERROR(lowrank_layer(c, *ed, false).status());
  if (!ed->controller().samples_round())
    return internal_error("edgc: the bench expects round 0 to be a sampled round");
  const uint64_t n = c.n;
  const uint32_t bins = ed->options().entropy_bins;
  const auto beta = static_cast<float>(ed->options().beta);
  const kern::RngKey key = c.plan_key(kTimedRank);
  const algo::PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != 2 || stats.sum[1] != 1.0)
    return internal_error(fmt::format("edgc: plan_local's entries {} are not one entropy estimate",
                                      fmt::join(stats.sum, ", ")));
  size_t temp_bytes = 0;
  CCSIM_RETURN_IF_ERROR(
      kern::sampled_histogram_entropy_cuda(nullptr, temp_bytes, c.d_x, n, bins, beta, key, 0, nullptr));
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_h, c.dev->allocate(sizeof(double)));
  const float* d_x = c.d_x;
  auto* d_entropy = static_cast<double*>(d_h);
  const auto plan_local = [=](kern::CudaStream s) {
    size_t bytes = temp_bytes;
    return kern::sampled_histogram_entropy_cuda(d_temp, bytes, d_x, n, bins, beta, key, 0, d_entropy, s);
  };
  // The sample's range and counts are the CPU's exactly; the entropy from them, on the host, is then
  // the CPU's estimate bit for bit (entropy_estimate: histogram entropy + log2 of the bin width,
  // sent as fp32). The device's own log2 is correctly rounded, glibc's is not: the two may differ
  // in the last bits (entropy_cuda.hpp).
  const auto plan_local_check = [&]() -> Status {
    const kern::EntropyCudaScratch scratch = kern::entropy_cuda_scratch(d_temp);
    float range[2];
    std::vector<uint64_t> counts(bins);
    double device_h = 0;
    CCSIM_RETURN_IF_ERROR(c.dev->download(range, scratch.d_range, sizeof range));
    CCSIM_RETURN_IF_ERROR(c.dev->download(counts.data(), scratch.d_counts, 8 * bins));
    CCSIM_RETURN_IF_ERROR(c.dev->download(&device_h, d_entropy, sizeof device_h));
    const double h = kern::entropy_bits(counts.data(), bins);
    const double width = (static_cast<double>(range[1]) - range[0]) / bins;
    const auto estimate = static_cast<float>(h + std::log2(width));
    if (estimate != static_cast<float>(stats.sum[0]) || !(std::fabs(device_h - h) <= 1e-12 * std::max(1.0, h)))
      return internal_error(fmt::format("the CUDA entropy sample gives {} ({} bits on the device, {} from its "
                                        "counts), the CPU compressor {}",
                                        estimate, device_h, h, stats.sum[0]));
    return ok_status();
  };
  CCSIM_RETURN_IF_ERROR(add_checked_case(c, KernelKind::kPlanLocal, plan_local, plan_local_check, out));

  // prepare: rank kTimedRank's residual is zeros before its first prepare.
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const std::vector<float> prepared = cpu_prepare(c);
  const std::vector<float> zeros(n, 0.0f);
  CCSIM_ASSIGN_OR_RETURN(void* d_e_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_out_v, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_e_v, zeros.data(), 4 * n));
  auto* d_e = static_cast<float*>(d_e_v);
  auto* d_out = static_cast<float*>(d_out_v);
  return add_round_case(
      c, KernelKind::kPrepare,
      [=](kern::CudaStream s) { return kern::lowrank_move_uncompressed_cuda(d_x, n, d_e, d_out, s); }, prepared,
      d_out_v, out);
}

// A scheme's round cases: the round ops it has CUDA kernels for, in KernelKind order.
using RoundCases = Status (*)(RoundContext& c, std::vector<CudaCase>& out);

// The round cases of `scheme` on a tensor of n elements: a fresh compressor, rank kTimedRank's
// tensor uploaded, `build`'s checked cases, and their declared memory traffic after the round's plan
// (as the timing interpreter asks for it).
Status round_cases(const std::string& scheme, RoundCases build, std::string_view params, uint64_t n,
                   std::span<const float> x0, std::span<const float> x1, uint64_t seed, kern::CudaBench& dev,
                   std::vector<CudaCase>& out) {
  CCSIM_ASSIGN_OR_RETURN(auto comp, algo::CompressorRegistry::global().create(scheme, nlohmann::json::parse(params)));
  const algo::LayerShape layer = bench_layer(n);
  comp->set_layout(std::span<const algo::LayerShape>(&layer, 1));
  RoundContext c;
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
  CCSIM_RETURN_IF_ERROR(build(c, out));
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  for (size_t i = first; i < out.size(); ++i) {
    out[i].bytes = comp->memory_bytes(out[i].kind, algo::TensorSpec{0, n}, algo::HopContext{1, kRanks});
    out[i].params = std::string(params);
  }
  return ok_status();
}

// The CUDA kernels of a scheme in the bench: the four collective ops (scheme_ops(), default
// parameters) and/or round cases, on a compressor made with `round_params` (a round_variants()
// switch, or "{}"). A scheme may have several entries, one per round_params; its further round
// kernels under the same parameters go into the entry's RoundCases function.
struct SchemeKernels {
  std::string_view scheme;
  bool collective = false;
  RoundCases round = nullptr;
  std::string_view round_params = "{}";
};

// In the order the bench runs them.
constexpr SchemeKernels kSchemeKernels[] = {
    {"fp16", true},
    {"bf16", true},
    {"int8", true},
    {"equarx", true},
    {"sdp4bit_q", true},
    {"sdp4bit_tlq", true, tlq_round_cases, R"({"hadamard":true})"},
    {"sdp4bit_qw", true},
    {"sdp4bit_qwd", true, qwd_round_cases},
    {"tfp", true},
    {"qsgd", true},
    {"mxfp8", true, mx_round_cases},
    {"mxfp8", false, mx_layer_round_cases, R"({"global_scaling":"layer"})"},
    {"mxfp6", true, mx_round_cases},
    {"mxfp6", false, mx_layer_round_cases, R"({"global_scaling":"layer"})"},
    {"mxfp4", true, mx_round_cases},
    {"mxfp4", false, mx_layer_round_cases, R"({"global_scaling":"layer"})"},
    {"dynamiq", true, dynamiq_round_cases},
    {"thc", true, thc_round_cases},
    {"omnireduce", false, omnireduce_round_cases},
    {"powersgd", false, powersgd_round_cases},
    {"edgc", false, edgc_round_cases},
};

}  // namespace

std::vector<std::string> cuda_case_schemes() {
  std::vector<std::string> out;
  for (const SchemeKernels& k : kSchemeKernels)
    if (std::find(out.begin(), out.end(), k.scheme) == out.end()) out.emplace_back(k.scheme);
  return out;
}

std::vector<std::pair<std::string, std::string>> cuda_round_variants() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const SchemeKernels& k : kSchemeKernels)
    if (k.round != nullptr && k.round_params != "{}") out.emplace_back(k.scheme, k.round_params);
  return out;
}

Status cuda_cases(const std::string& scheme, uint64_t n, std::span<const float> x0, std::span<const float> x1,
                  uint64_t seed, kern::CudaBench& dev, std::vector<CudaCase>& out) {
  bool found = false;
  for (const SchemeKernels& k : kSchemeKernels) {
    if (k.scheme != scheme) continue;
    found = true;
    if (k.collective) CCSIM_RETURN_IF_ERROR(collective_cases(scheme, n, x0, x1, seed, dev, out));
    if (k.round != nullptr)
      CCSIM_RETURN_IF_ERROR(round_cases(scheme, k.round, k.round_params, n, x0, x1, seed, dev, out));
  }
  if (!found) return invalid_argument(fmt::format("no CUDA kernels for scheme '{}'", scheme));
  return ok_status();
}

}  // namespace ccsim::app
