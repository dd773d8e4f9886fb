#include "sim/training/pipeline_schedule.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "sim/base/check.hpp"

namespace ccsim::sim {
namespace {

// Upper bound on stages * micro-batches, so that a typo in a scenario is an error, not an
// allocation of tens of gigabytes.
constexpr uint64_t kMaxStageMicroBatches = uint64_t{1} << 26;

PipelineOp forward(uint32_t i) { return {PipelineOp::kForward, i}; }
PipelineOp backward(uint32_t i) { return {PipelineOp::kBackward, i}; }

std::vector<PipelineOp> gpipe_stage(uint32_t m) {
  std::vector<PipelineOp> ops;
  ops.reserve(2 * size_t{m});
  for (uint32_t i = 0; i < m; ++i) ops.push_back(forward(i));
  for (uint32_t i = m; i-- > 0;) ops.push_back(backward(i));
  return ops;
}

std::vector<PipelineOp> one_f_one_b_stage(uint32_t p, uint32_t s, uint32_t m) {
  const uint32_t warmup = std::min(p - s - 1, m);
  std::vector<PipelineOp> ops;
  ops.reserve(2 * size_t{m});
  uint32_t next_f = 0, next_b = 0;
  for (uint32_t k = 0; k < warmup; ++k) ops.push_back(forward(next_f++));
  for (uint32_t k = 0; k < m - warmup; ++k) {  // steady state
    ops.push_back(forward(next_f++));
    ops.push_back(backward(next_b++));
  }
  while (next_b < m) ops.push_back(backward(next_b++));  // cool-down
  return ops;
}

// Checks the shape of `order` (see check_pipeline_order) and returns the micro-batch count.
Result<uint32_t> check_structure(const PipelineOrder& order) {
  if (order.empty()) return invalid_argument("pipeline order: expected at least 1 stage, got 0");
  const auto m64 = std::count_if(order[0].begin(), order[0].end(),
                                 [](const PipelineOp& op) { return op.kind == PipelineOp::kForward; });
  if (m64 == 0) return invalid_argument("pipeline order: stage 0 runs no forward op");
  const auto m = static_cast<uint32_t>(m64);
  std::vector<uint8_t> seen_f(m), seen_b(m);
  for (size_t s = 0; s < order.size(); ++s) {
    std::fill(seen_f.begin(), seen_f.end(), 0);
    std::fill(seen_b.begin(), seen_b.end(), 0);
    for (const PipelineOp& op : order[s]) {
      if (op.micro_batch >= m)
        return invalid_argument(fmt::format("pipeline order: stage {} runs {}, but there are {} micro-batches", s,
                                            op.to_string(), m));
      auto& seen = op.kind == PipelineOp::kForward ? seen_f : seen_b;
      if (seen[op.micro_batch]++ != 0)
        return invalid_argument(fmt::format("pipeline order: stage {} runs {} twice", s, op.to_string()));
    }
    for (uint32_t i = 0; i < m; ++i) {
      if (seen_f[i] == 0)
        return invalid_argument(fmt::format("pipeline order: stage {} never runs {}", s, forward(i).to_string()));
      if (seen_b[i] == 0)
        return invalid_argument(fmt::format("pipeline order: stage {} never runs {}", s, backward(i).to_string()));
    }
  }
  return m;
}

// Runs the ops of a structurally valid order in an order that respects every dependency, calling
// visit(stage, position) for each; returns a deadlock error naming the stuck ops if it cannot.
Status walk_in_dependency_order(const PipelineOrder& order, uint32_t m,
                                const std::function<void(uint32_t, size_t)>& visit) {
  const auto p = static_cast<uint32_t>(order.size());
  std::vector<uint8_t> f_done(size_t{p} * m), b_done(size_t{p} * m);
  auto at = [m](uint32_t s, uint32_t i) { return size_t{s} * m + i; };
  // The op `op` of stage s waits for (stage, op); none when its dependencies are all done.
  struct Wait {
    uint32_t stage;
    PipelineOp op;
  };
  auto first_wait = [&](uint32_t s, const PipelineOp& op) -> std::optional<Wait> {
    const uint32_t i = op.micro_batch;
    if (op.kind == PipelineOp::kForward) {
      if (s > 0 && f_done[at(s - 1, i)] == 0) return Wait{s - 1, forward(i)};
      return std::nullopt;
    }
    if (f_done[at(s, i)] == 0) return Wait{s, forward(i)};
    if (s + 1 < p && b_done[at(s + 1, i)] == 0) return Wait{s + 1, backward(i)};
    return std::nullopt;
  };

  std::vector<size_t> pos(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (uint32_t s = 0; s < p; ++s) {
      while (pos[s] < order[s].size() && !first_wait(s, order[s][pos[s]])) {
        const PipelineOp& op = order[s][pos[s]];
        visit(s, pos[s]);
        (op.kind == PipelineOp::kForward ? f_done : b_done)[at(s, op.micro_batch)] = 1;
        ++pos[s];
        progress = true;
      }
    }
  }
  std::vector<std::string> stuck;
  for (uint32_t s = 0; s < p; ++s) {
    if (pos[s] == order[s].size()) continue;
    const PipelineOp& op = order[s][pos[s]];
    const Wait w = *first_wait(s, op);
    stuck.push_back(
        fmt::format("stage {} stuck at {} (waits for {} on stage {})", s, op.to_string(), w.op.to_string(), w.stage));
  }
  if (stuck.empty()) return ok_status();
  return invalid_argument(fmt::format("pipeline order deadlocks: {}", fmt::join(stuck, "; ")));
}

}  // namespace

std::string_view pipeline_kind_name(PipelineKind kind) {
  switch (kind) {
    case PipelineKind::kGPipe: return "gpipe";
    case PipelineKind::k1F1B: return "1f1b";
  }
  return "?";
}

Result<PipelineKind> parse_pipeline_kind(std::string_view name) {
  for (PipelineKind k : {PipelineKind::kGPipe, PipelineKind::k1F1B})
    if (name == pipeline_kind_name(k)) return k;
  return invalid_argument(fmt::format("unknown pipeline schedule '{}'; valid: gpipe, 1f1b", name));
}

std::string PipelineOp::to_string() const {
  return fmt::format("{}{}", kind == kForward ? 'F' : 'B', micro_batch);
}

Result<PipelineOrder> pipeline_order(PipelineKind kind, uint32_t stages, uint32_t micro_batches) {
  if (stages < 1) return invalid_argument("pipeline stages: expected >= 1, got 0");
  if (micro_batches < 1) return invalid_argument("pipeline micro_batches: expected >= 1, got 0");
  if (uint64_t{stages} * micro_batches > kMaxStageMicroBatches)
    return invalid_argument(fmt::format("pipeline: stages * micro_batches = {} * {} exceeds the limit of {}", stages,
                                        micro_batches, kMaxStageMicroBatches));
  PipelineOrder order(stages);
  for (uint32_t s = 0; s < stages; ++s)
    order[s] = kind == PipelineKind::kGPipe ? gpipe_stage(micro_batches) : one_f_one_b_stage(stages, s, micro_batches);
  return order;
}

Status check_pipeline_order(const PipelineOrder& order) {
  CCSIM_ASSIGN_OR_RETURN(const uint32_t m, check_structure(order));
  return walk_in_dependency_order(order, m, [](uint32_t, size_t) {});
}

PipelineTimeline execute_pipeline(const PipelineOrder& order, std::span<const double> forward_s,
                                  std::span<const double> backward_s, double p2p_s) {
  const Result<uint32_t> structure = check_structure(order);
  CCSIM_CHECK(structure.ok(), "{}", structure.status().message());
  const uint32_t m = *structure;
  const auto p = static_cast<uint32_t>(order.size());
  CCSIM_CHECK(forward_s.size() == p && backward_s.size() == p, "{} stages, {} forward and {} backward times", p,
              forward_s.size(), backward_s.size());
  auto valid_time = [](double t) { return std::isfinite(t) && t >= 0; };
  CCSIM_CHECK(valid_time(p2p_s), "p2p time {}", p2p_s);
  CCSIM_CHECK(std::all_of(forward_s.begin(), forward_s.end(), valid_time), "invalid forward time");
  CCSIM_CHECK(std::all_of(backward_s.begin(), backward_s.end(), valid_time), "invalid backward time");

  PipelineTimeline tl;
  tl.ops.resize(p);
  for (uint32_t s = 0; s < p; ++s) tl.ops[s].resize(order[s].size());
  std::vector<double> f_end(size_t{p} * m), b_end(size_t{p} * m), stage_free(p, 0.0);
  auto at = [m](uint32_t s, uint32_t i) { return size_t{s} * m + i; };

  const Status walked = walk_in_dependency_order(order, m, [&](uint32_t s, size_t k) {
    const PipelineOp op = order[s][k];
    const uint32_t i = op.micro_batch;
    double ready = stage_free[s];
    double duration = 0;
    if (op.kind == PipelineOp::kForward) {
      if (s > 0) ready = std::max(ready, f_end[at(s - 1, i)] + p2p_s);
      duration = forward_s[s];
    } else {
      ready = std::max(ready, f_end[at(s, i)]);
      if (s + 1 < p) ready = std::max(ready, b_end[at(s + 1, i)] + p2p_s);
      duration = backward_s[s];
    }
    const double end = ready + duration;
    (op.kind == PipelineOp::kForward ? f_end : b_end)[at(s, i)] = end;
    stage_free[s] = end;
    tl.ops[s][k] = {op, ready, end};
  });
  CCSIM_CHECK(walked.ok(), "{}", walked.message());

  tl.busy_s.assign(p, 0.0);
  tl.last_backward_end_s.assign(p, 0.0);
  tl.peak_in_flight.assign(p, 0);
  for (uint32_t s = 0; s < p; ++s) {
    uint32_t in_flight = 0;
    for (const PipelineOpTiming& t : tl.ops[s]) {
      tl.busy_s[s] += t.op.kind == PipelineOp::kForward ? forward_s[s] : backward_s[s];
      tl.makespan_s = std::max(tl.makespan_s, t.end_s);
      if (t.op.kind == PipelineOp::kForward) {
        tl.peak_in_flight[s] = std::max(tl.peak_in_flight[s], ++in_flight);
      } else {
        --in_flight;
        tl.last_backward_end_s[s] = std::max(tl.last_backward_end_s[s], t.end_s);
      }
    }
  }
  tl.bubble_fraction.resize(p);
  for (uint32_t s = 0; s < p; ++s)
    tl.bubble_fraction[s] = tl.makespan_s > 0 ? 1.0 - tl.busy_s[s] / tl.makespan_s : 0.0;
  return tl;
}

}  // namespace ccsim::sim
