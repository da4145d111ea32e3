"""``pysched sweep SWEEP.toml --out DIR``: a grid of sandbox runs on Dask, stored as they finish."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pysched import _signals
from pysched._argtypes import int_at_least, path as path_arg
from pysched.evaluation.cache_command import add_no_cache
from pysched.policies.files import add_argument as add_policy_file_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", type=path_arg, metavar="SWEEP.toml",
                   help="sweep file: [[grid]] and [[point]] tables (see sweeps/example.toml)")
    add_policy_file_argument(p)
    p.add_argument("--out", type=path_arg, required=True,
                   help="results directory; finished points in it are skipped")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:8786",
                   help="an existing Dask scheduler (default: a local cluster on this machine)")
    p.add_argument("--workers", type=int_at_least(1), default=None,
                   help="worker processes of the local cluster (default: one per core)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the points and which are finished, run nothing")
    add_no_cache(p)


class _Progress:
    """A bar on a terminal (tqdm when installed), else a line per finished point."""

    def __init__(self) -> None:
        self.bar = None
        self.done = 0
        self.total = 0

    def start(self, todo: int, before: int, dashboard: str | None) -> None:
        self.total = todo
        say(f"{todo + before} points: {todo} to run, {before} finished before")
        if dashboard:
            say(f"dashboard: {dashboard}")
        if todo and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=todo, unit="point", file=sys.stderr)
            except ImportError:
                pass

    def point(self, point, error: str | None) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
            if error:
                self.bar.write(f"[sweep] FAILED {point.label()}: {error}")
        elif sys.stderr.isatty() and not error:
            print(f"\r[sweep] {self.done}/{self.total} points", end="", file=sys.stderr,
                  flush=True)
        else:
            state = f"FAILED: {error}" if error else "stored"
            say(f"{self.done}/{self.total} {point.label()} {state}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif sys.stderr.isatty() and self.total:
            print(file=sys.stderr)


def say(text: str) -> None:
    print(f"[sweep] {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from pysched.policies import PolicyFileError, load_policy_files

    from .spec import SweepSpecError, load_spec
    try:
        load_policy_files(args.policy_file)  # before the file's policies are checked
        sweep = load_spec(args.spec)
    except (PolicyFileError, SweepSpecError) as e:
        print(f"pysched sweep: {e}", file=sys.stderr)
        return 2
    out: Path = args.out
    if out.exists() and not out.is_dir():
        print(f"pysched sweep: --out {out} exists and is not a directory", file=sys.stderr)
        return 2
    from .store import ResultStore
    if args.dry_run:
        store = ResultStore(out) if out.is_dir() else None
        for p in sweep.points:
            done = store is not None and store.finished(p)
            print(f"{p.key}  {'finished' if done else 'to run  '}  {p.label()}")
        return 0
    from pysched._outdir import OutputError, locked_dir
    from pysched.trace import TraceError, preflight_all
    try:
        # every trace of the sweep through the checker before any point runs
        preflight_all(sorted({p.trace for p in sweep.points}), cache=not args.no_cache)
    except TraceError as e:
        print(f"pysched sweep: {e}", file=sys.stderr)
        return 1
    try:
        with locked_dir(out):
            return _run(args, sweep.points, out)
    except OutputError as e:
        print(f"pysched sweep: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, points: tuple, out: Path) -> int:
    """Run and summarise the sweep's ``points`` into ``out``, which this command holds."""
    from .store import ResultStore
    store = ResultStore(out)
    (out / "sweep.toml").write_bytes(args.spec.read_bytes())
    from .run import run_sweep
    progress = _Progress()
    try:
        # SIGTERM unwinds like Ctrl-C, so the local cluster is shut down on the way out
        with _signals.unwinding():
            outcome = run_sweep(points, out, scheduler=args.scheduler, workers=args.workers,
                                on_start=progress.start, on_done=progress.point,
                                cache=not args.no_cache)
    except KeyboardInterrupt as e:
        progress.close()
        n = sum(store.finished(p) for p in points)
        print(f"pysched sweep: {_signals.how(e)}; {n} of {len(points)} points are stored in "
              f"{out} (run again to finish)", file=sys.stderr)
        return _signals.exit_status(e)
    except OSError as e:  # e.g. no scheduler at --scheduler
        progress.close()
        print(f"pysched sweep: {e}", file=sys.stderr)
        return 1
    progress.close()
    from .summary import summarise, summary_text
    table = summarise(store.read(list(points), kind="runs"))
    table.to_csv(out / "summary.csv", index=False)
    text = summary_text(table)
    (out / "summary.md").write_text(f"# Sweep {args.spec}\n\n{text}\n")
    print(text)
    if outcome.failed:
        print(f"pysched sweep: {len(outcome.failed)} point(s) failed (see above); the others "
              f"are stored in {out}", file=sys.stderr)
        return 1
    return 0
