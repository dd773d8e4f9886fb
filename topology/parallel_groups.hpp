#pragma once
/// \file
/// 3D-parallel rank layouts (tensor x pipeline x data) and their communication groups, following
/// Megatron-LM's convention: the order string names the dimensions fastest-varying first, so with
/// the default "tp-dp-pp"
///
///     rank = tp_i + tp * (dp_i + dp * pp_i)
///
/// and a TP group is tp consecutive ranks (which land on one node when tp divides gpus_per_node).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "topology/topology.hpp"

namespace ccsim::topo {

/// A parallelism dimension.
enum class Dim { kTensor, kPipeline, kData };

/// "tp", "pp" or "dp".
const char* dim_name(Dim d);

/// Degrees of parallelism and their nesting. Default: a single rank.
struct ParallelLayout {
  uint32_t tp = 1, pp = 1, dp = 1;  ///< degrees; each REQUIRES >= 1
  /// The three dimension names separated by '-', fastest-varying first; any permutation of
  /// tp, dp, pp. Default "tp-dp-pp" (Megatron-LM).
  std::string order = "tp-dp-pp";
};

/// A rank's index in each dimension.
struct ParallelCoord {
  uint32_t tp = 0, dp = 0, pp = 0;
  friend bool operator==(const ParallelCoord&, const ParallelCoord&) = default;
};

/// The rank <-> coordinate map of a layout and the TP/DP/PP groups it induces. Immutable and cheap
/// to copy; all methods are O(1) except group() (O(group size)) and groups() (O(world size)).
class ParallelGroups {
 public:
  /// Validates `layout` against `world_size`. Errors (invalid_argument, starting with the field):
  /// a degree of 0; tp * dp * pp != world_size; an order that is not a '-'-separated permutation
  /// of tp, dp, pp.
  static Result<ParallelGroups> make(const ParallelLayout& layout, uint32_t world_size);
  /// The same, where dp 0 means as many data-parallel replicas as fill the world:
  /// world_size / (tp * pp). Errors: as make(), or tp * pp not dividing the world size.
  static Result<ParallelGroups> make_filling(ParallelLayout layout, uint32_t world_size);

  const ParallelLayout& layout() const { return layout_; }
  uint32_t world_size() const { return world_size_; }
  /// The degree of `d` (layout().tp, .pp or .dp).
  uint32_t size(Dim d) const { return size_[index_of(d)]; }
  /// Distance in ranks between neighbours along `d` (1 for the fastest-varying dimension).
  uint32_t stride(Dim d) const { return stride_[index_of(d)]; }
  /// The dimensions, fastest-varying first (parsed from layout().order).
  const std::array<Dim, 3>& order() const { return order_; }

  /// `r`'s index along `d`. REQUIRES: r < world_size().
  uint32_t index(Dim d, Rank r) const { return (r / stride(d)) % size(d); }
  /// `r`'s indices along all three dimensions. REQUIRES: r < world_size().
  ParallelCoord coord(Rank r) const { return {index(Dim::kTensor, r), index(Dim::kData, r), index(Dim::kPipeline, r)}; }
  /// The rank with coordinates `c`. REQUIRES: each index below its dimension's size (checked).
  Rank rank_at(const ParallelCoord& c) const;

  /// Number of groups along `d` (world_size() / size(d)).
  uint32_t num_groups(Dim d) const { return world_size_ / size(d); }
  /// The members of `r`'s group along `d` (ranks that differ from r only in their index along d),
  /// ordered by that index; r is at position index(d, r). REQUIRES: r < world_size() (checked).
  std::vector<Rank> group(Dim d, Rank r) const;
  /// All groups along `d`, ordered by their lowest rank; they partition 0..world_size()-1.
  std::vector<std::vector<Rank>> groups(Dim d) const;

 private:
  static size_t index_of(Dim d) { return static_cast<size_t>(d); }

  ParallelLayout layout_;
  uint32_t world_size_ = 1;
  std::array<Dim, 3> order_{Dim::kTensor, Dim::kData, Dim::kPipeline};
  std::array<uint32_t, 3> size_{1, 1, 1};    // indexed by Dim
  std::array<uint32_t, 3> stride_{1, 1, 1};  // indexed by Dim
};

/// True when every rank of `group` lives on the same node (rank r on node r / gpus_per_node);
/// true for an empty group. REQUIRES: gpus_per_node >= 1 (checked).
bool intra_node(const std::vector<Rank>& group, uint32_t gpus_per_node);

/// Members of `group` per node as hierarchical algorithms see it: consecutive members in blocks of
/// G on one node each, every block on its own node; 1 when the group is not laid out that way.
uint32_t group_gpus_per_node(const std::vector<Rank>& group, const Topology& topology);

}  // namespace ccsim::topo
