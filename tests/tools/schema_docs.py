#!/usr/bin/env python3
"""Every key a scenario file accepts is documented: each property of scenarios/schema.json, at any
depth, is named in README.md or docs/*.md in code formatting (a word of some `...` span, such as
`/cluster/nodes`, `kind` or `{kind, q_floor}`).

  schema_docs.py --root SOURCE_DIR        exit 1 naming every undocumented key with its path

Standard library only.
"""

import argparse
import glob
import json
import os
import re
import sys


def properties(node, path, defs, out):
    """(path, key) of every property below `node`."""
    if "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    for key in ("oneOf", "anyOf", "allOf"):
        for alt in node.get(key, []):
            properties(alt, path, defs, out)
    for key, sub in node.get("properties", {}).items():
        out.append((f"{path}/{key}", key))
        properties(sub, f"{path}/{key}", defs, out)
    items = node.get("items")
    if isinstance(items, dict):
        properties(items, f"{path}/N", defs, out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="the source tree")
    args = ap.parse_args()
    with open(os.path.join(args.root, "scenarios", "schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    defs = schema.get("$defs", schema.get("definitions", {}))
    text = ""
    for name in [os.path.join(args.root, "README.md")] + sorted(glob.glob(os.path.join(args.root, "docs", "*.md"))):
        with open(name, encoding="utf-8") as f:
            text += f.read()
    keys = properties(schema, "", defs, [])
    named = {word for span in re.findall(r"`([^`\n]+)`", text) for word in re.findall(r"\w+", span)}
    missing = sorted({path for path, key in keys if key not in named})
    for path in missing:
        print(f"{path}: documented nowhere in README.md or docs/")
    print(f"{len(keys)} scenario keys: {'all documented' if not missing else f'{len(missing)} undocumented'}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
