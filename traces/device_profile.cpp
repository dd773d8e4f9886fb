#include "traces/device_profile.hpp"

#include <fmt/format.h>

#include <regex>
#include <string>

#include "sim/base/diagnostics.hpp"
#include "sim/base/units.hpp"
#include "topology/schedule.hpp"
#include "traces/json_header.hpp"

namespace ccsim::traces {
namespace {

// A measured kernel time beyond this (an hour) is a broken profile, not a slow device: scaled to a
// run's chunks it would pass the end of simulated time.
constexpr double kMaxKernelSeconds = 3600;

namespace fs = std::filesystem;
using nlohmann::json;
using detail::check_keys;
using detail::describe_json;
using detail::json_as_u64;
using detail::read_quantity;
using detail::read_string;

constexpr const char* kFormatName = "ccsim-device-profile";
constexpr int64_t kVersion = 1;
// The op names a profile may hold: every kernel kind a schedule runs, by its schedule name.
const std::vector<std::string> kOps = [] {
  std::vector<std::string> ops;
  for (size_t k = 0; k < topo::kNumKernelKinds; ++k)
    ops.emplace_back(topo::kernel_kind_name(static_cast<topo::KernelKind>(k)));
  return ops;
}();

void read_device(const json& d, kern::DeviceCostProfile& p, Diagnostics& diag) {
  if (!d.is_object()) return diag.add("/device", fmt::format("expected an object, found {}", describe_json(d)));
  if (!check_keys(d, "/device", {"kind", "name", "measured", "source"}, {"threads"}, diag)) return;
  if (auto k = read_string(d, "/device", "kind", diag)) {
    if (*k != "cpu" && *k != "cuda")
      diag.add("/device/kind", fmt::format("expected \"cpu\" or \"cuda\", found \"{}\"", *k));
    p.kind = *k;
  }
  if (auto n = read_string(d, "/device", "name", diag)) p.name = *n;
  if (auto m = read_string(d, "/device", "measured", diag)) {
    if (!std::regex_match(*m, std::regex(R"(\d{4}-\d{2}-\d{2})")))
      diag.add("/device/measured", fmt::format("expected a date YYYY-MM-DD, found \"{}\"", *m));
    p.measured = *m;
  }
  if (auto s = read_string(d, "/device", "source", diag)) p.source = *s;
  if (d.contains("threads")) {
    auto t = json_as_u64(d["threads"]);
    if (!t || *t > 1u << 16)
      diag.add("/device/threads",
               fmt::format("expected an integer in [0, 65536], found {}", describe_json(d["threads"])));
    else
      p.threads = static_cast<uint32_t>(*t);
  }
}

void read_points(const json& pts, const std::string& path, kern::KernelCostCurve& k, Diagnostics& diag) {
  if (!pts.is_array() || pts.empty())
    return diag.add(path, fmt::format("expected a non-empty array of measured sizes, found {}", describe_json(pts)));
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string at = fmt::format("{}/{}", path, i);
    const json& e = pts[i];
    if (!e.is_object()) {
      diag.add(at, fmt::format("expected an object, found {}", describe_json(e)));
      continue;
    }
    if (!check_keys(e, at, {"elements", "bytes", "seconds"}, {}, diag)) continue;
    kern::KernelCostPoint p;
    auto n = json_as_u64(e["elements"]);
    if (!n || *n == 0)
      diag.add(at + "/elements", fmt::format("expected a positive integer, found {}", describe_json(e["elements"])));
    else
      p.elements = *n;
    if (auto b = json_as_u64(e["bytes"]))
      p.bytes = *b;
    else
      diag.add(at + "/bytes", fmt::format("expected a non-negative integer, found {}", describe_json(e["bytes"])));
    if (auto s = read_quantity(e, at, "seconds", UnitKind::kTime, true, diag)) {
      if (*s > kMaxKernelSeconds)
        diag.add(at + "/seconds", fmt::format("expected at most {:g} s (one kernel on one chunk), found {:g}",
                                              kMaxKernelSeconds, *s));
      else
        p.seconds = *s;
    }
    if (!k.points.empty() && p.elements != 0 && p.elements <= k.points.back().elements)
      diag.add(at + "/elements", fmt::format("expected sizes in ascending order, found {} after {}", p.elements,
                                             k.points.back().elements));
    k.points.push_back(p);
  }
}

void read_kernels(const json& ks, kern::DeviceCostProfile& p, Diagnostics& diag) {
  if (!ks.is_array()) return diag.add("/kernels", fmt::format("expected an array, found {}", describe_json(ks)));
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string at = fmt::format("/kernels/{}", i);
    const json& e = ks[i];
    if (!e.is_object()) {
      diag.add(at, fmt::format("expected an object, found {}", describe_json(e)));
      continue;
    }
    if (!check_keys(e, at, {"scheme", "op", "launch", "points"}, {"params"}, diag)) continue;
    kern::KernelCostCurve k;
    if (auto s = read_string(e, at, "scheme", diag)) k.scheme = *s;
    if (auto o = read_string(e, at, "op", diag)) {
      if (std::find(kOps.begin(), kOps.end(), *o) == kOps.end())
        diag.add(at + "/op", fmt::format("expected one of {}, found \"{}\"", detail::join(kOps), *o));
      k.op = *o;
    }
    k.params = "{}";
    if (e.contains("params")) {
      if (e["params"].is_object())
        k.params = e["params"].dump();
      else
        diag.add(at + "/params", fmt::format("expected an object, found {}", describe_json(e["params"])));
    }
    if (auto l = read_quantity(e, at, "launch", UnitKind::kTime, false, diag)) {
      if (*l > kMaxKernelSeconds)
        diag.add(at + "/launch", fmt::format("expected at most {:g} s, found {:g}", kMaxKernelSeconds, *l));
      else
        k.launch_s = *l;
    }
    read_points(e["points"], at + "/points", k, diag);
    if (!k.scheme.empty() && p.find(k.scheme, k.op, k.params) != nullptr)
      diag.add(at, fmt::format("duplicate kernel: {} {} is measured twice{}", k.scheme, k.op,
                               k.params == "{}" ? std::string() : fmt::format(" with params {}", k.params)));
    p.kernels.push_back(std::move(k));
  }
}

}  // namespace

Result<kern::DeviceCostProfile> load_device_profile(const fs::path& path) {
  CCSIM_ASSIGN_OR_RETURN(const json root, detail::read_json_file(path, "a device profile"));
  return device_profile_from_json(root, path.string());
}

Result<kern::DeviceCostProfile> device_profile_from_json(const json& root, std::string_view file) {
  Diagnostics diag;
  if (!root.is_object()) {
    diag.add("", fmt::format("expected a JSON object, found {}", describe_json(root)));
    return diag.to_status(file);
  }
  kern::DeviceCostProfile p;
  check_keys(root, "", {"format", "version", "device", "copy_bandwidth", "kernels"}, {}, diag);
  if (root.contains("format") && root["format"] != kFormatName)
    diag.add("/format", fmt::format("expected \"{}\", found {}", kFormatName, describe_json(root["format"])));
  if (root.contains("version") && root["version"] != kVersion)
    diag.add("/version", fmt::format("expected {}, found {}", kVersion, describe_json(root["version"])));
  if (root.contains("device")) read_device(root["device"], p, diag);
  if (root.contains("copy_bandwidth")) {
    if (auto b = read_quantity(root, "", "copy_bandwidth", UnitKind::kBandwidth, true, diag)) p.copy_bandwidth_Bps = *b;
  }
  if (root.contains("kernels")) read_kernels(root["kernels"], p, diag);
  if (!diag.empty()) return diag.to_status(file);
  return p;
}

json device_profile_to_json(const kern::DeviceCostProfile& p) {
  json kernels = json::array();
  for (const kern::KernelCostCurve& k : p.kernels) {
    json points = json::array();
    for (const kern::KernelCostPoint& pt : k.points)
      points.push_back({{"elements", pt.elements}, {"bytes", pt.bytes}, {"seconds", pt.seconds}});
    kernels.push_back({{"scheme", k.scheme},
                       {"op", k.op},
                       {"params", json::parse(k.params.empty() ? "{}" : k.params)},
                       {"launch", k.launch_s},
                       {"points", std::move(points)}});
  }
  json device = {{"kind", p.kind}, {"name", p.name}, {"measured", p.measured}, {"source", p.source}};
  if (p.threads != 0) device["threads"] = p.threads;
  return {{"format", kFormatName},
          {"version", kVersion},
          {"device", std::move(device)},
          {"copy_bandwidth", p.copy_bandwidth_Bps},
          {"kernels", std::move(kernels)}};
}

}  // namespace ccsim::traces
