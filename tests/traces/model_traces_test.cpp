// Compute traces of the papers' workloads (traces/models/, written by tools/traces/make_model_traces.py):
// every file loads, parameter counts against published counts, forward:backward = 1:2, per-layer times
// against FLOPs counted here independently, the per-block ResNet50 against AQGB's iteration; and a trace
// measured by tools/profile_model.py (ctest profile_model_smoke sets CCSIM_PROFILED_TRACE).

#include "traces/compute_trace.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace ccsim::traces {
namespace {

namespace fs = std::filesystem;

const fs::path kModels = fs::path(CCSIM_SOURCE_DIR) / "traces" / "models";

ComputeTrace load(const std::string& file) {
  auto t = ComputeTrace::load(kModels / file);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : ComputeTrace{};
}

double rel_diff(double a, double b) { return std::abs(a - b) / std::abs(b); }

// The transformer traces the generator writes (everything but the two ResNet50 traces).
const std::vector<std::string> kTransformers = {
    "bert-large.json",       "llama-3.2-1b.json",     "gemma-3-1b.json",      "gpt2-345m.json",
    "gpt2-2.5b.json",        "gpt2-12.1b.json",       "gpt-125m-sdp4bit.json", "gpt-350m-sdp4bit.json",
    "gpt-1.3b-sdp4bit.json", "gpt-2.7b-sdp4bit.json", "gpt-6.7b-sdp4bit.json", "gpt-13b-sdp4bit.json",
    "gpt-18b-sdp4bit.json"};

TEST(ModelTraces, EveryShippedTraceLoads) {
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator(kModels)) {
    if (entry.path().extension() != ".json") continue;
    auto t = ComputeTrace::load(entry.path());
    EXPECT_TRUE(t.ok()) << t.status().message();
    found.insert(entry.path().filename().string());
  }
  std::set<std::string> expected(kTransformers.begin(), kTransformers.end());
  expected.insert({"resnet50-aqgb-4blocks.json", "resnet50-layers.json"});
  for (const std::string& f : expected) EXPECT_TRUE(found.count(f)) << "missing " << f;
}

// docs/compute-traces.md names every shipped trace: each estimated one in its table (as `file`),
// each measured twin `<name>-measured-h200.json` by its row `| <name> |` in the measured table.
TEST(ModelTraces, EveryShippedTraceIsInTheDocs) {
  std::ifstream in(fs::path(CCSIM_SOURCE_DIR) / "docs" / "compute-traces.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  const std::string twin = "-measured-h200.json";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kModels)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json") continue;
    ++files;
    if (name.size() > twin.size() && name.ends_with(twin))
      EXPECT_NE(doc.find("| " + name.substr(0, name.size() - twin.size()) + " |"), std::string::npos)
          << name << " has no row in the measured table";
    else
      EXPECT_NE(doc.find("| `" + name + "` |"), std::string::npos) << name << " has no row in the table";
  }
  EXPECT_GE(files, 21);
}

// Narayanan et al. (SC'21), Section 5.1: a Megatron GPT of l layers, hidden size h, vocabulary V and
// sequence length s has P = 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)) parameters.
double megatron_params(double l, double h, double s) {
  const double vocab = 50257;  // GPT-2 BPE
  return 12 * l * h * h * (1 + 13 / (12 * h) + (vocab + s) / (12 * l * h));
}

TEST(ModelTraces, ParameterCountsMatchPublishedCounts) {
  // torchvision's resnet50: 25,557,032 trainable parameters.
  EXPECT_EQ(load("resnet50-layers.json").params(), 25'557'032u);

  struct Published {
    const char* file;
    double reference;
    const char* source;
  };
  const Published published[] = {
      {"bert-large.json", 336e6, "bert-large-uncased model card (Hugging Face): 336M"},
      {"llama-3.2-1b.json", 1.23e9, "Llama 3.2 model card (Meta): 1.23B"},
      {"gemma-3-1b.json", 1.0e9, "Gemma 3 technical report, Table 1: 302M embedding + 698M non-embedding"},
  };
  for (const Published& p : published) {
    const ComputeTrace t = load(p.file);
    EXPECT_LT(rel_diff(static_cast<double>(t.params()), p.reference), 0.01) << p.file << " vs " << p.source;
  }
  const ComputeTrace gemma = load("gemma-3-1b.json");
  ASSERT_FALSE(gemma.layers().empty());
  const double gemma_embedding = static_cast<double>(gemma.layers().front().params);
  EXPECT_LT(rel_diff(gemma_embedding, 302e6), 0.01);
  EXPECT_LT(rel_diff(static_cast<double>(gemma.params()) - gemma_embedding, 698e6), 0.01);

  // Megatron GPTs: the published formula for each paper's configuration (within 1%: the traces pad
  // the vocabulary as Megatron does and add the final LayerNorm), and the paper's nominal size
  // (within 5%: "345M", "2.5B", "350M" ... are rounded names; EDGC's 2.5B has 52 of Megatron-LM's 54
  // layers, so it holds 2.40 B).
  struct Megatron {
    const char* file;
    double layers, hidden, seq, nominal;
  };
  const Megatron megatron[] = {
      {"gpt2-345m.json", 24, 1024, 1024, 345e6},          {"gpt2-2.5b.json", 52, 1920, 1024, 2.5e9},
      {"gpt2-12.1b.json", 76, 3584, 1024, 12.1e9},        {"gpt-125m-sdp4bit.json", 12, 768, 2048, 125e6},
      {"gpt-350m-sdp4bit.json", 24, 1024, 2048, 350e6},   {"gpt-1.3b-sdp4bit.json", 24, 2048, 2048, 1.3e9},
      {"gpt-2.7b-sdp4bit.json", 32, 2560, 2048, 2.7e9},   {"gpt-6.7b-sdp4bit.json", 32, 4096, 2048, 6.7e9},
      {"gpt-13b-sdp4bit.json", 40, 5120, 2048, 13e9},     {"gpt-18b-sdp4bit.json", 40, 6144, 2048, 18e9},
  };
  for (const Megatron& m : megatron) {
    const ComputeTrace t = load(m.file);
    const double params = static_cast<double>(t.params());
    EXPECT_LT(rel_diff(params, megatron_params(m.layers, m.hidden, m.seq)), 0.01) << m.file;
    EXPECT_LT(rel_diff(params, m.nominal), 0.05) << m.file;
    EXPECT_EQ(t.layers().size(), static_cast<size_t>(m.layers) + 2) << m.file;  // embedding, blocks, head
  }
}

TEST(ModelTraces, FlopsDerivedTransformersTakeTwiceTheForwardTimeBackward) {
  for (const std::string& file : kTransformers) {
    const ComputeTrace t = load(file);
    EXPECT_EQ(t.provenance().kind, "estimated") << file;
    EXPECT_GT(t.forward_s(), 0) << file;
    ASSERT_GE(t.layers().size(), 3u) << file;
    EXPECT_EQ(t.layers().front().forward_s, 0) << file;  // the embedding is a table look-up
    for (const LayerCompute& l : t.layers()) {
      EXPECT_NEAR(l.backward_s, 2 * l.forward_s, 1e-12 * l.forward_s) << file << " " << l.name;
      EXPECT_GT(l.activation_bytes, 0u) << file << " " << l.name;
    }
    // DynamiQ's BF16 and EDGC's fp16 gradients; SDP4Bit's FP32 gradients.
    EXPECT_EQ(t.gradient_bytes_per_param(), file.find("sdp4bit") != std::string::npos ? 4u : 2u) << file;
  }
}

// A transformer's shape, to count its FLOPs here rather than trust the generator.
struct Shape {
  uint64_t layers, d, heads, kv_heads, head_dim, ffn, vocab, batch, seq;
  bool gated;
};

// Checks every layer's times against forward FLOPs / throughput (backward twice that):
// block 2 * matmul weights * tokens + 4 * batch * seq^2 * heads * head_dim, head 2 * vocab * d * tokens.
void expect_times_follow_flops(const std::string& file, const Shape& s, double flops_per_s) {
  const ComputeTrace t = load(file);
  ASSERT_EQ(t.layers().size(), s.layers + 2) << file;
  EXPECT_EQ(t.micro_batch(), s.batch) << file;
  const double tokens = static_cast<double>(s.batch * s.seq);
  const double q = static_cast<double>(s.heads * s.head_dim), kv = static_cast<double>(s.kv_heads * s.head_dim);
  const double d = static_cast<double>(s.d), seq = static_cast<double>(s.seq);
  const double weights = d * q + 2 * d * kv + q * d + (s.gated ? 3.0 : 2.0) * d * static_cast<double>(s.ffn);
  const double block = 2 * weights * tokens + 4 * static_cast<double>(s.batch) * seq * seq * q;
  const double head = 2 * static_cast<double>(s.vocab) * d * tokens;
  for (size_t i = 1; i <= s.layers; ++i) {
    const LayerCompute& l = t.layers()[i];
    EXPECT_NEAR(l.forward_s, block / flops_per_s, 1e-9 * l.forward_s) << file << " " << l.name;
    EXPECT_NEAR(l.backward_s, 2 * block / flops_per_s, 1e-9 * l.backward_s) << file << " " << l.name;
    EXPECT_EQ(l.activation_bytes, s.batch * s.seq * s.d * 2) << file << " " << l.name;  // bf16/fp16
  }
  const LayerCompute& h = t.layers().back();
  EXPECT_NEAR(h.forward_s, head / flops_per_s, 1e-9 * h.forward_s) << file;
  EXPECT_NEAR(t.forward_s() + t.backward_s(), 3 * (static_cast<double>(s.layers) * block + head) / flops_per_s,
              1e-9 * t.forward_s())
      << file;
}

TEST(ModelTraces, PerLayerTimesFollowIndependentlyCountedFlops) {
  // Llama 3.2 1B, DynamiQ's MMLU workload: 4 x 400 tokens on an RTX 6000 Ada, 40% of 364.2 TFLOP/s.
  const Shape llama{16, 2048, 32, 8, 64, 8192, 128256, 4, 400, true};
  expect_times_follow_flops("llama-3.2-1b.json", llama, 0.40 * 364.2e12);
  // Its parameters: q, k, v, o, gate, up, down and two RMSNorms per block; the tied embedding once.
  const ComputeTrace t = load("llama-3.2-1b.json");
  EXPECT_EQ(t.layers()[1].params, 2048u * 2048 * 2 + 2048u * 512 * 2 + 3u * 2048 * 8192 + 2 * 2048);
  EXPECT_EQ(t.layers().front().params, 128256u * 2048);
  EXPECT_EQ(t.layers().back().params, 2048u);
  EXPECT_EQ(t.params(), 1'235'814'400u);

  // GPT-2 345M, EDGC's Megatron setting: 4 x 1024 tokens on a V100, 30% of 125 TFLOP/s, the
  // vocabulary padded to 50304 (a multiple of 128).
  const Shape gpt2{24, 1024, 16, 16, 64, 4096, 50304, 4, 1024, false};
  expect_times_follow_flops("gpt2-345m.json", gpt2, 0.30 * 125e12);
}

// ResNet50 (torchvision v1.5 bottlenecks): per-layer parameters and multiply-accumulates per image,
// counted here: conv1, 16 bottleneck blocks, fc1000.
struct ResnetLayer {
  std::string name;
  uint64_t params;
  double macs;
};

std::vector<ResnetLayer> resnet50() {
  std::vector<ResnetLayer> layers = {{"conv1", 3 * 64 * 49 + 2 * 64, 64.0 * 3 * 49 * 112 * 112}};
  uint64_t in = 64, hw = 56;
  const uint64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    for (uint64_t b = 0; b < blocks[stage]; ++b) {
      const uint64_t w = widths[stage], out = 4 * w, stride = (stage > 0 && b == 0) ? 2 : 1, ohw = hw / stride;
      // 1x1 in->w, 3x3 w->w (stride), 1x1 w->4w, each with BatchNorm (weight and bias per channel).
      uint64_t params = in * w + 9 * w * w + w * out + 2 * (w + w + out);
      double macs = static_cast<double>(in * w * hw * hw + 9 * w * w * ohw * ohw + w * out * ohw * ohw);
      if (b == 0) {  // downsample: 1x1 in->4w with the stride, BatchNorm
        params += in * out + 2 * out;
        macs += static_cast<double>(in * out * ohw * ohw);
      }
      layers.push_back({"conv" + std::to_string(stage + 2) + "_" + std::to_string(b + 1), params, macs});
      in = out;
      hw = ohw;
    }
  }
  layers.push_back({"fc1000", 2048 * 1000 + 1000, 2048.0 * 1000});
  return layers;
}

TEST(ModelTraces, Resnet50LayersMakeAqgbIterationAndMergeIntoItsBlocks) {
  const ComputeTrace t = load("resnet50-layers.json");
  const std::vector<ResnetLayer> ref = resnet50();
  ASSERT_EQ(t.layers().size(), ref.size());
  double total_macs = 0;
  for (const ResnetLayer& r : ref) total_macs += r.macs;
  for (size_t i = 0; i < ref.size(); ++i) {
    const LayerCompute& l = t.layers()[i];
    EXPECT_EQ(l.name, ref[i].name);
    EXPECT_EQ(l.params, ref[i].params) << l.name;
    // Each layer's share of the forward and of the backward time is its share of the MACs.
    EXPECT_NEAR(l.forward_s / t.forward_s(), ref[i].macs / total_macs, 1e-12) << l.name;
    EXPECT_NEAR(l.backward_s / t.backward_s(), ref[i].macs / total_macs, 1e-12) << l.name;
  }
  EXPECT_EQ(t.params(), 25'557'032u);
  EXPECT_EQ(t.gradient_bytes(), 4u * 25'557'032);
  // AQGB Section 5.1: 1.5 s per local iteration, FP:BP = 0.365:0.635.
  EXPECT_NEAR(t.forward_s() + t.backward_s(), 1.5, 1e-12);
  EXPECT_NEAR(t.forward_s(), 0.365 * 1.5, 1e-12);
  EXPECT_NEAR(t.backward_s(), 0.635 * 1.5, 1e-12);

  // AQGB Table 1's blocks: conv1-conv4_1, conv4_2-conv4_6, conv5_1, conv5_2-fc1000 of 3 M / 5.6 M /
  // 6 M / 11 M parameters (rounded there; 2.96 M / 5.59 M / 6.04 M / 10.97 M here). Their time shares
  // are not Table 1's (SCALE-SIM's): here forward and backward follow the MACs.
  auto blocks = t.merged({0, 9, 14, 15}, {"conv1-conv4_1", "conv4_2-conv4_6", "conv5_1", "conv5_2-fc1000"});
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  const double table1[] = {3e6, 5.6e6, 6e6, 11e6};
  for (size_t b = 0; b < 4; ++b)
    EXPECT_LT(rel_diff(static_cast<double>(blocks->layers()[b].params), table1[b]), 0.015) << b;
  EXPECT_EQ(blocks->params(), t.params());
  EXPECT_NEAR(blocks->forward_s() + blocks->backward_s(), 1.5, 1e-12);
}

// A trace written by tools/profile_model.py --preset tiny (ctest profile_model_smoke): 2 blocks,
// d_model 64, FFN 256, vocabulary 512, 32 learned positions, 2 x 32 tokens, fp32.
TEST(ModelTraces, AqgbPiecesRegroupIntoTable1BlocksAndTheBlockSplits) {
  const ComputeTrace t = load("resnet50-aqgb-pieces.json");
  ASSERT_EQ(t.layers().size(), 7u);
  EXPECT_EQ(t.params(), 25'557'032u);
  EXPECT_NEAR(t.forward_s(), 0.5475, 1e-12);
  EXPECT_NEAR(t.backward_s(), 0.9525, 1e-12);
  // Table 1: blocks are pieces [0, 2), [2, 4), [4, 5), [5, 7) with these time shares and about
  // these sizes (Table 1 rounds them).
  const auto blocks = t.merged({0, 2, 4, 5}, {"b1", "b2", "b3", "b4"});
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  const double fp[] = {0.419, 0.155, 0.165, 0.261}, bp[] = {0.505, 0.142, 0.129, 0.224};
  const double millions[] = {3.0, 5.6, 6.0, 11.0};
  for (size_t b = 0; b < 4; ++b) {
    const LayerCompute& l = blocks->layers()[b];
    EXPECT_NEAR(l.forward_s / 0.5475, fp[b], 1e-12) << b;
    EXPECT_NEAR(l.backward_s / 0.9525, bp[b], 1e-12) << b;
    EXPECT_NEAR(static_cast<double>(l.params) / 1e6, millions[b], 0.05) << b;
  }
  // The 5-block split cuts block 4 at conv5_2; the 6-block one regroups blocks 1-2 into
  // conv1-conv3_4, conv4_1-conv4_3 and conv4_4-conv4_6 (AQGB Section 5.2.6).
  EXPECT_EQ(t.layers()[5].name, "conv5_2");
  const auto six = t.merged({0, 1, 3, 4, 5, 6}, {"a", "b", "c", "d", "e", "f"});
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->layers()[1].params, 1'512'448u + 1'117'184u * 2);  // conv4_1..conv4_3
  EXPECT_EQ(six->layers()[2].params, 1'117'184u * 3);               // conv4_4..conv4_6
}

// The traces measured on a GPU (tools/profile_model.py, docs/gpu-check-h200.md): each is the
// measured twin of an estimated trace (file stem + "-measured-<card>"), built by PyTorch from the
// same architecture table, so its layers must carry exactly the estimate's names and parameter
// counts, with positive times, the card named and bf16 gradients.
TEST(ModelTraces, MeasuredTracesMatchTheirEstimatedTwins) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kModels)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.find("-measured-");
    if (at == std::string::npos) continue;
    SCOPED_TRACE(name);
    ++n;
    const ComputeTrace measured = load(name);
    const ComputeTrace estimated = load(name.substr(0, at) + ".json");
    EXPECT_EQ(measured.provenance().kind, "measured");
    EXPECT_EQ(estimated.provenance().kind, "estimated");
    EXPECT_NE(measured.provenance().device.find("H200"), std::string::npos) << measured.provenance().device;
    EXPECT_EQ(measured.gradient_bytes_per_param(), 2u);
    ASSERT_EQ(measured.layers().size(), estimated.layers().size());
    for (size_t i = 0; i < measured.layers().size(); ++i) {
      const LayerCompute& m = measured.layers()[i];
      EXPECT_EQ(m.name, estimated.layers()[i].name);
      EXPECT_EQ(m.params, estimated.layers()[i].params) << m.name;
      EXPECT_GT(m.forward_s, 0) << m.name;
      EXPECT_GT(m.backward_s, 0) << m.name;
    }
    EXPECT_EQ(measured.params(), estimated.params());
  }
  EXPECT_GE(n, 3) << "fewer than three measured traces in " << kModels;
}

TEST(ProfiledTrace, TinyPresetLoadsWithItsShape) {
  const char* path = std::getenv("CCSIM_PROFILED_TRACE");
  if (path == nullptr || *path == '\0')
    GTEST_SKIP() << "CCSIM_PROFILED_TRACE is not set: ctest -R profile_model_smoke writes a trace with "
                    "tools/profile_model.py and runs this test on it";
  auto t = ComputeTrace::load(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->provenance().kind, "measured");
  EXPECT_FALSE(t->provenance().device.empty());
  EXPECT_EQ(t->micro_batch(), 2u);
  EXPECT_EQ(t->gradient_bytes_per_param(), 4u);
  ASSERT_EQ(t->layers().size(), 4u);
  const uint64_t d = 64, block = 12 * d * d + 13 * d;  // Megatron GPT block: weights and biases, 2 LayerNorms
  const uint64_t expected_params[] = {(512 + 32) * d, block, block, 2 * d};
  const uint64_t expected_activation[] = {2 * 32 * d * 4, 2 * 32 * d * 4, 2 * 32 * d * 4, 2 * 32 * 512 * 4};
  const char* names[] = {"embedding", "layer_0", "layer_1", "final_norm+lm_head"};
  for (size_t i = 0; i < 4; ++i) {
    const LayerCompute& l = t->layers()[i];
    EXPECT_EQ(l.name, names[i]);
    EXPECT_EQ(l.params, expected_params[i]) << l.name;
    EXPECT_EQ(l.activation_bytes, expected_activation[i]) << l.name;
    EXPECT_GT(l.forward_s, 0) << l.name;
    EXPECT_GT(l.backward_s, 0) << l.name;
  }
  EXPECT_EQ(t->params(), 134'912u);
}

}  // namespace
}  // namespace ccsim::traces
