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
/// can be regenerated and the output does not depend on the thread count. The normals are
/// Box–Muller's of fp32 uniforms, their log and sine/cosine kern::libm_logf / libm_sincosf
/// (kernels/math/float_libm.hpp: glibc's results on AVX2 + FMA machines, the same bits on every
/// machine).

#include <cstdint>
#include <span>
#include <vector>

#include "sim/base/json_fields.hpp"

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

/// The generator's fields, as scenario files (gradients.*) and `ccsim vnmse --structure` name them
/// (sim/base/json_fields.hpp); `elements` is not one of them.
template <class V>
void visit(V& v, SyntheticGradientSpec& c) {
  v.integer("layers", c.layers, 1, kMaxSyntheticLayers, "synthetic: number of layers");
  v.number("scale_decades", c.scale_decades, 0.0, kMaxScaleDecades, "synthetic: layer scales span this many decades");
  v.number("correlation", c.correlation, 0.0, 1.0, "synthetic: correlation between two workers' values");
  v.number("envelope_sigma", c.envelope_sigma, 0.0, kMaxEnvelopeSigma,
           "synthetic: sigma of the lognormal local-magnitude envelope");
  v.integer("envelope_span", c.envelope_span, 1, kMaxEnvelopeSpan, "synthetic: elements sharing one envelope value");
  v.number("envelope_correlation", c.envelope_correlation, 0.0, 1.0,
           "synthetic: correlation between two workers' log-envelopes (1: one envelope shared by every worker; "
           "less: each worker's batch makes its own places large)");
}

/// Layer boundaries: `layers + 1` offsets from 0 to `elements` (deterministic in `seed`).
std::vector<uint64_t> synthetic_layer_offsets(const SyntheticGradientSpec& spec, uint64_t seed);

/// Fills `workers[w]` (each `spec.elements` long) with worker `first_worker + w`'s gradient: any
/// subset of the workers, one at a time if need be, gives the same values as all at once.
void generate_synthetic_gradients(const SyntheticGradientSpec& spec, uint64_t seed, std::span<const std::span<float>> workers,
                                  uint32_t first_worker = 0);

/// Entries [first, first + n) of the workers' gradients, n = workers[w].size() (equal for every w):
/// the values generate_synthetic_gradients() gives them. REQUIRES: first even, first + n <=
/// spec.elements.
void generate_synthetic_range(const SyntheticGradientSpec& spec, uint64_t seed, uint64_t first,
                              std::span<const std::span<float>> workers, uint32_t first_worker = 0);

}  // namespace ccsim::traces
