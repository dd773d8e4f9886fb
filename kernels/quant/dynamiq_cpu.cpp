#include "kernels/quant/dynamiq_cpu.hpp"

#include <vector>

#include "kernels/philox_batch.hpp"

namespace ccsim::kern {
namespace {

// u[i] for entries [first, first + m): the rank's own uniform, or its correlated uniform.
void draw_uniforms(const DynamiqSgCoding& c, const RngKey& key, const RngKey& shared, uint32_t rank, uint32_t ranks,
                   uint64_t first, uint64_t m, std::vector<float>& u) {
  u.resize(m);
  uniform_fill(key, first, m, u.data());
  if (!c.correlated || ranks <= 1) return;
  thread_local std::vector<uint32_t> w;
  w.resize(4 * m);
  uint32_t *w0 = w.data(), *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m;
  for (uint64_t i = 0; i < m; ++i) {  // correlated_block(shared, first + i)'s counter
    w0[i] = static_cast<uint32_t>(first + i);
    w1[i] = static_cast<uint32_t>((first + i) >> 32);
    w2[i] = shared.stream;
    w3[i] = shared.round;
  }
  philox_words(w0, w1, w2, w3, m, static_cast<uint32_t>(shared.seed), static_cast<uint32_t>(shared.seed >> 32));
  for (uint64_t i = 0; i < m; ++i)
    u[i] = correlated_uniform_from_block(U32x4{{w0[i], w1[i], w2[i], w3[i]}}, u[i], rank, ranks);
}

}  // namespace

void dynamiq_encode_sg_batched(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                               const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                               uint64_t first_group, uint8_t* out) {
  const uint32_t q = c.width;
  const uint64_t groups = (m + c.group - 1) / c.group;
  uint8_t* payload = out + dynamiq_meta_bytes(m, c.group, c.hierarchical);
  for (uint64_t b = 0; b < (m * q + 7) / 8; ++b) payload[b] = 0;
  thread_local std::vector<float> u;
  draw_uniforms(c, key, shared, rank, ranks, first, m, u);
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
    for (uint64_t i = lo; i < hi; ++i) detail::put_code(payload, i, q, dynamiq_entry_code(x[i], divisor, q, c.levels, u[i]));
  }
}

}  // namespace ccsim::kern
