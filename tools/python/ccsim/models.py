"""Small real models and datasets for proxy training (the ``ccsim.models`` module; needs Debian's
python3-torch): a GPT-style decoder-only transformer, the text corpus every Debian machine has
(the license texts in /usr/share/common-licenses), and the handwritten digits python3-sklearn ships.
``tools/gradients/train_gpt.py`` and ``ccsim.proxy`` train them."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (the usual torch alias)
from torch import nn

__all__ = ["DEFAULT_CORPUS_DIR", "Gpt", "Mlp", "load_corpus", "sample_batch", "load_digits", "DigitsMlp"]

# Plain English prose present on every Debian machine (base-files).
DEFAULT_CORPUS_DIR = Path("/usr/share/common-licenses")

# The 8x8 handwritten digits (1797 images, UCI) that Debian's python3-sklearn ships.
DIGITS_CSV = Path("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, block_size: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        hd = c // self.n_head
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class Mlp(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, block_size: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = Mlp(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_layer: int, n_head: int, block_size: int, tied: bool) -> None:
        super().__init__()
        self.tied = tied
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, block_size) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = None if tied else nn.Linear(d_model, vocab, bias=False)
        # GPT-2 initialization: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_"):
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        h = self.ln_f(x)
        logits = h @ self.tok_emb.weight.t() if self.head is None else self.head(h)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def load_corpus(paths: list[Path]) -> tuple[str, list[Path]]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.is_file() and not f.is_symlink())
        else:
            files.append(p)
    if not files:
        raise ValueError(f"corpus: no files found under {', '.join(map(str, paths))}")
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    return "\n\n".join(texts), files


def sample_batch(data: torch.Tensor, chunks: list[int], chunk: int, batch: int, block: int, gen: torch.Generator):
    """`batch` windows of block + 1 tokens, each inside one of `chunks` (chunk start offsets)."""
    pick = torch.randint(0, len(chunks), (batch,), generator=gen).tolist()
    within = torch.randint(0, chunk - block, (batch,), generator=gen).tolist()
    starts = [chunks[c] + o for c, o in zip(pick, within)]
    x = torch.stack([data[s : s + block] for s in starts])
    y = torch.stack([data[s + 1 : s + block + 1] for s in starts])
    return x, y


def load_digits(path: Path = DIGITS_CSV) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits as (images scaled to [0, 1], 1797 x 64 float32; labels, int64), in the file's order."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; Debian's python3-sklearn ships it "
                                "(apt-get install -y python3-sklearn)")
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return torch.from_numpy(table[:, :64] / 16.0).contiguous(), torch.from_numpy(table[:, 64].astype(np.int64))


class DigitsMlp(nn.Module):
    """A two-layer perceptron for the 8x8 digits: 64 -> hidden (ReLU) -> 10, cross-entropy."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.logits(x), y)
