#include "sim/training/bucket_sync.hpp"

#include <algorithm>

#include "sim/base/check.hpp"

namespace ccsim::sim {

std::vector<GradientBucket> make_buckets(const std::vector<TrainingLayer>& layers, uint64_t bucket_bytes,
                                         uint64_t first_bucket_bytes, uint32_t bytes_per_param) {
  std::vector<uint64_t> params;
  for (const TrainingLayer& l : layers) params.push_back(l.params);
  return traces::make_ddp_buckets(params, bucket_bytes, first_bucket_bytes, bytes_per_param);
}

void append_sync_phases(std::span<const topo::SchedulePhase> phases, const std::string& collective, bool name_all,
                        const KernelCosts& costs, std::vector<SyncPhase>& out, std::vector<topo::KernelKind>& charged) {
  for (const topo::SchedulePhase& p : phases) {
    if (topo::is_round_op_phase(p.kind)) {
      const topo::KernelKind kind = p.kind == topo::PhaseKind::kPlanLocal ? topo::KernelKind::kPlanLocal
                                    : p.kind == topo::PhaseKind::kPrepare  ? topo::KernelKind::kPrepare
                                                                           : topo::KernelKind::kFinish;
      if (std::find(charged.begin(), charged.end(), kind) == charged.end()) {
        charged.push_back(kind);
        std::sort(charged.begin(), charged.end());
      }
    }
    SyncPhase phase;
    phase.name = name_all || p.kind == topo::PhaseKind::kCollective ? collective
                                                                     : std::string(topo::phase_kind_name(p.kind));
    phase.generator = p.make();
    phase.make = p.make;
    phase.binder = p.bind;
    phase.costs = costs.scheme(p.scheme, p.params);
    out.push_back(std::move(phase));
  }
}

double BucketRecord::time_in(const std::string& name) const {
  double t = 0;
  for (size_t i = 0; i < phases.size() && i < phase_end_s.size(); ++i)
    if (phases[i] == name) t += phase_end_s[i] - (i == 0 ? start_s : phase_end_s[i - 1]);
  return t;
}

double BucketRecord::time_except(const std::string& name) const {
  return (phase_end_s.empty() ? 0.0 : phase_end_s.back() - start_s) - time_in(name);
}

BucketCollectiveSync::BucketCollectiveSync(std::vector<GradientBucket> buckets, BucketPhaseFactory factory,
                                           KernelCostModel costs, std::string description, uint64_t ecmp_salt)
    : buckets_(std::move(buckets)),
      factory_(std::move(factory)),
      costs_(costs),
      description_(std::move(description)),
      salt_(ecmp_salt) {}

// A recorded run: the network's counters at its start, its kernel periods and its fingerprint
// (taken before it ran, or computed as its steps are generated).
struct BucketCollectiveSync::Recording {
  IdleMark mark;
  KernelPeriods periods;
  std::optional<PhaseDigest> digest;
  std::optional<PhaseFingerprint> fingerprint;
};

BucketCollectiveSync::~BucketCollectiveSync() = default;

void BucketCollectiveSync::replay_repeated_phases() {
  CCSIM_CHECK(job_ == nullptr, "replay_repeated_phases after the job started");
  replay_ = true;
}

void BucketCollectiveSync::attach(TrainingJob& job) {
  job_ = &job;
  if (job.kernels_slow_compute() || job.network().timeline_bin() > Duration::zero()) replay_ = false;
  // With replay, a phase ends after every event of its last instant (see phase_end()).
  if (replay_)
    job.engine().on_instant_end([this] {
      if (!phase_ended_) return;
      phase_ended_ = false;
      job_->engine().schedule_in(Duration::zero(), [this] { phase_done(); });
    });
  bucket_of_layer_.assign(job.layers().size(), UINT32_MAX);
  layers_in_bucket_.assign(buckets_.size(), 0);
  for (uint32_t b = 0; b < buckets_.size(); ++b)
    for (uint32_t l : buckets_[b].layers) {
      CCSIM_CHECK(l < bucket_of_layer_.size() && bucket_of_layer_[l] == UINT32_MAX, "layer {} in two buckets", l);
      bucket_of_layer_[l] = b;
      ++layers_in_bucket_[b];
    }
  for (uint32_t l = 0; l < bucket_of_layer_.size(); ++l) CCSIM_CHECK(bucket_of_layer_[l] != UINT32_MAX, "layer {} in no bucket", l);
}

void BucketCollectiveSync::gradient_ready(uint32_t round, uint32_t /*worker*/, uint32_t layer) {
  const uint32_t b = bucket_of_layer_[layer];
  uint32_t& n = produced_[{round, b}];
  if (++n < layers_in_bucket_[b] * job_->num_workers()) return;
  produced_.erase({round, b});
  BucketRecord rec;
  rec.round = round;
  rec.bucket = b;
  rec.ready_s = job_->engine().now().seconds();
  records_.push_back(rec);
  queue_.push_back(records_.size() - 1);
  try_start();
}

void BucketCollectiveSync::try_start() {
  if (busy_ || queue_.empty()) return;
  busy_ = true;
  active_ = queue_.front();
  queue_.pop_front();
  BucketRecord& rec = records_[active_];
  rec.start_s = job_->engine().now().seconds();
  phases_ = factory_(rec.round, rec.bucket, buckets_[rec.bucket].params);
  CCSIM_CHECK(!phases_.empty(), "no phases for bucket {}", rec.bucket);
  for (const SyncPhase& p : phases_) rec.phases.push_back(p.name);
  phase_ = 0;
  for (uint32_t w = 0; w < job_->num_workers(); ++w) job_->comm_begin(w);
  start_phase();
}

void BucketCollectiveSync::start_phase() {
  RunnerOptions ro;
  ro.rank_map = job_->ranks();
  ro.ecmp_salt = salt_ + records_[active_].bucket;
  ro.on_kernel = [this](uint32_t rank, bool begin) { begin ? job_->kernel_begin(rank) : job_->kernel_end(rank); };
  SyncPhase& p = phases_[phase_];
  const KernelCostModel& costs = p.costs ? *p.costs : costs_;
  if (replay_ && job_->network().detach_batches()) {
    if (const PhaseRecord* r = replayable(p, costs, ro)) {
      replaying_ = r;
      replay_start_ = job_->engine().now();
      replay_next_ = 0;
      return replay_edges();
    }
  }
  runner_ = std::make_unique<ScheduleRunner>(job_->engine(), job_->network(), job_->topology(), *p.generator, p.binder,
                                             costs, std::move(ro));
  runner_->start([this](const ScheduleTiming&) { phase_end(); });
}

void BucketCollectiveSync::phase_end() {
  // Continue in a fresh event: the runner must not be destroyed inside its own callback. With
  // replay, that event is scheduled once the instant's events are done, so what else happens in
  // that instant (a worker's zero-length op after one that ended then) comes first whether the
  // phase was simulated or replayed: its last event's place among them differs between the two.
  if (replay_) {
    phase_ended_ = true;
    return;
  }
  job_->engine().schedule_in(Duration::zero(), [this] { phase_done(); });
}

// The record this phase's run would repeat, or nullptr; then the run is set up to be recorded.
const PhaseRecord* BucketCollectiveSync::replayable(SyncPhase& p, const KernelCostModel& costs, RunnerOptions& ro) {
  const uint64_t kind =
      topo::ecmp_hash(phase_, std::hash<std::string>{}(p.name), buckets_[records_[active_].bucket].params);
  FlowNetwork& net = job_->network();
  std::optional<PhaseDigest> digest;
  if (p.make && memo_.worth_checking(kind)) {
    digest = fingerprint_schedule(*p.generator, p.binder,
                                  PhaseFingerprint(job_->topology(), ro.rank_map, ro.ecmp_salt, costs));
    const PhaseRecord* r = memo_.find(kind, *digest);
    if (r && net.can_add(r->network)) return r;
    p.generator = p.make();
  }
  memo_.ran(kind);
  if (memo_.given_up(kind)) return nullptr;
  const SimTime now = job_->engine().now();
  auto rec = std::make_unique<Recording>(Recording{
      net.idle_mark(), KernelPeriods(now, static_cast<uint32_t>(ro.rank_map.size())), digest, std::nullopt});
  if (!rec->digest) {
    rec->fingerprint.emplace(job_->topology(), ro.rank_map, ro.ecmp_salt, costs);
    ro.on_step = [fp = &*rec->fingerprint](const topo::Schedule& s, topo::OpId first, topo::OpId end) {
      fp->step(s, first, end);
    };
  }
  ro.on_kernel = [this, periods = &rec->periods](uint32_t rank, bool begin) {
    periods->on_kernel(rank, begin, job_->engine().now());
    begin ? job_->kernel_begin(rank) : job_->kernel_end(rank);
  };
  recording_ = std::move(rec);
  return nullptr;
}

// Applies the replayed phase's kernel edges due now, then waits for the next or ends the phase.
void BucketCollectiveSync::replay_edges() {
  const PhaseRecord& r = *replaying_;
  const int64_t t = (job_->engine().now() - replay_start_).ps();
  for (; replay_next_ < r.edges.size() && r.edges[replay_next_].t_ps == t; ++replay_next_) {
    const KernelEdge& e = r.edges[replay_next_];
    e.up ? job_->kernel_begin(e.rank) : job_->kernel_end(e.rank);
  }
  if (t == r.duration.ps()) {
    job_->network().add_delta(r.network);
    for (int64_t s : r.stale_ps) job_->engine().schedule_at(replay_start_ + Duration::from_ps(s), [] {});
    return phase_end();
  }
  const int64_t next = replay_next_ < r.edges.size() ? std::min(r.edges[replay_next_].t_ps, r.duration.ps())
                                                     : r.duration.ps();
  job_->engine().schedule_at(replay_start_ + Duration::from_ps(next), [this] { replay_edges(); });
}

void BucketCollectiveSync::phase_done() {
  const uint64_t wire = replaying_ ? replaying_->wire_bytes : runner_->timing().wire_bytes;
  if (recording_) {
    Recording& rec = *recording_;
    FlowNetwork& net = job_->network();
    std::optional<NetworkDelta> delta;
    if (net.idle()) delta = net.delta_since(rec.mark);
    if (delta) {
      std::vector<int64_t> stale = net.stale_batch_times();
      const SimTime start = rec.periods.start();
      for (int64_t& s : stale) s -= start.ps();
      memo_.keep(PhaseRecord{rec.digest ? *rec.digest : rec.fingerprint->digest(), job_->engine().now() - start,
                             wire, rec.periods.edges(), std::move(*delta), std::move(stale)});
    }
    recording_.reset();
  }
  replaying_ = nullptr;
  records_[active_].wire_bytes += wire;
  records_[active_].phase_end_s.push_back(job_->engine().now().seconds());
  runner_.reset();
  if (++phase_ < phases_.size()) return start_phase();
  phases_.clear();
  BucketRecord& rec = records_[active_];
  rec.end_s = job_->engine().now().seconds();
  busy_ = false;
  const uint32_t round = rec.round;
  const std::vector<uint32_t> layers = buckets_[rec.bucket].layers;
  for (uint32_t w = 0; w < job_->num_workers(); ++w) job_->comm_end(w);
  try_start();  // the next bucket's collective starts before workers react (same instant)
  for (uint32_t w = 0; w < job_->num_workers(); ++w)
    for (uint32_t l : layers) job_->synced(round, w, l);
}

}  // namespace ccsim::sim
