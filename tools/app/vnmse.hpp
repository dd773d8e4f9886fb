#pragma once
/// \file
/// `ccsim vnmse`: compression error of schemes on a gradient dump pushed through a real collective
/// schedule (the numerics interpreter), per scheme and dumped step, averaged over seeds: vNMSE
/// (overall, per layer, per hop depth), the worst rank, the relative bias of the mean over seeds,
/// bits per entry and the metadata phase's bytes.
///
/// Rounds: the dumped steps are the rounds of one run (round index = step index), so stateful
/// schemes (error feedback, adaptive scales, rank controllers) carry their state from step to step.
/// Every seed repeats the run with a fresh instance. Rank r reads worker r mod W of a W-worker dump.
///
/// Synthetic input (instead of a dump): every rank draws its own i.i.d. N(0,1) tensor of the given
/// shape from Philox (independent of the seeds, which vary only the compression's randomness), as
/// in EQuARX's microbenchmark (Fig. 7).
///
/// Sampling: a dump larger than max_elements per worker is sampled in whole buckets: every layer is
/// cut into pieces of whole rows of at most `bucket` entries, pieces are drawn at random (Philox,
/// keyed by the seed) until max_elements, and the chosen pieces, kept in tensor order, form the
/// tensor (matrix pieces keep their shape, with fewer rows). The report says so.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

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

/// Error of one scheme at one step.
struct VnmseRow {
  std::string label;           ///< scheme name plus its explicit parameters
  std::string scheme;
  nlohmann::json params;       ///< resolved parameters (defaults filled in)
  uint64_t step = 0;           ///< training step of the dump
  double vnmse = 0;            ///< mean over seeds of the vNMSE (mean over ranks)
  double vnmse_std = 0;        ///< standard deviation over seeds (0 with one seed)
  double vnmse_max_rank = 0;   ///< worst rank, worst seed
  double mse = 0;              ///< mean over seeds and ranks of ‖X − X̂‖² / entries (absolute)
  double bias = 0;             ///< ‖mean over seeds and ranks of X̂ − X‖² / ‖X‖²
  double bias_floor = 0;       ///< what an unbiased scheme's bias would be about: vnmse / seeds
  double bits_per_entry = 0;   ///< 8 · (one rank's tensor encoded once + metadata phase) / entries
  uint64_t plan_bytes_per_rank = 0;
  uint64_t wire_bytes = 0;     ///< all transfers of the collective (one seed)
  bool unbiased = false;       ///< what the scheme claims
  std::vector<double> layer_vnmse;  ///< per layer (allreduce only), mean over seeds
  std::vector<double> hop_vnmse;    ///< per hop depth k = 1..ranks (index k-1), NaN where no message
};

/// How concentrated the gradient's energy is over 256-entry super-groups (DynamiQ Fig. 1 and
/// Fig. 3): F_j = sum over the ranks of the squared norm of super-group j. Variable bit widths pay
/// off when a small share of the super-groups holds nearly all of the sum of F_j.
struct SuperGroupSkew {
  uint64_t step = 0;
  uint64_t super_groups = 0;
  double top10 = 0, top30 = 0, top50 = 0;  ///< share of sum F_j held by the largest 10/30/50% of super-groups
  double below_median_100 = 0;             ///< fraction of super-groups with F_j < median / 100
  /// Share of the summed gradient's energy (sum over ranks, then squares) held by its smallest
  /// floor(n / 2) super-groups: what any selection keeping half of them (OmniReduce at 8 bits) loses at least.
  double sum_low50 = 0;
};

struct VnmseReport {
  std::string gradients_desc;
  std::string collective_desc;
  std::string sampling_note;   ///< empty when the whole dump was used
  uint32_t ranks = 0;
  uint64_t elements = 0;       ///< entries per rank actually used
  uint64_t buckets = 1;        ///< DDP buckets reduced one by one (1: the whole tensor at once)
  std::vector<std::string> layer_names;
  std::vector<SuperGroupSkew> skew;  ///< per step of the input
  std::vector<VnmseRow> rows;
};

/// Runs the measurement. Bad options, unknown schemes or parameters, unreadable dumps are input
/// errors (kInvalidArgument / kNotFound, exit code 2).
Result<VnmseReport> run_vnmse(const VnmseOptions& options);

/// The terminal table (overall; per layer and per hop depth when `detail`).
std::string format_vnmse(const VnmseReport& report, bool detail);
/// CSV: one row per (scheme, step, kind, index): kind = overall | layer | hop.
std::string vnmse_csv(const VnmseReport& report);

}  // namespace ccsim::app
