"""The ``pysched`` command line: one sub-command per pipeline stage.

Each stage module exposes ``add_arguments(parser)`` and ``run(args) -> int``; this file only
wires them up, so that a new stage is one entry in ``_COMMANDS``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from pysched import _limits

# name -> (module, one-line help)
_COMMANDS: dict[str, tuple[str, str]] = {
    "trace": ("pysched.capture.command", "boot a guest under the tracer and run a workload or a command"),
    "check": ("pysched.trace.checker", "check a trace directory's invariants"),
    "analyse": ("pysched.report.command",
                "SuperFunctions, breakups, epoch similarity and page heatmaps of traces"),
    "evaluate": ("pysched.evaluation.command",
                 "replay traces under scheduling policies on simulated cores, epoch by epoch"),
    "sweep": ("pysched.sweep.command",
              "a grid of sandbox runs (workloads, policies, cores, loads, caches) on Dask"),
    "ablate": ("pysched.studies.ablate_command",
               "which rule of the sandbox's model decides a policy's result against a baseline"),
    "study": ("pysched.studies.study_command",
              "a study on Dask, resumable: schedtask-paper (the SchedTask paper's section 6)"),
    "seeds": ("pysched.studies.seeds",
              "the other seeds' tables (HRRS, cache-fair, DVFS placement) on the shipped traces"),
    "cache": ("pysched.evaluation.cache_command",
              "where prepared traces are cached, what is there; --clear removes them"),
}


def main(argv: list[str] | None = None) -> int:
    _limits.lean_process()  # before numpy and pyarrow are imported
    # A limit too low even to load the libraries: say so before importing them (under such a
    # limit an import can spin instead of failing).
    words = sys.argv[1:] if argv is None else argv
    early = _limits.too_small(next((w for w in words if not w.startswith("-")), ""))
    if early:
        print(early, file=sys.stderr)
        return 1
    parser = argparse.ArgumentParser(prog="pysched", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (modname, helptext) in _COMMANDS.items():
        mod = importlib.import_module(modname)
        modules[name] = mod
        mod.add_arguments(sub.add_parser(name, help=helptext, description=helptext))
    for w in words:
        # argparse (3.11) turns "--opt=--" into an empty list, past the option's type check.
        if w.startswith("--") and w.endswith("=--"):
            parser.error(f"argument {w[:-3]}: expected a value, got '--'")
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args) or 0)
    except (MemoryError, OSError, RuntimeError) as exc:
        if not _limits.is_out_of_memory(exc):
            raise
        print(_limits.out_of_memory(args.command), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
