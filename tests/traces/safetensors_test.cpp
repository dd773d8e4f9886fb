// safetensors reader and writer: exact dtype conversions, round trips, and one test per header
// rule the reader enforces (each error must name the file, the place and expected vs found).

#include "traces/safetensors.hpp"

#include "kernels/float_bits.hpp"
#include "kernels/quant/bf16_quant.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("ccsim_st_{}_{}_{}", info->test_suite_name(), info->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes an 8-byte length, `header` verbatim and `data_bytes` bytes of data.
  fs::path write_raw(const std::string& name, const std::string& header, size_t data_bytes,
                     std::string tail = {}) const {
    const fs::path p = dir_ / name;
    std::ofstream out(p, std::ios::binary);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << std::string(data_bytes, '\0') << tail;
    return p;
  }

  // Opens a file that must fail with kInvalidArgument; returns the message.
  std::string open_error(const fs::path& p) const {
    auto r = SafetensorsFile::open(p);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
    EXPECT_NE(r.status().message().find(p.string()), std::string::npos)
        << "message must name the file: " << r.status().message();
    return r.status().message();
  }

  fs::path dir_;
};

#define EXPECT_CONTAINS(haystack, needle)                                                                              \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "'" << (needle) << "' not in: " << (haystack)

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- dtype conversions ---------------------------------------------------------------------------

TEST(SafetensorsDtype, F16WidensAndNarrowsEveryValueExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    const uint16_t back = float_to_f16_rne(f);
    if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(back & 0x7C00u, 0x7C00u) << h;
      ASSERT_NE(back & 0x3FFu, 0u) << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << h;
    } else {
      ASSERT_EQ(back, h) << fmt::format("h=0x{:04x} f={}", h, f);
    }
  }
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(kern::float_to_bits(f16_to_float(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(SafetensorsDtype, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16_rne(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, 1.0 is even
  EXPECT_EQ(float_to_f16_rne(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, rounds up to even
  EXPECT_EQ(float_to_f16_rne(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16_rne(65520.0f), 0x7C00);  // tie between 65504 (odd) and 2^16: overflows to inf
  EXPECT_EQ(float_to_f16_rne(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_f16_rne(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0
  EXPECT_EQ(float_to_f16_rne(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16_rne(std::ldexp(3.0f, -25)), 0x0002);     // tie 1.5 ulp -> 2
  EXPECT_EQ(float_to_f16_rne(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounds up into the normals
  EXPECT_EQ(float_to_f16_rne(1e-30f), 0x0000);
  // Random fp32 values across the f16 range: the result is a nearest f16, ties to even.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log_mag(-26.0, 15.99);  // below 65504; overflow is checked above
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(std::exp2(log_mag(rng))) * (i % 2 ? -1.0f : 1.0f);
    const uint16_t h = float_to_f16_rne(x);
    const double got = std::abs(static_cast<double>(x) - f16_to_float(h));
    for (int delta : {-1, 1}) {
      const auto nb = static_cast<uint16_t>(h + delta);
      if ((nb & 0x7FFFu) > 0x7C00u || ((nb ^ h) & 0x8000u)) continue;  // NaN or sign change
      const double other = std::abs(static_cast<double>(x) - f16_to_float(nb));
      ASSERT_LE(got, other) << fmt::format("x={} h=0x{:04x}", x, h);
      if (got == other) {
        ASSERT_EQ(h & 1u, 0u) << fmt::format("tie must go to even: x={} h=0x{:04x}", x, h);
      }
    }
  }
}

TEST(SafetensorsDtype, ParsesOnlySupportedNames) {
  EXPECT_EQ(*parse_dtype("F32"), TensorDtype::kF32);
  EXPECT_EQ(*parse_dtype("F16"), TensorDtype::kF16);
  EXPECT_EQ(*parse_dtype("BF16"), TensorDtype::kBF16);
  const auto bad = parse_dtype("F64");
  ASSERT_FALSE(bad.ok());
  EXPECT_CONTAINS(bad.status().message(), "'F64'");
  EXPECT_CONTAINS(bad.status().message(), "F32, F16, BF16");
}

// ---- round trips -----------------------------------------------------------------------------

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  // Values exactly representable in f16 and bf16 (small integers times powers of two), plus
  // values that are not, which must come back rounded to nearest even.
  std::vector<float> exact = {
      0.0f, -0.0f, 1.0f, -2.5f, 0.375f, 96.0f, -1024.0f, std::ldexp(1.0f, -14), std::ldexp(3.0f, -10)};
  std::vector<float> inexact = {0.1f, -3.14159265f, 1e-3f, 1234.567f, -7.77e-5f};
  std::vector<float> all = exact;
  all.insert(all.end(), inexact.begin(), inexact.end());
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> big(1001);
  for (float& v : big) v = nd(rng);

  const std::vector<SafetensorsTensorData> tensors = {
      {"all.f32", TensorDtype::kF32, {2, 7}, all},
      {"all.f16", TensorDtype::kF16, {14}, all},
      {"all.bf16", TensorDtype::kBF16, {7, 2}, all},
      {"big.bf16", TensorDtype::kBF16, {1001}, big},
      {"big.f32", TensorDtype::kF32, {7, 11, 13}, big},
      {"scalar", TensorDtype::kF32, {}, std::span<const float>(all.data(), 1)},
      {"empty", TensorDtype::kF16, {0, 5}, {}},
  };
  const fs::path p = dir_ / "rt.safetensors";
  ASSERT_TRUE(write_safetensors(p, tensors, {{"who", "test"}, {"step", "50"}}).ok());
  EXPECT_FALSE(fs::exists(dir_ / "rt.safetensors.tmp"));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors().size(), tensors.size());
  EXPECT_EQ(f->metadata().at("who"), "test");
  EXPECT_EQ(f->metadata().at("step"), "50");

  for (const auto& t : tensors) {
    SCOPED_TRACE(t.name);
    const auto* info = f->find(t.name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(info->shape, t.shape);
    auto v = f->read_f32(t.name);
    ASSERT_TRUE(v.ok());
    ASSERT_EQ(v->size(), t.values.size());
    for (size_t i = 0; i < v->size(); ++i) {
      const float x = t.values[i];
      const float want = t.dtype == TensorDtype::kF32   ? x
                         : t.dtype == TensorDtype::kF16 ? f16_to_float(float_to_f16_rne(x))
                                                        : kern::bf16_to_float(kern::float_to_bf16_rne(x));
      ASSERT_EQ(kern::float_to_bits((*v)[i]), kern::float_to_bits(want)) << "element " << i;
      if (i < exact.size() && &t != &tensors[3] && &t != &tensors[4]) {
        ASSERT_EQ(kern::float_to_bits((*v)[i]), kern::float_to_bits(x)) << "exact value " << x;
      }
    }
  }
  // The exact values survive 16-bit storage bit for bit; the inexact ones do not.
  EXPECT_NE(f->read_f32("all.f16")->at(exact.size()), 0.1f);
  EXPECT_EQ(f->read_f32("all.bf16")->at(exact.size()), from_bits(0x3DCD0000u));  // 0.1 in bf16, rounded up
}

TEST_F(SafetensorsTest, F32ViewsPointIntoTheMappingEvenAfterOddLength16BitTensors) {
  std::vector<float> a(3, 1.5f), b(5);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) - 2.0f;
  const std::vector<SafetensorsTensorData> tensors = {{"odd16", TensorDtype::kBF16, {3}, a},
                                                      {"f32", TensorDtype::kF32, {5}, b}};
  ASSERT_TRUE(write_safetensors(dir_ / "v.safetensors", tensors).ok());
  auto f = SafetensorsFile::open(dir_ / "v.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  const auto view = f->f32_view(*f->find("f32"));
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(std::vector<float>(view->begin(), view->end()), b);
  const auto raw = f->mapping()->bytes();
  EXPECT_GE(reinterpret_cast<const std::byte*>(view->data()), raw.data());
  EXPECT_LE(reinterpret_cast<const std::byte*>(view->data() + view->size()), raw.data() + raw.size());
  EXPECT_FALSE(f->f32_view(*f->find("odd16")).has_value());
}

TEST_F(SafetensorsTest, ReadsARangeOfATensor) {
  std::vector<float> v(100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  ASSERT_TRUE(write_safetensors(dir_ / "r.safetensors",
                                std::vector<SafetensorsTensorData>{{"t", TensorDtype::kF16, {10, 10}, v}})
                  .ok());
  auto f = SafetensorsFile::open(dir_ / "r.safetensors");
  ASSERT_TRUE(f.ok());
  std::vector<float> out(7);
  ASSERT_TRUE(f->read_f32(*f->find("t"), 42, out).ok());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 42.0f + static_cast<float>(i));
  const Status past = f->read_f32(*f->find("t"), 95, out);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(past.message(), "[95, 102)");
  const auto missing = f->read_f32("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(missing.status().message(), "tensors present: 't'");
}

TEST_F(SafetensorsTest, ReadsAnUnpaddedHeaderAsOtherWritersProduce) {
  // No padding, tensors listed out of data order, metadata last.
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]},"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
      R"("__metadata__":{"format":"pt"}})";
  const fs::path p = dir_ / "u.safetensors";
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header;
    const uint16_t a = 0x4040;  // bf16 3.0
    const float b = -0.25f;
    out.write(reinterpret_cast<const char*>(&a), 2);
    out.write(reinterpret_cast<const char*>(&b), 4);
  }
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].name, "a");  // data order
  EXPECT_EQ(f->read_f32("a")->at(0), 3.0f);
  EXPECT_EQ(f->read_f32("b")->at(0), -0.25f);
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

// ---- writer ----------------------------------------------------------------------------------

TEST_F(SafetensorsTest, WriterIsWholeOrNothing) {
  std::vector<float> v(4, 2.0f);
  const std::vector<SafetensorsTensorData> good = {{"t", TensorDtype::kF32, {4}, v}};
  const Status no_dir = write_safetensors(dir_ / "missing" / "x.safetensors", good);
  EXPECT_EQ(no_dir.code(), StatusCode::kIo);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));

  const fs::path p = dir_ / "w.safetensors";
  ASSERT_TRUE(write_safetensors(p, good).ok());
  const auto size_before = fs::file_size(p);
  // A rejected write leaves the previous file untouched and no temporary behind.
  const std::vector<SafetensorsTensorData> bad_shape = {{"t", TensorDtype::kF32, {5}, v}};
  const Status s = write_safetensors(p, bad_shape);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(s.message(), "shape [5] has 5 elements, expected 4");
  EXPECT_EQ(fs::file_size(p), size_before);
  EXPECT_FALSE(fs::exists(dir_ / "w.safetensors.tmp"));

  const std::vector<SafetensorsTensorData> dup = {{"t", TensorDtype::kF32, {4}, v}, {"t", TensorDtype::kF16, {4}, v}};
  EXPECT_CONTAINS(write_safetensors(p, dup).message(), "duplicate tensor name 't'");
  const std::vector<SafetensorsTensorData> reserved = {{"__metadata__", TensorDtype::kF32, {4}, v}};
  EXPECT_EQ(write_safetensors(p, reserved).code(), StatusCode::kInvalidArgument);
}

TEST_F(SafetensorsTest, WriterPadsTheHeaderToEightBytes) {
  std::vector<float> v(3, 1.0f);
  for (const char* name : {"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh"}) {
    const fs::path p = dir_ / "pad.safetensors";
    ASSERT_TRUE(write_safetensors(p, std::vector<SafetensorsTensorData>{{name, TensorDtype::kF32, {3}, v}}).ok());
    std::ifstream in(p, std::ios::binary);
    uint64_t len = 0;
    in.read(reinterpret_cast<char*>(&len), 8);
    EXPECT_EQ((8 + len) % 8, 0u) << name;
    EXPECT_EQ(fs::file_size(p), 8 + len + 12) << name;
  }
}

// ---- bad files -------------------------------------------------------------------------------

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  auto r = SafetensorsFile::open(dir_ / "absent.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(r.status().message(), "absent.safetensors");
}

TEST_F(SafetensorsTest, TruncatedFile) {
  const fs::path p = dir_ / "short.safetensors";
  std::ofstream(p, std::ios::binary) << "abc";
  const std::string m = open_error(p);
  EXPECT_CONTAINS(m, "truncated");
  EXPECT_CONTAINS(m, "expected at least 8 bytes");
  EXPECT_CONTAINS(m, "found 3");
}

TEST_F(SafetensorsTest, HeaderLengthBeyondFile) {
  const fs::path p = dir_ / "long.safetensors";
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t len = 1000;
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << "{}";
  }
  const std::string m = open_error(p);
  EXPECT_CONTAINS(m, "header length 1000 exceeds the file");
  EXPECT_CONTAINS(m, "expected at most 2 bytes");
}

TEST_F(SafetensorsTest, HeaderThatIsNotAJsonObject) {
  EXPECT_CONTAINS(open_error(write_raw("arr.safetensors", "[1, 2]", 0)), "expected the header to be a JSON object");
  EXPECT_CONTAINS(open_error(write_raw("junk.safetensors", "{\"a\": ", 0)), "header (bytes counted from 8): invalid JSON: line 1");
  EXPECT_CONTAINS(open_error(write_raw("trail.safetensors", "{} x", 0)), "header (bytes counted from 8): invalid JSON: line 1");
}

TEST_F(SafetensorsTest, UnsupportedDtype) {
  const std::string m =
      open_error(write_raw("i32.safetensors", R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8));
  EXPECT_CONTAINS(m, "/w/dtype: unsupported dtype 'I32': expected one of F32, F16, BF16");
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  const std::string m =
      open_error(write_raw("oor.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12));
  EXPECT_CONTAINS(m, "/w/data_offsets: out of range: expected end <= 12");
  EXPECT_CONTAINS(m, "found [0, 16]");
}

TEST_F(SafetensorsTest, OffsetsOverlapping) {
  const std::string m = open_error(write_raw(
      "ovl.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[4],"data_offsets":[4,12]}})",
      12));
  EXPECT_CONTAINS(m, "/b/data_offsets: overlaps tensor 'a' at bytes [0, 8): expected begin >= 8, found 4");
}

TEST_F(SafetensorsTest, OffsetsLeavingAGap) {
  const std::string m = open_error(write_raw(
      "gap.safetensors",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12));
  EXPECT_CONTAINS(m, "/b/data_offsets: gap in the data buffer: expected begin = 4 (end of tensor 'a'), found 8");
}

TEST_F(SafetensorsTest, BytesAfterTheLastTensor) {
  const std::string m =
      open_error(write_raw("tail.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, "xx"));
  EXPECT_CONTAINS(m, "the tensors cover 4 bytes of the data buffer, expected all 6 bytes");
}

TEST_F(SafetensorsTest, ShapeInconsistentWithOffsets) {
  const std::string m =
      open_error(write_raw("shape.safetensors", R"({"w":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,8]}})", 8));
  EXPECT_CONTAINS(m, "/w/data_offsets: size mismatch: expected 12 bytes (BF16 × shape [3, 2]), found [0, 8] = 8 bytes");
  const std::string neg =
      open_error(write_raw("neg.safetensors", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4));
  EXPECT_CONTAINS(neg, "/w/shape/0: expected a non-negative integer, found -1");
  const std::string huge = open_error(write_raw(
      "huge.safetensors", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4));
  EXPECT_CONTAINS(huge, "expected more than 2^64 bytes");
}

TEST_F(SafetensorsTest, MalformedEntries) {
  const std::string m = open_error(write_raw(
      "entries.safetensors",
      R"({"a":{"dtype":"F32","shpe":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4]},)"
      R"("c":{"dtype":"F32","shape":[1],"data_offsets":[8,4]},"d":5,"__metadata__":{"k":1}})",
      12));
  EXPECT_CONTAINS(m, "/a/shpe: unknown key 'shpe' (did you mean 'shape'?)");
  EXPECT_CONTAINS(m, "/a: missing required key 'shape'");
  EXPECT_CONTAINS(m, "/b/data_offsets: expected [begin, end] as two non-negative integers");
  EXPECT_CONTAINS(m, "/c/data_offsets: expected begin <= end, found [8, 4]");
  EXPECT_CONTAINS(m, "/d: expected a tensor entry");
  EXPECT_CONTAINS(m, "/__metadata__/k: expected a string, found 1");
}

TEST_F(SafetensorsTest, DuplicateKeys) {
  const std::string m = open_error(write_raw(
      "dup.safetensors",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      4));
  EXPECT_CONTAINS(m, "header (bytes counted from 8): /a: duplicate key");
  const std::string inner = open_error(
      write_raw("dup2.safetensors", R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_CONTAINS(inner, "header (bytes counted from 8): /a/dtype: duplicate key");
}

}  // namespace
}  // namespace ccsim::traces
