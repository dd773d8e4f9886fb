#pragma once
// The SimGrid 3.32 configuration under which SimGrid computes plain max-min fair sharing, as
// ccsim's flow network does (simgrid_crosscheck_test.cpp's file comment explains each setting).
// Shared by the cross-check test and the side-by-side ring benchmark.

#include <string>
#include <vector>

namespace ccsim::simgrid_cfg {

/// argv[0] followed by the --cfg arguments (without network/optim, which each caller picks).
inline std::vector<std::string> max_min_args(const std::string& program) {
  return {program,
          "--log=root.thresh:warning",
          "--cfg=network/model:CM02",
          "--cfg=network/latency-factor:1",
          "--cfg=network/bandwidth-factor:1",
          "--cfg=network/weight-S:0",
          "--cfg=network/TCP-gamma:0",
          "--cfg=network/crosstraffic:0",
          "--cfg=surf/precision:1e-12",
          "--cfg=maxmin/precision:1e-5",
          "--cfg=contexts/stack-size:256"};
}

}  // namespace ccsim::simgrid_cfg
