#include "traces/gradient_dump.hpp"

#include "kernels/quant/bf16_quant.hpp"
#include "sim/base/diagnostics.hpp"
#include "sim/base/json_text.hpp"
#include "traces/dump_manifest.hpp"
#include "traces/json_header.hpp"
#include "traces/non_finite.hpp"
#include "traces/npy.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using detail::describe_json;
using detail::check_keys;
using detail::join;
using detail::json_as_u64;

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kFormatName = "ccsim-gradient-dump";
constexpr int64_t kVersion = 1;


// A non-negative integer member, or an error at its path.
std::optional<uint64_t> read_u64(const json& obj, const std::string& path, const char* key, Diagnostics& diag) {
  auto v = json_as_u64(obj.at(key));
  if (!v) diag.add(path + "/" + key, fmt::format("expected a non-negative integer, found {}", describe_json(obj.at(key))));
  return v;
}

// Where a .npy file's data lies in its mapping.
struct NpyLayout {
  TensorDtype dtype = TensorDtype::kF32;
  uint64_t elements = 0;
  uint64_t data_byte = 0;
};

// Parses the .npy header in place (the same subset read_npy accepts: little-endian f4/f2, C order),
// so a worker file can stay mapped instead of being read into memory.
Result<NpyLayout> parse_npy(const MappedFile& file) {
  const std::string name = file.path().string();
  const auto b = file.bytes();
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return invalid_argument(fmt::format("{}: not a .npy file: expected the magic \"\\x93NUMPY\" and a header", name));
  const auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<unsigned char>(b[i])); };
  const uint64_t major = byte(6);
  uint64_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    header_start = 10;
  } else if ((major == 2 || major == 3) && b.size() >= 12) {
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    header_start = 12;
  } else {
    return invalid_argument(fmt::format("{}: unsupported .npy version {}: expected 1, 2 or 3", name, major));
  }
  if (header_start + header_len > b.size())
    return invalid_argument(fmt::format("{}: truncated .npy header: expected {} header bytes, file has {}", name,
                                        header_len, b.size() - header_start));
  const std::string header(reinterpret_cast<const char*>(b.data() + header_start), header_len);
  CCSIM_ASSIGN_OR_RETURN(const NpyHeader h, parse_npy_dict(header, name));
  NpyLayout out;
  out.dtype = h.value_bytes == 4 ? TensorDtype::kF32 : TensorDtype::kF16;
  out.elements = h.elements;
  out.data_byte = header_start + header_len;
  const uint64_t want = out.data_byte + out.elements * dtype_bytes(out.dtype);
  if (want != b.size())
    return invalid_argument(fmt::format("{}: expected {} bytes ({} values of {} after a {}-byte header), found {}",
                                        name, want, out.elements, dtype_name(out.dtype), out.data_byte, b.size()));
  return out;
}

void widen(const std::byte* src, TensorDtype dtype, std::span<float> out) {
  switch (dtype) {
    case TensorDtype::kF32:
      if (!out.empty()) std::memcpy(out.data(), src, out.size() * sizeof(float));  // empty spans may be null
      return;
    case TensorDtype::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = f16_to_float(h);
      }
      return;
    case TensorDtype::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = kern::bf16_to_float(h);
      }
      return;
  }
}

// A missing manifest (kNotFound): where `dir` holds per-worker files, the command that writes one.
Status missing_manifest(const fs::path& dir, const fs::path& manifest_path) {
  const DumpFileListing files = list_dump_files(dir);
  const size_t npy = files.npy.size(), st = files.safetensors.size();
  const std::string command = command_line({"ccsim", "manifest", dir.string()});
  if (npy > 0 && st > 0)
    return not_found(fmt::format("{} has no {}; `{}` writes one from per-worker files of one kind, and it holds {} .npy "
                                 "and {} .safetensors files", dir.string(), kManifestName, command, npy, st));
  if (npy + st > 0)
    return not_found(fmt::format("{} has no {}; `{}` writes one from its {} {} file{}", dir.string(), kManifestName,
                                 command, npy + st, npy > 0 ? ".npy" : ".safetensors", npy + st == 1 ? "" : "s"));
  return not_found(fmt::format("{}: no such file (a gradient dump directory holds {} and one file per worker)",
                               manifest_path.string(), kManifestName));
}

// The manifest's JSON (errors name the file).
Result<json> read_manifest(const fs::path& manifest_path) {
  const std::string mname = manifest_path.string();
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) return missing_manifest(manifest_path.parent_path(), manifest_path);
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open", mname));
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), mname);
}

}  // namespace

Result<GradientDump> GradientDump::open(const fs::path& given) {
  // The dump's folder, or its manifest named directly.
  std::error_code ec;
  const fs::path dir = given.filename() == kManifestName && fs::is_regular_file(given, ec) ? given.parent_path() : given;
  const fs::path manifest_path = dir / kManifestName;
  const std::string mname = manifest_path.string();
  CCSIM_ASSIGN_OR_RETURN(const json root, read_manifest(manifest_path));
  Diagnostics diag;
  if (!root.is_object()) {
    diag.add("", fmt::format("expected a JSON object, found {}", describe_json(root)));
    return diag.to_status(mname);
  }
  GradientDump dump;
  dump.dir_ = dir;
  // Whether each part parsed well enough to check the worker files against it.
  bool header_ok = check_keys(root, "", {"format", "version", "dtype", "elements", "workers", "layers", "provenance"},
                              {"steps"}, diag);
  header_ok = dump.read_header(root, diag) && header_ok;
  header_ok = dump.read_workers(root, diag) && header_ok;
  if (dump.format_ == GradientFileFormat::kNpy && dump.dtype_ == TensorDtype::kBF16 && root.contains("dtype")) {
    diag.add("/dtype", "expected F32 or F16 for .npy worker files, found BF16 (NumPy has no bfloat16)");
    header_ok = false;
  }
  header_ok = dump.read_steps(root, diag) && header_ok;
  dump.read_layers(root, diag);
  dump.read_provenance(root, diag);
  if (header_ok) dump.open_sources(diag);
  CCSIM_RETURN_IF_ERROR(diag.to_status(mname));
  return dump;
}

bool GradientDump::read_header(const json& root, Diagnostics& diag) {
  bool header_ok = true;
  if (root.contains("format") && root["format"] != kFormatName) {
    diag.add("/format", fmt::format("expected \"{}\", found {}", kFormatName, describe_json(root["format"])));
    header_ok = false;
  }
  if (root.contains("version") && root["version"] != kVersion) {
    diag.add("/version", fmt::format("expected {} (the only version this build reads), found {}", kVersion,
                                     describe_json(root["version"])));
    header_ok = false;
  }
  if (root.contains("dtype")) {
    const auto d = root["dtype"].is_string()
                       ? parse_dtype(root["dtype"].get<std::string>())
                       : Result<TensorDtype>(invalid_argument("expected a string (F32, F16 or BF16), found " +
                                                              describe_json(root["dtype"])));
    if (d.ok())
      dtype_ = *d;
    else {
      diag.add("/dtype", d.status().message());
      header_ok = false;
    }
  }
  if (root.contains("elements")) {
    auto e = read_u64(root, "", "elements", diag);
    if (e && *e == 0) {
      diag.add("/elements", "expected at least 1 element, found 0");
      e.reset();
    }
    if (e)
      elements_ = *e;
    else
      header_ok = false;
  }

  return header_ok;
}

bool GradientDump::read_workers(const json& root, Diagnostics& diag) {
  bool header_ok = true;
  if (root.contains("workers")) {
    const json& ws = root["workers"];
    if (!ws.is_array() || ws.empty()) {
      diag.add("/workers", fmt::format("expected a non-empty array of file names, found {}", describe_json(ws)));
      header_ok = false;
    } else {
      std::set<std::string> seen;
      for (size_t i = 0; i < ws.size(); ++i) {
        const std::string p = fmt::format("/workers/{}", i);
        if (!ws[i].is_string() || ws[i].get<std::string>().empty()) {
          diag.add(p, fmt::format("expected a file name, found {}", describe_json(ws[i])));
          header_ok = false;
          continue;
        }
        const std::string f = ws[i].get<std::string>();
        const std::string ext = fs::path(f).extension().string();
        const GradientFileFormat fmt_i = ext == ".npy" ? GradientFileFormat::kNpy : GradientFileFormat::kSafetensors;
        const fs::path normal = fs::path(f).lexically_normal();
        if (fs::path(f).is_absolute()) {
          diag.add(p, fmt::format("expected a path relative to the dump directory, found '{}'", f));
          header_ok = false;
        } else if (normal.empty() || *normal.begin() == "..") {
          diag.add(p, fmt::format("expected a file inside the dump directory, found '{}' (it leads out of it)", f));
          header_ok = false;
        } else if (ext != ".npy" && ext != ".safetensors") {
          diag.add(p, fmt::format("expected a .safetensors or .npy file, found '{}'", f));
          header_ok = false;
        } else if (!worker_files_.empty() && fmt_i != format_) {
          diag.add(p, fmt::format("expected a {} file like /workers/0, found '{}' (all workers use one format)",
                                  format_ == GradientFileFormat::kNpy ? ".npy" : ".safetensors", f));
          header_ok = false;
        } else if (!seen.insert(f).second) {
          diag.add(p, fmt::format("expected each worker to have its own file, found '{}' again", f));
          header_ok = false;
        }
        if (worker_files_.empty()) format_ = fmt_i;
        worker_files_.push_back(f);
      }
    }
  }
  return header_ok;
}

bool GradientDump::read_steps(const json& root, Diagnostics& diag) {
  const bool npy = format_ == GradientFileFormat::kNpy;
  bool header_ok = true;
  if (!root.contains("steps")) {
    steps_.push_back(GradientStep{});
  } else if (const json& ss = root["steps"]; !ss.is_array() || ss.empty()) {
    diag.add("/steps", fmt::format("expected a non-empty array of {{\"step\", \"tensor\", \"loss\"}} objects, found {}",
                                   describe_json(ss)));
    header_ok = false;
  } else {
    for (size_t i = 0; i < ss.size(); ++i) {
      const std::string p = fmt::format("/steps/{}", i);
      const json& s = ss[i];
      if (!s.is_object()) {
        diag.add(p, fmt::format("expected an object {{\"step\", \"tensor\", \"loss\"}}, found {}", describe_json(s)));
        header_ok = false;
        continue;
      }
      if (!check_keys(s, p, npy ? std::vector<std::string>{"step"} : std::vector<std::string>{"step", "tensor"},
                      {"tensor", "loss"}, diag)) {
        header_ok = false;
        continue;
      }
      GradientStep st;
      if (auto v = read_u64(s, p, "step", diag))
        st.step = *v;
      else
        header_ok = false;
      if (!steps_.empty() && st.step <= steps_.back().step) {
        diag.add(p + "/step", fmt::format("expected steps in increasing order, > {} (/steps/{}/step), found {}",
                                          steps_.back().step, steps_.size() - 1, st.step));
        header_ok = false;
      }
      if (s.contains("tensor")) {
        if (npy) {
          diag.add(p + "/tensor", "expected no tensor name for .npy worker files (step i is the i-th row)");
          header_ok = false;
        } else if (!s["tensor"].is_string() || s["tensor"].get<std::string>().empty()) {
          diag.add(p + "/tensor", fmt::format("expected a tensor name, found {}", describe_json(s["tensor"])));
          header_ok = false;
        } else {
          st.tensor = s["tensor"].get<std::string>();
          for (size_t k = 0; k < steps_.size(); ++k)
            if (steps_[k].tensor == st.tensor) {
              diag.add(p + "/tensor",
                       fmt::format("expected a tensor not used by another step, found '{}' (also /steps/{}/tensor)",
                                   st.tensor, k));
              header_ok = false;
            }
        }
      }
      if (s.contains("loss")) {
        if (s["loss"].is_number())
          st.loss = s["loss"].get<double>();
        else
          diag.add(p + "/loss", fmt::format("expected a number, found {}", describe_json(s["loss"])));
      }
      steps_.push_back(std::move(st));
    }
  }

  return header_ok;
}

// Each count == ∏shape, and together the layers tile [0, elements) in order.
void GradientDump::read_layers(const json& root, Diagnostics& diag) {
  if (root.contains("layers")) {
    const json& ls = root["layers"];
    if (!ls.is_array() || ls.empty()) {
      diag.add("/layers",
               fmt::format("expected a non-empty array of {{\"name\", \"shape\", \"offset\", \"count\"}}, found {}",
                           describe_json(ls)));
    } else {
      uint64_t cursor = 0;
      bool cursor_known = true;
      std::set<std::string> names;
      for (size_t i = 0; i < ls.size(); ++i) {
        const std::string p = fmt::format("/layers/{}", i);
        const json& l = ls[i];
        if (!l.is_object()) {
          diag.add(p, fmt::format("expected an object {{\"name\", \"shape\", \"offset\", \"count\"}}, found {}",
                                  describe_json(l)));
          cursor_known = false;
          continue;
        }
        if (!check_keys(l, p, {"name", "shape", "offset", "count"}, {}, diag)) {
          cursor_known = false;
          continue;
        }
        GradientLayer layer;
        bool good = true;
        if (!l["name"].is_string() || l["name"].get<std::string>().empty()) {
          diag.add(p + "/name", fmt::format("expected a non-empty string, found {}", describe_json(l["name"])));
        } else {
          layer.name = l["name"].get<std::string>();
          if (!names.insert(layer.name).second)
            diag.add(p + "/name", fmt::format("expected a unique layer name, found '{}' again", layer.name));
        }
        uint64_t shape_count = 1;
        if (!l["shape"].is_array()) {
          diag.add(p + "/shape",
                   fmt::format("expected an array of non-negative integers, found {}", describe_json(l["shape"])));
          good = false;
        } else {
          for (size_t k = 0; k < l["shape"].size(); ++k) {
            if (auto d = json_as_u64(l["shape"][k])) {
              layer.shape.push_back(*d);
              shape_count *= *d;
            } else {
              diag.add(fmt::format("{}/shape/{}", p, k),
                       fmt::format("expected a non-negative integer, found {}", describe_json(l["shape"][k])));
              good = false;
            }
          }
        }
        const auto offset = read_u64(l, p, "offset", diag);
        const auto count = read_u64(l, p, "count", diag);
        if (!offset || !count) {
          cursor_known = false;
          continue;
        }
        layer.offset = *offset;
        layer.count = *count;
        if (good && layer.count != shape_count) {
          diag.add(p + "/count", fmt::format("expected {} (the product of shape [{}]), found {}", shape_count,
                                             fmt::join(layer.shape, ", "), layer.count));
          good = false;
        }
        if (cursor_known && layer.offset != cursor) {
          const std::string prev = i == 0 ? std::string("the start of the vector")
                                          : fmt::format("the end of layer {} '{}'", i - 1, layers_.back().name);
          diag.add(p + "/offset", fmt::format("expected {} ({}), found {} ({} of {} elements)", cursor, prev,
                                              layer.offset, layer.offset > cursor ? "a gap" : "an overlap",
                                              layer.offset > cursor ? layer.offset - cursor : cursor - layer.offset));
        }
        // After a bad count, the next offset cannot be judged against it: resynchronize there.
        cursor_known = good;
        cursor = layer.offset + layer.count;
        layers_.push_back(std::move(layer));
      }
      if (cursor_known && elements_ != 0 && cursor != elements_)
        diag.add(
            fmt::format("/layers/{}", ls.size() - 1),
            fmt::format("expected the last layer to end at /elements = {}, found it ends at {} ({} of {} elements)",
                        elements_, cursor, cursor < elements_ ? "a gap" : "an overrun",
                        cursor < elements_ ? elements_ - cursor : cursor - elements_));
    }
  }

}

void GradientDump::read_provenance(const json& root, Diagnostics& diag) {
  if (root.contains("provenance")) {
    const json& pv = root["provenance"];
    if (!pv.is_object()) {
      diag.add("/provenance", fmt::format("expected an object with \"model\" and \"dataset\", found {}", describe_json(pv)));
    } else {
      const std::pair<const char*, std::string*> fields[] = {{"model", &provenance_.model},
                                                             {"dataset", &provenance_.dataset},
                                                             {"generator", &provenance_.generator}};
      for (const auto& [key, field] : fields) {
        if (!pv.contains(key)) {
          if (field != &provenance_.generator)
            diag.add("/provenance", fmt::format("missing required key '{}'", key));
        } else if (!pv[key].is_string()) {
          diag.add(fmt::format("/provenance/{}", key), fmt::format("expected a string, found {}", describe_json(pv[key])));
        } else {
          *field = pv[key].get<std::string>();
        }
      }
      provenance_.json = pv.dump(2);
    }
  }

}

// Worker files, checked against the manifest (its header is sound).
void GradientDump::open_sources(Diagnostics& diag) {
  for (size_t w = 0; w < worker_files_.size(); ++w) {
    Source src;
    const bool opened = format_ == GradientFileFormat::kNpy ? npy_source(w, src, diag) : safetensors_source(w, src, diag);
    if (opened) sources_.push_back(std::move(src));
  }
}

bool GradientDump::npy_source(size_t w, Source& src, Diagnostics& diag) const {
  const std::string p = fmt::format("/workers/{}", w);
  const fs::path file = dir_ / worker_files_[w];
  const uint64_t step_bytes = elements_ * dtype_bytes(dtype_);
  auto mapped = MappedFile::open(file);
  if (!mapped.ok()) {
    diag.add(p, mapped.status().message());
    if (mapped.status().code() == StatusCode::kNotFound) diag.mark_not_found();
    return false;
  }
  const auto layout = parse_npy(**mapped);
  if (!layout.ok()) {
    diag.add(p, layout.status().message());
    return false;
  }
  if (layout->dtype != dtype_) {
    diag.add(p, fmt::format("{}: expected dtype {} (/dtype), found {}", file.string(), dtype_name(dtype_),
                            dtype_name(layout->dtype)));
    return false;
  }
  const uint64_t want = elements_ * steps_.size();
  if (layout->elements != want) {
    diag.add(p, fmt::format("{}: expected {} values (/elements = {} × {} step(s)), found {}", file.string(), want,
                            elements_, steps_.size(), layout->elements));
    return false;
  }
  src.mapping = *mapped;
  for (size_t s = 0; s < steps_.size(); ++s) src.step_byte.push_back(layout->data_byte + s * step_bytes);
  return true;
}

bool GradientDump::safetensors_source(size_t w, Source& src, Diagnostics& diag) const {
  const std::string p = fmt::format("/workers/{}", w);
  const fs::path file = dir_ / worker_files_[w];
  auto st = SafetensorsFile::open(file);
  if (!st.ok()) {
    diag.add(p, st.status().message());
    if (st.status().code() == StatusCode::kNotFound) diag.mark_not_found();
    return false;
  }
  bool good = true;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const SafetensorsTensorInfo* t = nullptr;
    if (steps_[s].tensor.empty()) {  // no "steps": the file's only tensor
      if (st->tensors().size() == 1)
        t = &st->tensors()[0];
      else {
        diag.add(p, fmt::format("{}: expected exactly one tensor (the manifest has no \"steps\"), found {}",
                                file.string(), st->tensors().size()));
        good = false;
        break;
      }
    } else if ((t = st->find(steps_[s].tensor)) == nullptr) {
      std::vector<std::string> present;
      for (const auto& x : st->tensors()) present.push_back("'" + x.name + "'");
      diag.add(p, fmt::format("{}: expected a tensor '{}' (/steps/{}/tensor), found only {}", file.string(),
                              steps_[s].tensor, s,
                              present.empty() ? std::string("no tensors") : join(present)));
      good = false;
      continue;
    }
    if (t->dtype != dtype_) {
      diag.add(p, fmt::format("{}: tensor '{}': expected dtype {} (/dtype), found {}", file.string(), t->name,
                              dtype_name(dtype_), dtype_name(t->dtype)));
      good = false;
    } else if (t->elements() != elements_) {
      diag.add(p, fmt::format("{}: tensor '{}': expected {} elements (/elements), found {} (shape [{}])",
                              file.string(), t->name, elements_, t->elements(), fmt::join(t->shape, ", ")));
      good = false;
    } else {
      src.step_byte.push_back(static_cast<uint64_t>(st->raw_bytes(*t).data() - st->mapping()->bytes().data()));
    }
  }
  if (!good) return false;
  src.mapping = st->mapping();
  return true;
}

fs::path GradientDump::worker_file(uint32_t w) const { return dir_ / worker_files_.at(w); }

Result<std::vector<size_t>> GradientDump::step_indices(std::span<const uint64_t> steps) const {
  std::vector<size_t> out;
  if (steps.empty())
    for (size_t i = 0; i < steps_.size(); ++i) out.push_back(i);
  for (uint64_t want : steps) {
    const auto it = std::find_if(steps_.begin(), steps_.end(), [&](const GradientStep& g) { return g.step == want; });
    if (it == steps_.end()) {
      std::string have;
      for (const GradientStep& g : steps_) have += (have.empty() ? "" : ", ") + std::to_string(g.step);
      return invalid_argument(fmt::format("{} has no step {}; dumped steps: {}", dir_.string(), want, have));
    }
    out.push_back(static_cast<size_t>(it - steps_.begin()));
  }
  return out;
}

Result<size_t> GradientDump::find_layer(std::string_view name) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].name == name) return i;
    names.push_back(layers_[i].name);
  }
  const std::string near = closest_match(name, names);
  return not_found(fmt::format("{}: no layer '{}'{}", (dir_ / kManifestName).string(), name,
                               near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", near)));
}

Status GradientDump::check_indices(uint32_t w, size_t step) const {
  if (w >= workers())
    return invalid_argument(fmt::format("{}: expected a worker index < {}, found {}", dir_.string(), workers(), w));
  if (step >= steps())
    return invalid_argument(fmt::format("{}: expected a step index < {}, found {}", dir_.string(), steps(), step));
  return ok_status();
}

// Non-finite values of worker w's step `step` from element `base` on (traces/non_finite.hpp): an
// input error naming the worker file, the worker, the step, the first index and its layer, the count.
Status GradientDump::check_finite(uint32_t w, size_t step, uint64_t base, std::span<const float> values) const {
  const NonFinite bad = find_non_finite(values);
  if (bad.count == 0) return ok_status();
  const uint64_t index = base + bad.first;
  const auto layer = std::upper_bound(layers_.begin(), layers_.end(), index,
                                      [](uint64_t i, const GradientLayer& l) { return i < l.offset; });
  const GradientLayer& l = *(layer - 1);  // layers tile [0, elements()) from offset 0
  return invalid_argument(fmt::format(
      "{}: worker {}, step {} (iteration {}): {} non-finite value(s) (NaN or inf), the first at index {} (layer '{}', "
      "entry {}): {}; ccsim measures compression only on finite gradients (docs/gradient-dumps.md)",
      sources_[w].mapping->path().string(), w, step, steps_[step].step, bad.count, index, l.name, index - l.offset,
      bad.value));
}

Result<GradientVector> GradientDump::worker(uint32_t w, size_t step) const {
  CCSIM_RETURN_IF_ERROR(check_indices(w, step));
  const Source& src = sources_[w];
  const std::byte* data = src.mapping->bytes().data() + src.step_byte[step];
  GradientVector out;
  if (dtype_ == TensorDtype::kF32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
    out.mapping_ = src.mapping;
    out.mapped_ = std::span<const float>(reinterpret_cast<const float*>(data), elements_);
  } else {
    out.owned_.resize(elements_);
    widen(data, dtype_, out.owned_);
  }
  CCSIM_RETURN_IF_ERROR(check_finite(w, step, 0, out.values()));
  return out;
}

Status GradientDump::read_layer(uint32_t w, size_t step, size_t layer, std::span<float> out) const {
  CCSIM_RETURN_IF_ERROR(check_indices(w, step));
  if (layer >= layers_.size())
    return invalid_argument(
        fmt::format("{}: expected a layer index < {}, found {}", dir_.string(), layers_.size(), layer));
  const GradientLayer& l = layers_[layer];
  if (out.size() != l.count)
    return invalid_argument(fmt::format("{}: layer '{}': expected an output of {} elements, found {}", dir_.string(),
                                        l.name, l.count, out.size()));
  const Source& src = sources_[w];
  widen(src.mapping->bytes().data() + src.step_byte[step] + l.offset * dtype_bytes(dtype_), dtype_, out);
  return check_finite(w, step, l.offset, out);
}

Result<std::vector<float>> GradientDump::layer(uint32_t w, size_t step, size_t layer) const {
  if (layer >= layers_.size())
    return invalid_argument(
        fmt::format("{}: expected a layer index < {}, found {}", dir_.string(), layers_.size(), layer));
  std::vector<float> v(layers_[layer].count);
  CCSIM_RETURN_IF_ERROR(read_layer(w, step, layer, v));
  return v;
}

}  // namespace ccsim::traces
