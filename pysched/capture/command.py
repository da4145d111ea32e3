"""``pysched trace``: boot a guest under the tracing plugin and run a workload or a command.

::

    pysched trace find --out traces/find                 # a workload of the suite
    pysched trace --cmd "sysloop 1000" --out traces/s    # any command, on the Debian guest
    pysched trace --cmd "spin 20" --guest busybox --out traces/b   # the quick test guest
    pysched trace --list                                 # the workloads and their parameters

The output directory receives the plugin's tables, ``console.log`` (the guest's serial
console), ``qemu-stderr.log``, ``manifest.json`` (see :mod:`pysched.capture.manifest`),
``System.map.gz`` (the kernel's symbols) and, for the Debian guest, ``modules.map.gz`` (the
loaded modules' symbols, ``/proc/kallsyms`` lines) and ``peer.log`` when the workload has a
host-side peer.

The run's parts: :mod:`.plan` (the options checked, the plan), :mod:`.boot` (QEMU and the
guest), :mod:`.sysmap` (the kernel's symbols), :mod:`.outcome` (failures and what the user is
told); this module is the command line and the order of the steps.
"""
from __future__ import annotations

import argparse
import os
import signal
from datetime import datetime, timezone
from pathlib import Path

from pysched._argtypes import path as path_arg
from pysched.capture import clock as gclock
from pysched.capture import console as con
from pysched.capture import guest as gst
from pysched.capture import manifest as mf
from pysched.capture import qemu as qm
from pysched.capture import runfiles as rf
from pysched.capture import workloads as wl
from pysched.capture.boot import boot_guest, prepare_boot
from pysched.capture.compact import DEFAULT_LEVEL as COMPACT_LEVEL
from pysched.capture.compact import compact_trace
from pysched.capture.manifest import MANIFEST, build_manifest
from pysched.capture.outcome import (EXIT_RUN_FAILED, EXIT_USAGE, err, failure_hints,
                                     judge_outcome, report, roi_bound_status, run_failure)
from pysched.capture.plan import (DEFAULT_BOOT_TIMEOUT, RunPlan, TraceUsageError, parse_count,
                                  plan_run)
from pysched.capture.roiwatch import read_plugin_info
from pysched.capture.sysmap import save_symbols
from pysched.trace.schema import CONSOLE_LOG

__all__ = ["add_arguments", "run", "EXIT_RUN_FAILED", "EXIT_USAGE"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``pysched trace`` options to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    """
    parser.add_argument("workload", nargs="?", metavar="WORKLOAD",
                        help=f"a workload of the suite ({wl.known_names()}); "
                        "see --list")
    parser.add_argument("--cmd", metavar="SHELL_COMMAND",
                        help="instead of a workload: a command the guest runs with sh, inside "
                        "the region of interest")
    parser.add_argument("--list", action="store_true",
                        help="list the workloads, what they run and their parameters")
    parser.add_argument("--out", type=path_arg, metavar="DIR",
                        help="trace directory; must be empty or not exist")
    parser.add_argument("--guest", choices=gst.GUEST_KINDS, default=None,
                        help="debian (default): the Debian image on a virtio disk; busybox: "
                        "the quick test guest (--cmd only)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set a workload parameter (repeatable; see --list)")
    parser.add_argument("--vcpus", type=int, default=2, metavar="N",
                        help="number of guest vCPUs (default 2)")
    parser.add_argument("--ram", default="512M", metavar="SIZE",
                        help=f"guest RAM, e.g. 512M or 1G, at most {qm.MAX_RAM_MIB}M "
                        "(default 512M)")
    parser.add_argument("--roi-seconds", type=float, default=None, metavar="S",
                        help="a workload's region of interest lasts S guest seconds "
                        "(default: the workload's, see --list)")
    parser.add_argument("--roi-insns", type=parse_count, default=None, metavar="N",
                        help="end the region once every vCPU has retired N instructions in it "
                        "(suffixes K, M, G; the plugin stops each vCPU at the first block "
                        "boundary at or after N, see qemu-plugin/README.md); the Debian "
                        "guest then stops its command or workload, the busybox guest lets "
                        "its command run to its end")
    parser.add_argument("--warmup", type=float, default=wl.DEFAULT_WARMUP_SECONDS,
                        metavar="S", help="seconds a workload runs before its region opens "
                        f"(default {wl.DEFAULT_WARMUP_SECONDS:g})")
    parser.add_argument("--data-accesses", action="store_true",
                        help="also record every data load and store (plugin data=on)")
    parser.add_argument("--compact", type=int, nargs="?", const=COMPACT_LEVEL, default=None,
                        metavar="LEVEL", help="after the run, recompress the exec table at "
                        f"zstd LEVEL (default {COMPACT_LEVEL}, the plugin's exec_zstd; a "
                        "higher level, up to 22, makes it smaller at more CPU time), in the "
                        "plugin's successor encoding when an older plugin wrote it; the "
                        "insns table too, in the plugin's gap encoding where an older plugin "
                        "wrote it plain; and re-write the mem table (data accesses) as "
                        "per-instruction address deltas, about 2.6x smaller; see "
                        "pysched/capture/compact.py")
    parser.add_argument("--kernel-args", default=None, metavar="ARGS",
                        help="the guest kernel's optional arguments (default: "
                        f"{qm.DEFAULT_KERNEL_ARGS!r}); the harness adds "
                        f"{qm.HARNESS_KERNEL_ARGS!r} after them; recorded in the manifest")
    parser.add_argument("--clock", choices=gclock.CLOCKS, default=gclock.DEFAULT_CLOCK,
                        help="the guest's clock: insns (default), advanced by the instructions "
                        "it retires (QEMU -icount, single-threaded TCG; see --insn-rate); host, "
                        "the host's clock (multi-threaded TCG; the rate of timer interrupts per "
                        "instruction then follows the host's speed)")
    parser.add_argument("--insn-rate", default=None, metavar="RATE",
                        help="with --clock insns: instructions a guest second per vCPU while "
                        "every vCPU runs (suffixes K, M, G; default and fastest: 1G divided "
                        "by --vcpus, one instruction a nanosecond for the machine; then halves: "
                        "QEMU's -icount shifts); see pysched/capture/clock.py")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="stop QEMU after this many seconds (default 600)")
    parser.add_argument("--roi", choices=("marker", "all"), default="marker",
                        help="record between the guest's roi begin/end markers (default) "
                        "or everything from boot")
    parser.add_argument("--boot-timeout", type=float, default=None, metavar="SECONDS",
                        help="restart the guest when /init has not started after this long "
                        f"(default {DEFAULT_BOOT_TIMEOUT:g}; with --roi all, no limit); 0: never")
    parser.add_argument("--boot-retries", type=int, default=2, metavar="N",
                        help="how many times to restart a guest that hung while booting "
                        "(default 2)")
    parser.add_argument("--plugin", type=path_arg, default=None, metavar="PATH",
                        help="plugin shared object (default qemu-plugin/build/"
                        "libpysched-trace.so)")
    # Debugging aid: boot the guest without the tracer (no tables are written).
    parser.add_argument("--no-plugin", action="store_true", help=argparse.SUPPRESS)
    # Testing aid: another guest build directory.
    parser.add_argument("--guest-dir", type=path_arg, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Run ``pysched trace``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options (see :func:`add_arguments`).

    Returns
    -------
    int
        0 when QEMU ran, the guest reached its end and the command or workload succeeded; 1
        when the run failed (QEMU error, timeout, guest crash, non-zero status, a workload's
        success criterion not met); 2 when it could not start; 128 + the signal when stopped
        by SIGINT, SIGTERM or SIGHUP (the trace then has no manifest: it is incomplete).
    """
    if args.list:
        print(wl.describe())
        return 0
    try:
        plan = plan_run(args)
        lock = rf.claim_out_dir(plan.out)
    except (TraceUsageError, rf.OutDirError, gst.GuestNotBuiltError, FileNotFoundError) as e:
        err(f"error: {e}")
        return EXIT_USAGE
    try:
        for d in rf.remove_stale_tmpdirs():
            err(f"note: removed {d}, left by a run that was killed")
        with rf.signals_raise():
            return _run_claimed(plan, args)
    except TraceUsageError as e:
        err(f"error: {e}")
        return EXIT_USAGE
    except (KeyboardInterrupt, rf.RunInterrupted) as e:
        signum = getattr(e, "signum", int(signal.SIGINT))  # Ctrl-C has none
        err(f"stopped by {signal.Signals(signum).name}: QEMU was stopped and the temporary "
            f"files removed; {plan.out} holds an incomplete trace (no {MANIFEST})")
        return 128 + signum
    finally:
        rf.release_out_dir(lock)


def _run_claimed(plan: RunPlan, args: argparse.Namespace) -> int:
    """:func:`run` once the output directory is ours: boot, save, judge, write the manifest."""
    out = plan.out
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_start = os.getloadavg()
    version = qm.qemu_version(plan.qemu)
    with rf.RunTmpDir() as tmp:
        boot = prepare_boot(plan, args, tmp.path)
        booted = boot_guest(plan, args, boot, tmp)
        kernel_symbols = save_symbols(plan.guest, boot.symbols, out)
        hints = failure_hints(plan, tmp.path)
    if not args.data_accesses:
        _drop_empty_table(out, "mem")
    compacted = None
    if args.compact is not None and (out / "exec").is_dir():
        compacted = compact_trace(out, args.compact)
        if "symbols" in compacted and kernel_symbols.get("system_map"):
            kernel_symbols["system_map"] = compacted["symbols"]["system_map"]
    text = con.console_text((out / CONSOLE_LOG).read_bytes())
    roi_bound, shortfall, region_open = roi_bound_status(plan, args)
    failure = run_failure(plan, args, booted, text, shortfall, region_open)
    outcome = judge_outcome(plan, failure, booted.summary, text)
    incomplete = (mf.incomplete_reason(read_plugin_info(out), args.roi, booted.result)
                  if plan.plugin is not None else "untraced run (--no-plugin): no tables")
    manifest = build_manifest(
        command=args.cmd if plan.workload is None else f"workload {plan.workload.name}",
        date=date, guest=plan.guest, qemu_version=version, plugin=plan.plugin,
        plugin_options=plan.options, vcpus=args.vcpus, ram_mib=plan.ram_mib, roi=args.roi,
        data_accesses=args.data_accesses, timeout=args.timeout, argv=boot.argv,
        result=booted.result, console_text=text, boot_timeout=plan.boot_timeout,
        failed_boots=booted.failed_boots,
        workload=plan.workload.name if plan.workload is not None else None,
        workload_summary=plan.workload.summary if plan.workload is not None else None,
        parameters=plan.params, roi_bound=roi_bound, monitor=booted.summary,
        kernel_symbols=kernel_symbols, out_dir=out, compacted=compacted,
        incomplete=incomplete, outcome=outcome,
        kernel_append=plan.append, kernel_args=plan.kernel_args,
        host=mf.host_load(load_start, os.getloadavg()),
        guest_clock=plan.clock.manifest(plan.kernel_hz),
    )
    mf.portable_plugin_info(out)
    # Last, and atomically: a trace directory with a manifest is a finished one.
    mf.write_manifest(out, manifest)
    return report(plan, args, booted, text, outcome["failure"], shortfall, region_open, hints)


def _drop_empty_table(out: Path, table: str) -> None:
    """Remove a table folder that the plugin created but left empty (``mem/`` without
    ``--data-accesses``: the plugin makes every table's folder when it starts)."""
    d = out / table
    if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
        d.rmdir()
