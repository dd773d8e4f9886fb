#pragma once
/// \file
/// The manifest of a gradient dump (gradient_dump.hpp) written from what a directory of per-worker
/// files holds, for dumps that a user's own script wrote without one (`ccsim manifest DIR`,
/// docs/gradient-dumps.md "Dumps from your own scripts").
///
/// Worker files: every regular file of the directory ending `.npy`, or every one ending
/// `.safetensors` (a mix is an error). Worker w is the file with the w-th smallest number, the last
/// run of digits in its name before the extension (worker0, rank_3, grads-12); the numbers give the
/// order only and need not be 0..W-1. A file without digits, or two with the same number, is an
/// error.
///
/// * `.npy` (F32 `<f4` or F16 `<f2`, C order): a 1-D array is one step, a 2-D [steps, elements]
///   array holds one step per row. Every worker has the same shape and dtype.
/// * `.safetensors` (F32, F16, BF16): each tensor is one step (any shape: its element count is
///   `elements`), in the order of the last run of digits in its name, which is its step number (a
///   name without digits only where it is the file's only tensor: step 0). Every tensor of every
///   file has the same dtype and element count, and every file the same tensor names.
///
/// Layers: one layer "gradient" covering the vector, or the parameters of a parameter list (a JSON
/// array of {"name": str, "shape": [ints]} in flattening order, as
/// `[{"name": n, "shape": list(p.shape)} for n, p in model.named_parameters()]` gives), with their
/// offsets accumulated; their total must be `elements`.
///
/// Every error is an input error (kInvalidArgument; kNotFound for a missing directory or parameter
/// list) naming the file, what was expected and what was found; the files' errors come together,
/// one per line.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim::traces {

/// What a manifest takes from its caller rather than from the files.
struct ManifestOptions {
  /// The parameter list (file comment); none: one layer "gradient".
  std::optional<std::filesystem::path> params;
  std::string model = "unknown: described by ccsim manifest";  ///< provenance.model
  std::string dataset = "unknown";                              ///< provenance.dataset
  std::string generator;  ///< provenance.generator: the command line as given (left out if empty)
  /// The steps' training iterations, one per dumped step, strictly increasing. Empty: the rows'
  /// indices 0..S-1 of a 2-D .npy array (none for a 1-D one), the tensors' numbers for .safetensors.
  std::vector<uint64_t> steps;
};

/// A directory's candidate worker files, each list sorted by name.
struct DumpFileListing {
  std::vector<std::string> npy;          ///< regular files ending ".npy"
  std::vector<std::string> safetensors;  ///< regular files ending ".safetensors"
  std::vector<std::string> other;        ///< every other entry (folders end in '/')
};

/// What `dir` holds (empty lists where it cannot be read).
DumpFileListing list_dump_files(const std::filesystem::path& dir);

/// The manifest describing the worker files in `dir` (file comment), ready to be written as
/// `dir`/manifest.json: GradientDump::open reads it back. Reads the files' headers only.
Result<nlohmann::json> make_dump_manifest(const std::filesystem::path& dir, const ManifestOptions& options);

/// One line saying what `manifest` (made by make_dump_manifest) assumes: its workers in order,
/// steps, elements and dtype, layers; e.g. "3 workers (w0.npy, w1.npy, w2.npy), 1 step, 4096
/// F32 elements, one layer 'gradient'".
std::string manifest_summary(const nlohmann::json& manifest);

/// `manifest` (made by make_dump_manifest) as the text of manifest.json: its keys in the order of
/// the schema (gradient_dump.hpp), one step and one layer a line.
std::string manifest_text(const nlohmann::json& manifest);

/// `words` joined by spaces, each quoted for a POSIX shell where it needs it.
std::string command_line(const std::vector<std::string>& words);

}  // namespace ccsim::traces
