#include "traces/npy.hpp"

#include "kernels/quant/fp16_quant.hpp"
#include "traces/non_finite.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

namespace ccsim::traces {

Result<NpyHeader> parse_npy_dict(const std::string& dict, std::string_view name) {
  std::smatch m;
  if (!std::regex_search(dict, m, std::regex("'descr':\\s*'([^']*)'")))
    return invalid_argument(fmt::format("{}: .npy header has no 'descr'", name));
  const std::string descr = m[1];
  if (descr != "<f4" && descr != "<f2")
    return invalid_argument(fmt::format("{}: expected dtype float32 ('<f4') or float16 ('<f2'), got '{}'", name, descr));
  if (std::regex_search(dict, std::regex("'fortran_order':\\s*True")))
    return invalid_argument(fmt::format("{}: Fortran-ordered arrays are not supported; save with C order", name));
  if (!std::regex_search(dict, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return invalid_argument(fmt::format("{}: .npy header has no 'shape'", name));
  NpyHeader h;
  const std::string dims = m[1];
  const std::regex digits("\\d+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), digits), end; it != end; ++it) {
    // Each factor and the product at most 2^44 (checked before multiplying: nothing wraps).
    const std::string d = it->str();
    const uint64_t v = d.size() <= 15 ? std::stoull(d) : kMaxNpyValues + 1;
    if (v > kMaxNpyValues || (v != 0 && h.elements > kMaxNpyValues / v))
      return invalid_argument(fmt::format("{}: expected a shape of at most 2^44 = {} values, got ({})", name,
                                          kMaxNpyValues, dims));
    h.shape.push_back(v);
    h.elements *= v;
  }
  h.value_bytes = descr == "<f4" ? 4 : 2;
  return h;
}

namespace {

// Parses the header of an open .npy stream; leaves `in` at the first value.
Result<NpyHeader> parse_header(std::ifstream& in, const std::string& path) {
  char magic[6];
  in.read(magic, 6);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return invalid_argument(fmt::format("{}: not a .npy file (bad magic)", path));
  unsigned char ver[2] = {};
  in.read(reinterpret_cast<char*>(ver), 2);
  if (!in) return invalid_argument(fmt::format("{}: truncated .npy header: the file ends in its version", path));
  uint32_t header_len = 0;
  if (ver[0] == 1) {
    unsigned char l[2] = {};
    in.read(reinterpret_cast<char*>(l), 2);
    header_len = l[0] | (l[1] << 8);
  } else if (ver[0] == 2 || ver[0] == 3) {
    unsigned char l[4] = {};
    in.read(reinterpret_cast<char*>(l), 4);
    header_len = l[0] | (l[1] << 8) | (l[2] << 16) | (static_cast<uint32_t>(l[3]) << 24);
  } else {
    return invalid_argument(fmt::format("{}: unsupported .npy version {}", path, ver[0]));
  }
  if (!in) return invalid_argument(fmt::format("{}: truncated .npy header: the file ends in its length field", path));
  // The length field is checked against the file before anything is allocated for it.
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const auto at = static_cast<uint64_t>(in.tellg());
  if (!in || ec || at > size || header_len > size - at)
    return invalid_argument(fmt::format("{}: truncated .npy header: expected {} header bytes, file has {}", path,
                                        header_len, !in || ec || at > size ? 0 : size - at));
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) return invalid_argument(fmt::format("{}: truncated .npy header", path));

  CCSIM_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_dict(header, path));
  h.data_offset = static_cast<uint64_t>(in.tellg());
  return h;
}

}  // namespace

Result<NpyHeader> read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open gradient file", path));
  CCSIM_ASSIGN_OR_RETURN(NpyHeader h, parse_header(in, path));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const uint64_t want = h.data_offset + h.elements * h.value_bytes;
  if (ec || size < want)
    return invalid_argument(fmt::format("{}: expected {} values of {} bytes, file is truncated", path, h.elements,
                                        h.value_bytes));
  if (size > want)  // the header does not describe the whole file: it lies, or the file is not what it seems
    return invalid_argument(fmt::format("{}: expected {} bytes ({} values of {} after a {}-byte header), found {}",
                                        path, want, h.elements, h.value_bytes, h.data_offset, size));
  return h;
}

Result<NpyArray> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open gradient file", path));
  CCSIM_ASSIGN_OR_RETURN(const NpyHeader h, parse_header(in, path));
  NpyArray arr;
  arr.shape = h.shape;
  const uint64_t n = h.elements;
  const size_t width = h.value_bytes;
  std::vector<char> raw(n * width);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (static_cast<uint64_t>(in.gcount()) != raw.size())
    return invalid_argument(fmt::format("{}: expected {} values of {} bytes, file is truncated", path, n, width));
  arr.values.resize(n);
  if (width == 4) {
    if (!raw.empty()) std::memcpy(arr.values.data(), raw.data(), raw.size());
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h16;
      std::memcpy(&h16, raw.data() + 2 * i, 2);
      arr.values[i] = kern::fp16_to_float(h16);
    }
  }
  return arr;
}

Status write_npy_f32(const std::string& path, const std::vector<uint64_t>& shape, const std::vector<float>& values) {
  std::string dims;
  for (uint64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error(fmt::format("{}: cannot write", tmp));
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    const char l[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
    out.write(l, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
    if (!out) return io_error(fmt::format("{}: write failed", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error(fmt::format("{}: rename failed: {}", path, ec.message()));
  return ok_status();
}

Status check_finite_npy(const std::string& path, std::span<const float> values) {
  const NonFinite bad = find_non_finite(values);
  if (bad.count == 0) return ok_status();
  return invalid_argument(fmt::format("{}: {} non-finite value(s) (NaN or inf) of {}, the first at index {}: {}; ccsim "
                                      "measures compression only on finite gradients (docs/gradient-dumps.md)",
                                      path, bad.count, values.size(), bad.first, bad.value));
}

}  // namespace ccsim::traces
