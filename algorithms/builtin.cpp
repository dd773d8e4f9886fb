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
namespace {

// CCSIM_WITH_DEVICE_OPS(info, ops): a scheme's info with its device ops (CompressorInfo::device_ops)
// where this build has CUDA; without it the *_device.cpp files are not compiled and `ops` is
// dropped unevaluated.
#ifdef CCSIM_HAVE_CUDA
CompressorInfo with_device_ops(CompressorInfo info, const DeviceOps& ops) {
  info.device_ops = &ops;
  return info;
}
#define CCSIM_WITH_DEVICE_OPS(info, ops) with_device_ops(info, ops)
#else
#define CCSIM_WITH_DEVICE_OPS(info, ops) info
#endif

}  // namespace

void register_builtin_compressors(CompressorRegistry& registry) {
  registry.add(Fp32Compressor::info());
  registry.add(CCSIM_WITH_DEVICE_OPS(Bf16Compressor::info(), Bf16Compressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(BlockInt8Compressor::info(), BlockInt8Compressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(Fp16Compressor::info(), Fp16Compressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(TfpCompressor::info(), TfpCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(QsgdCompressor::info(), QsgdCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(EquarxCompressor::info(), EquarxCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(Sdp4bitQuantCompressor::info(), Sdp4bitQuantCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(PowerSgdCompressor::info(), PowerSgdCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(EdgcCompressor::info(), EdgcCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(Sdp4bitTlqCompressor::info(), Sdp4bitTlqCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(Sdp4bitWeightCompressor::qw_info(), Sdp4bitWeightCompressor::qw_device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(Sdp4bitWeightCompressor::qwd_info(), Sdp4bitWeightCompressor::qwd_device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(OmniReduceCompressor::info(), OmniReduceCompressor::device_ops()));
  registry.add(CCSIM_WITH_DEVICE_OPS(DynamiqCompressor::info(), DynamiqCompressor::device_ops()));
  for (const kern::MinifloatKind element :
       {kern::MinifloatKind::kFp8E4M3, kern::MinifloatKind::kFp6E3M2, kern::MinifloatKind::kFp4E2M1})
    registry.add(CCSIM_WITH_DEVICE_OPS(MxCompressor::info(element), MxCompressor::device_ops(element)));
  registry.add(CCSIM_WITH_DEVICE_OPS(ThcCompressor::info(), ThcCompressor::device_ops()));
}

}  // namespace ccsim::algo
