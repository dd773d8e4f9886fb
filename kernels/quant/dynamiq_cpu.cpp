#include "kernels/quant/dynamiq_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/philox_batch.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/vector_rows.hpp"

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

// The value of every code of width q <= 8 at scale 1: ±Q[r], or ±1 at q = 1. Times a positive
// scale it is dynamiq_entry_value(code, scale, q, levels): (-a)·s == -(a·s) in IEEE arithmetic.
struct SignedLevels {
  uint32_t q = 0;
  float levels[128];  // the grid the table was built from (2^(q-1) magnitudes; compared by value)
  float value[256];

  bool built_from(const float* lv, uint32_t width) const {
    return q == width && (width == 1 || std::memcmp(levels, lv, sizeof(float) << (width - 1)) == 0);
  }
  void build(const float* lv, uint32_t width) {
    q = width;
    if (width > 1) std::memcpy(levels, lv, sizeof(float) << (width - 1));
    for (uint32_t code = 0; code < (1u << width); ++code) value[code] = dynamiq_entry_value(code, 1.0f, width, lv);
  }
};

// out[i] (+)= value[codes[i]] * scale[i], or 0 where the scale is not positive.
CCSIM_VECTOR_ROW void decode_row(const uint8_t* codes, const float* scale, uint64_t n, const float* value,
                                bool accumulate, float* out) {
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) out[i] = out[i] + (scale[i] > 0.0f ? value[codes[i]] * scale[i] : 0.0f);
  } else {
    for (uint64_t i = 0; i < n; ++i) out[i] = scale[i] > 0.0f ? value[codes[i]] * scale[i] : 0.0f;
  }
}

}  // namespace

void dynamiq_decode_sg_table(const uint8_t* in, uint64_t m, const DynamiqSgCoding& c, bool accumulate, float* out) {
  const uint32_t q = c.width;
  if (q > 8) return dynamiq_decode_sg(in, m, c, accumulate, out);
  thread_local SignedLevels table;
  if (!table.built_from(c.levels, q)) table.build(c.levels, q);
  thread_local std::vector<uint8_t> codes;
  thread_local std::vector<float> scale;
  codes.resize(m);
  scale.resize(m);
  const uint64_t groups = (m + c.group - 1) / c.group;
  const uint8_t* payload = in + dynamiq_meta_bytes(m, c.group, c.hierarchical);
  const float sg_scale = c.hierarchical ? dynamiq_sg_scale(in) : 0.0f;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t lo = g * c.group, hi = lo + c.group < m ? lo + c.group : m;
    std::fill(scale.begin() + static_cast<int64_t>(lo), scale.begin() + static_cast<int64_t>(hi),
              dynamiq_group_scale(in, g, c.hierarchical, sg_scale));
  }
  decode_row(unpack_code_tile(payload, m, q, codes.data()), scale.data(), m, table.value, accumulate, out);
}

void dynamiq_encode_sg_batched(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                               const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                               uint64_t first_group, uint8_t* out) {
  thread_local std::vector<float> u;
  draw_uniforms(c, key, shared, rank, ranks, first, m, u);
  dynamiq_encode_sg_with(x, m, c, key, first_group, out, [&](uint64_t i) { return u[i]; });
}

}  // namespace ccsim::kern
