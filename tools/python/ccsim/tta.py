"""Calibrating ccsim's convergence model on proxy curves (the ``ccsim.tta`` module; NumPy only).

The model (algorithms/convergence.hpp, docs/tta.md) maps a scheme's gradient vNMSE v to

    final metric     m(v) = m_base * (1 + s * c * v^d)         s = +1 for a loss, -1 for an accuracy
    rounds to t      R(v, t) = R_base(t) * (1 + a_t * v^b_t)    when m(v) reaches t, else not reached

``fit`` reads the curves ``python3 -m ccsim.proxy`` wrote (one per compression entry, the baseline
among them), fits c, d and every target's a_t, b_t on the entries it is told to fit, predicts the
held-back entries and reports how far each prediction is from what the proxy measured; the
calibration JSON carries the fit, its quality and its provenance, and ``ccsim run`` applies it
(``convergence.calibration``):

    /usr/bin/python3 -m ccsim.tta fit scenarios/tta/gpt-proxy-calibration.curves.csv --baseline fp32 \\
        --holdout "dynamiq(budget=4)" mxfp6 --out scenarios/tta/calibrations/gpt-ring8.json
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Curve", "read_curves", "rounds_to_target", "fit", "predict_rounds", "FORMAT"]

FORMAT = "ccsim-convergence-calibration"
DEFAULT_TARGETS = {"loss": [1.05, 1.02, 1.0], "accuracy": [0.99, 0.995, 1.0]}


@dataclass
class Curve:
    label: str
    rounds: list[int]
    values: list[float]
    vnmse: float  # mean over the run's rounds


def read_curves(path: Path, metric: str = "loss") -> dict[str, Curve]:
    """The curves of a proxy CSV by label (metric column val_loss or val_accuracy)."""
    column = "val_loss" if metric == "loss" else "val_accuracy"
    curves: dict[str, Curve] = {}
    vn: dict[str, list[float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            c = curves.setdefault(row["label"], Curve(row["label"], [], [], math.nan))
            c.rounds.append(int(row["round"]))
            c.values.append(float(row[column]))
            if int(row["round"]) > 0:
                vn.setdefault(row["label"], []).append(float(row["vnmse"]))
    for label, c in curves.items():
        c.vnmse = float(np.mean(vn[label])) if vn.get(label) else math.nan
    return curves


def meets(value: float, goal: float, metric: str) -> bool:
    slack = 1e-12 * abs(goal)
    return value <= goal + slack if metric == "loss" else value >= goal - slack


def rounds_to_target(c: Curve, goal: float, metric: str) -> int | None:
    """The first round whose value meets `goal` (as algo::rounds_to_target)."""
    for r, v in zip(c.rounds, c.values):
        if math.isfinite(v) and meets(v, goal, metric):
            return r
    return None


def _power_fit(v: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """a, b >= 0 minimizing sum ((1 + a v^b) - (1 + y))^2 / (1 + y)^2 over b in a grid (a closed form per b)."""
    best = (math.inf, 0.0, 1.0)
    w = 1.0 / (1.0 + y) ** 2
    for b in np.linspace(0.2, 2.0, 91):
        x = v ** b
        a = max(0.0, float(np.sum(w * x * y) / np.sum(w * x * x)))
        err = float(np.sum(w * (a * x - y) ** 2))
        if err < best[0]:
            best = (err, a, float(b))
    return best[1], best[2]


def predict_rounds(model: dict, v: float, target: float, vb: float = 0.0) -> float | None:
    """The model's rounds to `target` for vNMSE v against a baseline of vNMSE vb (None: the final
    metric, relative to the baseline's, misses it), as algo::ConvergenceModel::rounds_ratio."""
    sign = 1.0 if model["metric"] == "loss" else -1.0
    final = (lambda x: 1.0 + sign * model["final"]["c"] * max(x, 0.0) ** model["final"]["d"])
    if not meets(final(v) / final(vb), target, model["metric"]):
        return None
    t = next(x for x in model["targets"] if abs(x["target"] - target) <= 1e-12)
    slow = (lambda x: 1.0 + t["a"] * max(x, 0.0) ** t["b"])
    return t["baseline_rounds"] * slow(v) / slow(vb)


def fit(curves: dict[str, Curve], baseline: str, holdout: list[str], metric: str, targets: list[float]) -> dict:
    """Fits the model on every entry but `holdout` (and the baseline's vNMSE of about 0 anchors
    the ratio 1); returns the calibration dict with the per-entry table."""
    base = curves[baseline]
    m_base = base.values[-1]
    sign = 1.0 if metric == "loss" else -1.0
    fitted = [l for l in curves if l not in holdout]
    v = np.array([max(curves[l].vnmse, 1e-12) for l in fitted])
    y_final = np.array([sign * (curves[l].values[-1] / m_base - 1.0) for l in fitted])
    c, d = _power_fit(v, np.maximum(y_final, -0.5))
    model = {"format": FORMAT, "version": 1, "metric": metric, "final": {"c": c, "d": d}, "targets": []}
    for t in targets:
        goal = t * m_base
        r_base = rounds_to_target(base, goal, metric)
        if r_base is None or r_base == 0:
            continue
        pts = [(max(curves[l].vnmse, 1e-12), rounds_to_target(curves[l], goal, metric)) for l in fitted]
        pts = [(x, r / r_base - 1.0) for x, r in pts if r is not None]
        a, b = _power_fit(np.array([p[0] for p in pts]), np.array([p[1] for p in pts])) if pts else (0.0, 1.0)
        model["targets"].append({"target": t, "a": a, "b": b, "baseline_rounds": r_base})
    model["entries"] = _table(curves, model, holdout, m_base, max(base.vnmse, 0.0))
    return model


def _table(curves: dict[str, Curve], model: dict, holdout: list[str], m_base: float, base_v: float) -> list[dict]:
    rows = []
    metric = model["metric"]
    for label, c in curves.items():
        row = {"label": label, "role": "held out" if label in holdout else "fit", "vnmse": c.vnmse,
               "final": c.values[-1], "final_ratio": c.values[-1] / m_base, "targets": []}
        for t in model["targets"]:
            measured = rounds_to_target(c, t["target"] * m_base, metric)
            predicted = predict_rounds(model, c.vnmse, t["target"], base_v)
            err = (abs(predicted - measured) / measured if measured and predicted is not None else None)
            row["targets"].append({"target": t["target"], "measured": measured,
                                   "predicted": None if predicted is None else round(predicted, 3),
                                   "relative_error": None if err is None else round(err, 4)})
        rows.append(row)
    return rows


def _report(model: dict) -> str:
    lines = [f"{'entry':>22} {'role':>8} {'vNMSE':>10} {'final':>7} " +
             " ".join(f"{'R(' + format(t['target'], 'g') + ') meas/pred/err':>26}" for t in model["targets"])]
    for row in model["entries"]:
        cells = []
        for t in row["targets"]:
            meas = "-" if t["measured"] is None else str(t["measured"])
            pred = "-" if t["predicted"] is None else f"{t['predicted']:.0f}"
            err = "" if t["relative_error"] is None else f"{100 * t['relative_error']:.1f}%"
            cells.append(f"{meas + ' / ' + pred + ' / ' + err:>26}")
        lines.append(f"{row['label']:>22} {row['role']:>8} {row['vnmse']:>10.3e} {row['final_ratio']:>7.4f} "
                     + " ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ccsim.tta", description="Fit ccsim's convergence model on proxy curves.")
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a calibration")
    f.add_argument("curves", type=Path, nargs="+", help="proxy curves (several files: their entries together)")
    f.add_argument("--baseline", required=True, help="label of the uncompressed baseline")
    f.add_argument("--holdout", nargs="*", default=[], help="labels kept out of the fit and predicted")
    f.add_argument("--metric", choices=["loss", "accuracy"], default="loss")
    f.add_argument("--targets", nargs="+", type=float, default=None)
    f.add_argument("--source", default="", help="what produced the curves (one line, kept as provenance)")
    f.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        curves = {}
        for path in args.curves:
            curves.update(read_curves(path, args.metric))
        missing = [l for l in [args.baseline, *args.holdout] if l not in curves]
        if missing:
            raise ValueError(f"no curve for {', '.join(missing)} (labels: {', '.join(curves)})")
        model = fit(curves, args.baseline, args.holdout, args.metric, args.targets or DEFAULT_TARGETS[args.metric])
    except (OSError, ValueError, KeyError) as e:
        print(f"ccsim.tta: {e}", file=sys.stderr)
        return 2
    fitted = [l for l in curves if l not in args.holdout]
    model["provenance"] = {
        "summary": f"fitted on {len(fitted)} proxy runs of {', '.join(p.name for p in args.curves)}, "
                   f"{len(args.holdout)} held out",
        "curves": [p.name for p in args.curves], "source": args.source, "baseline": args.baseline, "fitted": fitted,
        "held_out": args.holdout,
        "command": "python3 -m ccsim.tta " + " ".join(a if " " not in a and "(" not in a else f'"{a}"'
                                                   for a in (argv if argv is not None else sys.argv[1:]))}
    held = [t for r in model["entries"] if r["role"] == "held out" for t in r["targets"]]
    errs = [t["relative_error"] for t in held if t["relative_error"] is not None]
    model["quality"] = {"held_out_max_relative_error": max(errs) if errs else None,
                        "held_out_mean_relative_error": float(np.mean(errs)) if errs else None,
                        "held_out_predictions": len(held),
                        # reached in the proxy but predicted not to be, or the other way round
                        "held_out_reach_mismatches": sum((t["measured"] is None) != (t["predicted"] is None)
                                                         for t in held)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".part")
    tmp.write_text(json.dumps(model, indent=2) + "\n")
    os.replace(tmp, args.out)
    print(_report(model))
    q = model["quality"]
    print(f"held-out rounds-to-target: max error {q['held_out_max_relative_error']}, mean "
          f"{q['held_out_mean_relative_error']}, {q['held_out_reach_mismatches']} of {q['held_out_predictions']} "
          f"predictions disagree on reaching the target; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
