"""``pysched evaluate``: replay traces under scheduling policies, epoch by epoch."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pysched import _signals
from pysched._argtypes import int_list as _int_list
from pysched._argtypes import float_in, path as path_arg, path_text
from pysched._argtypes import positive_int as _positive_int
from pysched.policies.files import add_argument as add_policy_file_argument
from pysched.constants import EPOCH_MS_RANGE, LOAD_COPIES, LOAD_MACHINE, LOAD_UNITS
from pysched.sandbox.device_loop import DEVICE_TIMINGS
from pysched.sandbox.switch_cost import SWITCH_COSTS, TRACED

from .cache_command import add_no_cache


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="*", metavar="TRACE", type=path_text,
                   help="trace directories")
    p.add_argument("--list", action="store_true", help="print the registered policies and exit")
    p.add_argument("--policies", default="as-traced,linux",
                   help="comma-separated policies, each optionally with parameters as "
                        "NAME:key=value:key=value (default: as-traced,linux)")
    add_policy_file_argument(p)
    p.add_argument("--cores", type=_int_list("--cores"), default=[8],
                   help="simulated core counts, comma-separated (default 8)")
    p.add_argument("--load", type=_int_list("--load"), default=[1],
                   help="loads, comma-separated, e.g. 1,2,4,8 (default 1); in --load-unit")
    p.add_argument("--load-unit", choices=LOAD_UNITS, default=LOAD_MACHINE,
                   help=f"{LOAD_MACHINE} (default): the paper's load relative to the machine, "
                        "kX on C cores is k traced vCPUs' work per core (sections 4.2, 6.1), "
                        "ceil(k * C / V) copies of a V-vCPU trace; "
                        f"{LOAD_COPIES}: the load is the number of copies of each trace")
    p.add_argument("--switch-cost", choices=SWITCH_COSTS, default=TRACED,
                   help="what a context switch and an OS move of a thread cost: 'traced' "
                        "(default: each trace's own context-switch path run through the "
                        "core's caches, no extra for a move), 'flat' (seed 001's 1,000 "
                        "cycles each) or 'zero'; see pysched.sandbox.switch_cost")
    p.add_argument("--device-timing", choices=DEVICE_TIMINGS, default=DEVICE_TIMINGS[0],
                   help="'closed' (default): a device interrupt comes its traced latency after "
                        "the simulated run of the request it answers (a network peer's packet "
                        "its traced think time after the guest's transmit); 'traced': every "
                        "interrupt at its traced time; see pysched.sandbox.device_loop")
    p.add_argument("--epoch-ms", type=float_in(*EPOCH_MS_RANGE), default=3.0,
                   help="epoch length in simulated milliseconds, 0.1 to 1000 (default 3, "
                        "section 4.4; "
                        "`analyse --epoch-insns` is the same epoch in traced instructions)")
    p.add_argument("--epochs", type=_positive_int, default=None, metavar="N",
                   help="a window: stop every run after N epochs of --epoch-ms instead of "
                        "running it to the end (default)")
    p.add_argument("--machine", type=path_arg, default=None,
                   help="machine TOML/JSON (models.machine.MachineConfig, e.g. "
                        "machines/seed001-acmp.toml with --cores 4): used as it is at its own core "
                        "count, else its hierarchy and first core type at every --cores count "
                        "(default: the SchedTask paper's Table 2)")
    p.add_argument("--out", type=path_arg, default=None,
                   help="results directory, created when the evaluation is finished; it must "
                        "not exist or be empty (required, except with --list)")
    p.add_argument("--keep-harness", action="store_true",
                   help="replay the capture harness's own work inside the region too (left "
                        "out by default: pysched.superfunctions.harness)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="replay the complete prefix of an incomplete trace (a killed capture) "
                        "instead of refusing it; the summary says so")
    add_no_cache(p)


def run(args: argparse.Namespace) -> int:
    from pysched.policies import PolicyFileError, describe, load_policy_files
    try:
        load_policy_files(args.policy_file)
    except PolicyFileError as e:
        print(f"pysched evaluate: {e}", file=sys.stderr)
        return 2
    if args.list:
        print(describe())
        return 0
    from .runner import check_request, evaluate, prepare
    from .report import write
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        check_request(policies, args.cores, args.load, args.load_unit)
    except ValueError as e:
        print(f"pysched evaluate: {e}", file=sys.stderr)
        return 2
    if not args.traces:
        print("pysched evaluate: give at least one TRACE directory (or --list)",
              file=sys.stderr)
        return 2
    if args.out is None:
        print("pysched evaluate: --out DIR is required", file=sys.stderr)
        return 2
    out = args.out
    for t in args.traces:
        if not Path(t).is_dir():
            print(f"pysched evaluate: {t}: not a trace directory", file=sys.stderr)
            return 2
    names = [Path(t).resolve().name for t in args.traces]
    if len(set(names)) != len(names):
        print(f"pysched evaluate: two traces have the same name ({', '.join(names)}): their "
              "runs would be one row of the results", file=sys.stderr)
        return 2
    base = None
    if args.machine is not None:
        from pysched.models.configio import ConfigError
        from pysched.models.machine import MachineConfig
        try:
            base = MachineConfig.load(args.machine)
        except (ConfigError, OSError) as e:
            print(f"pysched evaluate: --machine {args.machine}: {e}", file=sys.stderr)
            return 2
    say = (lambda s: print(f"\r[evaluate] {s}", file=sys.stderr, flush=True))

    def bar(label: str, done: int, total: int) -> None:
        if sys.stderr.isatty():  # a progress line, redrawn in place
            print(f"\r[evaluate] {label}: {100 * done // max(total, 1):3d} % of its items",
                  end="", file=sys.stderr, flush=True)

    from pysched._outdir import OutputError, finished_dir
    from pysched.trace import TraceError, preflight_all
    try:
        # The checker's cheap checks on every trace before any long work.
        checked = preflight_all(args.traces, allow_incomplete=args.allow_incomplete,
                                cache=not args.no_cache)
        with finished_dir(out) as tmp:
            prepared = []
            for t, (trace, note) in zip(args.traces, checked):
                if note:
                    print(f"pysched evaluate: {t}: {note}", file=sys.stderr)
                prepared.append(prepare(t, progress=say, trace=trace, note=note,
                                        keep_harness=args.keep_harness,
                                        cache=not args.no_cache))
            epochs, runs = evaluate(prepared, policies, args.cores, args.load, base=base,
                                    config={"epoch_s": args.epoch_ms / 1e3,
                                            "max_epochs": args.epochs,
                                            "device_timing": args.device_timing}, progress=say,
                                    run_progress=bar, load_unit=args.load_unit,
                                    switch_cost=args.switch_cost)
            write(tmp, epochs, runs)
    except OutputError as e:
        print(f"pysched evaluate: {e}", file=sys.stderr)
        return 2
    except (TraceError, ValueError, MemoryError) as e:
        print(f"pysched evaluate: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"\npysched evaluate: {_signals.how(e)}; nothing written to {out}",
              file=sys.stderr)
        return _signals.exit_status(e)
    print((out / "summary.md").read_text())
    return 0
