#include "kernels/quant/qsgd_quant.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "kernels/quant/code_tile_pack.hpp"
#include "kernels/vector_rows.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

// Entries a bucket is coded or decoded in at a time: a multiple of 8, so a tile of codes is whole
// bytes at any width.
constexpr uint64_t kTile = kUniformTile;
static_assert(kTile % 8 == 0);

void check_shape(uint32_t bucket, uint32_t bits) {
  CCSIM_CHECK(bits >= 2 && bits <= 8, "QSGD: {} bits not in [2, 8]", bits);
  CCSIM_CHECK(bucket >= 1 && (uint64_t{bucket} * bits) % 8 == 0, "QSGD: bucket {} of {}-bit codes is not whole bytes",
              bucket, bits);
}

// Parallel pieces are whole buckets, so every bucket (and its bytes) belongs to one thread.
template <class Fn>
void for_buckets(uint64_t count, uint32_t bucket, Fn&& fn) {
  const uint64_t buckets = (count + bucket - 1) / bucket;
  const uint64_t grain = std::max<uint64_t>(1, (1u << 16) / bucket);
  parallel_for(buckets, grain, [&](uint64_t b0, uint64_t b1) {
    for (uint64_t b = b0; b < b1; ++b) fn(b, b * bucket, std::min(count, (b + 1) * bucket));
  });
}

// ---- Rows: no call and no branch per entry; each equals qsgd_quantize() / qsgd_dequantize() on
// every entry, bit for bit (tests compare them).

// qsgd_quantize() with norm > 0. lo + 0 differs from lo only in a zero's sign (lo is never -0
// here, as v >= +0 or NaN); the clamp's comparisons send NaN to 0 as fmaxf(level, 0) does.
CCSIM_VECTOR_ROW void codes_row(const float* x, const float* u, uint64_t n, float norm, float s, uint32_t bits,
                                uint8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t xb;
    std::memcpy(&xb, &x[i], sizeof xb);
    const float v = (std::fabs(x[i]) / norm) * s;
    const float lo = std::floor(v);
    float level = lo + ((u[i] < v - lo) ? 1.0f : 0.0f);
    level = level > 0.0f ? level : 0.0f;
    level = level < s ? level : s;
    q[i] = static_cast<uint8_t>(((xb >> 31) << (bits - 1u)) | static_cast<uint32_t>(level));
  }
}

// qsgd_quantize() with norm == 0: the sign bit alone.
CCSIM_VECTOR_ROW void sign_codes_row(const float* x, uint64_t n, uint32_t bits, uint8_t* q) {
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t xb;
    std::memcpy(&xb, &x[i], sizeof xb);
    q[i] = static_cast<uint8_t>((xb >> 31) << (bits - 1u));
  }
}

// A NaN with its quiet bit set: what x86 arithmetic returns for a NaN operand (the first operand's
// when both are NaN, so a row spells out which operand is first).
inline float quieted(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  b |= 0x00400000u;
  std::memcpy(&x, &b, sizeof b);
  return x;
}

// qsgd_dequantize(): ±(level / s) * norm (the negation flips the sign bit only), written to
// out[i] or added to it.
CCSIM_VECTOR_ROW void values_row(const uint8_t* q, uint64_t n, uint32_t bits, float norm, bool accumulate,
                                 float* out) {
  const uint32_t s = qsgd_levels(bits);
  const float sf = static_cast<float>(s);
  if (accumulate) {
    for (uint64_t i = 0; i < n; ++i) {
      const float m = (static_cast<float>(q[i] & s) / sf) * norm;
      const float v = ((q[i] >> (bits - 1u)) & 1u) != 0u ? -m : m;
      out[i] = v != v ? quieted(v) : v + out[i];  // v first on two NaNs, as the scalar code
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      const float m = (static_cast<float>(q[i] & s) / sf) * norm;
      out[i] = ((q[i] >> (bits - 1u)) & 1u) != 0u ? -m : m;
    }
  }
}

// ---- Buckets -----------------------------------------------------------------------------------

// Encodes bucket b = x[begin, end): its norm into `out`, its codes into `codes` (the chunk's code
// area); entry i draws uniform_at(key, index_base + i).
void encode_bucket(const float* x, uint64_t b, uint64_t begin, uint64_t end, uint32_t bits, const RngKey& key,
                   uint64_t index_base, uint8_t* out, uint8_t* codes) {
  double sum_squares = 0.0;  // exact squares, summed in element order
  for (uint64_t i = begin; i < end; ++i) sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const float norm = qsgd_norm(sum_squares);
  std::memcpy(out + 4 * b, &norm, sizeof norm);
  const float s = static_cast<float>(qsgd_levels(bits));
  float u[kTile];
  uint8_t q[kTile];
  for (uint64_t t = begin; t < end; t += kTile) {
    const uint64_t m = std::min(kTile, end - t);
    if (norm > 0.0f) {
      uniform_fill(key, index_base + t, m, u);
      codes_row(x + t, u, m, norm, s, bits, q);
    } else {
      sign_codes_row(x + t, m, bits, q);
    }
    pack_code_tile(q, m, bits, codes + t * bits / 8);
  }
}

// Decodes bucket b (entries [begin, end)) into dst[begin, end), written or added.
void decode_bucket(const uint8_t* in, const uint8_t* codes, uint64_t b, uint64_t begin, uint64_t end, uint32_t bits,
                   bool accumulate, float* dst) {
  float norm;
  std::memcpy(&norm, in + 4 * b, sizeof norm);
  uint8_t buf[kTile];
  for (uint64_t t = begin; t < end; t += kTile) {
    const uint64_t m = std::min(kTile, end - t);
    values_row(unpack_code_tile(codes + t * bits / 8, m, bits, buf), m, bits, norm, accumulate, dst + t);
  }
}

void decode_with(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, bool accumulate, float* dst) {
  check_shape(bucket, bits);
  const uint8_t* codes = in + 4 * ((count + bucket - 1) / bucket);
  for_buckets(count, bucket, [&](uint64_t b, uint64_t begin, uint64_t end) {
    decode_bucket(in, codes, b, begin, end, bits, accumulate, dst);
  });
}

}  // namespace

void qsgd_encode(const float* x, uint64_t count, uint32_t bucket, uint32_t bits, const RngKey& key, uint64_t index_base,
                 uint8_t* out) {
  check_shape(bucket, bits);
  uint8_t* codes = out + 4 * ((count + bucket - 1) / bucket);
  for_buckets(count, bucket, [&](uint64_t b, uint64_t begin, uint64_t end) {
    encode_bucket(x, b, begin, end, bits, key, index_base, out, codes);
  });
}

void qsgd_decode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* out) {
  decode_with(in, count, bucket, bits, false, out);
}

void qsgd_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* acc) {
  decode_with(in, count, bucket, bits, true, acc);
}

void qsgd_decode_accumulate_encode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* acc,
                                   const RngKey& key, uint64_t index_base, uint8_t* out) {
  check_shape(bucket, bits);
  const uint64_t buckets = (count + bucket - 1) / bucket;
  for_buckets(count, bucket, [&](uint64_t b, uint64_t begin, uint64_t end) {
    decode_bucket(in, in + 4 * buckets, b, begin, end, bits, true, acc);
    encode_bucket(acc, b, begin, end, bits, key, index_base, out, out + 4 * buckets);
  });
}

}  // namespace ccsim::kern
