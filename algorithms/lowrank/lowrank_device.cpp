// The low-rank schemes' device ops (algorithms/device_ops.hpp): PowerSGD's and EDGC's round ops
// (kernels/cuda/lowrank_cuda.hpp, round_cuda.hpp, entropy_cuda.hpp). Their collectives send the
// factors in fp32, which has no CUDA codec.
//
// Their products run through cuBLAS, which adds a product's terms in another order than the CPU's
// Eigen (kernels/cuda/lowrank_cuda.hpp), so those outputs are checked against the CPU compressor's
// within twice the bound of a k-term fp32 sum (kern::fp32_sum_error_bound: each side within it of
// the exact value). Their elementwise steps are bit-identical.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "algorithms/detail/device_cases.hpp"
#include "algorithms/lowrank/edgc.hpp"
#include "algorithms/lowrank/low_rank.hpp"
#include "algorithms/lowrank/powersgd.hpp"
#include "kernels/cuda/entropy_cuda.hpp"
#include "kernels/cuda/lowrank_cuda.hpp"
#include "kernels/cuda/round_cuda.hpp"
#include "kernels/linalg/power_iteration.hpp"
#include "kernels/stats/entropy.hpp"

namespace ccsim::algo {
namespace detail {
namespace {

// The bound of each entry of a product of k-term sums, given each entry's sum of |a_i||b_i| (+ |c|).
std::vector<double> sum_bound(std::vector<double> magnitude, uint64_t k) {
  for (double& m : magnitude) m = 2.0 * kern::fp32_sum_error_bound(m, k);
  return magnitude;
}

std::vector<double> magnitudes(std::span<const float> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(static_cast<double>(v[i]));
  return out;
}

// The floats at d_out are within `bound` of the CPU's `cpu`, entry by entry (NaN where the CPU has NaN).
Status within_bound(const DeviceContext& c, const char* what, std::span<const float> cpu,
                    std::span<const double> bound, const void* d_out) {
  std::vector<float> gpu(cpu.size());
  CCSIM_RETURN_IF_ERROR(c.dev->download(gpu.data(), d_out, 4 * cpu.size()));
  for (size_t i = 0; i < cpu.size(); ++i) {
    const bool nan = std::isnan(cpu[i]), ok = nan ? std::isnan(gpu[i])
                                                  : std::fabs(static_cast<double>(gpu[i]) - cpu[i]) <= bound[i];
    if (!ok)
      return internal_error(fmt::format("{} entry {}: CUDA {} against the CPU compressor's {}, beyond the bound {} of "
                                        "the two summation orders",
                                        what, i, gpu[i], cpu[i], bound[i]));
  }
  return ok_status();
}

// The compressor's layer, checked to be the bench's one matrix layer, and compressed or not as the
// cases expect.
Result<LayerShape> lowrank_layer(const DeviceContext& c, const LowRankCompressor& lr, bool compressed) {
  const LayerShape layer = bench_layer(c.n);
  const std::vector<LayerShape> layers = lr.layers_for(c.n);
  const bool is_compressed = lr.reduced_elements(c.n) == layer.cols * lr.rank() && lr.rank() > 0;
  if (layers.size() != 1 || layers[0].rows != layer.rows || is_compressed != compressed)
    return internal_error(fmt::format("{}: the bench's {} x {} layer of {} elements is {}compressed at rank {}",
                                      c.scheme, layer.rows, layer.cols, c.n, is_compressed ? "" : "not ",
                                      lr.rank()));
  return layer;
}

// PowerSGD's steady state for rank kTimedRank: round 1, after a complete round 0 on the CPU, so Q
// is the warm start and every rank has an error-feedback residual. The CPU's Q, P^ and residual e
// (before the round's prepare), M = x + e, and their device copies (P, M: the device's outputs).
struct PowerSgdRound {
  uint64_t n = 0, rows = 0, cols = 0;
  uint32_t r = 0;
  std::span<const float> q, p_hat;  // the compressor's, after round 1's plan
  std::vector<float> e0, m;
  kern::CublasHandle handle = nullptr;
  const float* d_q = nullptr;
  const float* d_phat = nullptr;
  float* d_e = nullptr;
  float* d_m = nullptr;
  float* d_p = nullptr;
};

// Plays round 0 (every rank's prepare, the exact sum of what they prepared, every rank's finish),
// plans round 1, and uploads what its ops read.
Result<PowerSgdRound> powersgd_round1(DeviceContext& c, LowRankCompressor& lr, const LayerShape& layer) {
  PowerSgdRound w;
  w.n = c.n;
  w.rows = layer.rows;
  w.cols = layer.cols;
  w.r = lr.rank();
  const uint64_t n = c.n;
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  {
    const uint64_t m = lr.reduced_elements(n);
    std::vector<float> sum(m, 0.0f), v(m), t(n);
    for (uint32_t k = 0; k < kRanks; ++k) {
      c.comp->prepare(c.tensor(k), v, k, kRanks, c.prepare_key(k));
      for (uint64_t i = 0; i < m; ++i) sum[i] += v[i];
    }
    for (uint32_t k = 0; k < kRanks; ++k) c.comp->finish(sum, t, k, kRanks);
  }
  c.round = 1;
  c.planned = false;
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  w.q = lr.q(0);
  w.p_hat = lr.p_hat(0);
  const std::span<const float> e_round = lr.residual(kTimedRank);
  if (w.q.size() != w.cols * w.r || w.p_hat.size() != w.rows * w.r || e_round.size() != n)
    return internal_error(fmt::format("{}: Q of {}, P^ of {} and a residual of {} entries for a {} x {} layer at "
                                      "rank {}",
                                      c.scheme, w.q.size(), w.p_hat.size(), e_round.size(), w.rows, w.cols, w.r));
  w.e0.assign(e_round.begin(), e_round.end());
  w.m.resize(n);  // M = x + e, as the CPU forms it (no NaN in the bench's inputs)
  for (uint64_t i = 0; i < n; ++i) w.m[i] = c.tensor(kTimedRank)[i] + w.e0[i];
  CCSIM_ASSIGN_OR_RETURN(w.handle, c.dev->cublas());
  CCSIM_ASSIGN_OR_RETURN(void* d_q_v, c.dev->allocate(4 * w.q.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_phat_v, c.dev->allocate(4 * w.p_hat.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_e_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_m_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_p_v, c.dev->allocate(4 * w.rows * w.r));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_q_v, w.q.data(), 4 * w.q.size()));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_phat_v, w.p_hat.data(), 4 * w.p_hat.size()));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_e_v, w.e0.data(), 4 * n));
  w.d_q = static_cast<const float*>(d_q_v);
  w.d_phat = static_cast<const float*>(d_phat_v);
  w.d_e = static_cast<float*>(d_e_v);
  w.d_m = static_cast<float*>(d_m_v);
  w.d_p = static_cast<float*>(d_p_v);
  return w;
}

// plan_local: the CPU's P (its metadata sums, fp32 values held as doubles).
Status powersgd_plan_local_case(DeviceContext& c, const PowerSgdRound& w, std::vector<DeviceCase>& out) {
  const uint64_t n = w.n, rows = w.rows, cols = w.cols;
  const uint32_t r = w.r;
  const PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != rows * r)
    return internal_error(fmt::format("{}: {} metadata sums for P of {} x {}", c.scheme, stats.sum.size(), rows, r));
  const std::vector<float> cpu_p(stats.sum.begin(), stats.sum.end());
  const float* d_x = c.d_x;
  const kern::CublasHandle handle = w.handle;
  const float* d_q = w.d_q;
  float* d_e = w.d_e;
  float* d_m = w.d_m;
  float* d_p = w.d_p;
  const auto plan_local = [=](kern::CudaStream s) {
    CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_add_residual_cuda(d_x, n, d_e, d_m, s));
    return kern::lowrank_project_cuda(handle, d_m, rows, cols, d_q, r, d_p);
  };
  const auto plan_local_check = [&] {
    return within_bound(c, "P", cpu_p,
                        sum_bound(kern::lowrank_project_f64(w.m.data(), rows, cols, w.q.data(), r, true), cols), d_p);
  };
  return add_checked_case(c, topo::KernelKind::kPlanLocal, plan_local, plan_local_check, out);
}

// prepare, on its own copy of the residual (it updates it); `cpu_q` is set to the CPU's Q_i.
Status powersgd_prepare_case(DeviceContext& c, const LowRankCompressor& lr, const PowerSgdRound& w,
                             std::vector<float>& cpu_q, std::vector<DeviceCase>& out) {
  const uint64_t n = w.n, rows = w.rows, cols = w.cols;
  const uint32_t r = w.r;
  cpu_q = cpu_prepare(c);
  const std::vector<float> e1(lr.residual(kTimedRank).begin(), lr.residual(kTimedRank).end());
  CCSIM_ASSIGN_OR_RETURN(void* d_ep_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_qi_v, c.dev->allocate(4 * cols * r));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_ep_v, w.e0.data(), 4 * n));
  auto* d_ep = static_cast<float*>(d_ep_v);
  auto* d_qi = static_cast<float*>(d_qi_v);
  const float* d_x = c.d_x;
  const kern::CublasHandle handle = w.handle;
  const float* d_phat = w.d_phat;
  const auto prepare = [=](kern::CudaStream s) {
    CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_add_residual_cuda(d_x, n, d_ep, d_ep, s));
    CCSIM_RETURN_IF_ERROR(kern::lowrank_project_transposed_cuda(handle, d_ep, rows, cols, d_phat, r, d_qi));
    return kern::lowrank_subtract_cuda(handle, d_phat, d_qi, rows, cols, r, d_ep);
  };
  const auto prepare_check = [&]() -> Status {
    const std::vector<double> q_bound =
        sum_bound(kern::lowrank_project_transposed_f64(w.m.data(), rows, cols, w.p_hat.data(), r, true), rows);
    CCSIM_RETURN_IF_ERROR(within_bound(c, "Q_i", cpu_q, q_bound, d_qi));
    // e = M - P^ Q_i^T: its own sums' bound (|M| counting as a term), plus |P^| times Q_i's bound,
    // since the GPU subtracts its own Q_i.
    const std::vector<double> q_mag = magnitudes(cpu_q);
    std::vector<double> e_mag = kern::lowrank_expand_f64(w.p_hat.data(), q_mag.data(), rows, cols, r, true);
    for (uint64_t i = 0; i < n; ++i) e_mag[i] += std::fabs(static_cast<double>(w.m[i]));
    std::vector<double> e_bound = sum_bound(std::move(e_mag), r + 1);
    const std::vector<double> carried = kern::lowrank_expand_f64(w.p_hat.data(), q_bound.data(), rows, cols, r, true);
    for (uint64_t i = 0; i < n; ++i) e_bound[i] += carried[i];
    return within_bound(c, "e", e1, e_bound, d_ep);
  };
  // The timed launches go on from the residual the check left: the same passes over the same bytes.
  return add_checked_case(c, topo::KernelKind::kPrepare, prepare, prepare_check, out);
}

// finish of kRanks times rank kTimedRank's Q_i (a rank that is not the last): P^ (sum Q)^T.
Status powersgd_finish_case(DeviceContext& c, const PowerSgdRound& w, const std::vector<float>& cpu_q,
                            std::vector<DeviceCase>& out) {
  const uint64_t n = w.n, rows = w.rows, cols = w.cols;
  const uint32_t r = w.r;
  const std::vector<float> sum = full_sum(cpu_q);
  std::vector<float> tensor(n);
  c.comp->finish(sum, tensor, kTimedRank, kRanks);
  CCSIM_ASSIGN_OR_RETURN(void* d_sum_v, c.dev->allocate(4 * sum.size()));
  CCSIM_ASSIGN_OR_RETURN(void* d_t_v, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_sum_v, sum.data(), 4 * sum.size()));
  const auto* d_sum = static_cast<const float*>(d_sum_v);
  auto* d_t = static_cast<float*>(d_t_v);
  const kern::CublasHandle handle = w.handle;
  const float* d_phat = w.d_phat;
  return add_checked_case(
      c, topo::KernelKind::kFinish,
      [=](kern::CudaStream s) {
        CCSIM_RETURN_IF_ERROR(kern::cublas_set_stream(handle, s));
        return kern::lowrank_expand_cuda(handle, d_phat, d_sum, rows, cols, r, d_t);
      },
      [&] {
        const std::vector<double> sum_mag = magnitudes(sum);
        return within_bound(
            c, "the tensor", tensor,
            sum_bound(kern::lowrank_expand_f64(w.p_hat.data(), sum_mag.data(), rows, cols, r, true), r), d_t);
      },
      out);
}

// PowerSGD (kernels/cuda/lowrank_cuda.hpp, round_cuda.hpp) in its steady state (powersgd_round1()).
// plan_local: M = x + e, P = M Q; prepare: M = x + e in e's place, Q_i = M^T P^, e = M - P^ Q_i^T;
// finish (a rank that is not the last): P^ (sum Q)^T.
Status powersgd_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  auto* lr = dynamic_cast<LowRankCompressor*>(c.comp);
  if (lr == nullptr) return internal_error(fmt::format("{}: the registry made another compressor", c.scheme));
  CCSIM_ASSIGN_OR_RETURN(const LayerShape layer, lowrank_layer(c, *lr, true));
  CCSIM_ASSIGN_OR_RETURN(const PowerSgdRound w, powersgd_round1(c, *lr, layer));
  CCSIM_RETURN_IF_ERROR(powersgd_plan_local_case(c, w, out));
  std::vector<float> cpu_q;
  CCSIM_RETURN_IF_ERROR(powersgd_prepare_case(c, *lr, w, cpu_q, out));
  return powersgd_finish_case(c, w, cpu_q, out);
}

// EDGC at its defaults in round 0: warming up (nothing compressed) in a sampled round. plan_local
// is GDS's entropy sample of the matrix layer (kernels/cuda/entropy_cuda.hpp); prepare moves the
// uncompressed layer (x + e, then e = 0).
Status edgc_round_cases(DeviceContext& c, std::vector<DeviceCase>& out) {
  auto* ed = dynamic_cast<EdgcCompressor*>(c.comp);
  if (ed == nullptr) return internal_error("edgc: the registry made another compressor");
  CCSIM_RETURN_IF_ERROR(lowrank_layer(c, *ed, false).status());
  if (!ed->controller().samples_round())
    return internal_error("edgc: the bench expects round 0 to be a sampled round");
  const uint64_t n = c.n;
  const uint32_t bins = ed->options().entropy_bins;
  const auto beta = static_cast<float>(ed->options().beta);
  const kern::RngKey key = c.plan_key(kTimedRank);
  const PlanStats stats = cpu_plan_local(c);
  if (stats.sum.size() != 2 || stats.sum[1] != 1.0)
    return internal_error(fmt::format("edgc: plan_local's entries {} are not one entropy estimate",
                                      fmt::join(stats.sum, ", ")));
  size_t temp_bytes = 0;
  CCSIM_RETURN_IF_ERROR(
      kern::sampled_histogram_entropy_cuda(nullptr, temp_bytes, c.d_x, n, bins, beta, key, 0, nullptr));
  CCSIM_ASSIGN_OR_RETURN(void* d_temp, c.dev->allocate(temp_bytes));
  CCSIM_ASSIGN_OR_RETURN(void* d_h, c.dev->allocate(sizeof(double)));
  const float* d_x = c.d_x;
  auto* d_entropy = static_cast<double*>(d_h);
  const auto plan_local = [=](kern::CudaStream s) {
    size_t bytes = temp_bytes;
    return kern::sampled_histogram_entropy_cuda(d_temp, bytes, d_x, n, bins, beta, key, 0, d_entropy, s);
  };
  // The sample's range and counts are the CPU's exactly; the entropy from them, on the host, is then
  // the CPU's estimate bit for bit (entropy_estimate: histogram entropy + log2 of the bin width,
  // sent as fp32). The device's own log2 is correctly rounded, glibc's is not: the two may differ
  // in the last bits (entropy_cuda.hpp).
  const auto plan_local_check = [&]() -> Status {
    const kern::EntropyCudaScratch scratch = kern::entropy_cuda_scratch(d_temp);
    float range[2];
    std::vector<uint64_t> counts(bins);
    double device_h = 0;
    CCSIM_RETURN_IF_ERROR(c.dev->download(range, scratch.d_range, sizeof range));
    CCSIM_RETURN_IF_ERROR(c.dev->download(counts.data(), scratch.d_counts, 8 * bins));
    CCSIM_RETURN_IF_ERROR(c.dev->download(&device_h, d_entropy, sizeof device_h));
    const double h = kern::entropy_bits(counts.data(), bins);
    const double width = (static_cast<double>(range[1]) - range[0]) / bins;
    const auto estimate = static_cast<float>(h + std::log2(width));
    if (estimate != static_cast<float>(stats.sum[0]) || !(std::fabs(device_h - h) <= 1e-12 * std::max(1.0, h)))
      return internal_error(fmt::format("the CUDA entropy sample gives {} ({} bits on the device, {} from its "
                                        "counts), the CPU compressor {}",
                                        estimate, device_h, h, stats.sum[0]));
    return ok_status();
  };
  CCSIM_RETURN_IF_ERROR(add_checked_case(c, topo::KernelKind::kPlanLocal, plan_local, plan_local_check, out));

  // prepare: rank kTimedRank's residual is zeros before its first prepare.
  CCSIM_RETURN_IF_ERROR(plan_once(c));
  const std::vector<float> prepared = cpu_prepare(c);
  const std::vector<float> zeros(n, 0.0f);
  CCSIM_ASSIGN_OR_RETURN(void* d_e_v, c.dev->allocate(4 * n));
  CCSIM_ASSIGN_OR_RETURN(void* d_out_v, c.dev->allocate(4 * n));
  CCSIM_RETURN_IF_ERROR(c.dev->upload(d_e_v, zeros.data(), 4 * n));
  auto* d_e = static_cast<float*>(d_e_v);
  auto* d_out = static_cast<float*>(d_out_v);
  return add_round_case(
      c, topo::KernelKind::kPrepare,
      [=](kern::CudaStream s) { return kern::lowrank_move_uncompressed_cuda(d_x, n, d_e, d_out, s); }, prepared,
      d_out_v, out);
}

}  // namespace
}  // namespace detail

const DeviceOps& PowerSgdCompressor::device_ops() {
  static const DeviceOps kOps{nullptr, {{"{}", detail::powersgd_round_cases}}};
  return kOps;
}

const DeviceOps& EdgcCompressor::device_ops() {
  static const DeviceOps kOps{nullptr, {{"{}", detail::edgc_round_cases}}};
  return kOps;
}

}  // namespace ccsim::algo
