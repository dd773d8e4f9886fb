#pragma once
/// \file
/// The compressor interface (STYLE rule 2): what the numerics interpreter calls at every kernel
/// op of a schedule, and what the timing interpreter charges on the wire.
///
/// Buffers: a chunk of `spec.count` fp32 elements, which sits at element `spec.offset` of the whole
/// tensor (the offset keys the random numbers, so a chunk encodes the same way wherever it is
/// processed). An encoded chunk is exactly `wire_bytes(spec, hop)` bytes; that number is what the
/// network model sends, never an estimate.
///
/// Mutation: `encode` must not modify `x`; decoders must not modify `in`. Per-rank state such as
/// error-feedback residuals is owned by the compressor instance.
///
/// A round runs in this order (algorithms/numerics.hpp: plan_round, then run_numerics):
///  1. Metadata phase, if plan_format() is not empty: every rank computes plan_local() statistics
///     of its own tensor; they are combined across ranks (sums in rank order, maxima, bitwise ORs)
///     and plan_commit() fixes the round's parameters, identical on every rank (DynamiQ super-group
///     means, norms and bit widths; MX and THC global maxima; OmniReduce's index union; EDGC's
///     rank). The phase's bytes, plan_format().wire_bytes() per rank, are an all-reduce of its own.
///  2. prepare() transforms each rank's whole tensor before the collective (subtract a shared
///     mean, rotate, add an error-feedback residual, project onto low-rank factors, which makes the
///     reduced vector shorter: reduced_elements()); finish() undoes it on what the rank ends with.
///  3. The collective's kernels call the coding functions below on chunks. Wire sizes may depend on
///     the committed plan, so a schedule is bound after step 1.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/philox.hpp"
#include "sim/base/status.hpp"
#include "topology/schedule.hpp"

namespace ccsim::algo {

/// A chunk of the tensor being compressed.
struct TensorSpec {
  uint64_t offset = 0;  ///< first element's index in the whole tensor
  uint64_t count = 0;   ///< elements in the chunk
};

/// Where in an aggregation a message sits.
struct HopContext {
  uint32_t summed = 1;  ///< ranks whose contributions the message carries (1 at a leaf)
  uint32_t ranks = 1;   ///< ranks in the collective
};

/// One layer (parameter tensor) of a flattened gradient: `count` elements at `offset`, seen as a
/// row-major rows x cols matrix (rows = the first dimension, cols = the product of the others;
/// a 1-D layer has rows = count, cols = 1).
struct LayerShape {
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t rows = 0;
  uint64_t cols = 1;
};

/// Statistics of a metadata phase (see the file comment), combined element-wise across ranks.
struct PlanStats {
  std::vector<double> sum;     ///< combined by summation, in rank order
  std::vector<float> max;      ///< combined by maximum
  std::vector<uint64_t> bits;  ///< combined by bitwise OR
};

/// Size of a compressor's metadata phase for one tensor.
struct PlanFormat {
  uint64_t sum_entries = 0;  ///< PlanStats::sum entries
  uint64_t max_entries = 0;  ///< PlanStats::max entries
  uint64_t bit_words = 0;    ///< PlanStats::bits words
  uint32_t sum_bytes = 4;    ///< wire bytes of one sum entry (fp32 unless the scheme needs more)
  /// Bytes one rank contributes to the metadata all-reduce (max entries as fp32, 8 per bit word).
  uint64_t wire_bytes() const { return sum_entries * sum_bytes + 4 * max_entries + 8 * bit_words; }
  bool empty() const { return sum_entries == 0 && max_entries == 0 && bit_words == 0; }
};

/// A rank's plan_local() computed a piece of its tensor at a time, for inputs produced piece by
/// piece (algorithms/numerics.hpp: plan_in_pieces): Compressor::plan_pieces().
class PlanPieces {
 public:
  virtual ~PlanPieces() = default;
  /// Entries [offset, offset + x.size()) of the rank's tensor. The pieces come in order and tile
  /// [0, elements); every boundary but the tensor's end is a multiple of plan_piece_alignment().
  virtual void add(std::span<const float> x, uint64_t offset) = 0;
  /// After the last piece: the rank's statistics (`out` sized as plan_format() says, zeroed), bit
  /// for bit those plan_local() computes on the whole tensor; false when this input needs the whole
  /// tensor after all (`out` then unspecified: call plan_local() on it).
  virtual bool finish(PlanStats& out) = 0;
};

/// A value an adaptive scheme fixed in its last plan_commit (logged per round by training runs).
struct PlanDecision {
  std::string quantity;  ///< what was decided ("u", "mu", "k", "rank", "bits", ...)
  double value = 0;
  std::string detail;    ///< the inputs it was decided from, "name=value" pairs separated by spaces
};

/// What a compressor guarantees about repeatability (a scenario requiring more is rejected).
enum class Determinism {
  kNotGuaranteed,  ///< results may differ run to run
  kRunToRun,       ///< identical across runs on the same device type
  kBitwiseCpuGpu,  ///< CPU reference and CUDA kernel produce identical bits
};
std::string_view determinism_name(Determinism d);

/// Copies `from` into `to` unless they are the same buffer. REQUIRES: equal sizes.
void copy_unless_same(std::span<const float> from, std::span<float> to);

/// A compression scheme instance with fixed parameters.
class Compressor {
 public:
  virtual ~Compressor() = default;

  /// Registered name ("bf16", "int8", ...).
  virtual std::string_view name() const = 0;
  /// The parameters it was made with, every declared one present, as compact JSON with sorted keys
  /// (set by CompressorRegistry::create); "{}" for an instance constructed directly.
  const std::string& params() const { return params_; }
  void set_params(std::string params) { params_ = std::move(params); }
  /// Exact size in bytes of an encoded chunk, payload plus metadata.
  virtual uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const = 0;
  /// The part of wire_bytes() that is the entries' codes; the rest is metadata sent with them
  /// (block scales, norms, headers). Default: all of it (formats without in-band metadata).
  virtual uint64_t payload_bytes(const TensorSpec& spec, const HopContext& hop) const { return wire_bytes(spec, hop); }
  /// Encodes x (spec.count elements) into out (wire_bytes(spec, hop) bytes). Randomness, if any,
  /// comes from `key` at element index spec.offset + i.
  virtual void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
                      std::span<uint8_t> out) = 0;
  /// out = decode(in).
  virtual void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop, std::span<float> out) = 0;
  /// acc += decode(in), in fp32.
  virtual void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                                 std::span<float> acc) = 0;
  /// The fused intermediate hop: acc += decode(in); out = encode(acc). `hop_out.summed` is one more
  /// than `hop_in.summed`. Must equal decode_accumulate followed by encode, bit for bit.
  virtual void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                        std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                        std::span<uint8_t> out) = 0;

  // ---- round phases (defaults: none) ----
  /// The metadata phase's size for a tensor of `elements` on `ranks` ranks; empty if the scheme has none.
  virtual PlanFormat plan_format(uint64_t /*elements*/, uint32_t /*ranks*/) const { return {}; }
  /// Rank `rank`'s statistics of its whole tensor `x`, sized as plan_format() says.
  virtual void plan_local(std::span<const float> /*x*/, uint32_t /*rank*/, const kern::RngKey& /*key*/,
                          PlanStats& /*out*/) const {}
  /// plan_local() of rank `rank`, key `key`, on a tensor of `elements` given a piece at a time;
  /// null (the default) where the scheme computes it on the whole tensor only.
  virtual std::unique_ptr<PlanPieces> plan_pieces(uint64_t /*elements*/, uint32_t /*rank*/,
                                                  const kern::RngKey& /*key*/) const {
    return nullptr;
  }
  /// What plan_pieces()' inner piece boundaries must be multiples of, for a tensor of `elements`.
  virtual uint64_t plan_piece_alignment(uint64_t /*elements*/) const { return 1; }
  /// Whether plan_pieces()' finish() may decline on some inputs (their plan then needs the whole
  /// tensor after all); false (the default): it never does.
  virtual bool plan_pieces_may_decline() const { return false; }
  /// What plan_local() computes, named for sharing its statistics: compressors with equal,
  /// non-empty identities have equal plan_format()s and compute equal statistics from equal inputs
  /// and keys, so a plan of several schemes on one draw may compute them once (PlanStatsCache,
  /// algorithms/numerics.hpp). Empty (the default): never shared.
  virtual std::string plan_local_identity() const { return {}; }
  /// Fixes the round's parameters from the statistics combined over `ranks` ranks.
  virtual Status plan_commit(const PlanStats& /*combined*/, uint64_t /*elements*/, uint32_t /*ranks*/) {
    return ok_status();
  }
  /// What the last plan_commit decided: the values of the round just planned, as the scheme uses
  /// them (EDGC's rank, fixed at the previous round's end, is reported even in rounds without a
  /// metadata phase). Empty for schemes without a controller, and before a scheme's first plan.
  virtual std::vector<PlanDecision> plan_decisions() const { return {}; }
  /// Receives the tensor's layer layout (shapes tile [0, elements) in offset order) before a
  /// round's plan; schemes that work on matrices (PowerSGD, EDGC) need it. Default: ignored, and a
  /// scheme that needs a layout treats a tensor without one as a single row vector.
  virtual void set_layout(std::span<const LayerShape> /*layers*/) {}
  /// Elements of the vector the collective reduces for a tensor of `elements` (default: the tensor
  /// itself). Low-rank schemes reduce their factors instead; the schedule is built on this count.
  virtual uint64_t reduced_elements(uint64_t elements) const { return elements; }
  /// Turns rank `rank`'s whole tensor `x` into what it contributes to the collective, `out`
  /// (reduced_elements(x.size()) values): subtract a shared mean, rotate, add an error-feedback
  /// residual, project onto factors. When the sizes are equal, `out` may be `x` itself (the
  /// numerics interpreter transforms in place), so implementations must allow that aliasing.
  /// Default: copy.
  virtual void prepare(std::span<const float> x, std::span<float> out, uint32_t /*rank*/, uint32_t /*ranks*/,
                       const kern::RngKey& /*key*/) {
    copy_unless_same(x, out);
  }
  /// Undoes prepare() on what rank `rank` ends with: `reduced` (reduced_elements() values) back to
  /// the tensor's `out`; the same aliasing rule holds. Default: copy.
  virtual void finish(std::span<const float> reduced, std::span<float> out, uint32_t /*rank*/, uint32_t /*ranks*/) {
    copy_unless_same(reduced, out);
  }

  /// Bytes of memory traffic of one kernel op on a chunk (what a roofline cost model charges).
  /// Default: fp32 reads/writes of the chunk plus the encoded bytes read/written. Round ops
  /// (topo::is_round_op: plan_local, prepare, finish) see the rank's whole tensor as `spec` and
  /// hop {1, ranks}, after the round's plan; 0 (the default) says the scheme does no work there (a
  /// copy the interpreter elides, or no metadata phase), and the timing interpreter runs no op.
  virtual uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const;
  /// Preferred chunk alignment in elements (a block size); schedules align chunk boundaries to it.
  virtual uint64_t alignment() const { return 1; }
  /// Shard boundaries (parts + 1 entries, topo::CollectiveOptions::cuts) for an n-way split of a
  /// reduced vector of `elements`, after the round's plan; empty (the default): an even split by
  /// elements. Schemes whose wire bytes vary along the tensor (DynamiQ's width-sorted super-groups,
  /// OmniReduce's sparse union) return byte_balanced_cuts(), so that every shard of a ring or
  /// butterfly carries the same bytes, as a collective over the encoded stream would split it.
  virtual std::vector<uint64_t> shard_cuts(uint64_t /*elements*/, uint32_t /*parts*/) const { return {}; }
  /// Whether decode(encode(x)) is an unbiased estimate of x.
  virtual bool unbiased() const = 0;
  virtual Determinism determinism() const = 0;
  /// Whether this instance can compress `spec` (default: always).
  virtual Status can_implement(const TensorSpec& /*spec*/) const { return ok_status(); }
  /// Whether a round over `ranks` ranks of a tensor of `elements` entries can be planned and
  /// reduced, whatever the data (e.g. THC's aggregation fields overflow on too many ranks): an input
  /// error whose pointer names the parameter to change, relative to the scheme's params (default: OK).
  virtual Status can_reduce(uint64_t /*elements*/, uint32_t /*ranks*/) const { return ok_status(); }
  /// Whether a round's plan may change reduced_elements() (OmniReduce's compacted union, EDGC's
  /// controlled rank), so that only an all-reduce can run the scheme whatever the data (default: no).
  virtual bool plan_changes_length() const { return false; }
  /// Whether prepare() mixes entries across the tensor (THC's rotation of the whole padded vector),
  /// so that an entry or a shard of the reduced vector means nothing without all the others: only an
  /// all-reduce, whose finish() sees the whole reduced vector, can run the scheme (default: no).
  virtual bool prepare_mixes_entries() const { return false; }
  /// Whether the coding functions are local to pieces of a chunk: for a chunk and a piece [a, b)
  /// of it whose ends are the chunk's or multiples of alignment(), each coding function on
  /// TensorSpec{a, b - a} (with the same hops and key) does to entries [a, b) exactly what it does
  /// to them on the whole chunk, and the pieces' wire_bytes() add up to the chunk's. A collective
  /// whose chunks never mix may then run a piece of the tensor at a time (run_in_pieces,
  /// algorithms/numerics.hpp).
  /// Default: no.
  virtual bool codes_in_pieces() const { return false; }

 private:
  std::string params_ = "{}";
};

/// Boundaries 0 = c_0 <= c_1 <= ... <= c_parts = elements, inner ones multiples of
/// compressor.alignment(), with c_k the smallest such boundary whose prefix [0, c_k) encodes (leaf
/// message, wire_bytes) to at least k/parts of the whole vector's bytes: the byte-balanced split.
/// Where only the whole vector reaches that share and its last block is partial, c_k is the last
/// whole block's end (inner boundaries never leave the alignment, whatever the data).
/// Uses O(parts · log(elements / alignment)) wire_bytes() calls; the prefix sizes must be
/// non-decreasing in the boundary (true of every scheme whose chunk size is a sum over blocks).
std::vector<uint64_t> byte_balanced_cuts(const Compressor& compressor, uint64_t elements, uint32_t parts,
                                         const HopContext& hop);

/// Base for schemes whose fused hop is, by definition, decode_accumulate followed by encode (the
/// CPU references of simple formats; their CUDA versions fuse the two passes).
class UnfusedHopCompressor : public Compressor {
 public:
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) final {
    decode_accumulate(in, spec, hop_in, acc);
    encode(acc, spec, hop_out, key, out);
  }
};

}  // namespace ccsim::algo
