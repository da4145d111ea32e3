"""``pysched cache``: where prepared traces are cached, what is there, preparing traces ahead,
and clearing it; and the ``--no-cache`` option of the commands that prepare traces."""
from __future__ import annotations

import argparse
import sys
import textwrap
import time
from pathlib import Path

from pysched._argtypes import path as path_arg

from . import prepared_cache


def add_no_cache(p: argparse.ArgumentParser) -> None:
    """``--no-cache`` (stored as ``no_cache``) on a command that prepares traces."""
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor store prepared traces: segment every trace again "
                        f"(by default {prepared_cache.describe()})")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``pysched cache``'s options; its description says where the cache lives."""
    where = textwrap.fill(f"The cache directory is ${prepared_cache.ENV_DIR}, else "
                          "$XDG_CACHE_HOME/pysched/prepared, else ~/.cache/pysched/prepared; "
                          f"here {prepared_cache.cache_dir()}. Deleting it (rm -rf) only "
                          "costs the next preparations their time.", width=79)
    p.description = f"{p.description}\n\n{where}" if p.description else where
    p.add_argument("--clear", action="store_true",
                   help="remove every cached prepared trace")
    p.add_argument("--prepare", nargs="+", metavar="TRACE", type=path_arg,
                   help="prepare these trace directories for the sandbox now and store them "
                        "(those in the cache already are left as they are), so that the first "
                        "evaluation of each starts at once")
    p.add_argument("--jobs", type=int, default=None,
                   help="traces prepared at once with --prepare, each in its own process "
                        "(default: one per core)")


def _prepare_one(path: Path) -> tuple[bool, str]:
    """Prepare ``path`` into the cache (one piece of ``--prepare``, in a worker): whether it
    worked, and the line to print."""
    from pysched.trace import preflight

    from .runner import is_prepared, prepare
    t0 = time.perf_counter()
    try:
        # the checker's cheap checks first: a trace `pysched check` rejects is not prepared
        trace, _ = preflight(path)
        if is_prepared(path):
            return True, f"{path}: in the cache already"
        prepare(path, trace=trace)
    except (ValueError, OSError) as e:  # TraceError and TraceRejected are ValueErrors
        return False, f"pysched cache: {path}: not prepared: {e}"
    return True, f"{path}: prepared in {time.perf_counter() - t0:.1f} s"


def prepare_ahead(paths: list[Path], jobs: int | None = None) -> int:
    """Prepare every trace of ``paths`` into the cache, ``jobs`` at once (default one per
    core): 0, or 1 when one of them failed (each failure is reported with its trace; the
    others are prepared all the same)."""
    from pysched._pool import Jobs, default_jobs
    failed = 0
    with Jobs(default_jobs(len(paths), jobs)) as pool:
        for _, (ok, line) in pool.run(_prepare_one, paths):
            print(line, file=sys.stdout if ok else sys.stderr, flush=True)
            failed += not ok
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    """List the cache's entries and their sizes, prepare traces into it (``--prepare``), or
    remove them all (``--clear``); the exit status."""
    root = prepared_cache.cache_dir()
    if args.prepare:
        bad = ("--clear and --prepare together: give one" if args.clear else
               f"--jobs {args.jobs}: give 1 or more" if args.jobs is not None and args.jobs < 1
               else None)
        if bad:
            print(f"pysched cache: {bad}", file=sys.stderr)
            return 2
        return prepare_ahead(args.prepare, args.jobs)
    if args.clear:
        n = prepared_cache.clear(root)
        print(f"{root}: {n} prepared trace{'s' if n != 1 else ''} removed")
        return 0
    found = prepared_cache.entries(root)
    for entry, size in found:
        print(f"{size / 2**20:9.1f} MiB  {entry.name}")
    total = sum(size for _, size in found)
    print(f"{root}: {len(found)} prepared trace{'s' if len(found) != 1 else ''}, "
          f"{total / 2**20:.1f} MiB")
    return 0
