"""``pysched analyse [TRACE ...] --out DIR``: the analysis pipeline on traces, written as
tables, figures and a summary (see :mod:`pysched.report.write` for the layout).

Without a TRACE it analyses every trace shipped in ``data/`` (the directories there with a
``manifest.json``), which is what ``make run`` does.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pysched.superfunctions import DEFAULT_EPOCH
from pysched._argtypes import deprecated_alias, int_at_least, path as path_arg
from pysched._outdir import OutputError, finished_dir
from pysched._pool import Jobs, default_jobs
from pysched.heatmaps import SIZES
from pysched.trace import TraceError, preflight

from .analyse import AnalysisOptions, TraceOverview, analyse_trace
from .write import write_overview, write_trace


def _count(text: str) -> int:
    """An instruction count with an optional k/M/G suffix (``6M``)."""
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}
    t = text.strip().lower()
    try:
        n = int(float(t[:-1]) * scale[t[-1]]) if t and t[-1] in scale else int(t)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not an instruction count: {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return n


def shipped_traces(data: Path) -> list[Path]:
    """The trace directories in ``data`` (those with a ``manifest.json``), sorted by name."""
    if not data.is_dir():
        return []
    return sorted(p for p in data.iterdir() if (p / "manifest.json").is_file())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="*", type=path_arg, metavar="TRACE",
                   help="trace directories (default: every trace in --data)")
    p.add_argument("--data", type=path_arg, default=Path("data"),
                   help="where the shipped traces are (default: ./data)")
    p.add_argument("--out", type=path_arg, default=Path("results"),
                   help="results directory, created when the analysis is finished; it must "
                        "not exist or be empty (default: ./results)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="analyse the complete prefix of an incomplete trace (a killed capture) "
                        "instead of refusing it; the summary says so")
    p.add_argument("--epoch-insns", type=_count, default=DEFAULT_EPOCH,
                   help=f"epoch length in instructions per vCPU (default {DEFAULT_EPOCH:,}: 3 ms "
                        "at 2 GHz and an IPC of 1, as `evaluate --epoch-ms 3` in simulated "
                        "time); an epoch is that times the vCPUs of the machine's "
                        "instructions, in the trace's order across vCPUs")
    p.add_argument("--heatmap-bits", type=int, default=512, choices=SIZES,
                   help="Page-heatmap size for the drawn heatmaps and overlap table "
                        "(128, 256, 512, 1024 or 2048; default 512; the policies' and sweeps' "
                        "heatmap_bits)")
    deprecated_alias(p, "--bloom-bits", "--heatmap-bits", type=int, choices=SIZES)
    p.add_argument("--tau-epochs", type=int_at_least(1), default=60,
                   help="at most this many epochs enter the tau-b test (default 60)")
    p.add_argument("--warmup-epochs", type=int_at_least(0), default=5, metavar="N",
                   help="epochs left out of the steady-state similarity figures (default 5; "
                        "`trace --warmup` is guest seconds before the region)")
    deprecated_alias(p, "--warmup", "--warmup-epochs", type=int_at_least(0))
    p.add_argument("--workers", type=int_at_least(1), default=None, metavar="N",
                   help="worker processes, each analysing one trace at a time (default: one per "
                        "core, at most one per trace; 1: all in this process)")
    p.add_argument("--keep-harness", action="store_true",
                   help="count the capture harness's own work inside the region (left out by "
                        "default: pysched.superfunctions.harness)")


def run(args: argparse.Namespace) -> int:
    try:
        opts = AnalysisOptions(epoch_len=args.epoch_insns, bloom_bits=args.heatmap_bits,
                               tau_epochs=args.tau_epochs, warmup=args.warmup_epochs,
                               keep_harness=args.keep_harness)
    except ValueError as exc:
        print(f"pysched analyse: {exc}", file=sys.stderr)
        return 2
    traces = list(args.traces) or shipped_traces(args.data)
    if not traces:
        print(f"pysched analyse: no trace given and {args.data} has no trace directory "
              "(one with a manifest.json)", file=sys.stderr)
        return 2
    for t in traces:
        if not t.is_dir():
            print(f"pysched analyse: {t}: not a directory", file=sys.stderr)
            return 2
    names = [t.name for t in traces]
    if len(set(names)) != len(names):
        print(f"pysched analyse: two traces have the same name ({names}); their results "
              "would overwrite each other", file=sys.stderr)
        return 2
    order = sorted(range(len(traces)), key=lambda i: -_size(traces[i]))  # longest first
    try:
        with Jobs(default_jobs(len(traces), args.workers)) as jobs:
            # Every trace passes the checker's cheap checks before minutes of analysis.
            checked: list = [None] * len(traces)
            try:
                for i, got in jobs.run(_preflight, [(t, args.allow_incomplete)
                                                    for t in traces]):
                    checked[i] = got
            except TraceError as exc:
                print(f"pysched analyse: {exc}", file=sys.stderr)
                return 1
            with finished_dir(args.out) as tmp:
                for i, (trace, note) in enumerate(checked):
                    if note:
                        print(f"pysched analyse: {traces[i]}: {note}", file=sys.stderr)
                print(f"[analyse] {len(traces)} trace(s) on {jobs.jobs} process(es): "
                      "segmenting, characterising, heatmaps ...", file=sys.stderr, flush=True)
                overviews: list = [None] * len(traces)
                work = [(traces[i], *checked[i], opts, tmp) for i in order]
                for k, (o, secs) in jobs.run(_analyse_one, work):
                    overviews[order[k]] = o
                    print(_line(traces[order[k]], o.summary, secs), flush=True)
                write_overview(overviews, opts, tmp)
    except OutputError as exc:
        print(f"pysched analyse: {exc}", file=sys.stderr)
        return 2
    except (TraceError, FileNotFoundError) as exc:
        print(f"pysched analyse: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"pysched analyse: writing {args.out}: {exc}", file=sys.stderr)
        return 1
    print(f"results in {args.out}/ (summary.md, summary.json, figures, per-trace tables)")
    return 0


def _size(path: Path) -> int:
    """Bytes of the trace's files: how long its analysis takes, roughly."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _preflight(job: tuple[Path, bool]):
    t, allow = job
    return preflight(t, allow_incomplete=allow)


def _analyse_one(job: tuple) -> tuple[TraceOverview, float]:
    """One trace analysed and its tables and figures written (in a worker process)."""
    t, trace, note, opts, out = job
    t0 = time.perf_counter()
    a = analyse_trace(t, opts, trace=trace, note=note)
    write_trace(a, opts, out)
    return a.overview(opts), time.perf_counter() - t0


def _line(t: Path, s: dict, secs: float) -> str:
    b = s["breakup_paper_categories"]
    return (f"{t}: {s['instructions']:,} instructions, {s['full_epochs']} epochs, "
            f"{s['instances']:,} SuperFunction instances; application "
            f"{100 * b['application']:.1f} %, system calls {100 * b['syscall']:.1f} %, "
            f"interrupts {100 * b['interrupt']:.1f} %, bottom halves "
            f"{100 * b['bottom_half']:.1f} % ({secs:.1f} s)")
