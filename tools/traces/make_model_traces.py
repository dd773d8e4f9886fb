#!/usr/bin/env python3
"""Writes the FLOPs-derived compute traces of the papers' workloads into traces/models/.

Every number in the generated files follows from the tables below (model configurations, devices)
and these stated assumptions; the format is docs/compute-traces.md (reader: traces/compute_trace.hpp).

Transformers (one trace layer per embedding, per transformer block, and final norm + LM head):
  * parameters: exact for the stated architecture; tied input/output embeddings are counted once,
    in the embedding layer (its gradient is complete only when the embedding's backward ends);
  * forward FLOPs of one micro-batch of b sequences of s tokens (T = b*s tokens):
      - embedding: 0 (a table look-up, no matmul);
      - block:     2 * (weights of its matmuls) * T  +  4 * b * s^2 * (heads * head_dim)
                   (QK^T and attention-times-V over the full s x s score matrix, causal masking and
                   sliding windows not discounted: eager/SDPA kernels with a mask compute it all);
      - head:      2 * (vocab * d_model [+ d_model^2 for BERT's MLM transform]) * T;
    biases, norms, activations and softmax are not counted;
  * backward FLOPs = 2 x forward (input and weight gradients);
  * time = FLOPs / (mfu * peak), with the device's dense fp16/bf16 tensor peak and the model-FLOPs
    utilization stated in DEVICES;
  * activation_bytes: the layer's output of one micro-batch, 2 bytes per element (fp16/bf16):
    b*s*d_model for the embedding and the blocks, b*s*vocab (the logits) for the head;
  * the whole model on one device: with tensor parallelism of degree t each GPU computes about 1/t
    of every layer, with pipeline parallelism each stage runs a contiguous range of layers.

ResNet50 (ImageNet, 224x224, torchvision's v1.5 bottleneck: stride on the 3x3 convolution): one
layer for conv1 (+ bn1, max-pool), one per bottleneck block (conv2_1 ... conv5_3, downsample
included) and fc1000 (+ average pool). Parameters are exact (25,557,032 with the BatchNorm weights
and biases). Each layer's forward and backward time is its share of the network's convolution and
fc multiply-accumulates (BatchNorm, ReLU, pooling and residual additions not counted), scaled so
that one iteration takes AQGB's 1.5 s with FP:BP = 0.365:0.635 (AQGB Section 5.1), i.e. 0.5475 s
forward and 0.9525 s backward; fp32 activations and gradients, 32 images per micro-batch.

Usage:
    python3 tools/traces/make_model_traces.py            # (re)writes traces/models/<file>.json
    python3 tools/traces/make_model_traces.py --check    # exit 1 if a committed file differs
    python3 tools/traces/make_model_traces.py --out-dir DIR

Python 3 standard library only; the output is byte-for-byte deterministic.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parents[2] / "traces" / "models"
GENERATOR = "tools/traces/make_model_traces.py"


# ---- devices -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: float  # dense fp16/bf16 tensor-core peak, FLOP/s
    mfu: float  # assumed achieved fraction of the peak (model-FLOPs utilization)
    why: str  # where the peak and the utilization come from

    @property
    def flops(self) -> float:
        return self.mfu * self.peak_flops

    def describe(self) -> str:
        return (f"{self.name}: {self.peak_flops / 1e12:g} TFLOP/s dense fp16/bf16 peak x {self.mfu:.0%} "
                f"model-FLOPs utilization = {self.flops / 1e12:g} TFLOP/s assumed ({self.why})")


DEVICES = {
    "rtx6000ada": Device(
        "NVIDIA RTX 6000 Ada Generation", 364.2e12, 0.40,
        "peak from NVIDIA's Ada Lovelace architecture whitepaper; 40% assumed for PyTorch DDP fine-tuning"),
    "v100": Device(
        "NVIDIA Tesla V100-SXM2-32GB", 125e12, 0.30,
        "peak from NVIDIA's V100 datasheet; 30% is what Megatron-LM (Shoeybi et al., 2019) sustains on one "
        "V100, 39 TFLOP/s"),
    "h100": Device(
        "NVIDIA H100 SXM5 80GB", 989.4e12, 0.40,
        "peak from NVIDIA's H100 whitepaper; 40% assumed for Megatron-LM fp16/bf16 GPT training on Hopper"),
    "a100": Device(
        "NVIDIA A100-SXM4-40GB", 312e12, 0.45,
        "peak from NVIDIA's A100 datasheet; 45% is within the 44-52% Megatron-LM reaches for GPT models on "
        "A100 (Narayanan et al., SC'21)"),
}


# ---- transformers --------------------------------------------------------------------------------

# Architecture families: which parameters a block, the embedding and the head have.
FAMILIES = {
    # Megatron-LM GPT-2/GPT-3: learned positions, LayerNorm and biases everywhere, GELU MLP (4h),
    # final LayerNorm, output layer tied to the word embedding.
    "gpt": dict(norm="layernorm", bias=True, gated=False, norms_per_block=2, qk_norm=False,
                token_types=0, embedding_norm=False, mlm_head=False),
    # BERT with its masked-LM head (Hugging Face BertForMaskedLM: no pooler): learned positions and
    # token types, embedding LayerNorm, post-LN blocks, MLM transform (dense + LayerNorm) and a
    # decoder tied to the word embedding with its own bias.
    "bert": dict(norm="layernorm", bias=True, gated=False, norms_per_block=2, qk_norm=False,
                 token_types=2, embedding_norm=True, mlm_head=True),
    # Llama 3: RMSNorm (weight only), no biases, grouped-query attention, SwiGLU (gate, up, down), RoPE.
    "llama": dict(norm="rmsnorm", bias=False, gated=True, norms_per_block=2, qk_norm=False,
                  token_types=0, embedding_norm=False, mlm_head=False),
    # Gemma 3: like Llama with GeGLU, four RMSNorms per block (pre/post attention, pre/post MLP) and
    # RMSNorms on queries and keys (head_dim weights each).
    "gemma3": dict(norm="rmsnorm", bias=False, gated=True, norms_per_block=4, qk_norm=True,
                   token_types=0, embedding_norm=False, mlm_head=False),
}


@dataclass(frozen=True)
class Transformer:
    key: str  # file stem in traces/models/
    model: str
    family: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int  # tokenizer vocabulary
    vocab_multiple: int  # Megatron pads the vocabulary to a multiple of 128 * tensor-parallel size
    positions: int  # learned position embeddings (0: rotary)
    seq: int
    micro_batch: int
    device: str
    gradient_bytes: int
    workload: str  # the paper's setting and what was assumed

    @property
    def f(self) -> dict:
        return FAMILIES[self.family]

    @property
    def padded_vocab(self) -> int:
        m = self.vocab_multiple
        return (self.vocab + m - 1) // m * m

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq

    def norm_params(self, width: int) -> int:
        return 2 * width if self.f["norm"] == "layernorm" else width

    def block_matmul_params(self) -> int:
        q, kv, d = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.d_model
        attention = d * q + 2 * d * kv + q * d
        mlp = (3 if self.f["gated"] else 2) * d * self.ffn
        return attention + mlp

    def block_params(self) -> int:
        q, kv, d = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.d_model
        biases = (q + 2 * kv + d + self.ffn + d) if self.f["bias"] else 0
        norms = self.f["norms_per_block"] * self.norm_params(d)
        qk = 2 * self.head_dim if self.f["qk_norm"] else 0
        return self.block_matmul_params() + biases + norms + qk

    def embedding_params(self) -> int:
        d = self.d_model
        p = (self.padded_vocab + self.positions + self.f["token_types"]) * d
        return p + (self.norm_params(d) if self.f["embedding_norm"] else 0)

    def head_matmul_params(self) -> int:
        d = self.d_model
        return self.padded_vocab * d + (d * d if self.f["mlm_head"] else 0)

    def head_params(self) -> int:
        d = self.d_model
        if self.f["mlm_head"]:  # transform dense (weight, bias) + LayerNorm + decoder bias; decoder weight tied
            return d * d + d + self.norm_params(d) + self.padded_vocab
        return self.norm_params(d)  # final norm; the LM head is the tied embedding

    def params(self) -> int:
        return self.embedding_params() + self.layers * self.block_params() + self.head_params()

    def block_forward_flops(self) -> int:
        attention = 4 * self.micro_batch * self.seq * self.seq * self.heads * self.head_dim
        return 2 * self.block_matmul_params() * self.tokens + attention

    def head_forward_flops(self) -> int:
        return 2 * self.head_matmul_params() * self.tokens

    def trace(self) -> dict:
        dev = DEVICES[self.device]
        act = self.tokens * self.d_model * 2

        def layer(name: str, params: int, fwd_flops: int, act_bytes: int) -> dict:
            return {"name": name, "params": params, "forward": fwd_flops / dev.flops,
                    "backward": 2 * fwd_flops / dev.flops, "activation_bytes": act_bytes}

        layers = [layer("embedding", self.embedding_params(), 0, act)]
        layers += [layer(f"layer_{i}", self.block_params(), self.block_forward_flops(), act)
                   for i in range(self.layers)]
        head = "mlm_head" if self.f["mlm_head"] else "final_norm+lm_head"
        layers.append(layer(head, self.head_params(), self.head_forward_flops(),
                            self.tokens * self.padded_vocab * 2))
        arch = (f"{self.layers} layers, d_model {self.d_model}, {self.heads} heads ({self.kv_heads} KV heads, "
                f"head_dim {self.head_dim}), FFN {self.ffn}{' gated' if self.f['gated'] else ''}, vocabulary "
                f"{self.vocab}" + (f" padded to {self.padded_vocab}" if self.padded_vocab != self.vocab else "")
                + (f", {self.positions} learned positions" if self.positions else ", rotary positions")
                + f", tied embeddings; {self.params():,} parameters")
        return {
            "format": "ccsim-compute-trace",
            "version": 1,
            "model": self.model,
            "description": (f"{arch}. Workload: {self.workload} One micro-batch = {self.micro_batch} x "
                            f"{self.seq} tokens; gradients of {self.gradient_bytes} bytes per parameter. The whole "
                            f"model on one device (divide times by the tensor-parallel degree)."),
            "provenance": {
                "kind": "estimated",
                "device": dev.describe(),
                "source": (f"{GENERATOR}: forward FLOPs = 2 x matmul weights x tokens + 4 x batch x seq^2 x "
                           f"(heads x head_dim) per block, 2 x vocab x d_model x tokens for the tied LM head, 0 for "
                           f"the embedding; backward = 2 x forward; time = FLOPs / {dev.flops / 1e12:g} TFLOP/s"),
            },
            "micro_batch": self.micro_batch,
            "gradient_bytes_per_param": self.gradient_bytes,
            "layers": layers,
        }


DYNAMIQ = ("DynamiQ (Section 5, Table 1) fine-tunes on 4 servers with 2 RTX 6000 Ada GPUs each (8 GPUs, 4 workers), "
           "BF16 gradients in its baseline.")
EDGC = ("EDGC (Section V, Table II): Megatron-LM, micro-batch 4; sequence length not given, Megatron's GPT-2 1024 "
        "assumed; fp16 mixed precision assumed (V100 has no bf16; Megatron reduces fp16 gradients in fp16).")
SDP4BIT = ("SDP4Bit (Section 5.1, appendix Tables 7-8): Megatron-LM GPT pre-training with BF16 weights and FP32 "
           "gradients, sequence length 2048, one sequence per micro-batch assumed; A100-SXM4-40GB cluster (its H800 "
           "cluster has the H100 SXM5 peak, 989.4 TFLOP/s: scale the times by the ratio of achieved throughputs).")
GPT2_VOCAB = 50257


def sdp4bit(size: str, layers: int, d: int, heads: int, tp: int, note: str = "") -> Transformer:
    return Transformer(
        key=f"gpt-{size.lower()}-sdp4bit", model=f"GPT {size} (SDP4Bit)", family="gpt", layers=layers, d_model=d,
        heads=heads, kv_heads=heads, head_dim=d // heads, ffn=4 * d, vocab=GPT2_VOCAB, vocab_multiple=128 * tp,
        positions=2048, seq=2048, micro_batch=1, device="a100", gradient_bytes=4,
        workload=f"{SDP4BIT} Tensor parallelism {tp} on A100 (Table 8{note}), vocabulary padded for it.")


TRANSFORMERS = [
    Transformer(
        key="bert-large", model="BERT-large (masked LM)", family="bert", layers=24, d_model=1024, heads=16,
        kv_heads=16, head_dim=64, ffn=4096, vocab=30522, vocab_multiple=1, positions=512, seq=512, micro_batch=4,
        device="rtx6000ada", gradient_bytes=2,
        workload=(f"{DYNAMIQ} BERT-large masked LM on Wikitext-103 with 2048 tokens per batch: taken as 4 sequences "
                  "of 512 tokens, BERT-large's position-table length.")),
    Transformer(
        key="llama-3.2-1b", model="Llama 3.2 1B", family="llama", layers=16, d_model=2048, heads=32, kv_heads=8,
        head_dim=64, ffn=8192, vocab=128256, vocab_multiple=1, positions=0, seq=400, micro_batch=4,
        device="rtx6000ada", gradient_bytes=2,
        workload=(f"{DYNAMIQ} LLaMA 1B MMLU (batch 4, about 1600 tokens): 4 sequences of 400 tokens. Its UltraChat "
                  "workload (1 x 3000 tokens) is not traced.")),
    Transformer(
        key="gemma-3-1b", model="Gemma 3 1B", family="gemma3", layers=26, d_model=1152, heads=4, kv_heads=1,
        head_dim=256, ffn=6912, vocab=262144, vocab_multiple=1, positions=0, seq=3000, micro_batch=1,
        device="rtx6000ada", gradient_bytes=2,
        workload=(f"{DYNAMIQ} Gemma 1B UltraChat: 1 packed sequence of 3000 tokens; attention counted over the full "
                  "sequence in every layer (5 of 6 Gemma 3 layers use a sliding window).")),
    Transformer(
        key="gpt2-345m", model="GPT-2 345M (Megatron-LM)", family="gpt", layers=24, d_model=1024, heads=16,
        kv_heads=16, head_dim=64, ffn=4096, vocab=GPT2_VOCAB, vocab_multiple=128, positions=1024, seq=1024,
        micro_batch=4, device="v100", gradient_bytes=2,
        workload=(f"{EDGC} GPT2-345M: Megatron-LM's standard 345M configuration (24 layers, hidden 1024, 16 heads), "
                  "trained in EDGC Section II on 8 nodes x 2 V100-SXM2; no tensor parallelism assumed.")),
    Transformer(
        key="gpt2-2.5b", model="GPT-2 2.5B (EDGC, Megatron-LM)", family="gpt", layers=52, d_model=1920, heads=20,
        kv_heads=20, head_dim=96, ffn=4 * 1920, vocab=GPT2_VOCAB, vocab_multiple=128 * 4, positions=1024, seq=1024,
        micro_batch=4, device="v100", gradient_bytes=2,
        workload=(f"{EDGC} GPT2-2.5B: 52 layers, hidden 1920 (Table II), 20 heads as in Megatron-LM's 2.5B "
                  "(54 layers there); TP4 / DP2 / PP4 on the 32-V100 cluster 1.")),
    Transformer(
        key="gpt2-12.1b", model="GPT-2 12.1B (EDGC, Megatron-LM)", family="gpt", layers=76, d_model=3584,
        heads=28, kv_heads=28, head_dim=128, ffn=4 * 3584, vocab=GPT2_VOCAB, vocab_multiple=128 * 4,
        positions=1024, seq=1024, micro_batch=4, device="h100", gradient_bytes=2,
        workload=(f"{EDGC} GPT2-12.1B: 76 layers, hidden 3584 (Table II), 28 heads of 128 assumed (not given; no "
                  "effect on FLOPs); TP4 / DP4 / PP4 on the 64-H100 cluster 2.")),
    sdp4bit("125M", 12, 768, 12, 1, ", accuracy runs only: TP 1 assumed"),
    sdp4bit("350M", 24, 1024, 16, 1, ", accuracy runs only: TP 1 assumed"),
    sdp4bit("1.3B", 24, 2048, 16, 1),
    sdp4bit("2.7B", 32, 2560, 32, 1, "; Table 7 omits 2.7B: GPT-3's 32 layers, hidden 2560"),
    sdp4bit("6.7B", 32, 4096, 32, 4),
    sdp4bit("13B", 40, 5120, 40, 4),
    sdp4bit("18B", 40, 6144, 48, 4),
]


# ---- ResNet50 ------------------------------------------------------------------------------------

RESNET_BATCH = 32
RESNET_ITERATION_S = 1.5
RESNET_FP_SHARE = 0.365
# AQGB Table 1's four blocks as ranges of this trace's layers (merge with these starts).
AQGB_BLOCK_STARTS = [0, 9, 14, 15]


def resnet50_layers() -> list[tuple[str, int, int, int]]:
    """(name, params, multiply-accumulates per image, output elements per image) per layer."""
    out = []
    # conv1: 7x7/2, 3 -> 64 at 112x112, BatchNorm; max-pool to 56x56.
    out.append(("conv1", 7 * 7 * 3 * 64 + 2 * 64, 64 * 7 * 7 * 3 * 112 * 112, 64 * 56 * 56))
    in_ch, size = 64, 56
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=2):
        for b in range(blocks):
            s = stride if b == 0 else 1
            out_size = size // s
            params = in_ch * width + 2 * width + 9 * width * width + 2 * width + 4 * width * width + 8 * width
            macs = width * in_ch * size * size + width * width * 9 * out_size * out_size \
                + 4 * width * width * out_size * out_size
            if b == 0:  # downsample: 1x1 convolution with the stride, BatchNorm
                params += in_ch * 4 * width + 8 * width
                macs += 4 * width * in_ch * out_size * out_size
            out.append((f"conv{stage}_{b + 1}", params, macs, 4 * width * out_size * out_size))
            in_ch, size = 4 * width, out_size
    out.append(("fc1000", 2048 * 1000 + 1000, 2048 * 1000, 1000))
    return out


def resnet50_trace() -> dict:
    layers = resnet50_layers()
    total_macs = sum(m for _, _, m, _ in layers)
    fwd_total = RESNET_FP_SHARE * RESNET_ITERATION_S
    bwd_total = RESNET_ITERATION_S - fwd_total
    params = sum(p for _, p, _, _ in layers)
    return {
        "format": "ccsim-compute-trace",
        "version": 1,
        "model": "ResNet50 (ImageNet), per bottleneck block",
        "description": (f"torchvision's ResNet50 (v1.5), 224x224 inputs, {RESNET_BATCH} images per micro-batch, "
                        f"{params:,} parameters: conv1, the 16 bottleneck blocks conv2_1 ... conv5_3 (downsample "
                        f"included), fc1000. Each layer's time is its share of the {total_macs:,} convolution and fc "
                        f"multiply-accumulates per image, scaled to AQGB's 1.5 s per local iteration with "
                        f"FP:BP = 0.365:0.635. AQGB Table 1's blocks are layers [0, 9) conv1-conv4_1, [9, 14) "
                        f"conv4_2-conv4_6, [14, 15) conv5_1, [15, 18) conv5_2-fc1000 (merge with starts "
                        f"{AQGB_BLOCK_STARTS}). Activations fp32."),
        "provenance": {
            "kind": "estimated",
            "device": "AQGB's simulated accelerator (SCALE-SIM, not named): 1.5 s per local iteration",
            "source": (f"{GENERATOR}: per-layer multiply-accumulates of the convolutions and fc (BatchNorm, ReLU, "
                       f"pooling, residual additions not counted), scaled to forward {fwd_total:g} s and backward "
                       f"{bwd_total:g} s (AQGB Section 5.1)"),
        },
        "micro_batch": RESNET_BATCH,
        "gradient_bytes_per_param": 4,
        "layers": [{"name": name, "params": p, "forward": fwd_total * m / total_macs,
                    "backward": bwd_total * m / total_macs, "activation_bytes": RESNET_BATCH * act * 4}
                   for name, p, m, act in layers],
    }


# AQGB Table 1: each block's share of the forward and backward time (SCALE-SIM), and the finer
# pieces its block-split study (Section 5.2.6) regroups, as ranges of resnet50_layers().
AQGB_FP_SHARES = [0.419, 0.155, 0.165, 0.261]
AQGB_BP_SHARES = [0.505, 0.142, 0.129, 0.224]
AQGB_PIECES = [  # (name, first layer, end layer, Table 1 block)
    ("conv1-conv3_4", 0, 8, 0), ("conv4_1", 8, 9, 0), ("conv4_2-conv4_3", 9, 11, 1),
    ("conv4_4-conv4_6", 11, 14, 1), ("conv5_1", 14, 15, 2), ("conv5_2", 15, 16, 3), ("conv5_3-fc1000", 16, 18, 3)]


def resnet50_aqgb_pieces_trace() -> dict:
    layers = resnet50_layers()
    fwd_total = RESNET_FP_SHARE * RESNET_ITERATION_S
    bwd_total = RESNET_ITERATION_S - fwd_total
    block_macs = [0] * 4
    for _, lo, hi, b in AQGB_PIECES:
        block_macs[b] += sum(layers[i][2] for i in range(lo, hi))
    out = []
    for name, lo, hi, b in AQGB_PIECES:
        macs = sum(layers[i][2] for i in range(lo, hi))
        out.append({"name": name, "params": sum(layers[i][1] for i in range(lo, hi)),
                    "forward": fwd_total * AQGB_FP_SHARES[b] * macs / block_macs[b],
                    "backward": bwd_total * AQGB_BP_SHARES[b] * macs / block_macs[b],
                    "activation_bytes": RESNET_BATCH * layers[hi - 1][3] * 4})
    return {
        "format": "ccsim-compute-trace",
        "version": 1,
        "model": "ResNet50 (ImageNet), the 7 pieces AQGB's block splits regroup",
        "description": ("AQGB's block-split study (Section 5.2.6) in 7 pieces: conv1-conv3_4, conv4_1, conv4_2-conv4_3, "
                        "conv4_4-conv4_6, conv5_1, conv5_2, conv5_3-fc1000. Table 1's blocks are pieces [0, 2), [2, 4), "
                        "[4, 5), [5, 7) (workload.blocks [0, 2, 4, 5]); 3 blocks: [0, 2, 4]; 5 blocks: [0, 2, 4, 5, 6]; "
                        "6 blocks: [0, 1, 3, 4, 5, 6]. Each Table 1 block keeps its share of the forward and backward "
                        "time (41.9 / 15.5 / 16.5 / 26.1% and 50.5 / 14.2 / 12.9 / 22.4% of 0.5475 s and 0.9525 s), "
                        "split among its pieces by their convolution/fc multiply-accumulates; parameters are "
                        "torchvision's exact counts (Table 1 rounds them to 3 / 5.6 / 6 / 11 M)."),
        "provenance": {
            "kind": "estimated",
            "device": "AQGB's simulated accelerator (SCALE-SIM, not named): 1.5 s per local iteration",
            "source": (f"{GENERATOR}: AQGB Table 1 block time shares, split within each block by multiply-accumulates"),
        },
        "micro_batch": RESNET_BATCH,
        "gradient_bytes_per_param": 4,
        "layers": out,
    }


# ---- output --------------------------------------------------------------------------------------


def render(root: dict) -> str:
    """The trace as JSON text: two-space indentation, one line per layer, a final newline."""
    head = dict(root)
    layers = head.pop("layers")
    text = json.dumps(head, indent=2, ensure_ascii=False)
    body = ",\n".join("    " + json.dumps(layer, ensure_ascii=False) for layer in layers)
    return text[:-2] + ',\n  "layers": [\n' + body + "\n  ]\n}\n"


def generated() -> dict[str, str]:
    """File name -> contents of every trace this script owns."""
    files = {"resnet50-layers.json": render(resnet50_trace()),
             "resnet50-aqgb-pieces.json": render(resnet50_aqgb_pieces_trace())}
    for t in TRANSFORMERS:
        files[f"{t.key}.json"] = render(t.trace())
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and exit 1 if any file in --out-dir differs or is missing")
    ap.add_argument("--out-dir", type=Path, default=MODELS_DIR, help="default: traces/models/ of this checkout")
    args = ap.parse_args(argv)
    files = generated()
    if args.check:
        stale = []
        for name, text in files.items():
            path = args.out_dir / name
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        for name in stale:
            print(f"make_model_traces: {args.out_dir / name} differs from what {GENERATOR} writes", file=sys.stderr)
        if stale:
            print(f"make_model_traces: regenerate with: python3 {GENERATOR}", file=sys.stderr)
            return 1
        print(f"make_model_traces: {len(files)} traces up to date")
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out_dir / name).write_text(text, encoding="utf-8")
    print(f"make_model_traces: wrote {len(files)} traces to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
