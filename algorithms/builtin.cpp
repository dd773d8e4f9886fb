#include "algorithms/bf16/bf16.hpp"
#include "algorithms/dynamiq/dynamiq.hpp"
#include "algorithms/equarx/equarx.hpp"
#include "algorithms/fp16/fp16.hpp"
#include "algorithms/fp32/fp32.hpp"
#include "algorithms/int4/sdp4bit_pipeline.hpp"
#include "algorithms/int4/sdp4bit_q.hpp"
#include "algorithms/int8/block_int8.hpp"
#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/lowrank/powersgd.hpp"
#include "algorithms/mx/mx.hpp"
#include "algorithms/omnireduce/omnireduce.hpp"
#include "algorithms/qsgd/qsgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/tfp/tfp.hpp"
#include "algorithms/thc/thc.hpp"

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
  registry.add(PowerSgdCompressor::info());
  registry.add(EdgcCompressor::info());
  registry.add(Sdp4bitTlqCompressor::info());
  registry.add(Sdp4bitWeightCompressor::qw_info());
  registry.add(Sdp4bitWeightCompressor::qwd_info());
  registry.add(OmniReduceCompressor::info());
  registry.add(DynamiqCompressor::info());
  registry.add(MxCompressor::info(kern::MinifloatKind::kFp8E4M3));
  registry.add(MxCompressor::info(kern::MinifloatKind::kFp6E3M2));
  registry.add(MxCompressor::info(kern::MinifloatKind::kFp4E2M1));
  registry.add(ThcCompressor::info());
}

}  // namespace ccsim::algo
