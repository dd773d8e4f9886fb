#include "sim/training/broadcast_sync.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/base/check.hpp"

namespace ccsim::sim {

void BroadcastSync::attach(TrainingJob& job) {
  job_ = &job;
  const uint32_t m = job.num_workers();
  const size_t n = job.layers().size();
  senders_.assign(m, Sender{});
  streams_.assign(m, Stream{});
  for (uint32_t w = 0; w < m; ++w) {
    Sender& s = senders_[w];
    s.filling.assign(n, Stage2{});
    // Until a segment has been measured: the sender's first link shared by its m − 1 flows.
    const uint32_t peer = (w + 1) % m;
    double cap = 0;
    if (m > 1) {
      job.topology().route(job.rank_of(w), job.rank_of(peer), 0, route_);
      cap = route_.empty() ? 0 : job.topology().links()[route_.front()].capacity_Bps;
    }
    s.bw = m > 1 && cap > 0 ? cap / (m - 1) : 1e12;
  }
}

std::string FixedBroadcastBits::describe() const {
  return fmt::format("broadcast to every worker, {} at {:.4g} bits per entry", label_, bits_);
}

std::string BroadcastSync::describe() const {
  return fmt::format("{}, segments of {} entries", control_.describe(), opt_.segment_params);
}

void BroadcastSync::gradient_ready(uint32_t round, uint32_t w, uint32_t layer) {
  Sender& s = senders_[w];
  const size_t n = job_->layers().size();
  if (round != s.round || s.produced == n) {  // the first block of a new round
    CCSIM_CHECK(round > s.round || s.produced == 0 || s.produced == n, "worker {}: round {} after {}", w, round, s.round);
    s.round = round;
    s.produced = 0;
    s.stage1_done = false;
    s.filling.assign(n, Stage2{});
  }
  ++s.produced;
  s.last_ready = job_->engine().now();
  s.last_layer = layer;
  const uint64_t params = job_->layers()[layer].params;
  if (params == 0) {
    ++blocks_[{round, layer}].stage1_senders;
    maybe_emit(round, layer);
  } else {
    s.stack.push_back({round, layer, params});
  }
  pump(w);
}

Stage1View BroadcastSync::stage1_view(uint32_t w) const {
  const Sender& s = senders_[w];
  Stage1View v;
  v.now_s = job_->engine().now().seconds();
  v.rate_Bps = s.bw;
  v.last_block = s.produced == job_->layers().size() || s.last_layer == 0;
  if (!v.last_block) v.next_block_s = s.last_ready.seconds() + job_->expected_backward_s(w, s.last_layer - 1);
  for (const Pending& p : s.stack) v.backlog_entries += p.left;
  return v;
}

double BroadcastSync::forward_start_estimate(uint32_t next_round, uint32_t layer) const {
  // The next forward of block 0 starts once every worker's stage 1 of the previous round is done.
  const uint32_t r = next_round - 1;
  const double now = job_->engine().now().seconds();
  const size_t n = job_->layers().size();
  double start0 = now;
  for (uint32_t v = 0; v < senders_.size(); ++v) {
    const Sender& s = senders_[v];
    if (s.round > r) continue;
    if (s.round == r && s.stage1_done) {
      start0 = std::max(start0, s.stage1_end.seconds());
      continue;
    }
    // Still producing or sending stage 1: its remaining backward, then everything left at the floor.
    double bp_end = now;
    double left = 0;
    if (s.round == r && s.produced > 0) {
      bp_end = s.last_ready.seconds();
      for (uint32_t k = 0; k < s.last_layer; ++k) {
        bp_end += job_->expected_backward_s(v, k);
        left += static_cast<double>(job_->layers()[k].params);
      }
    } else {
      for (uint32_t k = 0; k < n; ++k) {
        bp_end += job_->expected_backward_s(v, k);
        left += static_cast<double>(job_->layers()[k].params);
      }
    }
    for (const Pending& p : s.stack) left += static_cast<double>(p.left);
    const double wire = control_.floor_bytes(left);
    start0 = std::max(start0, std::max(bp_end, now) + wire / s.bw);
  }
  double fwd = 0;
  for (uint32_t v = 0; v < senders_.size(); ++v) {
    double f = 0;
    for (uint32_t k = 0; k < layer; ++k) f += job_->expected_forward_s(v, k);
    fwd = std::max(fwd, f);
  }
  return start0 + fwd;
}

void BroadcastSync::pump(uint32_t w) {
  Sender& s = senders_[w];
  if (s.sending) return;
  const uint32_t n = static_cast<uint32_t>(job_->layers().size());
  if (!s.stack.empty()) {
    const Pending top = s.stack.back();
    const uint64_t seg = std::min<uint64_t>(opt_.segment_params, top.left);
    const SegmentBits choice = control_.stage1(stage1_view(w));
    if (control_.second_stage()) {
      s.filling[top.layer].params += seg;
      s.filling[top.layer].extra_bits += static_cast<double>(seg) * choice.deferred;
    }
    if (!choice.quantity.empty())
      job_->log({top.round, w, static_cast<int32_t>(top.layer), job_->engine().now().seconds(), control_.name(),
                 choice.quantity, choice.value, choice.detail});
    const uint64_t bytes = static_cast<uint64_t>(std::ceil(static_cast<double>(seg) * choice.bits / 8.0));
    send(w, top.round, top.layer, seg, bytes, false, choice.bits);
    return;
  }
  if (s.produced == n && !s.stage1_done) {
    s.stage1_done = true;
    s.stage1_end = job_->engine().now();
    if (control_.second_stage()) {
      s.stage2 = s.filling;
      s.stage2_round = s.round;
      s.stage2_next = 0;
    }
  }
  if (s.stage2_round < 0) return;
  if (!send_stage2(w)) s.stage2_round = -1;
}

bool BroadcastSync::send_stage2(uint32_t w) {
  Sender& s = senders_[w];
  const double now = job_->engine().now().seconds();
  const uint32_t n = static_cast<uint32_t>(job_->layers().size());
  const uint32_t r = static_cast<uint32_t>(s.stage2_round);
  while (s.stage2_next < n) {
    const uint32_t j = s.stage2_next;
    Stage2& st = s.stage2[j];
    const auto it = blocks_.find({r, j});
    const bool emitted = it != blocks_.end() && it->second.emitted;
    if (st.sent_params >= st.params || st.extra_bits <= 0 || emitted) {
      ++s.stage2_next;
      continue;
    }
    const double deadline = forward_start_estimate(r + 1, j);
    if (now >= deadline) {
      job_->log({r, w, static_cast<int32_t>(j), now, control_.name(), "stage2_skip", 0,
                 fmt::format("forward estimated at {:.6f} s", deadline)});
      ++s.stage2_next;
      continue;
    }
    const uint64_t remaining = st.params - st.sent_params;
    const SegmentBits choice = control_.stage2(
        {now, s.bw, deadline, remaining, st.extra_bits / static_cast<double>(st.params)});
    const uint64_t seg = std::min<uint64_t>(opt_.segment_params, remaining);
    const uint64_t bytes = static_cast<uint64_t>(std::ceil(static_cast<double>(seg) * choice.bits / 8.0));
    st.sent_params += seg;
    if (bytes == 0) continue;
    job_->log({r, w, static_cast<int32_t>(j), now, control_.name(), choice.quantity, choice.value, choice.detail});
    send(w, r, j, seg, bytes, true, choice.bits);
    return true;
  }
  return false;
}

void BroadcastSync::send(uint32_t w, uint32_t round, uint32_t layer, uint64_t params, uint64_t bytes, bool stage2,
                         double bits) {
  Sender& s = senders_[w];
  s.sending = true;
  if (stage2) ++blocks_[{round, layer}].stage2_inflight;
  job_->comm_begin(w);
  auto launch = [this, w, round, layer, params, bytes, stage2, bits] {
    const uint32_t m = job_->num_workers();
    const SimTime started = job_->engine().now();
    auto outstanding = std::make_shared<uint32_t>(m - 1);
    if (m == 1) {
      job_->engine().schedule_in(Duration::zero(), [=, this] {
        segment_done(w, round, layer, params, bytes, stage2, bits, started);
      });
      return;
    }
    for (uint32_t v = 0; v < m; ++v) {
      if (v == w) continue;
      job_->comm_begin(v);
      const topo::Rank src = job_->rank_of(w), dst = job_->rank_of(v);
      job_->topology().route(src, dst, (uint64_t{src} << 32) ^ dst, route_);
      const Duration latency = Duration::from_seconds(job_->topology().route_latency_s(src, dst));
      job_->network().start_flow(route_, static_cast<double>(bytes), latency, [=, this] {
        job_->comm_end(v);
        // The receiver's decode-accumulate; the block counts as arrived once it has ended.
        ++blocks_[{round, layer}].decoding;
        run_kernel(v, topo::KernelKind::kDecodeAccumulate, params, bytes + 8 * params, [this, round, layer] {
          --blocks_[{round, layer}].decoding;
          maybe_emit(round, layer);
        });
        if (--*outstanding == 0) segment_done(w, round, layer, params, bytes, stage2, bits, started);
      });
    }
  };
  run_kernel(w, topo::KernelKind::kEncode, params, params * 4 + bytes, std::move(launch));
}

void BroadcastSync::run_kernel(uint32_t w, topo::KernelKind kind, uint64_t params, uint64_t memory_bytes,
                               std::function<void()> done) {
  if (opt_.costs.ideal()) return done();
  streams_[w].queue.emplace_back(opt_.costs.cost(kind, params, memory_bytes), std::move(done));
  start_next_kernel(w);
}

void BroadcastSync::start_next_kernel(uint32_t w) {
  Stream& st = streams_[w];
  if (st.busy || st.queue.empty()) return;
  st.busy = true;
  auto [cost, done] = std::move(st.queue.front());
  st.queue.pop_front();
  job_->kernel_begin(w);
  job_->engine().schedule_in(cost, [this, w, done = std::move(done)] {
    job_->kernel_end(w);
    streams_[w].busy = false;
    done();
    start_next_kernel(w);
  });
}

void BroadcastSync::segment_done(uint32_t w, uint32_t round, uint32_t layer, uint64_t params, uint64_t bytes,
                                 bool stage2, double bits, SimTime started) {
  Sender& s = senders_[w];
  s.sending = false;
  job_->comm_end(w);
  const double elapsed = (job_->engine().now() - started).seconds();
  if (bytes > 0 && elapsed > 0) s.bw = static_cast<double>(bytes) / elapsed;
  BroadcastRoundStats& st = stats_[round];
  (stage2 ? st.stage2_bytes : st.stage1_bytes) += bytes;
  if (!stage2) st.sent_params += params;
  st.bits_sum += static_cast<double>(params) * bits;
  if (stage2) {
    --blocks_[{round, layer}].stage2_inflight;
    maybe_emit(round, layer);
  } else {
    auto it = std::find_if(s.stack.rbegin(), s.stack.rend(),
                           [&](const Pending& p) { return p.round == round && p.layer == layer; });
    CCSIM_CHECK(it != s.stack.rend(), "segment of an unknown block");
    it->left -= params;
    if (it->left == 0) {
      s.stack.erase(std::next(it).base());
      ++blocks_[{round, layer}].stage1_senders;
      maybe_emit(round, layer);
    }
  }
  pump(w);
}

void BroadcastSync::maybe_emit(uint32_t round, uint32_t layer) {
  BlockState& b = blocks_[{round, layer}];
  if (b.emitted || b.stage1_senders < job_->num_workers() || b.stage2_inflight > 0 || b.decoding > 0) return;
  b.emitted = true;
  // Blocks two rounds back can no longer be asked about.
  while (!blocks_.empty() && blocks_.begin()->first.first + 2 < round) blocks_.erase(blocks_.begin());
  for (uint32_t v = 0; v < job_->num_workers(); ++v) job_->synced(round, v, layer);
}

}  // namespace ccsim::sim
