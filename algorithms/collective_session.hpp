#pragma once
/// \file
/// A compressed collective run round after round on real per-rank tensors, as training runs a
/// bucket: one scheme instance keeps its state across rounds (error feedback, warm starts,
/// OmniReduce's k, MX's mu, DynamiQ's per-round search, EDGC's windows), and round k draws the
/// random numbers of round k. Each round goes through the one lowering (compressed_collective.hpp):
/// the metadata phase on every rank's tensor, then the collective's schedule on the numerics
/// interpreter. `ccsim vnmse` (error_study.hpp) and the Python module run their rounds here.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/compressed_collective.hpp"
#include "algorithms/compressor.hpp"
#include "algorithms/numerics.hpp"
#include "sim/base/status.hpp"
#include "topology/collectives/collectives.hpp"

namespace ccsim::algo {

/// What one round did.
struct SessionRound {
  uint32_t round = 0;              ///< the round's number (its random streams)
  std::vector<ErrorStats> errors;  ///< per rank, against the exact result of the operation
  PlanReport plan;                 ///< the metadata phase
  RoundBytes bytes;                ///< one rank's: the reduced vector encoded once, the metadata phase
  NumericsStats stats;             ///< wire bytes of every transfer, hop errors when asked
  std::vector<PlanDecision> decisions;  ///< what the scheme's controller fixed for this round
  /// 8 · bytes.total() / entries: bits per entry with the metadata phase.
  double bits_per_entry = 0;
};

/// A scheme instance on one collective over a group of ranks, for tensors of one size.
class CollectiveSession {
 public:
  /// Creates the scheme (registry; parameters checked, defaults filled in) and checks that it can
  /// run on `collective` over `ranks` ranks for `elements` entries under `base` options, with the
  /// layer `layout` (empty: one row vector). Input errors name the scheme and the collective; their
  /// pointers are "/params/..." for a parameter and "/collective" for the collective's limits.
  static Result<std::unique_ptr<CollectiveSession>> create(const std::string& scheme, const nlohmann::json& params,
                                                           const topo::CollectiveInfo& collective, uint32_t ranks,
                                                           uint64_t elements, const topo::CollectiveOptions& base,
                                                           std::vector<LayerShape> layout, uint64_t seed);

  /// Runs the next round: `outputs[r]` receives rank r's input and then what rank r ends with.
  /// Errors are computed against `inputs`; a non-finite one is an input error that explains it.
  /// REQUIRES: inputs.size() == outputs.size() == ranks(), each of elements() entries, the outputs
  /// apart from the inputs.
  Result<SessionRound> run(std::span<const std::span<const float>> inputs, std::span<const std::span<float>> outputs,
                           bool hop_errors = false);

  Compressor& compressor() const { return *comp_; }
  uint32_t ranks() const { return lowering_->ranks(); }
  uint64_t elements() const { return lowering_->elements(); }
  uint64_t seed() const { return seed_; }
  /// The number of the next round.
  uint32_t round() const { return round_; }
  /// The parameters with their defaults filled in.
  const nlohmann::json& resolved_params() const { return resolved_; }

 private:
  CollectiveSession() = default;
  std::unique_ptr<Compressor> comp_;
  std::unique_ptr<CompressedCollective> lowering_;
  std::vector<LayerShape> layout_;
  nlohmann::json resolved_;
  uint64_t seed_ = 0;
  uint32_t round_ = 0;
};

}  // namespace ccsim::algo
