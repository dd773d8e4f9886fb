#include "algorithms/lowrank/powersgd.hpp"

namespace ccsim::algo {

CompressorInfo PowerSgdCompressor::info() {
  ParamTable params;
  params.add_int("rank", "rank r of the factors P (rows x r) and Q (cols x r) of every matrix layer", 4, 1, 256)
      .add_bool("error_feedback", "add what the previous round's approximation lost to the next gradient", true)
      .add_bool("warm_start", "start each power iteration from the previous round's reduced Q", true);
  return {"powersgd",
          "PowerSGD rank-r power iteration with warm start and error feedback: matrix layers send 32(rows + cols) r "
          "bits (P in the metadata phase, Q in the collective), other layers fp32",
          std::move(params), [](const Params& p) {
            return std::make_unique<PowerSgdCompressor>(static_cast<uint32_t>(p.get_int("rank")),
                                                        p.get_bool("error_feedback"), p.get_bool("warm_start"));
          }};
}

}  // namespace ccsim::algo
