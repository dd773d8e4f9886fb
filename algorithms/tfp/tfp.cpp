#include "algorithms/tfp/tfp.hpp"

#include <fmt/format.h>

namespace ccsim::algo {
namespace {

kern::TfpBase parse_base(const std::string& s) {
  if (s == "fp16") return kern::TfpBase::kFloat16;
  if (s == "fp8e4m3") return kern::TfpBase::kFloat8E4M3;
  if (s == "fp8e5m2") return kern::TfpBase::kFloat8E5M2;
  return kern::TfpBase::kFloat32;
}

}  // namespace

CompressorInfo TfpCompressor::info() {
  ParamTable params;
  params
      .add_int("k",
               "bits kept per element: sign, exponent, top mantissa bits (fp32 10..32, fp16 7..16, fp8e4m3 6..8, "
               "fp8e5m2 7..8)",
               16, 6, 32)
      .add_choice("base", "format truncated: fp32 itself, or x converted to fp16 / FP8 first (for small k)", "fp32",
                  {"fp32", "fp16", "fp8e4m3", "fp8e5m2"})
      .add_bool("random_rounding",
                "round to the neighbour one unit up at bit k with probability by distance (unbiased, "
                "Eq. 5) instead of truncating",
                false);
  return {"tfp",
          "AQGB truncated floating point: first k bits of the fp32/fp16/fp8 pattern, optional random rounding: "
          "k bits/element",
          std::move(params), [](const Params& p) {
            const kern::TfpFormat format{parse_base(p.get_string("base")), static_cast<uint32_t>(p.get_int("k"))};
            return std::make_unique<TfpCompressor>(format, p.get_bool("random_rounding"));
          },
          [](const Params& p) -> Status {
            const kern::TfpFormat format{parse_base(p.get_string("base")), static_cast<uint32_t>(p.get_int("k"))};
            if (format.valid()) return ok_status();
            return invalid_argument_at("/k", fmt::format("expected an integer in [{}, {}] with base {}, got {}",
                                                format.min_bits(), format.base_bits(), p.get_string("base"),
                                                format.bits));
          }};
}

Status TfpCompressor::can_implement(const TensorSpec&) const {
  if (format_.valid()) return ok_status();
  static constexpr const char* kBaseNames[] = {"fp32", "fp16", "fp8e4m3", "fp8e5m2"};
  return invalid_argument(fmt::format("tfp: k={} is not valid with base {}: expected k in [{}, {}]", format_.bits,
                                      kBaseNames[static_cast<int>(format_.base)], format_.min_bits(),
                                      format_.base_bits()));
}

void TfpCompressor::encode(std::span<const float> x, const TensorSpec& spec, const HopContext&, const kern::RngKey& key,
                           std::span<uint8_t> out) {
  kern::tfp_encode(x.data(), spec.count, format_, random_rounding_, key, spec.offset, out.data());
}

void TfpCompressor::decode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                           std::span<float> out) {
  kern::tfp_decode(in.data(), spec.count, format_, out.data());
}

void TfpCompressor::decode_accumulate(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                      std::span<float> acc) {
  kern::tfp_decode_accumulate(in.data(), spec.count, format_, acc.data());
}

void TfpCompressor::decode_accumulate_encode(std::span<const uint8_t> in, const TensorSpec& spec, const HopContext&,
                                             std::span<float> acc, const HopContext&, const kern::RngKey& key,
                                             std::span<uint8_t> out) {
  kern::tfp_decode_accumulate_encode(in.data(), spec.count, format_, acc.data(), random_rounding_, key, spec.offset,
                                     out.data());
}

}  // namespace ccsim::algo
