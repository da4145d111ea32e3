"""``pysched seeds``: the tables of the other seeds' notebooks (05 HRRS, 06 cache-fair, 07 DVFS
placement) on the shipped traces, beside the papers' figures, as ``make run``'s last step.

The same studies as the notebooks (:mod:`.seed001_hrrs`, :mod:`.seed002_dvfs`,
:mod:`.seed003_cache_fair`), each run through :func:`pysched.evaluation.runner.evaluate`; a seed
whose traces are not in ``--data`` is left out with a line saying which trace is missing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pysched._argtypes import int_at_least, path as path_arg
from pysched.evaluation.cache_command import add_no_cache

#: Seed 001's identifiers (the CSV's) -> how the summary names them; + is sooner.
SPEEDUPS = {"hrrs_vs_linux": "HRRS sooner than linux",
            "hrrs_vs_fairness": "HRRS sooner than Fairness",
            "hw_1ms_vs_sw_4ms": "HRRS at 1 ms (hardware) sooner than at 4 ms (software)"}
#: Seed 003's best-effort measures (the CSV's) -> how the summary names them; + is a loss.
LOSSES = {"cpu_time": "CPU time lost up to the principal's completion",
          "cpu_share": "share of that time lost"}

#: seed -> the policy its headline is about, and the ablation that explains its gain (the
#: baseline and settings of ``pysched ablate``).
ABLATE = {
    "001": ("hrrs", "pysched ablate data/barrier --policy hrrs --baseline linux --machine "
                    "machines/seed001-acmp.toml --cores 4 --load 1 --out DIR"),
    "002": ("profile-dvfs", None),
    "003": ("cache-fair", None),
}

#: seed -> the shipped traces its table needs
NEEDS = {
    "001": ("barrier",),
    "002": ("netserver-10b", "netserver-100kb", "netserver-1mb", "apache-short"),
    "003": ("chase-mid", "chase-large", "chase-small", "netserver-10b", "netserver-100kb",
            "netserver-1mb", "apache-short"),
}


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    out = ["| " + " | ".join([str(df.index.name or "")] + cols) + " |",
           "|" + "---|" * (len(cols) + 1)]
    for idx, row in df.iterrows():
        out.append("| " + " | ".join([str(idx)] + [str(v) for v in row]) + " |")
    return "\n".join(out)


def seed_001(data: Path, prepare) -> tuple[str, str, dict[str, pd.DataFrame]]:
    from . import seed001_hrrs as a
    runs = a.run_policies(prepare(data / "barrier"))
    sp = a.speedups(runs)
    gap, n = runs.loc["linux", "barrier_interval_ms"], runs.loc["linux", "barrier_releases"]
    t = pd.DataFrame({"ours": [_pct(v) for v in sp["ours"]],
                      "paper": [_pct(v) for v in sp["paper"]]},
                     index=[SPEEDUPS.get(i, i) for i in sp.index])
    t.index.name = "completion time (+ is sooner)"
    x = sp.loc["hrrs_vs_linux"]
    head = (f"- **Seed 001 (HRRS):** the barrier program finishes {_pct(x['ours'])} sooner "
            f"under HRRS than under linux (paper {_pct(x['paper'])}).")
    md = ("## Seed 001: HRRS on one big and three small cores (`barrier`, 4 threads)\n\n"
          "Completion time of the program's threads (`notebooks/05-hrrs.ipynb`), one copy, "
          f"switch cost `{a.SWITCH_COST}`: the 1,000 cycles per context switch seed 001 states "
          "(section 4.2; `hrrs`'s `paper_model`), not the default `traced`. "
          + (f"Under linux the program's barrier releases come every {gap:.2f} ms (median "
             f"over {n} releases), against HRRS's 1 ms hardware quantum.\n\n"
             if np.isfinite(gap) else
             "The replay has fewer than two barrier releases, so no barrier interval.\n\n")
          + _table(t))
    return md, head, {"seed001_runs": runs, "seed001_speedups": sp}


def seed_002(data: Path, prepare) -> tuple[str, str, dict[str, pd.DataFrame]]:
    from . import seed002_dvfs as dvfs
    names = {"10b": "netserver-10b", "100kb": "netserver-100kb", "1mb": "netserver-1mb",
             "apache": "apache-short"}
    table = dvfs.compare({k: prepare(data / d) for k, d in names.items()})
    rel = dvfs.summary(table)
    t = rel.map(_pct)
    t.index.name = "trace (+ is longer, more energy)"
    dv = [c for c in rel.columns if c.startswith("profile-dvfs")]
    head = ("- **Seed 002 (DVFS placement):** `profile-dvfs` against every core fast: "
            + "; ".join(f"{k} " + ", ".join(f"{c.split()[-1]} {_pct(rel.loc[k, c])}"
                                             for c in dv) for k in rel.index) + ".")
    paper = "\n".join(f"- {k}: {v}" for k, v in dvfs.PAPER.items())
    md = ("## Seed 002: OS components on dedicated cores at DVFS levels (8 cores, 4 the OS's)\n\n"
          "Completion time and energy of each configuration against `all-fast` (the same "
          "placement, every core at 2.6 GHz); slow cores at 1.0 GHz, one copy of each trace, "
          "the default switch cost (`traced`) (`notebooks/07-dvfs.ipynb`).\n\n" + _table(t)
          + "\n\nThe paper (section 4.4, lighttpd):\n\n" + paper)
    return md, head, {"seed002_runs": table, "seed002_summary": rel}


def seed_003(data: Path, prepare) -> tuple[str, str, dict[str, pd.DataFrame]]:
    from . import seed003_cache_fair as cf
    names = sorted({cf.PRINCIPAL, *(n for s in cf.ESTIMATE for n in s),
                    *(n for s in cf.SCHEDULES.values() for n in s)})
    traces = {n: prepare(data / n) for n in names}
    est = cf.estimate_fair_rate(traces)
    runs = cf.run_schedules(traces, est["fair_rate"])
    var = cf.variability(runs)
    loss = cf.best_effort_loss(runs)
    lo, hi = cf.PAPER["variability_default"]
    t = var.map(_pct).rename(columns=lambda c: f"{c} (+ is slower)")
    t.index.name = "scheduler"
    lt = loss.map(_pct).rename(columns=LOSSES)
    lt.index.name = "schedule (+ is a loss)"
    head = ("- **Seed 003 (cache-fair):** the principal's slowest schedule over its fastest "
            + ", ".join(f"{_pct(var.loc[k, 'max vs min'])} under {k}" for k in var.index)
            + f" (paper {lo:.0%}-{hi:.0%} under the default scheduler, under "
            f"{cf.PAPER['variability_cache_fair']:.0%} under cache-fair).")
    md = ("## Seed 003: cache-fair (2 cores, shared 4 MiB L3, principal `chase-mid`)\n\n"
          f"Fair miss rate {1e3 * est['fair_rate']:.2f} misses per 1,000 cycles "
          f"({len(est['samples'])} samples; default switch cost, `traced`). Variability of the "
          "principal's completion time, "
          f"the slow schedule (three `chase-large`) against the OS-intensive ones "
          f"(`notebooks/06-cache-fair.ipynb`); paper: {lo:.0%}-{hi:.0%} with the default "
          f"scheduler, under {cf.PAPER['variability_cache_fair']:.0%} with cache-fair.\n\n"
          + _table(t)
          + "\n\nWhat the best-effort thread lost under cache-fair (its CPU time up to the "
          "principal's completion, and its share of that time); paper: under "
          f"{cf.PAPER['best_effort_mean']:.0%} on average, at most "
          f"{cf.PAPER['best_effort_max']:.0%}.\n\n" + _table(lt))
    return md, head, {"seed003_runs": runs, "seed003_variability": var, "seed003_best_effort": loss,
                "seed003_samples": est["samples"]}


SEEDS = {"001": seed_001, "002": seed_002, "003": seed_003}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=path_arg, default=Path("data"),
                   help="where the shipped traces are (default: ./data)")
    p.add_argument("--out", type=path_arg, default=Path("results/seeds"),
                   help="results directory, created when every table is written; it must "
                        "not exist or be empty (default: ./results/seeds)")
    p.add_argument("--ablation", type=path_arg, action="append", default=[], metavar="DIR",
                   help="a directory pysched ablate wrote (its ablation.csv) for a seed's "
                        "policy (hrrs, profile-dvfs, cache-fair): the headline quotes its "
                        "one-line reason; repeatable")
    p.add_argument("--workers", type=int_at_least(1), default=None, metavar="N",
                   help="worker processes, each running one seed's study at a time (default: one "
                        "per core, at most one per seed; 1: all in this process)")
    add_no_cache(p)


def run(args: argparse.Namespace) -> int:
    from pysched._outdir import OutputError, finished_dir
    from pysched.trace import TraceError, preflight_all

    from .ablation import AblationError, read_verdicts, usable
    if not args.data.is_dir():
        print(f"pysched seeds: --data {args.data} is not a directory", file=sys.stderr)
        return 2
    try:
        # each seed's ablation has the seed's own setting; one of another model is not quoted
        kept, left_out = usable(args.ablation)
        reasons = read_verdicts(kept)
    except AblationError as exc:
        print(f"pysched seeds: --ablation: {exc}", file=sys.stderr)
        return 2
    for note in left_out:
        print(f"pysched seeds: --ablation {note}; its reasons are not quoted", file=sys.stderr)
    try:
        # the checker on every trace a seed that will run needs, before any long work
        _, todo = _runnable(args.data)
        preflight_all([args.data / t for t in sorted({t for seed in todo for t in NEEDS[seed]})],
                      cache=not args.no_cache)
        with finished_dir(args.out) as tmp:
            text = _write(args.data, tmp, not args.no_cache, reasons, args.workers)
    except OutputError as exc:
        print(f"pysched seeds: {exc}", file=sys.stderr)
        return 2
    except TraceError as exc:
        print(f"pysched seeds: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0


def _run_seed(job: tuple[str, Path, bool]) -> tuple[str, str, dict[str, pd.DataFrame], float]:
    """One seed's study (in a worker process when there are several): its section, headline
    line, tables and seconds. Each trace is prepared once per process."""
    from pysched.evaluation.runner import prepare
    seed, data, cache = job
    prepared: dict[Path, object] = {}

    def prep(path: Path):
        if path not in prepared:
            prepared[path] = prepare(path, cache=cache)
        return prepared[path]
    t0 = time.perf_counter()
    md, head, tables = SEEDS[seed](data, prep)
    return md, head, tables, time.perf_counter() - t0


def _runnable(data: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Each seed's traces that are not in ``data``, and the seeds that have all theirs."""
    missing = {seed: [t for t in NEEDS[seed] if not (data / t / "manifest.json").is_file()]
               for seed in SEEDS}
    return missing, [seed for seed in SEEDS if not missing[seed]]


def _write(data: Path, out: Path, cache: bool = True, reasons: dict[str, str] | None = None,
           jobs: int | None = None) -> str:
    """Every seed's tables into ``out`` and its summary; returns the summary. ``cache``: use
    the on-disk cache of prepared traces; ``reasons``: policy -> the one-line verdict of its
    ablation (:func:`.ablation.read_verdicts`); ``jobs``: seeds run at once, each in its own
    process (default: one per core)."""
    from pysched._pool import Jobs, default_jobs
    reasons = reasons or {}
    missing, todo = _runnable(data)
    done: dict[str, tuple] = {}
    with Jobs(default_jobs(len(todo), jobs)) as pool:
        for i, got in pool.run(_run_seed, [(seed, data, cache) for seed in todo]):
            done[todo[i]] = got
            print(f"pysched seeds: seed {todo[i]} in {got[3]:.0f} s", file=sys.stderr)
    parts, heads, timings, unexplained = [], [], [], []
    for seed in SEEDS:
        if missing[seed]:
            parts.append(f"## Seed {seed}\n\nLeft out: {data / missing[seed][0]} is not there "
                         "(make data-seeds).")
            heads.append(f"- **Seed {seed}:** left out ({data / missing[seed][0]} is not "
                         "there).")
            continue
        md, head, tables, secs = done[seed]
        for name, df in tables.items():
            df.to_csv(out / f"{name}.csv")
        parts.append(md)
        policy, how = ABLATE[seed]
        if policy in reasons:
            head += f" Why: {reasons[policy]}."
        elif how is not None:
            unexplained.append(f"`{how}`")
        heads.append(head)
        timings.append(f"| {seed} | {secs:.0f} |")
    why = ("\n\nWhy a seed's policy wins or loses is not measured in this run: "
           + "; ".join(unexplained) + " changes each rule of the model alone, and "
           "`pysched seeds --ablation DIR` puts its one-line reason here." if unexplained
           else "")
    parts.insert(0, "# The other seeds' schedulers on the shipped traces\n\n## Headline\n\n"
                 + "\n".join(heads) + why
                 + "\n\nEach seed's section gives its setting and table.")
    if timings:
        parts.append("## Host timings\n\nSeconds each seed took on the host that ran it (not "
                     "a result).\n\n| seed | s |\n|---|---|\n" + "\n".join(timings))
    text = "\n\n".join(parts) + "\n"
    (out / "summary.md").write_text(text)
    return text


__all__ = ["ABLATE", "NEEDS", "SEEDS", "add_arguments", "run"]
