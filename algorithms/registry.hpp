#pragma once
/// \file
/// The compressor registry: every scheme by name, with its description and parameter table.
/// Built-ins are added by register_builtin_compressors() (algorithms/builtin.cpp) from one explicit
/// list, which static linking cannot drop.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/compressor.hpp"
#include "algorithms/params.hpp"

namespace ccsim::algo {

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

  /// Creates `name` with `params` (validated against its table, defaults filled in). Errors are
  /// kNotFound listing the valid names, or kInvalidArgument naming each bad parameter.
  Result<std::unique_ptr<Compressor>> create(const std::string& name, const nlohmann::json& params) const;

 private:
  std::vector<CompressorInfo> infos_;
};

/// Adds every built-in compressor to `registry`.
void register_builtin_compressors(CompressorRegistry& registry);

}  // namespace ccsim::algo
