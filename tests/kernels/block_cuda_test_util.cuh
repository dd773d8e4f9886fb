#pragma once
// Shared by the CUDA codec tests of kernels/cuda/block_cuda.hpp (block_cuda_test.cu,
// block_cuda_elem_test.cu): check_codec(), which runs every op of a codec on both sides and
// compares them: encode (bytes, and the overflow count where the encoder returns one), decode and
// decode-accumulate (floats bit for bit), and the fused hop against decode_accumulate followed by
// encode (acc bit for bit, the message byte for byte). Device outputs are pre-filled with garbage,
// so a byte the kernel fails to write shows up as a difference.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cuda/block_cuda.hpp"
#include "tests/kernels/cuda_test_support.cuh"

namespace ccsim::kern::cuda_test {

using namespace ::ccsim::kern::testing;

// --- the codec harness ---------------------------------------------------------------------------

// One codec configuration: the CPU reference ops and the GPU entry points, closed over the format,
// key and index base. Encoders that count (MX) return / add to the count; others return 0.
struct Codec {
  uint64_t wire_bytes = 0;
  std::function<uint64_t(const float* x, uint8_t* out)> cpu_encode;
  std::function<void(const uint8_t* in, float* out)> cpu_decode;
  std::function<void(const uint8_t* in, float* acc)> cpu_decode_accumulate;
  std::function<Status(const float* d_x, uint8_t* d_out, uint64_t* d_count)> gpu_encode;
  std::function<Status(const uint8_t* d_in, float* d_out)> gpu_decode;
  std::function<Status(const uint8_t* d_in, float* d_acc)> gpu_decode_accumulate;
  std::function<Status(const uint8_t* d_in, float* d_acc, uint8_t* d_out, uint64_t* d_count)> gpu_fused;
};

// Runs every op of `c` on `x` (and the accumulator `acc0`) on both sides and compares. The offsets
// shift the device float buffers (multiples of 4 bytes) and the wire buffers (any byte count).
inline void check_codec(const Codec& c, const std::vector<float>& x, const std::vector<float>& acc0,
                        bool nan_payload_may_differ, uint64_t float_offset = 0, uint64_t wire_offset = 0) {
  const uint64_t n = x.size(), wire = c.wire_bytes;
  ASSERT_EQ(acc0.size(), n);
  DeviceBuffer<float> d_x(n, float_offset), d_acc(n, float_offset);
  DeviceBuffer<uint8_t> d_enc(wire, wire_offset), d_out(wire, wire_offset);
  DeviceBuffer<uint64_t> d_count(1);
  ASSERT_NE(d_x.get(), nullptr);
  ASSERT_NE(d_acc.get(), nullptr);
  ASSERT_NE(d_enc.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_NE(d_count.get(), nullptr);

  // Encode.
  std::vector<uint8_t> cpu_enc(wire, 0x5A), gpu_enc(wire);
  const uint64_t cpu_count = c.cpu_encode(x.data(), cpu_enc.data());
  std::vector<uint64_t> gpu_count(1);
  ASSERT_CUDA_OK(d_x.upload(x));
  ASSERT_CUDA_OK(d_enc.fill(0xA5));
  ASSERT_CUDA_OK(d_count.fill(0));
  ASSERT_STATUS_OK(c.gpu_encode(d_x.get(), d_enc.get(), d_count.get()));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(d_enc.download(gpu_enc));
  ASSERT_CUDA_OK(d_count.download(gpu_count));
  {
    SCOPED_TRACE("encode");
    expect_same_bytes(cpu_enc, gpu_enc);
    EXPECT_EQ(cpu_count, gpu_count[0]) << "overflow count";
  }

  // Decode, from the CPU's message.
  std::vector<float> cpu_dec(n), gpu_dec(n);
  c.cpu_decode(cpu_enc.data(), cpu_dec.data());
  ASSERT_CUDA_OK(d_enc.upload(cpu_enc));
  ASSERT_CUDA_OK(d_acc.fill(0xFF));
  ASSERT_STATUS_OK(c.gpu_decode(d_enc.get(), d_acc.get()));
  ASSERT_CUDA_OK(d_acc.download(gpu_dec));
  {
    SCOPED_TRACE("decode");
    expect_same_floats(cpu_dec, gpu_dec, nan_payload_may_differ);
  }

  // Decode-accumulate.
  std::vector<float> cpu_acc = acc0, gpu_acc(n);
  c.cpu_decode_accumulate(cpu_enc.data(), cpu_acc.data());
  ASSERT_CUDA_OK(d_acc.upload(acc0));
  ASSERT_STATUS_OK(c.gpu_decode_accumulate(d_enc.get(), d_acc.get()));
  ASSERT_CUDA_OK(d_acc.download(gpu_acc));
  {
    SCOPED_TRACE("decode_accumulate");
    expect_same_floats(cpu_acc, gpu_acc, nan_payload_may_differ);
  }

  // Fused hop: decode_accumulate then encode on the CPU.
  std::vector<float> cpu_fused_acc = acc0, gpu_fused_acc(n);
  std::vector<uint8_t> cpu_out(wire, 0x5A), gpu_out(wire);
  c.cpu_decode_accumulate(cpu_enc.data(), cpu_fused_acc.data());
  const uint64_t cpu_fused_count = c.cpu_encode(cpu_fused_acc.data(), cpu_out.data());
  ASSERT_CUDA_OK(d_acc.upload(acc0));
  ASSERT_CUDA_OK(d_out.fill(0xA5));
  ASSERT_CUDA_OK(d_count.fill(0));
  ASSERT_STATUS_OK(c.gpu_fused(d_enc.get(), d_acc.get(), d_out.get(), d_count.get()));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(d_acc.download(gpu_fused_acc));
  ASSERT_CUDA_OK(d_out.download(gpu_out));
  ASSERT_CUDA_OK(d_count.download(gpu_count));
  {
    SCOPED_TRACE("decode_accumulate_encode");
    expect_same_floats(cpu_fused_acc, gpu_fused_acc, nan_payload_may_differ);
    expect_same_bytes(cpu_out, gpu_out);
    EXPECT_EQ(cpu_fused_count, gpu_count[0]) << "overflow count";
  }
}

}  // namespace ccsim::kern::cuda_test
