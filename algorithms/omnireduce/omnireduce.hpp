#pragma once
/// \file
/// omnireduce: OmniReduce's chunked top-k sparsification (Fei et al. 2021) as adapted to multi-hop
/// all-reduce in DynamiQ (Appendix C, "Adaptation of Omnireduce to ring all-reduce").
///
/// The tensor is cut into chunks of `chunk` elements (the last one may be short). Every round:
///  1. Metadata phase: each rank picks its local top-k chunks by L2 norm and contributes a bitmap of
///     them; the bitmaps are OR-combined into the union U of K'_t = |U| chunks (the "global top-K").
///  2. prepare() keeps only the rank's union chunks (see the layouts below); with send=own, only the
///     rank's own top-k chunks, sending zeros in the union chunks other ranks chose.
///  3. The collective sends only the elements of U, in BF16; every hop decodes to fp32, adds in fp32
///     and re-encodes. The result is the BF16-hop sum over U and 0 elsewhere.
///
/// Layouts (`layout`):
///  - sparse: the collective runs on the whole tensor. prepare() zeroes the rank's
///    elements outside U; a message carries only the union elements of its element range, and
///    elements outside U decode to zero. Any collective works, but each shard holds the union
///    elements its range happens to contain, and union chunks cluster where gradients are large,
///    so the fullest shard paces a ring.
///  - compact (default, as a real implementation sends the union as one buffer): prepare() gathers
///    the union chunks, in order, into one dense vector of |U| elements
///    (reduced_elements()), which the collective splits evenly; finish() scatters it back, zeros
///    outside U: a gather before and a scatter after an all-reduce of the union. All-reduce only
///    (the runner rejects other operations for schemes that change the reduced size).
///
/// Local selection: chunk c's key is its squared L2 norm, summed in double precision in element
/// order (exact squares; a chunk containing a NaN ranks above every other); the k chunks with the
/// largest keys are chosen, a tie going to the lower chunk index.
///
/// Adapting k (DynamiQ eq. 1): with the target K = round(n_chunks * bits / 16) (so K / n_chunks =
/// bits / 16, the compression ratio of `bits` bits per element against 16-bit BF16), after round t
///   k_{t+1} = gamma * k_t + (1 - gamma) * (K / K'_t) * k_t,   gamma = `momentum`.
/// k_t is kept as a real number; a round uses k = round(k_t) limited to [1, n_chunks]. The paper
/// leaves k_0 open; we start from k_0 = K (every rank picks its own top-K), because local top-k
/// sets of real gradients nearly nest. On the shipped dump traces/data/gpt-bpe (steps 50 and 200;
/// chunk 256, b = 8, so K = 716 of 1431 chunks) the union of the local top-K sets is 1.15-1.25 K
/// on 4 ranks and 1.18-1.27 K on 8, and eq. 1 brings it to 1.01-1.02 K by round 16. On an
/// earlier character-level dump (115 k parameters, steps 0, 50 and 200; K = 225 of 450) it was
/// 1.05-1.20 K on 2 ranks and 1.11-1.32 K on 8, within 12% of K by round 7; there, starting from
/// K / ranks (which guarantees K'_0 <= K) gives unions of 0.15-0.32 K on 4 and 8 ranks, and the
/// k for which independent uniformly random k-sets would have a union of K, n_chunks (1 - (1 -
/// K / n_chunks)^(1 / ranks)), 0.20-0.38 K, still 7-16% short of K at round 7: a simulated first
/// round would charge a third of the budget or less. The state belongs to the instance and restarts at k_0 when the tensor's chunk count
/// changes.
///
/// What a rank sends in the union (`send`). App. C says both that "each worker selects and
/// aggregates its local top-k gradient chunks" and that the workers "transmit the union":
///  - union (default): every rank sends its own values in every union chunk, so the union is summed
///    exactly (up to BF16) and only the chunks no rank chose are lost;
///  - own: a rank sends its values only in its own top-k chunks and zeros in the union chunks the
///    other ranks chose (OmniReduce's local top-k sparsification, the union fixing only the wire
///    layout), so a rank's entries outside its own top-k are lost too.
/// The wire (the union, every rank sending the same |U| entries) is the same for both. plan_local
/// keeps each rank's own bitmap for prepare() of the same round (own only).
///
/// BF16 encoding: round to nearest even (kernels/quant/bf16_quant.hpp), saturating: a finite value that
/// would round to +-inf (|x| >= 2^128 - 2^119) is sent as +-0x7F7F (the largest finite BF16,
/// 3.39e38), so finite inputs never decode to inf. NaN and inf pass through.
///
/// Wire, main collective: BF16 values (little-endian uint16), no indices (every rank knows U).
///   sparse: those of the spec's elements that lie in union chunks, in increasing element order:
///     2 * |{i in [offset, offset + count) : chunk i / chunk in U}| bytes;
///   compact: those of the spec's elements of the dense union vector: 2 * count bytes.
/// Wire, metadata phase: the chunk bitmap, ceil(n_chunks / 64) 64-bit words (bit c % 64 of word
///   c / 64 set iff chunk c is chosen), i.e. 8 bytes per 64 chunks per rank.
///
/// Parameters: chunk (default 256, power of two in [1, 65536]); bits (default 8, in [1, 16]: the
/// target K = round(n_chunks * bits / 16)); momentum (gamma, default 0.8 as the paper, in [0, 1]);
/// layout (sparse | compact, default compact); send (union | own, default union).
///
/// Biased (top-k drops the other chunks). Thread safety: none; one instance serves one collective
/// at a time.

#include <span>
#include <vector>

#include "algorithms/registry.hpp"

namespace ccsim::algo {

/// OmniReduce chunked top-k with an agreed union of chunks and BF16 payload.
class OmniReduceCompressor final : public UnfusedHopCompressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/omnireduce/omnireduce_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  /// REQUIRES: chunk a power of two >= 1, 1 <= bits <= 16, 0 <= momentum <= 1 (the parameter table
  /// enforces these).
  /// `compact`: the compact layout (see the file comment), else sparse. `send_own`: send=own.
  OmniReduceCompressor(uint64_t chunk, uint32_t bits, double momentum, bool compact, bool send_own = false);

  std::string_view name() const override { return "omnireduce"; }
  /// Sparse: 2 bytes per element of `spec` inside the committed union; compact: 2 * spec.count.
  /// REQUIRES: a committed plan covering the spec (can_implement() says so).
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const override;
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  /// out = the BF16 values inside U, 0 outside.
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  /// acc += the BF16 values inside U; elements outside U are left untouched.
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;

  /// One bitmap word per 64 chunks.
  PlanFormat plan_format(uint64_t elements, uint32_t ranks) const override;
  /// Sets the bits of rank `rank`'s local top-k chunks of `x`, k = local_k(chunks_of(x.size())).
  /// send=own: also keeps them as the rank's own bitmap for this round's prepare() (ranks' calls
  /// must not run concurrently).
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key, PlanStats& out) const override;
  /// A piece of whole chunks at a time (the chunks' norms; the top-k once all are known).
  std::unique_ptr<PlanPieces> plan_pieces(uint64_t elements, uint32_t rank, const kern::RngKey& key) const override;
  uint64_t plan_piece_alignment(uint64_t) const override { return chunk_; }
  /// Stores the union U = OR of the bitmaps, K'_t = |U|, and moves k to k_{t+1} (eq. 1).
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override;
  /// "k": the local top-k of the round just planned (committed_k()). Detail: k_t (the real-valued
  /// state it was rounded from), K (target), K' (union_chunks()), n_chunks, gamma, and k_next, the
  /// k_{t+1} of eq. 1 the next round on this many chunks starts from. Empty before a plan.
  std::vector<PlanDecision> plan_decisions() const override;
  /// Compact: |U| elements (union chunks only) once a plan for `elements` is committed, else
  /// `elements`. Sparse: `elements`.
  uint64_t reduced_elements(uint64_t elements) const override;
  /// The compact layout reduces the round's union, whose size the plan decides.
  bool plan_changes_length() const override { return compact_; }
  /// Sparse: out = x inside U, 0 outside (out may alias x). Compact: out = the union chunks of x,
  /// concatenated in order. send=own: as if x were 0 outside the rank's own top-k chunks.
  /// REQUIRES: a committed plan for x.size() elements (send=own: planned with plan_local of this
  /// rank and this x).
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  /// Sparse: copy. Compact: scatters the union chunks back to their places, zeros elsewhere.
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;

  uint64_t alignment() const override { return chunk_; }
  /// Round ops: plan_local reads the tensor (chunk norms) and writes the bitmap; compact, prepare
  /// gathers the union's u entries (reads and writes them) and finish scatters them back (reads u,
  /// writes the tensor, zeros outside the union), nothing when the union is everything; not
  /// compact, prepare zero-fills the chunks outside the union in place and finish is elided.
  /// send=own, prepare: zeros over the entries outside the rank's own k chunks when it works in
  /// place (sparse, or a union of everything), else a gather writing u entries and reading the own
  /// ones. Collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  /// Byte-balanced shards (byte_balanced_cuts): chunk sizes vary with the round's plan.
  std::vector<uint64_t> shard_cuts(uint64_t elements, uint32_t parts) const override {
    return byte_balanced_cuts(*this, elements, parts, {1, parts});
  }
  bool unbiased() const override { return false; }
  /// Run to run: the selection compares double-precision chunk norms summed in element order; a
  /// GPU version would have to keep that order to match bit for bit.
  Determinism determinism() const override { return Determinism::kRunToRun; }
  /// Fails (kInvalidArgument) unless a committed plan covers `spec`.
  Status can_implement(const TensorSpec& spec) const override;

  // ---- state, for reports and tests ----
  /// Chunks of a tensor of `elements`: ceil(elements / chunk).
  uint64_t chunks_of(uint64_t elements) const { return (elements + chunk_ - 1) / chunk_; }
  /// The target K = round(n_chunks * bits / 16).
  uint64_t target_chunks(uint64_t n_chunks) const;
  /// The real-valued k_t the next round on a tensor of `n_chunks` chunks uses: the state left by
  /// the last plan_commit() on that many chunks, else k_0 = K.
  double k_for(uint64_t n_chunks) const {
    return k_set_ && k_chunks_ == n_chunks ? k_ : static_cast<double>(target_chunks(n_chunks));
  }
  /// round(k_for(n_chunks)) limited to [1, n_chunks]: the number of chunks each rank picks.
  uint64_t local_k(uint64_t n_chunks) const;
  /// The local k of the last committed round.
  uint64_t committed_k() const { return committed_k_; }
  /// K'_t of the last committed round.
  uint64_t union_chunks() const { return union_chunks_; }
  /// Bit c % 64 of words[c / 64]: whether chunk c is in a chunk bitmap (the union's or a rank's).
  static bool chunk_bit(const uint64_t* words, uint64_t c) { return ((words[c / 64] >> (c % 64)) & 1u) != 0; }
  /// Whether chunk c is in the committed union.
  bool in_union(uint64_t c) const { return c < n_chunks_ && chunk_bit(union_.data(), c); }
  /// Whether the compact layout is used.
  bool compact() const { return compact_; }
  /// Whether ranks send only their own top-k chunks (send=own).
  bool sends_own() const { return send_own_; }
  /// send=own: rank `rank`'s own top-k bitmap of the committed round (the layout of union_bitmap(),
  /// a subset of it); empty if that rank did not plan the round. For GPU callers.
  std::span<const uint64_t> own_bitmap(uint32_t rank) const;
  /// The committed union's bitmap, ceil(n_chunks / 64) words (bit c % 64 of word c / 64 set iff
  /// chunk c is in U; bits past the last chunk clear). For GPU callers (kernels/cuda/round_cuda.hpp).
  std::span<const uint64_t> union_bitmap() const { return union_; }
  /// The committed union's prefix, n_chunks + 1 entries: entry c counts the union elements in
  /// chunks [0, c) (where the compact layout puts chunk c; the last entry is its length).
  std::span<const uint64_t> union_prefix() const { return prefix_; }
  /// Elements of [spec.offset, spec.offset + spec.count) of the tensor inside the committed union.
  uint64_t union_elements(const TensorSpec& spec) const {
    return union_before(spec.offset + spec.count) - union_before(spec.offset);
  }

 private:
  /// send=own: rank `rank`'s own bitmap of the committed round (checked); send=union: null.
  const uint64_t* own_words(uint32_t rank) const;
  /// Union elements in [0, i). REQUIRES: i <= planned elements.
  uint64_t union_before(uint64_t i) const;
  /// Elements of the vector the collective runs on: the tensor (sparse) or |U| (compact).
  class Pieces;
  // plan_local()'s selection from the chunks' keys (their squared norms, NaN as +inf).
  void select_local(std::span<const double> key, uint32_t rank, PlanStats& out) const;
  uint64_t domain_elements() const;
  void check_spec(const TensorSpec& spec) const;
  /// Calls op(lo, hi, values) for pieces [lo, hi) of `spec` (indices relative to spec.offset), each
  /// inside one chunk (sparse) or any piece (compact): `values` points at their BF16 values in
  /// `in`, or is null outside U.
  template <class Op>
  void for_union_values(std::span<const uint8_t> in, const TensorSpec& spec, Op&& op) const;

  uint64_t chunk_;
  uint32_t bits_;
  double momentum_;
  bool compact_;
  bool send_own_;
  // send=own: each rank's own bitmap from plan_local, and the plan_commit count it was made before.
  mutable std::vector<std::vector<uint64_t>> own_;
  mutable std::vector<uint64_t> own_round_;
  uint64_t commits_ = 0;
  // k_t for the next round and the chunk count it belongs to (set by plan_commit()).
  double k_ = 0;
  uint64_t k_chunks_ = 0;
  bool k_set_ = false;
  // The committed plan.
  uint64_t elements_ = 0;
  uint64_t n_chunks_ = 0;
  std::vector<uint64_t> union_;   ///< bitmap of U, one bit per chunk
  std::vector<uint64_t> prefix_;  ///< prefix_[c]: union elements in chunks [0, c); size n_chunks + 1
  uint64_t union_chunks_ = 0;
  uint64_t committed_k_ = 0;
  double committed_k_real_ = 0;  ///< k_t of the last committed round (before eq. 1 moved it)
};

}  // namespace ccsim::algo
