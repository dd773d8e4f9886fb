#pragma once
/// \file
/// `ccsim bench-kernels`'s table of a measured device cost profile (algorithms/kernel_profile.hpp
/// measures it).

#include <string>

#include "kernels/cost_profile.hpp"

namespace ccsim::app {

/// The terminal table: per kernel and size, time, effective bandwidth and its fraction of the
/// measured copy bandwidth.
std::string format_kernel_bench(const kern::DeviceCostProfile& profile);

}  // namespace ccsim::app
