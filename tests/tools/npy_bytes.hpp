#pragma once
// A NumPy .npy file's bytes, written by hand so that tests can make broken ones too.

#include <fmt/format.h>

#include <string>

namespace ccsim::test_files {

/// A version 1.0 .npy file: `descr` ("<f4"), the shape as NumPy writes it ("(24,)", "(2, 24)"),
/// the raw data; the header dict padded with spaces to a multiple of 64 bytes, as NumPy pads it.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                             bool fortran = false) {
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                              fortran ? "True" : "False", shape);
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() & 0xFF) + static_cast<char>(h.size() >> 8) +
         h + data;
}

}  // namespace ccsim::test_files
