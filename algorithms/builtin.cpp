#include "algorithms/bf16/bf16.hpp"
#include "algorithms/fp32/fp32.hpp"
#include "algorithms/int8/block_int8.hpp"
#include "algorithms/registry.hpp"

namespace ccsim::algo {

void register_builtin_compressors(CompressorRegistry& registry) {
  registry.add(Fp32Compressor::info());
  registry.add(Bf16Compressor::info());
  registry.add(BlockInt8Compressor::info());
}

}  // namespace ccsim::algo
