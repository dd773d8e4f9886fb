"""ccsim inside PyTorch training (the `ccsim.torch` module; needs Debian's python3-torch).

- ``comm_hook(...)``: a DistributedDataParallel communication hook. Each rank's bucket is gathered,
  ccsim's exact compressed collective runs on the gathered buckets (the same on every rank, with
  the scheme's state kept per bucket across rounds), and each rank receives what the simulated
  collective gives it, averaged as DDP averages: a real multi-process run (gloo or NCCL) sees
  exactly ccsim's compression error.
- ``SimulatedDDP``: W data-parallel workers in one process, each with its own micro-batch and local
  gradient, DDP's bucketing, gradients synchronized through ccsim: the proxy trainer a laptop or CI
  can run.
- ``dump_gradients`` and ``GradientDumpWriter``: ccsim gradient dumps (manifest.json and one
  .safetensors file per worker, layer table from ``named_parameters()``) from any model.

Bucket b of a model draws its random numbers from seed ^ (b * 0x9E3779B97F4A7C15), as
``ccsim vnmse --ddp-bucket`` derives them; round k of a bucket is its k-th synchronization.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
import torch.distributed as dist

import ccsim

__all__ = ["bucket_seed", "comm_hook", "CommHook", "SimulatedDDP", "GradientDumpWriter", "dump_gradients",
           "write_safetensors", "to_storage"]

_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def bucket_seed(seed: int, index: int) -> int:
    """The seed of DDP bucket ``index``: seed ^ (index * 0x9E3779B97F4A7C15) modulo 2^64."""
    return (int(seed) ^ (int(index) * _GOLDEN)) & _MASK64


def _summary(result: ccsim.Result) -> dict:
    return {"round": result.round, "vnmse": result.vnmse, "bits_per_entry": result.bits_per_entry,
            "decisions": result.decisions}


# ---- the DDP communication hook ------------------------------------------------------------------


class CommHook:
    """A DDP communication hook running ccsim's compressed collective (see comm_hook())."""

    def __init__(self, scheme: str = "dynamiq", params: dict | None = None, collective: str = "ring", seed: int = 0,
                 gpus_per_node: int = 1, process_group: Any = None) -> None:
        ccsim.Collective(scheme, params, collective)  # checks the scheme and its parameters now
        self.scheme, self.params, self.collective = scheme, dict(params or {}), collective
        self.seed, self.gpus_per_node, self.process_group = int(seed), int(gpus_per_node), process_group
        self._collectives: dict[tuple[int, int], ccsim.Collective] = {}
        self.stats: dict[int, dict] = {}   # bucket index -> the last round's summary
        self.record: list | None = None    # set to a list to keep (index, gathered inputs, output) per call
        self.__name__ = self.__qualname__ = f"ccsim_{scheme}_hook"  # register_comm_hook reads these

    @property
    def state(self) -> "CommHook":
        """What to pass as register_comm_hook's state."""
        return self

    def _collective(self, index: int, numel: int, shapes: list) -> ccsim.Collective:
        # DDP may rebuild its buckets after the first iteration: a bucket is its index and size.
        key = (index, numel)
        if key not in self._collectives:
            layers = shapes if sum(int(np.prod(s)) if s else 1 for s in shapes) == numel else None
            self._collectives[key] = ccsim.Collective(self.scheme, self.params, self.collective,
                                                      seed=bucket_seed(self.seed, index),
                                                      gpus_per_node=self.gpus_per_node, layers=layers)
        return self._collectives[key]

    # No annotations: register_comm_hook compares them with dist.GradBucket itself.
    def __call__(self, state, bucket):  # noqa: ANN001, ANN204
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        buf = bucket.buffer()
        gathered = [torch.empty_like(buf) for _ in range(world)]
        dist.all_gather(gathered, buf, group=group)
        inputs = [g.detach().cpu() for g in gathered]
        # GradBucket.parameters() (torch >= 1.10) gives the layers; without it, one row vector.
        shapes = [list(p.shape) for p in bucket.parameters()] if hasattr(bucket, "parameters") else []
        c = self._collective(bucket.index(), buf.numel(), shapes)
        result = c.step(inputs)
        out = torch.from_numpy(result.outputs[rank]).div_(world).to(device=buf.device, dtype=buf.dtype)
        self.stats[bucket.index()] = _summary(result)
        if self.record is not None:
            self.record.append((bucket.index(), [t.clone() for t in inputs], out.cpu().clone()))
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(out)
        return fut


def comm_hook(scheme: str = "dynamiq", params: dict | None = None, collective: str = "ring", seed: int = 0,
              gpus_per_node: int = 1, process_group: Any = None) -> CommHook:
    """A hook for ``ddp_model.register_comm_hook(hook.state, hook)``: every bucket goes through
    ccsim's exact ``scheme`` on ``collective`` (an all-reduce), the result averaged over ranks and
    cast back to the bucket's dtype. ``hook.stats[b]`` holds bucket b's last vNMSE, bits per entry
    and controller decisions. Every rank runs the whole simulation on the gathered buckets (a
    deterministic computation, so every rank keeps the same scheme state)."""
    return CommHook(scheme, params, collective, seed, gpus_per_node, process_group)


# ---- W workers in one process --------------------------------------------------------------------


class SimulatedDDP:
    """W data-parallel workers of one model in one process, synchronized through ccsim.

        ddp = ccsim.torch.SimulatedDDP(model, workers=8, scheme="dynamiq", params={"budget": 5})
        losses = ddp.backward(lambda w: loss_fn(model, batches[w]))   # each worker's own micro-batch
        optimizer.step()                                               # on the synchronized .grad

    The parameters are grouped into DDP's buckets (``bucket_cap_mb``, the first bucket
    ``first_bucket_cap_mb``, from the last parameter, as DDP does); each bucket is one stateful
    ccsim.Collective over the W workers' local gradients, and rank 0's result divided by W becomes
    the parameters' ``.grad``. One model stands for the W replicas: ``ranks_agree`` says whether
    every rank ended with the same bits in the last step (with it, the replicas would not diverge).
    """

    def __init__(self, model: torch.nn.Module, workers: int, scheme: str = "dynamiq", params: dict | None = None,
                 collective: str = "ring", seed: int = 0, bucket_cap_mb: float = 25.0,
                 first_bucket_cap_mb: float = 1.0, gpus_per_node: int = 1) -> None:
        if int(workers) < 2:
            raise ValueError(f"workers: expected at least 2, got {workers}")
        self.model, self.workers = model, int(workers)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("model: has no trainable parameters")
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        mib = 1024 * 1024
        self.buckets = ccsim.ddp_buckets([p.numel() for p in self.params], int(bucket_cap_mb * mib),
                                         int(first_bucket_cap_mb * mib))
        self.collectives = [ccsim.Collective(scheme, params, collective, seed=bucket_seed(seed, b),
                                             gpus_per_node=gpus_per_node,
                                             layers=[list(self.params[i].shape) for i in layers])
                            for b, layers in enumerate(self.buckets)]
        self.stats: list[dict] = []
        self.ranks_agree = True
        self.seconds = {"compute": 0.0, "ccsim": 0.0}
        self.last_local: list[list[torch.Tensor]] = []

    def local_gradients(self) -> list[torch.Tensor]:
        """The model's current gradients, one flattened fp32 vector per bucket (zeros where none)."""
        out = []
        for layers in self.buckets:
            parts = [self.params[i].grad.detach().reshape(-1).float() if self.params[i].grad is not None
                     else torch.zeros(self.params[i].numel()) for i in layers]
            out.append(torch.cat(parts).contiguous())
        return out

    def backward(self, loss_of_worker: Callable[[int], torch.Tensor]) -> list[float]:
        """Runs each worker's forward (``loss_of_worker(w)``, a scalar loss) and backward, then
        synchronizes; returns the workers' losses."""
        t0 = time.perf_counter()
        grads, losses = [], []
        for w in range(self.workers):
            self.model.zero_grad(set_to_none=True)
            loss = loss_of_worker(w)
            loss.backward()
            losses.append(float(loss.detach()))
            grads.append(self.local_gradients())
        self.seconds["compute"] += time.perf_counter() - t0
        self.last_local = grads
        self.synchronize(grads)
        return losses

    def local_by_parameter(self) -> list[torch.Tensor]:
        """The last backward()'s local gradients, one flattened vector per worker in parameter order
        (what a gradient dump holds)."""
        out = []
        for buckets in self.last_local:
            pieces: list[torch.Tensor | None] = [None] * len(self.params)
            for b, layers in enumerate(self.buckets):
                offset = 0
                for i in layers:
                    pieces[i] = buckets[b][offset:offset + self.params[i].numel()]
                    offset += self.params[i].numel()
            out.append(torch.cat(pieces))
        return out

    def synchronize(self, worker_grads: Sequence[Sequence[torch.Tensor]]) -> None:
        """Synchronizes per-worker gradients (``worker_grads[w][b]``: worker w's bucket b, as
        local_gradients() gives them) and writes rank 0's averaged result into ``.grad``."""
        if len(worker_grads) != self.workers:
            raise ValueError(f"worker_grads: expected {self.workers} workers, got {len(worker_grads)}")
        t0 = time.perf_counter()
        self.stats, agree = [], True
        for b, layers in enumerate(self.buckets):
            result = self.collectives[b].step([g[b] for g in worker_grads])
            first = result.outputs[0]
            agree = agree and all(np.array_equal(first.view(np.uint32), o.view(np.uint32)) for o in result.outputs)
            avg = torch.from_numpy(first).div_(self.workers)
            offset = 0
            for i in layers:
                p = self.params[i]
                p.grad = avg[offset:offset + p.numel()].view_as(p).to(p.dtype).clone()
                offset += p.numel()
            self.stats.append(_summary(result))
        self.ranks_agree = agree
        self.seconds["ccsim"] += time.perf_counter() - t0


# ---- gradient dumps ------------------------------------------------------------------------------


def write_safetensors(path: Path, tensors: list[tuple[str, np.ndarray, str]], metadata: dict[str, str]) -> None:
    """Writes (name, uint16/float32 array, dtype) tensors back to back; header padded to 8 bytes;
    atomically (a temporary file renamed)."""
    if sys.byteorder != "little":
        raise ValueError("safetensors data is little-endian; this writer needs a little-endian host")
    header: dict = {"__metadata__": metadata}
    offset = 0
    for name, arr, dtype in tensors:
        size = arr.nbytes
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode("utf-8"))
        for _, arr, _ in tensors:
            f.write(np.ascontiguousarray(arr).tobytes())
    os.replace(tmp, path)


def to_storage(vec: torch.Tensor, dtype: str) -> np.ndarray:
    """A flattened gradient in a dump's storage type: F32, F16 or BF16 (round to nearest even)."""
    if dtype == "F32":
        return vec.to(torch.float32).numpy()
    if dtype == "F16":
        return vec.to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    if dtype == "BF16":
        return vec.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    raise ValueError(f"dtype: expected F32, F16 or BF16, got {dtype!r}")


def _layer_table(named_parameters: Iterable[tuple[str, torch.Tensor]]) -> list[dict]:
    layers, offset = [], 0
    for name, p in named_parameters:
        layers.append({"name": name, "shape": list(p.shape), "offset": offset, "count": p.numel()})
        offset += p.numel()
    if not layers:
        raise ValueError("model: has no parameters to describe")
    return layers


class GradientDumpWriter:
    """Collects per-worker flattened gradients step by step and writes a ccsim gradient dump.

        w = GradientDumpWriter(out_dir, model.named_parameters(), workers=8, dtype="BF16")
        w.add_step(200, [g0, g1, ...], loss=5.44)     # each worker's local gradient, flattened
        w.close({"model": "...", "dataset": "..."})   # writes workerW.safetensors + manifest.json
    """

    def __init__(self, out_dir: str | Path, named_parameters: Iterable[tuple[str, torch.Tensor]], workers: int,
                 dtype: str = "F32") -> None:
        if dtype not in ("F32", "F16", "BF16"):
            raise ValueError(f"dtype: expected F32, F16 or BF16, got {dtype!r}")
        if int(workers) < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.out, self.workers, self.dtype = Path(out_dir), int(workers), dtype
        self.layers = _layer_table(named_parameters)
        self.elements = sum(layer["count"] for layer in self.layers)
        self.steps: list[dict] = []
        self._data: list[list[np.ndarray]] = []

    def add_step(self, step: int, worker_grads: Sequence[torch.Tensor], loss: float | None = None) -> None:
        if self.steps and int(step) <= self.steps[-1]["step"]:
            raise ValueError(f"step: expected steps in increasing order, got {step} after {self.steps[-1]['step']}")
        if len(worker_grads) != self.workers:
            raise ValueError(f"worker_grads: expected {self.workers} workers' gradients, got {len(worker_grads)}")
        data = []
        for w, g in enumerate(worker_grads):
            g = torch.as_tensor(g).detach().reshape(-1).cpu()
            if g.numel() != self.elements:
                raise ValueError(f"worker_grads[{w}]: expected {self.elements} entries (the parameters'), "
                                 f"got {g.numel()}")
            if not torch.isfinite(g).all():
                raise ValueError(f"worker_grads[{w}]: expected finite values")
            data.append(to_storage(g, self.dtype))
        entry = {"step": int(step), "tensor": f"step{int(step)}"}
        if loss is not None:
            entry["loss"] = loss
        self.steps.append(entry)
        self._data.append(data)

    def close(self, provenance: dict) -> Path:
        """Writes the worker files and manifest.json (last, atomically); ``provenance`` needs
        "model" and "dataset" strings and may hold anything else. Returns the manifest's path."""
        if not self.steps:
            raise ValueError("no step added")
        for key in ("model", "dataset"):
            if not isinstance(provenance.get(key), str):
                raise ValueError(f"provenance: expected a '{key}' string")
        self.out.mkdir(parents=True, exist_ok=True)
        files = [f"worker{w}.safetensors" for w in range(self.workers)]
        step_list = ",".join(str(s["step"]) for s in self.steps)
        for w, name in enumerate(files):
            tensors = [(s["tensor"], self._data[i][w], self.dtype) for i, s in enumerate(self.steps)]
            write_safetensors(self.out / name, tensors,
                              {"worker": str(w), "workers": str(self.workers), "steps": step_list})
        manifest = {"format": "ccsim-gradient-dump", "version": 1, "dtype": self.dtype, "elements": self.elements,
                    "workers": files, "steps": self.steps, "layers": self.layers, "provenance": provenance}
        tmp = self.out / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.out / "manifest.json")
        return self.out / "manifest.json"


def dump_gradients(model: torch.nn.Module | Iterable[tuple[str, torch.Tensor]], worker_grads: Sequence[Any],
                   out_dir: str | Path, step: int = 0, dtype: str = "F32", model_desc: str | None = None,
                   dataset: str = "unknown", loss: float | None = None, **provenance: Any) -> Path:
    """Writes a ccsim gradient dump of one step: ``worker_grads[w]`` is worker w's local gradient,
    either flattened in ``named_parameters()`` order or a list of per-parameter tensors. Returns the
    manifest's path; ``ccsim vnmse --gradients OUT_DIR`` and ``ccsim.load_dump`` read it."""
    named = list(model.named_parameters()) if isinstance(model, torch.nn.Module) else list(model)
    flat = [torch.cat([torch.as_tensor(t).reshape(-1) for t in g]) if isinstance(g, (list, tuple)) else g
            for g in worker_grads]
    writer = GradientDumpWriter(out_dir, named, len(flat), dtype)
    writer.add_step(step, flat, loss)
    desc = model_desc or (type(model).__name__ if isinstance(model, torch.nn.Module) else "model")
    return writer.close({"model": f"{desc}: {writer.elements} parameters in {len(named)} tensors",
                         "dataset": dataset, "generator": "ccsim.torch.dump_gradients", **provenance})
