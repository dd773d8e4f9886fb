// Timing harness of the CUDA kernels (bench_cuda.hpp).
#include "kernels/cuda/bench_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace ccsim::kern {

struct CudaBench::Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

Result<std::unique_ptr<CudaBench>> CudaBench::open() {
  if (!cuda_device_available()) return internal_error("no CUDA device: --device cuda needs a GPU");
  std::unique_ptr<CudaBench> b(new CudaBench());
  int dev = 0;
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
  cudaDeviceProp prop{};
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"));
  b->name_ = prop.name;
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  b->events_ = std::make_unique<Events>();
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&b->events_->start), "cudaEventCreate"));
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&b->events_->stop), "cudaEventCreate"));
  return Result<std::unique_ptr<CudaBench>>(std::move(b));
}

CudaBench::~CudaBench() {
  cublas_destroy(cublas_);
  release_all();
  events_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Result<CublasHandle> CudaBench::cublas() {
  if (cublas_ == nullptr) {
    CCSIM_ASSIGN_OR_RETURN(cublas_, cublas_create());
  }
  return cublas_;
}

Result<void*> CudaBench::allocate(uint64_t bytes) {
  void* p = nullptr;
  CCSIM_RETURN_IF_ERROR(cuda_status(cudaMalloc(&p, std::max<uint64_t>(bytes, 16)), "cudaMalloc"));
  owned_.push_back(p);
  return p;
}

void CudaBench::release_all() {
  for (void* p : owned_) cudaFree(p);
  owned_.clear();
}

Status CudaBench::upload(void* d_dst, const void* src, uint64_t bytes) {
  return cuda_status(cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

Status CudaBench::download(void* dst, const void* d_src, uint64_t bytes) {
  return cuda_status(cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

Status CudaBench::synchronize() { return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

Status CudaBench::median_seconds(uint32_t repeats, const std::function<Status(CudaStream)>& op, double& seconds) {
  CCSIM_RETURN_IF_ERROR(op(stream_));
  std::vector<double> t;
  for (uint32_t r = 0; r < std::max<uint32_t>(repeats, 1); ++r) {
    CCSIM_RETURN_IF_ERROR(cuda_status(cudaEventRecord(events_->start, stream_), "cudaEventRecord"));
    CCSIM_RETURN_IF_ERROR(op(stream_));
    CCSIM_RETURN_IF_ERROR(cuda_status(cudaEventRecord(events_->stop, stream_), "cudaEventRecord"));
    CCSIM_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(events_->stop), "cudaEventSynchronize"));
    float ms = 0;
    CCSIM_RETURN_IF_ERROR(
        cuda_status(cudaEventElapsedTime(&ms, events_->start, events_->stop), "cudaEventElapsedTime"));
    t.push_back(static_cast<double>(ms) * 1e-3);
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  seconds = t[t.size() / 2];
  return ok_status();
}

Status CudaBench::copy_bandwidth(uint64_t bytes, uint32_t repeats, double& bytes_per_second) {
  auto from = allocate(bytes);
  if (!from.ok()) return from.status();
  auto to = allocate(bytes);
  if (!to.ok()) return to.status();
  double s = 0;
  CCSIM_RETURN_IF_ERROR(median_seconds(repeats, [&](CudaStream st) {
    return cuda_status(cudaMemcpyAsync(*to, *from, bytes, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
  }, s));
  bytes_per_second = 2.0 * static_cast<double>(bytes) / s;
  return ok_status();
}

}  // namespace ccsim::kern
