#pragma once
/// \file
/// Each algorithm file appends its (operation, algorithm) entries; known_collectives() calls these
/// in a fixed order. Internal to topology/collectives.

#include <vector>

#include "topology/collectives/collectives.hpp"

namespace ccsim::topo::detail {

void register_ring(std::vector<CollectiveInfo>& out);               // ring.cpp
void register_semi_loop(std::vector<CollectiveInfo>& out);          // semi_loop.cpp
void register_butterfly(std::vector<CollectiveInfo>& out);          // butterfly.cpp
void register_hierarchical_ring(std::vector<CollectiveInfo>& out);  // hierarchical_ring.cpp
void register_direct(std::vector<CollectiveInfo>& out);             // direct.cpp
void register_two_level(std::vector<CollectiveInfo>& out);          // two_level.cpp
void register_broadcast_ring(std::vector<CollectiveInfo>& out);     // broadcast_ring.cpp

/// Input error unless ranks >= at_least.
Status need_ranks(uint32_t ranks, uint32_t at_least);

}  // namespace ccsim::topo::detail
