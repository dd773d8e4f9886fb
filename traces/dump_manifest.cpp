#include "traces/dump_manifest.hpp"

#include "sim/base/diagnostics.hpp"
#include "sim/base/json_text.hpp"
#include "traces/json_header.hpp"
#include "traces/npy.hpp"
#include "traces/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <utility>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using detail::describe_json;
using detail::json_as_u64;

constexpr std::string_view kNpy = ".npy";
constexpr std::string_view kSafetensors = ".safetensors";
constexpr const char* kDefaultLayer = "gradient";

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The last run of digits in `name`, without leading zeros ("0" for zeros only); nullopt if none.
std::optional<std::string> last_number(std::string_view name) {
  size_t end = name.size();
  while (end > 0 && !is_digit(name[end - 1])) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && is_digit(name[begin - 1])) --begin;
  while (begin + 1 < end && name[begin] == '0') ++begin;
  return std::string(name.substr(begin, end - begin));
}

// Numeric order of two digit strings without leading zeros (no overflow, however long).
bool number_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// 'a', 'b', 'c' (at most `most` names, then "and N more").
std::string quoted_list(const std::vector<std::string>& names, size_t most = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += fmt::format("{}'{}'", i ? ", " : "", names[i]);
  if (names.size() > most) out += fmt::format(" and {} more", names.size() - most);
  return out;
}

// "1 file" / "3 files".
std::string count_of(size_t n, std::string_view noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// One input error holding every problem found, one per line.
Status problems_status(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
  return invalid_argument(text);
}

// `names` sorted by the last number in each (less `ext`): errors, in `where`, for names without
// one or two with the same number. `what` says what the names are ("worker file", "tensor") and
// `role` what their number orders.
Result<std::vector<std::pair<std::string, std::string>>> order_by_number(const std::vector<std::string>& names,
                                                                        std::string_view ext, const std::string& where,
                                                                        const char* what, const char* role) {
  std::vector<std::pair<std::string, std::string>> numbered;  // (number, name)
  std::vector<std::string> without;
  for (const auto& n : names) {
    if (auto num = last_number(std::string_view(n).substr(0, n.size() - ext.size())))
      numbered.emplace_back(*num, n);
    else
      without.push_back(n);
  }
  std::vector<std::string> problems;
  if (!without.empty())
    problems.push_back(fmt::format("{}: expected a number in every {}'s name ({}), found none in {}", where, what,
                                   role, quoted_list(without)));
  std::stable_sort(numbered.begin(), numbered.end(),
                   [](const auto& a, const auto& b) { return number_less(a.first, b.first); });
  for (size_t i = 1; i < numbered.size(); ++i)
    if (numbered[i].first == numbered[i - 1].first)
      problems.push_back(fmt::format("{}: expected one {} per number, found '{}' and '{}' both numbered {}", where,
                                     what, numbered[i - 1].second, numbered[i].second, numbered[i].first));
  if (!problems.empty()) return problems_status(problems);
  return numbered;
}

// What the worker files hold, as far as the manifest needs it.
struct FilesInfo {
  TensorDtype dtype = TensorDtype::kF32;
  uint64_t elements = 0;
  size_t steps = 1;
  std::string steps_origin;              ///< what decides the step count (for messages)
  bool rows = false;                     ///< .npy: a 2-D array, one step per row
  std::vector<std::string> tensors;      ///< .safetensors: each step's tensor
  std::vector<uint64_t> tensor_numbers;  ///< .safetensors: the number in each step's tensor name
};

// Headers of the .npy worker files: 1-D or 2-D, F32 or F16, all alike.
Result<FilesInfo> describe_npy(const fs::path& dir, const std::vector<std::string>& files) {
  std::vector<std::string> problems;
  std::optional<NpyHeader> first;
  std::string first_path;
  const auto dtype_of = [](const NpyHeader& h) { return h.value_bytes == 4 ? TensorDtype::kF32 : TensorDtype::kF16; };
  for (const auto& f : files) {
    const std::string path = (dir / f).string();
    auto h = read_npy_header(path);
    if (!h.ok()) {
      problems.push_back(h.status().message());
    } else if (h->shape.size() != 1 && h->shape.size() != 2) {
      problems.push_back(fmt::format("{}: expected a 1-D array (one step) or a 2-D [steps, elements] array, found "
                                     "shape ({})", path, fmt::join(h->shape, ", ")));
    } else if (h->elements == 0) {
      problems.push_back(
          fmt::format("{}: expected at least one value, found shape ({})", path, fmt::join(h->shape, ", ")));
    } else if (!first) {
      first = *h;
      first_path = path;
    } else if (h->shape != first->shape || h->value_bytes != first->value_bytes) {
      problems.push_back(fmt::format("{}: expected shape ({}) and dtype {} as {} has (every worker alike), found ({}) "
                                     "and {}", path, fmt::join(first->shape, ", "), dtype_name(dtype_of(*first)),
                                     first_path, fmt::join(h->shape, ", "), dtype_name(dtype_of(*h))));
    }
  }
  if (!problems.empty()) return problems_status(problems);
  FilesInfo info;
  info.dtype = dtype_of(*first);
  info.rows = first->shape.size() == 2;
  info.elements = first->shape.back();
  info.steps = info.rows ? first->shape.front() : 1;
  info.steps_origin = info.rows ? fmt::format("one per row of the [{}] arrays", fmt::join(first->shape, ", "))
                                : "the 1-D arrays hold one step";
  return info;
}

// Checks every tensor of `file` against `ref` (dtype, element count) and its names against the
// reference file's; adds what differs to `problems`.
void check_tensors(const SafetensorsFile& file, const SafetensorsFile& ref_file, std::vector<std::string>& problems) {
  const SafetensorsTensorInfo& ref = ref_file.tensors().front();
  const std::string path = file.path().string(), ref_path = ref_file.path().string();
  for (const auto& t : file.tensors()) {
    if (t.dtype != ref.dtype)
      problems.push_back(fmt::format("{}: tensor '{}': expected dtype {} as tensor '{}' of {} has, found {}", path,
                                     t.name, dtype_name(ref.dtype), ref.name, ref_path, dtype_name(t.dtype)));
    else if (t.elements() != ref.elements())
      problems.push_back(fmt::format("{}: tensor '{}': expected {} elements as tensor '{}' of {} has, found {} (shape "
                                     "[{}])", path, t.name, ref.elements(), ref.name, ref_path, t.elements(),
                                     fmt::join(t.shape, ", ")));
  }
  std::vector<std::string> missing, extra;
  for (const auto& t : ref_file.tensors())
    if (file.find(t.name) == nullptr) missing.push_back(t.name);
  for (const auto& t : file.tensors())
    if (ref_file.find(t.name) == nullptr) extra.push_back(t.name);
  if (!missing.empty() || !extra.empty())
    problems.push_back(fmt::format("{}: expected the tensors of {} (one per step, in every worker file), found {}{}{}",
                                   path, ref_path, missing.empty() ? "" : "no " + quoted_list(missing),
                                   !missing.empty() && !extra.empty() ? " and " : "",
                                   extra.empty() ? "" : "also " + quoted_list(extra)));
}

// The steps of the .safetensors worker files: the reference file's tensors in the order of their
// numbers (a lone tensor without one is step 0).
Status order_tensors(const SafetensorsFile& ref_file, FilesInfo& info) {
  std::vector<std::string> names;
  for (const auto& t : ref_file.tensors()) names.push_back(t.name);
  const std::string path = ref_file.path().string();
  if (names.size() == 1 && !last_number(names[0])) {
    info.tensors = names;
    info.tensor_numbers = {0};
    return ok_status();
  }
  CCSIM_ASSIGN_OR_RETURN(const auto ordered, order_by_number(names, "", path, "tensor", "the step it holds"));
  for (const auto& [number, name] : ordered) {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec != std::errc() || end != number.data() + number.size())
      return invalid_argument(fmt::format("{}: tensor '{}': expected a step number below 2^64, found {}", path, name,
                                          number));
    info.tensors.push_back(name);
    info.tensor_numbers.push_back(v);
  }
  return ok_status();
}

// Headers of the .safetensors worker files: one tensor per step, all alike.
Result<FilesInfo> describe_safetensors(const fs::path& dir, const std::vector<std::string>& files) {
  std::vector<std::string> problems;
  std::optional<SafetensorsFile> ref;
  for (const auto& f : files) {
    auto st = SafetensorsFile::open(dir / f);
    if (!st.ok()) {
      problems.push_back(st.status().message());
    } else if (st->tensors().empty()) {
      problems.push_back(fmt::format("{}: expected one tensor per step, found no tensors", st->path().string()));
    } else {
      if (!ref) ref = *st;
      check_tensors(*st, *ref, problems);
    }
  }
  if (!problems.empty()) return problems_status(problems);
  FilesInfo info;
  const SafetensorsTensorInfo& t = ref->tensors().front();
  if (t.elements() == 0)
    return invalid_argument(fmt::format("{}: tensor '{}': expected at least one value, found shape [{}]",
                                        ref->path().string(), t.name, fmt::join(t.shape, ", ")));
  info.dtype = t.dtype;
  info.elements = t.elements();
  CCSIM_RETURN_IF_ERROR(order_tensors(*ref, info));
  info.steps = info.tensors.size();
  info.steps_origin = "one per tensor of the .safetensors files";
  return info;
}

// The "steps" array (null where there is none): numbers given, else the tensors' or the rows'.
Result<json> steps_json(const FilesInfo& info, const std::vector<uint64_t>& given) {
  if (!given.empty() && given.size() != info.steps)
    return invalid_argument(fmt::format("step numbers: expected {} ({}), given {}: {}", info.steps, info.steps_origin,
                                        given.size(), fmt::join(given, ", ")));
  for (size_t i = 1; i < given.size(); ++i)
    if (given[i] <= given[i - 1])
      return invalid_argument(fmt::format("step numbers: expected them increasing, given {}", fmt::join(given, ", ")));
  if (given.empty() && info.tensors.empty() && !info.rows) return json();
  json steps = json::array();
  for (size_t i = 0; i < info.steps; ++i) {
    const uint64_t number = !given.empty() ? given[i] : info.tensors.empty() ? i : info.tensor_numbers[i];
    json s = {{"step", number}};
    if (!info.tensors.empty()) s["tensor"] = info.tensors[i];
    steps.push_back(std::move(s));
  }
  return steps;
}

// Elements of parameter shape `shape` (at `where` in the list), or nullopt after an error.
std::optional<uint64_t> shape_count(const json& shape, const std::string& where, Diagnostics& diag) {
  if (!shape.is_array()) {
    diag.add(where, fmt::format("expected an array of non-negative integers, found {}", describe_json(shape)));
    return std::nullopt;
  }
  uint64_t count = 1;
  bool good = true;
  for (size_t k = 0; k < shape.size(); ++k) {
    const auto d = json_as_u64(shape[k]);
    if (!d || *d > kMaxNpyValues) {
      diag.add(fmt::format("{}/{}", where, k),
               fmt::format("expected an integer in [0, 2^44], found {}", describe_json(shape[k])));
      good = false;
    } else if (good) {
      count = *d == 0 || count <= kMaxNpyValues / *d ? count * *d : kMaxNpyValues + 1;
    }
  }
  if (good && count > kMaxNpyValues) {
    diag.add(where, fmt::format("expected at most 2^44 elements, found shape {}", shape.dump()));
    return std::nullopt;
  }
  return good ? std::optional<uint64_t>(count) : std::nullopt;
}

// The layers of the parameter list `path`, offsets accumulated; they must hold `elements` in all.
Result<json> param_layers(const fs::path& path, uint64_t elements) {
  CCSIM_ASSIGN_OR_RETURN(const json list,
                         detail::read_json_file(path, "a parameter list: [{\"name\": ..., \"shape\": [...]}, ...]"));
  Diagnostics diag;
  if (!list.is_array() || list.empty()) {
    diag.add("", fmt::format("expected a non-empty array of {{\"name\": str, \"shape\": [ints]}} in flattening "
                             "order, found {}", describe_json(list)));
    return diag.to_status(path.string());
  }
  json layers = json::array();
  std::map<std::string, size_t> names;
  uint64_t offset = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = fmt::format("/{}", i);
    if (!list[i].is_object()) {
      diag.add(p, fmt::format("expected an object {{\"name\", \"shape\"}}, found {}", describe_json(list[i])));
      continue;
    }
    if (!detail::check_keys(list[i], p, {"name", "shape"}, {}, diag)) continue;
    const auto name = detail::read_string(list[i], p, "name", diag);
    if (name && !names.emplace(*name, i).second)
      diag.add(p + "/name", fmt::format("expected a name of its own, found '{}' again (also /{}/name)", *name,
                                        names[*name]));
    const auto count = shape_count(list[i]["shape"], p + "/shape", diag);
    if (!name || !count) continue;
    layers.push_back({{"name", *name}, {"shape", list[i]["shape"]}, {"offset", offset}, {"count", *count}});
    offset = *count > std::numeric_limits<uint64_t>::max() - offset ? std::numeric_limits<uint64_t>::max()
                                                                     : offset + *count;
  }
  if (diag.empty() && offset != elements)
    diag.add("", fmt::format("expected parameters of {} elements in all (one worker's gradient at one step), found {} "
                             "({} {})", elements, offset, offset < elements ? "short by" : "over by",
                             offset < elements ? elements - offset : offset - elements));
  CCSIM_RETURN_IF_ERROR(diag.to_status(path.string()));
  return layers;
}

// The worker files of `dir`, in worker order: all .npy or all .safetensors.
Result<std::vector<std::string>> worker_files(const fs::path& dir, bool& npy) {
  const DumpFileListing listing = list_dump_files(dir);
  const std::string d = dir.string();
  if (!listing.npy.empty() && !listing.safetensors.empty())
    return invalid_argument(fmt::format("{}: expected per-worker files of one kind, all .npy or all .safetensors, "
                                        "found {} ({}) and {} ({})", d, count_of(listing.npy.size(), ".npy file"),
                                        quoted_list(listing.npy), count_of(listing.safetensors.size(),
                                                                           ".safetensors file"),
                                        quoted_list(listing.safetensors)));
  if (listing.npy.empty() && listing.safetensors.empty())
    return invalid_argument(fmt::format("{}: expected one .npy or .safetensors file per worker, found {}", d,
                                        listing.other.empty() ? std::string("an empty directory")
                                                              : fmt::format("only {}", quoted_list(listing.other))));
  npy = !listing.npy.empty();
  CCSIM_ASSIGN_OR_RETURN(const auto ordered, order_by_number(npy ? listing.npy : listing.safetensors,
                                                             npy ? kNpy : kSafetensors, d, "worker file",
                                                             "it orders the workers"));
  std::vector<std::string> files;
  for (const auto& [number, name] : ordered) {
    CCSIM_RETURN_IF_ERROR(check_utf8(name, fmt::format("{}: a worker file's name", d)));  // JSON holds UTF-8 only
    files.push_back(name);
  }
  return files;
}

// "a, b, c" or, for more than `most`, "a, b, ..., z".
template <class T>
std::string short_list(const std::vector<T>& v, size_t most = 4) {
  if (v.size() <= most) return fmt::format("{}", fmt::join(v, ", "));
  return fmt::format("{}, {}, ..., {}", v[0], v[1], v.back());
}

// `v` on one line, arrays with a space after each comma ([64, 32]).
std::string one_line(const json& v) {
  if (!v.is_array()) return v.dump();
  std::vector<std::string> parts;
  for (const json& e : v) parts.push_back(one_line(e));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

}  // namespace

DumpFileListing list_dump_files(const fs::path& dir) {
  DumpFileListing out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    const bool regular = it->is_regular_file(type_ec);
    if (regular && ends_with(name, kNpy))
      out.npy.push_back(name);
    else if (regular && ends_with(name, kSafetensors))
      out.safetensors.push_back(name);
    else
      out.other.push_back(it->is_directory(type_ec) ? name + "/" : name);
  }
  for (auto* v : {&out.npy, &out.safetensors, &out.other}) std::sort(v->begin(), v->end());
  return out;
}

Result<json> make_dump_manifest(const fs::path& dir, const ManifestOptions& options) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return not_found(fmt::format("{}: no such directory", dir.string()));
  if (!fs::is_directory(dir, ec))
    return invalid_argument(fmt::format("{}: expected a directory of per-worker gradient files, found a file",
                                        dir.string()));
  bool npy = false;
  CCSIM_ASSIGN_OR_RETURN(const std::vector<std::string> files, worker_files(dir, npy));
  CCSIM_ASSIGN_OR_RETURN(const FilesInfo info, npy ? describe_npy(dir, files) : describe_safetensors(dir, files));
  CCSIM_ASSIGN_OR_RETURN(json steps, steps_json(info, options.steps));
  json layers = json::array({{{"name", kDefaultLayer},
                              {"shape", {info.elements}},
                              {"offset", 0},
                              {"count", info.elements}}});
  if (options.params) {
    CCSIM_ASSIGN_OR_RETURN(layers, param_layers(*options.params, info.elements));
  }
  json provenance = {{"model", options.model}, {"dataset", options.dataset}};
  if (!options.generator.empty()) provenance["generator"] = options.generator;
  json manifest = {{"format", "ccsim-gradient-dump"},
                   {"version", 1},
                   {"dtype", std::string(dtype_name(info.dtype))},
                   {"elements", info.elements},
                   {"workers", files},
                   {"layers", std::move(layers)},
                   {"provenance", std::move(provenance)}};
  if (!steps.is_null()) manifest["steps"] = std::move(steps);
  return manifest;
}

std::string manifest_summary(const json& manifest) {
  const auto workers = manifest.at("workers").get<std::vector<std::string>>();
  bool in_place = true;  // worker w's file carries the number w
  for (size_t w = 0; w < workers.size(); ++w) {
    const std::string& f = workers[w];
    const auto number = last_number(std::string_view(f).substr(0, f.rfind('.')));
    in_place = in_place && number == std::to_string(w);
  }
  std::string out = fmt::format("{} ({}){}", count_of(workers.size(), "worker"), short_list(workers),
                                in_place ? "" : " in the order of the numbers in their names");
  if (!manifest.contains("steps")) {
    out += ", 1 step";
  } else {
    std::vector<uint64_t> numbers;
    std::vector<std::string> tensors;
    for (const json& s : manifest["steps"]) {
      numbers.push_back(s.at("step").get<uint64_t>());
      if (s.contains("tensor")) tensors.push_back("'" + s["tensor"].get<std::string>() + "'");
    }
    out += fmt::format(", {} ({}{}{})", count_of(numbers.size(), "step"), short_list(numbers),
                       tensors.empty() ? "" : ": tensors ", short_list(tensors));
  }
  out += fmt::format(", {} {} elements", manifest.at("elements").get<uint64_t>(),
                     manifest.at("dtype").get<std::string>());
  const json& layers = manifest.at("layers");
  if (layers.size() == 1)
    out += fmt::format(", one layer '{}'", layers[0].at("name").get<std::string>());
  else
    out += fmt::format(", {} layers ('{}' ... '{}')", layers.size(), layers.front().at("name").get<std::string>(),
                       layers.back().at("name").get<std::string>());
  return out;
}

std::string manifest_text(const json& manifest) {
  // Members of `obj` as "key": value, `keys` first in that order, then the rest.
  const auto members = [](const json& obj, std::vector<std::string> keys) {
    for (const auto& [key, value] : obj.items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    std::vector<std::string> out;
    for (const auto& key : keys)
      if (obj.contains(key)) out.push_back(fmt::format("{}: {}", json(key).dump(), one_line(obj[key])));
    return out;
  };
  const auto lines = [&](const json& array, const std::vector<std::string>& keys) {
    std::string out;
    for (const json& e : array)
      out += fmt::format("{}    {{{}}}", out.empty() ? "" : ",\n", fmt::join(members(e, keys), ", "));
    return out;
  };
  std::vector<std::string> top;
  for (const char* key : {"format", "version", "dtype", "elements"})
    if (manifest.contains(key)) top.push_back(fmt::format("  \"{}\": {}", key, manifest[key].dump()));
  top.push_back(fmt::format("  \"workers\": {}", one_line(manifest.at("workers"))));
  if (manifest.contains("steps"))
    top.push_back(fmt::format("  \"steps\": [\n{}\n  ]", lines(manifest["steps"], {"step", "tensor", "loss"})));
  top.push_back(
      fmt::format("  \"layers\": [\n{}\n  ]", lines(manifest.at("layers"), {"name", "shape", "offset", "count"})));
  const auto provenance = members(manifest.at("provenance"), {"model", "dataset", "generator"});
  top.push_back(fmt::format("  \"provenance\": {{\n    {}\n  }}", fmt::join(provenance, ",\n    ")));
  return fmt::format("{{\n{}\n}}\n", fmt::join(top, ",\n"));
}

std::string command_line(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
             std::string_view("_-./:=,+%@").find(c) != std::string_view::npos;
    });
    std::string q = "'";
    for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? w : q + "'");
  }
  return out;
}

}  // namespace ccsim::traces
