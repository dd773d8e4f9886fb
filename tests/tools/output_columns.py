#!/usr/bin/env python3
"""docs/outputs.md lists the columns of every CSV `ccsim run` writes, in order: this runs a
collective scenario (with a link timeline), a data-parallel training scenario with tenants and a
3D-parallel one, shortened (the training one with a convergence block), and compares each file's header with its table. It also checks that
the CSVs carry no representation noise in exact quantities: byte counts are whole numbers and
simulated times have at most 12 decimals (whole picoseconds).

  output_columns.py --ccsim BIN --root SOURCE_DIR      exit 1 naming every difference

Standard library only.
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

RUNS = {  # kind as docs/outputs.md's headings name it -> scenario and overrides
    "collective runs": ("scenarios/quickstart.json", ["outputs.link_timeline_bin=1ms", "gradients.size=16MB",
                                                      "serving.layers=4", "serving.layer_compute=1ms"]),
    "training runs": ("scenarios/tta/digits-proxy-ring8.json",  # with tenants and a convergence block
                      ["workload.rounds=2",
                       "network.tenants=[{\"kind\":\"ring_allreduce\",\"count\":2,\"size\":\"10MB\"}]"]),
    "3D-parallel runs": ("scenarios/papers/edgc/gpt2-2.5b-3d.json", ["workload.rounds=2"]),
}
SHARED = {"tta.csv": ("with `convergence`",), "curves.csv": ("with `convergence`",),
          "links.csv": ("every run",),
          "links_timeline.csv": ("with `outputs.link_timeline_bin`",)}


def documented(text):
    """{(file, kind): [columns]} from the '## `file` (kind)' sections' tables."""
    out = {}
    for m in re.finditer(r"^## `([a-z_]+\.csv)` \(([^)]*)\)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        cols = [line.split("|")[1].strip().strip("`") for line in m.group(3).splitlines() if line.startswith("| `")]
        out[(m.group(1), m.group(2))] = cols
    return out


def header(path):
    with open(path, encoding="utf-8") as f:
        return next(csv.reader(f))


def noise(path):
    """Fields of exact quantities that carry representation noise."""
    bad = []
    with open(path, encoding="utf-8") as f:
        rows = csv.reader(f)
        cols = next(rows)
        for row in rows:
            for name, value in zip(cols, row):
                if name.endswith("bytes") and re.fullmatch(r"-?\d+\.\d+(e[+-]?\d+)?", value):
                    bad.append(f"{name}={value}")
                if name.endswith("_s") and re.fullmatch(r"-?\d+\.\d{13,}", value):
                    bad.append(f"{name}={value}")
    return bad[:3]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ccsim", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.root, "docs", "outputs.md"), encoding="utf-8") as f:
        docs = documented(f.read())
    problems, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (scenario, sets) in RUNS.items():
            out = os.path.join(tmp, kind.split()[0])
            cmd = [args.ccsim, "run", os.path.join(args.root, scenario), "--out", out]
            for s in sets:
                cmd += ["--set", s]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                problems.append(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
                continue
            for name in sorted(os.listdir(out)):
                if not name.endswith(".csv"):
                    continue
                key = next(((name, k) for k in (kind,) + SHARED.get(name, ()) if (name, k) in docs), None)
                if key is None:
                    problems.append(f"{name} ({kind}) has no '## `{name}` ({kind})' table in docs/outputs.md")
                    continue
                seen.add(key)
                got = header(os.path.join(out, name))
                if got != docs[key]:
                    problems.append(f"{name} ({kind}): the tool writes {got}\n  docs/outputs.md lists {docs[key]}")
                for b in noise(os.path.join(out, name)):
                    problems.append(f"{name} ({kind}): representation noise in an exact quantity: {b}")
    for key in sorted(set(docs) - seen):
        problems.append(f"docs/outputs.md documents {key[0]} ({key[1]}), which no run wrote")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(seen)} CSV files checked against docs/outputs.md, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
