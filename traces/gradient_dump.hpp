#pragma once
/// \file
/// Real gradient dumps: a directory holding `manifest.json` and one file per data-parallel worker
/// (all `.safetensors` or all `.npy`), each worker's *local* gradient (before averaging) flattened
/// into one vector per dumped training step. docs/gradient-dumps.md has the full description and
/// how the shipped dump (traces/data/gpt-bpe) was made.
///
/// Manifest schema (version 1); unknown keys are rejected everywhere except inside "provenance":
///
///     {
///       "format": "ccsim-gradient-dump",         // required, exactly this string
///       "version": 1,                            // required, exactly 1
///       "dtype": "BF16",                         // required: storage type of every worker file,
///                                                //   F32 | F16 | BF16 (.npy: F32 | F16)
///       "elements": 115200,                      // required: length of one flattened gradient
///       "workers": ["worker0.safetensors", ...], // required, >= 1: one file per worker, relative
///                                                //   to the directory, all .safetensors or all .npy
///       "steps": [                               // optional; absent = one step
///         {"step": 0, "tensor": "step0", "loss": 5.27}, ...
///                                                //   step: training iteration (integer >= 0,
///                                                //   strictly increasing); tensor: its tensor in
///                                                //   each .safetensors file (required there, not
///                                                //   allowed for .npy); loss: optional number
///       ],
///       "layers": [                              // required, >= 1, in offset order
///         {"name": "tok_emb.weight", "shape": [86, 64], "offset": 0, "count": 5504}, ...
///                                                //   offset: first element in the flattened vector;
///                                                //   count: elements, == ∏shape; layers tile
///                                                //   [0, elements) with no gap and no overlap
///       ],
///       "provenance": {                          // required
///         "model": "...", "dataset": "...",      //   required strings: what was trained, on what
///         "generator": "...",                    //   optional string: the command that wrote it
///         ...                                    //   any further keys (free-form, kept verbatim)
///       }
///     }
///
/// File contents. A `.safetensors` worker file holds, for each step, the tensor named by
/// `steps[i].tensor` with `elements` values of `dtype` (any shape); other tensors are ignored.
/// A `.npy` worker file (F32 or F16, C order) holds steps × elements values; step i is the i-th
/// run of `elements` values (a 1-D array for one step, or [steps, elements]).
///
/// Errors. open() validates the manifest and every worker file and reports every problem in one
/// Status, one per line, as "<dir>/manifest.json: <JSON Pointer>: expected ..., found ..."
/// (kInvalidArgument; kNotFound when the only problem is a missing file).
///
/// Memory. Worker files stay memory-mapped (read-only) while the GradientDump or any
/// GradientVector taken from it lives; F32 data is handed out as views into the mapping, F16/BF16
/// data as widened copies.

#include "sim/base/diagnostics.hpp"
#include "sim/base/status.hpp"
#include "traces/safetensors.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ccsim::traces {

/// One layer (parameter tensor) of the flattened gradient.
struct GradientLayer {
  std::string name;             ///< e.g. "blocks.0.mlp.fc1.weight"
  std::vector<uint64_t> shape;  ///< the parameter's shape
  uint64_t offset = 0;          ///< first element in the flattened per-worker vector
  uint64_t count = 0;           ///< elements (== ∏shape)
};

/// One dumped training step.
struct GradientStep {
  uint64_t step = 0;           ///< training iteration the gradients were taken at (0 if not given)
  std::string tensor;          ///< tensor name in .safetensors worker files (empty for .npy)
  std::optional<double> loss;  ///< training loss at that step, if the manifest records it
};

/// Where a dump came from (the manifest's "provenance" object).
struct GradientDumpProvenance {
  std::string model;      ///< what was trained (architecture, size)
  std::string dataset;    ///< what it was trained on
  std::string generator;  ///< the command that wrote the dump (may be empty)
  std::string json;       ///< the whole provenance object, serialized (free-form extra fields)
};

/// Storage format of a dump's worker files.
enum class GradientFileFormat { kSafetensors, kNpy };

/// One worker's flattened fp32 gradient at one step: a view into the memory-mapped file (F32
/// data) or an owned, exactly widened copy (F16/BF16). Keeps its mapping alive; cheap to move.
class GradientVector {
 public:
  GradientVector() = default;

  /// The values; valid while this object lives.
  std::span<const float> values() const { return mapping_ ? mapped_ : std::span<const float>(owned_); }
  size_t size() const { return values().size(); }
  float operator[](size_t i) const { return values()[i]; }
  /// True if the values are read in place from the mapping (no copy was made).
  bool is_mapped() const { return mapping_ != nullptr; }

 private:
  friend class GradientDump;

  std::shared_ptr<const MappedFile> mapping_;  ///< set iff the values are a view into it
  std::span<const float> mapped_;
  std::vector<float> owned_;
};

/// An open, validated gradient dump. Immutable after open(): every accessor is const and safe to
/// call from several threads. Copies share the mappings.
class GradientDump {
 public:
  /// Reads `dir`/manifest.json (or `dir` itself when it names the manifest), maps every worker file
  /// and validates them against it (see the file comment). kNotFound if the manifest is missing.
  static Result<GradientDump> open(const std::filesystem::path& dir);

  /// The directory it was opened from.
  const std::filesystem::path& dir() const { return dir_; }
  /// Number of workers (≥ 1).
  uint32_t workers() const { return static_cast<uint32_t>(sources_.size()); }
  /// Number of dumped steps (≥ 1).
  size_t steps() const { return steps_.size(); }
  /// The dumped steps, in manifest order.
  const std::vector<GradientStep>& step_info() const { return steps_; }
  /// The layers, in offset order; they tile [0, elements()).
  const std::vector<GradientLayer>& layers() const { return layers_; }
  /// Length of one worker's flattened gradient.
  uint64_t elements() const { return elements_; }
  /// Storage type of the worker files.
  TensorDtype dtype() const { return dtype_; }
  /// Storage format of the worker files.
  GradientFileFormat file_format() const { return format_; }
  /// The manifest's provenance record.
  const GradientDumpProvenance& provenance() const { return provenance_; }
  /// Path of worker `w`'s file. REQUIRES: w < workers().
  std::filesystem::path worker_file(uint32_t w) const;
  /// The indices into step_info() of these training iterations, in the order given (all steps, in
  /// order, when `steps` is empty); kInvalidArgument naming the dumped steps where one is missing.
  Result<std::vector<size_t>> step_indices(std::span<const uint64_t> steps) const;
  /// Index of the layer called `name`; kNotFound (with the closest name) if there is none.
  Result<size_t> find_layer(std::string_view name) const;

  /// Worker `w`'s flattened gradient at dumped step index `step` (an index into step_info(), not
  /// a training iteration). kInvalidArgument if `w` or `step` is out of range, or if the values
  /// hold a NaN or an infinity (the worker file, worker, step, first index and its layer, count:
  /// traces/non_finite.hpp).
  Result<GradientVector> worker(uint32_t w, size_t step = 0) const;
  /// Converts layer `layer` of worker `w` at step index `step` to fp32 into `out`, reading only
  /// that layer's bytes. kInvalidArgument if an index is out of range, `out` does not have the
  /// layer's count, or the layer holds a non-finite value (as worker()).
  Status read_layer(uint32_t w, size_t step, size_t layer, std::span<float> out) const;
  /// As read_layer(), into a new vector.
  Result<std::vector<float>> layer(uint32_t w, size_t step, size_t layer) const;

 private:
  /// One worker file: its mapping and, per step, the byte offset of that step's data in it.
  struct Source {
    std::shared_ptr<const MappedFile> mapping;
    std::vector<uint64_t> step_byte;
  };

  Status check_indices(uint32_t w, size_t step) const;
  Status check_finite(uint32_t w, size_t step, uint64_t base, std::span<const float> values) const;
  // open()'s parts: each reads its part of the manifest into this dump, reporting every problem in
  // `diag`; the bool ones return false where their part is too broken to check the worker files
  // against. open_sources() then maps the worker files (npy_source, safetensors_source: one each).
  bool read_header(const nlohmann::json& root, Diagnostics& diag);
  bool read_workers(const nlohmann::json& root, Diagnostics& diag);
  bool read_steps(const nlohmann::json& root, Diagnostics& diag);
  void read_layers(const nlohmann::json& root, Diagnostics& diag);
  void read_provenance(const nlohmann::json& root, Diagnostics& diag);
  void open_sources(Diagnostics& diag);
  bool npy_source(size_t w, Source& src, Diagnostics& diag) const;
  bool safetensors_source(size_t w, Source& src, Diagnostics& diag) const;

  std::filesystem::path dir_;
  uint64_t elements_ = 0;
  TensorDtype dtype_ = TensorDtype::kF32;
  GradientFileFormat format_ = GradientFileFormat::kSafetensors;
  std::vector<std::string> worker_files_;
  std::vector<Source> sources_;
  std::vector<GradientStep> steps_;
  std::vector<GradientLayer> layers_;
  GradientDumpProvenance provenance_;
};

}  // namespace ccsim::traces
