#include "algorithms/kernel_profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "algorithms/device_ops.hpp"
#include "algorithms/host_cases.hpp"
#include "algorithms/numerics.hpp"
#include "algorithms/registry.hpp"
#include "kernels/parallel.hpp"
#include "topology/schedule.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {
namespace {

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(' '));
      return name;
    }
  return "unknown CPU";
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// Copy bandwidth of the CPU worker threads: bytes read + written per second, copying `elements`
// floats in the pieces parallel_for gives the kernels.
double cpu_copy_bandwidth(std::span<const float> from, std::span<float> to, uint32_t repeats) {
  const double s = median_seconds(repeats, [] {}, [&] {
    kern::parallel_for(from.size(), 1 << 16, [&](uint64_t b, uint64_t e) {
      std::memcpy(to.data() + b, from.data() + b, (e - b) * sizeof(float));
    });
  });
  return 2.0 * static_cast<double>(from.size_bytes()) / s;
}

#ifdef CCSIM_HAVE_CUDA
// The registered schemes' device ops (algorithms/device_ops.hpp), timed with CUDA events by
// kern::CudaBench on the same synthetic gradients as the CPU bench; each point's bytes the
// compressor's declared memory traffic (default parameters, as the cases use, or the round variant
// a case records). A round op's point is at the whole tensor's elements.
Status bench_cuda(const KernelBenchOptions& o, const std::vector<std::string>& schemes,
                  std::span<const float> x0, std::span<const float> x1,
                  const std::function<void(const std::string&)>& progress, kern::DeviceCostProfile& p) {
  const CompressorRegistry& registry = CompressorRegistry::global();
  std::vector<std::string> have;
  for (const CompressorInfo& info : registry.all())
    if (info.device_ops != nullptr) have.push_back(info.name);
  std::vector<const CompressorInfo*> run;
  for (const auto& s : schemes) {
    const CompressorInfo* info = registry.find(s);  // bench_kernels() checked every name
    if (info->device_ops != nullptr)
      run.push_back(info);
    else if (!o.schemes.empty())
      return invalid_argument(fmt::format("--algo {}: no CUDA kernels for it in this build; CUDA schemes: {}", s,
                                          fmt::join(have, ", ")));
  }
  CCSIM_ASSIGN_OR_RETURN(std::unique_ptr<kern::CudaBench> dev, kern::CudaBench::open());
  p.name = dev->device_name();
  const std::vector<uint64_t> sizes = bench_sizes(o);
  CCSIM_RETURN_IF_ERROR(dev->copy_bandwidth(4 * sizes.back(), o.repeats, p.copy_bandwidth_Bps));
  dev->release_all();
  for (const CompressorInfo* info : run) {
    if (progress) progress(fmt::format("{} (CUDA)", info->name));
    CCSIM_ASSIGN_OR_RETURN(std::vector<kern::KernelCostCurve> curves,
                           measure_device_kernels(*info, sizes, x0, x1, o.seed, o.repeats, *dev));
    for (auto& c : curves) p.kernels.push_back(std::move(c));
  }
  return dev->synchronize();
}
#endif

}  // namespace

std::vector<uint64_t> bench_sizes(const KernelBenchOptions& o) {
  std::vector<uint64_t> out;
  for (uint64_t b = o.min_bytes; b <= o.max_bytes; b *= 4) out.push_back(b / 4);
  return out;
}

Result<kern::DeviceCostProfile> bench_kernels(const KernelBenchOptions& o,
                                              const std::function<void(const std::string&)>& progress) {
  if (o.min_bytes < 1024 || o.min_bytes % 4 != 0)
    return invalid_argument(fmt::format("--min-size: expected a multiple of 4 bytes of at least 1 KB, got {}",
                                        o.min_bytes));
  if (o.max_bytes < o.min_bytes)
    return invalid_argument(fmt::format("--max-size: expected at least --min-size ({}), got {}", o.min_bytes,
                                        o.max_bytes));
  if (o.repeats < 1 || o.repeats > 1000)
    return invalid_argument(fmt::format("--repeats: expected 1 to 1000, got {}", o.repeats));
  if (o.device != "cpu" && o.device != "cuda")
    return invalid_argument(fmt::format("--device: expected cpu or cuda, got \"{}\"", o.device));
#ifndef CCSIM_HAVE_CUDA
  if (o.device == "cuda")
    return invalid_argument("--device cuda: this ccsim was built without CUDA (no nvcc when it was configured)");
#endif
  const std::vector<std::string> all = CompressorRegistry::global().names();
  for (const auto& s : o.schemes)
    if (std::find(all.begin(), all.end(), s) == all.end())
      return invalid_argument(fmt::format("--algo: unknown scheme \"{}\"; registered: {}", s, fmt::join(all, ", ")));
  const std::vector<std::string>& schemes = o.schemes.empty() ? all : o.schemes;

  kern::DeviceCostProfile p;
  p.measured = today();
  p.source = fmt::format("ccsim bench-kernels --device {} --min-size {} --max-size {} --repeats {}", o.device,
                         o.min_bytes, o.max_bytes, o.repeats);
#ifdef CCSIM_HAVE_CUDA
  if (o.device == "cuda" && !kern::cuda_device_available())
    return internal_error("no CUDA device: --device cuda needs a GPU");
#endif
  // Two workers' synthetic gradients (layered scales, local envelopes: what adaptive schemes plan on).
  const uint64_t max_n = bench_sizes(o).back();
  std::vector<float> x0(max_n), x1(max_n);
  traces::SyntheticGradientSpec spec;
  spec.elements = max_n;
  const std::vector<std::span<float>> workers = {x0, x1};
  traces::generate_synthetic_gradients(spec, o.seed, workers);
#ifdef CCSIM_HAVE_CUDA
  if (o.device == "cuda") {
    p.kind = "cuda";
    CCSIM_RETURN_IF_ERROR(bench_cuda(o, schemes, x0, x1, progress, p));
    return p;
  }
#endif
  p.kind = "cpu";
  p.threads = static_cast<uint32_t>(kern::worker_threads());
  p.name = fmt::format("{}, {} worker thread(s), CPU reference kernels", cpu_name(), p.threads);

  // The copy bandwidth is the fastest of copies measured before every scheme (a busy machine
  // only ever slows a copy down).
  const std::vector<uint64_t> sizes = bench_sizes(o);
  std::vector<float> copy(max_n);
  for (const std::string& scheme : schemes) {
    p.copy_bandwidth_Bps = std::max(p.copy_bandwidth_Bps, cpu_copy_bandwidth(x0, copy, o.repeats));
    if (progress) progress(scheme);
    std::string skipped;
    CCSIM_ASSIGN_OR_RETURN(std::vector<kern::KernelCostCurve> curves,
                           measure_host_kernels(scheme, "{}", false, sizes, x0, x1, o.seed, o.repeats, skipped));
    if (!skipped.empty() && progress) progress(fmt::format("  skipped: {}", skipped));
    for (auto& c : curves) p.kernels.push_back(std::move(c));
    for (const std::string& params : CompressorRegistry::global().find(scheme)->round_variants) {
      if (progress) progress(fmt::format("{} {} (round ops)", scheme, params));
      CCSIM_ASSIGN_OR_RETURN(std::vector<kern::KernelCostCurve> round,
                             measure_host_kernels(scheme, params, true, sizes, x0, x1, o.seed, o.repeats, skipped));
      for (auto& c : round) p.kernels.push_back(std::move(c));
    }
  }
  return p;
}

}  // namespace ccsim::algo
