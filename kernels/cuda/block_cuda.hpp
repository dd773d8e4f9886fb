#pragma once
/// \file
/// CUDA versions of the block and element codecs of kernels/quant/: MX (mx.hpp), group
/// quantization (group_quant.hpp: EQuARX int8/FP8, SDP4Bit int4/int8 with the Hadamard smoother),
/// TFP (tfp.hpp), QSGD (qsgd.hpp) and FP16 (fp16.hpp), plus the fused intermediate hop of each
/// (acc += decode(in); out = encode(acc) in one pass), behind a host API that needs no CUDA header.
///
/// Bit identity with the CPU references. The kernels call the same CCSIM_HD element functions,
/// write the same wire layout, draw the same Philox numbers (element i of a chunk at index
/// `index_base + i` of `key`) and are compiled with --fmad=false. Block maxima are exact and
/// order-independent; the only order-dependent sum, QSGD's norm, is summed in the CPU's element
/// order. A fused op equals the CPU's decode_accumulate followed by encode bit for bit.
///
/// NaN results of fp32 arithmetic follow the CPU's x86-64 rules rather than the GPU's canonical
/// NaN: the first NaN operand, quieted, or the default NaN 0xFFC00000 from an invalid operation
/// (inf/inf, 0*inf, inf-inf). The sign of such a NaN reaches the wire in formats that keep it
/// (E4M3, E5M2 and FP16 NaN codes: MX and EQuARX FP8 blocks holding inf or NaN, fused hops over
/// NaN sums), so encoded bytes match even for non-finite inputs. What is left are operations whose
/// two operands are both NaN (for instance acc and the decoded value, or two NaNs of different sign
/// meeting in a Hadamard butterfly): x86 returns the first in the order the compiler emitted, and
/// the kernels assume GCC's order (block_cuda_common.cuh). On a non-x86 host (aarch64: default NaN
/// 0x7FC00000) the NaN signs from invalid operations differ. quant_cuda.hpp's BF16/int8 kernels
/// return the canonical NaN instead (their codes do not carry a NaN's sign).
///
/// Entry points follow CUB's shape and quant_cuda.hpp's conventions: device pointers (prefix
/// `d_`), an optional stream, a Status; they check the arguments (the `*_cuda_can_implement`
/// checks, null pointers), enqueue one kernel and return, never allocate, never synchronize.
/// `count == 0` is a no-op. Buffers may start at any byte (floats at any 4-byte boundary); the
/// kernels use wider loads and stores where the addresses allow. Inputs and outputs of one call
/// must not overlap. Thread safety: no state; concurrent calls on different streams are safe.
///
/// Global FP8-LM scaling of MX: in block mode (algorithms/mx/mx.hpp) the committed per-block scale
/// codes are passed as `d_scale_codes` (mx_encode_with_scales semantics); layer mode is an
/// elementwise multiply in the compressor's prepare()/finish(), outside the codec.

#include <cstdint>

#include "kernels/cuda/quant_cuda.hpp"
#include "kernels/philox.hpp"
#include "kernels/quant/group_quant.hpp"
#include "kernels/quant/mx_quant.hpp"
#include "kernels/quant/tfp_quant.hpp"
#include "sim/base/status.hpp"

namespace ccsim::kern {

/// Largest block (MX block, quantization group, QSGD bucket) the CUDA kernels accept.
inline constexpr uint32_t kBlockCudaMaxBlock = 65536;

// --- MX (kernels/quant/mx_quant.hpp) -------------------------------------------------------------------

/// kInvalidArgument unless 1 <= f.block <= kBlockCudaMaxBlock, f.block * element bits is a
/// multiple of 8, the element format has at most 8 bits (E4M3, E5M2, E3M2, E2M3, E2M1) and the
/// scale and rounding are known values. Called by every mx_*_cuda entry point.
Status mx_cuda_can_implement(uint64_t count, const MxFormat& f);

/// mx_encode() into d_out (mx_bytes(count, f) bytes, fully overwritten). When d_overflows is not
/// null, adds to *d_overflows the number of elements with !(|x_i| <= range) (the value mx_encode
/// returns; the caller zeroes the counter and reads it after synchronizing).
/// REQUIRES: d_x holds `count` floats.
Status mx_encode_cuda(const float* d_x, uint64_t count, const MxFormat& f, const RngKey& key, uint64_t index_base,
                      float range, uint8_t* d_out, uint64_t* d_overflows = nullptr, CudaStream stream = nullptr);

/// mx_encode_with_scales(): block b of the chunk uses scale code d_scale_codes[b] (device memory,
/// ceil(count / f.block) entries: the committed codes of FP8-LM block scaling). d_overflows counts
/// the elements with !(|x_i| / scale <= element max), as mx_encode_with_scales returns.
Status mx_encode_with_scales_cuda(const float* d_x, uint64_t count, const MxFormat& f, const uint32_t* d_scale_codes,
                                  const RngKey& key, uint64_t index_base, uint8_t* d_out,
                                  uint64_t* d_overflows = nullptr, CudaStream stream = nullptr);

/// mx_decode(): d_out[i] = decoded element i (overwrites).
Status mx_decode_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_out,
                      CudaStream stream = nullptr);

/// mx_decode_accumulate(): d_acc[i] += decoded element i, in fp32.
Status mx_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_acc,
                                 CudaStream stream = nullptr);

/// The fused hop: mx_decode_accumulate(d_in, d_acc) then, on the new d_acc, mx_encode(range) if
/// d_scale_codes is null, else mx_encode_with_scales(d_scale_codes), in one pass (a group of
/// threads owns a block: decodes and accumulates it, writes acc, reduces the block maximum,
/// encodes). d_in and d_out hold mx_bytes(count, f) bytes; d_overflows as for the encoders.
Status mx_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, const MxFormat& f, float* d_acc,
                                        const uint32_t* d_scale_codes, const RngKey& key, uint64_t index_base,
                                        float range, uint8_t* d_out, uint64_t* d_overflows = nullptr,
                                        CudaStream stream = nullptr);

// --- group quantization (kernels/quant/group_quant.hpp) ------------------------------------------

/// kInvalidArgument unless the format is valid for group_quant_encode (kInt with 2 <= bits <= 8,
/// or FP8 with bits == 8; group * bits a multiple of 8; with hadamard, group a multiple of 32),
/// 1 <= group <= kBlockCudaMaxBlock and the rounding is known. Called by every group_quant_*_cuda
/// entry point (for both formats of the fused op).
Status group_quant_cuda_can_implement(uint64_t count, const GroupQuantFormat& f);

/// group_quant_encode() into d_out (group_quant_bytes(count, f) bytes, fully overwritten).
Status group_quant_encode_cuda(const float* d_x, uint64_t count, const GroupQuantFormat& f, const RngKey& key,
                               uint64_t index_base, uint8_t* d_out, CudaStream stream = nullptr);

/// group_quant_decode() (overwrites d_out).
Status group_quant_decode_cuda(const uint8_t* d_in, uint64_t count, const GroupQuantFormat& f, float* d_out,
                               CudaStream stream = nullptr);

/// group_quant_decode_accumulate(): d_acc[i] += decoded element i, in fp32.
Status group_quant_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const GroupQuantFormat& f,
                                          float* d_acc, CudaStream stream = nullptr);

/// The fused hop: group_quant_decode_accumulate(d_in, in_format, d_acc) then
/// group_quant_encode(d_acc, out_format) in one pass. The formats may differ in element, bits,
/// rounding and hadamard (SDP4Bit TLq: int8 in, int4 out) but not in group (kInvalidArgument).
Status group_quant_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count,
                                                 const GroupQuantFormat& in_format, float* d_acc,
                                                 const GroupQuantFormat& out_format, const RngKey& key,
                                                 uint64_t index_base, uint8_t* d_out, CudaStream stream = nullptr);

// --- TFP (kernels/quant/tfp_quant.hpp) -----------------------------------------------------------------

/// kInvalidArgument unless f.valid().
Status tfp_cuda_can_implement(uint64_t count, const TfpFormat& f);

/// tfp_encode() into d_out (tfp_bytes(count, f.bits) bytes, fully overwritten).
Status tfp_encode_cuda(const float* d_x, uint64_t count, const TfpFormat& f, bool random_rounding, const RngKey& key,
                       uint64_t index_base, uint8_t* d_out, CudaStream stream = nullptr);
/// tfp_decode() (overwrites d_out).
Status tfp_decode_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_out,
                       CudaStream stream = nullptr);
/// tfp_decode_accumulate().
Status tfp_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_acc,
                                  CudaStream stream = nullptr);
/// tfp_decode_accumulate(d_in, d_acc) then tfp_encode(d_acc) in one pass.
Status tfp_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, const TfpFormat& f, float* d_acc,
                                         bool random_rounding, const RngKey& key, uint64_t index_base, uint8_t* d_out,
                                         CudaStream stream = nullptr);

// --- QSGD (kernels/quant/qsgd_quant.hpp) ---------------------------------------------------------------

/// kInvalidArgument unless 2 <= bits <= 8, 1 <= bucket <= kBlockCudaMaxBlock and bucket * bits is
/// a multiple of 8.
Status qsgd_cuda_can_implement(uint64_t count, uint32_t bucket, uint32_t bits);

/// qsgd_encode() into d_out (qsgd_bytes(count, bucket, bits) bytes, fully overwritten). Each
/// bucket's norm is summed in element order, as the CPU does (one warp per bucket).
Status qsgd_encode_cuda(const float* d_x, uint64_t count, uint32_t bucket, uint32_t bits, const RngKey& key,
                        uint64_t index_base, uint8_t* d_out, CudaStream stream = nullptr);
/// qsgd_decode() (overwrites d_out).
Status qsgd_decode_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits, float* d_out,
                        CudaStream stream = nullptr);
/// qsgd_decode_accumulate().
Status qsgd_decode_accumulate_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits, float* d_acc,
                                   CudaStream stream = nullptr);
/// qsgd_decode_accumulate(d_in, d_acc) then qsgd_encode(d_acc) in one pass.
Status qsgd_decode_accumulate_encode_cuda(const uint8_t* d_in, uint64_t count, uint32_t bucket, uint32_t bits,
                                          float* d_acc, const RngKey& key, uint64_t index_base, uint8_t* d_out,
                                          CudaStream stream = nullptr);

// --- FP16 (kernels/quant/fp16_quant.hpp) ---------------------------------------------------------------

/// fp16_encode(): d_out[i] = float_to_fp16_rne(d_x[i]).
Status fp16_encode_cuda(const float* d_x, uint64_t count, uint16_t* d_out, CudaStream stream = nullptr);
/// fp16_decode(): d_out[i] = fp16_to_float(d_in[i]).
Status fp16_decode_cuda(const uint16_t* d_in, uint64_t count, float* d_out, CudaStream stream = nullptr);
/// fp16_decode_accumulate(): d_acc[i] += fp16_to_float(d_in[i]).
Status fp16_decode_accumulate_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, CudaStream stream = nullptr);
/// fp16_decode_accumulate(d_in, d_acc) then fp16_encode(d_acc, d_out), elementwise in one pass.
Status fp16_decode_accumulate_encode_cuda(const uint16_t* d_in, uint64_t count, float* d_acc, uint16_t* d_out,
                                          CudaStream stream = nullptr);

}  // namespace ccsim::kern
