"""The ccsim Python module against the ccsim command and against exact arithmetic.

Bit identity: for every registered scheme, ccsim.allreduce on the shipped dump's tensors gives the
same doubles as the C++ `ccsim vnmse` path (ccsim.vnmse), and the numbers the ccsim binary writes to
vnmse.csv, as printed. Rounds: a Collective stepped k + 1 times equals allreduce(round=k) and
`vnmse --warmup k`. Inputs: fp16 and bf16 give what their widened fp32 values give; the caller's
arrays are never written. Errors: ValueError with ccsim's message, the interpreter intact.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

import ccsim

SOURCE = Path(os.environ.get("CCSIM_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CCSIM_BIN = os.environ.get("CCSIM_BIN", str(SOURCE / "build" / "tools" / "ccsim"))
DUMP = SOURCE / "traces" / "data" / "gpt-bpe"
STEP = 200

try:
    import torch
except ImportError:  # the torch cases run where Debian's python3-torch is installed (tools/setup.sh)
    torch = None


def normal_tensors(ranks: int, n: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(ranks)]


class Listing(unittest.TestCase):
    def test_schemes_and_collectives_are_what_ccsim_list_prints(self):
        text = subprocess.run([CCSIM_BIN, "list"], check=True, capture_output=True, text=True).stdout
        for s in ccsim.schemes():
            self.assertIn(f"  {s['name']:<12} {s['description']}\n", text)
            for p in s["params"]:
                self.assertIn(p["description"], text)
        for c in ccsim.collectives():
            self.assertIn(f"  {c['operation']:<15} {c['algorithm']:<18} {c['description']}\n", text)
        names = [s["name"] for s in ccsim.schemes()]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("dynamiq", names)
        self.assertTrue(next(s for s in ccsim.schemes() if s["name"] == "qsgd")["unbiased"])
        self.assertFalse(next(s for s in ccsim.schemes() if s["name"] == "bf16")["unbiased"])


class AgainstVnmse(unittest.TestCase):
    """Every registered scheme on the shipped dump, three ways."""

    @classmethod
    def setUpClass(cls):
        cls.dump = ccsim.load_dump(DUMP)
        cls.step_index = [s["step"] for s in cls.dump.steps].index(STEP)
        cls.tensors = cls.dump.tensors(cls.step_index)
        cls.names = [s["name"] for s in ccsim.schemes()]
        cls.report = ccsim.vnmse(gradients=str(DUMP), algos=cls.names, steps=[STEP])
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "vnmse.csv"
            cmd = [CCSIM_BIN, "vnmse", "--gradients", str(DUMP), "--steps", str(STEP), "--csv", str(out)]
            for name in cls.names:
                cmd += ["--algo", name]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            with open(out, newline="") as f:
                cls.cli_rows = {r["scheme"]: r for r in csv.DictReader(f) if r["kind"] == "overall"}

    def test_every_scheme_is_bit_identical_to_ccsim_vnmse(self):
        self.assertEqual(len(self.report["rows"]), len(self.names))
        for row in self.report["rows"]:
            with self.subTest(scheme=row["scheme"]):
                got = ccsim.allreduce(self.tensors, scheme=row["scheme"], layers=self.dump.layers)
                for key in ("vnmse", "vnmse_max_rank", "mse", "bits_per_entry", "plan_bytes_per_rank", "wire_bytes"):
                    self.assertEqual(getattr(got, key), row[key], key)
                self.assertEqual(got.layer_vnmse, row["layer_vnmse"])
                cli = self.cli_rows[row["scheme"]]
                self.assertEqual(format(got.vnmse, ".9g"), cli["vnmse"])
                self.assertEqual(format(got.bits_per_entry, ".9g"), cli["bits_per_entry"])
                self.assertEqual(str(got.wire_bytes), cli["wire_bytes"])

    def test_hop_errors_are_the_detail_of_vnmse(self):
        got = ccsim.allreduce(self.tensors, scheme="int8", layers=self.dump.layers, hop_errors=True)
        row = next(r for r in self.report["rows"] if r["scheme"] == "int8")
        self.assertEqual(got.hop_vnmse, row["hop_vnmse"])
        self.assertEqual(len(got.hop_vnmse), self.dump.workers)
        self.assertIsNone(ccsim.allreduce(self.tensors[:2], scheme="int8").hop_vnmse)


class Rounds(unittest.TestCase):
    def test_stepping_equals_allreduce_at_a_round_and_vnmse_warmup(self):
        dump = ccsim.load_dump(DUMP)
        tensors = dump.tensors(0)
        for scheme in ("omnireduce", "mxfp8", "dynamiq"):
            with self.subTest(scheme=scheme):
                c = ccsim.Collective(scheme, layers=dump.layers, seed=3)
                rounds = [c.step(tensors) for _ in range(3)]
                self.assertEqual(c.round, 3)
                fresh = ccsim.allreduce(tensors, scheme=scheme, layers=dump.layers, seed=3, round=2)
                self.assertEqual(fresh.round, 2)
                for a, b in zip(rounds[2].outputs, fresh.outputs):
                    self.assertTrue(np.array_equal(a.view(np.uint32), b.view(np.uint32)))
                row = ccsim.vnmse(gradients=str(DUMP), algos=[scheme], steps=[dump.steps[0]["step"]], seed=3,
                                  warmup=2)["rows"][0]
                self.assertEqual(rounds[2].vnmse, row["vnmse"])
                # Round 0 and round 2 draw different random numbers (and OmniReduce's k moves).
                self.assertNotEqual(rounds[0].vnmse, rounds[2].vnmse)

    def test_controllers_decisions_are_readable(self):
        tensors = normal_tensors(4, 1 << 14)
        c = ccsim.Collective("omnireduce")
        c.step(tensors)
        self.assertEqual([d["quantity"] for d in c.decisions], ["k"])
        d = ccsim.Collective("dynamiq", {"budget": 3})
        r = d.step(tensors)
        self.assertTrue(r.decisions)
        self.assertEqual(d.resolved_params["budget"], 3)
        self.assertAlmostEqual(r.bits_per_entry, 3.0, delta=0.05)

    def test_error_feedback_carries_over(self):
        # PowerSGD keeps each rank's residual across rounds: with error feedback, the running sum of
        # the outputs catches up with the running sum of the exact results; without, it does not.
        rng = np.random.default_rng(5)
        tensors = [(rng.standard_normal((64, 4)) @ rng.standard_normal((4, 32))).astype(np.float32).ravel()
                   for _ in range(4)]
        exact = np.sum(tensors, axis=0, dtype=np.float64)

        def gap_after(rounds, feedback):
            c = ccsim.Collective("powersgd", {"rank": 2, "error_feedback": feedback}, layers=[(64, 32)])
            sent = sum(c.step(tensors).outputs[0].astype(np.float64) for _ in range(rounds))
            return np.linalg.norm(sent - rounds * exact) / np.linalg.norm(rounds * exact)

        self.assertLess(gap_after(12, True), 0.6 * gap_after(12, False))
        self.assertLess(gap_after(12, True), 0.7 * gap_after(1, True))


class Arithmetic(unittest.TestCase):
    def test_fp32_scheme_sums_exactly_on_integers(self):
        rng = np.random.default_rng(7)
        tensors = [rng.integers(-1000, 1000, 4099).astype(np.float32) for _ in range(6)]
        for collective in ("ring", "ring_bidir", "p2p"):
            r = ccsim.allreduce(tensors, scheme="fp32", collective=collective)
            exact = np.sum(tensors, axis=0)
            for out in r.outputs:
                self.assertTrue(np.array_equal(out, exact))
            self.assertEqual(r.vnmse, 0.0)
            self.assertEqual(r.bits_per_entry, 32.0)

    def test_reduce_scatter_gives_each_rank_its_shard(self):
        tensors = normal_tensors(4, 1024)
        r = ccsim.allreduce(tensors, scheme="fp32", op="reduce_scatter")
        self.assertLess(r.vnmse, 1e-12)
        self.assertEqual(len(r.outputs), 4)

    def test_inputs_are_read_in_place_and_never_written(self):
        tensors = normal_tensors(4, 3000)
        before = [t.copy() for t in tensors]
        r = ccsim.allreduce(tensors, scheme="int8")
        for a, b, out in zip(tensors, before, r.outputs):
            self.assertTrue(np.array_equal(a, b))
            self.assertFalse(np.shares_memory(a, out))
            self.assertEqual(out.dtype, np.float32)
        stacked = np.stack(tensors)
        s = ccsim.allreduce(stacked, scheme="int8")
        for a, b in zip(r.outputs, s.outputs):
            self.assertTrue(np.array_equal(a, b))

    def test_results_do_not_depend_on_the_thread_count(self):
        tensors = normal_tensors(4, 1 << 16)
        before = ccsim.threads()
        try:
            ccsim.set_threads(1)
            one = ccsim.allreduce(tensors, scheme="dynamiq")
            ccsim.set_threads(3)
            three = ccsim.allreduce(tensors, scheme="dynamiq")
        finally:
            ccsim.set_threads(before)
        self.assertEqual(one.vnmse, three.vnmse)
        for a, b in zip(one.outputs, three.outputs):
            self.assertTrue(np.array_equal(a.view(np.uint32), b.view(np.uint32)))
        with self.assertRaises(ValueError):
            ccsim.set_threads(0)

    def test_half_precision_inputs_give_what_their_fp32_values_give(self):
        half = [t.astype(np.float16) for t in normal_tensors(4, 2048)]
        a = ccsim.allreduce(half, scheme="mxfp8")
        b = ccsim.allreduce([h.astype(np.float32) for h in half], scheme="mxfp8")
        for x, y in zip(a.outputs, b.outputs):
            self.assertTrue(np.array_equal(x, y))

    @unittest.skipIf(torch is None, "needs python3-torch")
    def test_torch_tensors_of_every_dtype(self):
        base = [torch.from_numpy(t) for t in normal_tensors(4, 2048)]
        ref = ccsim.allreduce(base, scheme="dynamiq").outputs
        np_ref = ccsim.allreduce([t.numpy() for t in base], scheme="dynamiq").outputs
        for x, y in zip(ref, np_ref):
            self.assertTrue(np.array_equal(x, y))
        for dtype in (torch.float16, torch.bfloat16):
            low = [t.to(dtype) for t in base]
            a = ccsim.allreduce(low, scheme="dynamiq").outputs
            b = ccsim.allreduce([t.float() for t in low], scheme="dynamiq").outputs
            for x, y in zip(a, b):
                self.assertTrue(np.array_equal(x, y), dtype)


class BadInput(unittest.TestCase):
    def assert_value_error(self, fragment, fn, *args, **kwargs):
        with self.assertRaises(ValueError) as ctx:
            fn(*args, **kwargs)
        self.assertIn(fragment, str(ctx.exception))

    def test_bad_input_raises_value_error_naming_the_problem(self):
        t = normal_tensors(4, 1024)
        self.assert_value_error("nosuch", ccsim.allreduce, t, scheme="nosuch")
        self.assert_value_error("budget", ccsim.allreduce, t, scheme="dynamiq", params={"budget": 99})
        self.assert_value_error("nosuch", ccsim.allreduce, t, scheme="int8", collective="nosuch")
        self.assert_value_error("at least 2", ccsim.allreduce, t[:1], scheme="int8")
        self.assert_value_error("1024", ccsim.allreduce, t[:3] + [t[3][:10]], scheme="int8")
        self.assert_value_error("float64", ccsim.allreduce, [x.astype(np.float64) for x in t], scheme="int8")
        bad = [x.copy() for x in t]
        bad[2][17] = np.nan
        self.assert_value_error("tensors[2][17]", ccsim.allreduce, bad, scheme="int8")
        self.assert_value_error("power-of-two", ccsim.allreduce, normal_tensors(3, 64), scheme="int8",
                                collective="butterfly")
        self.assert_value_error("layers", ccsim.allreduce, t, scheme="powersgd", layers=[(10, 10)])
        self.assert_value_error("params", ccsim.Collective, "int8", params=[1, 2])
        self.assert_value_error("round", ccsim.allreduce, t, round=-1)
        self.assert_value_error("seed: expected an integer", ccsim.allreduce, t, seed=-1)
        self.assert_value_error("segments", ccsim.allreduce, t, segments=0)
        self.assert_value_error("layers[0]: expected positive dimensions, got (0, 5)", ccsim.allreduce, t,
                                layers=[(0, 5)])
        self.assert_value_error("mixes the tensor's entries", ccsim.allreduce, t, scheme="thc", op="allgather")
        c = ccsim.Collective("int8")
        c.step(t)
        self.assert_value_error("4 ranks of 1024", c.step, t[:3])
        self.assert_value_error("manifest", ccsim.load_dump, "/nonexistent-dump")
        self.assert_value_error("unknown option", ccsim.vnmse, gradients=str(DUMP), algos=["int8"], nosuch=1)
        self.assert_value_error("ranks: expected", ccsim.vnmse, gradients=str(DUMP), algos=["int8"], ranks=-3)
        self.assert_value_error("--steps", ccsim.vnmse, gradients=str(DUMP), algos=["int8"], steps=[7])
        # The interpreter is intact after all of these.
        self.assertEqual(ccsim.allreduce(t, scheme="fp32").round, 0)


class DocumentedColumns(unittest.TestCase):
    def test_vnmse_csv_columns_are_the_documented_ones(self):
        text = (SOURCE / "docs" / "compression.md").read_text(encoding="utf-8")
        section = text[text.index("### What `ccsim vnmse` reports: `vnmse.csv`"):]
        section = section[:section.index("\n### ")]
        documented = [line.split("|")[1].strip().strip("`") for line in section.splitlines()
                      if line.startswith("| `")]
        csv_text = ccsim.vnmse(synthetic="64", algos=["int8"])["csv"]
        self.assertEqual(documented, csv_text.splitlines()[0].split(","))


class ScriptsWithoutTorch(unittest.TestCase):
    def test_the_torch_scripts_name_the_interpreter_to_use(self):
        # A torch that cannot be imported, first on the path: what a Python without python3-torch sees.
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "torch").mkdir()
            (Path(tmp) / "torch" / "__init__.py").write_text("raise ImportError('no torch here', name='torch')\n")
            env = dict(os.environ, PYTHONPATH=tmp)
            for script in ("tools/profile_model.py", "tools/gradients/train_gpt.py"):
                run = subprocess.run([sys.executable, str(SOURCE / script), "--help"], capture_output=True, text=True,
                                     env=env)
                self.assertEqual(run.returncode, 2, script)
                self.assertIn(sys.executable, run.stderr)
                self.assertIn("python3-torch", run.stderr)
                self.assertIn(f"/usr/bin/python3 {script}", run.stderr)
                self.assertNotIn("Traceback", run.stderr)


class Buckets(unittest.TestCase):
    def test_ddp_buckets_cover_every_layer_once_from_the_last(self):
        sizes = [1000, 300_000, 5, 2_000_000, 7, 700_000]
        buckets = ccsim.ddp_buckets(sizes, bucket_cap=4 * 1_000_000, first_bucket_cap=4 * 500_000)
        flat = [layer for b in buckets for layer in b]
        self.assertEqual(sorted(flat), list(range(len(sizes))))
        self.assertEqual(flat, sorted(flat, reverse=True))
        self.assertEqual(buckets[0], [5])  # the first bucket's cap holds only the last layer


if __name__ == "__main__":
    unittest.main()
