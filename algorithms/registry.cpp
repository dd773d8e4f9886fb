#include "algorithms/registry.hpp"

#include <fmt/format.h>

#include "sim/base/check.hpp"

namespace ccsim::algo {

std::string_view determinism_name(Determinism d) {
  switch (d) {
    case Determinism::kNotGuaranteed: return "not_guaranteed";
    case Determinism::kRunToRun: return "run_to_run";
    case Determinism::kBitwiseCpuGpu: return "bitwise_cpu_gpu";
  }
  return "?";
}

uint64_t Compressor::memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const {
  const uint64_t f32 = 4 * spec.count;
  const uint64_t wire_in = wire_bytes(spec, hop);
  switch (kind) {
    case topo::KernelKind::kEncode: return f32 + wire_bytes(spec, hop);
    case topo::KernelKind::kDecode: return wire_in + f32;
    case topo::KernelKind::kDecodeAccumulate: return wire_in + 2 * f32;
    case topo::KernelKind::kDecodeAccumulateEncode: {
      HopContext out = hop;
      ++out.summed;
      return wire_in + 2 * f32 + wire_bytes(spec, out);
    }
    case topo::KernelKind::kPlanLocal:
    case topo::KernelKind::kPrepare:
    case topo::KernelKind::kFinish: return 0;  // no round work unless a scheme declares it
  }
  return 0;
}

CompressorRegistry& CompressorRegistry::global() {
  static CompressorRegistry* registry = [] {
    auto* r = new CompressorRegistry();
    register_builtin_compressors(*r);
    return r;
  }();
  return *registry;
}

void CompressorRegistry::add(CompressorInfo info) {
  CCSIM_CHECK(find(info.name) == nullptr, "compressor '{}' registered twice", info.name);
  infos_.push_back(std::move(info));
}

const CompressorInfo* CompressorRegistry::find(const std::string& name) const {
  for (const auto& i : infos_)
    if (i.name == name) return &i;
  return nullptr;
}

std::vector<std::string> CompressorRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& i : infos_) out.push_back(i.name);
  return out;
}

std::vector<RoundVariant> CompressorRegistry::round_variants() const {
  std::vector<RoundVariant> out;
  for (const auto& i : infos_)
    for (const auto& params : i.round_variants) out.push_back({i.name, params});
  return out;
}

Result<std::unique_ptr<Compressor>> CompressorRegistry::create(const std::string& name, const nlohmann::json& params) const {
  const CompressorInfo* info = find(name);
  if (info == nullptr) {
    std::string valid;
    for (const auto& n : names()) valid += (valid.empty() ? "" : ", ") + n;
    return not_found(fmt::format("unknown compressor '{}'; valid: {}", name, valid));
  }
  Diagnostics diag;
  nlohmann::json resolved = info->params.resolve(params, "/params", diag);
  CCSIM_RETURN_IF_ERROR(diag.to_status(name));
  Params p(std::move(resolved));
  if (info->check) {
    if (Status st = info->check(p); !st.ok()) return st.at("/params").with_context(name);
  }
  std::unique_ptr<Compressor> made = info->create(p);
  made->set_params(p.json().dump());
  return made;
}

namespace {

// A parameter value as a label spells it: numbers in their shortest form, strings bare.
std::string label_value(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return v.dump();
}

}  // namespace

std::string scheme_label(const std::string& scheme, const nlohmann::json& params) {
  const CompressorInfo* info = CompressorRegistry::global().find(scheme);
  if (info == nullptr || !params.is_object()) return scheme;
  Diagnostics diag;
  const nlohmann::json defaults = info->params.resolve(nlohmann::json::object(), "", diag);
  std::string kv;
  for (const auto& [k, v] : params.items())  // nlohmann's object keeps keys sorted
    if (!defaults.contains(k) || defaults.at(k) != v)
      kv += fmt::format("{}{}={}", kv.empty() ? "" : ",", k, label_value(v));
  return kv.empty() ? scheme : fmt::format("{}({})", scheme, kv);
}

}  // namespace ccsim::algo
