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

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

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

/// What a compressor guarantees about repeatability (a scenario requiring more is rejected).
enum class Determinism {
  kNotGuaranteed,  ///< results may differ run to run
  kRunToRun,       ///< identical across runs on the same device type
  kBitwiseCpuGpu,  ///< CPU reference and CUDA kernel produce identical bits
};
std::string_view determinism_name(Determinism d);

/// A compression scheme instance with fixed parameters.
class Compressor {
 public:
  virtual ~Compressor() = default;

  /// Registered name ("bf16", "int8", ...).
  virtual std::string_view name() const = 0;
  /// Exact size in bytes of an encoded chunk, payload plus metadata.
  virtual uint64_t wire_bytes(const TensorSpec& spec, const HopContext& hop) const = 0;
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

  /// Bytes of memory traffic of one kernel op on a chunk (what a roofline cost model charges).
  /// Default: fp32 reads/writes of the chunk plus the encoded bytes read/written.
  virtual uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const;
  /// Preferred chunk alignment in elements (a block size); schedules align chunk boundaries to it.
  virtual uint64_t alignment() const { return 1; }
  /// Whether decode(encode(x)) is an unbiased estimate of x.
  virtual bool unbiased() const = 0;
  virtual Determinism determinism() const = 0;
  /// Whether this instance can compress `spec` (default: always).
  virtual Status can_implement(const TensorSpec& /*spec*/) const { return ok_status(); }
};

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
