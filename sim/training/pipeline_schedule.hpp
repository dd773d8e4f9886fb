#pragma once
/// \file
/// Pipeline-parallel micro-batch schedules as data, a dependency (deadlock) checker, and an
/// analytic executor that times one training iteration of a p-stage pipeline with m micro-batches.
///
/// Schedules (per stage s = 0..p-1, the ordered ops it runs in one iteration):
///  - GPipe (Huang et al. 2019, "GPipe: Efficient Training of Giant Neural Networks using Pipeline
///    Parallelism"): all forwards F0..F(m-1), then all backwards in reverse order B(m-1)..B0, on
///    every stage (the order of the paper's Fig. 2c: the last micro-batch forwarded is the first
///    one back-propagated). Every stage holds all m micro-batches' activations at its peak.
///  - 1F1B (PipeDream-Flush, Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel DNN
///    Training"; the non-interleaved schedule of Megatron-LM): stage s runs w = min(p-s-1, m)
///    warm-up forwards, then m-w steady-state pairs "one forward, one backward", then w cool-down
///    backwards. Micro-batches go in increasing order on every stage, for forwards and backwards
///    alike. Stage s holds at most min(p-s, m) micro-batches' activations.
///
/// Dependencies (what the executor and the deadlock check enforce), for stage s, micro-batch i:
///  - F(s, i) needs F(s-1, i) (its input activation, after one transfer) when s > 0;
///  - B(s, i) needs B(s+1, i) (its output's gradient, after one transfer) when s < p-1, and F(s, i);
///  - every op needs the op before it in its stage's order (one compute stream per stage).
///
/// Closed forms (equal forward time t_f and backward time t_b on every stage):
///  - makespan with no transfer delay, GPipe and 1F1B alike: (m + p - 1)(t_f + t_b); every stage
///    is busy m(t_f + t_b), so its bubble fraction is (p - 1) / (m + p - 1);
///  - GPipe with a transfer delay d: (m + p - 1)(t_f + t_b) + 2(p - 1)d (one fill through p - 1
///    links forward, one drain back). 1F1B also pays d inside its steady state (a stage's backward
///    of micro-batch i waits for a round trip through the later stages, which its warm-up forwards
///    cover for compute but not for transfers), so for d > 0 its makespan is in general larger
///    (by 2d for p = 2, m = 3 at the tests' times) and depends on the ratios of t_f, t_b and d;
///    execute_pipeline computes it;
///  - stage s ends its last backward at makespan - s(t_b + d) for GPipe, and at makespan - s t_b
///    for both schedules when d = 0: stage p-1 first, stage 0 last (with any positive backward
///    times, since B(s-1, i) depends on B(s, i)). That is when each stage's data-parallel gradient
///    synchronisation can start (staggered gradient sync, as in EDGC's Fig. 8).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/enum_names.hpp"
#include "sim/base/status.hpp"

namespace ccsim::sim {

enum class PipelineKind { kGPipe, k1F1B };
/// Their names, in the order scenario files list them.
inline constexpr EnumName<PipelineKind> kPipelineKinds[] = {{PipelineKind::kGPipe, "gpipe"},
                                                            {PipelineKind::k1F1B, "1f1b"}};

/// "gpipe" or "1f1b".
std::string_view pipeline_kind_name(PipelineKind kind);
/// Parses "gpipe" or "1f1b"; anything else is invalid_argument listing the valid names.
Result<PipelineKind> parse_pipeline_kind(std::string_view name);

/// One compute op of one stage: the forward or backward pass of one micro-batch.
struct PipelineOp {
  enum Kind : uint8_t { kForward, kBackward } kind;
  uint32_t micro_batch;

  bool operator==(const PipelineOp&) const = default;
  /// "F3" or "B3".
  std::string to_string() const;
};

/// [stage][position]: the ops each stage runs, in order.
using PipelineOrder = std::vector<std::vector<PipelineOp>>;

/// The per-stage op order of `kind` for `stages` stages and `micro_batches` micro-batches.
/// invalid_argument when either count is 0 (or their product is unreasonably large).
Result<PipelineOrder> pipeline_order(PipelineKind kind, uint32_t stages, uint32_t micro_batches);

/// Checks that `order` is a complete schedule (at least one stage; every stage runs each
/// micro-batch 0..m-1 exactly once forward and once backward, m taken from stage 0) and that it
/// is deadlock-free under the dependencies above. The error for a deadlock names every stage's
/// stuck op and what it waits for.
Status check_pipeline_order(const PipelineOrder& order);

/// Start and end (seconds from the iteration start) of one op.
struct PipelineOpTiming {
  PipelineOp op;
  double start_s = 0;
  double end_s = 0;
};

/// Result of execute_pipeline; all per-stage vectors have one entry per stage.
struct PipelineTimeline {
  std::vector<std::vector<PipelineOpTiming>> ops;  ///< [stage][position], same layout as the order
  std::vector<double> busy_s;                      ///< time the stage computed
  double makespan_s = 0;                           ///< end of the last op of any stage
  std::vector<double> last_backward_end_s;         ///< when the stage's gradient sync can start
  std::vector<double> bubble_fraction;             ///< 1 - busy / makespan (0 when makespan is 0)
  /// Most micro-batches whose forward had finished on the stage and whose backward had not.
  std::vector<uint32_t> peak_in_flight;
};

/// Times one iteration: every op starts at the latest end of its dependencies (+ p2p_s for the
/// cross-stage ones) and of the stage's previous op, and lasts forward_s[s] or backward_s[s].
/// REQUIRES (checked, an invariant: validate user input first): check_pipeline_order(order).ok(),
/// forward_s and backward_s of size order.size(), all times finite and >= 0.
PipelineTimeline execute_pipeline(const PipelineOrder& order, std::span<const double> forward_s,
                                  std::span<const double> backward_s, double p2p_s);

}  // namespace ccsim::sim
