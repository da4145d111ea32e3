"""The ``pysched`` command line: one sub-command per pipeline stage.

Each stage module exposes ``add_arguments(parser)`` and ``run(args) -> int``; this file only
wires them up, so that a new stage is one entry in ``_COMMANDS``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
_COMMANDS: dict[str, tuple[str, str]] = {
    "trace": ("pysched.capture.command", "boot a guest under the tracer and run a workload or a command"),
    "check": ("pysched.trace.checker", "check a trace directory's invariants"),
    "analyse": ("pysched.report.command",
                "SuperFunctions, breakups, epoch similarity and page heatmaps of traces"),
    "evaluate": ("pysched.evaluation.command",
                 "replay traces under scheduling policies on simulated cores, epoch by epoch"),
    "seeds": ("pysched.evaluation.seeds",
              "the other seeds' tables (HRRS, cache-fair, DVFS placement) on the shipped traces"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pysched", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (modname, helptext) in _COMMANDS.items():
        mod = importlib.import_module(modname)
        modules[name] = mod
        mod.add_arguments(sub.add_parser(name, help=helptext, description=helptext))
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
