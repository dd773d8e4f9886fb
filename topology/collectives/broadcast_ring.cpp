// Pipelined chain broadcast: root -> root+1 -> ... -> root+n-1. The root encodes every segment
// once; each rank decodes what it receives and forwards the same message unchanged. Step k holds
// hop k (root+k -> root+k+1) and the decodes of rank root+k; segment j+1 follows segment j on
// every hop, so with segments > 1 the segments pipeline along the chain.
#include "sim/base/check.hpp"
#include "topology/collectives/registry_parts.hpp"

#include <fmt/format.h>

#include <vector>

namespace ccsim::topo {
namespace {

class BroadcastRing final : public ScheduleGenerator {
 public:
  BroadcastRing(uint32_t n, uint64_t elements, const CollectiveOptions& o)
      : n_(n), elements_(elements), options_(o) {
    CCSIM_CHECK(n >= 2 && o.root < n && o.segments >= 1 && o.align >= 1, "broadcast ring n={} root={}", n, o.root);
  }

  Schedule begin() override {
    Schedule s(fmt::format("broadcast.ring(n={},root={})", n_, options_.root), CollectiveOp::kBroadcast, n_,
               elements_);
    for (const Chunk& seg : split_even(elements_, options_.segments, options_.align))
      s.add_chunk(seg.offset, seg.count);
    s.set_root(options_.root);
    segments_.assign(options_.segments, Segment{});
    return s;
  }

  bool next_step(Schedule& s) override {
    if (step_ >= n_) return false;
    const uint32_t at = (options_.root + step_) % n_, next = (at + 1) % n_;
    OpId prev_segment = kNoOp;  // the previous segment's transfer on this hop
    for (uint32_t j = 0; j < options_.segments; ++j) {
      Segment& seg = segments_[j];
      OpId ready;  // what the forwarding transfer waits for
      if (step_ == 0) {
        ready = s.add_kernel(KernelKind::kEncode, at, j, MessageRef{}, 1, {});
        seg.msg = s.message(ready);
        s.add_kernel(KernelKind::kDecode, at, j, seg.msg, 1, {ready});  // the root uses the compressed values too
      } else {
        s.add_kernel(KernelKind::kDecode, at, j, seg.msg, 1, {seg.arrived});
        ready = seg.arrived;
      }
      if (step_ + 1 == n_) continue;
      seg.arrived = detail::send_after(s, at, next, seg.msg, ready, prev_segment);
      prev_segment = seg.arrived;
    }
    ++step_;
    return true;
  }

 private:
  struct Segment {
    MessageRef msg;         ///< the root's message for this segment
    OpId arrived = kNoOp;   ///< transfer that delivered it to the current rank
  };

  uint32_t n_;
  uint64_t elements_;
  CollectiveOptions options_;
  std::vector<Segment> segments_;
  uint32_t step_ = 0;
};

}  // namespace

std::unique_ptr<ScheduleGenerator> make_broadcast_ring(uint32_t ranks, uint64_t elements,
                                                       const CollectiveOptions& options) {
  return std::make_unique<BroadcastRing>(ranks, elements, options);
}

namespace detail {

void register_broadcast_ring(std::vector<CollectiveInfo>& out) {
  out.push_back(CollectiveInfo{
      CollectiveOp::kBroadcast, "ring",
      "pipelined chain root -> root+1 -> ...: encoded once at the root, forwarded unchanged, decoded everywhere; "
      "n-1 hops, segments pipeline along the chain",
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) -> Status {
        CCSIM_RETURN_IF_ERROR(check_common(ranks, elements, o));
        if (o.root >= ranks)
          return invalid_argument(fmt::format("broadcast root {} is not one of the {} ranks", o.root, ranks));
        return Status();
      },
      [](uint32_t ranks, uint64_t elements, const CollectiveOptions& o) {
        return make_broadcast_ring(ranks, elements, o);
      },
      // n − 1 hops per segment, whatever the root.
      [](uint32_t ranks, uint64_t, const CollectiveOptions& o) {
        return saturating_product({o.segments, ranks - 1u});
      }});
}

}  // namespace detail
}  // namespace ccsim::topo
