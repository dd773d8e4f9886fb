#!/usr/bin/env python3
"""README's command table against the binary: every option `ccsim COMMAND --help` lists appears in
the command's row of README.md's CLI table, and every option the row names exists.

  readme_options.py --ccsim BUILD/tools/ccsim --readme README.md     exit 1 naming every difference

Standard library only. Positional arguments (--scenario, --files, --dir) and --help are left out.
"""

import argparse
import re
import subprocess
import sys

COMMANDS = ["run", "validate", "list", "schema", "bench", "vnmse", "bench-kernels", "manifest", "sweep"]
POSITIONAL = {"--help", "--scenario", "--files", "--dir", "--sweep"}


def help_options(ccsim: str, command: str) -> set:
    text = subprocess.run([ccsim, command, "--help"], capture_output=True, text=True, check=True).stdout
    return {m for m in re.findall(r"^\s+(?:-\w \[ )?(--[a-z][a-z-]*)", text, re.M)} - POSITIONAL


def readme_rows(readme: str) -> dict:
    rows = {}
    with open(readme, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\| `ccsim ([a-z-]+)", line)
            if m and m.group(1) in COMMANDS:
                synopsis = re.split(r"(?<!\\)\|", line)[1]  # cells split on unescaped pipes
                rows[m.group(1)] = set(re.findall(r"(--[a-z][a-z-]*)", synopsis)) - POSITIONAL
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ccsim", required=True)
    ap.add_argument("--readme", required=True)
    args = ap.parse_args()
    rows = readme_rows(args.readme)
    bad = []
    for command in COMMANDS:
        have = help_options(args.ccsim, command)
        if command not in rows:
            bad.append(f"{command}: no row `ccsim {command} ...` in {args.readme}'s command table")
            continue
        for o in sorted(have - rows[command]):
            bad.append(f"{command}: `ccsim {command} --help` lists {o}, README's row does not")
        for o in sorted(rows[command] - have):
            bad.append(f"{command}: README's row names {o}, which `ccsim {command} --help` does not list")
    for b in bad:
        print(b)
    print(f"{len(COMMANDS)} commands: {'README and --help agree' if not bad else f'{len(bad)} differences'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
