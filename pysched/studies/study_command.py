"""``pysched study NAME``: a study on the sweep machinery, resumable (``make evaluate-paper``).

Studies: ``schedtask-paper`` (:mod:`pysched.studies.schedtask_paper.study`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pysched._argtypes import deprecated_alias, float_in, int_list, positive_int, path as path_arg
from pysched.constants import EPOCH_MS_RANGE
from pysched.policies.files import add_argument as add_policy_file_argument
from pysched.sandbox.switch_cost import SWITCH_COSTS, TRACED

from . import on_dask

EXAMPLE = ("example: pysched study schedtask-paper --data data --cores 8 --epochs 5 "
           "--out out/paper")


def _specs(text: str) -> tuple[str, ...]:
    """Comma-separated policy specs; ``none`` for none."""
    return () if text.strip() == "none" else tuple(s.strip() for s in text.split(",")
                                                   if s.strip())


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .schedtask_paper.study import LOADS, POLICIES, VARIANTS
    sub = p.add_subparsers(dest="study", required=True, metavar="STUDY")
    s = sub.add_parser("schedtask-paper", epilog=EXAMPLE,
                       help="SchedTask and its baselines beside the paper's section 6 "
                            "(Figs 7-11, Table 4) on the eight workloads")
    s.add_argument("--data", type=path_arg, default=Path("data"),
                   help="where the workloads' traces are (default ./data)")
    s.add_argument("--workloads", default=None, metavar="W,W,...",
                   help="workloads (trace directories in --data; default the paper's eight: "
                        "find,iscp,oscp,apache,dss,filesrv,mailsrv,oltp)")
    s.add_argument("--cores", type=positive_int, default=8,
                   help="simulated cores (default 8; the paper's figures: 32)")
    s.add_argument("--load", type=int_list("--load"), default=list(LOADS),
                   help="the paper's loads kX, relative to the machine, comma-separated "
                        "(default 1,2,4,8; the variants run at 2X)")
    deprecated_alias(s, "--loads", "--load", type=int_list("--loads"))
    s.add_argument("--policies", type=_specs, default=POLICIES,
                   help=f"policies at every load (default {','.join(POLICIES)})")
    add_policy_file_argument(s)
    s.add_argument("--variants", type=_specs, default=VARIANTS,
                   help=f"SchedTask's variants at 2X, or none (default {','.join(VARIANTS)})")
    s.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                   help="measure a window of the first N epochs of every run (default: whole "
                        "replays; hours on a 2-core host)")
    s.add_argument("--epoch-ms", type=float_in(*EPOCH_MS_RANGE), default=3.0,
                   help="epoch length in simulated milliseconds, 0.1 to 1000 (default 3, "
                        "section 4.4)")
    s.add_argument("--switch-cost", choices=SWITCH_COSTS, default=TRACED,
                   help="as `pysched evaluate --switch-cost` (default traced)")
    s.add_argument("--out", type=path_arg, required=True,
                   help="results directory: runs are stored under OUT/points as they finish, "
                        "so a re-run into the same OUT resumes; runs.csv, epochs.parquet, "
                        "summary.md and figures are written when every run is stored")
    on_dask.add_arguments(s)
    s.add_argument("--ablation", type=path_arg, action="append", default=[], metavar="DIR",
                   help="a directory pysched ablate wrote (its ablation.csv): the one-line "
                   "reason for each policy it ablated goes into the summary's headline, and "
                   "its gains per rule into a table after the paper comparison; repeatable")
    s.add_argument("--dry-run", action="store_true",
                   help="print the runs and which are stored, run nothing")


def _grid(args: argparse.Namespace):
    """The study's grid from the arguments; ValueError naming the bad one."""
    from pysched.evaluation.runner import check_request
    from pysched.trace import preflight_all

    from .schedtask_paper.study import Grid, traces
    workloads = None if args.workloads is None else \
        [w.strip() for w in args.workloads.split(",") if w.strip()]
    paths = traces(args.data) if workloads is None else traces(args.data, workloads)
    if not paths:
        raise ValueError("--workloads: no workload given")
    check_request([*args.policies, *args.variants], [args.cores], args.load)
    for t in paths:
        if not Path(t).is_dir():
            raise ValueError(f"{t}: not a trace directory (--data, --workloads)")
    preflight_all(paths, cache=not args.no_cache)  # the checker, before any long work
    return Grid(paths, args.cores, tuple(dict.fromkeys(args.load)), args.policies,
                args.variants, args.epochs, args.epoch_ms, args.switch_cost,
                on_dask.load_machine(args.machine))


def run(args: argparse.Namespace) -> int:
    from pysched.sweep.spec import SweepSpecError
    from pysched.sweep.store import ResultStore
    from pysched.trace import TraceError

    from pysched.policies import PolicyFileError, load_policy_files

    from .schedtask_paper import study
    err = (lambda m: print(f"pysched study {args.study}: {m}", file=sys.stderr) or 2)
    try:
        load_policy_files(args.policy_file)
    except PolicyFileError as e:
        return err(str(e))
    if args.out.exists() and not args.out.is_dir():
        return err(f"--out {args.out} exists and is not a directory")
    from .ablation import read_tables, read_verdicts, usable
    try:
        grid = _grid(args)
        todo = list(study.points(grid))
        # an ablation of another model or setting explains another result: not quoted
        kept, left_out = usable(args.ablation, grid.cores, grid.loads, grid.epochs)
        reasons = read_verdicts(kept)
        ablation = read_tables(kept)
    except (TraceError, SweepSpecError, ValueError) as e:
        return err(str(e))
    for note in left_out:
        print(f"pysched study {args.study}: --ablation {note}; its reasons are not quoted",
              file=sys.stderr)
    if args.dry_run:
        store = ResultStore(args.out / "points") if (args.out / "points").is_dir() else None
        for p in todo:
            done = store is not None and store.finished(p)
            print(f"{p.key}  {'stored' if done else 'to run'}  {p.label()}")
        return 0
    from pysched._outdir import OutputError, locked_dir
    try:
        with locked_dir(args.out):
            if status := on_dask.run_points(todo, args.out, args, "study", err):
                return status
            print(study.summarise(grid, args.out, reasons=reasons, ablation=ablation,
                                  left_out=left_out))
    except OutputError as e:
        return err(str(e))
    return 0
