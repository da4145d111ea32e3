"""``pysched ablate``: which rule of the sandbox's model decides a policy's result."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from pysched._argtypes import float_in, path as path_arg, path_text, positive_int
from pysched.constants import EPOCH_MS_RANGE
from pysched.policies.files import add_argument as add_policy_file_argument

from . import on_dask


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="+", metavar="TRACE", type=path_text,
                   help="trace directories")
    p.add_argument("--policy", required=True, action="append", dest="policies",
                   metavar="POLICY",
                   help="a policy under study, optionally NAME:key=value (see `pysched "
                        "evaluate --list`); repeatable: the policies share the baseline's "
                        "runs")
    add_policy_file_argument(p)
    p.add_argument("--baseline", default="linux", help="the policy it is compared with "
                   "(default linux)")
    p.add_argument("--cores", type=positive_int, default=8, help="simulated cores (default 8)")
    p.add_argument("--load", type=positive_int, default=2,
                   help="the paper's load kX (default 2: section 6.1's 2X)")
    p.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                   help="measure a window of the first N epochs of every run (default: the "
                        "whole replay)")
    p.add_argument("--epoch-ms", type=float_in(*EPOCH_MS_RANGE), default=3.0,
                   help="epoch length in simulated milliseconds, 0.1 to 1000 (default 3)")
    p.add_argument("--factor", action="append", default=[], metavar="SPEC",
                   help="a policy parameter as a factor, POLICY:param=v1,v2 (v1 for the "
                        "defaults), or a model factor restricted to some settings, e.g. "
                        "switch_cost=traced,zero; repeatable. Every model factor is studied "
                        "(pysched.studies.ablation.FACTORS)")
    p.add_argument("--out", type=path_arg, required=True,
                   help="results directory: runs are stored under OUT/points as they finish, "
                        "so a re-run into the same OUT resumes; ablation.csv and ablation.md "
                        "are written when every run is finished")
    on_dask.add_arguments(p)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    from pysched.policies import PolicyFileError, get_policy, load_policy_files
    from pysched.sweep.spec import SweepSpecError

    from .ablation import FACTORS, AblationError, parse_factor, points
    err = (lambda m: print(f"pysched ablate: {m}", file=sys.stderr) or 2)
    try:
        load_policy_files(args.policy_file)
    except PolicyFileError as e:
        return err(str(e))
    policies = list(dict.fromkeys(args.policies))
    for what, spec in [*(("--policy", p) for p in policies), ("--baseline", args.baseline)]:
        try:
            get_policy(spec)
        except ValueError as e:
            return err(f"{what}: {e}")
    try:
        given = [parse_factor(f, policies, args.baseline) for f in args.factor]
    except AblationError as e:
        return err(str(e))
    factors = {f.name: f for f in FACTORS.values()}
    factors.update({f.name: f for f in given})
    factors = list(factors.values())
    for t in args.traces:
        if not Path(t).is_dir():
            return err(f"{t}: not a trace directory")
    if args.out.exists() and not args.out.is_dir():
        return err(f"--out {args.out} exists and is not a directory")
    from pysched.trace import TraceError, preflight_all
    try:
        base = on_dask.load_machine(args.machine)
        preflight_all(args.traces, cache=not args.no_cache)  # the checker, before long work
        confs, pts = points(args.traces, policies, args.baseline, args.cores, args.load,
                            args.epochs, factors, args.epoch_ms, base)
    except (TraceError, SweepSpecError, ValueError) as e:
        return err(str(e))
    from pysched._outdir import OutputError, locked_dir
    try:
        with locked_dir(args.out):
            return _run(args, policies, confs, pts, factors, err)
    except OutputError as e:
        return err(str(e))


def _run(args: argparse.Namespace, policies: list[str], confs: dict, pts: dict,
         factors: list, err: Callable[[str], int]) -> int:
    """Run the ablation's points and write its tables into ``args.out``, which this command
    holds."""
    from pysched.sweep.store import ResultStore

    from .ablation import markdown, table
    todo = list(dict.fromkeys(pts.values()))
    if status := on_dask.run_points(todo, args.out, args, "ablate", err):
        return status
    df = table(confs, pts, ResultStore(args.out / "points").read(todo, kind="runs"))
    df.to_csv(args.out / ".ablation.csv.tmp", index=False)
    os.replace(args.out / ".ablation.csv.tmp", args.out / "ablation.csv")
    text = markdown(df, factors, policies, args.baseline, args.cores, args.load,
                    args.epochs)
    _write(args.out / "ablation.md", text + "\n")
    print(text)
    return 0
