#include "traces/dump_sample.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/philox.hpp"

namespace ccsim::traces {

DumpSample sample_dump(const GradientDump& dump, uint64_t max_elements, uint64_t bucket, uint64_t seed) {
  const bool whole = dump.elements() <= max_elements;
  std::vector<DumpPiece> all;
  for (size_t l = 0; l < dump.layers().size(); ++l) {
    const GradientLayer& L = dump.layers()[l];
    const uint64_t rows = L.shape.empty() ? 1 : L.shape.front();
    const uint64_t cols = rows > 0 ? L.count / rows : 1;
    if (whole) {
      all.push_back({l, L.offset, L.count, rows, cols});
      continue;
    }
    const uint64_t rows_per_piece = std::max<uint64_t>(1, bucket / std::max<uint64_t>(cols, 1));
    for (uint64_t r = 0; r < rows; r += rows_per_piece) {
      const uint64_t n = std::min(rows_per_piece, rows - r);
      all.push_back({l, L.offset + r * cols, n * cols, n, cols});
    }
  }
  DumpSample out;
  if (whole) {
    out.pieces = std::move(all);
    for (const DumpPiece& p : out.pieces) out.elements += p.count;
    return out;
  }
  // Random order by Philox keys, then greedily take pieces that still fit.
  std::vector<std::pair<uint32_t, size_t>> keyed;
  for (size_t i = 0; i < all.size(); ++i) keyed.emplace_back(kern::random_bits_at(kern::RngKey{seed, 0, 0, 0x5A4D}, i), i);
  std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> chosen;
  for (const auto& [k, i] : keyed)
    if (out.elements + all[i].count <= max_elements) {
      chosen.push_back(i);
      out.elements += all[i].count;
    }
  std::sort(chosen.begin(), chosen.end());
  for (size_t i : chosen) out.pieces.push_back(all[i]);
  out.note = fmt::format("sampled {} of {} buckets (whole rows, <= {} entries each): {} of {} entries per worker "
                         "({:.2f}%)", out.pieces.size(), all.size(), bucket, out.elements, dump.elements(),
                         100.0 * static_cast<double>(out.elements) / static_cast<double>(dump.elements()));
  return out;
}

Result<std::vector<float>> read_sample(const GradientDump& dump, const DumpSample& sample, uint32_t worker,
                                       size_t step) {
  std::vector<float> v(sample.elements);
  uint64_t at = 0;
  size_t cached_layer = SIZE_MAX;
  std::vector<float> layer;
  for (const DumpPiece& p : sample.pieces) {
    if (p.layer != cached_layer) {
      CCSIM_ASSIGN_OR_RETURN(layer, dump.layer(worker, step, p.layer));
      cached_layer = p.layer;
    }
    const uint64_t within = p.offset - dump.layers()[p.layer].offset;
    std::copy(layer.begin() + static_cast<std::ptrdiff_t>(within),
              layer.begin() + static_cast<std::ptrdiff_t>(within + p.count), v.begin() + static_cast<std::ptrdiff_t>(at));
    at += p.count;
  }
  return v;
}

}  // namespace ccsim::traces
