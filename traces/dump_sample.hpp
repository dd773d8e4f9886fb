#pragma once
/// \file
/// The tensor a measurement takes from a gradient dump (gradient_dump.hpp): the whole dump, or,
/// when it holds more than `max_elements` entries per worker, a sample in whole buckets: every
/// layer is cut into pieces of whole rows of at most `bucket` entries, pieces are drawn at random
/// (Philox, keyed by the seed) while they still fit in `max_elements`, and the chosen pieces, kept
/// in tensor order, form the tensor (matrix pieces keep their shape, with fewer rows).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/status.hpp"
#include "traces/gradient_dump.hpp"

namespace ccsim::traces {

/// Entries [offset, offset + count) of the flattened dump: whole rows of layer `layer`.
struct DumpPiece {
  size_t layer = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t rows = 0, cols = 1;
};

/// The pieces of a dump a measurement uses.
struct DumpSample {
  std::vector<DumpPiece> pieces;
  uint64_t elements = 0;  ///< per worker
  std::string note;       ///< what was sampled ("" when the whole dump is used)
};

/// The whole dump, or its sample (file comment).
DumpSample sample_dump(const GradientDump& dump, uint64_t max_elements, uint64_t bucket, uint64_t seed);

/// Worker `worker`'s tensor at dumped step index `step`: its pieces, concatenated.
Result<std::vector<float>> read_sample(const GradientDump& dump, const DumpSample& sample, uint32_t worker,
                                       size_t step);

}  // namespace ccsim::traces
