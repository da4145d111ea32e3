"""The command-line side of a study whose runs are sweep points (``pysched ablate``,
``pysched study``): its machine and Dask options, and running the points not yet stored under
``OUT/points`` with progress lines, so that an interrupted study resumes when run again."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from pysched import _signals
from pysched._argtypes import positive_int, path as path_arg
from pysched.evaluation.cache_command import add_no_cache


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--machine``, ``--scheduler``, ``--workers`` and ``--no-cache``."""
    p.add_argument("--machine", type=path_arg, default=None,
                   help="machine TOML/JSON, e.g. machines/seed001-acmp.toml (its hierarchy "
                        "and first core type; default: the SchedTask paper's Table 2)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:8786",
                   help="an existing Dask scheduler (default: a local cluster)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes of the local cluster (default: one per core)")
    add_no_cache(p)


def load_machine(path: Path | None):
    """The ``--machine`` file's :class:`~pysched.models.machine.MachineConfig` (None: none
    given); ValueError naming the option."""
    if path is None:
        return None
    from pysched.models.configio import ConfigError
    from pysched.models.machine import MachineConfig
    try:
        return MachineConfig.load(path)
    except (ConfigError, OSError) as e:
        raise ValueError(f"--machine {path}: {e}") from None


def run_points(points: Sequence, out: Path, args: argparse.Namespace, tag: str,
               err: Callable[[str], int]) -> int:
    """Run the ``points`` not stored under ``out/points`` on Dask (``args.scheduler``,
    ``args.workers``, ``args.no_cache``), a line on stderr per point.

    Returns
    -------
    int
        0 when every point is stored; else the exit status, after ``err`` said why: 128 + the
        signal when interrupted (130 Ctrl-C, 143 SIGTERM), 1 when a point failed or no
        scheduler answered.
    """
    from pysched.sweep.run import run_sweep
    from pysched.sweep.store import ResultStore
    store = ResultStore(out / "points")
    say = (lambda s: print(f"[{tag}] {s}", file=sys.stderr, flush=True))
    try:
        # SIGTERM unwinds like Ctrl-C: the local cluster is shut down on the way out
        with _signals.unwinding():
            outcome = run_sweep(
                points, store.out, scheduler=args.scheduler, workers=args.workers,
                cache=not args.no_cache,
                on_start=lambda n, before, dash: say(f"{n + before} runs: {n} to run, "
                                                      f"{before} finished before"),
                on_done=lambda p, e: say(f"{p.label()}: {'FAILED: ' + e if e else 'stored'}"))
    except KeyboardInterrupt as e:
        n = sum(store.finished(p) for p in points)
        err(f"{_signals.how(e)}; {n} of {len(points)} runs are stored in {out} (run again to "
            f"finish)")
        return _signals.exit_status(e)
    except OSError as e:  # e.g. no scheduler at --scheduler
        err(str(e))
        return 1
    if outcome.failed:
        err(f"{len(outcome.failed)} run(s) failed (see above); the others are stored in "
            f"{out}; nothing summarised")
        return 1
    return 0


__all__ = ["add_arguments", "load_machine", "run_points"]
