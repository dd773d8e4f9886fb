#include "tools/app/kernel_table.hpp"

#include <fmt/format.h>

#include "sim/base/units.hpp"

namespace ccsim::app {

std::string format_kernel_bench(const kern::DeviceCostProfile& p) {
  std::string out = fmt::format("device  {} ({}), measured {}\ncopy    {} (bytes read + written)\n\n", p.name, p.kind,
                                p.measured, format_quantity(p.copy_bandwidth_Bps, UnitKind::kBandwidth));
  out += fmt::format("  {:<12} {:<25} {:>10} {:>10} {:>12} {:>7}\n", "scheme", "op", "chunk", "time", "bandwidth",
                     "of copy");
  for (const auto& k : p.kernels) {
    out += fmt::format("  {:<12} {:<25} {:>10} {:>10}\n", k.scheme, k.op, "launch",
                       format_quantity(k.launch_s, UnitKind::kTime));
    for (size_t i = 0; i < k.points.size(); ++i) {
      const double bw = k.bandwidth_Bps(i);
      out += fmt::format("  {:<12} {:<25} {:>10} {:>10} {:>12} {:>6.1f}%\n", "", "",
                         format_quantity(static_cast<double>(k.points[i].elements) * 4, UnitKind::kBytes),
                         format_quantity(k.points[i].seconds, UnitKind::kTime),
                         format_quantity(bw, UnitKind::kBandwidth), 100.0 * bw / p.copy_bandwidth_Bps);
    }
  }
  return out;
}

}  // namespace ccsim::app
