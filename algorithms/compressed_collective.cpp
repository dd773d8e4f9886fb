#include "algorithms/compressed_collective.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "algorithms/fp32/fp32.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {
namespace {

using topo::KernelKind;

// What the metadata all-reduce binds to: plain fp32 words.
const Fp32Compressor& metadata_codec() {
  static const Fp32Compressor fp32;
  return fp32;
}

PhaseKind phase_of(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPlanLocal: return PhaseKind::kPlanLocal;
    case KernelKind::kPrepare: return PhaseKind::kPrepare;
    default: return PhaseKind::kFinish;
  }
}

// A phase of `kind` whose schedule `make` builds, bound to `codec`.
topo::SchedulePhase phase(PhaseKind kind, std::function<std::unique_ptr<topo::ScheduleGenerator>()> make,
                          const Compressor* codec) {
  return {kind, std::move(make),
          [codec](topo::Schedule& s, topo::OpId first, topo::OpId end) { bind_ops(s, *codec, first, end); },
          std::string(codec->name()), codec->params()};
}

}  // namespace

Status CompressedCollective::check_scheme(const Compressor& comp, topo::CollectiveOp op, uint32_t ranks,
                                          uint64_t elements) {
  if (op != topo::CollectiveOp::kAllReduce) {
    const std::string_view name = topo::collective_op_name(op);
    const uint64_t reduced = comp.reduced_elements(elements);
    if (reduced != elements)
      return invalid_argument(fmt::format("'{}' reduces {} entries for a tensor of {} (its prepared vector: low-rank "
                                          "factors, a compacted union or a padded rotation), which only an allreduce "
                                          "can do, not {}",
                                          comp.name(), reduced, elements, name));
    if (comp.prepare_mixes_entries())
      return invalid_argument(fmt::format("'{}' mixes the tensor's entries before the collective (a rotation of the "
                                          "whole vector), so a shard of what it reduces means nothing alone: only "
                                          "an allreduce can run it, not {}",
                                          comp.name(), name));
    if (comp.plan_changes_length())
      return invalid_argument(fmt::format("'{}' reduces a vector whose length each round's plan decides (a compacted "
                                          "union, a controlled rank), which only an allreduce can do, not {}",
                                          comp.name(), name));
  }
  if (Status st = comp.can_reduce(elements, ranks); !st.ok()) return st.at("/params");
  return ok_status();
}

Status CompressedCollective::check_collective(const Compressor& comp, const topo::CollectiveInfo& collective,
                                              uint32_t ranks, uint64_t elements, const topo::CollectiveOptions& base) {
  topo::CollectiveOptions options = base;
  options.align = comp.alignment();
  options.cuts.clear();
  if (Status st = collective.check(ranks, elements, options); !st.ok())
    return invalid_argument(fmt::format("{} cannot run '{}' on {} elements over {} ranks: {}", collective.algorithm,
                                        comp.name(), elements, ranks, st.message()));
  return ok_status();
}

Status CompressedCollective::check(const Compressor& comp, const topo::CollectiveInfo& collective, uint32_t ranks,
                                   uint64_t elements, const topo::CollectiveOptions& base) {
  CCSIM_RETURN_IF_ERROR(check_scheme(comp, collective.operation, ranks, elements));
  return check_collective(comp, collective, ranks, elements, base);
}

CompressedCollective::CompressedCollective(Compressor& comp, const topo::CollectiveInfo& collective, uint32_t ranks,
                                           uint64_t elements, topo::CollectiveOptions base)
    : comp_(&comp), collective_(&collective), ranks_(ranks), elements_(elements), base_(std::move(base)) {
  plan_bytes_ = comp.plan_format(elements, ranks).wire_bytes();
}

Result<PlanReport> CompressedCollective::plan(std::span<const std::span<const float>> inputs,
                                              const NumericsOptions& options, PlanStatsCache* cache) {
  CCSIM_CHECK(inputs.size() == ranks_, "{} inputs for {} ranks", inputs.size(), ranks_);
  CCSIM_ASSIGN_OR_RETURN(PlanReport report, plan_round(*comp_, inputs, options, cache));
  plan_bytes_ = report.wire_bytes_per_rank;
  CCSIM_RETURN_IF_ERROR(fix());
  return report;
}

Result<PlanReport> CompressedCollective::commit_plan(PlanAccumulator& accumulated) {
  CCSIM_ASSIGN_OR_RETURN(PlanReport report, accumulated.commit());
  plan_bytes_ = report.wire_bytes_per_rank;
  CCSIM_RETURN_IF_ERROR(fix());
  return report;
}

Status CompressedCollective::fix() {
  reduced_ = comp_->reduced_elements(elements_);
  options_ = base_;
  set_shard_options(*comp_, collective_->operation, reduced_, ranks_, options_);
  if (reduced_ != elements_ && collective_->operation != topo::CollectiveOp::kAllReduce)
    return internal_error(fmt::format("'{}' reduces {} entries of a {}-entry tensor on a {}: check() should have "
                                      "refused it", comp_->name(), reduced_, elements_,
                                      topo::collective_op_name(collective_->operation)));
  if (Status st = collective_->check(ranks_, reduced_, options_); !st.ok())
    return internal_error(fmt::format("{} cannot run the {} entries '{}' prepared on {} ranks ({}): check() should "
                                      "have refused the input", collective_->algorithm, reduced_, comp_->name(),
                                      ranks_, st.message()));
  tensor_ = algo::tensor_bytes(*comp_, reduced_, ranks_, options_);
  return ok_status();
}

std::vector<KernelKind> CompressedCollective::round_ops() const { return algo::round_ops(*comp_, elements_, ranks_); }

std::vector<topo::SchedulePhase> CompressedCollective::phases() const {
  std::vector<topo::SchedulePhase> out;
  const std::vector<KernelKind> round = round_ops();
  const uint32_t ranks = ranks_;
  const uint64_t elements = elements_;
  auto round_phase = [&](KernelKind kind) {
    if (std::find(round.begin(), round.end(), kind) == round.end()) return;
    out.push_back(phase(phase_of(kind), [kind, ranks, elements] { return topo::make_round_ops(kind, ranks, elements); },
                        comp_));
  };
  if (plan_bytes_ > 0) {
    round_phase(KernelKind::kPlanLocal);
    const uint64_t words = std::max<uint64_t>((plan_bytes_ + 3) / 4, ranks);
    out.push_back(phase(PhaseKind::kMetadata, [ranks, words] {
      return topo::make_ring(topo::CollectiveOp::kAllReduce, ranks, words, {}, false);
    }, &metadata_codec()));
  }
  round_phase(KernelKind::kPrepare);
  const topo::CollectiveInfo* collective = collective_;
  const uint64_t reduced = reduced_;
  const topo::CollectiveOptions options = options_;
  out.push_back(phase(PhaseKind::kCollective, [collective, ranks, reduced, options] {
    return collective->make(ranks, reduced, options);
  }, comp_));
  round_phase(KernelKind::kFinish);
  return out;
}

topo::Schedule CompressedCollective::bound_schedule() const {
  topo::Schedule schedule = collective_->build(ranks_, reduced_, options_);
  bind_schedule(schedule, *comp_);
  return schedule;
}

Result<NumericsRound> CompressedCollective::run(std::span<const std::span<float>> buffers,
                                                const NumericsOptions& options) const {
  NumericsRound out{{}, bound_schedule()};
  CCSIM_ASSIGN_OR_RETURN(out.stats, run_numerics(out.schedule, *comp_, buffers, options));
  return out;
}

}  // namespace ccsim::algo
