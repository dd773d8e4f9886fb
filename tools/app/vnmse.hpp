#pragma once
/// \file
/// `ccsim vnmse`: compression error of schemes on a gradient dump (or synthetic tensors) pushed
/// through a real collective schedule. This file turns the command's options into a measurement
/// (algorithms/error_study.hpp measures; traces/dump_sample.hpp samples large dumps) and formats it.
///
/// Synthetic input (instead of a dump): every rank draws its own i.i.d. N(0,1) tensor of the given
/// shape from Philox (independent of the seeds, which vary only the compression's randomness), as
/// in EQuARX's microbenchmark (Fig. 7); with `structure`, the scenario generator's layered,
/// lognormal-envelope gradients instead.
///
/// Every option is checked, and every scheme against every bucket of the collective, before any
/// measurement starts.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "algorithms/error_study.hpp"
#include "sim/base/status.hpp"

namespace ccsim::app {

struct VnmseOptions {
  std::string gradients;                ///< gradient dump directory (manifest.json), or:
  std::string synthetic;                ///< "ROWSxCOLS" or "N": i.i.d. N(0,1) per rank (fixed data, one step)
  /// With `synthetic`: "KEY=VALUE,..." draws the entries from traces/synthetic_gradients.hpp instead
  /// (keys layers, scale_decades, correlation, envelope_sigma, envelope_span, envelope_correlation,
  /// as a scenario's synthetic gradients; unnamed keys keep that generator's defaults). Empty:
  /// i.i.d. N(0,1).
  std::string structure;
  std::vector<std::string> algos;       ///< "name" or "name:k=v,k=v"
  std::vector<std::string> params;      ///< "k=v", applied to every algo (a key it lacks is an error)
  std::string operation = "allreduce";
  std::string algorithm = "ring";
  uint32_t ranks = 0;                   ///< 0: the dump's worker count
  std::vector<uint64_t> steps;          ///< training steps to use (empty: all dumped steps)
  uint32_t seeds = 1;                   ///< repetitions (for the bias and the spread)
  /// Rounds run on each step's gradients before the measured one, on the same scheme instance (a
  /// fresh one per seed and step), so that schemes adapting across rounds (OmniReduce's k, MX's
  /// mu) are measured settled. 0: the first round, from the scheme's initial state.
  uint32_t warmup = 0;
  uint64_t seed = 0;                    ///< first seed; repetitions use seed, seed + 1, ...
  uint32_t gpus_per_node = 1;           ///< for hierarchical collectives
  uint32_t segments = 1;
  uint64_t max_elements = uint64_t{1} << 26;  ///< per worker; larger dumps are sampled
  uint64_t bucket = uint64_t{1} << 20;        ///< sampling piece size (entries)
  /// A size ("25MB"): compress and reduce each PyTorch DDP bucket of the tensor's layers on its own
  /// (bucket_cap of fp32 gradient, layers packed from the last, never split; sim::make_buckets), as
  /// a DDP communication hook does; bucket b (in tensor order) draws its random numbers from seed
  /// XOR b * 0x9E3779B97F4A7C15. Empty: the whole tensor at once.
  std::string ddp_bucket;
  std::string ddp_first_bucket;               ///< DDP's smaller first bucket (empty: as the others)
};

/// Error of one scheme at one step, and what a measurement found (algorithms/error_study.hpp).
using VnmseRow = algo::ErrorRow;
using SuperGroupSkew = algo::SuperGroupSkew;
using VnmseReport = algo::ErrorReport;

/// Runs the measurement. Bad options, unknown schemes or parameters, unreadable dumps are input
/// errors (kInvalidArgument / kNotFound, exit code 2).
Result<VnmseReport> run_vnmse(const VnmseOptions& options);

/// The terminal table (overall; per layer and per hop depth when `detail`).
std::string format_vnmse(const VnmseReport& report, bool detail);
/// CSV: one row per (scheme, step, kind, index): kind = overall | layer | hop.
std::string vnmse_csv(const VnmseReport& report);

}  // namespace ccsim::app
