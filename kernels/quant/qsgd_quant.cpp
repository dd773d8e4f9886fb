#include "kernels/quant/qsgd_quant.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/parallel.hpp"
#include "kernels/philox_batch.hpp"
#include "sim/base/check.hpp"

namespace ccsim::kern {
namespace {

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

template <class Op>
void decode_with(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, Op&& op) {
  check_shape(bucket, bits);
  const uint64_t buckets = (count + bucket - 1) / bucket;
  const uint8_t* codes = in + 4 * buckets;
  for_buckets(count, bucket, [&](uint64_t b, uint64_t begin, uint64_t end) {
    float norm;
    std::memcpy(&norm, in + 4 * b, sizeof norm);
    for (uint64_t i = begin; i < end; ++i) op(i, qsgd_dequantize(bitpack_get(codes, i, bits), norm, bits));
  });
}

}  // namespace

void qsgd_encode(const float* x, uint64_t count, uint32_t bucket, uint32_t bits, const RngKey& key, uint64_t index_base,
                 uint8_t* out) {
  check_shape(bucket, bits);
  const uint64_t buckets = (count + bucket - 1) / bucket;
  uint8_t* codes = out + 4 * buckets;
  for_buckets(count, bucket, [&](uint64_t b, uint64_t begin, uint64_t end) {
    double sum_squares = 0.0;  // exact squares, summed in element order
    for (uint64_t i = begin; i < end; ++i) sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    const float norm = qsgd_norm(sum_squares);
    std::memcpy(out + 4 * b, &norm, sizeof norm);
    // The bucket's bytes start at begin * bits / 8; clear them so bitpack_put leaves zero padding.
    std::memset(codes + begin * bits / 8, 0, packed_bytes(end - begin, bits));
    for_each_uniform(key, index_base, begin, end,
                     [&](uint64_t i, float u) { bitpack_put(codes, i, bits, qsgd_quantize(x[i], norm, bits, u)); });
  });
}

void qsgd_decode(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* out) {
  decode_with(in, count, bucket, bits, [out](uint64_t i, float v) { out[i] = v; });
}

void qsgd_decode_accumulate(const uint8_t* in, uint64_t count, uint32_t bucket, uint32_t bits, float* acc) {
  decode_with(in, count, bucket, bits, [acc](uint64_t i, float v) { acc[i] += v; });
}

}  // namespace ccsim::kern
