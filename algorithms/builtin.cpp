#include "algorithms/bf16/bf16.hpp"
#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/equarx/equarx.hpp"
#include "algorithms/fp16/fp16.hpp"
#include "algorithms/fp32/fp32.hpp"
#include "algorithms/int4/sdp4bit_q.hpp"
#include "algorithms/int8/block_int8.hpp"
#include "algorithms/qsgd/qsgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/tfp/tfp.hpp"

namespace ccsim::algo {

void register_builtin_compressors(CompressorRegistry& registry) {
  registry.add(Fp32Compressor::info());
  registry.add(Bf16Compressor::info());
  registry.add(BlockInt8Compressor::info());
  registry.add(Fp16Compressor::info());
  registry.add(TfpCompressor::info());
  registry.add(QsgdCompressor::info());
  registry.add(EquarxCompressor::info());
  registry.add(Sdp4bitQuantCompressor::info());
  registry.add(DynamiqCompressor::info());
}

}  // namespace ccsim::algo
