"""Benchmark the analysis: SuperFunction segmentation plus page heatmaps, instructions per second
and peak memory, on the largest shipped trace (data/) and on a trace of at least 1 G
instructions (recorded with the test guest when missing; kept under /tmp, not in the repo).

Per trace, each measurement runs in a fresh Python process (so that its peak RSS is its own):

* ``baseline``: walking every vCPU's exec stream with ``pysched.trace.exec_chunks`` (reading
  the parts and sizing every block: what any streaming analysis of the trace pays at least);
* ``analysis``: ``segment`` (events, streaming segmentation, superFuncTypes, heat) then the
  Page-heatmaps of every epoch: 512-bit Bloom filters and their overlap matrix.

numba's compiled kernels are cached on disk; a warm-up run compiles them, and each analysis
process runs twice: the first run (which also loads the cached machine code) is reported as
``first_run_s``, the second gives ``insn_per_s``. Peak RSS covers both.
Targets (issue 4): at least 100 M instructions/s, at most 2 GB.

Usage: ``python benchmarks/analysis.py --out benchmarks/results/analysis.json``
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIG = Path("/tmp/pysched-bench-analysis-1g")
BIG_CMD = "spin 600 & spin 600 & sysloop 100000; wait"
TARGET_INSN_PER_S = 100e6
TARGET_RSS_GB = 2.0

CHILD = r"""
import json, resource, sys, time
from pysched.trace import open_trace, exec_chunks
mode, path = sys.argv[1], sys.argv[2]
trace = open_trace(path)
t0 = time.perf_counter()
if mode == "baseline":
    insns = 0
    for v in trace.vcpus:
        for c in exec_chunks(trace, v):
            insns += int(c.sizes.sum())
    extra = {}
else:
    from pysched.superfunctions import segment
    from pysched.heatmaps import PageHeatmaps

    def analyse():
        seg = segment(open_trace(path))
        heat = PageHeatmaps(seg)
        pairs = 0
        for k in range(heat.nepochs):
            pairs += heat.epoch(k).bloom_overlap(512).size
        return seg, heat, pairs

    # The first run in a process also loads numba's cached machine code (a fixed cost per
    # process, reported apart); the second is the throughput.
    analyse()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    c0 = time.process_time()
    seg, heat, pairs = analyse()
    cpu = time.process_time() - c0
    insns = seg.total_insns
    extra = {"first_run_seconds": first, "cpu_seconds": cpu, "epochs": heat.nepochs,
             "instances": len(seg.instances), "pieces": len(seg.pieces),
             "heat_rows": len(seg.heat), "overlap_pairs": pairs}
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": dt, "insns": insns, "peak_rss_bytes": rss, **extra}))
"""


def child(mode: str, path: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True,
                       text=True, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"benchmark: {mode} on {path} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def trace_insns(path: Path) -> int:
    """Instructions of a trace from its final plugin.json (0 when unknown)."""
    try:
        info = json.loads((path / "plugin.json").read_text())
        return int(sum(info.get("icount") or []))
    except (OSError, ValueError, TypeError):
        return 0


def largest_shipped(data: Path) -> Path | None:
    if not data.is_dir():
        return None
    found = [p for p in data.iterdir() if (p / "manifest.json").is_file()]
    return max(found, key=trace_insns) if found else None


def ensure_big(path: Path) -> Path:
    """The >= 1 G-instruction trace; recorded with the test guest when missing or too short."""
    if trace_insns(path) >= 1e9:
        return path
    print(f"benchmark: recording {path} ({BIG_CMD!r})", flush=True)
    subprocess.run(["rm", "-rf", str(path)], check=True)
    subprocess.run([sys.executable, "-m", "pysched.cli", "trace", "--cmd", BIG_CMD, "--out",
                    str(path), "--vcpus", "2"], check=True, cwd=REPO)
    n = trace_insns(path)
    if n < 1e9:
        sys.exit(f"benchmark: {path} has only {n} instructions; need at least 1 G")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/analysis.json")
    ap.add_argument("--data", type=Path, default=REPO / "data")
    ap.add_argument("--big", type=Path, default=BIG, help="the >= 1 G-instruction trace")
    args = ap.parse_args()

    load_start = os.getloadavg()
    traces = []
    shipped = largest_shipped(args.data)
    if shipped is not None:
        traces.append(("largest shipped", shipped))
    traces.append((">= 1 G instructions", ensure_big(args.big)))

    print("benchmark: warm-up (numba compiles and caches its kernels)", flush=True)
    child("analysis", min((p for _, p in traces), key=trace_insns))

    results = []
    for label, path in traces:
        base = child("baseline", path)
        ana = child("analysis", path)
        rate = ana["insns"] / ana["seconds"]
        row = {
            "trace": label, "path": str(path), "insns": ana["insns"],
            "command": json.loads((path / "manifest.json").read_text()).get("command")
            if (path / "manifest.json").is_file() else None,
            "analysis_s": round(ana["seconds"], 3), "insn_per_s": rate,
            "first_run_s": round(ana["first_run_seconds"], 3),
            "cpu_s": round(ana["cpu_seconds"], 3),
            "insn_per_cpu_s": ana["insns"] / ana["cpu_seconds"],
            "peak_rss_gb": ana["peak_rss_bytes"] / 2**30,
            "baseline_s": round(base["seconds"], 3),
            "baseline_insn_per_s": base["insns"] / base["seconds"],
            "baseline_peak_rss_gb": base["peak_rss_bytes"] / 2**30,
            "time_vs_baseline": ana["seconds"] / base["seconds"],
            **{k: ana[k] for k in ("epochs", "instances", "pieces", "heat_rows")},
        }
        results.append(row)
        print(f"benchmark: {label}: {row['insns'] / 1e6:.0f} M instructions, "
              f"{rate / 1e6:.0f} M insn/s ({row['time_vs_baseline']:.2f}x the exec_chunks walk "
              f"at {row['baseline_insn_per_s'] / 1e6:.0f} M insn/s), "
              f"peak {row['peak_rss_gb']:.2f} GB", flush=True)

    out = {
        "what": "segmentation + page heatmaps (512-bit Bloom filters and overlaps per epoch)",
        "insn_per_s": min(r["insn_per_s"] for r in results),
        "peak_rss_gb": max(r["peak_rss_gb"] for r in results),
        "targets": {"insn_per_s": TARGET_INSN_PER_S, "peak_rss_gb": TARGET_RSS_GB},
        "baseline": "pysched.trace.exec_chunks walk of the same trace, same run",
        "shipped_trace_found": shipped is not None,
        "traces": results,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(),
                 "loadavg_at_start": load_start, "loadavg_at_end": os.getloadavg()},
        "note": "wall-clock rates; the host is shared, so the load averages say how much of "
                "its 2 cores other work took; insn_per_cpu_s divides by this process's CPU time",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out["meets_targets"] = (out["insn_per_s"] >= TARGET_INSN_PER_S
                            and out["peak_rss_gb"] <= TARGET_RSS_GB)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"benchmark: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
