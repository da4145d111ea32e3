"""The ``pysched`` command line: one sub-command per pipeline stage.

Each stage module exposes ``add_arguments(parser)`` and ``run(args) -> int``; this file only
wires them up, so that a new stage is one entry in ``_COMMANDS``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from pysched import _limits, _signals

# name -> (module, one-line help, example closing its help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "trace": ("pysched.capture.command",
              "boot a guest under the tracer and run a workload or a command",
              "pysched trace apache --out out/apache --roi-insns 150M\n"
              "         pysched trace --cmd 'sysloop 1000; spin 50 & wait' --vcpus 2 "
              "--out out/run1"),
    "check": ("pysched.trace.checker", "check a trace directory's invariants",
              "pysched check data/apache"),
    "devices": ("pysched.trace.devices_command",
                "which device each interrupt vector is, and which kick each completion answers",
                "pysched devices data/find"),
    "analyse": ("pysched.report.command",
                "SuperFunctions, breakups, epoch similarity and page heatmaps of traces",
                "pysched analyse data/apache data/find --out out/analysis"),
    "evaluate": ("pysched.evaluation.command",
                 "replay traces under scheduling policies on simulated cores, epoch by epoch",
                 "pysched evaluate data/apache --policies linux,schedtask --cores 8 --load 2 "
                 "--epochs 5 --out out/eval\n"
                 "         pysched evaluate data/netserver-10b --policy-file "
                 "examples/irq_core.py --policies linux,irq-core --cores 2 --out out/irq\n"
                 "the headline study (make run): pysched study schedtask-paper --data data "
                 "--cores 8 --load 2 --variants none --epochs 5 --out results/sandbox"),
    "sweep": ("pysched.sweep.command",
              "a grid of sandbox runs (workloads, policies, cores, loads, caches) on Dask",
              "pysched sweep sweeps/example.toml --out results/sweep"),
    "ablate": ("pysched.studies.ablate_command",
               "which rule of the sandbox's model decides a policy's result against a baseline",
               "pysched ablate data/apache data/find --policy schedtask --baseline linux "
               "--cores 8 --load 2 --epochs 5 --factor schedtask:steal=same,any "
               "--out out/ablation"),
    "study": ("pysched.studies.study_command",
              "a study on Dask, resumable: schedtask-paper (the SchedTask paper's section 6)",
              "pysched study schedtask-paper --data data --workloads iscp --dry-run "
              "--out out/paper"),
    "seeds": ("pysched.studies.seeds",
              "the other seeds' tables (HRRS, cache-fair, DVFS placement) on the shipped traces",
              "pysched seeds --data data --out results/seeds"),
    "cache": ("pysched.evaluation.cache_command",
              "where prepared traces are cached, what is there; --prepare fills it, "
              "--clear removes it",
              "pysched cache\n         pysched cache --prepare data/find data/apache\n"
              "         pysched cache --clear"),
}


def version() -> str:
    """The installed pysched's version (the source tree's pyproject when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed("pysched")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(only: set[str] | None = None
                 ) -> tuple[argparse.ArgumentParser, dict[str, object]]:
    """The ``pysched`` parser and, per sub-command, the module that runs it.

    Parameters
    ----------
    only : set of str, optional
        The sub-commands whose modules are imported and whose options are added (default:
        all). The others are listed with their one-line help only, so that one command does
        not pay for importing every stage's libraries.
    """
    parser = argparse.ArgumentParser(prog="pysched", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pysched {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (modname, helptext, example) in _COMMANDS.items():
        p = sub.add_parser(name, help=helptext, description=helptext,
                           epilog=f"example: {example}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if only is None or name in only:
            modules[name] = importlib.import_module(modname)
            modules[name].add_arguments(p)
    return parser, modules


def main(argv: list[str] | None = None) -> int:
    _limits.lean_process()  # before numpy and pyarrow are imported
    # A limit too low even to load the libraries: say so before importing them (under such a
    # limit an import can spin instead of failing).
    words = sys.argv[1:] if argv is None else argv
    # the sub-command: the first word that is no option (the top level's --help and --version
    # take no value)
    command = next((w for w in words if not w.startswith("-")), "")
    early = _limits.too_small(command)
    if early:
        print(early, file=sys.stderr)
        return 1
    parser, modules = build_parser({command})
    for w in words:
        # argparse (3.11) turns "--opt=--" into an empty list, past the option's type check.
        if w.startswith("--") and w.endswith("=--"):
            parser.error(f"argument {w[:-3]}: expected a value, got '--'")
    args = parser.parse_args(argv)
    try:
        # Ctrl-C, SIGTERM and SIGHUP: the commands' clean-up runs, then one line, not a
        # traceback (results stay unfinished)
        with _signals.unwinding():
            return int(modules[args.command].run(args) or 0)
    except KeyboardInterrupt as e:
        print(f"\npysched {args.command}: {_signals.how(e)}", file=sys.stderr)
        return _signals.exit_status(e)
    except (MemoryError, OSError, RuntimeError) as exc:
        if not _limits.is_out_of_memory(exc):
            raise
        print(_limits.out_of_memory(args.command), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
