#pragma once
/// \file
/// powersgd: PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019, Alg. 1 and §3) at a fixed
/// rank r: one step of distributed power iteration per round on every matrix layer, with warm
/// start and error feedback; the engine, its round phases and its exact wire format are in
/// algorithms/lowrank/low_rank.hpp.
///
/// Per compressed rows x cols layer and rank: 4 rows r bytes in the metadata all-reduce (P) and
/// 4 cols r bytes in the collective (Q), instead of 4 rows cols; uncompressed layers (1-D ones and
/// matrices with r (rows + cols) >= rows cols) cost 4 bytes per element in the collective.
///
/// Parameters: rank (default 4, in [1, 256]); error_feedback (default true: each rank adds what
/// the previous round's approximation lost to its next gradient); warm_start (default true: the
/// previous round's reduced Q starts the next power iteration; false draws a fresh Gaussian Q).

#include "algorithms/lowrank/low_rank.hpp"

namespace ccsim::algo {

/// PowerSGD at a fixed rank.
class PowerSgdCompressor final : public LowRankCompressor {
 public:
  static CompressorInfo info();
  /// Its CUDA kernels (algorithms/device_ops.hpp), registered with info() where the build has CUDA;
  /// defined in algorithms/lowrank/lowrank_device.cpp, compiled only then.
  static const DeviceOps& device_ops();
  PowerSgdCompressor(uint32_t rank, bool error_feedback, bool warm_start)
      : LowRankCompressor(rank, error_feedback, warm_start) {}

  std::string_view name() const override { return "powersgd"; }
};

}  // namespace ccsim::algo
