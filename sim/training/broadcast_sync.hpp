#pragma once
/// \file
/// Gradient broadcast (AQGB §4.2): every worker sends each of its gradient blocks to every other
/// worker (reliable broadcast as unicast flows over the shared network), newest block first (last
/// come, first served: backward produces the blocks in the reverse of the order the next forward
/// needs them). A block's update has arrived once every worker's copy of it has reached every
/// worker; all workers then use the same data.
///
/// Data go out in segments of `segment_params` gradient entries, one at a time per sender; a
/// segment is done when all receivers have it. How many bits per entry a segment carries is the
/// rate control's decision (BroadcastControl; this file knows no compression format):
///  * FixedBroadcastBits: every segment at one size per entry (a scheme's exact wire size);
///  * an adaptive control (AQGB §4.3, algorithms/tfp/aqgb_controller.hpp) decides at every
///    segment from what the sender observes: the per-receiver rate b(t) its last segment achieved,
///    its generated but undelivered gradients and the time its next block is expected (its previous
///    round's backward times), and may defer bits of each entry to a second stage. After its
///    stage 1 (all of the round's blocks once) a sender sends, for blocks in forward order, the
///    deferred bits while the next forward of block j has not started, at a ratio of the time left
///    to that forward, t_j^FP: the latest of all workers' estimates of that start (AQGB exchanges
///    them; here they are read directly, without their small messages), each worker assumed to
///    send what it has left at the control's floor. A block's forward waits for its stage-2
///    segments already in flight, so every worker sees the same data.
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

/// What a sender knows when it sends a stage-1 segment.
struct Stage1View {
  double now_s = 0;
  double rate_Bps = 0;           ///< b(t): the per-receiver rate its last segment achieved
  bool last_block = false;       ///< the round's last block exists (no next block to wait for)
  double next_block_s = 0;       ///< when its next block is expected (unless last_block)
  uint64_t backlog_entries = 0;  ///< entries of its generated, undelivered gradients
};

/// What a sender knows when it sends a stage-2 segment of a block.
struct Stage2View {
  double now_s = 0;
  double rate_Bps = 0;
  double forward_s = 0;             ///< t_j^FP: when the block's next forward is expected to start
  uint64_t remaining_entries = 0;   ///< the block's entries whose deferred bits are not sent yet
  double deferred_bits = 0;         ///< bits per entry deferred to stage 2 (mean over the block)
};

/// A rate control's choice for one segment.
struct SegmentBits {
  double bits = 0;       ///< bits per entry the segment carries
  double deferred = 0;   ///< stage 1: bits per entry left for stage 2 (0: none)
  std::string quantity;  ///< what the decision log records ("": nothing)
  double value = 0;
  std::string detail;    ///< the inputs it was decided from
};

/// The broadcast's rate control: how many bits per entry each segment carries.
class BroadcastControl {
 public:
  virtual ~BroadcastControl() = default;
  /// The controller's name in the decision log.
  virtual std::string name() const = 0;
  /// One line for the summary (the protocol adds its segment size).
  virtual std::string describe() const = 0;
  virtual SegmentBits stage1(const Stage1View& view) const = 0;
  /// Whether senders run a second stage.
  virtual bool second_stage() const = 0;
  virtual SegmentBits stage2(const Stage2View& view) const = 0;
  /// The bytes `entries` uncompressed entries take at the control's floor (what a sender that has
  /// not finished its stage 1 is assumed to still send).
  virtual double floor_bytes(double entries) const = 0;
};

/// Every segment at a fixed size per entry, no second stage.
class FixedBroadcastBits final : public BroadcastControl {
 public:
  /// `label` names what is sent ("bf16", "fp32", ...); `bits` per entry on the wire.
  FixedBroadcastBits(std::string label, double bits) : label_(std::move(label)), bits_(bits) {}
  std::string name() const override { return "fixed"; }
  std::string describe() const override;
  SegmentBits stage1(const Stage1View&) const override { return {bits_, 0, "", 0, ""}; }
  bool second_stage() const override { return false; }
  SegmentBits stage2(const Stage2View&) const override { return {}; }
  double floor_bytes(double entries) const override { return entries * bits_ / 8.0; }

 private:
  std::string label_;
  double bits_;
};

/// Broadcast protocol settings.
struct BroadcastOptions {
  uint64_t segment_params = 1u << 20;
  KernelCostModel costs;       ///< the scheme's encode (sender) and decode-accumulate (receivers) kernels
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
  /// `control` decides every segment's bits; it must outlive the protocol.
  BroadcastSync(BroadcastOptions options, const BroadcastControl& control)
      : opt_(std::move(options)), control_(control) {}
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
    double extra_bits = 0;     // Σ over its entries of the bits deferred to stage 2
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
  Stage1View stage1_view(uint32_t w) const;
  bool send_stage2(uint32_t w);

  BroadcastOptions opt_;
  const BroadcastControl& control_;
  TrainingJob* job_ = nullptr;
  std::vector<Sender> senders_;
  std::vector<Stream> streams_;
  std::map<std::pair<uint32_t, uint32_t>, BlockState> blocks_;
  std::map<uint32_t, BroadcastRoundStats> stats_;
  std::vector<uint32_t> route_;
};

}  // namespace ccsim::sim
