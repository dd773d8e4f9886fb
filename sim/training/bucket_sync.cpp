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

void BucketCollectiveSync::attach(TrainingJob& job) {
  job_ = &job;
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
  runner_ = std::make_unique<ScheduleRunner>(job_->engine(), job_->network(), job_->topology(), *p.generator, p.binder,
                                             p.costs ? *p.costs : costs_, std::move(ro));
  // Continue in a fresh event: the runner must not be destroyed inside its own callback.
  runner_->start([this](const ScheduleTiming&) { job_->engine().schedule_in(Duration::zero(), [this] { phase_done(); }); });
}

void BucketCollectiveSync::phase_done() {
  records_[active_].wire_bytes += runner_->timing().wire_bytes;
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
