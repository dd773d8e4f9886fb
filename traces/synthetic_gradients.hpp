#pragma once
/// \file
/// Synthetic gradients with the structure that matters to compression error:
///  * layers whose scales span `scale_decades` orders of magnitude (log-uniform per layer);
///  * spatially local magnitudes: a lognormal envelope (σ = `envelope_sigma`) per run of
///    `envelope_span` consecutive elements, which also makes the marginal distribution heavy-tailed
///    (a Gaussian scale mixture). Worker w's envelope is exp(σ·(√ρ_e·n_shared + √(1−ρ_e)·n_w)),
///    ρ_e = `envelope_correlation`: 1 shares one envelope (where a gradient is large is the same on
///    every worker), less lets each worker's batch make its own places large (as the rows of the
///    tokens in its batch are in an embedding's gradient);
///  * correlation across workers: x_w = s·e·(√ρ·z_shared + √(1−ρ)·z_w), ρ = `correlation`.
/// Every value is a pure function of (seed, worker, element index) through Philox, so any slice
/// can be regenerated and the output does not depend on the thread count.

#include <cstdint>
#include <span>
#include <vector>

namespace ccsim::traces {

/// The parameters' accepted ranges (scenario files and `ccsim vnmse --structure` check them).
inline constexpr int64_t kMaxSyntheticLayers = int64_t{1} << 20;  ///< layers in [1, this]
inline constexpr double kMaxScaleDecades = 30.0;                  ///< scale_decades in [0, this]
inline constexpr double kMaxEnvelopeSigma = 5.0;                  ///< envelope_sigma in [0, this]
inline constexpr int64_t kMaxEnvelopeSpan = int64_t{1} << 30;     ///< envelope_span in [1, this]

/// Parameters of the synthetic generator (defaults are what scenarios get when they say nothing).
struct SyntheticGradientSpec {
  uint64_t elements = 0;          ///< fp32 elements per worker
  uint32_t layers = 16;           ///< contiguous layers, sizes varying by up to 4x
  double scale_decades = 3.0;     ///< layer scales log-uniform in [10^-decades, 1]
  double correlation = 0.5;       ///< ρ: correlation of two workers' values at one index
  double envelope_sigma = 1.0;    ///< σ of the lognormal local-magnitude envelope
  uint32_t envelope_span = 256;   ///< elements sharing one envelope value
  double envelope_correlation = 1.0;  ///< ρ_e: correlation of two workers' log-envelopes
};

/// Layer boundaries: `layers + 1` offsets from 0 to `elements` (deterministic in `seed`).
std::vector<uint64_t> synthetic_layer_offsets(const SyntheticGradientSpec& spec, uint64_t seed);

/// Fills `workers[w]` (each `spec.elements` long) with worker w's gradient.
void generate_synthetic_gradients(const SyntheticGradientSpec& spec, uint64_t seed, std::span<const std::span<float>> workers);

}  // namespace ccsim::traces
