// Ring: nodes 0..n-1 in a bidirectional ring (node i linked to node i+1 mod n), the torus builder's
// one-dimensional case. Routes take the shorter direction; exactly half-way goes clockwise
// (increasing node index).
#include "topology/builders/builders.hpp"

namespace ccsim::topo::detail {

void check_ring(const ClusterSpec&, std::vector<SpecProblem>&) {}  // no fields of its own

Topology build_ring(const ClusterSpec& spec) { return build_direct_torus(spec, "ring", {spec.nodes}); }

}  // namespace ccsim::topo::detail
