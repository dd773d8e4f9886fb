#!/usr/bin/env python3
"""Train a small GPT-style model on real English text and dump per-worker gradients for ccsim.

The model is a decoder-only transformer (pre-LayerNorm, learned positions, causal multi-head
attention, GELU MLP, output head untied or --tied) over the characters of the corpus or a byte-pair
encoding learned on it. Training is
data-parallel over W simulated workers: the training text is cut into chunks dealt round-robin to
the workers (disjoint shards, each spread over the whole corpus, as when a sampler deals out a
shuffled dataset); each worker draws its own micro-batch from its own shard, computes its *local*
gradient, the W gradients are averaged
and the average is applied by Adam. At each step listed in --dump-steps (gradients taken at the
parameters reached after that many updates), every worker's local gradient, before averaging, is
written as one flattened vector into that worker's safetensors file; manifest.json describes the
layers, steps, losses and provenance (schema: traces/gradient_dump.hpp, docs/gradient-dumps.md).

With --pretrain-corpus and --pretrain-steps, the model is first trained on another text (one process,
its own Adam), and the dumped gradients are those of fine-tuning it on --corpus, as in the papers'
fine-tuning runs.

Default corpus: the license texts Debian ships in /usr/share/common-licenses (every regular file,
symlinks skipped, in name order) -- plain English prose present on every Debian machine.

Needs Debian's python3-torch (apt-get install -y python3-torch) and NumPy; run it with the system
interpreter (the ccsim Python package is found in build/python or on PYTHONPATH). The shipped dump
(docs/gradient-dumps.md) is

    /usr/bin/python3 tools/gradients/train_gpt.py --tokenizer bpe --shard-chunk 256 --vocab 4096 \
        --d-model 64 --tied --micro-batch 1 --dump-steps 50 200 --out traces/data/gpt-bpe

Deterministic for a given --seed, machine and torch build (single-threaded by default).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

try:
    import numpy as np
    import torch
except ImportError as missing:
    print(f"train_gpt.py: needs NumPy and PyTorch, and {sys.executable} cannot import {missing.name}; Debian's "
          "python3-numpy and python3-torch (apt-get install -y python3-torch) install them for /usr/bin/python3: "
          "run /usr/bin/python3 tools/gradients/train_gpt.py ...", file=sys.stderr)
    sys.exit(2)

try:
    import ccsim.torch as ccsim_torch
    from ccsim.models import DEFAULT_CORPUS_DIR, Gpt, load_corpus, sample_batch
except ImportError:  # run from a source tree: the package the build made in build/python
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "build" / "python"))
    try:
        import ccsim.torch as ccsim_torch
        from ccsim.models import DEFAULT_CORPUS_DIR, Gpt, load_corpus, sample_batch
    except ImportError as e:
        sys.exit(f"train_gpt.py: cannot import the ccsim Python package ({e}); build it (tools/test, or cmake "
                 "--build build) and run with PYTHONPATH=BUILD/python")


# ---- data ----------------------------------------------------------------------------------------

# GPT-2-style pre-tokenization: a word with its leading space, a run of punctuation, or whitespace.
PRETOKEN = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9\s]+|\s+")


class Bpe:
    """Byte-pair encoding trained on the corpus (Sennrich et al.): the base alphabet is the corpus's
    characters; merges are learned inside pre-tokens, most frequent pair first (ties: the pair that
    sorts first), until the vocabulary reaches `vocab` symbols. Deterministic."""

    def __init__(self, text: str, vocab: int) -> None:
        self.symbols: list[str] = sorted(set(text))
        if vocab < len(self.symbols):
            sys.exit(f"train_gpt.py: --vocab {vocab} is below the corpus's {len(self.symbols)} characters")
        counts: dict[str, int] = {}
        for m in PRETOKEN.finditer(text):
            counts[m.group()] = counts.get(m.group(), 0) + 1
        words = [[list(w), n] for w, n in sorted(counts.items())]
        self.merges: list[tuple[str, str]] = []
        while len(self.symbols) < vocab:
            pairs: dict[tuple[str, str], int] = {}
            for parts, n in words:
                for a, b in zip(parts, parts[1:]):
                    pairs[(a, b)] = pairs.get((a, b), 0) + n
            if not pairs:
                break
            best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            self.merges.append(best)
            self.symbols.append(best[0] + best[1])
            for entry in words:
                entry[0] = self._merge(entry[0], best)
        self.stoi = {s: i for i, s in enumerate(self.symbols)}
        self._cache: dict[str, list[int]] = {}

    @staticmethod
    def _merge(parts: list[str], pair: tuple[str, str]) -> list[str]:
        out, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == pair[0] and parts[i + 1] == pair[1]:
                out.append(pair[0] + pair[1])
                i += 2
            else:
                out.append(parts[i])
                i += 1
        return out

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for m in PRETOKEN.finditer(text):
            word = m.group()
            if word not in self._cache:
                parts = list(word)
                for pair in self.merges:
                    if len(parts) == 1:
                        break
                    parts = self._merge(parts, pair)
                self._cache[word] = [self.stoi[t] for t in parts]
            ids += self._cache[word]
        return ids


def pretrain(model: torch.nn.Module, bpe: Bpe | None, stoi: dict[str, int] | None, args: argparse.Namespace) -> dict:
    """Trains `model` in place on --pretrain-corpus (one process, its own Adam and batch stream), so that
    the dumped gradients are those of fine-tuning a pretrained model. Tokenizes with `bpe`, or with the
    character table `stoi` when `bpe` is None. Returns the provenance entry."""
    text, files = load_corpus(args.pretrain_corpus)
    alphabet = set(bpe.stoi) if bpe is not None else set(stoi)
    kept = "".join(c for c in text if c in alphabet)
    ids = bpe.encode(kept) if bpe is not None else [stoi[c] for c in kept]
    data = torch.tensor(ids, dtype=torch.long)
    chunk = max(512, 2 * args.block_size)
    chunks = list(range(0, len(data) - chunk, chunk))
    if not chunks:
        sys.exit(f"train_gpt.py: --pretrain-corpus too small: {len(data)} tokens")
    gen = torch.Generator().manual_seed(args.seed * 1000 + args.workers + 1)  # after the workers' streams
    opt = torch.optim.Adam(model.parameters(), lr=args.pretrain_lr, betas=(0.9, 0.99))
    t0, losses = time.time(), []
    for step in range(args.pretrain_steps):
        x, y = sample_batch(data, chunks, chunk, args.pretrain_batch, args.block_size, gen)
        model.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        warm = min(1.0, (step + 1) / 100)
        for g in opt.param_groups:
            g["lr"] = args.pretrain_lr * warm * 0.5 * (1 + math.cos(math.pi * step / args.pretrain_steps))
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == args.pretrain_steps - 1:
            print(f"pretrain step {step:5d}: loss {loss.item():.4f}  [{time.time() - t0:.1f} s]")
    final = float(np.mean(losses[-50:]))
    print(f"pretrained on {len(files)} files, {len(data)} tokens ({len(text) - len(kept)} characters outside "
          f"the tokenizer's alphabet dropped); mean loss of the last 50 steps {final:.4f}")
    return {"corpus": ", ".join(str(p) for p in args.pretrain_corpus), "files": len(files), "tokens": len(data),
            "dropped_characters": len(text) - len(kept), "steps": args.pretrain_steps,
            "batch": args.pretrain_batch, "sequence_length": args.block_size,
            "optimizer": f"Adam(betas=(0.9, 0.99)), lr {args.pretrain_lr}, 100 warm-up steps, cosine decay",
            "final_loss": round(final, 6),
            "note": "fine-tuning then starts a fresh Adam on --corpus; the dumped gradients are fine-tuning ones"}


# ---- output --------------------------------------------------------------------------------------


# ---- main ----------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="+", type=Path, default=[DEFAULT_CORPUS_DIR],
                    help="text files or directories (every regular file inside, in name order); default: %(default)s")
    ap.add_argument("--out", type=Path, default=None,
                    help="dump directory to write (created if needed); without it nothing is written")
    ap.add_argument("--workers", type=int, default=8, help="simulated data-parallel workers (default %(default)s)")
    ap.add_argument("--micro-batch", type=int, default=32, help="sequences per worker per step (default %(default)s)")
    ap.add_argument("--tokenizer", choices=["char", "bpe"], default="char",
                    help="characters, or byte-pair encoding learned on the corpus (default %(default)s)")
    ap.add_argument("--vocab", type=int, default=1024,
                    help="BPE vocabulary size including the characters (default %(default)s; --tokenizer bpe)")
    ap.add_argument("--block-size", type=int, default=64, help="context length in tokens (default %(default)s)")
    ap.add_argument("--d-model", type=int, default=64, help="embedding width (default %(default)s)")
    ap.add_argument("--tied", action="store_true",
                    help="tie the output head to the token embedding (as LLaMA-3.2-1B and Gemma do)")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks (default %(default)s)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (default %(default)s)")
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate after warm-up (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=20, help="linear warm-up steps (default %(default)s)")
    ap.add_argument("--dump-steps", type=int, nargs="+", default=[0, 50, 200],
                    help="steps whose gradients are dumped (default %(default)s)")
    ap.add_argument("--dtype", choices=["BF16", "F16", "F32"], default="BF16",
                    help="storage type (default %(default)s)")
    ap.add_argument("--shard-chunk", type=int, default=512,
                    help="the training text is dealt to the workers round-robin in chunks of this many "
                         "tokens (default %(default)s)")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="held-out tail of the corpus (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed for initialization and batch sampling (default %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default %(default)s, for determinism)")
    ap.add_argument("--pretrain-corpus", nargs="+", type=Path, default=None,
                    help="pretrain on these text files or directories first, then fine-tune on --corpus (the "
                         "gradients dumped are the fine-tuning ones, as in the papers' fine-tuning runs); the "
                         "tokenizer is the one learned on --corpus, and characters outside its alphabet are dropped")
    ap.add_argument("--pretrain-steps", type=int, default=0,
                    help="Adam steps of pretraining (default %(default)s: none; needs --pretrain-corpus)")
    ap.add_argument("--pretrain-batch", type=int, default=16,
                    help="pretraining sequences per step, one process (default %(default)s)")
    ap.add_argument("--pretrain-lr", type=float, default=3e-3,
                    help="pretraining peak learning rate: 100 steps of warm-up, then cosine decay to zero "
                         "(default %(default)s)")
    ap.add_argument("--steps", type=int, default=0,
                    help="training steps (default: the last of --dump-steps plus one)")
    ap.add_argument("--scheme", default=None,
                    help="synchronize the workers' gradients through this ccsim compression scheme "
                         "(ccsim.torch.SimulatedDDP, DDP's buckets) instead of exact averaging")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a parameter of --scheme (repeatable), e.g. --param budget=5")
    ap.add_argument("--collective", default="ring", help="the all-reduce algorithm of --scheme (default %(default)s)")
    ap.add_argument("--log-every", type=int, default=0,
                    help="also print the losses every N steps (default: only at --dump-steps)")
    args = ap.parse_args()
    if args.param and not args.scheme:
        ap.error("--param goes with --scheme")
    if sys.byteorder != "little":
        sys.exit("train_gpt.py: safetensors data is little-endian; this writer assumes a little-endian host")

    if (args.pretrain_steps > 0) != (args.pretrain_corpus is not None):
        ap.error("--pretrain-corpus and --pretrain-steps N > 0 go together")
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    dump_steps = sorted(set(args.dump_steps))

    text, files = load_corpus(args.corpus)
    bpe, stoi = None, None
    if args.tokenizer == "bpe":
        bpe = Bpe(text, args.vocab)
        vocab = len(bpe.symbols)
        data = torch.tensor(bpe.encode(text), dtype=torch.long)
        token_desc = f"byte-pair encoding learned on the corpus ({len(bpe.merges)} merges)"
    else:
        chars = sorted(set(text))
        vocab = len(chars)
        stoi = {c: i for i, c in enumerate(chars)}
        data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
        token_desc = "character-level"
    unit = "character" if args.tokenizer == "char" else "token"
    n_train = int(len(data) * (1 - args.val_fraction))
    if args.shard_chunk <= args.block_size:
        sys.exit(f"train_gpt.py: --shard-chunk {args.shard_chunk} must exceed --block-size {args.block_size}")
    # Worker w owns training chunks w, w + W, w + 2W, ...: disjoint data spread over the whole corpus,
    # as when a sampler deals a shuffled dataset out to the ranks.
    n_chunks = n_train // args.shard_chunk
    if n_chunks < args.workers:
        sys.exit(f"train_gpt.py: corpus too small: {n_chunks} chunks of {args.shard_chunk} tokens "
                 f"for {args.workers} workers")
    shards = [[c * args.shard_chunk for c in range(w, n_chunks, args.workers)] for w in range(args.workers)]
    val_chunks = list(range(n_chunks * args.shard_chunk, len(data) - args.shard_chunk + 1, args.shard_chunk))

    model = Gpt(vocab, args.d_model, args.layers, args.heads, args.block_size, args.tied)
    params = list(model.named_parameters())
    n_params = sum(p.numel() for _, p in params)
    pretrain_desc = pretrain(model, bpe, stoi, args) if args.pretrain_steps > 0 else None
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.99))
    gens = [torch.Generator().manual_seed(args.seed * 1000 + w + 1) for w in range(args.workers)]
    val_gen = torch.Generator().manual_seed(args.seed * 1000)
    val_batches = [sample_batch(data, val_chunks, args.shard_chunk, 16, args.block_size, val_gen) for _ in range(4)]

    print(f"corpus: {len(files)} files, {len(text)} characters, {len(data)} tokens, vocabulary {vocab}; "
          f"{n_train} for training ({len(shards[0])} chunks of {args.shard_chunk} per worker), "
          f"{len(data) - n_train} held out")
    print(f"model: {n_params} parameters in {len(params)} tensors; {args.workers} workers x "
          f"{args.micro_batch} x {args.block_size} tokens per step")

    sync = None
    if args.scheme:
        params_given = {}
        for kv in args.param:
            key, _, value = kv.partition("=")
            try:
                params_given[key] = json.loads(value)
            except json.JSONDecodeError:
                params_given[key] = value
        sync = ccsim_torch.SimulatedDDP(model, args.workers, scheme=args.scheme, params=params_given,
                                        collective=args.collective, seed=args.seed)
        print(f"sync: {args.scheme} {json.dumps(params_given)} on a {args.collective} all-reduce of "
              f"{args.workers} workers, {len(sync.buckets)} DDP buckets")
    grads: dict[int, list[torch.Tensor]] = {}
    step_log: dict[int, dict] = {}
    total_steps = args.steps if args.steps else dump_steps[-1] + 1
    t0 = time.time()
    for step in range(total_steps):
        if sync is None:
            local, losses = [], []
            for w in range(args.workers):
                x, y = sample_batch(data, shards[w], args.shard_chunk, args.micro_batch, args.block_size, gens[w])
                model.zero_grad(set_to_none=True)
                loss = model(x, y)
                loss.backward()
                local.append(torch.cat([p.grad.reshape(-1) for _, p in params]).clone())
                losses.append(loss.item())
        else:
            batches = [sample_batch(data, shards[w], args.shard_chunk, args.micro_batch, args.block_size, gens[w])
                       for w in range(args.workers)]
            losses = sync.backward(lambda w: model(*batches[w]))
            local = sync.local_by_parameter()
        logged = step in dump_steps or (args.log_every and (step % args.log_every == 0 or step == total_steps - 1))
        if logged:
            with torch.no_grad():
                val = sum(model(x, y).item() for x, y in val_batches) / len(val_batches)
            if step in dump_steps:
                grads[step] = local
            step_log[step] = {"train_loss": float(np.mean(losses)), "worker_loss": losses, "val_loss": val}
            extra = ""
            if sync is not None:
                vn = [b["vnmse"] for b in sync.stats]
                extra = (f", vNMSE {min(vn):.3g}..{max(vn):.3g} over buckets, "
                         f"{sync.seconds['ccsim'] / (step + 1):.3f} s per round in ccsim")
            print(f"step {step:4d}: train loss {np.mean(losses):.4f} (workers {min(losses):.3f}..{max(losses):.3f}), "
                  f"held-out loss {val:.4f}{extra}  [{time.time() - t0:.1f} s]")
        if sync is None:
            avg = torch.stack(local).mean(dim=0)
            offset = 0
            for _, p in params:
                p.grad = avg[offset : offset + p.numel()].view_as(p).clone()
                offset += p.numel()
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
        opt.step()
    if sync is not None:
        print(f"trained {total_steps} rounds in {time.time() - t0:.1f} s: {sync.seconds['compute'] / total_steps:.3f} s "
              f"per round in forward/backward, {sync.seconds['ccsim'] / total_steps:.3f} s in ccsim; "
              f"ranks agree: {sync.ranks_agree}")
    if args.out is None:
        return 0

    # ---- write the dump ----
    writer = ccsim_torch.GradientDumpWriter(args.out, params, args.workers, args.dtype)
    for s in dump_steps:
        writer.add_step(s, grads[s], round(step_log[s]["train_loss"], 6))
    corpus_desc = ", ".join(str(p) for p in args.corpus)
    corpus_name = "Debian license texts" if args.corpus == [DEFAULT_CORPUS_DIR] else "Text corpus"
    command = " ".join(["tools/gradients/train_gpt.py", *sys.argv[1:]])
    writer.close({
        "model": f"GPT-style decoder-only transformer, {token_desc}: {args.layers} pre-LN blocks, "
                 f"d_model {args.d_model}, {args.heads} heads, MLP 4x with GELU, context {args.block_size}, "
                 f"vocabulary {vocab}, learned positions, {'tied' if args.tied else 'untied'} head; {n_params} parameters",
        "dataset": f"{corpus_name} ({corpus_desc}): {len(files)} files, {len(text)} characters"
                   f"{'' if args.tokenizer == 'char' else f', {len(data)} tokens'}; "
                   f"first {1 - args.val_fraction:.0%} cut into {args.shard_chunk}-{unit} chunks dealt "
                   f"round-robin to the {args.workers} workers (disjoint shards), rest held out",
        "generator": command,
        "corpus_files": [f.name for f in files],
        "training": {
            "optimizer": "Adam(betas=(0.9, 0.99)), averaged gradient of all workers"
                         + (f", synchronized through ccsim {args.scheme} on a {args.collective} all-reduce"
                            if sync is not None else ""),
            "lr": args.lr, "warmup_steps": args.warmup, "micro_batch_per_worker": args.micro_batch,
            "sequence_length": args.block_size, "seed": args.seed, "torch": torch.__version__,
        },
        **({"pretraining": pretrain_desc} if pretrain_desc else {}),
        "gradient": "each worker's local gradient of its own micro-batch mean cross-entropy, before averaging, "
                    "at the parameters reached after `step` Adam updates; layers flattened in order",
        "losses": {str(s): {"train": round(step_log[s]["train_loss"], 6),
                            "held_out": round(step_log[s]["val_loss"], 6),
                            "per_worker": [round(v, 6) for v in step_log[s]["worker_loss"]]} for s in dump_steps},
    })
    workers = [f"worker{w}.safetensors" for w in range(args.workers)]
    total = sum((args.out / f).stat().st_size for f in workers + ["manifest.json"])
    print(f"wrote {args.out}: {len(workers)} worker files + manifest.json, {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
