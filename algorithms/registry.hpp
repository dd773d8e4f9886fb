#pragma once
/// \file
/// The compressor registry: every scheme by name, with its description and parameter table.
/// Built-ins are added by register_builtin_compressors() (algorithms/builtin.cpp) from one explicit
/// list, which static linking cannot drop, each with its device ops (its CUDA kernels,
/// algorithms/device_ops.hpp) where the build has CUDA.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/compressor.hpp"
#include "algorithms/params.hpp"

namespace ccsim::algo {

struct DeviceOps;

/// A registered scheme.
struct CompressorInfo {
  std::string name;
  std::string description;
  ParamTable params;
  std::function<std::unique_ptr<Compressor>(const Params&)> create;
  /// Optional constraints between parameters, checked after each one passed its own range check.
  /// A failure is kInvalidArgument whose pointer is the parameter it blames, relative to the
  /// params object (e.g. "/k" and "expected an integer in [7, 16] with base fp16, got 20").
  std::function<Status(const Params&)> check = nullptr;
  /// Parameter switches (compact JSON with sorted keys, as a cost curve records its params) under
  /// which the scheme runs round ops its defaults do not run, or runs others: the kernel benches
  /// measure its round ops again under each (e.g. MX's {"global_scaling":"layer"}).
  std::vector<std::string> round_variants = {};
  /// The scheme's CUDA kernels (algorithms/device_ops.hpp); null where it has none or the build has
  /// no CUDA. Points to a static object owned by the scheme's device-ops file.
  const DeviceOps* device_ops = nullptr;
};

/// A round_variants() switch of a registered scheme.
struct RoundVariant {
  std::string scheme;
  std::string params;  ///< compact JSON with sorted keys, as a curve records it
};

/// Name → CompressorInfo, in registration order. Thread safety: register at start-up only.
class CompressorRegistry {
 public:
  /// The process-wide registry with the built-ins registered.
  static CompressorRegistry& global();

  void add(CompressorInfo info);
  const CompressorInfo* find(const std::string& name) const;
  const std::vector<CompressorInfo>& all() const { return infos_; }
  std::vector<std::string> names() const;
  /// Every registered scheme's round_variants, in registration order.
  std::vector<RoundVariant> round_variants() const;

  /// Creates `name` with `params` (validated against its table, defaults filled in). Errors are
  /// kNotFound listing the valid names, or kInvalidArgument naming each bad parameter.
  Result<std::unique_ptr<Compressor>> create(const std::string& name, const nlohmann::json& params) const;

 private:
  std::vector<CompressorInfo> infos_;
};

/// The one name of a scheme instance in every output: `scheme` alone when `params` sets nothing
/// away from its defaults, else "scheme(k=v,...)" with the non-default parameters in key order,
/// numbers in their shortest form (3, not 3.0; 0.5), strings bare: "dynamiq(budget=3)",
/// "int8(block=128,rounding=nearest)". Unknown schemes and non-object params give `scheme`.
std::string scheme_label(const std::string& scheme, const nlohmann::json& params);

/// Adds every built-in compressor to `registry`.
void register_builtin_compressors(CompressorRegistry& registry);

}  // namespace ccsim::algo
