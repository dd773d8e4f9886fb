"""tools/plot.py: every kind draws a PNG (and a PDF with --pdf) from ccsim's own outputs, --data
holds exactly the values of the CSVs, and bad input is one line on stderr, exit code 2 and no
output file. Inputs come from small ccsim runs (a few seconds in all) and, for SDP4Bit's sharded
scenario (two minutes), a hand-written results.csv with the real columns."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = Path(os.environ.get("CCSIM_SOURCE_DIR", HERE.parents[1]))
CCSIM_BIN = os.environ.get("CCSIM_BIN", str(SOURCE / "build" / "tools" / "ccsim"))
sys.path.insert(0, str(SOURCE / "tools"))

try:
    import plot  # noqa: E402
except ImportError as e:  # Debian's python3-matplotlib and python3-pandas come with tools/setup.sh
    plot, MISSING = None, str(e)
else:
    MISSING = ""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
QUICK = ["--set", "gradients.size=1MiB"]
DYNAMIQ = [*QUICK, "--set", 'compression.1={"scheme":"dynamiq"}']
AQGB = ["--set", "workload.duration=20s", "--set", "cluster.nodes=4", "--set", "outputs.link_timeline_bin=0.5s"]

# SDP4Bit's gpt-1.3b-64gpu.json (two minutes to run): the columns of a training results.csv.
SDP4BIT_RESULTS = """\
label,scheme,params,bits_per_element,payload_bits_per_element,metadata_bits_per_element,plan_bits_per_element,rounds_completed,simulated_s,round_s,throughput_rounds_per_s,compute_s,exposed_comm_s,compression_overhead_s,t_wait_s,t_wait_normalized,t_overlap_s,row_cluster_mean,uplink_utilization,wire_bytes_per_round,grad_comm_s,weight_comm_s
fp32,fp32,{},32,32,0,0,4,0.837172749776,0.209293187444,4.777986384614497,0.132359328707,0.07,0,0.07,0.5,0.1,1.4,0.3,1e11,0.102726085001,0.05301002271
sdp4bit_tlq(mode=ulq),sdp4bit_tlq,"{""mode"":""ulq""}",4.25,4,0.25,0,4,0.560803250828,0.14,7.503005869042137,0.132359328707,0.01,0.001,0.011,0.08,0.1,9,0.25,2e10,0.013666161764,0.05301002271
"sdp4bit_tlq(hadamard=true)+sdp4bit_qwd",sdp4bit_tlq,"{""hadamard"":true}",8.25,8,0.25,0,4,0.542966713464,0.13,7.737250288232249,0.132359328707,0.005,0.002,0.007,0.05,0.1,14,0.11,1.1e10,0.01390142948,0.015651006053
"""


def ccsim(*args: str) -> None:
    subprocess.run([CCSIM_BIN, *args], check=True, capture_output=True, text=True, timeout=120)


def make_sweep(scenario: str, axis: str, values: list[str], out: Path, extra: list[str]) -> Path:
    """A sweep.csv as `ccsim sweep` writes it: run, the axis (its value as written), then each
    run's results.csv, one row per (run, entry)."""
    rows, header = [], None
    for i, value in enumerate(values):
        run_dir = out / f"run{i:04d}"
        ccsim("run", str(SOURCE / scenario), "--out", str(run_dir), *extra, "--set", f"{axis}={value}")
        with open(run_dir / "results.csv", newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            rows += [[f"{i:04d}", value, *r] for r in reader]
    path = out / "sweep.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["run", axis, *header], *rows])
    return path


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@unittest.skipIf(plot is None, f"needs python3-matplotlib and python3-pandas: {MISSING}")
@unittest.skipUnless(Path(CCSIM_BIN).is_file(), f"needs the ccsim binary ({CCSIM_BIN})")
class Kinds(unittest.TestCase):
    """Each kind on real ccsim outputs: a PNG, a PDF, and the plotted values."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.dir = Path(cls.tmp.name)
        quick = "scenarios/quickstart.json"
        cls.sizes = make_sweep(quick, "gradients.size", ["256KiB", "1MiB", "4MiB"], d / "sizes", [])
        cls.nodes = make_sweep(quick, "cluster.nodes", ["2", "4", "8"], d / "nodes", QUICK)
        cls.budget = make_sweep(quick, "compression.1.params.budget", ["3", "4", "6"], d / "budget", DYNAMIQ)
        aqgb = "scenarios/papers/aqgb/uniform.json"
        ccsim("run", str(SOURCE / aqgb), "--out", str(d / "aqgb"), *AQGB)
        cls.bandwidth = make_sweep(aqgb, "cluster.nic_bandwidth", ["2.5Gbps", "10Gbps"], d / "bw", AQGB[:4])
        edgc = "scenarios/papers/edgc/gpt2-2.5b-3d.json"
        ccsim("run", str(SOURCE / edgc), "--out", str(d / "edgc"))
        cls.rank = make_sweep(edgc, "compression.1.params.rank", ["32", "64", "128"], d / "rank", [])
        ccsim("vnmse", "--synthetic", "8x32768", "--algo", "dynamiq", "--algo", "int8", "--ranks", "4",
              "--detail", "--csv", str(d / "vnmse.csv"))
        (d / "sdp4bit.csv").write_text(SDP4BIT_RESULTS)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def plot(self, kind: str, *inputs, extra=()) -> dict:
        """Runs plot.py in this process; checks the PNG and PDF; returns the --data JSON."""
        out = self.dir / f"{kind}-{len(list(self.dir.glob('*.png')))}.png"
        data = out.with_suffix(".json")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = plot.main([kind, *map(str, inputs), "--out", str(out), "--pdf", "--data", str(data), *extra])
        self.assertEqual(rc, 0, err.getvalue())
        png = out.read_bytes()
        self.assertEqual(png[:8], PNG_SIGNATURE)
        self.assertGreater(len(png), 10_000)
        self.assertEqual(out.with_suffix(".pdf").read_bytes()[:5], b"%PDF-")
        self.assertGreater(out.with_suffix(".pdf").stat().st_size, 5_000)
        return json.loads(data.read_text())

    def series(self, data: dict, panel: int = 0) -> dict:
        return {s["name"]: s for s in data["panels"][panel]["series"]}

    def test_every_kind_is_tested(self):
        tested = {name[len("test_"):].replace("_", "-") for name in dir(self) if name.startswith("test_")}
        self.assertLessEqual(set(plot.KINDS), tested)

    def test_an_entry_has_one_colour_in_every_figure_of_a_run(self):
        run = self.dir / "aqgb"
        figures = [self.plot("aqgb-bars", run / "results.csv"), self.plot("link-timeline", run / "links_timeline.csv"),
                   self.plot("aqgb-sweep", self.bandwidth)]
        colours = [{n: s["color"] for n, s in self.series(d).items()} for d in figures]
        self.assertEqual(colours[0], colours[1])
        self.assertEqual(colours[0], colours[2])
        self.assertEqual(list(colours[0].values()), plot.PALETTE[:3])
        parts = self.series(self.plot("breakdown", run / "results.csv"))
        self.assertEqual({n: s["color"] for n, s in parts.items()}, {n: plot.PART_COLORS[n] for n in parts})

    def test_three_panels_on_a_two_by_two_grid(self):
        data = self.plot("aqgb-bars", self.dir / "aqgb" / "results.csv", extra=["--y", "rounds_completed,round_s,t_wait_s"])
        self.assertEqual([p["y"] for p in data["panels"]], ["rounds_completed", "round_s", "t_wait_s"])

    def test_breakdown(self):
        rows = read_rows(self.dir / "aqgb" / "results.csv")
        data = self.series(self.plot("breakdown", self.dir / "aqgb" / "results.csv"))
        for part, col in (("compute", "compute_s"), ("exposed communication", "exposed_comm_s"),
                          ("compression overhead", "compression_overhead_s")):
            self.assertEqual(data[part]["x"], [r["label"] for r in rows])
            self.assertEqual(data[part]["y"], [float(r[col]) for r in rows])

    def test_breakdown_of_a_3d_run_has_no_compression_part(self):
        data = self.series(self.plot("breakdown", self.dir / "edgc" / "results.csv"))
        self.assertEqual(set(data), {"compute", "exposed communication"})

    def test_bit_budget(self):
        data = self.plot("bit-budget", self.budget)
        rows = read_rows(self.budget)
        time, vnmse = self.series(data, 0), self.series(data, 1)
        # The swept entry's label changes with the budget: it is one line, named by its scheme.
        self.assertEqual(set(time), {"bf16", "dynamiq"})
        dyn = [r for r in rows if r["scheme"] == "dynamiq"]
        self.assertEqual(vnmse["dynamiq"]["y"], [float(r["vnmse"]) for r in dyn])
        self.assertEqual(time["dynamiq"]["y"], [float(r["time_s"]) for r in dyn])
        self.assertEqual(time["dynamiq"]["x"], [3, 4, 6])
        self.assertTrue(data["panels"][1]["logy"])

    def test_vnmse_workers(self):
        data = self.plot("vnmse-workers", self.nodes)
        int8 = self.series(data)["int8"]
        self.assertEqual(int8["x"], [2, 4, 8])
        self.assertEqual(int8["y"], [float(r["vnmse"]) for r in read_rows(self.nodes) if r["label"] == "int8"])
        self.assertEqual(data["panels"][0]["x"], "cluster.nodes")

    def test_vnmse_hops(self):
        data = self.series(self.plot("vnmse-hops", self.dir / "vnmse.csv"))
        hops = [r for r in read_rows(self.dir / "vnmse.csv") if r["kind"] == "hop" and r["label"] == "int8"]
        self.assertEqual(data["int8"]["x"], [int(r["index"]) for r in hops])
        self.assertEqual(data["int8"]["y"], [float(r["vnmse"]) for r in hops])

    def test_link_timeline(self):
        path = self.dir / "aqgb" / "links_timeline.csv"
        data = self.plot("link-timeline", path)
        panel = data["panels"][0]
        self.assertEqual(panel["bin_s"], 0.5)
        rows = [r for r in read_rows(path) if r["label"] == "qsgd" and r["from"].startswith("rank")]
        links = {r["link"] for r in rows}
        fp = self.series(data)["qsgd"]
        self.assertEqual(fp["links"], len(links))
        for t, u in zip(fp["x"], fp["y"]):  # the mean over the ranks' uplinks, 0 where no row
            expected = sum(float(r["utilization"]) for r in rows if float(r["bin_start_s"]) == t) / len(links)
            self.assertAlmostEqual(u, expected, places=12)

    def test_aqgb_bars(self):
        rows = read_rows(self.dir / "aqgb" / "results.csv")
        data = self.plot("aqgb-bars", self.dir / "aqgb" / "results.csv")
        for i, col in enumerate(plot.AQGB_METRICS):
            bars = self.series(data, i)
            self.assertEqual(data["panels"][i]["y"], col)
            self.assertEqual({k: v["y"][0] for k, v in bars.items()}, {r["label"]: float(r[col]) for r in rows})

    def test_aqgb_sweep(self):
        data = self.plot("aqgb-sweep", self.bandwidth)
        aqgb = self.series(data, 0)["aqgb"]
        self.assertEqual(aqgb["x"], [2.5, 10.0])  # Gbps
        self.assertEqual(aqgb["y"], [float(r["rounds_completed"]) for r in read_rows(self.bandwidth) if r["label"] == "aqgb"])
        self.assertEqual(data["panels"][0]["xlabel"], "NIC bandwidth (Gbps)")

    def test_qratio(self):
        path = self.dir / "aqgb" / "controller.csv"
        data = self.plot("qratio", path)
        rows = [r for r in read_rows(path) if r["worker"] == "0"]
        stage1 = self.series(data)["aqgb stage 1"]
        ones = sorted((float(r["time_s"]), float(r["value"]) / 32) for r in rows if r["quantity"] == "stage1_bits")
        self.assertEqual(list(zip(stage1["x"], stage1["y"])), ones)
        self.assertEqual(data["panels"][0]["worker"], 0)

    def test_edgc_rank(self):
        data = self.series(self.plot("edgc-rank", self.rank))
        self.assertIn("powersgd", data)  # the swept entry; the others' labels stay
        self.assertEqual(data["powersgd"]["x"], [32, 64, 128])
        rows = [r for r in read_rows(self.rank) if r["label"].startswith("powersgd")]
        self.assertEqual(data["powersgd"]["y"], [float(r["exposed_comm_s"]) for r in rows])

    def test_edgc_stages(self):
        path = self.dir / "edgc" / "stages.csv"
        data = self.plot("edgc-stages", path, extra=["--where", "label=fp16", "--where", "round=1"])
        panel = data["panels"][0]
        rows = [r for r in read_rows(path) if r["label"] == "fp16"]
        start = max(float(r["sync_end_s"]) for r in rows if r["round"] == "0")
        self.assertEqual((panel["round"], panel["round_start_s"]), (1, start))
        sync = self.series(data)["sync, exposed"]
        r1 = [r for r in rows if r["round"] == "1"]
        self.assertEqual(sync["end"], [float(r["sync_end_s"]) - start for r in r1])

    def test_sdp4bit_comm(self):
        data = self.series(self.plot("sdp4bit-comm", self.dir / "sdp4bit.csv"))
        rows = read_rows(self.dir / "sdp4bit.csv")
        self.assertEqual(data["gradient communication"]["y"], [float(r["grad_comm_s"]) for r in rows])
        self.assertEqual(data["weight communication"]["x"], [r["label"] for r in rows])

    def test_speedup_error(self):
        path = self.sizes.parent / "run0001" / "results.csv"
        rows = read_rows(path)
        data = self.plot("speedup-error", path)
        points = self.series(data)
        t0 = float(rows[0]["time_s"])
        for r in rows:
            self.assertEqual(points[r["label"]]["y"], [t0 / float(r["time_s"])])
            self.assertEqual(points[r["label"]]["x"], [float(r["vnmse"])])
        other = self.series(self.plot("speedup-error", path, extra=["--baseline", "int8"]))
        self.assertEqual(other["bf16"]["y"], [float(rows[1]["time_s"]) / t0])

    def test_time_size(self):
        data = self.plot("time-size", self.sizes)
        bf16 = self.series(data)["bf16"]
        self.assertEqual(bf16["x"], [0.25, 1.0, 4.0])  # MiB
        self.assertEqual(bf16["y"], [float(r["time_s"]) for r in read_rows(self.sizes) if r["label"] == "bf16"])
        self.assertTrue(data["panels"][0]["logx"])


@unittest.skipIf(plot is None, f"needs python3-matplotlib and python3-pandas: {MISSING}")
class BadInput(unittest.TestCase):
    """One line on stderr naming the file and the columns, exit 2, no output file."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.out = self.dir / "fig.png"

    def tearDown(self):
        self.tmp.cleanup()

    def fails(self, *argv: str) -> str:
        proc = subprocess.run([sys.executable, str(SOURCE / "tools" / "plot.py"), *argv, "--out", str(self.out),
                               "--pdf", "--data", str(self.dir / "d.json")], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertEqual(sorted(p.name for p in self.dir.iterdir() if p.suffix != ".csv"), [])
        return proc.stderr

    def test_missing_column(self):
        path = self.dir / "results.csv"
        path.write_text("label,scheme,compute_s\nfp32,fp32,1.5\n")
        err = self.fails("breakdown", str(path))
        self.assertIn(str(path), err)
        self.assertIn("'exposed_comm_s'", err)
        self.assertIn("found: label, scheme, compute_s", err)

    def test_missing_file(self):
        self.assertIn("nope.csv: no such file", self.fails("breakdown", str(self.dir / "nope.csv")))

    def test_empty_csv(self):
        empty, header = self.dir / "empty.csv", self.dir / "header.csv"
        empty.write_text("")
        header.write_text("label,compute_s\n")
        self.assertIn("empty.csv: empty file", self.fails("breakdown", str(empty)))
        self.assertIn("header.csv: no rows (columns found: label, compute_s)", self.fails("aqgb-bars", str(header)))

    def test_wrong_kind(self):
        path = self.dir / "results.csv"
        path.write_text("label,time_s\nbf16,1\n")
        self.assertIn("unknown kind 'histogram'; valid: breakdown,", self.fails("histogram", str(path)))

    def test_unknown_baseline_and_where_column(self):
        path = self.dir / "results.csv"
        path.write_text("label,time_s,vnmse\nbf16,2,0\nint8,1,0.001\n")
        self.assertIn("no row with label 'fp8' (--baseline)", self.fails("speedup-error", str(path), "--baseline", "fp8"))
        self.assertIn("expected column 'step' (--where)", self.fails("speedup-error", str(path), "--where", "step=1"))

    def test_sweep_kind_on_a_results_csv(self):
        path = self.dir / "results.csv"
        path.write_text("label,time_s,vnmse\nbf16,2,0\n")
        self.assertIn("expected a sweep.csv", self.fails("time-size", str(path)))

    def test_at_most_four_panels(self):
        path = self.dir / "results.csv"
        path.write_text("label,a,b,c,d,e\nbf16,1,2,3,4,5\n")
        self.assertIn("5 panels; a figure has 1 to 4", self.fails("aqgb-bars", str(path), "--y", "a,b,c,d,e"))

    def test_two_sweep_axes_need_where(self):
        path = self.dir / "sweep.csv"
        path.write_text("run,a,b,label,scheme,time_s\n0000,1,x,bf16,bf16,1\n0001,1,y,bf16,bf16,2\n")
        self.assertIn("2 rows for label 'bf16' at a=1", self.fails("time-size", str(path)))


@unittest.skipIf(plot is None, f"needs python3-matplotlib and python3-pandas: {MISSING}")
class Cli(unittest.TestCase):
    def test_help_lists_every_kind(self):
        proc = subprocess.run([sys.executable, str(SOURCE / "tools" / "plot.py"), "--help"], capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 0)
        for kind in plot.KINDS:
            self.assertRegex(proc.stdout, rf"\n  {kind} +\S")

    def test_units(self):
        self.assertEqual(plot.parse_quantity("25Gbps"), (25e9, "bps"))
        self.assertEqual(plot.parse_quantity("4MiB"), (4 * 2**20, "bytes"))
        self.assertEqual(plot.parse_quantity("256MB"), (256e6, "bytes"))
        self.assertEqual(plot.parse_quantity("2KB"), (2000.0, "bytes"))
        self.assertEqual(plot.parse_quantity(3), (3.0, ""))
        self.assertEqual(plot.axis_numbers(["1GiB", "512MiB"]), ([1024.0, 512.0], "MiB"))
        self.assertIsNone(plot.axis_numbers(["[0,2,4]", "[0,2]"]))
        with self.assertRaises(ValueError):
            plot.parse_quantity("4 parsecs")


if __name__ == "__main__":
    unittest.main()
