#include "sim/training/round_summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ccsim::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The cluster's view of every round all workers reported, and the ROW mean over measured ones.
void cluster_view(TrainingSummary& out, const std::vector<SimTime>& done, uint32_t workers, uint32_t warmup) {
  std::map<uint32_t, std::vector<const RoundMetrics*>> by_round;
  for (const auto& r : out.rounds) by_round[r.round].push_back(&r);
  double row_sum = 0;
  uint32_t row_n = 0;
  for (const auto& [round, rows] : by_round) {
    if (rows.size() != workers) continue;
    ClusterRound c;
    c.round = round;
    c.complete_s = round < done.size() ? done[round].seconds() : std::numeric_limits<double>::quiet_NaN();
    c.overlap_min_s = kInf;
    for (const auto* r : rows) {
      c.duration_max_s = std::max(c.duration_max_s, r->duration());
      c.wait_max_s = std::max(c.wait_max_s, r->wait_s);
      c.overlap_min_s = std::min(c.overlap_min_s, r->overlap_s);
    }
    c.row = c.wait_max_s > 0 ? c.overlap_min_s / c.wait_max_s : kInf;
    out.cluster_rounds.push_back(c);
    if (round < warmup) continue;
    ++out.measured_rounds;
    if (std::isfinite(c.row)) {
      row_sum += c.row;
      ++row_n;
    } else {
      ++out.rounds_without_wait;
    }
  }
  out.row_cluster = row_n > 0 ? row_sum / row_n : kInf;
}

// Means over the measured rounds' per-worker metrics.
void worker_means(TrainingSummary& out, uint32_t warmup) {
  size_t n = 0;
  for (const auto& r : out.rounds) {
    if (r.round < warmup) continue;
    ++n;
    out.round_s += r.duration();
    out.compute_s += r.compute_s;
    out.wait_s += r.wait_s;
    out.comm_s += r.comm_s;
    out.overlap_s += r.overlap_s;
    out.compression_s += r.compression_s;
    out.compression_overhead_s += r.compression_overhead_s;
    out.exposed_comm_s += r.exposed_comm_s;
  }
  if (n == 0) return;
  for (double* v : {&out.round_s, &out.compute_s, &out.wait_s, &out.comm_s, &out.overlap_s, &out.compression_s,
                    &out.compression_overhead_s, &out.exposed_comm_s})
    *v /= static_cast<double>(n);
}

}  // namespace

TrainingSummary summarize_training(const TrainingJob& job, const std::vector<LinkStats>& links, SimTime horizon,
                                   double duration_s, uint32_t warmup, SimTime now) {
  TrainingSummary out;
  const uint32_t m = job.num_workers();
  const std::vector<SimTime> done = job.round_completion();
  out.rounds_completed =
      static_cast<uint32_t>(std::count_if(done.begin(), done.end(), [&](SimTime t) { return t <= horizon; }));
  out.end_s = duration_s > 0 ? duration_s : (done.empty() ? now.seconds() : done.back().seconds());
  out.rounds = job.round_metrics(horizon);
  cluster_view(out, done, m, warmup);
  worker_means(out, warmup);
  // Workers' uplinks: the links leaving their rank vertices.
  double util = 0;
  uint32_t uplinks = 0;
  const topo::Topology& topology = job.topology();
  for (size_t l = 0; l < topology.links().size(); ++l) {
    const auto& link = topology.links()[l];
    if (link.from >= m) continue;
    ++uplinks;
    // Tenants may still finish flows after the job's end: their bytes count over the whole run.
    util += links[l].bytes / (link.capacity_Bps * std::max(out.end_s, now.seconds()));
  }
  out.uplink_utilization = uplinks > 0 ? util / uplinks : 0;
  return out;
}

BroadcastTotals broadcast_totals(const BroadcastSync& sync, uint32_t workers, uint32_t rounds_completed) {
  double bits = 0, params = 0, bytes = 0;
  for (const auto& [r, st] : sync.round_stats()) {
    bits += st.bits_sum;
    params += static_cast<double>(st.sent_params);
    bytes += static_cast<double>(st.stage1_bytes + st.stage2_bytes) * (workers - 1);
  }
  return {params > 0 ? bits / params : 0, rounds_completed > 0 ? bytes / rounds_completed : 0};
}

BucketTotals bucket_totals(const BucketCollectiveSync& sync, uint32_t rounds_completed, uint32_t warmup,
                           const std::string& apart) {
  BucketTotals out;
  double bytes = 0;
  for (const auto& b : sync.records()) bytes += static_cast<double>(b.wire_bytes);
  out.wire_bytes_per_round = rounds_completed > 0 ? bytes / rounds_completed : 0;
  if (rounds_completed <= warmup) return out;
  for (const auto& b : sync.records()) {
    if (b.round < warmup || b.round >= rounds_completed) continue;
    out.grad_comm_s += b.time_except(apart);
    out.weight_comm_s += b.time_in(apart);
  }
  out.grad_comm_s /= rounds_completed - warmup;
  out.weight_comm_s /= rounds_completed - warmup;
  return out;
}

ParallelSummary summarize_parallel(const ParallelTrainingJob& job, uint32_t rounds, uint32_t warmup, SimTime now,
                                   const std::function<int64_t(uint32_t, uint32_t)>& rank_of) {
  ParallelSummary out;
  const uint32_t pp = job.num_stages();
  out.rounds = job.round_records();
  out.rounds_completed = static_cast<uint32_t>(out.rounds.size());
  out.end_s = out.rounds.empty() ? now.seconds() : out.rounds.back().end_s;
  for (auto* v : {&out.stage_sync_s, &out.stage_start_s, &out.stage_exposed_s, &out.stage_rank}) v->assign(pp, 0);
  const uint32_t first = std::min(warmup, rounds - 1);
  double wire = 0;
  for (const auto& rec : job.stage_records()) {
    StageSyncRow row;
    row.record = rec;
    const ParallelRoundRecord& rr = out.rounds[rec.round];
    row.exposed_s = std::max(0.0, rec.sync_end_s - rr.backward_end_s);
    row.rank = rank_of(rec.round, rec.stage);
    wire += static_cast<double>(rec.sync_wire_bytes);
    if (rec.round >= first) {
      out.stage_sync_s[rec.stage] += rec.sync_end_s - rec.sync_start_s;
      out.stage_start_s[rec.stage] += rec.sync_start_s - rr.start_s;
      out.stage_exposed_s[rec.stage] += row.exposed_s;
      out.stage_rank[rec.stage] += static_cast<double>(row.rank);
    }
    out.stages.push_back(row);
  }
  for (const auto& rr : out.rounds) {
    if (rr.round < first) continue;
    ++out.measured_rounds;
    out.round_s += rr.duration();
    out.compute_s += rr.compute_s;
    out.exposed_comm_s += rr.exposed_comm_s;
  }
  if (out.measured_rounds > 0) {
    const double n = out.measured_rounds;
    for (double* v : {&out.round_s, &out.compute_s, &out.exposed_comm_s}) *v /= n;
    for (auto* v : {&out.stage_sync_s, &out.stage_start_s, &out.stage_exposed_s, &out.stage_rank})
      for (double& x : *v) x /= n;
  }
  out.wire_bytes_per_round = out.rounds_completed > 0 ? wire / out.rounds_completed : 0;
  return out;
}

}  // namespace ccsim::sim
