#!/usr/bin/env python3
"""Times each layer's forward and backward pass of a transformer and writes a measured compute trace.

The model is one of the transformers whose estimated traces tools/traces/make_model_traces.py
writes (same architecture table, --preset <file stem>, e.g. gpt2-345m, llama-3.2-1b, gemma-3-1b,
bert-large, gpt-1.3b-sdp4bit), a tiny GPT for tests (--preset tiny), or one configured with
--layers --d-model --heads --ffn --vocab --seq --micro-batch (over a preset, default tiny). Its
layers are those of the estimated traces: the embedding, each transformer block, and the final
norm + LM head (with the loss). Tied embeddings are counted once, in the embedding layer, and the
script checks every layer's parameter count against the generator's formulas before timing.

Method (the same for every layer, on CUDA or CPU):
  * forward: the layers run one after the other; each layer's input is the previous layer's output
    detached into a new leaf that requires a gradient, so every layer has its own autograd graph.
    A layer's forward time is the wall-clock time of its call between two device synchronizations
    (torch.cuda.synchronize on CUDA; CPU kernels are synchronous), kernel launches included as in
    eager training;
  * backward: in reverse order, torch.autograd.backward of the layer's output with the gradient
    that the layer above wrote into its input leaf (the loss itself for the head), timed the same
    way. This is exactly the chain rule of one full backward pass, split at layer boundaries: each
    layer's time covers its input gradient and its weight gradients (accumulated into the tied
    embedding weight from both ends); the embedding computes weight gradients only;
  * gradients are reset to None before every iteration (optimizer.zero_grad(set_to_none=True));
  * --warmup untimed iterations, then the median over --iters timed iterations, per layer and
    direction.
The model is cast to --dtype (no autocast); the loss is computed in fp32. Attention uses
torch.nn.functional.scaled_dot_product_attention where torch has it (2.0 and later), else the
explicit softmax(QK^T)V. Gemma's sliding windows are not applied (full causal attention).

Needs PyTorch (Debian's python3-torch 1.13 works) and the standard library only:

    python3 tools/profile_model.py --preset gpt2-345m --dtype bf16 --out gpt2-345m-measured.json
    python3 tools/profile_model.py --preset llama-3.2-1b --layers 2 --device cpu --out llama-2l.json
    python3 tools/profile_model.py --preset tiny --device cpu --iters 3 --warmup 1 --out tiny.json
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "traces"))
import make_model_traces as gen  # noqa: E402  (the architecture table and the trace writer)

try:
    import torch  # noqa: E402
except ImportError:
    print(f"profile_model.py: needs PyTorch, which {sys.executable} cannot import; Debian's python3-torch "
          "(apt-get install -y python3-torch) installs it for /usr/bin/python3: run /usr/bin/python3 "
          "tools/profile_model.py ...", file=sys.stderr)
    sys.exit(2)
import torch.nn.functional as F  # noqa: E402,N812
from torch import nn  # noqa: E402

TINY = gen.Transformer(
    key="tiny", model="tiny GPT (test model)", family="gpt", layers=2, d_model=64, heads=4, kv_heads=4,
    head_dim=16, ffn=256, vocab=512, vocab_multiple=1, positions=32, seq=32, micro_batch=2, device="v100",
    gradient_bytes=4, workload="")
PRESETS = {"tiny": TINY, **{t.key: t for t in gen.TRANSFORMERS}}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# ---- model ---------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def make_norm(cfg: gen.Transformer, width: int) -> nn.Module:
    return nn.LayerNorm(width) if cfg.f["norm"] == "layernorm" else RMSNorm(width)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, cfg: gen.Transformer) -> None:
        super().__init__()
        d, q, kv = cfg.d_model, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        bias = cfg.f["bias"]
        self.h, self.kvh, self.hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.causal = cfg.family != "bert"
        self.q, self.k, self.v = nn.Linear(d, q, bias=bias), nn.Linear(d, kv, bias=bias), nn.Linear(d, kv, bias=bias)
        self.o = nn.Linear(q, d, bias=bias)
        self.qk_norm = cfg.f["qk_norm"]
        if self.qk_norm:
            self.q_norm, self.k_norm = RMSNorm(cfg.head_dim), RMSNorm(cfg.head_dim)
        self.rope = cfg.positions == 0
        if self.rope:
            inv = 1.0 / (10000.0 ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
            ang = torch.outer(torch.arange(cfg.seq).float(), inv)
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)
        mask = torch.ones(cfg.seq, cfg.seq, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if self.kvh != self.h:
            k = k.repeat_interleave(self.h // self.kvh, dim=1)
            v = v.repeat_interleave(self.h // self.kvh, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            if self.causal:
                att = att.masked_fill(self.mask[:s, :s], float("-inf"))
            y = att.softmax(dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, self.h * self.hd))


class Mlp(nn.Module):
    def __init__(self, cfg: gen.Transformer) -> None:
        super().__init__()
        d, bias = cfg.d_model, cfg.f["bias"]
        self.gated = cfg.f["gated"]
        self.silu = cfg.family == "llama"
        if self.gated:
            self.gate, self.up = nn.Linear(d, cfg.ffn, bias=bias), nn.Linear(d, cfg.ffn, bias=bias)
        else:
            self.up = nn.Linear(d, cfg.ffn, bias=bias)
        self.down = nn.Linear(cfg.ffn, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            g = self.gate(x)
            return self.down((F.silu(g) if self.silu else F.gelu(g, approximate="tanh")) * self.up(x))
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: gen.Transformer) -> None:
        super().__init__()
        self.post_ln = cfg.family == "bert"
        self.sandwich = cfg.f["norms_per_block"] == 4
        self.attn, self.mlp = Attention(cfg), Mlp(cfg)
        self.norm1, self.norm2 = make_norm(cfg, cfg.d_model), make_norm(cfg, cfg.d_model)
        if self.sandwich:
            self.norm1_post, self.norm2_post = make_norm(cfg, cfg.d_model), make_norm(cfg, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.post_ln:
            x = self.norm1(x + self.attn(x))
            return self.norm2(x + self.mlp(x))
        if self.sandwich:
            x = x + self.norm1_post(self.attn(self.norm1(x)))
            return x + self.norm2_post(self.mlp(self.norm2(x)))
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Embedding(nn.Module):
    def __init__(self, cfg: gen.Transformer) -> None:
        super().__init__()
        self.word = nn.Embedding(cfg.padded_vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.positions, cfg.d_model) if cfg.positions else None
        self.types = nn.Embedding(cfg.f["token_types"], cfg.d_model) if cfg.f["token_types"] else None
        self.norm = make_norm(cfg, cfg.d_model) if cfg.f["embedding_norm"] else None
        self.scale = math.sqrt(cfg.d_model) if cfg.family == "gemma3" else 1.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.word(ids)
        if self.scale != 1.0:
            x = x * self.scale
        if self.pos is not None:
            x = x + self.pos(torch.arange(ids.shape[1], device=ids.device))
        if self.types is not None:
            x = x + self.types(torch.zeros_like(ids))
        return self.norm(x) if self.norm is not None else x


class Head(nn.Module):
    """Final norm (or BERT's MLM transform) and the LM head tied to the word embedding, with the loss."""

    def __init__(self, cfg: gen.Transformer) -> None:
        super().__init__()
        self.mlm = cfg.f["mlm_head"]
        if self.mlm:
            self.dense = nn.Linear(cfg.d_model, cfg.d_model)
            self.bias = nn.Parameter(torch.zeros(cfg.padded_vocab))
        self.norm = make_norm(cfg, cfg.d_model)

    def forward(self, x: torch.Tensor, word: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, int]:
        if self.mlm:
            x = F.gelu(self.dense(x))
        logits = F.linear(self.norm(x), word, self.bias if self.mlm else None)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))
        return loss, logits.numel() * logits.element_size()


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---- timing --------------------------------------------------------------------------------------


def timed(device: torch.device, fn, *args, **kwargs):
    """(seconds, result) of fn(*args, **kwargs) between two synchronizations of the device."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, out


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" (CPU, {torch.get_num_threads()} threads)"
    except OSError:
        pass
    return (platform.processor() or platform.machine() or "unknown CPU") + f" (CPU, {torch.get_num_threads()} threads)"


def profile(cfg: gen.Transformer, device: torch.device, dtype: torch.dtype, iters: int, warmup: int,
            seed: int) -> list[dict]:
    torch.manual_seed(seed)
    emb, blocks, head = Embedding(cfg), [Block(cfg) for _ in range(cfg.layers)], Head(cfg)
    model = nn.ModuleList([emb, *blocks, head]).to(device=device, dtype=dtype)
    expected = [cfg.embedding_params()] + [cfg.block_params()] * cfg.layers + [cfg.head_params()]
    found = [count(m) for m in model]
    if found != expected:
        raise SystemExit(f"profile_model: the PyTorch model's per-layer parameters {found} differ from "
                         f"make_model_traces.py's {expected}")
    ids = torch.randint(cfg.vocab, (cfg.micro_batch, cfg.seq), device=device)
    targets = torch.randint(cfg.vocab, (cfg.micro_batch, cfg.seq), device=device)
    n = len(model)
    fwd: list[list[float]] = [[] for _ in range(n)]
    bwd: list[list[float]] = [[] for _ in range(n)]
    act = [0] * n
    for it in range(warmup + iters):
        for p in model.parameters():
            p.grad = None
        inputs, outputs, x = [], [], ids
        for i, layer in enumerate(model):
            xin = x if i == 0 else x.detach().requires_grad_(True)
            if i == n - 1:
                t, (y, act[i]) = timed(device, layer, xin, emb.word.weight, targets)
            else:
                t, y = timed(device, layer, xin)
                act[i] = y.numel() * y.element_size()
            if it >= warmup:
                fwd[i].append(t)
            inputs.append(xin)
            outputs.append(y)
            x = y
        grad = None
        for i in reversed(range(n)):
            t, _ = timed(device, torch.autograd.backward, outputs[i], grad_tensors=grad)
            if it >= warmup:
                bwd[i].append(t)
            grad = inputs[i].grad if i > 0 else None
    names = ["embedding"] + [f"layer_{i}" for i in range(cfg.layers)] + \
        ["mlm_head" if cfg.f["mlm_head"] else "final_norm+lm_head"]
    return [{"name": names[i], "params": expected[i], "forward": statistics.median(fwd[i]),
             "backward": statistics.median(bwd[i]), "activation_bytes": act[i]} for i in range(n)]


# ---- command line --------------------------------------------------------------------------------


def configure(args: argparse.Namespace) -> gen.Transformer:
    cfg = PRESETS[args.preset]
    changes = {}
    for field in ("family", "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "vocab", "seq",
                  "micro_batch"):
        v = getattr(args, field)
        if v is not None:
            changes[field] = v
    family = changes.get("family", cfg.family)
    if ("d_model" in changes or "heads" in changes) and "head_dim" not in changes and family != "gemma3":
        changes["head_dim"] = changes.get("d_model", cfg.d_model) // changes.get("heads", cfg.heads)
    if "heads" in changes and "kv_heads" not in changes and cfg.kv_heads == cfg.heads:
        changes["kv_heads"] = changes["heads"]
    if "d_model" in changes and "ffn" not in changes and family in ("gpt", "bert"):
        changes["ffn"] = 4 * changes["d_model"]
    if "vocab" in changes:
        changes["vocab_multiple"] = 1
    if family in ("gpt", "bert"):
        seq = changes.get("seq", cfg.seq)
        if family == "gpt" or cfg.positions == 0:
            changes["positions"] = seq
        elif seq > cfg.positions:
            raise SystemExit(f"profile_model: --seq {seq} exceeds the {cfg.positions} learned positions")
    else:
        changes["positions"] = 0
    cfg = dataclasses.replace(cfg, **changes)
    if cfg.heads % cfg.kv_heads or cfg.head_dim % 2 or min(cfg.layers, cfg.d_model, cfg.seq, cfg.micro_batch) < 1:
        raise SystemExit("profile_model: heads must be a multiple of KV heads, head_dim even, sizes positive")
    return cfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--family", choices=sorted(gen.FAMILIES))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d-model", dest="d_model", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", dest="kv_heads", type=int)
    ap.add_argument("--head-dim", dest="head_dim", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--micro-batch", dest="micro_batch", type=int)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    ap.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda if available)")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations (median)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="trace file to write")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        raise SystemExit("profile_model: --iters must be >= 1 and --warmup >= 0")
    cfg = configure(args)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("profile_model: --device cuda asked for, but torch.cuda.is_available() is false")
    if device.type == "cpu" and args.dtype == "fp16":
        raise SystemExit("profile_model: fp16 needs CUDA (PyTorch's CPU kernels lack fp16 for several ops)")
    layers = profile(cfg, device, DTYPES[args.dtype], args.iters, args.warmup, args.seed)
    base = PRESETS[args.preset]
    changed = [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
               if f.name in ("family", "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "vocab", "seq",
                             "micro_batch") and getattr(cfg, f.name) != getattr(base, f.name)]
    command = " ".join(["tools/profile_model.py", f"--preset {args.preset}"] +
                       [f"--{c.replace('_', '-')}" for c in changed] +
                       [f"--dtype {args.dtype}", f"--device {device}", f"--iters {args.iters}",
                        f"--warmup {args.warmup}", f"--seed {args.seed}"]).replace("=", " ")
    trace = {
        "format": "ccsim-compute-trace",
        "version": 1,
        "model": base.model + (f" ({', '.join(changed)})" if changed else ""),
        "description": (f"Measured: {cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads ({cfg.kv_heads} KV "
                        f"heads, head_dim {cfg.head_dim}), FFN {cfg.ffn}, vocabulary {cfg.padded_vocab}; "
                        f"{cfg.micro_batch} x {cfg.seq} tokens per micro-batch in {args.dtype}."),
        "provenance": {
            "kind": "measured",
            "device": device_name(device),
            "source": (f"{command}: median of {args.iters} timed iterations after {args.warmup} warm-up; each layer's "
                       f"forward, and its backward (torch.autograd.backward of its output with the upstream "
                       f"gradient), timed between device synchronizations; torch {torch.__version__}, {args.dtype}"),
        },
        "micro_batch": cfg.micro_batch,
        "gradient_bytes_per_param": 4 if args.dtype == "fp32" else 2,
        "layers": layers,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(gen.render(trace), encoding="utf-8")
    total = sum(l["forward"] + l["backward"] for l in layers)
    print(f"profile_model: {cfg.params():,} parameters, {len(layers)} layers, {total * 1e3:.3f} ms per micro-batch "
          f"(forward + backward) on {trace['provenance']['device']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
