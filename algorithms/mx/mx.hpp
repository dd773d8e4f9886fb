#pragma once
/// \file
/// mxfp8 / mxfp6 / mxfp4: OCP Microscaling formats adapted to all-reduce as in DynamiQ (§5,
/// App. C): E4M3 (MXFP8), E3M2 (MXFP6) or E2M1 (MXFP4) elements in blocks of `block` (32, the OCP
/// block) sharing one scale, BF16 (DynamiQ's runs) or the spec's E8M0. Every hop decodes to fp32,
/// adds in fp32 and re-encodes (on the CPU in one pass per group of blocks). Element, scale and
/// layout rules: kernels/quant/mx_quant.hpp.
///
/// Wire: [ceil(count / block) scales, 2 bytes each (BF16 bits, little-endian) or 1 byte (E8M0) |
///        count element codes of 8 / 6 / 4 bits, packed LSB-first as kernels/pack/bitpack.hpp]
///   = scale_bytes * ceil(count / block) + ceil(count * element_bits / 8) bytes.
///
/// Global scaling, `global_scaling`:
///  - block (default; DynamiQ App. C, "for each chunk j", a chunk being an MX block): the metadata
///    phase all-reduces every block's maximum, gm_b = max_i m_ib (one fp32 max entry per block:
///    32 bits per `block` entries), and every rank uses the agreed shared scale X_b = the scale
///    code for mu * gm_b (mx_scale_code) at every hop, so a rank's block maximum maps to
///    FPX_MAX / mu and partial sums of up to mu ranks stay within FPX_MAX: FP8-LM's summation in the
///    low-precision format. Elements beyond FPX_MAX * X_b saturate; they are the overflows mu adapts
///    to (below). Messages still carry X_b (the MX format). prepare() and finish() copy.
///  - layer (FP8-LM's per-tensor form): one max entry per layer of the set_layout() layout (one for the whole
///    tensor without a layout, or when the layout does not tile the tensor): m_ij = max |g| of
///    layer j on rank i, combined to gm_j = max_i m_ij (4 bytes per layer and rank).
///  - s_j = mu * gm_j; prepare() maps g -> g / s_j * FPX_MAX (FPX_MAX = 448, 28 or 6), finish()
///    maps the result back (multiplied by s_j / FPX_MAX). Both factors are rounded to fp32 once per
///    layer; a layer whose factors are not normal fp32 numbers (gm_j zero, non-finite or extreme)
///    is left unscaled. Without a committed plan (the scheme used outside a round) prepare() and
///    finish() copy.
///  - mu starts at the number of ranks (each rank's layer maximum then maps to FPX_MAX / n, so no
///    partial sum can exceed FPX_MAX) and adapts across rounds, the instance living across rounds:
///    every encode counts the elements it receives with |v| > FPX_MAX or non-finite (an overflow
///    of the FPX range at the global scale: what saturates an FP8 sum in FP8-LM); the next
///    plan_commit() sets mu = 2 mu if overflows / encoded elements > overflow_threshold, else
///    mu = mu_decay * mu (mu is left alone after a round without encodes). The count is an atomic
///    integer sum, independent of the thread count.
///  - In layer mode, with per-block shared scales chosen per message, the pre-scaling changes little: a block's scale absorbs any
///    magnitude, so values beyond FPX_MAX are not lost, and the relative error of a block does not
///    depend on a global factor. It matters where a block's scale or elements under/overflow: it
///    lifts tiny layers out of the BF16 scale's subnormal range (and out of E8M0's 2^-127 floor,
///    where elements underflow), and keeps fp32 partial sums far from FLT_MAX. Under E8M0 the
///    spec's saturation of elements near the block maximum happens at any global scale; it is not
///    what the overflow count measures.
///
/// Parameters: block (default 32, power of two in [8, 65536]); scale bf16 | e8m0 (default bf16);
/// rounding nearest | stochastic (default nearest: RNE, saturating at the element maximum);
/// global_scaling block | layer | off (default block); overflow_threshold (default 1e-5, FP8-LM's 0.001%); mu_decay
/// (default 0.99: the paper's gamma < 1 close to 1).

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "kernels/quant/mx_quant.hpp"

namespace ccsim::algo {

/// MXFP8 / MXFP6 / MXFP4 with FP8-LM global scaling.
class MxCompressor final : public Compressor {
 public:
  /// Everything the parameter table configures.
  struct Options {
    kern::MxFormat format;
    enum class Scaling : uint8_t { kOff, kLayer, kBlock };
    Scaling global_scaling = Scaling::kBlock;
    double overflow_threshold = 1e-5;  ///< overflow ratio above which mu doubles
    double mu_decay = 0.99;            ///< factor applied to mu after a round without excess overflow
  };
  /// One layer's agreed scaling: prepare() multiplies by `to_fpx`, finish() by `from_fpx`.
  struct LayerScale {
    uint64_t offset = 0;
    uint64_t count = 0;
    float global_max = 0;  ///< gm_j
    float to_fpx = 1;      ///< fl(FPX_MAX / (mu * gm_j)), or 1 if not a normal fp32
    float from_fpx = 1;    ///< fl(mu * gm_j / FPX_MAX), or 1 with to_fpx
  };

  /// The registry entry of "mxfp8" (E4M3), "mxfp6" (E3M2) or "mxfp4" (E2M1).
  /// REQUIRES: `element` is one of these three.
  static CompressorInfo info(kern::MinifloatKind element);
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info(element) where the build
  /// has CUDA; defined in algorithms/mx/mx_device.cpp, compiled only then.
  static const DeviceOps& device_ops(kern::MinifloatKind element);
  MxCompressor(std::string name, Options options) : name_(std::move(name)), options_(options) {}

  std::string_view name() const override { return name_; }
  bool codes_in_pieces() const override { return true; }
  uint64_t wire_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::mx_bytes(spec.count, options_.format);
  }
  uint64_t payload_bytes(const TensorSpec& spec, const HopContext&) const override {
    return kern::packed_bytes(spec.count, options_.format.element_bits());
  }
  /// Also counts the overflows of the global scale (see the file comment). Thread-safe counter.
  void encode(std::span<const float> x, const TensorSpec& spec, const HopContext& hop, const kern::RngKey& key,
              std::span<uint8_t> out) override;
  void decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
              std::span<float> out) override;
  void decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop,
                         std::span<float> acc) override;
  /// One pass per group of blocks (kern::mx_decode_accumulate_encode): decoded, summed and
  /// re-encoded as encode() would, the overflows counted as encode() counts them.
  void decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext& hop_in,
                                std::span<float> acc, const HopContext& hop_out, const kern::RngKey& key,
                                std::span<uint8_t> out) override;

  /// One max entry per block (block scaling) or per layer (layer scaling), none without.
  PlanFormat plan_format(uint64_t elements, uint32_t ranks) const override;
  void plan_local(std::span<const float> x, uint32_t rank, const kern::RngKey& key, PlanStats& out) const override;
  /// Block scaling: a piece of whole blocks at a time; layer scaling: null (whole tensors only).
  std::unique_ptr<PlanPieces> plan_pieces(uint64_t elements, uint32_t rank, const kern::RngKey& key) const override;
  uint64_t plan_piece_alignment(uint64_t) const override { return options_.format.block; }
  /// Block scaling's maxima depend on the block size alone (every MX format shares them); layer
  /// scaling's are not shared.
  std::string plan_local_identity() const override;
  /// Adapts mu from the previous round's overflow count (first round: mu = ranks), resets the
  /// count, and fixes every layer's scale.
  Status plan_commit(const PlanStats& combined, uint64_t elements, uint32_t ranks) override;
  /// "mu": the mu of the round just planned (its scales and encodes use it). Detail: move (init:
  /// the first plan, mu = ranks; double; decay; hold: no encodes since the last plan), the previous
  /// round's encode counts mu moved on (overflow_ratio, overflows, encoded; with double or decay
  /// only), overflow_threshold (ε), mu_decay and previous_mu. Empty without global scaling or
  /// before the first plan_commit().
  std::vector<PlanDecision> plan_decisions() const override;
  void set_layout(std::span<const LayerShape> layers) override { layout_.assign(layers.begin(), layers.end()); }
  /// g -> g / s_j * FPX_MAX per layer (REQUIRES: x.size() equals the planned tensor, if planned).
  void prepare(std::span<const float> x, std::span<float> out, uint32_t rank, uint32_t ranks,
               const kern::RngKey& key) override;
  /// The inverse of prepare(): multiplies by s_j / FPX_MAX per layer.
  void finish(std::span<const float> reduced, std::span<float> out, uint32_t rank, uint32_t ranks) override;

  uint64_t alignment() const override { return options_.format.block; }
  /// Round ops: with global scaling, plan_local reads the tensor and writes its maxima; with layer
  /// scaling, prepare and finish also read and write it once (the per-layer scale), while block
  /// scaling has none (encode applies the agreed scale codes). None without global scaling.
  /// Collective ops: the default.
  uint64_t memory_bytes(topo::KernelKind kind, const TensorSpec& spec, const HopContext& hop) const override;
  /// Stochastic rounding with BF16 scales is unbiased (the scale never saturates an element and
  /// the global scaling is linear); nearest rounding and E8M0 scales (saturation) are not.
  bool unbiased() const override {
    return options_.format.rounding == kern::Rounding::kStochastic && options_.format.scale == kern::MxScaleKind::kBf16;
  }
  /// Integer rounding decisions, exact scale arithmetic and IEEE products and quotients; mu is
  /// updated from integer counts in double precision on the host: bitwise CPU/GPU.
  Determinism determinism() const override { return Determinism::kBitwiseCpuGpu; }

  // ---- state, for inspection ----
  /// The element format's largest finite value, FPX_MAX.
  float element_max() const { return options_.format.element_format().max_finite(); }
  /// The current mu (0 before the first plan_commit()).
  double mu() const { return mu_; }
  /// The committed round's layer scales (empty before the first plan_commit()).
  std::span<const LayerScale> layer_scales() const { return scales_; }
  /// Block scaling: the committed round's agreed scale code of every block (empty otherwise).
  std::span<const uint32_t> block_codes() const { return block_codes_; }
  /// Elements encoded, and those beyond FPX_MAX or non-finite, since the last plan_commit().
  uint64_t encoded_elements() const { return encoded_.load(std::memory_order_relaxed); }
  uint64_t overflow_elements() const { return overflows_.load(std::memory_order_relaxed); }

 private:
  /// Block scaling after a plan: the agreed scale codes of the chunk `spec` (checked to be
  /// block-aligned within the plan); null otherwise (each block's own scale).
  const uint32_t* agreed_codes(const TensorSpec& spec) const;
  /// The layers of a tensor of `elements`: the layout if it tiles [0, elements), else one.
  std::vector<LayerShape> layers_for(uint64_t elements) const;

  std::string name_;
  Options options_;
  std::vector<LayerShape> layout_;
  std::vector<LayerScale> scales_;
  std::vector<uint32_t> block_codes_;  ///< block scaling: the agreed scale code of every block
  uint64_t planned_elements_ = 0;
  bool committed_ = false;  ///< a plan was committed before (mu has been initialized)
  double mu_ = 0;
  // What the last plan_commit() adapted mu from (for plan_decisions()).
  double previous_mu_ = 0;
  uint64_t last_encoded_ = 0;
  uint64_t last_overflows_ = 0;
  const char* last_move_ = "";  // "init", "double", "decay" or "hold"
  std::atomic<uint64_t> encoded_{0};
  std::atomic<uint64_t> overflows_{0};
};

}  // namespace ccsim::algo
