#include "algorithms/numerics.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "kernels/parallel.hpp"
#include "sim/base/check.hpp"

namespace ccsim::algo {

using topo::KernelKind;
using topo::Op;
using topo::OpKind;

void bind_schedule(topo::Schedule& schedule, const Compressor& compressor) {
  const auto& chunks = schedule.chunks();
  for (Op& op : schedule.mutable_ops()) {
    const TensorSpec spec{chunks[op.chunk].offset, chunks[op.chunk].count};
    if (op.kind == OpKind::kTransfer) {
      op.bytes = compressor.wire_bytes(spec, HopContext{op.summed, schedule.num_ranks()});
    } else {
      // Decoders see the incoming message's hop; encoders the hop they produce.
      const uint32_t hop_summed = (op.kernel == KernelKind::kDecodeAccumulateEncode) ? op.summed - 1 : op.summed;
      op.bytes = compressor.memory_bytes(op.kernel, spec, HopContext{hop_summed, schedule.num_ranks()});
    }
  }
}

Result<NumericsStats> run_numerics(const topo::Schedule& schedule, Compressor& compressor,
                                   std::span<const std::span<float>> buffers, const NumericsOptions& options) {
  CCSIM_CHECK(buffers.size() == schedule.num_ranks(), "{} buffers for {} ranks", buffers.size(), schedule.num_ranks());
  for (const auto& b : buffers) CCSIM_CHECK(b.size() == schedule.elements());
  const auto& ops = schedule.ops();
  const auto& chunks = schedule.chunks();
  const uint32_t ranks = schedule.num_ranks();

  for (const auto& c : chunks) CCSIM_RETURN_IF_ERROR(compressor.can_implement(TensorSpec{c.offset, c.count}));

  // Messages live from their producing op to their last consumer.
  std::vector<uint32_t> consumers(ops.size(), 0);
  for (const Op& op : ops)
    if (op.kind == OpKind::kKernel && topo::Schedule::consumes_message(op.kernel)) ++consumers[op.message];
  std::vector<std::vector<uint8_t>> messages(ops.size());
  std::vector<std::vector<uint8_t>> pool;  // released buffers, reused to avoid fresh page faults

  NumericsStats stats;
  uint64_t live_bytes = 0;
  for (topo::OpId id = 0; id < ops.size(); ++id) {
    const Op& op = ops[id];
    const topo::Chunk& c = chunks[op.chunk];
    const TensorSpec spec{c.offset, c.count};
    if (op.kind == OpKind::kTransfer) {
      const auto& msg = messages[op.message];
      CCSIM_CHECK(msg.size() == op.bytes, "transfer {} carries {} bytes but is bound to {}", id, msg.size(), op.bytes);
      stats.wire_bytes += msg.size();
      continue;
    }
    std::span<float> acc = buffers[op.rank].subspan(c.offset, c.count);
    const kern::RngKey key{options.seed, options.round, op.rank, id & 0xFFFFFFu};
    auto new_message = [&](uint32_t summed) -> std::span<uint8_t> {
      auto& m = messages[id];
      const uint64_t size = compressor.wire_bytes(spec, HopContext{summed, ranks});
      for (size_t p = 0; p < pool.size(); ++p) {
        if (pool[p].capacity() >= size) {
          m.swap(pool[p]);
          pool[p].swap(pool.back());
          pool.pop_back();
          break;
        }
      }
      m.resize(size);
      live_bytes += m.size();
      stats.peak_message_bytes = std::max(stats.peak_message_bytes, live_bytes);
      return m;
    };
    auto release = [&](topo::OpId msg) {
      if (--consumers[msg] == 0) {
        live_bytes -= messages[msg].size();
        messages[msg].clear();
        pool.push_back(std::move(messages[msg]));
        messages[msg] = {};
      }
    };
    const HopContext in_hop{op.message == topo::kNoOp ? 0u : ops[op.message].summed, ranks};
    switch (op.kernel) {
      case KernelKind::kEncode: compressor.encode(acc, spec, HopContext{op.summed, ranks}, key, new_message(op.summed)); break;
      case KernelKind::kDecode: compressor.decode(messages[op.message], spec, in_hop, acc); break;
      case KernelKind::kDecodeAccumulate: compressor.decode_accumulate(messages[op.message], spec, in_hop, acc); break;
      case KernelKind::kDecodeAccumulateEncode:
        compressor.decode_accumulate_encode(messages[op.message], spec, in_hop, acc, HopContext{op.summed, ranks}, key,
                                            new_message(op.summed));
        break;
    }
    if (op.message != topo::kNoOp) release(op.message);
    ++stats.kernels_run;
  }
  return stats;
}

ErrorStats error_stats(std::span<const float> exact, std::span<const float> got) {
  CCSIM_CHECK(exact.size() == got.size());
  const uint64_t n = exact.size();
  constexpr uint64_t kPiece = 1 << 16;
  const uint64_t pieces = (n + kPiece - 1) / kPiece;
  std::vector<ErrorStats> partial(pieces);
  kern::parallel_for(pieces, 1, [&](uint64_t p0, uint64_t p1) {
    for (uint64_t p = p0; p < p1; ++p) {
      double se = 0, sn = 0;
      for (uint64_t i = p * kPiece; i < std::min(n, (p + 1) * kPiece); ++i) {
        const double x = exact[i], d = x - static_cast<double>(got[i]);
        se += d * d;
        sn += x * x;
      }
      partial[p] = {se, sn};
    }
  });
  ErrorStats total;  // summed in a fixed order: independent of the thread count
  for (const auto& s : partial) {
    total.sq_error += s.sq_error;
    total.sq_norm += s.sq_norm;
  }
  return total;
}

double vnmse(std::span<const ErrorStats> per_rank) {
  if (per_rank.empty()) return 0;
  double sum = 0;
  for (const auto& s : per_rank) {
    if (s.sq_error == 0) continue;
    if (!(s.sq_norm > 0)) return std::numeric_limits<double>::infinity();
    sum += s.sq_error / s.sq_norm;
  }
  return sum / static_cast<double>(per_rank.size());
}

}  // namespace ccsim::algo
