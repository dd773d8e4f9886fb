#pragma once
/// \file
/// AQGB's two-stage adaptive ratio control (AQGB §4.3) over TFP's truncation (tfp.hpp): how many of
/// the 32 bits of each fp32 gradient entry a sender's next broadcast segment carries. The broadcast
/// protocol (sim/training/broadcast_sync.hpp) observes; this class decides.
///
///  * Stage 1 (every block of the round once): q1 = b(t)·(t_next − t) / u(t), with b(t) the
///    per-receiver rate the sender's last segment achieved, u(t) the original size of its generated
///    but undelivered gradients (32 bits per entry) and t_next the time its next block is expected;
///    the ratio is q = max(q̄, min(q1, 1)), and q̄ once the round's last block exists or the
///    deadline has passed. TFP sends the first L_F = ⌈32·q⌉ bits of each entry (at least 1) and
///    defers the other 32 − L_F to stage 2.
///  * Stage 2 (after stage 1, blocks in forward order, while block j's next forward has not
///    started): the deferred bits at ratio q2 = max(q̄, min(b(t)·(t_j^FP − t) / u(g_j^S), 1)), u the
///    block's deferred bits not sent yet.
/// Decisions carry their inputs (logged per segment).

#include <cstdint>
#include <string>

namespace ccsim::algo {

/// AQGB's ratio controller with TFP's bit arithmetic.
class AqgbController {
 public:
  /// One segment's decision.
  struct Choice {
    double bits = 0;      ///< bits per entry the segment carries
    double deferred = 0;  ///< stage 1: bits per entry left for stage 2
    double value = 0;     ///< what is logged: L_F (stage 1) or q2 (stage 2)
    std::string detail;   ///< the inputs it was decided from
  };

  /// `q_floor`: q̄, the lowest ratio; `second_stage`: whether deferred bits are sent at all.
  AqgbController(double q_floor, bool second_stage) : q_floor_(q_floor), second_stage_(second_stage) {}

  /// Stage 1 at time `now_s` for a sender whose last segment ran at `rate_Bps` per receiver, with
  /// `backlog_entries` entries undelivered and its next block expected at `next_block_s` (ignored
  /// when `last_block`: the round's last block exists).
  Choice stage1(double now_s, double rate_Bps, bool last_block, double next_block_s, uint64_t backlog_entries) const;
  /// Stage 2 of a block whose next forward is expected at `forward_s`, `remaining_entries` of its
  /// entries still missing `deferred_bits` bits each (their mean over the block).
  Choice stage2(double now_s, double rate_Bps, double forward_s, uint64_t remaining_entries,
                double deferred_bits) const;
  /// Bytes of `entries` entries at the floor q̄ (32·q̄ bits each).
  double floor_bytes(double entries) const { return entries * kEntryBits / 8.0 * q_floor_; }
  bool second_stage() const { return second_stage_; }
  double q_floor() const { return q_floor_; }
  /// "AQGB adaptive broadcast (TFP), q_floor 0.125, second stage on".
  std::string describe() const;

 private:
  static constexpr uint32_t kEntryBits = 32;  // fp32 gradients
  double q_floor_;
  bool second_stage_;
};

}  // namespace ccsim::algo
