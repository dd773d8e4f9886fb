#pragma once
/// \file
/// The CPU's DynamiQ super-group encoder and decoder: dynamiq_encode_sg() (dynamiq_quant.hpp, the reference
/// the CUDA kernel also follows) with the random numbers of a whole super-group drawn at once
/// through the batched Philox (philox_batch.hpp) before the entries are coded. Same bytes as the
/// reference for every input (tests compare the two).

#include <cstdint>

#include "kernels/quant/dynamiq_quant.hpp"

namespace ccsim::kern {

/// dynamiq_encode_sg() with batched draws; same arguments, same output bytes.
void dynamiq_encode_sg_batched(const float* x, uint64_t m, const DynamiqSgCoding& c, const RngKey& key,
                               const RngKey& shared, uint32_t rank, uint32_t ranks, uint64_t first,
                               uint64_t first_group, uint8_t* out);

/// dynamiq_decode_sg() through a table of the width's signed levels (a code's value is its table
/// entry times the group's scale, the reference's product exactly); same output bits.
void dynamiq_decode_sg_table(const uint8_t* in, uint64_t m, const DynamiqSgCoding& c, bool accumulate, float* out);

}  // namespace ccsim::kern
