#!/usr/bin/env python3
"""Paper-style figures from ccsim's output CSVs (docs/plotting.md).

    python3 tools/plot.py KIND INPUT... --out FILE.png [--pdf] [--data FILE.json] [--title T]
        [--x COL] [--y COL[,COL...]] [--hue COL] [--where COL=VALUE ...] [--baseline LABEL]

Each kind first turns its inputs into panels of series (the exact values drawn, which --data
writes as JSON), then one renderer draws every kind in the module's single style. Several INPUTs
are read as one table (rows appended, columns united). Bad input is one line on stderr and exit
code 2; outputs are written to temporaries and renamed, so a failed run writes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, PercentFormatter  # noqa: E402

# --- the one style ---------------------------------------------------------------------------
# Okabe & Ito's colour-blind-safe palette (black last); markers repeat the distinction in grey.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ["o", "s", "D", "^", "v", "<", ">", "p"]
# Parts of a bar or timeline (not entries) have fixed colours, the same in every figure.
PART_COLORS = {"compute": "#BBBBBB", "exposed communication": "#D55E00", "compression overhead": "#0072B2",
               "gradient communication": "#0072B2", "weight communication": "#E69F00",
               "forward and backward": "#BBBBBB", "sync, hidden": "#56B4E9", "sync, exposed": "#D55E00"}
FIGSIZE = {1: (3.5, 2.6), 2: (7.0, 2.6), 4: (7.0, 4.8)}  # inches, by panel count (IEEE column widths)
LAYOUT = {1: (1, 1), 2: (1, 2), 3: (2, 2), 4: (2, 2)}  # rows, columns
STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "font.family": "DejaVu Sans",
    "axes.grid": True, "axes.grid.axis": "y", "grid.linestyle": ":", "grid.linewidth": 0.6,
    "grid.color": "#999999", "axes.spines.top": False, "axes.spines.right": False,
    "axes.linewidth": 0.7, "lines.linewidth": 1.4, "lines.markersize": 4,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE), "legend.frameon": False,
    "savefig.dpi": 200, "savefig.bbox": "tight", "pdf.fonttype": 42,
}

# Axis titles with units for the columns ccsim writes (docs/outputs.md); other columns print as is.
COLUMN_LABELS = {
    "compute_s": "compute per round (s)", "exposed_comm_s": "exposed communication (s)",
    "compression_overhead_s": "compression overhead (s)", "time_s": "time (s)",
    "throughput_rounds_per_s": "throughput (rounds/s)", "vnmse": "vNMSE", "mse": "MSE",
    "rounds_completed": "training rounds", "uplink_utilization": "uplink utilization (%)",
    "t_wait_s": "T_wait (s)", "t_wait_normalized": "T_wait / compute", "row_cluster_mean": "ROW",
    "round_s": "round time (s)", "grad_comm_s": "communication per round (ms)",
    "bits_per_element": "bits per element", "utilization": "link utilization (%)",
    "collective.ranks": "workers", "cluster.nodes": "workers", "cluster.nic_bandwidth": "NIC bandwidth",
    "gradients.size": "tensor size", "bin_start_s": "time (s)", "index": "hop depth (ranks summed)",
}
PERCENT_COLUMNS = {"uplink_utilization", "utilization"}
# A swept scheme parameter (compression.N.params.NAME) is titled by its name.
PARAM_LABELS = {"budget": "bit budget (bits per element)", "bits": "bits per element", "rank": "rank",
                "block": "block size (elements)"}


class PlotError(Exception):
    """Bad input: one line for stderr, exit code 2."""


# --- units -----------------------------------------------------------------------------------
_SIZE_UNITS = {"B": 1, "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
               "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_RATE_UNITS = {"bps": 1, "Kbps": 1e3, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def parse_quantity(text) -> tuple[float, str]:
    """'4MiB' -> (4194304.0, 'bytes'), '25Gbps' -> (2.5e10, 'bps'), '3' -> (3.0, '')."""
    m = _QUANTITY.match(str(text))
    if not m:
        raise ValueError(f"not a number with a unit: {text!r}")
    value, unit = float(m.group(1)), m.group(2)
    if not unit:
        return value, ""
    if unit in _SIZE_UNITS:
        return value * _SIZE_UNITS[unit], "bytes"
    if unit in _RATE_UNITS:
        return value * _RATE_UNITS[unit], "bps"
    raise ValueError(f"unknown unit {unit!r} in {text!r} (sizes: B, KB, MB, GB, KiB, MiB, GiB; "
                     "rates: bps, Kbps, Mbps, Gbps)")


def axis_numbers(values) -> tuple[list, str] | None:
    """Sweep-axis values as plotted: sizes in MiB, rates in Gbps, plain numbers as they are;
    None when some value is no quantity (the axis is then categorical)."""
    try:
        parsed = [parse_quantity(v) for v in values]
    except ValueError:
        return None
    dims = {d for _, d in parsed}
    if len(dims) > 1:
        return None
    dim = dims.pop() if dims else ""
    scale, unit = {"bytes": (2**20, "MiB"), "bps": (1e9, "Gbps"), "": (1, "")}[dim]
    return [v / scale for v, _ in parsed], unit


# --- reading and checking inputs --------------------------------------------------------------
@dataclass
class Table:
    df: pd.DataFrame  # every input's rows (after --where)
    files: list[str]
    columns: dict[str, list[str]]  # each file's own columns
    full: pd.DataFrame | None = None  # the rows before --where
    derived: set[str] = field(default_factory=set)  # columns this tool added

    def where(self) -> str:
        return ", ".join(self.files)

    def need(self, kind: str, *cols: str) -> None:
        """Every input has every column of cols."""
        for f in self.files:
            for c in cols:
                if c not in self.columns[f] and c not in self.derived:
                    raise PlotError(f"{f}: expected column '{c}' ({kind}); found: {', '.join(self.columns[f])}")

    def need_any(self, kind: str, col: str) -> None:
        """Some input has col (a panel that plots the rows that have it)."""
        if col not in self.df.columns or self.df[col].isna().all():
            found = "; ".join(f"{f}: {', '.join(self.columns[f])}" for f in self.files)
            raise PlotError(f"{self.where()}: expected column '{col}' with values ({kind}); found: {found}")


_TEXT_COLUMNS = {c: str for c in ("run", "label", "scheme", "params", "from", "to", "controller", "quantity",
                                   "detail", "kind", "name")}


def read_inputs(paths: list[str]) -> Table:
    frames, columns = [], {}
    for p in paths:
        if not Path(p).is_file():
            raise PlotError(f"{p}: no such file")
        try:
            df = pd.read_csv(p, dtype=_TEXT_COLUMNS, keep_default_na=False, na_values=[""], float_precision="round_trip")
        except pd.errors.EmptyDataError:
            raise PlotError(f"{p}: empty file (no header, no rows)") from None
        except (pd.errors.ParserError, UnicodeDecodeError) as e:
            raise PlotError(f"{p}: not a CSV file ({str(e).splitlines()[0]})") from None
        if df.empty:
            raise PlotError(f"{p}: no rows (columns found: {', '.join(df.columns)})")
        columns[p] = list(df.columns)
        frames.append(df.assign(_file=len(frames)))
    df = pd.concat(frames, ignore_index=True, sort=False)
    return Table(df, list(paths), columns, full=df)


def apply_where(table: Table, conditions: list[str]) -> None:
    """--where COL=VALUE keeps the rows whose COL equals VALUE (as text, or as a number)."""
    for cond in conditions:
        col, sep, value = cond.partition("=")
        if not sep:
            raise PlotError(f"--where {cond}: expected COL=VALUE")
        table.need("--where", col)
        table.df = table.df[[_same(v, value) for v in table.df[col]]]
        if table.df.empty:
            raise PlotError(f"{table.where()}: no rows with {col}={value} (--where)")


def _same(cell, value: str) -> bool:
    if str(cell) == value:
        return True
    try:
        return float(cell) == float(value)
    except (TypeError, ValueError):
        return False


def sweep_axes(table: Table) -> list[str]:
    """sweep.csv: the columns between `run` and `label` are its axes."""
    cols = list(table.df.columns)
    if "run" not in cols or "label" not in cols or cols.index("label") < cols.index("run"):
        return []
    return cols[cols.index("run") + 1: cols.index("label")]


def default_x(table: Table, kind: str, args) -> str:
    if args.x:
        return args.x
    axes = sweep_axes(table)
    if not axes:
        f = table.files[0]
        raise PlotError(f"{f}: expected a sweep.csv (columns 'run', then the axes, then 'label') or --x COL "
                        f"({kind}); found: {', '.join(table.columns[f])}")
    return axes[0]


def default_hue(table: Table, args) -> str:
    """The entry's label, unless a sweep changes it from run to run (it swept a parameter of the
    entry: dynamiq(budget=3), dynamiq(budget=4)). Then entries are told apart by their position
    in the run, named by their label where it stays the same, else by their scheme."""
    if args.hue:
        return args.hue
    df = table.df
    if not {"run", "label", "scheme"} <= set(df.columns):
        return "label"
    position = df.groupby(["_file", "run"], sort=False).cumcount()
    names, varies = {}, False
    for pos, g in df.groupby(position, sort=False):
        labels = list(dict.fromkeys(g["label"]))
        varies |= len(labels) > 1
        names[pos] = labels[0] if len(labels) == 1 else " / ".join(dict.fromkeys(g["scheme"]))
    if not varies:
        return "label"
    table.df = df.assign(entry=[names[p] for p in position])
    table.derived.add("entry")
    return "entry"


# --- panels: what is drawn --------------------------------------------------------------------
@dataclass
class Panel:
    type: str  # lines, step, bars, grouped, stacked, scatter, timeline
    xlabel: str
    ylabel: str
    series: list[dict]
    x: str = ""
    y: str = ""
    title: str = ""
    logx: bool = False
    logy: bool = False
    yunit: str = ""  # '%' (ratio shown as percent), 'ms' (seconds shown as milliseconds)
    extra: dict = field(default_factory=dict)


def _num(v):
    """A JSON value for a plotted number (None for an empty or non-finite one)."""
    if isinstance(v, str):
        return v
    f = float(v)
    return f if math.isfinite(f) else None


def label_of(col: str, unit: str = "") -> str:
    text = COLUMN_LABELS.get(col, col)
    if col not in COLUMN_LABELS and ".params." in col:
        name = col.rsplit(".", 1)[1]
        text = PARAM_LABELS.get(name, name)
    return f"{text} ({unit})" if unit else text


def scale_times(p: Panel) -> None:
    """Seconds columns whose values are all below 0.1 s are shown in ms (below 0.1 ms in us);
    the series keep the CSV's seconds."""
    cols = [c for c in p.y.split(",") if c]
    if p.yunit or not cols or not all(c.endswith("_s") for c in cols) or "(s)" not in p.ylabel:
        return
    values = [abs(v) for s in p.series for v in s.get("y", []) if isinstance(v, float)]
    if values and max(values) < 1e-4:
        p.yunit, p.ylabel = "us", p.ylabel.replace("(s)", "(µs)")
    elif values and max(values) < 0.1:
        p.yunit, p.ylabel = "ms", p.ylabel.replace("(s)", "(ms)")


def yunit_of(col: str) -> str:
    return "%" if col in PERCENT_COLUMNS else ""


def lines_over(table: Table, kind: str, x: str, y: str, hue: str) -> tuple[list[dict], str, bool]:
    """One series per hue value: y against x, sorted by x; returns (series, x unit, numeric)."""
    table.need(kind, x, hue)
    table.need_any(kind, y)
    df = table.df.dropna(subset=[y])
    conv = axis_numbers(df[x].tolist())
    xs = conv[0] if conv else df[x].astype(str).tolist()
    df = df.assign(_x=xs)
    series = []
    for name, g in df.groupby(hue, sort=False):
        _no_duplicates(table, g, hue, name, x)
        g = g.sort_values("_x") if conv else g
        series.append({"name": str(name), "x": [_num(v) for v in g["_x"]], "y": [_num(v) for v in g[y]]})
    return series, (conv[1] if conv else ""), conv is not None


def _no_duplicates(table: Table, g: pd.DataFrame, hue: str, name, x: str) -> None:
    dup = g[g.duplicated("_x", keep=False)]
    if not dup.empty:
        raise PlotError(f"{table.where()}: {len(dup)} rows for {hue} '{name}' at {x}={dup[x].iloc[0]} "
                        f"(a second sweep axis?); pick one with --where COL=VALUE")


def sweep_panel(table, kind, args, y, *, logy=False, type_="lines") -> Panel:
    x, hue = default_x(table, kind, args), default_hue(table, args)
    series, unit, numeric = lines_over(table, kind, x, y, hue)
    if type_ == "lines" and not numeric:
        type_ = "grouped"
    return Panel(type_, label_of(x, unit), label_of(y), series, x=x, y=y, logy=logy, yunit=yunit_of(y),
                 extra={"hue": hue})


def per_entry(table: Table, kind: str, hue: str, col: str) -> list[dict]:
    """One bar per entry (hue value) of col; an entry must have one row."""
    table.need(kind, hue, col)
    df = table.df
    dup = df[df.duplicated(hue, keep=False)]
    if not dup.empty:
        raise PlotError(f"{table.where()}: several rows for {hue} '{dup[hue].iloc[0]}' ({kind} draws one bar or point per "
                        f"{hue}); pick one with --where COL=VALUE")
    return [{"name": str(n), "x": [str(n)], "y": [_num(v)]} for n, v in zip(df[hue], df[col])]


def y_list(args, default: list[str]) -> list[str]:
    return [c.strip() for c in args.y.split(",")] if args.y else default


# --- the kinds --------------------------------------------------------------------------------
def kind_breakdown(table, args):
    """Time per round: compute, exposed communication, compression, stacked per entry (DynamiQ Fig. 6).

    Input: a training (or 3D-parallel) results.csv; 3D-parallel results have no compression part."""
    hue = args.hue or "label"
    parts = [("compute", "compute_s"), ("exposed communication", "exposed_comm_s"),
             ("compression overhead", "compression_overhead_s")]
    table.need("breakdown", hue, "compute_s", "exposed_comm_s")
    parts = [p for p in parts if p[1] in table.df.columns]  # 3D-parallel results have no compression column
    entries = [s["name"] for s in per_entry(table, "breakdown", hue, "compute_s")]
    series = [{"name": name, "column": col, "x": entries, "y": [_num(v) for v in table.df[col].fillna(0)]}
              for name, col in parts]
    return [Panel("stacked", "", "time per round (s)", series, y=",".join(c for _, c in parts))]


def kind_bit_budget(table, args):
    """Throughput and vNMSE against the bit budget, two panels (DynamiQ Table 4 / Fig. 7).

    Input: a sweep.csv; the first panel plots throughput_rounds_per_s (training sweeps) or time_s."""
    first = "throughput_rounds_per_s" if "throughput_rounds_per_s" in table.df.columns else "time_s"
    return [sweep_panel(table, "bit-budget", args, y, logy=(y in ("vnmse", "mse")))
            for y in y_list(args, [first, "vnmse"])]


def kind_vnmse_workers(table, args):
    """vNMSE against the number of workers (DynamiQ Fig. 10-11).

    Input: a sweep.csv over the ranks."""
    return [sweep_panel(table, "vnmse-workers", args, y, logy=True) for y in y_list(args, ["vnmse"])]


def kind_vnmse_hops(table, args):
    """vNMSE against the hop depth (DynamiQ Fig. 10-11).

    Input: `ccsim vnmse --detail --csv` output; its kind=hop rows, mean over steps."""
    table.need("vnmse-hops", "kind", "index")
    table.df = table.df[table.df["kind"] == "hop"]
    if table.df.empty:
        raise PlotError(f"{table.where()}: no rows with kind=hop (run `ccsim vnmse` with --detail)")
    y, hue = (args.y or "vnmse"), (args.hue or "label")
    table.need("vnmse-hops", y, hue)
    mean = table.df.groupby([hue, "index"], sort=False)[y].mean().reset_index()
    series = [{"name": str(n), "x": [int(v) for v in g["index"]], "y": [_num(v) for v in g[y]]}
              for n, g in mean.groupby(hue, sort=False)]
    return [Panel("lines", label_of("index"), label_of(y), series, x="index", y=y, logy=True, extra={"hue": hue})]


def kind_link_timeline(table, args):
    """Link utilization over time, per entry (DynamiQ Fig. 17).

    Input: links_timeline.csv. The mean over the links leaving the ranks (all links if none is
    named so; --where link=N for one)."""
    hue = args.hue or "label"
    table.need("link-timeline", hue, "link", "from", "bin_start_s", "utilization")
    df = table.df
    hosts = df[df["from"].str.match(r"^(rank|h)\d+$")]
    df = hosts if not hosts.empty else df
    starts = sorted(set(table.df["bin_start_s"]))
    width = min((b - a for a, b in zip(starts, starts[1:])), default=starts[0] or 1.0)
    series = [_link_series(str(name), g, width) for name, g in df.groupby(hue, sort=False)]
    return [Panel("step", label_of("bin_start_s"), label_of("utilization"), series, x="bin_start_s",
                  y="utilization", yunit="%", extra={"bin_s": width, "links": sorted(set(df["link"].astype(int)))})]


def _link_series(name: str, g: pd.DataFrame, width: float) -> dict:
    """Mean utilization over g's links per bin, from 0 to its last bin; a bin missing from the
    file carried nothing (0). Bin starts are multiples of the width."""
    links = g["link"].nunique()
    per_bin = g.groupby("bin_start_s")["utilization"].sum() / links
    by_index = {int(round(b / width)): float(v) for b, v in per_bin.items()}
    count = max(by_index) + 1
    return {"name": name, "x": [i * width for i in range(count)], "y": [by_index.get(i, 0.0) for i in range(count)],
            "links": int(links)}


AQGB_METRICS = ["rounds_completed", "uplink_utilization", "t_wait_normalized", "row_cluster_mean"]


def kind_aqgb_bars(table, args):
    """Rounds, uplink utilization, T_wait / compute and ROW per entry, four bar panels (AQGB Fig. 10, 13).

    Input: a training results.csv."""
    hue = args.hue or "label"
    return [Panel("bars", "", label_of(c), per_entry(table, "aqgb-bars", hue, c), y=c, yunit=yunit_of(c))
            for c in y_list(args, AQGB_METRICS)]


def kind_aqgb_sweep(table, args):
    """The same four metrics as grouped bars against a sweep axis (AQGB Fig. 12, 14).

    Input: a sweep.csv (bandwidth, blocks)."""
    return [sweep_panel(table, "aqgb-sweep", args, c, type_="grouped") for c in y_list(args, AQGB_METRICS)]


Q_QUANTITIES = {"stage1_bits": ("stage 1", 1 / 32), "stage2_q": ("stage 2", 1.0), "q": ("", 1.0)}


def kind_qratio(table, args):
    """AQGB's quantization ratio over time, stage 1 and stage 2 (AQGB Fig. 9).

    Input: controller.csv. Stage-1 bits / 32 and stage-2 ratios of one worker (the lowest-numbered;
    --where worker=N for another)."""
    table.need("qratio", "label", "worker", "time_s", "quantity", "value")
    df = table.df[table.df["quantity"].isin(list(Q_QUANTITIES))]
    if df.empty:
        raise PlotError(f"{table.where()}: no rows with quantity {', '.join(Q_QUANTITIES)} (an AQGB run's controller.csv)")
    worker = df["worker"].min()
    df = df[df["worker"] == worker]
    series = []
    for (label, q), g in df.groupby(["label", "quantity"], sort=False):
        stage, scale = Q_QUANTITIES[q]
        g = g.sort_values("time_s", kind="stable")
        series.append({"name": f"{label} {stage}".strip(), "quantity": q, "x": [_num(v) for v in g["time_s"]],
                       "y": [_num(v * scale) for v in g["value"]]})
    return [Panel("step", "time (s)", "quantization ratio", series, x="time_s", y="value",
                  extra={"worker": int(worker)})]


def kind_edgc_rank(table, args):
    """Exposed communication against the low-rank schemes' rank (EDGC Fig. 9).

    Input: a sweep.csv over a rank of a 3D-parallel run."""
    return [sweep_panel(table, "edgc-rank", args, y) for y in y_list(args, ["exposed_comm_s"])]


def kind_edgc_stages(table, args):
    """Pipeline stages' timeline of one round: compute, DP sync hidden and exposed (EDGC Fig. 8).

    Input: a 3D-parallel stages.csv; the first label and the last round unless --where label=L
    --where round=R."""
    table.need("edgc-stages", "label", "round", "stage", "backward_end_s", "sync_start_s", "sync_end_s", "exposed_s")
    label = table.df["label"].iloc[0]
    df = table.df[table.df["label"] == label]
    rnd = df["round"].max()
    prev = table.full[(table.full["label"] == label) & (table.full["round"] == rnd - 1)]
    start = float(prev["sync_end_s"].max()) if not prev.empty else 0.0
    rows = df[df["round"] == rnd].sort_values("stage")
    spans = {"forward and backward": (lambda r: start, lambda r: r.backward_end_s),
             "sync, hidden": (lambda r: r.sync_start_s, lambda r: r.sync_end_s - r.exposed_s),
             "sync, exposed": (lambda r: r.sync_end_s - r.exposed_s, lambda r: r.sync_end_s)}
    series = [{"name": name, "stage": [int(s) for s in rows["stage"]],
               "start": [_num(a(r) - start) for r in rows.itertuples()],
               "end": [_num(b(r) - start) for r in rows.itertuples()]} for name, (a, b) in spans.items()]
    title = f"{rows['label'].iloc[0]}, round {int(rnd)}"
    return [Panel("timeline", "time since the round's start (s)", "pipeline stage", series, title=title,
                  extra={"label": str(rows["label"].iloc[0]), "round": int(rnd), "round_start_s": start,
                         "last_backward_s": float(rows["backward_end_s"].max()) - start})]


def kind_sdp4bit_comm(table, args):
    """Gradient and weight communication per round and entry, in ms (SDP4Bit Table 4).

    Input: a training results.csv of a sharded run."""
    hue = args.hue or "label"
    table.need("sdp4bit-comm", hue, "grad_comm_s", "weight_comm_s")
    entries = [s["name"] for s in per_entry(table, "sdp4bit-comm", hue, "grad_comm_s")]
    series = [{"name": name, "column": col, "x": entries, "y": [_num(v) for v in table.df[col]]}
              for name, col in (("gradient communication", "grad_comm_s"), ("weight communication", "weight_comm_s"))]
    return [Panel("grouped", "", label_of("grad_comm_s"), series, y="grad_comm_s,weight_comm_s", yunit="ms")]


def kind_speedup_error(table, args):
    """Speedup over a baseline against the error, one point per entry (EQuARX Fig. 7).

    Input: a collective results.csv. Speedup = the baseline's time / the entry's (--baseline LABEL,
    default the first row); error: mse if the file has it, else vnmse."""
    hue = args.hue or "label"
    err = args.x or ("mse" if "mse" in table.df.columns else "vnmse")
    time = args.y or "time_s"
    table.need("speedup-error", hue, err, time)
    per_entry(table, "speedup-error", hue, time)
    df = table.df
    base = args.baseline if args.baseline is not None else str(df[hue].iloc[0])
    if base not in set(df[hue]):
        raise PlotError(f"{table.where()}: no row with {hue} '{base}' (--baseline); found: {', '.join(df[hue])}")
    t0 = float(df.loc[df[hue] == base, time].iloc[0])
    series = [{"name": str(n), "x": [_num(e)], "y": [_num(t0 / t) if t else None], "time": _num(t)}
              for n, e, t in zip(df[hue], df[err], df[time])]
    positive = all(s["x"][0] is not None and s["x"][0] > 0 for s in series)
    return [Panel("scatter", label_of(err), f"speedup over {base}", series, x=err, y=time, logx=positive,
                  extra={"baseline": base, "baseline_time": t0})]


def kind_time_size(table, args):
    """Time against tensor size, one line per entry, log-log in MiB (EQuARX Fig. 6).

    Input: a sweep.csv over a size axis (gradients.size)."""
    panel = sweep_panel(table, "time-size", args, args.y or "time_s", logy=True)
    panel.logx = True
    return [panel]


KINDS: dict[str, Callable[[Table, argparse.Namespace], list[Panel]]] = {
    "breakdown": kind_breakdown,
    "bit-budget": kind_bit_budget,
    "vnmse-workers": kind_vnmse_workers,
    "vnmse-hops": kind_vnmse_hops,
    "link-timeline": kind_link_timeline,
    "aqgb-bars": kind_aqgb_bars,
    "aqgb-sweep": kind_aqgb_sweep,
    "qratio": kind_qratio,
    "edgc-rank": kind_edgc_rank,
    "edgc-stages": kind_edgc_stages,
    "sdp4bit-comm": kind_sdp4bit_comm,
    "speedup-error": kind_speedup_error,
    "time-size": kind_time_size,
}


# --- drawing ----------------------------------------------------------------------------------
def assign_styles(panels: list[Panel]) -> None:
    """Each series gets its colour and marker: entries palette colours in order of first
    appearance (the scenario's order of entries, which every CSV of a run keeps), parts of bars
    and timelines their fixed colours."""
    seen: dict[str, int] = {}
    for p in panels:
        for s in p.series:
            i = seen.setdefault(s["name"], len(seen)) if s["name"] not in PART_COLORS else 0
            s["color"] = PART_COLORS.get(s["name"]) or PALETTE[i % len(PALETTE)]
            s["marker"] = MARKERS[i % len(MARKERS)]


def category_ticks(ax, names: list[str]) -> None:
    """One tick per bar group, slanted when the names are long."""
    slanted = max(map(len, names), default=0) > 6
    ax.set_xticks(range(len(names)), names, rotation=30 if slanted else 0, ha="right" if slanted else "center")


def draw_lines(ax, p: Panel):
    for s in p.series:
        ax.plot(s["x"], s["y"], color=s["color"], marker=s["marker"], label=s["name"])


def draw_step(ax, p: Panel):
    """Each value holds until the next x (a bin of width bin_s holds until its end)."""
    for s in p.series:
        end = s["x"][-1] + p.extra.get("bin_s", 0.0)
        ax.stairs(s["y"], s["x"] + [end], color=s["color"], label=s["name"], linewidth=1.0, baseline=None)


def draw_bars(ax, p: Panel):
    for i, s in enumerate(p.series):
        ax.bar([i], s["y"], color=s["color"], label=s["name"], width=0.7)
    category_ticks(ax, [s["name"] for s in p.series])


def draw_grouped(ax, p: Panel):
    cats = list(dict.fromkeys(v for s in p.series for v in s["x"]))
    width = 0.8 / max(len(p.series), 1)
    for i, s in enumerate(p.series):
        pos = [cats.index(v) - 0.4 + (i + 0.5) * width for v in s["x"]]
        ax.bar(pos, s["y"], width=width, color=s["color"], label=s["name"])
    category_ticks(ax, [f"{v:g}" if isinstance(v, float) else str(v) for v in cats])


def draw_stacked(ax, p: Panel):
    bottom = [0.0] * len(p.series[0]["x"]) if p.series else []
    for s in p.series:
        ax.bar(range(len(s["x"])), s["y"], bottom=bottom, color=s["color"], label=s["name"], width=0.6)
        bottom = [b + (v or 0) for b, v in zip(bottom, s["y"])]
    if p.series:
        category_ticks(ax, p.series[0]["x"])


def draw_scatter(ax, p: Panel):
    for s in p.series:
        ax.scatter(s["x"], s["y"], color=s["color"], marker=s["marker"], label=s["name"], zorder=3)
        ax.annotate(s["name"], (s["x"][0], s["y"][0]), xytext=(4, 3), textcoords="offset points", fontsize=6)
    ax.axhline(1.0, color="#999999", linewidth=0.7, linestyle="--")


def draw_timeline(ax, p: Panel):
    for s in p.series:
        ax.barh(s["stage"], [e - b for b, e in zip(s["start"], s["end"])], left=s["start"], height=0.6,
                color=s["color"], label=s["name"])
    ax.axvline(p.extra["last_backward_s"], color="#000000", linewidth=0.8, linestyle="--", label="last backward")
    ax.set_yticks(sorted({v for s in p.series for v in s["stage"]}))
    ax.invert_yaxis()
    ax.grid(True, axis="x")


DRAW = {"lines": draw_lines, "step": draw_step, "bars": draw_bars, "grouped": draw_grouped,
        "stacked": draw_stacked, "scatter": draw_scatter, "timeline": draw_timeline}


def format_axes(ax, p: Panel):
    ax.set_xlabel(p.xlabel)
    ax.set_ylabel(p.ylabel)
    if p.title:
        ax.set_title(p.title)
    if p.logx:
        ax.set_xscale("log", base=2 if p.type != "scatter" else 10)
        if p.type != "scatter":  # a size axis: ticks at the swept sizes
            ax.set_xticks(sorted({v for s in p.series for v in s["x"]}))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    if p.logy:
        ax.set_yscale("log")
    if p.yunit == "%":
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    elif p.yunit in ("ms", "us"):
        scale = 1e3 if p.yunit == "ms" else 1e6
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * scale:.4g}"))


def render(panels: list[Panel], title: str | None):
    size = len(panels)
    with plt.rc_context(STYLE):
        fig, axes = _subplots(len(panels))
        for ax, p in zip(axes, panels):
            DRAW[p.type](ax, p)
            format_axes(ax, p)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        fig.tight_layout()
        top = _legend(fig, axes, size)
        if title:
            fig.suptitle(title, y=top + 0.01, va="bottom", fontsize=9)
    return fig


def _subplots(panels: int):
    rows, cols = LAYOUT[panels]
    fig, axes = plt.subplots(rows, cols, figsize=FIGSIZE[rows * cols], squeeze=False)
    return fig, list(axes.flat)


def _legend(fig, axes, size: int) -> float:
    """One legend for the figure, above the panels: every entry once, in as many columns as fit.
    Returns its top in figure coordinates (a title goes above it)."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        widest = max(len(lab) for lab in handles) + 5
        ncol = max(1, min(len(handles), (60 if size == 1 else 120) // widest))
        legend = fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, 1.0))
        box = legend.get_window_extent(fig.canvas.get_renderer()).transformed(fig.transFigure.inverted())
        return box.y1
    return 1.0


# --- output -----------------------------------------------------------------------------------
def series_json(kind: str, inputs: list[str], panels: list[Panel]) -> dict:
    return {"kind": kind, "inputs": inputs,
            "panels": [{"type": p.type, "x": p.x, "y": p.y, "xlabel": p.xlabel, "ylabel": p.ylabel,
                        "logx": p.logx, "logy": p.logy, "yunit": p.yunit, **p.extra, "series": p.series}
                       for p in panels]}


def write_outputs(fig, out: Path, pdf: bool, data: dict | None, data_path: Path | None) -> None:
    """Everything to temporaries first, then renamed: a failure leaves no output file."""
    targets = [(out, lambda f: fig.savefig(f, format="png"))]
    if pdf:
        targets.append((out.with_suffix(".pdf"), lambda f: fig.savefig(f, format="pdf", metadata={"CreationDate": None})))
    if data_path is not None:
        targets.append((data_path, lambda f: f.write(json.dumps(data, indent=1).encode())))
    temps = []
    try:
        for path, write in targets:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            temps.append(tmp)
            with open(tmp, "wb") as f:
                write(f)
        for (path, _), tmp in zip(targets, temps):
            os.replace(tmp, path)
    finally:
        for tmp in temps:
            tmp.unlink(missing_ok=True)


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        raise PlotError(message)


def parse_args(argv):
    kinds = "\n".join(f"  {name:14} {_first_line(build.__doc__)}" for name, build in KINDS.items())
    p = Parser(prog="plot.py", formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Paper-style figures from ccsim's output CSVs (docs/plotting.md).",
               epilog=f"kinds:\n{kinds}")
    p.add_argument("kind", help="what to draw (the list below)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="ccsim CSV files, read as one table")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--pdf", action="store_true", help="also write the figure as PDF next to it")
    p.add_argument("--data", help="write the plotted series as JSON here")
    p.add_argument("--title", help="a title above the figure")
    p.add_argument("--x", help="x column (sweeps: default the first sweep axis)")
    p.add_argument("--y", help="y column, or COL,COL... for kinds with several panels")
    p.add_argument("--hue", help="column naming the lines or bars (default label; sweeps whose labels "
                                 "change with the axis: scheme)")
    p.add_argument("--where", action="append", default=[], metavar="COL=VALUE", help="keep only these rows (repeatable)")
    p.add_argument("--baseline", help="speedup-error: the baseline entry's label (default the first row)")
    return p.parse_args(argv)


def run(argv) -> int:
    args = parse_args(argv)
    if args.kind not in KINDS:
        raise PlotError(f"unknown kind '{args.kind}'; valid: {', '.join(KINDS)}")
    out = Path(args.out)
    if out.suffix.lower() != ".png":
        raise PlotError(f"--out {args.out}: expected a .png file name")
    table = read_inputs(args.inputs)
    apply_where(table, args.where)
    panels = KINDS[args.kind](table, args)
    if len(panels) not in LAYOUT:
        raise PlotError(f"--y {args.y}: {len(panels)} panels; a figure has 1 to {max(LAYOUT)}")
    for p in panels:
        scale_times(p)
    assign_styles(panels)
    fig = render(panels, args.title)
    try:
        data = series_json(args.kind, args.inputs, panels)
        with plt.rc_context(STYLE):  # savefig.* and pdf.* apply when saving
            write_outputs(fig, out, args.pdf, data, Path(args.data) if args.data else None)
    finally:
        plt.close(fig)
    return 0


def main(argv=None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except PlotError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
