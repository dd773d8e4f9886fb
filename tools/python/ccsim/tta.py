"""Calibrating ccsim's convergence model on proxy curves (the ``ccsim.tta`` module; NumPy only).

The model (algorithms/convergence.hpp, docs/tta.md): compression error scales the baseline's
curve. A scheme of gradient vNMSE v reaches

    final metric   m(v) = m_base * f(v),   f(v) = 1 + s * c * v^d      s = +1 loss, -1 accuracy

and its metric at round r is the baseline's times f(v), so that its rounds to a target t (relative
to m_base) are the baseline's rounds to t / f(v): not reached when f(v) misses t. c and d are
fitted per scheme family (the scheme's name without its trailing digits: mxfp4/6/8 -> mxfp), and
once over every fitted entry for the schemes the calibration has not seen.

``fit`` reads the curves ``python3 -m ccsim.proxy`` wrote (the baseline among them), fits on the
entries it is told to fit, predicts the held-back entries and reports how far each prediction is
from what the proxy measured; the calibration JSON carries the baseline's relative curve, the fits,
their quality and their provenance, and ``ccsim run`` applies it (``convergence.calibration``):

    /usr/bin/python3 -m ccsim.tta fit scenarios/tta/gpt-proxy-ring8.curves.csv \\
        scenarios/tta/gpt-proxy-calibration.curves.csv --baseline fp32 \\
        --holdout "dynamiq(budget=4)" mxfp6 --out traces/convergence/gpt-ring8.json
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

__all__ = ["Curve", "read_curves", "rounds_to_target", "fit", "predict_rounds", "final_ratio", "family", "FORMAT"]

FORMAT = "ccsim-convergence-calibration"
DEFAULT_TARGETS = {"loss": [1.05, 1.02, 1.0], "accuracy": [0.99, 0.995, 1.0]}


@dataclass
class Curve:
    label: str
    rounds: list[int]
    values: list[float]
    vnmse: float  # mean over the run's rounds
    scheme: str = ""


def read_curves(path: Path, metric: str = "loss") -> dict[str, Curve]:
    """The curves of a proxy CSV by label (metric column val_loss or val_accuracy)."""
    column = "val_loss" if metric == "loss" else "val_accuracy"
    curves: dict[str, Curve] = {}
    vn: dict[str, list[float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            c = curves.setdefault(row["label"], Curve(row["label"], [], [], math.nan, row.get("scheme", "")))
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
    """c >= 0, d minimizing sum (c v^d - y)^2 over d in a grid (c in closed form per d)."""
    best = (math.inf, 0.0, 1.0)
    for d in np.linspace(0.2, 2.0, 91):
        x = v ** d
        c = max(0.0, float(np.sum(x * y) / np.sum(x * x)))
        err = float(np.sum((c * x - y) ** 2))
        if err < best[0]:
            best = (err, c, float(d))
    return best[1], best[2]


def family(scheme: str) -> str:
    """A scheme's family: its name without trailing digits (mxfp8 -> mxfp, dynamiq -> dynamiq)."""
    return scheme.rstrip("0123456789")


def _final_fit(model: dict, scheme: str) -> dict:
    return model["families"].get(family(scheme), model["default"])


def final_ratio(model: dict, v: float, scheme: str) -> float:
    f = _final_fit(model, scheme)
    sign = 1.0 if model["metric"] == "loss" else -1.0
    return 1.0 + sign * f["c"] * max(v, 0.0) ** f["d"]


def baseline_rounds_to(model: dict, goal: float) -> float | None:
    """The baseline's rounds to `goal` (relative to its final value) on its curve, interpolated
    linearly between evaluations; None when the curve never meets it."""
    metric = model["metric"]
    pts = model["baseline_curve"]
    for i, (r, x) in enumerate(pts):
        if meets(x, goal, metric):
            if i == 0:
                return float(r)
            r0, x0 = pts[i - 1]
            return r0 + (r - r0) * (x0 - goal) / (x0 - x) if x0 != x else float(r)
    return None


def predict_rounds(model: dict, v: float, target: float, scheme: str, vb: float = 0.0,
                   base_scheme: str = "") -> float | None:
    """The model's rounds to `target` for a scheme of vNMSE v against a baseline of vNMSE vb (None:
    its final metric, relative to the baseline's, misses it), as algo::ConvergenceModel::rounds."""
    f = final_ratio(model, v, scheme) / final_ratio(model, vb, base_scheme or scheme)
    if not meets(f, target, model["metric"]):
        return None
    return baseline_rounds_to(model, target / f)


def fit(curves: dict[str, Curve], baseline: str, holdout: list[str], metric: str, targets: list[float],
        schemes: dict[str, str]) -> dict:
    """Fits the final-metric model per family and over all fitted entries (the baseline's vNMSE of
    about 0 anchors f = 1); `schemes` maps labels to scheme names. Returns the calibration dict with
    the per-entry table at `targets`."""
    base = curves[baseline]
    m_base = base.values[-1]
    sign = 1.0 if metric == "loss" else -1.0
    fitted = [l for l in curves if l not in holdout]

    def fit_of(labels: list[str]) -> dict:
        v = np.array([max(curves[l].vnmse, 1e-12) for l in labels])
        y = np.array([sign * (curves[l].values[-1] / m_base - 1.0) for l in labels])
        c, d = _power_fit(v, y)
        return {"c": c, "d": d, "entries": labels}

    model = {"format": FORMAT, "version": 2, "metric": metric,
             "baseline_curve": [[r, x / m_base] for r, x in zip(base.rounds, base.values) if math.isfinite(x)],
             "default": fit_of(fitted), "families": {}}
    for fam in sorted({family(schemes[l]) for l in fitted if l != baseline}):
        members = [l for l in fitted if family(schemes[l]) == fam and l != baseline]
        model["families"][fam] = fit_of([baseline] + members)
    model["entries"] = _table(curves, model, holdout, targets, baseline, schemes)
    return model


def _table(curves: dict[str, Curve], model: dict, holdout: list[str], targets: list[float], baseline: str,
           schemes: dict[str, str]) -> list[dict]:
    rows = []
    metric = model["metric"]
    m_base = curves[baseline].values[-1]
    vb = max(curves[baseline].vnmse, 0.0)
    for label, c in curves.items():
        row = {"label": label, "scheme": schemes[label], "role": "held out" if label in holdout else "fit",
               "vnmse": c.vnmse, "final": c.values[-1], "final_ratio": c.values[-1] / m_base,
               "predicted_final_ratio": final_ratio(model, c.vnmse, schemes[label]) /
               final_ratio(model, vb, schemes[baseline]), "targets": []}
        for t in targets:
            measured = rounds_to_target(c, t * m_base, metric)
            predicted = predict_rounds(model, c.vnmse, t, schemes[label], vb, schemes[baseline])
            err = (abs(predicted - measured) / measured if measured and predicted is not None else None)
            row["targets"].append({"target": t, "measured": measured,
                                   "predicted": None if predicted is None else round(predicted, 3),
                                   "relative_error": None if err is None else round(err, 4)})
        rows.append(row)
    return rows


def _report(model: dict) -> str:
    targets = [t["target"] for t in model["entries"][0]["targets"]]
    lines = [f"{'entry':>22} {'role':>8} {'vNMSE':>10} {'final':>7} {'pred':>7} " +
             " ".join(f"{'R(' + format(t, 'g') + ') meas/pred/err':>26}" for t in targets)]
    for row in model["entries"]:
        cells = []
        for t in row["targets"]:
            meas = "-" if t["measured"] is None else str(t["measured"])
            pred = "-" if t["predicted"] is None else f"{t['predicted']:.0f}"
            err = "" if t["relative_error"] is None else f"{100 * t['relative_error']:.1f}%"
            cells.append(f"{meas + ' / ' + pred + ' / ' + err:>26}")
        lines.append(f"{row['label']:>22} {row['role']:>8} {row['vnmse']:>10.3e} {row['final_ratio']:>7.4f} "
                     f"{row['predicted_final_ratio']:>7.4f} " + " ".join(cells))
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
        model = fit(curves, args.baseline, args.holdout, args.metric, args.targets or DEFAULT_TARGETS[args.metric],
                    {l: c.scheme for l, c in curves.items()})
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
