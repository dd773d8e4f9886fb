#pragma once
/// \file
/// The one lowering of a compressed collective round (shared/DESIGN.md, "One lowering"): a
/// compressor instance on a collective algorithm over a group of `ranks` ranks, for a tensor of
/// `elements` entries per rank, becomes the round's phases, in this order:
///
///   plan_local ops -> metadata all-reduce -> prepare ops -> the collective -> finish ops
///
/// (algorithms/compressor.hpp states what each step does). The metadata phases exist when the
/// scheme has a metadata phase (plan_format() not empty): a ring all-reduce of its plan bytes per
/// rank as fp32 words (at least one word per rank), bound to fp32. Round ops (one op per rank on its
/// whole tensor) exist only where the scheme does round work after the round's plan
/// (round_ops()). The collective reduces reduced_elements() entries, split into byte-balanced
/// shards where the scheme asks for it (set_shard_options()).
///
/// Every run path uses it: a single collective (timing of every parallelism group, numerics of
/// one), data-parallel and sharded training (one per bucket codec), 3D-parallel training (one per
/// stage and round) and `ccsim vnmse` (numerics, round after round). The timing side turns the
/// phases into flows and kernel ops (sim/), the numerics side runs run() on real buffers; both read
/// the same schedule, bound to the same compressor.
///
/// Input errors are found by check(), before any data exists; what a round's plan then decides
/// (low-rank factors, a compacted union, byte-balanced cuts) cannot make the collective fail for an
/// input that passed it, so fix() reports a failure as an internal error (a validation gap).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "algorithms/compressor.hpp"
#include "algorithms/numerics.hpp"
#include "sim/base/status.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/schedule.hpp"

namespace ccsim::algo {

using topo::PhaseKind;

/// What run() did: the numerics statistics and the schedule it ran (for operation_errors()).
struct NumericsRound {
  NumericsStats stats;
  topo::Schedule schedule;
};

/// A compressor on a collective algorithm over a group, for one tensor size.
class CompressedCollective {
 public:
  /// Whatever the data, whether `comp` can run on `collective` over `ranks` ranks for a tensor of
  /// `elements` entries with `base` options (segments, root, gpus_per_node): check_scheme() and
  /// check_collective(). Input errors; messages name the scheme and the collective.
  static Status check(const Compressor& comp, const topo::CollectiveInfo& collective, uint32_t ranks,
                      uint64_t elements, const topo::CollectiveOptions& base);
  /// The scheme's part: a scheme whose reduced vector is not the tensor, or may not be after a plan
  /// (low-rank factors, a compacted union, a padded rotation), runs only on an all-reduce; and the
  /// scheme's own limits on the group (Compressor::can_reduce, pointer "/params/..." then).
  static Status check_scheme(const Compressor& comp, topo::CollectiveOp op, uint32_t ranks, uint64_t elements);
  /// The collective's part: the algorithm can run the tensor under the scheme's alignment (e.g.
  /// all-to-all blocks must start on its blocks).
  static Status check_collective(const Compressor& comp, const topo::CollectiveInfo& collective, uint32_t ranks,
                                 uint64_t elements, const topo::CollectiveOptions& base);

  /// REQUIRES: check() is OK for these arguments. `comp` and `collective` outlive the object.
  CompressedCollective(Compressor& comp, const topo::CollectiveInfo& collective, uint32_t ranks, uint64_t elements,
                       topo::CollectiveOptions base);

  Compressor& compressor() const { return *comp_; }
  const topo::CollectiveInfo& collective() const { return *collective_; }
  uint32_t ranks() const { return ranks_; }
  uint64_t elements() const { return elements_; }
  /// Bytes each rank contributes to the metadata all-reduce of the round (0: the scheme has no
  /// metadata phase): what the last plan() exchanged, or before any, what one would exchange now.
  uint64_t plan_bytes() const { return plan_bytes_; }

  /// Step 1 on data: the scheme's metadata phase over every rank's tensor (plan_round), then fix().
  /// Without a metadata phase only fix(). A cache shares statistics with other schemes' plans on
  /// the same inputs (plan_round). REQUIRES: inputs.size() == ranks(), each of elements().
  Result<PlanReport> plan(std::span<const std::span<const float>> inputs, const NumericsOptions& options,
                          PlanStatsCache* cache = nullptr);
  /// Step 1 from statistics added one rank at a time (PlanAccumulator over ranks() ranks and
  /// elements() entries, every rank added), then fix(): the same plan as plan() on the same data.
  Result<PlanReport> commit_plan(PlanAccumulator& accumulated);
  /// Fixes the round from the compressor's current state (after its plan, if it has one): the
  /// reduced length, the shard cuts, the encoded tensor's bytes. An internal error if the collective
  /// cannot run them (check() should have refused the input).
  Status fix();

  /// After fix(): the entries the collective reduces, its options, one rank's reduced vector
  /// encoded once (leaf messages, shard by shard).
  uint64_t reduced() const { return reduced_; }
  const topo::CollectiveOptions& options() const { return options_; }
  uint64_t tensor_wire_bytes() const { return tensor_.tensor(); }
  /// After fix(): one rank's bytes of the round in parts (payload, metadata, metadata phase).
  RoundBytes round_bytes() const { return {tensor_.payload, tensor_.metadata, plan_bytes_}; }
  /// The round ops the scheme runs now (plan_local, prepare, finish: those with memory traffic).
  std::vector<topo::KernelKind> round_ops() const;
  /// The round's timing phases, in order (file comment), bound to the compressor (the metadata
  /// all-reduce to fp32). REQUIRES: fix(); the compressor outlives the phases.
  std::vector<topo::SchedulePhase> phases() const;
  /// Numerics: the collective's schedule bound to the compressor and run on `buffers` (one per rank,
  /// each elements() entries, transformed in place into what the rank ends with), between prepare()
  /// and finish() (run_numerics). REQUIRES: fix().
  Result<NumericsRound> run(std::span<const std::span<float>> buffers, const NumericsOptions& options) const;
  /// The collective's schedule, materialized and bound to the compressor: what run() runs, and
  /// what run_in_pieces() runs where runs_in_pieces(). REQUIRES: fix().
  topo::Schedule bound_schedule() const;

 private:
  Compressor* comp_;
  const topo::CollectiveInfo* collective_;
  uint32_t ranks_;
  uint64_t elements_;
  topo::CollectiveOptions base_;
  uint64_t plan_bytes_ = 0;
  uint64_t reduced_ = 0;
  topo::CollectiveOptions options_;
  RoundBytes tensor_;  // the reduced vector encoded once (fix())
};

}  // namespace ccsim::algo
