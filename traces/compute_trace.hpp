#pragma once
/// \file
/// Layer-wise compute traces: what one worker computes in one training round, layer (or block) by
/// layer, in forward order. The worker model replays them: forward layer by layer, backward in
/// reverse, each layer's gradient ready when its backward ends. Format: docs/compute-traces.md.
///
///   {
///     "format": "ccsim-compute-trace", "version": 1,
///     "model": "ResNet50",
///     "provenance": { "kind": "estimated" | "measured", "device": "...", "source": "..." },
///     "micro_batch": 32,                 (optional: samples per worker per micro-batch)
///     "gradient_bytes_per_param": 4,     (optional, default 4: fp32 gradients)
///     "optimizer": "2ms",                (optional: optimizer step after the synchronization)
///     "layers": [ { "name": "conv1", "params": 9408, "forward": "1.2ms", "backward": "2.5ms",
///                   "activation_bytes": "3.2MB" }, ... ]
///   }
///
/// Times and sizes accept plain numbers in seconds/bytes or strings with units ("1.5ms", "25MB").

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::traces {

/// The most parameters a trace may hold, per layer and in all (2^44, about 17.6 trillion): far past
/// any model, and small enough that byte counts of every format stay far inside 64 bits.
inline constexpr uint64_t kMaxTraceParams = uint64_t{1} << 44;

/// One layer (or block of layers) of the model.
struct LayerCompute {
  std::string name;
  uint64_t params = 0;            ///< trainable parameters (its gradient's entries)
  double forward_s = 0;           ///< forward time of one micro-batch
  double backward_s = 0;          ///< backward time of one micro-batch (input and weight gradients)
  uint64_t activation_bytes = 0;  ///< output activation of one micro-batch (pipeline-stage boundaries)
  friend bool operator==(const LayerCompute&, const LayerCompute&) = default;
};

/// Where a trace's times come from.
struct ComputeProvenance {
  std::string kind;    ///< "estimated" (derived, e.g. from FLOPs or a paper's table) or "measured"
  std::string device;  ///< the device measured on, or the device throughput assumed
  std::string source;  ///< how the numbers were obtained
  friend bool operator==(const ComputeProvenance&, const ComputeProvenance&) = default;
};

/// A model's per-layer compute for one worker and one micro-batch.
class ComputeTrace {
 public:
  /// Reads and validates a trace file. Every error names the file and the JSON path (exit code 2).
  static Result<ComputeTrace> load(const std::filesystem::path& path);
  /// Validates a parsed trace; `file` names it in error messages.
  static Result<ComputeTrace> from_json(const nlohmann::json& root, std::string_view file);
  /// The trace in its file format (times in seconds, sizes in bytes): from_json(to_json()) == *this.
  nlohmann::json to_json() const;

  const std::string& model() const { return model_; }
  const ComputeProvenance& provenance() const { return provenance_; }
  const std::vector<LayerCompute>& layers() const { return layers_; }
  uint64_t micro_batch() const { return micro_batch_; }
  uint32_t gradient_bytes_per_param() const { return gradient_bytes_per_param_; }
  double optimizer_s() const { return optimizer_s_; }

  uint64_t params() const;
  double forward_s() const;
  double backward_s() const;
  /// Gradient bytes of the whole model (params * gradient_bytes_per_param).
  uint64_t gradient_bytes() const { return params() * gradient_bytes_per_param_; }

  /// The same trace with every forward and backward time multiplied by `factor` (> 0).
  ComputeTrace scaled(double factor) const;
  /// Consecutive layers merged into blocks: block b covers layers [starts[b], starts[b+1]) (the last
  /// block runs to the end) and is named names[b] (no names: "first-last", or the layer's own name
  /// for a block of one); params, times and activation bytes add up (a block's activation is its
  /// last layer's). Errors, at the pointer "/b" of the offending start: starts not beginning at 0,
  /// not increasing, or past the last layer.
  Result<ComputeTrace> merged(const std::vector<size_t>& starts, std::vector<std::string> names = {}) const;

  friend bool operator==(const ComputeTrace&, const ComputeTrace&) = default;

 private:
  std::string model_;
  ComputeProvenance provenance_;
  uint64_t micro_batch_ = 0;
  uint32_t gradient_bytes_per_param_ = 4;
  double optimizer_s_ = 0;
  std::vector<LayerCompute> layers_;
};

}  // namespace ccsim::traces
