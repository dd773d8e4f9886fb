#pragma once
/// \file
/// The CPU's DynamiQ super-group encoder and decoder: dynamiq_encode_sg() (dynamiq_quant.hpp, the reference
/// the CUDA kernel also follows) with the random numbers of a whole super-group drawn at once
/// through the batched Philox (philox_batch.hpp), the correlated roundings' Feistel permutations
/// and the entries' grid roundings in AVX2 lanes (a plain loop over the element functions on other
/// machines). Same bytes as the reference for every input (tests compare the two, with the AVX2
/// paths and without).

#include <cstdint>

#include "kernels/quant/dynamiq_quant.hpp"

namespace ccsim::kern {

/// The uniforms dynamiq_encode_sg() rounds entries first .. first + m - 1 with, drawn at once:
/// u[j] = correlated_uniform(shared, key, first + j, rank, ranks) when `correlated`, else (or with
/// ranks <= 1) uniform_at(key, first + j). Same bits as those functions.
void dynamiq_uniforms(const RngKey& key, const RngKey& shared, bool correlated, uint32_t rank, uint32_t ranks,
                      uint64_t first, uint64_t m, float* u);

/// dynamiq_encode_sg() with batched draws, group maxima and entry codes eight lanes at a time (AVX2
/// where the machine has it), then the codes packed a row at a time; same arguments, same bytes.
void dynamiq_encode_sg_batched(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                               const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                               uint64_t first_group, uint8_t* out);

/// dynamiq_encode_sg_batched() with the uniforms already drawn: u[j] as dynamiq_uniforms() draws it
/// for entry first + j (an encoder of many super-groups draws their consecutive entries at once).
void dynamiq_encode_sg_drawn(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                             uint64_t first_group, const float* u, uint8_t* out);

/// dynamiq_decode_sg() through a table of the width's signed levels (a code's value is its table
/// entry times the group's scale, the reference's product exactly); same output bits.
void dynamiq_decode_sg_table(const uint8_t* in, uint64_t m, const DynamiqSgCoding& c, bool accumulate, float* out);

}  // namespace ccsim::kern
