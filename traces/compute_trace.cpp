#include "traces/compute_trace.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "sim/base/diagnostics.hpp"
#include "sim/base/units.hpp"
#include "traces/json_header.hpp"

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using detail::check_keys;
using detail::describe_json;
using detail::json_as_u64;
using detail::read_quantity;
using detail::read_string;

constexpr const char* kFormatName = "ccsim-compute-trace";
constexpr int64_t kVersion = 1;

}  // namespace

Result<ComputeTrace> ComputeTrace::load(const fs::path& path) {
  CCSIM_ASSIGN_OR_RETURN(const json root, detail::read_json_file(path, "a compute trace"));
  return from_json(root, path.string());
}

Result<ComputeTrace> ComputeTrace::from_json(const json& root, std::string_view file) {
  Diagnostics diag;
  if (!root.is_object()) {
    diag.add("", fmt::format("expected a JSON object, found {}", describe_json(root)));
    return diag.to_status(file);
  }
  ComputeTrace t;
  check_keys(root, "", {"format", "version", "model", "provenance", "layers"},
             {"micro_batch", "gradient_bytes_per_param", "optimizer", "description"}, diag);
  if (root.contains("format") && root["format"] != kFormatName)
    diag.add("/format", fmt::format("expected \"{}\", found {}", kFormatName, describe_json(root["format"])));
  if (root.contains("version") && root["version"] != kVersion)
    diag.add("/version", fmt::format("expected {}, found {}", kVersion, describe_json(root["version"])));
  if (root.contains("model")) {
    if (auto m = read_string(root, "", "model", diag)) t.model_ = *m;
  }
  if (root.contains("provenance")) {
    const json& p = root["provenance"];
    if (!p.is_object()) {
      diag.add("/provenance", fmt::format("expected an object, found {}", describe_json(p)));
    } else if (check_keys(p, "/provenance", {"kind", "device", "source"}, {}, diag)) {
      if (auto k = read_string(p, "/provenance", "kind", diag)) {
        if (*k != "estimated" && *k != "measured")
          diag.add("/provenance/kind", fmt::format("expected \"estimated\" or \"measured\", found \"{}\"", *k));
        t.provenance_.kind = *k;
      }
      if (auto d = read_string(p, "/provenance", "device", diag)) t.provenance_.device = *d;
      if (auto s = read_string(p, "/provenance", "source", diag)) t.provenance_.source = *s;
    }
  }
  if (root.contains("micro_batch")) {
    auto v = json_as_u64(root["micro_batch"]);
    if (!v || *v == 0)
      diag.add("/micro_batch",
               fmt::format("expected a positive integer, found {}", describe_json(root["micro_batch"])));
    else
      t.micro_batch_ = *v;
  }
  if (root.contains("gradient_bytes_per_param")) {
    auto v = json_as_u64(root["gradient_bytes_per_param"]);
    if (!v || (*v != 2 && *v != 4))
      diag.add("/gradient_bytes_per_param", fmt::format("expected 2 (fp16/bf16) or 4 (fp32), found {}",
                                                        describe_json(root["gradient_bytes_per_param"])));
    else
      t.gradient_bytes_per_param_ = static_cast<uint32_t>(*v);
  }
  if (root.contains("optimizer")) {
    if (auto v = read_quantity(root, "", "optimizer", UnitKind::kTime, false, diag)) t.optimizer_s_ = *v;
  }
  if (root.contains("layers")) {
    const json& layers = root["layers"];
    if (!layers.is_array() || layers.empty()) {
      diag.add("/layers", fmt::format("expected a non-empty array of layers, found {}", describe_json(layers)));
    } else {
      for (size_t i = 0; i < layers.size(); ++i) {
        const std::string path = fmt::format("/layers/{}", i);
        const json& l = layers[i];
        if (!l.is_object()) {
          diag.add(path, fmt::format("expected an object, found {}", describe_json(l)));
          continue;
        }
        check_keys(l, path, {"name", "params", "forward", "backward"}, {"activation_bytes"}, diag);
        if (!l.contains("name") || !l.contains("params") || !l.contains("forward") || !l.contains("backward")) continue;
        LayerCompute lc;
        if (auto n = read_string(l, path, "name", diag)) lc.name = *n;
        if (auto p = json_as_u64(l["params"]); p && *p <= kMaxTraceParams)
          lc.params = *p;
        else
          diag.add(path + "/params", fmt::format("expected an integer in [0, 2^44 = {}], found {}", kMaxTraceParams,
                                                 describe_json(l["params"])));
        if (auto f = read_quantity(l, path, "forward", UnitKind::kTime, false, diag)) lc.forward_s = *f;
        if (auto b = read_quantity(l, path, "backward", UnitKind::kTime, false, diag)) lc.backward_s = *b;
        if (l.contains("activation_bytes")) {
          if (auto a = read_quantity(l, path, "activation_bytes", UnitKind::kBytes, false, diag)) {
            if (*a <= static_cast<double>(kMaxTraceParams) * 1024)
              lc.activation_bytes = static_cast<uint64_t>(std::llround(*a));
            else
              diag.add(path + "/activation_bytes",
                       fmt::format("expected at most 2^54 bytes, found {:.6g}", *a));
          }
        }
        for (const LayerCompute& other : t.layers_)
          if (!lc.name.empty() && other.name == lc.name)
            diag.add(path + "/name", fmt::format("duplicate layer name '{}'", lc.name));
        t.layers_.push_back(std::move(lc));
      }
      double total = 0;  // in double: a sum of many layers near the cap would wrap in 64 bits
      for (const LayerCompute& l : t.layers_) total += static_cast<double>(l.params);
      if (diag.empty() && total > static_cast<double>(kMaxTraceParams))
        diag.add("/layers", fmt::format("expected at most 2^44 = {} parameters in all, found {:.6g}", kMaxTraceParams,
                                        total));
      if (diag.empty() && t.params() == 0)
        diag.add("/layers", "expected at least one layer with parameters, found none");
    }
  }
  if (!diag.empty()) return diag.to_status(file);
  return t;
}

json ComputeTrace::to_json() const {
  json layers = json::array();
  for (const LayerCompute& l : layers_) {
    json j = {{"name", l.name}, {"params", l.params}, {"forward", l.forward_s}, {"backward", l.backward_s}};
    if (l.activation_bytes != 0) j["activation_bytes"] = l.activation_bytes;
    layers.push_back(std::move(j));
  }
  json root = {
      {"format", kFormatName},
      {"version", kVersion},
      {"model", model_},
      {"provenance", {{"kind", provenance_.kind}, {"device", provenance_.device}, {"source", provenance_.source}}}};
  if (micro_batch_ != 0) root["micro_batch"] = micro_batch_;
  root["gradient_bytes_per_param"] = gradient_bytes_per_param_;
  if (optimizer_s_ != 0) root["optimizer"] = optimizer_s_;
  root["layers"] = std::move(layers);
  return root;
}

uint64_t ComputeTrace::params() const {
  return std::accumulate(layers_.begin(), layers_.end(), uint64_t{0},
                         [](uint64_t s, const LayerCompute& l) { return s + l.params; });
}

double ComputeTrace::forward_s() const {
  return std::accumulate(layers_.begin(), layers_.end(), 0.0,
                         [](double s, const LayerCompute& l) { return s + l.forward_s; });
}

double ComputeTrace::backward_s() const {
  return std::accumulate(layers_.begin(), layers_.end(), 0.0,
                         [](double s, const LayerCompute& l) { return s + l.backward_s; });
}

ComputeTrace ComputeTrace::scaled(double factor) const {
  ComputeTrace t = *this;
  for (LayerCompute& l : t.layers_) {
    l.forward_s *= factor;
    l.backward_s *= factor;
  }
  return t;
}

Result<ComputeTrace> ComputeTrace::merged(const std::vector<size_t>& starts, std::vector<std::string> names) const {
  if (starts.empty() || (!names.empty() && starts.size() != names.size()))
    return invalid_argument(fmt::format("merged: expected as many block names as block starts, got {} and {}",
                                        names.size(), starts.size()));
  for (size_t b = 0; b < starts.size(); ++b)
    if ((b == 0 && starts[b] != 0) || (b > 0 && starts[b] <= starts[b - 1]) || starts[b] >= layers_.size())
      return invalid_argument_at(fmt::format("/{}", b),
                                 fmt::format("expected {} (block starts begin at 0, increase and stay below the "
                                             "trace's {} layers), got {}", b == 0 ? "0" : "a larger index",
                                             layers_.size(), starts[b]));
  for (size_t b = 0; names.size() < starts.size(); ++b) {
    const size_t first = starts[b], last = (b + 1 < starts.size() ? starts[b + 1] : layers_.size()) - 1;
    names.push_back(first == last ? layers_[first].name : layers_[first].name + "-" + layers_[last].name);
  }
  ComputeTrace t = *this;
  t.layers_.clear();
  for (size_t b = 0; b < starts.size(); ++b) {
    const size_t end = b + 1 < starts.size() ? starts[b + 1] : layers_.size();
    LayerCompute block;
    block.name = names[b];
    for (size_t i = starts[b]; i < end; ++i) {
      block.params += layers_[i].params;
      block.forward_s += layers_[i].forward_s;
      block.backward_s += layers_[i].backward_s;
    }
    block.activation_bytes = layers_[end - 1].activation_bytes;
    t.layers_.push_back(std::move(block));
  }
  return t;
}

}  // namespace ccsim::traces
