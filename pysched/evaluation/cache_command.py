"""``pysched cache``: where prepared traces are cached, what is there, and clearing it; and
the ``--no-cache`` option of the commands that prepare traces."""
from __future__ import annotations

import argparse
import textwrap

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


def run(args: argparse.Namespace) -> int:
    """List the cache's entries and their sizes, or remove them all (``--clear``); 0."""
    root = prepared_cache.cache_dir()
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
