#pragma once
/// \file
/// The piece the numerics' error sums are made in: every sum of squared errors and norms is a sum
/// over consecutive pieces of this many entries, each summed in element order, the pieces' sums then
/// added in piece order, so that the sums do not depend on the thread count, and a run that holds a
/// piece of the tensor at a time (run_in_pieces) makes the same sums, bit for bit.

#include <cstdint>

namespace ccsim::algo::detail {

inline constexpr uint64_t kErrorPiece = uint64_t{1} << 16;

}  // namespace ccsim::algo::detail
