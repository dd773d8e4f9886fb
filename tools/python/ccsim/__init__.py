"""ccsim's compression schemes and collectives on real tensors, from Python.

Every function runs ccsim's C++ core (the same code as the ``ccsim`` command): a compression scheme
on a collective algorithm, through the collective's real schedule (every hop's encode, decode and
accumulate, the metadata phase), on one tensor per rank. docs/python.md has worked examples.

Tensors: NumPy arrays or CPU torch tensors, float32, float16 or bfloat16 (torch), any shape (read
in C order); float32 data is read in place, float16/bfloat16 widened. A list of per-rank tensors,
or one array whose first axis is the rank. Results are float32 NumPy arrays, one per rank.

Errors: ``ValueError`` for bad input (carrying ccsim's message), ``RuntimeError`` otherwise.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from . import _core

__all__ = ["schemes", "collectives", "scheme_label", "set_threads", "threads", "allreduce", "Collective", "Result", "vnmse", "ddp_buckets", "load_dump",
           "Dump", "layer_shapes"]


def schemes() -> list[dict]:
    """Every registered compression scheme (what ``ccsim list`` prints), as dicts: name,
    description, unbiased, determinism, params (name, description, default, min, max, choices,
    power_of_two)."""
    return _core.schemes()


def scheme_label(scheme: str, params: dict | None = None) -> str:
    """The name ccsim gives a compression entry without a ``label``: the scheme plus its non-default
    parameters ("dynamiq(budget=3)"), as in every output of ``ccsim run``."""
    return _core.scheme_label(scheme, dict(params or {}))


def set_threads(n: int) -> None:
    """Worker threads the numerics use (default: one per core, or CCSIM_THREADS). Results are byte-identical
    whatever the count; a multi-process run on one machine (a DDP job) may want 1 per process."""
    _core.set_threads(int(n))


def threads() -> int:
    """Worker threads the numerics use."""
    return _core.threads()


def collectives() -> list[dict]:
    """Every collective (operation, algorithm, description), as ``ccsim list`` prints them."""
    return _core.collectives()


# ---- tensors -------------------------------------------------------------------------------------


def _torch_buffer(t: Any) -> tuple[Any, str]:
    import torch  # only when a torch tensor was given

    if t.device.type != "cpu":
        raise ValueError(f"tensors: expected CPU tensors, got one on {t.device} (move it with .cpu())")
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype == torch.float32:
        return t.numpy(), "float32"
    if t.dtype == torch.float16:
        return t.numpy(), "float16"
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bfloat16"
    raise ValueError(f"tensors: expected float32, float16 or bfloat16, got {t.dtype}")


def _numpy_buffer(a: Any) -> tuple[Any, str]:
    import numpy as np

    a = np.ascontiguousarray(a)
    if a.dtype == np.float32:
        return a, "float32"
    if a.dtype == np.float16:
        return a, "float16"
    raise ValueError(f"tensors: expected float32 or float16 arrays (bfloat16 as torch tensors), got {a.dtype}")


def _buffers(tensors: Any) -> tuple[list, str]:
    """Per-rank buffers and their common dtype."""
    if type(tensors).__module__.startswith(("numpy", "torch")) and getattr(tensors, "ndim", 0) >= 2:
        tensors = [tensors[r] for r in range(tensors.shape[0])]
    if not isinstance(tensors, (list, tuple)):
        raise ValueError("tensors: expected a list of per-rank tensors or an array whose first axis is the rank")
    out, dtypes = [], set()
    for t in tensors:
        if type(t).__module__.startswith("torch"):
            b, d = _torch_buffer(t)
        else:
            b, d = _numpy_buffer(t)
        out.append(b)
        dtypes.add(d)
    if len(dtypes) > 1:
        raise ValueError(f"tensors: expected one dtype for every rank, got {sorted(dtypes)}")
    return out, dtypes.pop() if dtypes else "float32"


def layer_shapes(layers: Iterable[Any] | None) -> list[tuple[int, int]]:
    """A layer layout as (rows, cols) pairs, from entry counts, shapes, or dicts with a "shape" (a
    dump's layers, or ``[{"name": n, "shape": list(p.shape)} for n, p in model.named_parameters()]``).
    A shape's first axis gives the rows and the rest the columns, as for gradient dumps."""
    if layers is None:
        return []
    out = []
    for i, layer in enumerate(layers):
        if isinstance(layer, dict):
            layer = layer.get("shape")
        if isinstance(layer, int):
            shape = [layer]
        else:
            try:
                shape = [int(d) for d in layer]
            except TypeError:
                raise ValueError(f"layers[{i}]: expected an entry count, a shape or a dict with a 'shape', "
                                 f"got {layer!r}") from None
        if any(d < 1 for d in shape):
            raise ValueError(f"layers[{i}]: expected positive dimensions, got {tuple(shape)}")
        count = math.prod(shape)
        rows = shape[0] if shape else 1
        out.append((rows, count // rows if rows else 0))
    return out


# ---- collectives ---------------------------------------------------------------------------------


class Result:
    """What one round gave: ``outputs`` (one float32 array per rank, what each rank ends with) and
    the statistics ``ccsim vnmse`` reports for it.

    vnmse: mean over ranks of |X - X_r|^2 / |X|^2 (X the exact result); rank_vnmse, vnmse_max_rank;
    mse: mean over ranks of |X - X_r|^2 / entries; bits_per_entry: one rank's tensor encoded once
    plus the metadata phase, in bits per entry, and its parts payload_bits_per_entry (the entries'
    codes), metadata_bits_per_entry (scales, norms sent with them) and plan_bits_per_entry (the
    metadata phase); plan_bytes_per_rank: the metadata phase's bytes;
    tensor_wire_bytes; wire_bytes: every transfer of the collective; decisions: what the scheme's
    controller fixed this round ({"quantity", "value", "detail"}); layer_vnmse (with layers, on an
    all-reduce); hop_vnmse (with hop_errors=True: entry k-1 for messages carrying k ranks'
    contributions, None where there was none); round: the round's number.
    """

    def __init__(self, fields: dict) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return (f"ccsim.Result(round={self.round}, ranks={len(self.outputs)}, vnmse={self.vnmse:.6g}, "
                f"bits_per_entry={self.bits_per_entry:.4g})")


class Collective:
    """A compression scheme on a collective, kept across rounds as training keeps it: error
    feedback, warm starts and controllers (OmniReduce's k, MX's mu, DynamiQ's per-round search,
    EDGC's windows) carry over, and round k draws round k's random numbers. The group's size and
    the tensor's length are fixed by the first call of step().

        c = ccsim.Collective("dynamiq", {"budget": 4}, collective="ring")
        for grads in rounds:            # grads: one tensor per rank
            r = c.step(grads)
            use(r.outputs[rank])
        c.decisions                      # what the controller decided in the last round
    """

    def __init__(self, scheme: str = "dynamiq", params: dict | None = None, collective: str = "ring",
                 op: str = "allreduce", seed: int = 0, gpus_per_node: int = 1, segments: int = 1,
                 layers: Iterable[Any] | None = None) -> None:
        if not isinstance(scheme, str):
            raise ValueError(f"scheme: expected a name (see ccsim.schemes()), got {scheme!r}")
        if params is not None and not isinstance(params, dict):
            raise ValueError(f"params: expected a dict of the scheme's parameters, got {params!r}")
        _core.check_scheme(scheme, dict(params or {}))
        for name, value, low, high in (("seed", seed, 0, 2**64 - 1), ("gpus_per_node", gpus_per_node, 1, 2**20),
                                       ("segments", segments, 1, 2**16)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name}: expected an integer in [{low}, {high}], got {value!r}")
        self.scheme, self.params, self.collective, self.op = scheme, dict(params or {}), collective, op
        self.seed, self.gpus_per_node, self.segments = int(seed), int(gpus_per_node), int(segments)
        self.layers = layer_shapes(layers)
        self._session = None
        self.decisions: list[dict] = []

    def _open(self, ranks: int, elements: int) -> None:
        self._session = _core.Session(self.scheme, self.params, self.op, self.collective, ranks, elements,
                                      self.seed, self.gpus_per_node, self.segments, self.layers)

    def step(self, tensors: Any, hop_errors: bool = False) -> Result:
        """Runs the next round on one tensor per rank."""
        buffers, dtype = _buffers(tensors)
        if self._session is None:
            if len(buffers) < 2:
                raise ValueError(f"tensors: expected one tensor per rank, at least 2, got {len(buffers)}")
            self._open(len(buffers), int(buffers[0].size))
        result = Result(self._session.run(buffers, dtype, bool(hop_errors)))
        self.decisions = result.decisions
        return result

    @property
    def round(self) -> int:
        """The number of the next round."""
        return self._session.round if self._session is not None else 0

    @property
    def resolved_params(self) -> dict:
        """The parameters with their defaults filled in (after the first step)."""
        if self._session is None:
            raise ValueError("resolved_params: known after the first step()")
        return self._session.resolved_params

    @property
    def unbiased(self) -> bool:
        return self._session.unbiased if self._session is not None else \
            next(s["unbiased"] for s in schemes() if s["name"] == self.scheme)


def allreduce(tensors: Any, scheme: str = "dynamiq", params: dict | None = None, collective: str = "ring",
              op: str = "allreduce", seed: int = 0, round: int = 0, gpus_per_node: int = 1,  # noqa: A002
              segments: int = 1, layers: Iterable[Any] | None = None, hop_errors: bool = False) -> Result:
    """One compressed collective on one tensor per rank, from a fresh scheme instance: rounds
    0 .. round-1 run on the same tensors first (as ``ccsim vnmse --warmup ROUND``), and the result is
    round ``round``'s. Bit-identical to ``ccsim vnmse`` on the same data, seed and round.
    ``op`` is the operation (allreduce, reduce_scatter, allgather, ...), ``collective`` its
    algorithm (ring, butterfly, ...; see collectives())."""
    if int(round) < 0:
        raise ValueError(f"round: expected 0 or more, got {round}")
    c = Collective(scheme, params, collective, op, seed, gpus_per_node, segments, layers)
    for _ in range(int(round)):
        c.step(tensors)
    return c.step(tensors, hop_errors)


def vnmse(gradients: str | None = None, algos: Sequence[str] = (), **options: Any) -> dict:
    """``ccsim vnmse`` as data. The command's options as keyword arguments (gradients, synthetic,
    structure, algos, params, operation, collective, ranks, steps, seeds, warmup, seed,
    gpus_per_node, segments, max_elements, bucket, ddp_bucket, ddp_first_bucket); returns
    {"rows": [...], "text", "csv", "gradients", "collective", "sampling", "ranks", "elements",
    "layer_names"} with one row per scheme and step (the CSV's overall columns, per layer and per
    hop depth as lists)."""
    if isinstance(algos, str):
        algos = [algos]
    if gradients is not None:
        options["gradients"] = str(gradients)
    return _core.vnmse(algos=list(algos), **options)


def ddp_buckets(sizes: Sequence[int], bucket_cap: int = 25 * 1024 * 1024, first_bucket_cap: int = 0,
                bytes_per_param: int = 4) -> list[list[int]]:
    """PyTorch DDP's gradient buckets for layers of ``sizes`` entries (model order): each bucket's
    layer indices in backward order, buckets in the order DDP fills and numbers them (bucket 0
    holds the last layers). ``first_bucket_cap`` 0: as the others."""
    return _core.ddp_buckets(list(sizes), int(bucket_cap), int(first_bucket_cap), int(bytes_per_param))


class Dump:
    """A ccsim gradient dump (manifest.json and one file per worker): ``info`` (workers, elements,
    steps, layers, model, dataset) and each worker's flattened gradient as float32."""

    def __init__(self, path: str) -> None:
        self._dump = _core.Dump(str(path))
        self.info = self._dump.info()
        self.workers, self.elements = self.info["workers"], self.info["elements"]
        self.steps, self.layers = self.info["steps"], self.info["layers"]

    def worker(self, worker: int, step_index: int = 0):
        """Worker ``worker``'s gradient at the dump's ``step_index``-th step."""
        return self._dump.worker(int(worker), int(step_index))

    def tensors(self, step_index: int = 0, ranks: int | None = None) -> list:
        """One tensor per rank at a step: rank r reads worker r mod workers (as ``ccsim vnmse``)."""
        ranks = self.workers if ranks is None else int(ranks)
        per_worker = [self.worker(w, step_index) for w in range(min(ranks, self.workers))]
        return [per_worker[r % self.workers] for r in range(ranks)]


def load_dump(path: str) -> Dump:
    """Opens a gradient dump directory (or its manifest.json)."""
    return Dump(path)
