#pragma once
/// \file
/// Compression error of schemes on real per-rank tensors pushed through a collective's schedule
/// (the numerics interpreter, through the one lowering of compressed_collective.hpp): vNMSE per
/// step, averaged over seeds, with its spread, the worst rank, the relative bias of the mean over
/// seeds, bits per entry with the metadata phase, per layer and per hop depth. `ccsim vnmse` reads
/// the tensors (a gradient dump or synthetic ones) and reports what this file measures.
///
/// Rounds: every (seed, step, bucket) gets a fresh scheme instance, whose rounds 0 .. warmup - 1
/// on that step's tensors let schemes that adapt across rounds (OmniReduce's k, MX's mu) settle;
/// round `warmup` is measured. Rank r reads worker r mod W of W workers' tensors.
///
/// Buckets: the tensor is reduced as one bucket, or bucket by bucket as a PyTorch DDP
/// communication hook does (ddp_tensor_buckets()); bucket b draws its random numbers from
/// seed XOR b * 0x9E3779B97F4A7C15 (bucket 0 those of the whole tensor). The buckets' outputs,
/// errors and bytes add up to the tensor's.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/compressor.hpp"
#include "algorithms/numerics.hpp"
#include "sim/base/status.hpp"
#include "topology/collectives/collectives.hpp"
#include "traces/synthetic_gradients.hpp"

namespace ccsim::algo {

/// A scheme whose error is measured.
struct StudyScheme {
  std::string label;        ///< scheme name plus its explicit parameters
  std::string name;
  nlohmann::json params;    ///< as given (the registry fills in the defaults)
  nlohmann::json resolved;  ///< defaults filled in
};

/// Error of one scheme at one step.
struct ErrorRow {
  std::string label;
  std::string scheme;
  nlohmann::json params;       ///< resolved parameters
  uint64_t step = 0;           ///< training step of the dump
  double vnmse = 0;            ///< mean over seeds of the vNMSE (mean over ranks)
  double vnmse_std = 0;        ///< standard deviation over seeds (0 with one seed)
  double vnmse_max_rank = 0;   ///< worst rank, worst seed
  double mse = 0;              ///< mean over seeds and ranks of ‖X − X̂‖² / entries (absolute)
  double bias = 0;             ///< ‖mean over seeds and ranks of X̂ − X‖² / ‖X‖² (allreduce; NaN otherwise)
  double bias_floor = 0;       ///< what an unbiased scheme's bias would be about: vnmse / seeds
  double bits_per_entry = 0;   ///< 8 · (one rank's tensor encoded once + metadata phase) / entries
  double payload_bits = 0;     ///< its parts per entry: the entries' codes,
  double metadata_bits = 0;    ///< the metadata sent with them,
  double plan_bits = 0;        ///< and the metadata phase
  uint64_t plan_bytes_per_rank = 0;
  uint64_t wire_bytes = 0;     ///< all transfers of the collective (one seed)
  bool unbiased = false;       ///< what the scheme claims
  std::vector<double> layer_vnmse;  ///< per layer (allreduce only), mean over seeds
  std::vector<double> hop_vnmse;    ///< per hop depth k = 1..ranks (index k-1), NaN where no message
};

/// How concentrated the tensors' energy is over 256-entry super-groups (DynamiQ Fig. 1 and Fig. 3):
/// F_j = sum over the ranks of the squared norm of super-group j. Variable bit widths pay off when
/// a small share of the super-groups holds nearly all of the sum of F_j.
struct SuperGroupSkew {
  uint64_t step = 0;
  uint64_t super_groups = 0;
  double top10 = 0, top30 = 0, top50 = 0;  ///< share of sum F_j held by the largest 10/30/50% of super-groups
  double below_median_100 = 0;             ///< fraction of super-groups with F_j < median / 100
  /// Share of the summed gradient's energy (sum over ranks, then squares) held by its smallest
  /// floor(n / 2) super-groups: what any selection keeping half of them (OmniReduce at 8 bits) loses at least.
  double sum_low50 = 0;
};
/// The skew of `ranks` ranks' tensors (rank r reads `workers[r % size]`).
SuperGroupSkew super_group_skew(uint64_t step, const std::vector<std::vector<float>>& workers, uint32_t ranks);

/// A bucket of the tensor reduced on its own: entries [offset, offset + count), whole layers, with
/// their shapes relative to the bucket.
struct TensorBucket {
  uint64_t offset = 0, count = 0;
  std::vector<LayerShape> layout;
  uint32_t first_layer = 0;  ///< index of its first layer in the tensor's layout
};
/// PyTorch DDP's bucketing of a tensor's layers (traces::make_ddp_buckets at `cap` bytes of fp32
/// gradient, `first` for the first bucket; 0: as the others), in tensor order.
/// REQUIRES: `layout` tiles the tensor in order.
std::vector<TensorBucket> ddp_tensor_buckets(std::span<const LayerShape> layout, uint64_t cap, uint64_t first);

/// What to measure on.
struct ErrorStudy {
  const topo::CollectiveInfo* collective = nullptr;
  uint32_t ranks = 0;
  uint32_t seeds = 1;
  uint64_t seed = 0;     ///< first seed; repetitions use seed, seed + 1, ...
  uint32_t warmup = 0;   ///< rounds before the measured one (file comment)
  topo::CollectiveOptions base;  ///< segments, gpus_per_node
  std::vector<LayerShape> layout;
  std::vector<TensorBucket> buckets;  ///< at least one (the whole tensor: {0, elements, layout})
  std::vector<uint64_t> steps;        ///< step numbers of `inputs`
  /// [step][worker]: each worker's tensor at that step (the ranks read them round-robin).
  std::vector<std::vector<std::vector<float>>> inputs;
};

/// Measures every scheme at every step. REQUIRES: every scheme and bucket passed
/// CompressedCollective::check on the study's collective (a failure here is internal).
Result<std::vector<ErrorRow>> study_errors(std::span<const StudyScheme> schemes, const ErrorStudy& study);

/// A whole measurement as `ccsim vnmse` asks for it: where the tensors come from and how they are
/// reduced. Input errors carry the request field they are about as their pointer ("/steps",
/// "/ranks", "/algo", "/collective", "/ddp_bucket").
struct ErrorRequest {
  std::vector<StudyScheme> schemes;
  // A gradient dump (traces/gradient_dump.hpp), sampled when large (traces/dump_sample.hpp) ...
  std::string dump;               ///< its directory ("": synthetic tensors)
  std::vector<uint64_t> steps;    ///< dumped steps to use (empty: all, in order)
  uint64_t max_elements = uint64_t{1} << 26;  ///< per worker; larger dumps are sampled
  uint64_t bucket = uint64_t{1} << 20;        ///< sampling piece size (entries)
  // ... or synthetic tensors: every rank draws its own, i.i.d. N(0,1) (independent of the seeds,
  // which vary only the compression's randomness), or from the scenario generator with `structure`.
  uint64_t rows = 0, cols = 1;    ///< shape (a 1-D tensor of rows entries when !matrix)
  bool matrix = false;
  std::string shape_text;         ///< the shape as given, for the description
  std::optional<traces::SyntheticGradientSpec> structure;
  std::string operation = "allreduce";
  std::string algorithm = "ring";
  uint32_t ranks = 0;             ///< 0: the dump's workers (synthetic: 8)
  uint32_t seeds = 1;
  uint64_t seed = 0;
  uint32_t warmup = 0;
  topo::CollectiveOptions base;   ///< segments, gpus_per_node
  uint64_t ddp_cap = 0;           ///< bytes of fp32 gradient per DDP bucket (0: the whole tensor at once)
  uint64_t ddp_first = 0;         ///< the first bucket's cap (0: as the others)
};

/// What a measurement found.
struct ErrorReport {
  std::string gradients_desc;
  std::string collective_desc;
  std::string sampling_note;   ///< empty when the whole dump was used
  uint32_t ranks = 0;
  uint64_t elements = 0;       ///< entries per rank actually used
  uint64_t buckets = 1;        ///< DDP buckets reduced one by one (1: the whole tensor at once)
  std::vector<std::string> layer_names;
  std::vector<SuperGroupSkew> skew;  ///< per step of the input
  std::vector<ErrorRow> rows;
};

/// Reads the tensors, checks every scheme against every bucket of the collective (input errors,
/// before any measurement), and measures.
Result<ErrorReport> measure_errors(const ErrorRequest& request);

}  // namespace ccsim::algo
