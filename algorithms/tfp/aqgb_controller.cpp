#include "algorithms/tfp/aqgb_controller.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ccsim::algo {

AqgbController::Choice AqgbController::stage1(double now_s, double rate_Bps, bool last_block, double next_block_s,
                                              uint64_t backlog_entries) const {
  double q = q_floor_;
  std::string detail;
  if (last_block) {
    detail = "last block available: q_floor";
  } else {
    const double u = static_cast<double>(backlog_entries) * kEntryBits / 8.0;
    if (next_block_s <= now_s) {
      detail = fmt::format("deadline {:.6f} s passed (u {:.0f} B)", next_block_s, u);
    } else {
      const double q1 = rate_Bps * (next_block_s - now_s) / u;
      detail = fmt::format("b {:.6g} B/s, u {:.0f} B, deadline {:.6f} s, q1 {:.4g}", rate_Bps, u, next_block_s, q1);
      q = std::clamp(q1, q_floor_, 1.0);
    }
  }
  // TFP keeps the first L_F = ceil(32 q) bits of each entry.
  const double lf = std::clamp(std::ceil(kEntryBits * q - 1e-9), 1.0, static_cast<double>(kEntryBits));
  return {lf, kEntryBits - lf, lf, fmt::format("q {:.4g}; {}", q, detail)};
}

AqgbController::Choice AqgbController::stage2(double now_s, double rate_Bps, double forward_s,
                                              uint64_t remaining_entries, double deferred_bits) const {
  const double u = static_cast<double>(remaining_entries) * deferred_bits / 8.0;
  const double q2 = std::clamp(rate_Bps * (forward_s - now_s) / u, q_floor_, 1.0);
  const double bits = deferred_bits * q2;
  return {bits, 0, q2,
          fmt::format("b {:.6g} B/s, u {:.0f} B, forward at {:.6f} s, {:.4g} extra bits per entry", rate_Bps, u,
                      forward_s, bits)};
}

std::string AqgbController::describe() const {
  return fmt::format("AQGB adaptive broadcast (TFP), q_floor {}, second stage {}", q_floor_,
                     second_stage_ ? "on" : "off");
}

}  // namespace ccsim::algo
