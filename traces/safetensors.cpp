#include "traces/safetensors.hpp"

#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/fp16_quant.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/json_fields.hpp"
#include "sim/base/json_text.hpp"
#include "traces/json_header.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using detail::describe_json;
using detail::json_as_u64;
using nlohmann::ordered_json;

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length field
// must not make us parse gigabytes).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string ptr(std::string_view tensor, std::string_view field = {}) {
  return field.empty() ? fmt::format("/{}", json_pointer_escape(tensor))
                       : fmt::format("/{}/{}", json_pointer_escape(tensor), field);
}

std::string shape_str(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

template <class F> void for_each_f32(const std::byte* src, TensorDtype dtype, uint64_t count, F&& sink) {
  if (dtype == TensorDtype::kF32) {
    for (uint64_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, src + 4 * i, 4);
      sink(i, v);
    }
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    sink(i, dtype == TensorDtype::kF16 ? f16_to_float(h) : kern::bf16_to_float(h));
  }
}


// The header's JSON through the one JSON reader (sim/base/json_text.hpp): depth, syntax with line
// and column, numbers out of range, a repeated key at its pointer.
Result<json> parse_header(const std::string& name, const char* hdr, uint64_t header_len) {
  return parse_json_text(std::string_view(hdr, header_len), fmt::format("{}: header (bytes counted from 8)", name));
}

// The "__metadata__" entry: strings only.
void read_metadata(const std::string& key, const json& value, std::map<std::string, std::string>& out,
                   Diagnostics& diag) {
  if (!value.is_object()) {
    diag.add(ptr(key), fmt::format("expected an object of string values, found {}", describe_json(value)));
    return;
  }
  for (const auto& [mk, mv] : value.items()) {
    if (!mv.is_string())
      diag.add(ptr(key, json_pointer_escape(mk)), fmt::format("expected a string, found {}", describe_json(mv)));
    else
      out[mk] = mv.get<std::string>();
  }
}

// One tensor entry of the header, checked against a data buffer of `data_bytes` (nullopt: its
// problems are in `diag`).
std::optional<SafetensorsTensorInfo> read_tensor(const std::string& key, const json& value, uint64_t data_bytes,
                                                 Diagnostics& diag) {
  if (!value.is_object()) {
    diag.add(ptr(key), fmt::format("expected a tensor entry {{\"dtype\", \"shape\", \"data_offsets\"}}, found {}",
                                   describe_json(value)));
    return std::nullopt;
  }
  bool good = true;
  for (const auto& [field, fv] : value.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      const std::string near = closest_match(field, {"dtype", "shape", "data_offsets"});
      diag.add(ptr(key, json_pointer_escape(field)),
               fmt::format("unknown key '{}'{}; valid keys: dtype, shape, data_offsets", field,
                           near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
      good = false;
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      diag.add(ptr(key), fmt::format("missing required key '{}'", field));
      good = false;
    }
  }
  if (!good) return std::nullopt;
  SafetensorsTensorInfo t;
  t.name = key;
  if (!value["dtype"].is_string()) {
    diag.add(ptr(key, "dtype"),
             fmt::format("expected a string (F32, F16 or BF16), found {}", describe_json(value["dtype"])));
    good = false;
  } else if (auto d = parse_dtype(value["dtype"].get<std::string>()); !d.ok()) {
    diag.add(ptr(key, "dtype"), d.status().message());
    good = false;
  } else {
    t.dtype = *d;
  }
  const json& shape = value["shape"];
  if (!shape.is_array()) {
    diag.add(ptr(key, "shape"),
             fmt::format("expected an array of non-negative integers, found {}", describe_json(shape)));
    good = false;
  } else {
    for (size_t i = 0; i < shape.size(); ++i) {
      if (auto d = json_as_u64(shape[i]))
        t.shape.push_back(*d);
      else {
        diag.add(ptr(key, fmt::format("shape/{}", i)),
                 fmt::format("expected a non-negative integer, found {}", describe_json(shape[i])));
        good = false;
      }
    }
  }
  const json& offs = value["data_offsets"];
  std::optional<uint64_t> begin, end;
  if (offs.is_array() && offs.size() == 2) {
    begin = json_as_u64(offs[0]);
    end = json_as_u64(offs[1]);
  }
  if (!begin || !end) {
    diag.add(ptr(key, "data_offsets"),
             fmt::format("expected [begin, end] as two non-negative integers, found {}", describe_json(offs)));
    return std::nullopt;
  }
  t.begin_byte = *begin;
  t.end_byte = *end;
  if (t.begin_byte > t.end_byte) {
    diag.add(ptr(key, "data_offsets"),
             fmt::format("expected begin <= end, found [{}, {}]", t.begin_byte, t.end_byte));
    return std::nullopt;
  }
  if (t.end_byte > data_bytes) {
    diag.add(ptr(key, "data_offsets"),
             fmt::format("out of range: expected end <= {} (the data buffer's size), found [{}, {}]", data_bytes,
                         t.begin_byte, t.end_byte));
    good = false;
  }
  if (!good) return std::nullopt;
  uint64_t expect = dtype_bytes(t.dtype);
  bool overflow = false;
  for (uint64_t d : t.shape) overflow |= __builtin_mul_overflow(expect, d, &expect);
  if (overflow || expect != t.end_byte - t.begin_byte) {
    diag.add(ptr(key, "data_offsets"),
             fmt::format("size mismatch: expected {} bytes ({} × shape {}), found [{}, {}] = {} bytes",
                         overflow ? std::string("more than 2^64") : std::to_string(expect), dtype_name(t.dtype),
                         shape_str(t.shape), t.begin_byte, t.end_byte, t.end_byte - t.begin_byte));
    return std::nullopt;
  }
  return t;
}

// The tensors (sorted by offset) must tile the data buffer: no overlap, no hole, nothing after the
// last one.
void check_tiling(const std::vector<SafetensorsTensorInfo>& tensors, uint64_t data_bytes, uint64_t file_bytes,
                  uint64_t header_len, Diagnostics& diag) {
  uint64_t cursor = 0;
  const SafetensorsTensorInfo* prev = nullptr;
  for (const auto& t : tensors) {
    if (t.begin_byte < cursor)
      diag.add(ptr(t.name, "data_offsets"),
               fmt::format("overlaps tensor '{}' at bytes [{}, {}): expected begin >= {}, found {}", prev->name,
                           prev->begin_byte, prev->end_byte, cursor, t.begin_byte));
    else if (t.begin_byte > cursor)
      diag.add(ptr(t.name, "data_offsets"),
               fmt::format("gap in the data buffer: expected begin = {} (end of {}), found {}", cursor,
                           prev ? fmt::format("tensor '{}'", prev->name) : std::string("the header"), t.begin_byte));
    if (t.end_byte > cursor) {
      cursor = t.end_byte;
      prev = &t;
    }
  }
  if (diag.empty() && cursor != data_bytes)
    diag.add("",
             fmt::format(
                 "the tensors cover {} bytes of the data buffer, expected all {} bytes (file is {} bytes, header {})",
                 cursor, data_bytes, file_bytes, header_len));
}

}  // namespace

std::string_view dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kF32: return "F32";
    case TensorDtype::kF16: return "F16";
    case TensorDtype::kBF16: return "BF16";
  }
  return "?";
}

size_t dtype_bytes(TensorDtype dtype) { return dtype == TensorDtype::kF32 ? 4 : 2; }

Result<TensorDtype> parse_dtype(std::string_view name) {
  for (TensorDtype d : {TensorDtype::kF32, TensorDtype::kF16, TensorDtype::kBF16})
    if (name == dtype_name(d)) return d;
  return invalid_argument(fmt::format("unsupported dtype '{}': expected one of F32, F16, BF16", name));
}

float f16_to_float(uint16_t h) { return kern::fp16_to_float(h); }

uint16_t float_to_f16_rne(float x) {
  // The IEEE conversion a file format wants: the saturating kernel conversion, except that
  // magnitudes rounding past 65504 (from 65520 up, a tie rounding to even 2^16) become inf.
  if (!std::isnan(x) && std::fabs(x) >= 65520.0f) return std::signbit(x) ? 0xFC00u : 0x7C00u;
  return kern::float_to_fp16_rne(x);
}

// ---- MappedFile -------------------------------------------------------------------------------

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const fs::path& path) {
  if (const std::string why = why_not_a_file(path); why == "not found")
    return not_found(fmt::format("{}: no such file", path.string()));
  else if (!why.empty())
    return invalid_argument(fmt::format("{}: expected a regular file, found {}", path.string(), why));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(fmt::format("{}: cannot stat: {}", path.string(), std::strerror(err)));
  }
  const auto size = static_cast<size_t>(sb.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return io_error(fmt::format("{}: cannot map {} bytes: {}", path.string(), size, std::strerror(err)));
    }
    data = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_bytes_);
}

// ---- SafetensorsFile --------------------------------------------------------------------------

uint64_t SafetensorsTensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  CCSIM_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const std::string name = path.string();
  const auto bytes = file->bytes();
  if (bytes.size() < 8)
    return invalid_argument(fmt::format(
        "{}: truncated safetensors file: expected at least 8 bytes (the header length), found {}", name, bytes.size()));
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  const uint64_t after_prefix = bytes.size() - 8;
  if (header_len > after_prefix)
    return invalid_argument(
        fmt::format("{}: header length {} exceeds the file: expected at most {} bytes after the 8-byte prefix "
                    "(file is {} bytes)",
                    name, header_len, after_prefix, bytes.size()));
  if (header_len > kMaxHeaderBytes)
    return invalid_argument(
        fmt::format("{}: header length {} exceeds the limit of {} bytes", name, header_len, kMaxHeaderBytes));
  const auto* hdr = reinterpret_cast<const char*>(bytes.data() + 8);
  if (header_len == 0 || hdr[0] != '{')
    return invalid_argument(
        fmt::format("{}: expected the header to be a JSON object starting with '{{', found {}", name,
                    header_len == 0 ? std::string("an empty header")
                                    : fmt::format("byte 0x{:02x}", static_cast<unsigned char>(hdr[0]))));

  Diagnostics diag;
  CCSIM_ASSIGN_OR_RETURN(const json header, parse_header(name, hdr, header_len));
  SafetensorsFile out;
  out.file_ = file;
  out.data_start_byte_ = 8 + header_len;
  const uint64_t data_bytes = after_prefix - header_len;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      read_metadata(key, value, out.metadata_, diag);
    } else if (auto t = read_tensor(key, value, data_bytes, diag)) {
      out.tensors_.push_back(std::move(*t));
    }
  }
  std::sort(out.tensors_.begin(), out.tensors_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin_byte, a.end_byte, a.name) < std::tie(b.begin_byte, b.end_byte, b.name);
  });
  if (diag.empty()) check_tiling(out.tensors_, data_bytes, bytes.size(), header_len, diag);
  CCSIM_RETURN_IF_ERROR(diag.to_status(name));
  return out;
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> SafetensorsFile::raw_bytes(const SafetensorsTensorInfo& t) const {
  return file_->bytes().subspan(data_start_byte_ + t.begin_byte, t.end_byte - t.begin_byte);
}

std::optional<std::span<const float>> SafetensorsFile::f32_view(const SafetensorsTensorInfo& t) const {
  if (t.dtype != TensorDtype::kF32) return std::nullopt;
  const auto raw = raw_bytes(t);
  if (reinterpret_cast<uintptr_t>(raw.data()) % alignof(float) != 0) return std::nullopt;
  // The mapping holds the bytes of fp32 values written by a little-endian host.
  return std::span<const float>(reinterpret_cast<const float*>(raw.data()), raw.size() / sizeof(float));
}

Status SafetensorsFile::read_f32(const SafetensorsTensorInfo& t, uint64_t first, std::span<float> out) const {
  const uint64_t n = t.elements();
  if (first > n || out.size() > n - first)
    return invalid_argument(fmt::format("{}: tensor '{}': expected a range within its {} elements, found [{}, {})",
                                        path().string(), t.name, n, first, first + out.size()));
  const std::byte* src = raw_bytes(t).data() + first * dtype_bytes(t.dtype);
  for_each_f32(src, t.dtype, out.size(), [&](uint64_t i, float v) { out[i] = v; });
  return ok_status();
}

Result<std::vector<float>> SafetensorsFile::read_f32(std::string_view name) const {
  const SafetensorsTensorInfo* t = find(name);
  if (t == nullptr) {
    std::vector<std::string> names;
    for (const auto& x : tensors_) names.push_back(fmt::format("'{}'", x.name));
    return not_found(fmt::format("{}: no tensor '{}'; tensors present: {}", path().string(), name,
                                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  }
  std::vector<float> v(t->elements());
  CCSIM_RETURN_IF_ERROR(read_f32(*t, 0, v));
  return v;
}

// ---- writer -----------------------------------------------------------------------------------

Status write_safetensors(const fs::path& path, std::span<const SafetensorsTensorData> tensors,
                         const std::map<std::string, std::string>& metadata) {
  const std::string name = path.string();
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return invalid_argument(fmt::format("{}: tensor name '{}' is reserved or empty", name, t.name));
    if (!seen.insert(t.name).second)
      return invalid_argument(fmt::format("{}: duplicate tensor name '{}'", name, t.name));
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    if (n != t.values.size())
      return invalid_argument(fmt::format("{}: tensor '{}': shape {} has {} elements, expected {} (the values given)",
                                          name, t.name, shape_str(t.shape), n, t.values.size()));
  }
  // Data order: F32 tensors first, so that each stays 4-byte aligned after an odd-length 16-bit one.
  std::vector<const SafetensorsTensorData*> order;
  for (const auto& t : tensors)
    if (t.dtype == TensorDtype::kF32) order.push_back(&t);
  for (const auto& t : tensors)
    if (t.dtype != TensorDtype::kF32) order.push_back(&t);
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::map<const SafetensorsTensorData*, std::pair<uint64_t, uint64_t>> offsets;
  uint64_t cursor = 0;
  for (const auto* t : order) {
    const uint64_t size = t->values.size() * dtype_bytes(t->dtype);
    offsets[t] = {cursor, cursor + size};
    cursor += size;
  }
  for (const auto& t : tensors)
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offsets[&t].first, offsets[&t].second}}};
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';

  const fs::path tmp = fs::path(name + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error(fmt::format("{}: cannot write", tmp.string()));
    const uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::vector<uint16_t> buf;
    for (const auto* t : order) {
      if (t->dtype == TensorDtype::kF32) {
        out.write(reinterpret_cast<const char*>(t->values.data()), static_cast<std::streamsize>(t->values.size() * 4));
        continue;
      }
      buf.resize(t->values.size());
      for (size_t i = 0; i < buf.size(); ++i)
        buf[i] = t->dtype == TensorDtype::kF16 ? float_to_f16_rne(t->values[i]) : kern::float_to_bf16_rne(t->values[i]);
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 2));
    }
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      return io_error(fmt::format("{}: write failed", tmp.string()));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return io_error(fmt::format("{}: rename failed: {}", name, ec.message()));
  }
  return ok_status();
}

}  // namespace ccsim::traces
