#include "sim/kernel_cost.hpp"

#include <fmt/format.h>

#include "sim/base/units.hpp"

namespace ccsim::sim {

std::string KernelCostModel::describe() const {
  if (ideal()) return "ideal (compression kernels not timed)";
  return fmt::format("roofline ({}, {} launch)", format_quantity(memory_Bps, UnitKind::kBandwidth),
                     format_quantity(launch.seconds(), UnitKind::kTime));
}

}  // namespace ccsim::sim
