#!/usr/bin/env python3
"""Figures that docs/ quote from shipped data, pinned.

Runs the `ccsim vnmse` commands behind docs/compression.md's table of DynamiQ's comparison on the
shipped GPT dump (traces/data/gpt-bpe, 4 and 8 ranks), then checks
  1. every CSV the commands write against tests/golden/pinned/, byte for byte (the runs are
     deterministic: any change of a kernel, a schedule or a reduction order shows here), and
  2. every figure of that table against the CSV: each quoted value must be the measured one at the
     precision the table prints.

  pinned_figures.py --ccsim BUILD/tools/ccsim              check
  pinned_figures.py --ccsim BIN --record                   rewrite the recorded CSVs (a reviewed change)

Standard library only.
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PINNED = os.path.join(ROOT, "tests", "golden", "pinned")
DUMP = os.path.join(ROOT, "traces", "data", "gpt-bpe")
DOC = os.path.join(ROOT, "docs", "compression.md")
TABLE_HEADER = "| scheme | bits/entry here | paper (4 workers, 4 workloads) | 4 ranks, ring | 8 ranks, ring |"

# The table's two command lines (docs/compression.md), at N = 4 and 8.
COMMANDS = {
    "seeds": ["--seeds", "4", "--algo", "dynamiq", "--algo", "thc"],
    "warmup": ["--warmup", "16", "--algo", "mxfp8", "--algo", "mxfp6", "--algo", "mxfp4", "--algo", "omnireduce"],
}
ROW_COMMAND = {"dynamiq": "seeds", "thc": "seeds", "mxfp8": "warmup", "mxfp6": "warmup", "mxfp4": "warmup",
               "omnireduce": "warmup"}


def run_all(ccsim, out_dir):
    files = {}
    for ranks in (4, 8):
        for name, args in COMMANDS.items():
            path = os.path.join(out_dir, f"vnmse-{name}-{ranks}.csv")
            cmd = [ccsim, "vnmse", "--gradients", DUMP, "--ranks", str(ranks), "--threads", "1", *args, "--csv", path]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
            files[(name, ranks)] = path
    return files


def overall(path):
    """(label, step) -> the overall row of a vnmse.csv."""
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["label"], int(r["step"])): r for r in csv.DictReader(f) if r["kind"] == "overall"}


def quoted_matches(text, value, scale):
    """Whether `text` (a decimal as the table prints it) is value * 10^scale at its precision."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - value * 10 ** scale) <= 0.5 * 10 ** -decimals * (1 + 1e-9)


def check_table(files):
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = lines.index(TABLE_HEADER)
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[re.match(r"`([^`]+)`", cells[0]).group(1)] = cells
    errors, checked = [], 0
    for label, command in ROW_COMMAND.items():
        if label not in rows:
            errors.append(f"{DOC}: the table has no row `{label}`")
            continue
        for ranks, cell in ((4, rows[label][3]), (8, rows[label][4])):
            m = re.fullmatch(r"([0-9.]+) / ([0-9.]+)e-([0-9]+)", cell)
            if not m:
                errors.append(f"{DOC}: row `{label}`, {ranks} ranks: cannot read '{cell}'")
                continue
            got = overall(files[(command, ranks)])
            for text, step in ((m.group(1), 50), (m.group(2), 200)):
                value = float(got[(label, step)]["vnmse"])
                checked += 1
                if not quoted_matches(text, value, int(m.group(3))):
                    errors.append(f"{DOC}: row `{label}`, {ranks} ranks, step {step}: quotes {text}e-{m.group(3)}, "
                                  f"the run measures {value:.6g}")
    return errors, checked


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ccsim", required=True)
    ap.add_argument("--record", action="store_true", help="rewrite tests/golden/pinned/ from this run")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = run_all(a.ccsim, tmp)
        errors = []
        for path in files.values():
            pinned = os.path.join(PINNED, os.path.basename(path))
            with open(path, "rb") as f:
                data = f.read()
            if a.record:
                with open(pinned, "wb") as f:
                    f.write(data)
                continue
            if not os.path.exists(pinned):
                errors.append(f"{pinned}: missing (record it with --record)")
            else:
                with open(pinned, "rb") as f:
                    if f.read() != data:
                        errors.append(f"{os.path.basename(path)}: differs from {pinned}")
        table_errors, checked = check_table(files)
        errors += table_errors
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print(f"{len(files)} CSVs {'recorded' if a.record else 'identical to the pinned ones'}; "
          f"{checked} figures of docs/compression.md's table equal the measured values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
