"""Proxy training through ccsim's compressed collectives (the ``ccsim.proxy`` module; needs Debian's
python3-torch).

Real training of a small model by W simulated data-parallel workers (``ccsim.torch.SimulatedDDP``):
every round each worker computes the local gradient of its own micro-batch, the W gradients go
through the scheme's exact compressed collective (DDP buckets, every hop's encode, decode and
accumulate, the scheme's state across rounds), and the optimizer applies what rank 0 ends with.
Two tasks:

- ``gpt``: a GPT-style character-level language model on the license texts every Debian machine
  has (/usr/share/common-licenses); metric: held-out loss (lower is better).
- ``digits``: a two-layer perceptron on the 8x8 handwritten digits Debian's python3-sklearn ships;
  metric: held-out accuracy (higher is better).

Optimizers: AdamW or SGD with momentum, linear warm-up then cosine decay to a tenth. With a
``weights`` scheme (SDP4Bit's ``sdp4bit_qw`` / ``sdp4bit_qwd``), the updated weights are all-gathered
through that scheme every round and the model continues from what the all-gather delivers, as in
sharded data parallelism.

Deterministic for a seed (one torch thread, deterministic algorithms); every scheme sees the same
micro-batches and the same initial weights. The curve (one row every ``eval_every`` rounds) is
what ``ccsim run`` reads as ``convergence.curves`` (docs/tta.md):

    /usr/bin/python3 -m ccsim.proxy scenarios/tta/gpt-proxy-ring8.json
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import ccsim
from ccsim.models import DEFAULT_CORPUS_DIR, DigitsMlp, Gpt, load_corpus, load_digits, sample_batch
from ccsim.torch import SimulatedDDP

__all__ = ["ProxyConfig", "Entry", "train", "train_entries", "run_scenario", "CURVE_COLUMNS", "write_curves", "TASKS"]

TASKS = ("gpt", "digits")

# The curve's columns (docs/outputs.md, convergence.curves).
CURVE_COLUMNS = ["label", "scheme", "round", "train_loss", "val_loss", "val_accuracy", "vnmse", "bits_per_entry", "rank",
                 "seconds"]


@dataclass
class ProxyConfig:
    """What to train and how (the scenario's ``convergence.proxy`` block, keys as here)."""

    task: str = "gpt"
    workers: int = 8
    collective: str = "ring"
    rounds: int = 300
    eval_every: int = 10
    optimizer: str = ""          # "adamw" or "sgd" ("": adamw for gpt, sgd for digits)
    lr: float = 0.0              # 0: the task's default
    momentum: float = 0.9        # sgd
    weight_decay: float = 0.0
    warmup: int = 10             # rounds of linear warm-up
    micro_batch: int = 0         # per worker (0: the task's default)
    seed: int = 1
    seeds: int = 1               # repetitions (seed, seed + 1, ...), averaged per round
    bucket_mb: float = 25.0      # DDP bucket cap
    # gpt
    d_model: int = 32
    layers: int = 2
    heads: int = 4
    block_size: int = 32
    # digits
    hidden: int = 128
    # per entry label: scheme parameters the proxy trains it with in place of its own
    params: dict = field(default_factory=dict)

    def resolved(self) -> "ProxyConfig":
        c = ProxyConfig(**self.__dict__)
        if c.task not in TASKS:
            raise ValueError(f"task: expected one of {', '.join(TASKS)}, got {c.task!r}")
        c.optimizer = c.optimizer or ("adamw" if c.task == "gpt" else "sgd")
        if c.optimizer not in ("adamw", "sgd"):
            raise ValueError(f"optimizer: expected adamw or sgd, got {c.optimizer!r}")
        c.lr = c.lr or (3e-3 if c.optimizer == "adamw" else 0.05)
        c.micro_batch = c.micro_batch or 16
        for name in ("workers", "rounds", "eval_every", "micro_batch", "seeds"):
            if int(getattr(c, name)) < (2 if name == "workers" else 1):
                raise ValueError(f"{name}: expected a positive integer{' of at least 2' if name == 'workers' else ''}, "
                                 f"got {getattr(c, name)!r}")
        return c


@dataclass
class Entry:
    """One compression entry: the gradients' scheme and, optionally, the weights' all-gather scheme."""

    scheme: str
    params: dict = field(default_factory=dict)
    label: str = ""
    weights: str = ""
    weights_params: dict = field(default_factory=dict)

    def name(self) -> str:
        if self.label:
            return self.label
        base = ccsim.scheme_label(self.scheme, self.params)
        # As ccsim run names a sharded entry: bf16 weights (the default) add nothing.
        plain = not self.weights or (self.weights == "bf16" and not self.weights_params)
        return base if plain else f"{base}+{ccsim.scheme_label(self.weights, self.weights_params)}"


# ---- tasks ---------------------------------------------------------------------------------------


class _GptTask:
    metric = "loss"

    def __init__(self, c: ProxyConfig) -> None:
        text, _ = load_corpus([DEFAULT_CORPUS_DIR])
        chars = sorted(set(text))
        stoi = {ch: i for i, ch in enumerate(chars)}
        self.data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
        chunk = 512
        n_chunks = int(len(self.data) * 0.9) // chunk
        self.chunk, self.block, self.batch = chunk, c.block_size, c.micro_batch
        self.shards = [[k * chunk for k in range(w, n_chunks, c.workers)] for w in range(c.workers)]
        val_chunks = list(range(n_chunks * chunk, len(self.data) - chunk + 1, chunk))
        gen = torch.Generator().manual_seed(c.seed * 1000)
        self.val = [sample_batch(self.data, val_chunks, chunk, 32, c.block_size, gen) for _ in range(4)]
        self.model = Gpt(len(chars), c.d_model, c.layers, c.heads, c.block_size, tied=True)
        self.desc = (f"GPT-style decoder ({c.layers} blocks, d_model {c.d_model}, {c.heads} heads, context "
                     f"{c.block_size}, character vocabulary {len(chars)}) on {DEFAULT_CORPUS_DIR} "
                     f"({len(text)} characters, last 10% held out)")

    def batch_of(self, worker: int, gen: torch.Generator) -> tuple:
        return sample_batch(self.data, self.shards[worker], self.chunk, self.batch, self.block, gen)

    def evaluate(self) -> dict:
        with torch.no_grad():
            return {"val_loss": sum(self.model(x, y).item() for x, y in self.val) / len(self.val)}


class _DigitsTask:
    metric = "accuracy"

    def __init__(self, c: ProxyConfig) -> None:
        x, y = load_digits()
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(c.seed))
        n_val = len(y) // 5
        self.val = (x[order[:n_val]], y[order[:n_val]])
        train = order[n_val:]
        self.x, self.y = x, y
        self.shards = [train[w::c.workers] for w in range(c.workers)]
        self.batch = c.micro_batch
        self.model = DigitsMlp(c.hidden)
        self.desc = (f"two-layer perceptron (64-{c.hidden}-10) on the 8x8 digits of python3-sklearn "
                     f"({len(y)} images, {n_val} held out)")

    def batch_of(self, worker: int, gen: torch.Generator) -> tuple:
        shard = self.shards[worker]
        pick = shard[torch.randint(0, len(shard), (self.batch,), generator=gen)]
        return self.x[pick], self.y[pick]

    def evaluate(self) -> dict:
        with torch.no_grad():
            x, y = self.val
            logits = self.model.logits(x)
            return {"val_loss": torch.nn.functional.cross_entropy(logits, y).item(),
                    "val_accuracy": (logits.argmax(dim=1) == y).float().mean().item()}


def _task(c: ProxyConfig) -> Any:
    torch.manual_seed(c.seed)  # the initial weights: the same for every entry
    return _GptTask(c) if c.task == "gpt" else _DigitsTask(c)


def task_metric(task: str) -> str:
    """The metric a task's targets refer to: "loss" (lower is better) or "accuracy"."""
    return "loss" if task == "gpt" else "accuracy"


# ---- training ------------------------------------------------------------------------------------


def _optimizer(model: torch.nn.Module, c: ProxyConfig) -> torch.optim.Optimizer:
    if c.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=c.lr, betas=(0.9, 0.95), weight_decay=c.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)


def _lr_factor(step: int, c: ProxyConfig) -> float:
    """Linear warm-up over `warmup` rounds, then cosine decay to a tenth at the last round."""
    if step < c.warmup:
        return (step + 1) / c.warmup
    span = max(1, c.rounds - c.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - c.warmup) / span)))


class _WeightSync:
    """The updated weights all-gathered through a scheme (sharded data parallelism's weight phase)."""

    def __init__(self, model: torch.nn.Module, entry: Entry, c: ProxyConfig) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.workers = c.workers
        self.collective = ccsim.Collective(entry.weights, entry.weights_params, c.collective, op="allgather",
                                           seed=c.seed ^ 0x5EED)

    def __call__(self) -> None:
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1).float() for p in self.params]).contiguous()
            out = torch.from_numpy(self.collective.step([flat] * self.workers).outputs[0])
            offset = 0
            for p in self.params:
                p.copy_(out[offset:offset + p.numel()].view_as(p))
                offset += p.numel()


def train(c: ProxyConfig, entry: Entry, log: Callable[[str], None] | None = None) -> list[dict]:
    """Trains the task with `entry`'s compression; returns the curve: one row every eval_every rounds
    (and at round 0 and the last round) with the round, the mean training loss since the previous
    row, the held-out loss (and accuracy), the mean vNMSE and bits per entry of the rounds since the
    previous row (weighted by bucket size), and the wall seconds so far."""
    c = c.resolved()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    task = _task(c)
    model = task.model
    ddp = SimulatedDDP(model, c.workers, scheme=entry.scheme, params=entry.params, collective=c.collective,
                       seed=c.seed, bucket_cap_mb=c.bucket_mb, first_bucket_cap_mb=min(1.0, c.bucket_mb))
    sizes = [sum(ddp.params[i].numel() for i in layers) for layers in ddp.buckets]
    weights = _WeightSync(model, entry, c) if entry.weights else None
    opt = _optimizer(model, c)
    gens = [torch.Generator().manual_seed(c.seed * 1000 + w + 1) for w in range(c.workers)]
    rows, window, t0 = [], {"loss": [], "vnmse": [], "bits": [], "rank": []}, time.perf_counter()

    def record(step: int) -> None:
        ev = task.evaluate()
        mean = (lambda xs: float(np.mean(xs)) if xs else float("nan"))
        rows.append({"label": entry.name(), "scheme": entry.scheme, "round": step,
                     "train_loss": mean(window["loss"]), "val_loss": ev["val_loss"],
                     "val_accuracy": ev.get("val_accuracy", float("nan")), "vnmse": mean(window["vnmse"]),
                     "bits_per_entry": mean(window["bits"]), "rank": mean(window["rank"]),
                     "seconds": time.perf_counter() - t0})
        for v in window.values():
            v.clear()
        if log:
            r = rows[-1]
            log(f"{r['label']:>24} round {step:5d}: held-out loss {r['val_loss']:.4f}"
                + (f" accuracy {r['val_accuracy']:.4f}" if c.task == "digits" else "")
                + (f", vNMSE {r['vnmse']:.3e}" if step else "") + f"  [{r['seconds']:.1f} s]")

    compressing = None
    record(0)
    for step in range(c.rounds):
        batches = [task.batch_of(w, gens[w]) for w in range(c.workers)]
        losses = ddp.backward(lambda w: model(*batches[w]))
        window["loss"].append(float(np.mean(losses)))
        window["vnmse"].append(float(np.dot(sizes, [s["vnmse"] for s in ddp.stats]) / sum(sizes)))
        window["bits"].append(float(np.dot(sizes, [s["bits_per_entry"] for s in ddp.stats]) / sum(sizes)))
        ranks = [d["value"] for s in ddp.stats for d in s["decisions"] if d["quantity"] == "rank"]
        if ranks:  # a low-rank scheme's rank this round (EDGC's controller: 0 while warming up)
            window["rank"].append(float(np.mean(ranks)))
            if compressing is None and window["rank"][-1] > 0:
                compressing = step
                if log:
                    log(f"{entry.name():>24} round {step:5d}: compresses from this round on, rank {window['rank'][-1]:g}")
        for g in opt.param_groups:
            g["lr"] = c.lr * _lr_factor(step, c)
        opt.step()
        if weights is not None:
            weights()
        done = step + 1
        if done % c.eval_every == 0 or done == c.rounds:
            record(done)
    return rows


def _average(runs: list[list[dict]]) -> list[dict]:
    """The rows of several seeds' runs of one entry, averaged round by round."""
    out = []
    for rows in zip(*runs):
        avg = dict(rows[0])
        for k in ("train_loss", "val_loss", "val_accuracy", "vnmse", "bits_per_entry", "rank", "seconds"):
            avg[k] = float(np.mean([r[k] for r in rows]))
        out.append(avg)
    return out


def _train_task(args: tuple) -> list[dict]:
    c, entry, verbose = args
    ccsim.set_threads(1)  # one process per core: the numerics' threads would only contend
    return train(c, entry, print if verbose else None)


def train_entries(c: ProxyConfig, entries: list[Entry], jobs: int = 1, log: Callable[[str], None] | None = None) -> list[dict]:
    """Every entry trained with seeds c.seed .. c.seed + c.seeds - 1 (in `jobs` processes), each
    entry's curve the mean of its seeds' curves; the result does not depend on `jobs`."""
    c = c.resolved()
    tasks = [(ProxyConfig(**{**c.__dict__, "seed": c.seed + k}), e, log is not None)
             for e in entries for k in range(c.seeds)]
    if jobs > 1 and len(tasks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # A worker that dies fails the run (BrokenProcessPool) instead of leaving it waiting.
        with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn")) as pool:
            runs = list(pool.map(_train_task, tasks))
    else:
        runs = [train(t[0], t[1], log) for t in tasks]
    rows: list[dict] = []
    for i in range(len(entries)):
        rows += _average(runs[i * c.seeds:(i + 1) * c.seeds])
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return str(v)


def write_curves(rows: list[dict], path: Path | None = None) -> str:
    """The curve rows as CSV (CURVE_COLUMNS); written atomically to `path` when given."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CURVE_COLUMNS[:-1])
    for r in rows:
        w.writerow([_fmt(r[k]) for k in CURVE_COLUMNS[:-1]])
    text = buf.getvalue()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(text)
        os.replace(tmp, path)
    return text


# ---- a scenario's proxy run ---------------------------------------------------------------------


def _scenario_entries(scenario: dict) -> list[Entry]:
    """The scenario's compression entries; in a sharded run the weights are all-gathered in bf16
    unless an entry names another scheme, as ccsim run does."""
    comp = scenario.get("compression", [])
    comp = comp if isinstance(comp, list) else [comp]
    sharded = (scenario.get("sync") or {}).get("mode") == "sharded"
    entries = []
    for e in comp:
        w = e.get("weights") or {}
        weights = w.get("scheme", "bf16" if sharded else "")
        entries.append(Entry(e["scheme"], dict(e.get("params") or {}), e.get("label", ""), weights,
                             dict(w.get("params") or {})))
    return entries


def run_scenario(path: Path, only: list[str] | None = None, rounds: int = 0,
                 log: Callable[[str], None] | None = print, out: Path | None = None, jobs: int = 1) -> Path:
    """Runs the proxy of scenario `path` (its ``convergence.proxy`` block) for each compression entry
    and writes the curves where ``convergence.curves`` names them; returns that path."""
    scenario = json.loads(path.read_text())
    conv = scenario.get("convergence")
    if not isinstance(conv, dict) or not isinstance(conv.get("proxy"), dict) or "curves" not in conv:
        raise ValueError(f"{path}: /convergence: expected a block with \"proxy\" and \"curves\"")
    config = ProxyConfig(**conv["proxy"])
    if rounds:
        config.rounds = rounds
    config = config.resolved()
    out = out or (path.parent / conv["curves"]).resolve()
    entries = [e for e in _scenario_entries(scenario) if not only or e.name() in only]
    for e in entries:  # the proxy's own parameters for an entry, under the entry's label
        if e.name() in config.params:
            e.label, e.params = e.name(), {**e.params, **config.params[e.name()]}
    for e in entries:
        try:
            ccsim.Collective(e.scheme, e.params, config.collective)
        except ValueError as err:
            raise ValueError(f"{path}: compression entry {e.name()}: {err}") from None
    rows = train_entries(config, entries, jobs, log)
    write_curves(rows, out)
    if log:
        log(f"wrote {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ccsim.proxy",
                                 description="Proxy training of a scenario's compression entries; writes "
                                             "the curves its convergence block reads.")
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--only", nargs="+", default=None, help="labels of the entries to train (default: all)")
    ap.add_argument("--rounds", type=int, default=0, help="override convergence.proxy.rounds")
    ap.add_argument("--out", type=Path, default=None, help="write the curves here instead of convergence.curves")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="training processes (default: one per core); the curves do not depend on it")
    args = ap.parse_args(argv)
    try:
        run_scenario(args.scenario, args.only, args.rounds, out=args.out, jobs=max(1, args.jobs))
    except (ValueError, FileNotFoundError, KeyError, TypeError) as e:
        print(f"ccsim.proxy: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
