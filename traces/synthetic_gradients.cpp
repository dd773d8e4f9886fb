#include "traces/synthetic_gradients.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/math/float_libm.hpp"
#include "kernels/parallel.hpp"
#include "kernels/philox.hpp"
#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"

namespace ccsim::traces {
namespace {

// Philox streams of the generator (distinct from compression-kernel streams by construction:
// those keys use round/rank of the collective, these use rank = worker + 1 or 0 for shared).
constexpr uint32_t kStreamLayers = 0xA00001;
constexpr uint32_t kStreamEnvelope = 0xA00002;
constexpr uint32_t kStreamNoise = 0xA00003;
constexpr float kTwoPi = 6.2831853071795864769f;

// Two standard normals from one Philox block (Box–Muller); element pair index `pair`.
inline void normal_pair(const kern::RngKey& key, uint64_t pair, float& z0, float& z1) {
  const kern::U32x4 r = kern::philox_block(key, pair);
  // u1 in (0, 1] so the log is finite.
  const float u1 = 1.0f - kern::u32_to_unit_float(r.v[0]);
  const float u2 = kern::u32_to_unit_float(r.v[1]);
  const float radius = std::sqrt(-2.0f * kern::libm_logf(u1));
  float sine, cosine;
  kern::libm_sincosf(kTwoPi * u2, &sine, &cosine);
  z0 = radius * cosine;
  z1 = radius * sine;
}

// Scratch of normal_pairs(), kept across its calls.
struct NormalScratch {
  std::vector<uint32_t> bits;
  std::vector<float> radius, angle, sine, cosine;
};

// normal_pair() for pairs [pair0, pair0 + pairs): z[2j], z[2j + 1] from one Philox block each. The
// blocks are drawn in batches, and each step of normal_pair() runs over every pair before the next,
// so that the log and sine/cosine run as rows and the arithmetic between them vectorizes: the same
// operations on the same values, so the same bits.
void normal_pairs(const kern::RngKey& key, uint64_t pair0, uint64_t pairs, NormalScratch& s, float* z) {
  s.bits.resize(4 * pairs);
  s.radius.resize(pairs);
  s.angle.resize(pairs);
  s.sine.resize(pairs);
  s.cosine.resize(pairs);
  kern::random_bits_fill(key, 4 * pair0, 4 * pairs, s.bits.data());
  const uint32_t* bits = s.bits.data();
  float *radius = s.radius.data(), *angle = s.angle.data(), *sine = s.sine.data(), *cosine = s.cosine.data();
  for (uint64_t j = 0; j < pairs; ++j) {
    radius[j] = 1.0f - kern::u32_to_unit_float(bits[4 * j]);  // u1 in (0, 1], so the log is finite
    angle[j] = kTwoPi * kern::u32_to_unit_float(bits[4 * j + 1]);
  }
  kern::libm_logf_row(radius, radius, pairs);
  for (uint64_t j = 0; j < pairs; ++j) radius[j] = std::sqrt(-2.0f * radius[j]);
  kern::libm_sincosf_row(angle, sine, cosine, pairs);
  for (uint64_t j = 0; j < pairs; ++j) {
    z[2 * j] = radius[j] * cosine[j];
    z[2 * j + 1] = radius[j] * sine[j];
  }
}

inline float normal_at(const kern::RngKey& key, uint64_t index) {
  float z0, z1;
  normal_pair(key, index >> 1, z0, z1);
  return (index & 1) ? z1 : z0;
}

}  // namespace

std::vector<uint64_t> synthetic_layer_offsets(const SyntheticGradientSpec& spec, uint64_t seed) {
  const uint32_t layers = static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(spec.layers, spec.elements)));
  const kern::RngKey key{seed, 0, 0, kStreamLayers};
  std::vector<double> weight(layers);
  double total = 0;
  for (uint32_t l = 0; l < layers; ++l) {
    weight[l] = std::pow(4.0, static_cast<double>(kern::uniform_at(key, 2 * l)));  // 1x .. 4x
    total += weight[l];
  }
  std::vector<uint64_t> off(layers + 1, 0);
  double acc = 0;
  for (uint32_t l = 0; l < layers; ++l) {
    acc += weight[l];
    off[l + 1] = (l + 1 == layers) ? spec.elements
                                   : std::max(off[l] + 1, static_cast<uint64_t>(acc / total * static_cast<double>(spec.elements)));
  }
  return off;
}

void generate_synthetic_gradients(const SyntheticGradientSpec& spec, uint64_t seed,
                                  std::span<const std::span<float>> workers, uint32_t first_worker) {
  for (const auto& w : workers) CCSIM_CHECK(w.size() == spec.elements, "worker buffer has {} elements, want {}", w.size(), spec.elements);
  generate_synthetic_range(spec, seed, 0, workers, first_worker);
}

void generate_synthetic_range(const SyntheticGradientSpec& spec, uint64_t seed, uint64_t first,
                              std::span<const std::span<float>> workers, uint32_t first_worker) {
  if (workers.empty() || workers.front().empty()) return;
  const uint64_t count = workers.front().size();
  for (const auto& w : workers) CCSIM_CHECK(w.size() == count, "worker buffers of {} and {} elements", count, w.size());
  CCSIM_CHECK(first % 2 == 0 && first + count <= spec.elements, "synthetic range [{}, {}) of {} elements, start not even",
              first, first + count, spec.elements);
  const std::vector<uint64_t> off = synthetic_layer_offsets(spec, seed);
  const uint32_t layers = static_cast<uint32_t>(off.size() - 1);
  std::vector<float> layer_scale(layers);
  const kern::RngKey layer_key{seed, 0, 0, kStreamLayers};
  for (uint32_t l = 0; l < layers; ++l)
    layer_scale[l] = static_cast<float>(std::pow(10.0, -spec.scale_decades * kern::uniform_at(layer_key, 2 * l + 1)));

  const float a_shared = static_cast<float>(std::sqrt(spec.correlation));
  const float a_own = static_cast<float>(std::sqrt(1.0 - spec.correlation));
  const float sigma = static_cast<float>(spec.envelope_sigma);
  // Envelope exponents: sigma * (a_env_shared n_shared + a_env_own n_w); with one shared envelope
  // (rho_e = 1) the worker part is skipped, so those outputs do not depend on this option.
  const bool own_envelope = spec.envelope_correlation < 1.0;
  const float sigma_shared = own_envelope ? sigma * static_cast<float>(std::sqrt(spec.envelope_correlation)) : sigma;
  const float sigma_own = sigma * static_cast<float>(std::sqrt(1.0 - spec.envelope_correlation));
  const uint32_t span = std::max<uint32_t>(1, spec.envelope_span);
  const kern::RngKey env_key{seed, 0, 0, kStreamEnvelope};
  const kern::RngKey shared_key{seed, 0, 0, kStreamNoise};

  // Tiles of whole layers' slices; within a tile the shared part is computed once for all workers.
  // Workers' buffers hold entries [first, first + count); `out` below is offset to index them.
  constexpr uint64_t kTile = 1 << 14;
  const uint64_t tiles = (count + kTile - 1) / kTile, stop = first + count;
  kern::parallel_for(tiles, 4, [&](uint64_t t0, uint64_t t1) {
    std::vector<float> base(kTile), shared(kTile), z(kTile + 1);
    NormalScratch scratch;
    for (uint64_t t = t0; t < t1; ++t) {
      const uint64_t begin = first + t * kTile, end = std::min(stop, begin + kTile);
      uint32_t layer = static_cast<uint32_t>(std::upper_bound(off.begin(), off.end(), begin) - off.begin() - 1);
      // base = layer scale x shared envelope, filled a run of one envelope value and one layer at a time.
      for (uint64_t i = begin; i < end;) {
        const uint64_t env_index = i / span, run_end = std::min(end, (env_index + 1) * span);
        const float env = std::exp(sigma_shared * normal_at(env_key, env_index));
        while (i < run_end) {
          while (i >= off[layer + 1]) ++layer;
          const uint64_t upto = std::min(run_end, off[layer + 1]);
          std::fill(base.data() + (i - begin), base.data() + (upto - begin), layer_scale[layer] * env);
          i = upto;
        }
      }
      // Shared component: value = base * (a_shared z_s + a_own z_w); pairs share one Philox block.
      // `begin` is even (tiles are even-sized), so element i is lane i & 1 of pair i >> 1.
      const uint64_t n = end - begin, pairs = (n + 1) / 2;
      normal_pairs(shared_key, begin >> 1, pairs, scratch, z.data());
      for (uint64_t j = 0; j < n; ++j) shared[j] = a_shared * z[j];
      for (size_t w = 0; w < workers.size(); ++w) {
        const auto worker = static_cast<uint32_t>(first_worker + w + 1);
        const kern::RngKey own_key{seed, 0, worker, kStreamNoise};
        float* out = workers[w].data();  // out[i - first] is entry i
        normal_pairs(own_key, begin >> 1, pairs, scratch, z.data());
        for (uint64_t j = 0; j < n; ++j) out[begin - first + j] = base[j] * (shared[j] + a_own * z[j]);
        if (!own_envelope) continue;
        // The worker's own envelope factor, one per span.
        const kern::RngKey own_env_key{seed, 0, worker, kStreamEnvelope};
        for (uint64_t i = begin; i < end;) {
          const uint64_t run_end = std::min(end, (i / span + 1) * span);
          const float factor = std::exp(sigma_own * normal_at(own_env_key, i / span));
          for (; i < run_end; ++i) out[i - first] *= factor;
        }
      }
    }
  });
}

}  // namespace ccsim::traces
