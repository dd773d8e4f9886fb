#pragma once
/// \file
/// The numerics interpreter: executes a collective schedule on real per-rank fp32 buffers, running
/// the compressor at every kernel op, and the error metrics computed from what ranks end with.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "algorithms/compressor.hpp"
#include "sim/base/status.hpp"
#include "topology/collectives/collectives.hpp"
#include "topology/schedule.hpp"

namespace ccsim::algo {

/// Fills every op's `bytes`: transfers get the compressor's exact wire size of their message,
/// kernels their memory traffic. Both interpreters read these numbers.
void bind_schedule(topo::Schedule& schedule, const Compressor& compressor);
/// Binds only the ops [first, end) of a schedule window (the streaming timing interpreter's binder).
void bind_ops(topo::Schedule& schedule, const Compressor& compressor, topo::OpId first, topo::OpId end);
/// The round ops (plan_local, prepare, finish, in that order) `compressor` runs on a rank's tensor of
/// `elements` entries on `ranks` ranks, after the round's plan: those whose memory_bytes() is not 0.
std::vector<topo::KernelKind> round_ops(const Compressor& compressor, uint64_t elements, uint32_t ranks);

/// Identifies the random streams of one numerics run.
struct NumericsOptions {
  uint64_t seed = 0;
  uint32_t round = 0;
  /// Also measure what each hop's encoding loses (NumericsStats::hop_errors); costs one extra
  /// decode per encoded message.
  bool hop_errors = false;
};

/// Random streams of the round phases (kernel ops use their op id modulo kPrepareStream, below both).
inline constexpr uint32_t kPlanStream = 0xFFFFFF;
inline constexpr uint32_t kPrepareStream = 0xFFFFFE;

/// What a round's metadata phase did.
struct PlanReport {
  bool ran = false;                 ///< false when the compressor has no metadata phase
  uint64_t wire_bytes_per_rank = 0;  ///< PlanFormat::wire_bytes(): what each rank contributes
};

/// Peak memory, in bytes, of one round's numerics on `ranks` ranks of `elements` entries each as a
/// collective run holds it: every rank's input kept for the errors and the buffer the round runs in
/// (2 · ranks · elements fp32), the scheme's own buffers where it reduces another length (THC's
/// padded rotation, low-rank factors), the exact result (elements fp32), and 32 MiB for the
/// schedule, messages and the process. Measured peak resident sizes (a 64 MB tensor per rank on 4
/// and 16 ranks; fp32, bf16, int8, qsgd, mxfp8, dynamiq, thc) are 0.88 to 1.00 times this; OmniReduce,
/// whose compacted union is known only after its plan, up to 1.22 times.
double numerics_peak_bytes(const Compressor& compressor, uint64_t elements, uint32_t ranks);

/// Step 1 of a round one rank at a time, for tensors too large to hold every rank's at once: add()
/// each rank's tensor in rank order (each plan_local() is that rank's alone), then commit(). The
/// same arithmetic as plan_round, so the same plan, bit for bit.
class PlanAccumulator {
 public:
  /// REQUIRES: the compressor outlives the accumulator.
  PlanAccumulator(Compressor& compressor, uint64_t elements, uint32_t ranks, const NumericsOptions& options);
  /// Rank `next_rank()`'s statistics. REQUIRES: x.size() == elements; fewer than `ranks` added.
  void add(std::span<const float> x);
  /// Rank `next_rank()`'s statistics as its plan_local() computed them (sized as plan_format() says;
  /// anything for a compressor without a metadata phase). REQUIRES: fewer than `ranks` added.
  void add_stats(PlanStats local);
  uint32_t next_rank() const { return added_; }
  /// Every rank's statistics as `other` combined them: for compressors of one plan_local_identity()
  /// (the same format). REQUIRES: none added here; all of other's ranks added; the same elements,
  /// ranks and plan format.
  void adopt(const PlanAccumulator& other);
  /// Combines what was added and fixes the compressor's plan (plan_commit).
  /// REQUIRES: all `ranks` added.
  Result<PlanReport> commit();
  /// The statistics combined so far (all of them once every rank is added).
  const PlanStats& combined() const { return combined_; }

 private:
  Compressor* comp_;
  uint64_t elements_;
  uint32_t ranks_;
  NumericsOptions options_;
  PlanFormat format_;
  PlanStats combined_;
  uint32_t added_ = 0;
};

/// Writes entries [offset, offset + views[r].size()) of every rank r's input into views[r].
using PieceSource = std::function<void(uint64_t offset, std::span<const std::span<float>> views)>;

/// The largest piece plan_in_pieces() holds of a rank's input (2^26 entries): compressors whose
/// alignments need more are planned on whole tensors.
inline constexpr uint64_t kMaxPlanPiece = uint64_t{1} << 26;

/// Step 1 of a round for each of `compressors` on inputs that `source` writes a piece at a time, so
/// that one piece of every rank's input is held instead of whole tensors: pieces of about
/// `piece_elements` entries whose boundaries are multiples of `source_alignment` and of every
/// compressor's plan_piece_alignment(), each fed to every rank's PlanPieces; the statistics of one
/// plan_local_identity() computed once, as plan_round() with a cache does. Returns, per compressor,
/// its accumulator with every rank added, whose commit() makes the plan plan_round() makes, bit for
/// bit; or null where the compressor needs whole tensors (plan_pieces() is null, its finish()
/// declined, or the alignments' least common multiple exceeds kMaxPlanPiece): plan those with
/// plan_round(). REQUIRES: the compressors outlive the accumulators.
std::vector<std::unique_ptr<PlanAccumulator>> plan_in_pieces(std::span<Compressor* const> compressors,
                                                             uint64_t elements, uint32_t ranks,
                                                             const NumericsOptions& options, const PieceSource& source,
                                                             uint64_t source_alignment, uint64_t piece_elements);

/// The piece plan_in_pieces() holds of each rank's input for `compressors` on a tensor of
/// `elements` entries: at most `elements`; 0 when none of them plans in pieces (plan_pieces() is
/// null for rank 0) or their alignments' least common multiple exceeds kMaxPlanPiece. A compressor
/// whose finish() may decline (plan_pieces_may_decline()) counts, though it may need its whole
/// tensor after all.
uint64_t plan_piece_length(std::span<const Compressor* const> compressors, uint64_t elements,
                           uint64_t source_alignment, uint64_t piece_elements);

/// Combined plan_local() statistics of one set of inputs, by the compressor's
/// plan_local_identity(), the tensor's size, the rank count and the round's key: a plan of several
/// schemes on one draw computes each identity's statistics once. It knows nothing of the inputs'
/// values: whoever passes it to plan_round() keeps it to plans of the same inputs.
class PlanStatsCache {
 public:
  const PlanStats* find(const std::string& identity, uint64_t elements, uint32_t ranks,
                        const NumericsOptions& options) const;
  void store(const std::string& identity, uint64_t elements, uint32_t ranks, const NumericsOptions& options,
             const PlanStats& combined);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string identity;
    uint64_t elements;
    uint32_t ranks;
    uint64_t seed;
    uint32_t round;
    PlanStats combined;
  };
  std::vector<Entry> entries_;
};

/// Step 1 of a round (algorithms/compressor.hpp): every rank's plan_local() on its input (key
/// {seed, round, rank, kPlanStream}), combined in rank order, then plan_commit(). Call it before
/// binding a schedule, since wire sizes may depend on the plan. With a cache, statistics another
/// compressor of the same plan_local_identity() computed from the same inputs are reused.
/// REQUIRES: inputs.size() >= 1, all of equal size; a cache only ever given these inputs.
Result<PlanReport> plan_round(Compressor& compressor, std::span<const std::span<const float>> inputs,
                              const NumericsOptions& options, PlanStatsCache* cache = nullptr);

/// Sets options.align to the compressor's alignment and, for an operation with an n-way shard split
/// (all-reduce, reduce-scatter, all-gather), options.cuts to its shard_cuts() of the `reduced`
/// vector (call after the round's plan: the cuts may depend on it).
void set_shard_options(const Compressor& compressor, topo::CollectiveOp op, uint64_t reduced, uint32_t ranks,
                       topo::CollectiveOptions& options);

/// One rank's bytes in a round, the parts of "bits per entry" wherever ccsim reports it: the
/// entries' codes and the metadata sent with them (one copy of the tensor encoded, leaf messages),
/// and the rank's share of the metadata phase.
struct RoundBytes {
  uint64_t payload = 0;   ///< the entries' codes (Compressor::payload_bytes)
  uint64_t metadata = 0;  ///< scales, norms, headers sent with the codes
  uint64_t plan = 0;      ///< the metadata phase (PlanFormat::wire_bytes), 0 where the scheme has none
  uint64_t tensor() const { return payload + metadata; }
  uint64_t total() const { return payload + metadata + plan; }
  RoundBytes& operator+=(const RoundBytes& o) {
    payload += o.payload;
    metadata += o.metadata;
    plan += o.plan;
    return *this;
  }
  /// 8 · bytes / entries, for each part and the total.
  static double bits(uint64_t bytes, uint64_t entries) {
    return entries == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(entries);
  }
};

/// One rank's whole `reduced` vector encoded once, shard by shard as `options` splits it (leaf
/// messages): its payload and metadata parts (`plan` is 0); tensor() is what one copy of the tensor
/// costs on the wire.
RoundBytes tensor_bytes(const Compressor& compressor, uint64_t reduced, uint32_t ranks,
                        const topo::CollectiveOptions& options);

/// Error of one rank's result against the exact aggregate.
struct ErrorStats {
  double sq_error = 0;  ///< ‖X − X̂‖²
  double sq_norm = 0;   ///< ‖X‖²
};

/// What a numerics run observed.
struct NumericsStats {
  uint64_t wire_bytes = 0;      ///< sum of encoded message bytes over all transfers
  uint64_t kernels_run = 0;
  uint64_t peak_message_bytes = 0;  ///< largest total of encoded messages alive at once
  /// With NumericsOptions::hop_errors: entry k sums, over every message carrying k ranks'
  /// contributions (hop depth k, 1 = a leaf), ‖v − decode(encode(v))‖² and ‖v‖² of the encoded
  /// values v, in the collective's domain (after prepare()). Size ranks + 1; entry 0 is unused.
  std::vector<ErrorStats> hop_errors;
};

/// Runs `schedule` in op order, between the compressor's prepare() (key {seed, round, r,
/// kPrepareStream}) and finish() on every rank. On entry `buffers[r]` holds rank r's input tensor;
/// on return it holds what rank r ends with. The schedule reduces
/// compressor.reduced_elements(tensor) values: in place when that is the tensor's size, else on
/// buffers of its own between prepare() and finish(). Kernel op k on rank r
/// draws randomness from RngKey{seed, round, r, k mod kPrepareStream}.
/// REQUIRES: buffers.size() == schedule.num_ranks(), all of one size; schedule built on
/// reduced_elements() of that size and bound to `compressor`.
Result<NumericsStats> run_numerics(const topo::Schedule& schedule, Compressor& compressor,
                                   std::span<const std::span<float>> buffers, const NumericsOptions& options);

/// Whether run_in_pieces() can run `schedule` (bound to `compressor`): an operation whose chunks
/// never mix (every one but the all-to-all) on the tensor itself (no prepare() or finish() work,
/// reduced_elements() the tensor's size), by a scheme whose coding is local to pieces
/// (Compressor::codes_in_pieces()), without per-hop errors, every chunk and shard starting on its
/// alignment() (or at the tensor's end), which with the error sums' pieces needs a piece of at most
/// kMaxPlanPiece entries.
bool runs_in_pieces(const topo::Schedule& schedule, const Compressor& compressor, const NumericsOptions& options);

/// Whether run_in_pieces() can run the two schedules together (over the same pieces): one
/// operation, rank count, tensor size and root, and for a reduce-scatter or an all-gather the same
/// shards.
bool pieces_together(const topo::Schedule& a, const topo::Schedule& b);

/// One collective for run_in_pieces(): a materialized schedule bound to its compressor, whose
/// round's plan (if any) is fixed.
struct PieceRound {
  const topo::Schedule* schedule = nullptr;
  Compressor* compressor = nullptr;
};

/// What run_numerics() then operation_errors() give for one PieceRound: the per-rank errors, bit for
/// bit, and the statistics' wire bytes and kernel count (no per-hop errors, no message peak).
struct PieceRoundResult {
  std::vector<ErrorStats> errors;
  NumericsStats stats;
};

/// The collectives `rounds` (each runs_in_pieces(), all of one operation, rank count, tensor size
/// and shards) run on inputs that `source` writes a piece at a time (at any offset), so that a
/// piece of every rank's input and working buffer is held instead of whole tensors: each piece
/// drawn once for every round (and its exact sum made once), every round's ops run on their chunks'
/// parts in it, its errors summed as operation_errors() sums them. Pieces of about
/// `piece_elements` entries (multiples of every compressor's alignment() and of the error sums'
/// pieces) start at the tensor's start, or, for a reduce-scatter or an all-gather, at each shard's,
/// where their error sums start; threads take whole pieces. The results equal run_numerics() then
/// operation_errors() on whole tensors, bit for bit (and each transfer's pieces are checked to
/// carry its bound bytes).
Result<std::vector<PieceRoundResult>> run_in_pieces(std::span<const PieceRound> rounds, const PieceSource& source,
                                                    uint64_t piece_elements, const NumericsOptions& options);

ErrorStats error_stats(std::span<const float> exact, std::span<const float> got);
/// Per-rank error of what ranks ended with (`outputs`) against what the schedule's operation
/// defines from the `inputs`: allreduce, the exact sum everywhere; reduce_scatter, the sum of rank
/// r's shard; allgather, every owner's shard; broadcast, the root's tensor; alltoall, rank d's
/// block s = rank s's block d. Sums are taken in double precision.
std::vector<ErrorStats> operation_errors(const topo::Schedule& schedule, std::span<const std::span<const float>> inputs,
                                         std::span<const std::span<const float>> outputs);
/// Per-layer error of an allreduce: entry l sums, over ranks, the error of layer l
/// ([offset, offset + count) of `layers`) against the exact sum of the inputs.
std::vector<ErrorStats> allreduce_layer_errors(std::span<const std::span<const float>> inputs,
                                               std::span<const std::span<const float>> outputs,
                                               std::span<const LayerShape> layers);
/// OK unless the ranks' `inputs` sum past the fp32 range at some index (summed in double): then an
/// input error naming the first such index and its sum.
Status check_sum_in_range(std::span<const std::span<const float>> inputs);
/// OK when every rank's error is finite; otherwise the input error that explains it (no metric is
/// left silently inf or NaN): the first index where the ranks' inputs sum past the fp32 range, or,
/// when the sum fits, that `scheme`'s result overflowed on inputs near that range (their largest |x|).
Status check_errors_finite(std::span<const std::span<const float>> inputs, std::span<const ErrorStats> errors,
                           std::string_view scheme);
/// check_errors_finite() on inputs of `elements` entries per rank that `source` writes a piece of
/// about `piece_elements` at a time (multiples of `source_alignment`).
Status check_errors_finite(const PieceSource& source, uint64_t elements, uint32_t ranks, uint64_t source_alignment,
                           uint64_t piece_elements, std::span<const ErrorStats> errors, std::string_view scheme);
/// One rank's ‖X − X̂‖² / ‖X‖²: 0 when the rank is exact (even if X = 0), +inf when X = 0 but it is not.
double relative_error(const ErrorStats& e);
/// vNMSE = mean over ranks of ‖X − X̂_r‖² / ‖X‖². Zero when every rank is exact (even if X = 0);
/// +inf when X = 0 but some rank is not.
double vnmse(std::span<const ErrorStats> per_rank);

}  // namespace ccsim::algo
