#!/usr/bin/env python3
"""Sets a measured compute trace (tools/profile_model.py) beside the FLOP-based estimate of the same model.

The estimate is the one tools/traces/make_model_traces.py writes for the preset named in the
measured trace's provenance, on the micro-batch and sequence measured, with the device named by
--device (default h100: the H100 SXM's 989.4 TFLOP/s dense bf16 peak, which the H200 shares, at
the generator's assumed 40% utilization). Prints one Markdown row per trace: measured and estimated
milliseconds per micro-batch (forward + backward), their ratio, the utilization the measurement
implies (model FLOPs / time / peak), the per-block median of forward and backward, and the
backward/forward ratio of the blocks (the estimate assumes 2).

    python3 tools/traces/compare_traces.py traces/models/*-measured-h200.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_model_traces as gen  # noqa: E402


def preset_of(trace: dict) -> gen.Transformer:
    m = re.search(r"--preset (\S+)", trace["provenance"]["source"])
    if m is None:
        raise SystemExit("compare_traces: the trace's provenance names no --preset (not written by profile_model.py)")
    presets = {t.key: t for t in gen.TRANSFORMERS}
    if m.group(1) not in presets:
        raise SystemExit(f"compare_traces: preset {m.group(1)} is not in make_model_traces.py")
    return presets[m.group(1)]


def blocks(layers: list[dict]) -> list[dict]:
    return [layer for layer in layers if layer["name"].startswith("layer_")]


def row(path: Path, device: str) -> str:
    measured = json.loads(path.read_text(encoding="utf-8"))
    cfg = dataclasses.replace(preset_of(measured), device=device, micro_batch=measured["micro_batch"])
    est = cfg.trace()["layers"]
    got = measured["layers"]
    if [l["params"] for l in est] != [l["params"] for l in got]:
        raise SystemExit(f"compare_traces: {path}: its layers' parameter counts differ from the preset's")
    total = sum(l["forward"] + l["backward"] for l in got)
    total_est = sum(l["forward"] + l["backward"] for l in est)
    peak = gen.DEVICES[device].peak_flops
    flops = total_est * gen.DEVICES[device].flops  # model FLOPs of one micro-batch, forward + backward
    fwd = statistics.median(l["forward"] for l in blocks(got))
    bwd = statistics.median(l["backward"] for l in blocks(got))
    fwd_est = statistics.median(l["forward"] for l in blocks(est))
    return (f"| {cfg.key} | {cfg.micro_batch} x {cfg.seq} | {total * 1e3:.1f} | {total_est * 1e3:.1f} | "
            f"{total / total_est:.2f} | {flops / total / peak:.0%} | {fwd * 1e3:.3f} / {bwd * 1e3:.3f} | "
            f"{fwd_est * 1e3:.3f} / {2 * fwd_est * 1e3:.3f} | {bwd / fwd:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("traces", nargs="+", type=Path, help="measured traces (profile_model.py)")
    ap.add_argument("--device", choices=sorted(gen.DEVICES), default="h100", help="device of the estimate")
    args = ap.parse_args(argv)
    print("| model | tokens | measured ms | estimated ms | measured / estimated | implied utilization | "
          "block fwd / bwd ms (measured) | block fwd / bwd ms (estimated) | block bwd / fwd |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in args.traces:
        print(row(path, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
