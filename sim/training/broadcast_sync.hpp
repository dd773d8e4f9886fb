#pragma once
/// \file
/// Gradient broadcast (AQGB §4.2): every worker sends each of its gradient blocks to every other
/// worker (reliable broadcast as unicast flows over the shared network), newest block first (last
/// come, first served: backward produces the blocks in the reverse of the order the next forward
/// needs them). A block's update has arrived once every worker's copy of it has reached every
/// worker; all workers then use the same data.
///
/// Data go out in segments of `segment_params` gradient entries, one at a time per sender; a
/// segment is done when all receivers have it. Bits per entry on the wire:
///  * fixed: `fixed_bits` (32 = no quantization; a fixed quantizer's exact size per entry);
///  * adaptive (AQGB §4.3): the sender re-decides the quantization ratio at every segment.
///    Stage 1 (all of the round's blocks once): q1 = b(t)·(t_next − t) / u(t), where b(t) is the
///    per-receiver rate its last segment achieved, u(t) the original size of its generated but
///    undelivered gradients and t_next the time its next block is expected (its previous round's
///    backward times); the ratio used is max(q̄, q1) (at most 1), and q̄ once the round's last block
///    exists or the deadline has passed. TFP sends the first L_F = ⌈32·q⌉ bits of each fp32 entry.
///    Stage 2 (after its stage 1): for blocks in forward order, the remaining 32 − L_F bits are
///    sent at ratio max(q̄, q2), q2 = b(t)·(t_j^FP − t) / u(g_j^S), while the next forward of block
///    j has not started; t_j^FP is the latest of all workers' estimates of that start (AQGB
///    exchanges them; here they are read directly, without their small messages). A block's
///    forward waits for its stage-2 segments already in flight, so every worker sees the same data.
///
/// Compression kernels run on each worker's compression stream, one at a time in the order they
/// are issued: the sender encodes a segment before sending it (kEncode, 4 B per entry in + the wire
/// bytes out); each receiver decodes and accumulates every segment it receives (kDecodeAccumulate:
/// the wire bytes in + 4 B per entry read and written), so a worker's m − 1 incoming copies queue
/// behind one another and behind its own encodes. A block has arrived at a worker once its last
/// decode there has ended (the memory traffic is Compressor::memory_bytes' for these ops).
///
/// Every decision is logged (TrainingJob::log) with its inputs.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/kernel_cost.hpp"
#include "sim/training/training_job.hpp"

namespace ccsim::sim {

/// Broadcast protocol settings.
struct BroadcastOptions {
  bool adaptive = false;       ///< AQGB's two-stage ratio control (else fixed)
  double fixed_bits = 32;      ///< fixed: wire bits per gradient entry
  uint32_t element_bits = 32;  ///< the uncompressed entry (fp32)
  double q_floor = 0.125;      ///< adaptive: q̄, the lowest ratio
  bool second_stage = true;    ///< adaptive: send the remaining bits before each block's forward
  uint64_t segment_params = 1u << 20;
  KernelCostModel costs;       ///< the scheme's encode (sender) and decode-accumulate (receivers) kernels
  std::string scheme = "fp32";
};

/// Per round: what the broadcast sent.
struct BroadcastRoundStats {
  uint64_t stage1_bytes = 0;   ///< per receiver, summed over senders
  uint64_t stage2_bytes = 0;
  uint64_t sent_params = 0;    ///< entries whose stage-1 segment completed
  double bits_sum = 0;         ///< Σ over completed segments' entries of the bits they carried (stages 1 and 2)
};

/// The broadcast protocol.
class BroadcastSync final : public GradientSync {
 public:
  explicit BroadcastSync(BroadcastOptions options) : opt_(std::move(options)) {}
  void attach(TrainingJob& job) override;
  void gradient_ready(uint32_t round, uint32_t worker, uint32_t layer) override;
  std::string describe() const override;
  const std::map<uint32_t, BroadcastRoundStats>& round_stats() const { return stats_; }

 private:
  struct Pending {
    uint32_t round, layer;
    uint64_t left;
  };
  struct Stage2 {
    uint64_t params = 0;       // entries of the block (this sender)
    double extra_bits = 0;     // Σ over its entries of 32 − L_F
    uint64_t sent_params = 0;  // entries whose remaining bits were (partly) sent
  };
  struct Sender {
    std::vector<Pending> stack;           // stage 1, newest last
    bool sending = false;
    double bw = 0;                        // per-receiver rate estimate, B/s
    uint32_t round = 0;                   // round being produced / broadcast
    uint32_t produced = 0;                // blocks of `round` produced
    SimTime last_ready;
    uint32_t last_layer = 0;
    bool stage1_done = false;
    SimTime stage1_end;
    int64_t stage2_round = -1;            // round whose stage 2 runs (-1: none)
    uint32_t stage2_next = 0;             // next block in forward order
    std::vector<Stage2> stage2;           // per layer of stage2_round's... filled during stage 1
    std::vector<Stage2> filling;          // per layer of `round`
  };
  struct BlockState {
    uint32_t stage1_senders = 0;
    uint32_t stage2_inflight = 0;
    uint32_t decoding = 0;  // receivers' decodes of its segments not yet ended
    bool emitted = false;
  };
  // A worker's compression stream: kernels run one at a time, first issued first.
  struct Stream {
    std::deque<std::pair<Duration, std::function<void()>>> queue;
    bool busy = false;
  };

  void pump(uint32_t w);
  void send(uint32_t w, uint32_t round, uint32_t layer, uint64_t params, uint64_t bytes, bool stage2, double bits);
  void segment_done(uint32_t w, uint32_t round, uint32_t layer, uint64_t params, uint64_t bytes, bool stage2,
                    double bits, SimTime started);
  void maybe_emit(uint32_t round, uint32_t layer);
  /// Runs a kernel of `kind` on `params` entries moving `memory_bytes` on worker `w`'s stream, then
  /// `done` (at once when kernels are free).
  void run_kernel(uint32_t w, topo::KernelKind kind, uint64_t params, uint64_t memory_bytes, std::function<void()> done);
  void start_next_kernel(uint32_t w);
  double forward_start_estimate(uint32_t round, uint32_t layer) const;
  double stage1_ratio(uint32_t w, std::string& detail) const;

  BroadcastOptions opt_;
  TrainingJob* job_ = nullptr;
  std::vector<Sender> senders_;
  std::vector<Stream> streams_;
  std::map<std::pair<uint32_t, uint32_t>, BlockState> blocks_;
  std::map<uint32_t, BroadcastRoundStats> stats_;
  std::vector<uint32_t> route_;
};

}  // namespace ccsim::sim
