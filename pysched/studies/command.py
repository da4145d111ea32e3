"""``pysched ablate``: which rule of the sandbox's model decides a policy's result."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from pysched._argtypes import positive_float, positive_int

EXAMPLE = ("example: pysched ablate data/apache data/find --policy schedtask --baseline linux "
           "--cores 8 --load 2 --epochs 5 --factor schedtask:steal=same,any --out out/ablation")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EXAMPLE
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace directories")
    p.add_argument("--policy", required=True,
                   help="the policy under study, optionally NAME:key=value (see `pysched "
                        "evaluate --list`)")
    p.add_argument("--baseline", default="linux", help="the policy it is compared with "
                   "(default linux)")
    p.add_argument("--cores", type=positive_int, default=8, help="simulated cores (default 8)")
    p.add_argument("--load", type=positive_int, default=2,
                   help="the paper's load kX (default 2: section 6.1's 2X)")
    p.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                   help="measure a window of the first N epochs of every run (default: the "
                        "whole replay)")
    p.add_argument("--epoch-ms", type=positive_float, default=3.0,
                   help="epoch length in simulated milliseconds (default 3)")
    p.add_argument("--factor", action="append", default=[], metavar="SPEC",
                   help="a policy parameter as a factor, POLICY:param=v1,v2 (v1 for the "
                        "defaults), or a model factor restricted to some settings, e.g. "
                        "switch_cost=traced,zero; repeatable. Every model factor is studied "
                        "(pysched.studies.ablation.FACTORS)")
    p.add_argument("--machine", type=Path, default=None,
                   help="machine TOML/JSON (its hierarchy and first core type)")
    p.add_argument("--out", type=Path, required=True,
                   help="results directory: runs are stored under OUT/points as they finish, "
                        "so a re-run into the same OUT resumes; ablation.csv and ablation.md "
                        "are written when every run is finished")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:8786",
                   help="an existing Dask scheduler (default: a local cluster)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes of the local cluster (default: one per core)")


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: the local cluster is shut down


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    from pysched.policies import REGISTRY, get_policy
    from pysched.sweep.spec import SweepSpecError

    from .ablation import FACTORS, AblationError, markdown, parse_factor, points, table
    err = (lambda m: print(f"pysched ablate: {m}", file=sys.stderr) or 2)
    for what, spec in (("--policy", args.policy), ("--baseline", args.baseline)):
        try:
            get_policy(spec)
        except ValueError as e:
            return err(f"{what}: {e}")
    try:
        given = [parse_factor(f, args.policy, args.baseline) for f in args.factor]
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
    base = None
    if args.machine is not None:
        from pysched.models.configio import ConfigError
        from pysched.models.machine import MachineConfig
        try:
            base = MachineConfig.load(args.machine)
        except (ConfigError, OSError) as e:
            return err(f"--machine {args.machine}: {e}")
    from pysched.trace import TraceError, preflight
    try:
        for t in args.traces:  # the checker's cheap checks before any long work
            preflight(t)
        confs, pts = points(args.traces, args.policy, args.baseline, args.cores, args.load,
                            args.epochs, factors, args.epoch_ms, base)
    except (TraceError, SweepSpecError, ValueError) as e:
        return err(str(e))
    from pysched.sweep.run import run_sweep
    from pysched.sweep.store import ResultStore
    args.out.mkdir(parents=True, exist_ok=True)
    store = ResultStore(args.out / "points")
    todo = list(dict.fromkeys(pts.values()))
    say = (lambda s: print(f"[ablate] {s}", file=sys.stderr, flush=True))
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        outcome = run_sweep(
            todo, store.out, scheduler=args.scheduler, workers=args.workers,
            on_start=lambda n, before, dash: say(f"{n + before} runs: {n} to run, {before} "
                                                  f"finished before"),
            on_done=lambda p, e: say(f"{p.label()}: {'FAILED: ' + e if e else 'stored'}"))
    except KeyboardInterrupt:
        n = sum(store.finished(p) for p in todo)
        return err(f"interrupted; {n} of {len(todo)} runs are stored in {args.out} (run "
                   f"again to finish)") and 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if outcome.failed:
        return err(f"{len(outcome.failed)} run(s) failed (see above); the others are stored "
                   f"in {args.out}; nothing summarised") and 1
    df = table(confs, pts, store.read(todo, kind="runs"))
    paper = dict(REGISTRY[args.policy.partition(":")[0]].paper_model)
    df.to_csv(args.out / ".ablation.csv.tmp", index=False)
    os.replace(args.out / ".ablation.csv.tmp", args.out / "ablation.csv")
    text = markdown(df, factors, args.policy, args.baseline, args.cores, args.load,
                    args.epochs, paper)
    _write(args.out / "ablation.md", text + "\n")
    print(text)
    return 0
