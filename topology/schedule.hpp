#pragma once
/// \file
/// A collective lowered to data: a DAG of typed operations that both interpreters execute
/// (shared/DESIGN.md, "one schedule, two interpreters").
///
/// * A kernel op runs on one rank and works on one chunk of that rank's buffer. Encoding kernels
///   (`kEncode`, `kDecodeAccumulateEncode`) produce a *message*, identified by the producing op's
///   id; decoding kernels consume the message named in `message`.
/// * A transfer op moves a message from `rank` to `peer`. A message is immutable once produced,
///   so it may be forwarded several times (ring all-gather) without re-encoding.
/// * `summed` counts the ranks whose contributions a message carries, which is what a compressor's
///   wire format may depend on (e.g. THC's integer fields widen with it).
/// Ops are stored in a topological order: every dependency of op i has an id smaller than i.
/// The aggregation tree of a chunk is the message chain: follow `message` backwards from any
/// decode to see who added whose partial sum.

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace ccsim::topo {

using OpId = uint32_t;
inline constexpr OpId kNoOp = std::numeric_limits<OpId>::max();

enum class OpKind : uint8_t { kTransfer, kKernel };

/// What a kernel op does to its rank's chunk `acc` (an fp32 buffer).
enum class KernelKind : uint8_t {
  kEncode,                  ///< message = encode(acc)                        (leaf / all-gather source)
  kDecode,                  ///< acc = decode(message)                        (all-gather receive)
  kDecodeAccumulate,        ///< acc += decode(message)                       (last reduce hop)
  kDecodeAccumulateEncode,  ///< acc += decode(message); message' = encode(acc) (fused intermediate hop)
};

std::string_view kernel_kind_name(KernelKind k);

/// A contiguous slice of the tensor, in elements.
struct Chunk {
  uint64_t offset = 0;
  uint64_t count = 0;
};

/// One operation of a schedule.
struct Op {
  OpKind kind = OpKind::kKernel;
  KernelKind kernel = KernelKind::kEncode;  ///< kernels only
  uint32_t rank = 0;        ///< kernel: executing rank; transfer: sender
  uint32_t peer = 0;        ///< transfer: receiver
  uint32_t chunk = 0;       ///< index into Schedule::chunks
  OpId message = kNoOp;     ///< transfer: message carried; decoding kernel: message consumed
  uint32_t summed = 1;      ///< contributions in the message produced (encoders) or carried (transfers)
  uint32_t deps_begin = 0;  ///< dependencies are deps[deps_begin, deps_end)
  uint32_t deps_end = 0;
  uint64_t bytes = 0;       ///< transfer: bytes on the wire; kernel: bytes of memory traffic (set by binding)
};

/// A collective's DAG of ops over `num_ranks` ranks and a tensor of `elements` fp32 elements.
class Schedule {
 public:
  Schedule(std::string name, uint32_t num_ranks, uint64_t elements)
      : name_(std::move(name)), num_ranks_(num_ranks), elements_(elements) {}

  uint32_t add_chunk(uint64_t offset, uint64_t count);
  /// Adds a kernel op; returns its id (which is also the id of the message it produces, if any).
  OpId add_kernel(KernelKind kind, uint32_t rank, uint32_t chunk, OpId message, uint32_t summed,
                  std::initializer_list<OpId> deps);
  /// Adds a transfer of `message` from `src` to `dst`.
  OpId add_transfer(uint32_t src, uint32_t dst, OpId message, std::initializer_list<OpId> deps);

  const std::string& name() const { return name_; }
  uint32_t num_ranks() const { return num_ranks_; }
  uint64_t elements() const { return elements_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<Op>& ops() const { return ops_; }
  std::vector<Op>& mutable_ops() { return ops_; }
  std::span<const OpId> deps(const Op& op) const { return {deps_.data() + op.deps_begin, op.deps_end - op.deps_begin}; }
  const Op& op(OpId id) const { return ops_[id]; }

  /// Whether `k` produces a message.
  static bool produces_message(KernelKind k) { return k == KernelKind::kEncode || k == KernelKind::kDecodeAccumulateEncode; }
  /// Whether `k` consumes a message.
  static bool consumes_message(KernelKind k) { return k != KernelKind::kEncode; }

  /// Total bytes over all transfers (valid after binding).
  uint64_t wire_bytes() const;
  /// Counts of transfers and kernels.
  uint64_t num_transfers() const;

 private:
  /// Records `deps` for op `id`. REQUIRES: every dependency is an earlier op.
  void append_deps(Op& op, OpId id, std::initializer_list<OpId> deps);

  std::string name_;
  uint32_t num_ranks_;
  uint64_t elements_;
  std::vector<Chunk> chunks_;
  std::vector<Op> ops_;
  std::vector<OpId> deps_;
};

/// Splits `elements` into `parts` contiguous chunks whose boundaries are multiples of `align`
/// (except the end); sizes differ by at most `align`. Some chunks may be empty when
/// elements < parts * align.
std::vector<Chunk> split_even(uint64_t elements, uint32_t parts, uint64_t align);

}  // namespace ccsim::topo
