#include "algorithms/collective_session.hpp"

#include <fmt/format.h>

#include "algorithms/registry.hpp"
#include "sim/base/diagnostics.hpp"

namespace ccsim::algo {

Result<std::unique_ptr<CollectiveSession>> CollectiveSession::create(const std::string& scheme,
                                                                     const nlohmann::json& params,
                                                                     const topo::CollectiveInfo& collective,
                                                                     uint32_t ranks, uint64_t elements,
                                                                     const topo::CollectiveOptions& base,
                                                                     std::vector<LayerShape> layout, uint64_t seed) {
  const CompressorRegistry& registry = CompressorRegistry::global();
  CCSIM_ASSIGN_OR_RETURN(auto comp, registry.create(scheme, params));
  std::unique_ptr<CollectiveSession> s(new CollectiveSession());
  Diagnostics diag;
  s->resolved_ = registry.find(scheme)->params.resolve(params, "/params", diag);
  s->layout_ = std::move(layout);
  comp->set_layout(s->layout_);
  CCSIM_RETURN_IF_ERROR(CompressedCollective::check(*comp, collective, ranks, elements, base));
  s->comp_ = std::move(comp);
  s->lowering_ = std::make_unique<CompressedCollective>(*s->comp_, collective, ranks, elements, base);
  s->seed_ = seed;
  return s;
}

Result<SessionRound> CollectiveSession::run(std::span<const std::span<const float>> inputs,
                                            std::span<const std::span<float>> outputs, bool hop_errors) {
  SessionRound out;
  out.round = round_;
  const NumericsOptions options{seed_, round_, hop_errors};
  CCSIM_ASSIGN_OR_RETURN(out.plan, lowering_->plan(inputs, options));
  for (size_t r = 0; r < outputs.size(); ++r) copy_unless_same(inputs[r], outputs[r]);
  CCSIM_ASSIGN_OR_RETURN(NumericsRound round, lowering_->run(outputs, options));
  ++round_;
  std::vector<std::span<const float>> ends(outputs.begin(), outputs.end());
  out.errors = operation_errors(round.schedule, inputs, ends);
  CCSIM_RETURN_IF_ERROR(check_errors_finite(inputs, out.errors, comp_->name()));
  out.bytes = lowering_->round_bytes();
  out.stats = std::move(round.stats);
  out.decisions = comp_->plan_decisions();
  out.bits_per_entry = RoundBytes::bits(out.bytes.total(), elements());
  return out;
}

}  // namespace ccsim::algo
