"""Time-to-accuracy: proxy training through ccsim's compressed collectives (ccsim.proxy), the
convergence model's fit (ccsim.tta), and a scenario's proxy curves turned into tta.csv by the ccsim
binary. A small digits proxy keeps it under a minute."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

try:
    import torch  # noqa: F401

    from ccsim import proxy, tta
except ImportError:  # Debian's python3-torch is installed by tools/setup.sh; without it these cases skip
    proxy = None
    from ccsim import tta

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
CCSIM_BIN = os.environ.get("CCSIM_BIN", str(SOURCE / "build" / "tools" / "ccsim"))
DIGITS = Path("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")


def small(**kw) -> "proxy.ProxyConfig":
    return proxy.ProxyConfig(task="digits", workers=4, rounds=kw.pop("rounds", 40), eval_every=10, **kw)


@unittest.skipIf(proxy is None or not DIGITS.is_file(), "needs python3-torch and python3-sklearn's digits")
class ProxyTraining(unittest.TestCase):
    def test_deterministic_for_a_seed(self):
        a = proxy.write_curves(proxy.train(small(), proxy.Entry("int8")))
        b = proxy.write_curves(proxy.train(small(), proxy.Entry("int8")))
        self.assertEqual(a, b)
        other = proxy.write_curves(proxy.train(small(seed=2), proxy.Entry("int8")))
        self.assertNotEqual(a, other)

    def test_training_sees_the_collectives_error(self):
        exact = proxy.train(small(), proxy.Entry("fp32"))
        lossy = proxy.train(small(), proxy.Entry("qsgd", {"bits": 4}))
        self.assertLess(max(r["vnmse"] for r in exact[1:]), 1e-10)  # fp32's ring sum: rounding only
        self.assertGreater(min(r["vnmse"] for r in lossy[1:]), 0.1)  # QSGD's variance on small buckets
        self.assertAlmostEqual(lossy[-1]["bits_per_entry"], 4.0 + 32 / 512, delta=0.2)
        # Same data and initial weights: round 0 is the same model, later rounds differ.
        self.assertEqual(exact[0]["val_loss"], lossy[0]["val_loss"])
        self.assertNotEqual(exact[-1]["val_loss"], lossy[-1]["val_loss"])
        # Both learn: held-out accuracy far above chance (10%) after 40 rounds.
        self.assertGreater(exact[-1]["val_accuracy"], 0.6)
        self.assertGreater(lossy[-1]["val_accuracy"], 0.5)

    def test_weight_quantization_changes_the_trajectory(self):
        qw = proxy.train(small(rounds=20), proxy.Entry("fp32", weights="sdp4bit_qw"))
        qwd = proxy.train(small(rounds=20), proxy.Entry("fp32", weights="sdp4bit_qwd"))
        plain = proxy.train(small(rounds=20), proxy.Entry("fp32"))
        self.assertEqual(qw[0]["label"], "fp32+sdp4bit_qw")
        # Weight differences lose less than the weights themselves: qWD stays closer to plain SGD.
        self.assertLess(abs(qwd[-1]["val_loss"] - plain[-1]["val_loss"]),
                        abs(qw[-1]["val_loss"] - plain[-1]["val_loss"]))

    def test_proxy_params_replace_an_entrys_own_under_its_label(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            scenario = json.loads((SOURCE / "scenarios/tta/digits-proxy-ring8.json").read_text())
            scenario["workload"]["trace"] = str(SOURCE / "traces/models/resnet50-layers.json")
            scenario["compression"] = [{"scheme": "fp32"}, {"scheme": "powersgd", "params": {"rank": 64}}]
            scenario["convergence"]["curves"] = "curves.csv"
            scenario["convergence"]["proxy"].update({"rounds": 10, "workers": 4, "seeds": 1,
                                                     "params": {"powersgd(rank=64)": {"rank": 1}}})
            path = tmp / "s.json"
            path.write_text(json.dumps(scenario))
            check = subprocess.run([CCSIM_BIN, "validate", str(path)], capture_output=True, text=True)
            self.assertEqual(check.returncode, 2, check.stderr)  # the curves are not written yet
            self.assertEqual(check.stderr.count("\n"), 1, check.stderr)
            self.assertIn("/convergence/curves", check.stderr)
            proxy.run_scenario(path, log=None)
            rows = [r for r in csv.DictReader((tmp / "curves.csv").read_text().splitlines())
                    if r["label"] == "powersgd(rank=64)"]
            config = proxy.ProxyConfig(**{**scenario["convergence"]["proxy"], "params": {}})
            direct = proxy.train(config, proxy.Entry("powersgd", {"rank": 1}))
            self.assertEqual(len(rows), len(direct))
            for r, d in zip(rows, direct):
                self.assertAlmostEqual(float(r["val_loss"]), d["val_loss"], places=5)
                if d["round"]:
                    self.assertAlmostEqual(float(r["bits_per_entry"]), d["bits_per_entry"], places=4)
            self.assertEqual(subprocess.run([CCSIM_BIN, "validate", str(path)], capture_output=True).returncode, 0)

    def test_scenario_curves_become_tta(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            scenario = json.loads((SOURCE / "scenarios/tta/digits-proxy-ring8.json").read_text())
            scenario["workload"]["trace"] = str(SOURCE / "traces/models/resnet50-layers.json")
            scenario["compression"] = [{"scheme": "fp32"}, {"scheme": "int8"}, {"scheme": "thc"}]
            scenario["convergence"]["curves"] = "curves.csv"
            scenario["convergence"]["proxy"].update({"rounds": 60, "workers": 4})
            scenario["cluster"]["nodes"] = 4
            path = tmp / "s.json"
            path.write_text(json.dumps(scenario))
            proxy.run_scenario(path, log=None)
            run = subprocess.run([CCSIM_BIN, "run", str(path), "--out", str(tmp / "out")], capture_output=True,
                                 text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("time to accuracy", run.stdout)
            rows = list(csv.DictReader((tmp / "out" / "tta.csv").read_text().splitlines()))
            self.assertEqual(len(rows), 3 * 3)
            curves = tta.read_curves(tmp / "curves.csv", "accuracy")
            base_final = curves["fp32"].values[-1]
            results = {r["label"]: r for r in csv.DictReader((tmp / "out" / "results.csv").read_text().splitlines())}
            for r in rows:
                goal = float(r["target"]) * base_final
                self.assertAlmostEqual(float(r["goal"]), goal, places=6)
                measured = tta.rounds_to_target(curves[r["label"]], goal, "accuracy")
                if measured is None:
                    self.assertEqual(r["reached"], "false")
                    continue
                self.assertEqual(float(r["rounds"]), measured)
                round_s = float(results[r["label"]]["round_s"])
                self.assertAlmostEqual(float(r["time_s"]), measured * round_s, places=6)
                if r["label"] == "fp32":
                    self.assertEqual(float(r["ratio"]), 1.0)
            self.assertTrue((tmp / "out" / "curves.csv").is_file())


class ModelFit(unittest.TestCase):
    """The fit recovers a model whose curves are known exactly."""

    @staticmethod
    def curves(c: float, d: float, vs: dict[str, float]) -> dict[str, tta.Curve]:
        # The baseline's loss L(r) = 1 + 10 / (1 + r / 10); an entry of vNMSE v follows L(r) * f(v),
        # f(v) = 1 + c v^d, sampled every round.
        out = {}
        for label, v in vs.items():
            f = 1 + c * v ** d
            rounds = list(range(0, 4001))
            out[label] = tta.Curve(label, rounds, [(1 + 10 / (1 + r / 10)) * f for r in rounds], v,
                                   "fp32" if label == "base" else "dynamiq")
        return out

    def test_recovers_the_model_and_predicts_held_out(self):
        vs = {"base": 0.0, "a": 0.0001, "b": 0.0004, "c": 0.0009, "d": 0.0016, "held": 0.000625}
        curves = self.curves(0.5, 0.5, vs)
        model = tta.fit(curves, "base", ["held"], "loss", [1.05, 1.02, 1.01],
                        {label: c.scheme for label, c in curves.items()})
        fam = model["families"]["dynamiq"]
        self.assertAlmostEqual(fam["c"], 0.5, delta=1e-9)
        self.assertAlmostEqual(fam["d"], 0.5, delta=1e-9)
        final = curves["base"].values[-1]
        held = next(r for r in model["entries"] if r["label"] == "held")
        for t in held["targets"][:2]:
            measured = tta.rounds_to_target(curves["held"], t["target"] * final, "loss")
            self.assertEqual(t["measured"], measured)
            self.assertLess(abs(t["predicted"] - measured), 1.0, t)  # interpolated, within one round
        # f(held) = 1.0125 misses 101%: not reached, and predicted so.
        self.assertIsNone(held["targets"][2]["measured"])
        self.assertIsNone(held["targets"][2]["predicted"])


if __name__ == "__main__":
    unittest.main()
