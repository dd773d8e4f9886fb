#!/usr/bin/env python3
"""Digests of everything `ccsim run` writes for every shipped scenario.

Runs each scenario under scenarios/ (the quickstart, the paper and topology scenarios) with the given
ccsim binary into a fresh folder, and prints one line per output file: its SHA-256, after the
absolute path of the source tree is replaced by "$ROOT" (resolved scenarios name their files by
absolute path). The console summary is digested too, without its wall-time line (the only line that
varies between runs).

  output_digests.py --ccsim BUILD/tools/ccsim                  print the digests
  output_digests.py --ccsim BIN --check tests/golden/output_digests.txt
                                                               compare; exit 1 naming every difference
  output_digests.py --ccsim BIN --record FILE                  write them
  output_digests.py ... --times FILE                           also write each run's wall time and peak memory
  output_digests.py ... --readme README.md                     also compare the console output of every
                                                               run README.md shows with the tool's

Standard library only. A refactoring that must not change results keeps the recorded file as is; a
change of results updates it in the same commit, as a reviewed diff.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scenarios():
    out = []
    base = os.path.join(ROOT, "scenarios")
    for folder, _, files in os.walk(base):
        for f in files:
            if f.endswith(".json") and f != "schema.json" and not f.endswith(".sweep.json"):
                out.append(os.path.relpath(os.path.join(folder, f), ROOT))
    return sorted(out)


def digest(data: bytes) -> str:
    return hashlib.sha256(data.replace(ROOT.encode(), b"$ROOT")).hexdigest()


QUICKSTART = "scenarios/quickstart.json"


def readme_blocks(readme: str) -> dict:
    """The console outputs README shows: for every fenced `sh` block that is one command
    `tools/ccsim run SCENARIO`, the next fenced block when it is a run's console output (it starts
    with "ccsim "), by scenario."""
    import re

    with open(readme, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for m in re.finditer(r"```sh\ntools/ccsim run (\S+)\n```\n", text):
        start = text.find("\n```\n", m.end() - 1)
        if start < 0:
            continue
        body = start + 5
        if text.startswith("ccsim ", body):
            out[m.group(1)] = text[body:text.index("```", body)]
    return out


def without_wall_time(text: str) -> str:
    return "".join(l for l in text.splitlines(keepends=True) if not l.lstrip().startswith("wall time"))


def check_readme(console: str, out_dir: str, block: str) -> list:
    """Differences between a run's console output and README's copy of it (the wall-time line
    aside; the run's output folder written as README's), as unified-diff lines."""
    import difflib
    import re

    shown = re.search(r"outputs\s+(\S+)/\{", block)
    got = without_wall_time(console.replace(out_dir, shown.group(1) if shown else out_dir))
    want = without_wall_time(block)
    return list(difflib.unified_diff(want.splitlines(), got.splitlines(), "README.md", "ccsim run", lineterm=""))


def run_one(ccsim: str, scenario: str, tmp: str, readme: str | None = None, times: list | None = None) -> list:
    out_dir = os.path.join(tmp, scenario.replace("/", "_"))
    cmd = [ccsim, "run", os.path.join(ROOT, scenario), "--out", out_dir]
    usage = os.path.join(tmp, "usage.txt")
    if times is not None:  # wall seconds and peak resident kilobytes, as GNU time measures them
        cmd = ["/usr/bin/time", "-f", "%e %M", "-o", usage] + cmd
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if times is not None and proc.returncode == 0:
        with open(usage) as f:
            wall, kb = f.read().split()[-2:]
        times.append(f"{scenario} {float(wall):.2f} s {int(kb) / 1024:.0f} MiB")
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        raise SystemExit(f"{scenario}: ccsim run exited {proc.returncode}")
    block = readme_blocks(readme).get(scenario) if readme else None
    if block is not None:
        diff = check_readme(proc.stdout.decode(), out_dir, block)
        if diff:
            print("\n".join(diff))
            raise SystemExit(f"{readme}: the output it shows for `ccsim run {scenario}` differs from what the tool "
                             "prints (above); update README.md")
    console = b"".join(line for line in proc.stdout.splitlines(keepends=True)
                       if not line.lstrip().startswith(b"wall time"))
    console = console.replace(out_dir.encode(), b"$OUT")
    lines = [f"{scenario} console {digest(console)}"]
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), "rb") as f:
            lines.append(f"{scenario} {name} {digest(f.read())}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ccsim", required=True, help="the ccsim binary")
    ap.add_argument("--check", help="recorded digests to compare with")
    ap.add_argument("--record", help="file to write the digests to")
    ap.add_argument("--only", action="append", default=[], help="run only scenarios containing this text")
    ap.add_argument("--readme", help="README.md whose runs' console outputs are compared with the tool's")
    ap.add_argument("--times", help="also write each run's wall time and peak memory (GNU time) to this file")
    args = ap.parse_args()
    lines = []
    times = [] if args.times else None
    with tempfile.TemporaryDirectory(prefix="ccsim-digests-") as tmp:
        for s in scenarios():
            if args.only and not any(o in s for o in args.only):
                continue
            lines += run_one(os.path.abspath(args.ccsim), s, tmp, args.readme, times)
            if args.times:
                with open(args.times, "w") as f:
                    f.write("\n".join(times) + "\n")
    text = "\n".join(lines) + "\n"
    if args.record:
        with open(args.record, "w") as f:
            f.write(text)
    if not args.check:
        sys.stdout.write(text)
        return 0
    with open(args.check) as f:
        want = [l for l in f.read().splitlines() if l and not l.startswith("#")]
    if args.only:
        want = [l for l in want if any(o in l.split(" ")[0] for o in args.only)]
    got = lines
    key = lambda l: " ".join(l.split(" ")[:2])
    want_by, got_by = {key(l): l for l in want}, {key(l): l for l in got}
    bad = []
    for k in sorted(set(want_by) | set(got_by)):
        if k not in got_by:
            bad.append(f"{k}: recorded but not written now")
        elif k not in want_by:
            bad.append(f"{k}: written now but not recorded")
        elif want_by[k] != got_by[k]:
            bad.append(f"{k}: differs (recorded {want_by[k].split()[-1][:12]}, now {got_by[k].split()[-1][:12]})")
    for b in bad:
        print(b)
    print(f"{len(got)} outputs of {len(set(l.split(' ')[0] for l in got))} scenarios: "
          f"{'all identical to the recorded digests' if not bad else f'{len(bad)} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
