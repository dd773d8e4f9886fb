"""ccsim.torch: the DDP communication hook in a real 2-process gloo run, SimulatedDDP, and gradient
dumps written from a model and read back by the ccsim binary and the module."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

try:
    import torch
    from torch import nn

    import ccsim.torch
except ImportError:  # Debian's python3-torch is installed by tools/setup.sh; without it these cases skip
    torch = None

import ccsim

HERE = Path(__file__).resolve().parent
CCSIM_BIN = os.environ.get("CCSIM_BIN", str(HERE.parents[1] / "build" / "tools" / "ccsim"))


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_ddp(scheme: str, tmp: Path, world: int = 2) -> list[dict]:
    """Runs ddp_worker.py on `world` processes; returns each rank's pickled record."""
    port = free_port()
    outs = [tmp / f"{scheme}-{r}.pkl" for r in range(world)]
    procs = [subprocess.Popen([sys.executable, str(HERE / "ddp_worker.py"), str(r), str(world), port, scheme,
                               str(outs[r])], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        if p.returncode != 0:
            raise AssertionError(f"ddp_worker.py ({scheme}) failed:\n{out.decode()}")
    return [pickle.loads(o.read_bytes()) for o in outs]


COMPRESSED = ("dynamiq", "mxfp8", "powersgd")


def bits(t) -> np.ndarray:
    return np.asarray(t, dtype=np.float32).view(np.uint32)


@unittest.skipIf(torch is None, "needs python3-torch")
class CommHook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        tmp = Path(cls.tmp.name)
        cls.runs = {scheme: run_ddp(scheme, tmp) for scheme in ("none", "fp32") + COMPRESSED}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_fp32_scheme_matches_plain_ddp(self):
        # Two ranks: DDP sums a/2 + b/2, the hook (a + b) / 2; halving is exact, so the two agree
        # to the bit unless a product underflows; allow fp32 rounding of a 2-term sum anyway.
        for rank in range(2):
            for step, (plain, hooked) in enumerate(zip(self.runs["none"][rank]["grads"],
                                                       self.runs["fp32"][rank]["grads"])):
                for a, b in zip(plain, hooked):
                    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=2 * np.finfo(np.float32).eps *
                                               float(a.abs().max()), err_msg=f"rank {rank} step {step}")

    def test_compressed_buckets_match_the_module_bit_for_bit(self):
        shapes = [list(g.shape) for g in self.runs["none"][0]["grads"][0]]
        for scheme in COMPRESSED:
            runs = self.runs[scheme]
            calls = [run["calls"] for run in runs]
            self.assertEqual(len(calls[0]), len(calls[1]))
            self.assertGreater(len({call["index"] for call in calls[0]}), 1)  # several buckets
            for rank in range(2):
                replay: dict = {}
                for k, call in enumerate(calls[rank]):
                    where = f"{scheme} rank {rank} step {call['step']} bucket {call['index']}"
                    # The hook gathered every rank's own local bucket, in rank order.
                    for r in range(2):
                        self.assertEqual((calls[r][k]["step"], calls[r][k]["index"]), (call["step"], call["index"]))
                        self.assertTrue(torch.equal(call["gathered"][r], calls[r][k]["local"]), where)
                    key = (call["index"], call["local"].numel())
                    if key not in replay:
                        replay[key] = ccsim.Collective(scheme, seed=ccsim.torch.bucket_seed(5, call["index"]),
                                                       layers=[shapes[i] for i in call["params"]])
                    want = torch.from_numpy(replay[key].step(call["gathered"]).outputs[rank]).div_(2)
                    self.assertTrue(np.array_equal(bits(want), bits(call["out"])), where)
                    # DDP put exactly the hook's result into the parameters' gradients.
                    got = torch.cat([runs[rank]["grads"][call["step"]][i].reshape(-1) for i in call["params"]])
                    self.assertTrue(np.array_equal(bits(want), bits(got)), where)
                self.assertEqual(runs[rank]["stats"], sorted({call["index"] for call in calls[rank]}))
            # Compression changed the training.
            self.assertFalse(torch.equal(runs[0]["grads"][-1][0], self.runs["none"][0]["grads"][-1][0]), scheme)

    def test_the_hook_passes_the_buckets_layers(self):
        # PowerSGD compresses matrices only: as one row vector its result would be exact.
        call = next(c for c in self.runs["powersgd"][0]["calls"] if len(c["params"]) > 1)
        flat = ccsim.allreduce(call["gathered"], "powersgd", seed=ccsim.torch.bucket_seed(5, call["index"]))
        self.assertEqual(flat.vnmse, 0.0)
        self.assertFalse(np.array_equal(bits(torch.from_numpy(flat.outputs[0]).div_(2)), bits(call["out"])))


def small_model() -> "nn.Module":
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def worker_loss(model, w: int, step: int):
    gen = torch.Generator().manual_seed(1000 * step + w)
    x = torch.randn(8, 16, generator=gen)
    y = torch.randint(0, 4, (8,), generator=gen)
    return nn.functional.cross_entropy(model(x), y)


@unittest.skipIf(torch is None, "needs python3-torch")
class Simulated(unittest.TestCase):
    def test_fp32_applies_the_mean_of_the_workers_gradients(self):
        model = small_model()
        ddp = ccsim.torch.SimulatedDDP(model, workers=4, scheme="fp32", bucket_cap_mb=0.001,
                                       first_bucket_cap_mb=0.0005)
        self.assertGreater(len(ddp.buckets), 1)
        ddp.backward(lambda w: worker_loss(model, w, 0))
        local = torch.stack(ddp.local_by_parameter())
        mean = local.double().mean(dim=0)
        applied = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double()
        bound = 4 * np.finfo(np.float32).eps * float(local.abs().sum(dim=0).max())
        self.assertLessEqual(float((applied - mean).abs().max()), bound)
        self.assertTrue(ddp.ranks_agree)

    def test_dynamiq_is_deterministic_and_is_the_module_round_after_round(self):
        def train():
            model = small_model()
            ddp = ccsim.torch.SimulatedDDP(model, workers=3, scheme="dynamiq", params={"budget": 4}, seed=9,
                                           bucket_cap_mb=0.001, first_bucket_cap_mb=0.0005)
            manual = [ccsim.Collective("dynamiq", {"budget": 4}, seed=ccsim.torch.bucket_seed(9, b),
                                       layers=[list(ddp.params[i].shape) for i in layers])
                      for b, layers in enumerate(ddp.buckets)]
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                ddp.backward(lambda w: worker_loss(model, w, step))
                for b, layers in enumerate(ddp.buckets):
                    want = torch.from_numpy(manual[b].step([g[b] for g in ddp.last_local]).outputs[0]).div_(3)
                    got = torch.cat([ddp.params[i].grad.reshape(-1) for i in layers])
                    self.assertTrue(np.array_equal(bits(want), bits(got)), f"step {step} bucket {b}")
                opt.step()
            return [p.detach().clone() for p in model.parameters()], ddp

        first, ddp = train()
        second, _ = train()
        for a, b in zip(first, second):
            self.assertTrue(np.array_equal(bits(a), bits(b)))
        self.assertEqual(len(ddp.stats), len(ddp.buckets))
        self.assertTrue(all(s["vnmse"] > 0 and s["round"] == 2 for s in ddp.stats))

    def test_bad_arguments_raise_value_errors(self):
        with self.assertRaisesRegex(ValueError, "nosuch"):
            ccsim.torch.SimulatedDDP(small_model(), workers=2, scheme="nosuch")
        with self.assertRaisesRegex(ValueError, "workers"):
            ccsim.torch.SimulatedDDP(small_model(), workers=1)
        with self.assertRaisesRegex(ValueError, "params"):
            ccsim.torch.comm_hook("int8", params=[1])
        with self.assertRaisesRegex(ValueError, "nosuch"):
            ccsim.torch.comm_hook("nosuch")
        ddp = ccsim.torch.SimulatedDDP(small_model(), workers=3, scheme="fp32")
        with self.assertRaisesRegex(ValueError, "worker_grads: expected 3 workers, got 2"):
            ddp.synchronize([ddp.local_gradients()] * 2)
        with tempfile.TemporaryDirectory() as tmp:
            writer = ccsim.torch.GradientDumpWriter(tmp, small_model().named_parameters(), workers=3)
            with self.assertRaisesRegex(ValueError, "worker_grads: expected 3 workers' gradients, got 2"):
                writer.add_step(0, [torch.zeros(676)] * 2)


@unittest.skipIf(torch is None, "needs python3-torch")
class Dumps(unittest.TestCase):
    def grads(self, model, workers=3):
        out = []
        for w in range(workers):
            model.zero_grad()
            worker_loss(model, w, 0).backward()
            out.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone())
        return out

    def test_dumps_are_read_by_ccsim_vnmse_and_the_module(self):
        model = small_model()
        grads = self.grads(model)
        with tempfile.TemporaryDirectory() as tmp:
            for dtype in ("F32", "BF16"):
                out = Path(tmp) / dtype
                ccsim.torch.dump_gradients(model, grads, out, step=7, dtype=dtype, dataset="random", loss=1.5)
                run = subprocess.run([CCSIM_BIN, "vnmse", "--gradients", str(out), "--algo", "int8", "--csv", "-"],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("3 workers", run.stdout)
                dump = ccsim.load_dump(out)
                self.assertEqual([layer["name"] for layer in dump.layers], [n for n, _ in model.named_parameters()])
                self.assertEqual(dump.steps, [{"step": 7, "tensor": "step7", "loss": 1.5}])
                for w, g in enumerate(grads):
                    want = g if dtype == "F32" else g.to(torch.bfloat16).float()
                    self.assertTrue(np.array_equal(bits(dump.worker(w, 0)), bits(want)), f"{dtype} worker {w}")

    def test_per_parameter_lists_and_bad_input(self):
        model = small_model()
        per_param = []
        for w in range(2):
            model.zero_grad()
            worker_loss(model, w, 0).backward()
            per_param.append([p.grad.clone() for p in model.parameters()])
        with tempfile.TemporaryDirectory() as tmp:
            ccsim.torch.dump_gradients(model, per_param, Path(tmp) / "d")
            self.assertEqual(ccsim.load_dump(Path(tmp) / "d").workers, 2)
            with self.assertRaisesRegex(ValueError, "entries"):
                ccsim.torch.dump_gradients(model, [torch.zeros(5), torch.zeros(5)], Path(tmp) / "e")
            with self.assertRaisesRegex(ValueError, "finite"):
                bad = [t.clone() for t in self.grads(model, 2)]
                bad[1][3] = float("nan")
                ccsim.torch.dump_gradients(model, bad, Path(tmp) / "f")
            with self.assertRaisesRegex(ValueError, "dtype"):
                ccsim.torch.dump_gradients(model, per_param, Path(tmp) / "g", dtype="F64")
            self.assertFalse((Path(tmp) / "e").exists() or (Path(tmp) / "f").exists())


if __name__ == "__main__":
    unittest.main()
