#include "sim/phase_replay.hpp"

#include <algorithm>
#include <bit>

#include "sim/base/check.hpp"

namespace ccsim::sim {
namespace {
// A 64-bit finalizer (xor-shift, multiply, twice): SplitMix64's constants for one lane of the
// digest, MurmurHash3's for the other.
uint64_t finalize(uint64_t x, uint64_t m1, uint64_t m2, int s1, int s2, int s3) {
  x = (x ^ (x >> s1)) * m1;
  x = (x ^ (x >> s2)) * m2;
  return x ^ (x >> s3);
}
uint64_t mix_a(uint64_t x) { return finalize(x, 0xBF58476D1CE4E5B9ull, 0x94D049BB133111EBull, 30, 27, 31); }
uint64_t mix_b(uint64_t x) { return finalize(x, 0xFF51AFD7ED558CCDull, 0xC4CEB9FE1A85EC53ull, 33, 33, 33); }
// Word tags, so that different fields never hash alike.
constexpr uint64_t kStep = 0x5354455000000000ull, kTransfer = 1, kKernel = 2;
}  // namespace

PhaseFingerprint::PhaseFingerprint(const topo::Topology& topology, std::vector<topo::Rank> rank_map, uint64_t salt,
                                   const KernelCostModel& costs)
    : topology_(topology), rank_map_(std::move(rank_map)), salt_(salt), costs_(costs) {}

void PhaseFingerprint::add(uint64_t word) {
  ++n_;
  a_ = std::rotl(a_ ^ mix_a(word + n_), 23) * 0x9E3779B97F4A7C15ull;
  b_ = std::rotl(b_ + mix_b(word ^ (n_ * 0xD6E8FEB86659FD93ull)), 37) * 0xC2B2AE3D27D4EB4Full;
}

void PhaseFingerprint::step(const topo::Schedule& schedule, topo::OpId first, topo::OpId end) {
  add(kStep | (end - first));
  add(schedule.num_ranks());
  for (topo::OpId id = first; id < end; ++id) {
    const topo::Op& op = schedule.op(id);
    if (op.kind == topo::OpKind::kTransfer) {
      const Duration latency = place_transfer(topology_, place(op.rank), place(op.peer), id, salt_, route_);
      add(kTransfer);
      add(op.bytes);
      add(static_cast<uint64_t>(latency.ps()));
      add(route_.size());
      for (topo::LinkId l : route_) add(l);
    } else {
      add(kKernel);
      add(op.rank);
      add(static_cast<uint64_t>(kernel_duration(costs_, schedule, op).ps()));
    }
    const auto deps = schedule.deps(op);
    add(deps.size());
    for (topo::OpId d : deps) add(id - d);
  }
}

PhaseDigest PhaseFingerprint::digest() const { return {mix_a(a_ ^ n_), mix_b(b_ + n_)}; }

PhaseDigest fingerprint_schedule(topo::ScheduleGenerator& generator, const ScheduleBinder& binder,
                                 PhaseFingerprint fingerprint) {
  topo::Schedule s = generator.begin();
  for (;;) {
    const topo::OpId first = s.id_end();
    if (!generator.next_step(s)) break;
    const topo::OpId end = s.id_end();
    if (binder) binder(s, first, end);
    fingerprint.step(s, first, end);
    // The next step may name ops of this one (as the runner keeps it while generating the next).
    s.retire_before(first);
  }
  return fingerprint.digest();
}

void KernelPeriods::on_kernel(uint32_t rank, bool begin, SimTime now) {
  CCSIM_CHECK(rank < open_.size(), "kernel on rank {} of {}", rank, open_.size());
  const int64_t t = (now - start_).ps();
  if (begin) {
    CCSIM_CHECK(open_[rank] < 0, "two kernels at once on rank {}", rank);
    open_[rank] = t;
    return;
  }
  const int64_t b = open_[rank];
  CCSIM_CHECK(b >= 0, "a kernel ended on rank {} without starting", rank);
  open_[rank] = -1;
  auto& v = spans_[rank];
  if (!v.empty() && v.back().second == b) {
    v.back().second = t;  // touching: one period, as the worker's counter sees it
  } else {
    v.emplace_back(b, t);
    ++periods_;
  }
}

std::vector<KernelEdge> KernelPeriods::edges() const {
  std::vector<KernelEdge> out;
  out.reserve(2 * periods_);
  for (uint32_t r = 0; r < spans_.size(); ++r) {
    CCSIM_CHECK(open_[r] < 0, "a kernel still running on rank {}", r);
    for (const auto& [b, e] : spans_[r]) {
      out.push_back({b, r, true});
      out.push_back({e, r, false});
    }
  }
  std::sort(out.begin(), out.end(), [](const KernelEdge& x, const KernelEdge& y) {
    return x.t_ps != y.t_ps ? x.t_ps < y.t_ps : x.rank != y.rank ? x.rank < y.rank : x.up < y.up;
  });
  return out;
}

bool PhaseMemo::worth_checking(uint64_t kind) const {
  const auto it = kinds_.find(kind);
  return it != kinds_.end() && it->second.runs > 0 && !given_up(kind);
}

bool PhaseMemo::given_up(uint64_t kind) const {
  const auto it = kinds_.find(kind);
  return it != kinds_.end() && it->second.misses >= 4 * (it->second.hits + 1);
}

const PhaseRecord* PhaseMemo::find(uint64_t kind, const PhaseDigest& digest) {
  const auto it = records_.find(digest);
  Kind& k = kinds_[kind];
  if (it == records_.end()) {
    ++k.misses;
    ++misses_;
    return nullptr;
  }
  ++k.hits;
  ++hits_;
  return it->second.get();
}

void PhaseMemo::keep(PhaseRecord record) {
  const size_t bytes = sizeof(PhaseRecord) + record.edges.size() * sizeof(KernelEdge) +
                       record.network.links.size() * sizeof(NetworkDelta::Link) +
                       record.stale_ps.size() * sizeof(int64_t);
  if (records_.count(record.digest) || bytes_ + bytes > max_bytes_) return;
  bytes_ += bytes;
  const PhaseDigest d = record.digest;
  records_.emplace(d, std::make_unique<PhaseRecord>(std::move(record)));
}

}  // namespace ccsim::sim
