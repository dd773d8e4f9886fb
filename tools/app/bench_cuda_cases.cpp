#include "tools/app/bench_cuda_cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/mx/mx.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/cuda/block_cuda.hpp"
#include "kernels/cuda/dynamiq_cuda.hpp"
#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/cuda/thc_cuda.hpp"
#include "kernels/quant/group_quant.hpp"
#include "kernels/quant/mx.hpp"
#include "kernels/quant/qsgd.hpp"
#include "kernels/quant/tfp.hpp"

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

}  // namespace

std::vector<std::string> cuda_case_schemes() {
  return {"fp16", "bf16", "int8", "equarx", "sdp4bit_q", "sdp4bit_tlq", "sdp4bit_qw", "sdp4bit_qwd",
          "tfp",  "qsgd", "mxfp8", "mxfp6", "mxfp4",    "dynamiq",     "thc"};
}

Status cuda_cases(const std::string& scheme, uint64_t n, std::span<const float> x0, std::span<const float> x1,
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

}  // namespace ccsim::app
