#pragma once
/// \file
/// Reader and writer for the safetensors format (https://github.com/huggingface/safetensors), the
/// container of real gradient dumps (gradient_dump.hpp).
///
/// Layout: an 8-byte little-endian header length N, then N bytes of JSON (possibly padded with
/// trailing spaces), then the data buffer. The header maps each tensor name to
/// `{"dtype": "F32"|"F16"|"BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}`, offsets
/// in bytes relative to the start of the data buffer; an optional `"__metadata__"` maps strings to
/// strings. ccsim reads F32, F16 and BF16 tensors and rejects other dtypes.
///
/// The reader is strict (as the reference implementation is): the header must be a JSON object
/// with no duplicate or unknown keys; every tensor must have `end - begin == bytes(dtype) × ∏shape`;
/// the tensors must tile the data buffer exactly, with no overlap, no gap and nothing after the
/// last one. Every error is kInvalidArgument (kNotFound for a missing file) and names the file,
/// the JSON Pointer in the header where that applies, what was expected and what was found.
///
/// The file is memory-mapped read-only; values are converted to fp32 on access (F16 and BF16
/// widen exactly). Little-endian hosts only (checked at compile time).

#include "sim/base/status.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsim::traces {

static_assert(std::endian::native == std::endian::little, "safetensors and .npy readers assume a little-endian host");

/// Element types of stored tensors.
enum class TensorDtype { kF32, kF16, kBF16 };

/// The safetensors spelling: "F32", "F16", "BF16".
std::string_view dtype_name(TensorDtype dtype);
/// Bytes per element: 4 or 2.
size_t dtype_bytes(TensorDtype dtype);
/// Parses a safetensors dtype ("F32", "F16", "BF16"); anything else is kInvalidArgument naming
/// the supported dtypes.
Result<TensorDtype> parse_dtype(std::string_view name);

/// IEEE binary16 -> fp32 (exact, including subnormals, ±inf and NaN).
float f16_to_float(uint16_t h);
/// fp32 -> IEEE binary16, round to nearest even; overflow gives ±inf, NaN stays a quiet NaN.
uint16_t float_to_f16_rne(float x);

/// A read-only memory mapping of a whole file (POSIX mmap), unmapped on destruction.
/// Not copyable; share it through std::shared_ptr. Thread safety: immutable after open, so
/// concurrent reads are safe.
class MappedFile {
 public:
  /// Maps `path`. kNotFound if it does not exist or is not a regular file, kIo if it cannot be
  /// opened or mapped. An empty file maps to an empty span.
  static Result<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The file's bytes, valid for the lifetime of this object.
  std::span<const std::byte> bytes() const { return {data_, size_bytes_}; }
  /// The path it was opened with (for error messages).
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const std::byte* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_bytes_ = 0;
};

/// One tensor's entry in a safetensors header.
struct SafetensorsTensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<uint64_t> shape;  ///< empty for a scalar
  uint64_t begin_byte = 0;      ///< offset of the first byte, relative to the data buffer
  uint64_t end_byte = 0;        ///< one past the last byte, relative to the data buffer

  /// ∏shape (1 for a scalar).
  uint64_t elements() const;
};

/// An open, validated safetensors file. Cheap to copy (copies share the mapping); immutable, so
/// safe to read from several threads.
class SafetensorsFile {
 public:
  /// Maps and validates `path` (see the file comment for the rules).
  static Result<SafetensorsFile> open(const std::filesystem::path& path);

  /// The path it was opened with.
  const std::filesystem::path& path() const { return file_->path(); }
  /// The tensors, in data-buffer order (increasing `begin_byte`).
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const SafetensorsTensorInfo* find(std::string_view name) const;
  /// The `__metadata__` map (empty if the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The tensor's raw little-endian bytes, inside the mapping.
  /// REQUIRES: `t` is one of tensors().
  std::span<const std::byte> raw_bytes(const SafetensorsTensorInfo& t) const;
  /// A zero-copy fp32 view of an F32 tensor whose data is 4-byte aligned in the mapping (always
  /// the case for files written by write_safetensors); std::nullopt otherwise. The view is valid
  /// while this object or a copy of it lives.
  /// REQUIRES: `t` is one of tensors().
  std::optional<std::span<const float>> f32_view(const SafetensorsTensorInfo& t) const;
  /// Converts elements [first, first + out.size()) of the flattened tensor to fp32 into `out`.
  /// kInvalidArgument (naming file and tensor) if the range exceeds the tensor.
  /// REQUIRES: `t` is one of tensors().
  Status read_f32(const SafetensorsTensorInfo& t, uint64_t first, std::span<float> out) const;
  /// The whole tensor `name`, flattened and converted to fp32; kNotFound (listing the tensors
  /// present) if there is no such tensor.
  Result<std::vector<float>> read_f32(std::string_view name) const;

  /// The file's mapping (to keep views alive beyond this object).
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  uint64_t data_start_byte_ = 0;  ///< 8 + header length
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write: fp32 `values` stored as `dtype` (F16/BF16 round to nearest even).
struct SafetensorsTensorData {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<uint64_t> shape;    ///< REQUIRES: ∏shape == values.size()
  std::span<const float> values;  ///< borrowed; must outlive the write call
};

/// Writes `tensors` and `metadata` to `path`. The header lists the tensors in the given order; the
/// data packs them back to back, F32 tensors first, and the header is padded with spaces to a
/// multiple of 8 bytes, so every F32 tensor is 4-byte aligned for zero-copy views (f32_view). Any
/// reader that follows the format reads the result. The file is written under a temporary name and
/// renamed, so it appears whole or not at all. kInvalidArgument for an empty, duplicate or
/// reserved ("__metadata__") name or a shape that does not match the values; kIo if the file
/// cannot be written.
Status write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensorData> tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace ccsim::traces
