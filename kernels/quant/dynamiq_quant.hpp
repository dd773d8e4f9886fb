#pragma once
/// \file
/// DynamiQ's super-group quantizer (Ben Basat et al., §3.3): the element functions a CPU loop or a
/// CUDA thread block runs on one super-group of up to S entries at a width of q bits.
///
/// One super-group's block on the wire (q = the super-group's width, m = its entries, g = the
/// group size, G = ceil(m / g) groups), bytes in this order:
///   hierarchical:  [bf16 super-group scale sf_SG: 2 bytes][G uint8 group scales r_G][payload]
///   flat:          [G bf16 group scales: 2 bytes each][payload]
///   payload:       m codes of q bits, packed LSB-first (kernels/pack/bitpack.hpp); ceil(m·q/8) bytes
/// A code is sign << (q-1) | r with r indexing the magnitude grid Q (r < 2^(q-1)); the entry
/// decodes to ±Q[r]·scale. At q = 1 there is no magnitude: the code is 1 for +scale, 0 for −scale.
///
/// Scales. Hierarchical: sf_SG = the smallest bf16 >= max |x| over the super-group; each group's
/// max |G| is stochastically rounded to r_G·sf_SG/255, r_G in 0..255 (unbiased), and entries are
/// normalized by the exact max |G| before their own rounding, so E[x̂] = x (§3.3). Flat: each
/// group's scale is the smallest bf16 >= max |G| and entries are normalized by it.
///
/// Rounding of a normalized magnitude t in [0, 1] onto Q is stochastic with a uniform u: either
/// independent (uniform_at(key, index)) or correlated across ranks (§3.3, Suresh et al.):
/// u = (π(rank) + γ) / n with π a permutation of the n ranks drawn per entry from a key every rank
/// shares, and γ = uniform_at(key, index) the rank's own draw.
///
/// Random indices: entry draws use the entry's index in the reduced tensor; group-scale draws use
/// kDynamiqScaleIndexBase + the group's index, so the two never collide below 2^41 entries.

#include <cmath>
#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/pack/bitpack.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/bf16_quant.hpp"
#include "kernels/quant/grid.hpp"
#include "kernels/quant/uniform_stream.hpp"

namespace ccsim::kern {

inline constexpr uint64_t kDynamiqScaleIndexBase = uint64_t{1} << 41;
/// The rank field of the key every rank shares for correlated rounding (no real rank has it).
inline constexpr uint32_t kSharedRank = 0xFFFFFFFFu;

/// The key every rank shares for correlated rounding in the round of `own` (a rank's own key).
CCSIM_HD RngKey dynamiq_shared_key(const RngKey& own) { return RngKey{own.seed, own.round, kSharedRank, 0}; }

/// The smallest bf16 value >= a for finite a >= 0, saturating at the largest finite bf16.
CCSIM_HD uint16_t bf16_ceil(float a) {
  uint32_t b = float_to_bits(a) & 0x7FFFFFFFu;
  if (b >= 0x7F7F0000u) return 0x7F7Fu;  // beyond the largest finite bf16 (or inf/NaN): saturate
  if ((b & 0xFFFFu) != 0u) b = (b & 0xFFFF0000u) + 0x10000u;
  return static_cast<uint16_t>(b >> 16);
}

/// A pseudo-random permutation of [0, n) applied to `i`: a 4-round Feistel network on the
/// smallest even-bit power-of-two domain >= n with cycle walking, keyed by four 32-bit words.
/// REQUIRES: 1 <= n <= 2^31, i < n.
CCSIM_HD uint32_t feistel_permute(uint32_t i, uint32_t n, const U32x4& keys) {
  uint32_t bits = 2;
  while ((uint64_t{1} << bits) < n) bits += 2;
  const uint32_t half = bits / 2, mask = (1u << half) - 1u;
  uint32_t x = i;
  do {
    uint32_t l = x >> half, r = x & mask;
    for (int k = 0; k < 4; ++k) {
      uint32_t h = (r ^ keys.v[k]) * 0x9E3779B1u;
      h ^= h >> 15;
      h *= 0x85EBCA6Bu;
      h ^= h >> 13;
      const uint32_t nl = r;
      r = l ^ (h & mask);
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

/// The Philox block of the shared key that decides entry `index`'s permutation (one per entry).
CCSIM_HD U32x4 correlated_block(const RngKey& shared, uint64_t index) {
  return philox4x32<10>(U32x4{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), shared.stream,
                               shared.round}},
                        static_cast<uint32_t>(shared.seed), static_cast<uint32_t>(shared.seed >> 32));
}

/// correlated_uniform_from() with the shared block w = correlated_block(shared, index) already drawn
/// (the CPU encoder draws the blocks of a whole super-group at once).
CCSIM_HD float correlated_uniform_from_block(const U32x4& w, float gamma, uint32_t rank, uint32_t ranks) {
  if (ranks <= 1) return gamma;
  const U32x4 keys{{w.v[0], w.v[1], w.v[2], w.v[0] ^ w.v[3]}};
  const uint32_t rot = static_cast<uint32_t>((static_cast<uint64_t>(w.v[3]) * ranks) >> 32);
  const uint32_t pi = (feistel_permute(rank % ranks, ranks, keys) + rot) % ranks;
  // γ keeps only the fraction bits that π + γ can hold exactly in fp32, so the quotient never
  // rounds up into the next stratum.
  uint32_t int_bits = 0;
  while ((1u << int_bits) < ranks) ++int_bits;
  const float step = exact_pow2(-(24 - static_cast<int>(int_bits)));
  const float g = std::floor(gamma / step) * step;
  return (static_cast<float>(pi) + g) / static_cast<float>(ranks);
}

/// correlated_uniform() below, with the rank's own draw γ = uniform_at(own, index) already made (a
/// CUDA thread that holds the Philox blocks of several entries draws them once for all).
CCSIM_HD float correlated_uniform_from(const RngKey& shared, float gamma, uint64_t index, uint32_t rank,
                                       uint32_t ranks) {
  if (ranks <= 1) return gamma;
  return correlated_uniform_from_block(correlated_block(shared, index), gamma, rank, ranks);
}

/// Correlated uniform for entry `index` at rank `rank` of `ranks`: (π(rank) + γ) / ranks with π a
/// permutation drawn from `shared` (the same on every rank) followed by a random rotation, so π(rank)
/// is exactly uniform on [0, ranks) for each rank, and exactly one rank falls in each stratum
/// [k/ranks, (k+1)/ranks) (up to the division's rounding at the lower edge). γ = uniform_at(own,
/// index), truncated to the bits π + γ can hold exactly; ranks == 1 gives γ.
CCSIM_HD float correlated_uniform(const RngKey& shared, const RngKey& own, uint64_t index, uint32_t rank,
                                  uint32_t ranks) {
  return correlated_uniform_from(shared, uniform_at(own, index), index, rank, ranks);
}

/// How one super-group is coded.
struct DynamiqSgCoding {
  uint32_t width = 4;          ///< q: bits per entry (1, 2, 4, 8 or 16)
  uint32_t group = 16;         ///< entries per group
  bool hierarchical = true;    ///< uint8 group scales under a bf16 super-group scale
  const float* levels = nullptr;  ///< Q: 2^(q-1) magnitudes on [0, 1] (unused at q = 1)
  bool correlated = false;     ///< correlated rounding across ranks
};

/// Bytes of scales in front of a super-group's payload of `m` entries.
CCSIM_HD uint64_t dynamiq_meta_bytes(uint64_t m, uint32_t group, bool hierarchical) {
  const uint64_t groups = (m + group - 1) / group;
  return hierarchical ? 2 + groups : 2 * groups;
}

/// Bytes of one super-group's block of `m` entries at width q.
CCSIM_HD uint64_t dynamiq_sg_bytes(uint64_t m, uint32_t width, uint32_t group, bool hierarchical) {
  return dynamiq_meta_bytes(m, group, hierarchical) + (m * width + 7) / 8;
}

namespace detail {
CCSIM_HD void put_code(uint8_t* payload, uint64_t i, uint32_t width, uint32_t code) {
  if (width <= 8) {
    bitpack_put(payload, i, width, code);
  } else {  // 16 bits: two bytes, little-endian (byte aligned)
    payload[2 * i] = static_cast<uint8_t>(code);
    payload[2 * i + 1] = static_cast<uint8_t>(code >> 8);
  }
}
CCSIM_HD uint32_t get_code(const uint8_t* payload, uint64_t i, uint32_t width) {
  if (width <= 8) return bitpack_get(payload, i, width);
  return static_cast<uint32_t>(payload[2 * i]) | static_cast<uint32_t>(payload[2 * i + 1]) << 8;
}
}  // namespace detail

/// The per-group and per-entry steps of dynamiq_encode_sg() and dynamiq_decode_sg(), shared with
/// the CUDA kernels (kernels/cuda/dynamiq_cuda.cu), which run them on a super-group in parallel.

/// dynamiq_group_code() below with its draw u = uniform_at(key, kDynamiqScaleIndexBase +
/// group_index) already made (the CPU encoder draws a super-group's at once).
CCSIM_HD uint8_t dynamiq_group_code_from(float gmax, float sg_scale, float u) {
  float r = 0.0f;
  if (sg_scale > 0.0f) {
    const float t = std::fmin(gmax / sg_scale * 255.0f, 255.0f);
    r = std::floor(t);
    if (r < 255.0f && u < t - r) r += 1.0f;
  }
  return static_cast<uint8_t>(r);
}

/// r_G of a hierarchical group whose max |x| is `gmax` under super-group scale `sg_scale`: the
/// stochastic rounding of gmax · 255 / sf_SG (clamped where sf_SG saturated below gmax), drawn at
/// kDynamiqScaleIndexBase + `group_index` of `key`; 0 when sg_scale is 0.
CCSIM_HD uint8_t dynamiq_group_code(float gmax, float sg_scale, const RngKey& key, uint64_t group_index) {
  return dynamiq_group_code_from(gmax, sg_scale, uniform_at(key, kDynamiqScaleIndexBase + group_index));
}

/// Whether a group whose entries are normalized by `divisor` codes them; if not (an all-zero group,
/// or an infinite maximum), every code of the group is 0.
CCSIM_HD bool dynamiq_group_coded(float divisor) { return divisor > 0.0f && std::isfinite(divisor); }

/// The q-bit code of entry v of a coded group normalized by `divisor`, rounded with uniform u
/// (`levels`: Q, 2^(q-1) magnitudes; unused at q = 1).
CCSIM_HD uint32_t dynamiq_entry_code(float v, float divisor, uint32_t q, const float* levels, float u) {
  if (q == 1) {
    const float p = (std::fmin(std::fmax(v / divisor, -1.0f), 1.0f) + 1.0f) * 0.5f;  // P(+scale)
    return u < p ? 1u : 0u;
  }
  const float t = std::fmin(std::fabs(v) / divisor, 1.0f);
  const uint32_t r = grid_round_stochastic(levels, 1u << (q - 1), t, u);
  return (std::signbit(v) && r != 0 ? 1u << (q - 1) : 0u) | r;
}

/// sf_SG of a hierarchical block `in` (its first two bytes, a little-endian bf16).
CCSIM_HD float dynamiq_sg_scale(const uint8_t* in) {
  return bf16_to_float(static_cast<uint16_t>(in[0] | static_cast<uint16_t>(in[1]) << 8));
}

/// The decoding scale of group g of block `in` (sg_scale: dynamiq_sg_scale(in), hierarchical only).
CCSIM_HD float dynamiq_group_scale(const uint8_t* in, uint64_t g, bool hierarchical, float sg_scale) {
  return hierarchical ? static_cast<float>(in[2 + g]) / 255.0f * sg_scale
                      : bf16_to_float(static_cast<uint16_t>(in[2 * g] | static_cast<uint16_t>(in[2 * g + 1]) << 8));
}

/// The value a q-bit code decodes to in a group of decoding scale `scale`.
CCSIM_HD float dynamiq_entry_value(uint32_t code, float scale, uint32_t q, const float* levels) {
  if (!(scale > 0.0f)) return 0.0f;
  if (q == 1) return code ? scale : -scale;
  const uint32_t sign_bit = 1u << (q - 1);
  const float mag = levels[code & (sign_bit - 1u)] * scale;
  return (code & sign_bit) ? -mag : mag;
}

/// Encodes the super-group x[0, m) whose first group has index `first_group` into `out`
/// (dynamiq_sg_bytes() bytes, fully written), entry i rounded with the uniform `uniform(i)`: the
/// scales, group codes and entry codes that dynamiq_encode_sg() (one draw per entry) and the CPU's
/// batched encoder (a super-group's draws at once) share. `key` draws the group-scale roundings.
template <class Uniform>
CCSIM_HD void dynamiq_encode_sg_with(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                                     uint64_t first_group, uint8_t* out, Uniform&& uniform) {
  const uint32_t q = c.width;
  const uint64_t groups = (m + c.group - 1) / c.group;
  uint8_t* payload = out + dynamiq_meta_bytes(m, c.group, c.hierarchical);
  for (uint64_t b = 0; b < (m * q + 7) / 8; ++b) payload[b] = 0;
  float sg_scale = 0.0f;
  if (c.hierarchical) {
    float amax = 0.0f;
    for (uint64_t i = 0; i < m; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const uint16_t h = bf16_ceil(amax);
    out[0] = static_cast<uint8_t>(h);
    out[1] = static_cast<uint8_t>(h >> 8);
    sg_scale = bf16_to_float(h);
  }
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t lo = g * c.group, hi = lo + c.group < m ? lo + c.group : m;
    float gmax = 0.0f;
    for (uint64_t i = lo; i < hi; ++i) gmax = std::fmax(gmax, std::fabs(x[i]));
    float divisor;  // entries are normalized by this before rounding
    if (c.hierarchical) {
      out[2 + g] = dynamiq_group_code(gmax, sg_scale, key, first_group + g);
      divisor = gmax;
    } else {
      const uint16_t h = bf16_ceil(gmax);
      out[2 * g] = static_cast<uint8_t>(h);
      out[2 * g + 1] = static_cast<uint8_t>(h >> 8);
      divisor = bf16_to_float(h);
    }
    if (!dynamiq_group_coded(divisor)) continue;
    for (uint64_t i = lo; i < hi; ++i) detail::put_code(payload, i, q, dynamiq_entry_code(x[i], divisor, q, c.levels, uniform(i)));
  }
}

/// Encodes the super-group x[0, m) whose first entry has index `first` (in the reduced tensor) and
/// whose first group has index `first_group`, into `out` (dynamiq_sg_bytes() bytes, fully written).
/// `key` is the encoding rank's stream; `shared` is the key every rank shares (correlated only).
CCSIM_HD void dynamiq_encode_sg(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                                const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                                uint64_t first_group, uint8_t* out) {
  UniformStream own(key);
  dynamiq_encode_sg_with(x, m, c, key, first_group, out, [&](uint64_t i) {
    const float gamma = own.at(first + i);  // uniform_at(key, first + i), one Philox block per 4 entries
    return c.correlated ? correlated_uniform_from(shared, gamma, first + i, rank, ranks) : gamma;
  });
}

/// Decodes a super-group block into out[0, m): out = decoded, or out += decoded with `accumulate`.
CCSIM_HD void dynamiq_decode_sg(const uint8_t* in, uint64_t m, const DynamiqSgCoding& c, bool accumulate,
                                float* out) {
  const uint32_t q = c.width;
  const uint64_t groups = (m + c.group - 1) / c.group;
  const uint8_t* payload = in + dynamiq_meta_bytes(m, c.group, c.hierarchical);
  const float sg_scale = c.hierarchical ? dynamiq_sg_scale(in) : 0.0f;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t lo = g * c.group, hi = lo + c.group < m ? lo + c.group : m;
    const float scale = dynamiq_group_scale(in, g, c.hierarchical, sg_scale);
    for (uint64_t i = lo; i < hi; ++i) {
      const float v = dynamiq_entry_value(detail::get_code(payload, i, q), scale, q, c.levels);
      out[i] = accumulate ? out[i] + v : v;
    }
  }
}

}  // namespace ccsim::kern
