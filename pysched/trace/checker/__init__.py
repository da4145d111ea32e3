"""``pysched check DIR``: verify a trace directory's invariants.

Checks (each listed in the output with its violations, at most ``--limit`` shown):

``blocks``   (a) executed blocks exist in ``blocks`` and ``insns``; each block's ``insns`` rows
             are ``idx`` 0..ninsn-1 at consecutive addresses summing to ``nbytes`` (a
             gap-encoded part, :mod:`pysched.trace.insns_codec`, derives ``idx`` and the
             addresses from its rows, so there only the row counts and sizes can disagree).
``icount``   (b) event rows (wake-ups too) agree with the exec stream: ``icount`` vs
             ``exec_row`` (see :mod:`pysched.trace.checker.vcpu`), monotonic counters,
             ``block_retired`` and ``handler`` of interrupt entries, the instruction at
             ``icount - 1`` is the one that raised the event; ``mem`` icounts lie in the
             stream; a final ``plugin.json``'s per-vCPU ``icount`` equals the stream's total.
``syscalls`` (c) matched returns close an open entry of their thread; field values.
``frames``   (d) page offsets agree (``insns``), kernel text is at
             ``vaddr - 0xffffffff80000000 + phys_base`` (``plugin.json``; 0 with nokaslr),
             one frame per virtual page within a block.
``markers``  (e) ROI begin/end alternate and marks are inside a region.
``complete`` the trace is complete (see :mod:`pysched.trace.checker.preflight`): a manifest
             that says so, or a final ``plugin.json`` for a trace the plugin wrote alone.
``parts``    part numbering without gaps, the plugin's count of parts, event parts in order.
``health``   what the plugin observed is what a trace of a Linux guest must hold (RAM
             calibration, the kernel's slide, IDT read, at most 1 % unknown frames, context
             switches where threads changed, known threads of system calls and interrupts):
             a degraded trace fails with the probable cause (:mod:`.health`).
``timer``    local timer interrupts per G instructions per vCPU, reported; a trace on the guest
             clock from instructions (``manifest.json``'s ``guest_clock``) fails above 4x what
             its HZ and instruction rate give, a trace on the host's clock is not judged
             (:mod:`.timer`).
``wakeups``  (f) wake-up rows enter their kind's function, name a task, and a wake-up's
             effect follows a call for its task (see :func:`.order.check_wakeups`).
``devices``  (h) ``device_requests`` rows belong to vCPUs of the trace and hold possible
             values (:mod:`.devices`); their order and place in the stream are check ``icount``'s.
``user_pcs`` (g) interrupt and exception returns to user mode resume at the recorded PC
             (:func:`.vcpu.check_user_returns`), for traces whose plugin recorded user blocks
             where they ran (``plugin.json`` ``user_pcs: "run"``); older traces get an info
             line, since their user PCs of shared code may be another process's.

Exit status: 0 when there is no violation, 1 otherwise (also when the directory cannot be
opened as a trace).
"""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

import numpy as np
import pyarrow as pa

from pysched._argtypes import int_at_least, path_text

from ..blockindex import block_index
from .devices import check_devices
from .order import check_markers, check_syscalls, check_wakeups
from .health import check_health
from .timer import check_timer
from .preflight import (TraceRejected, check_complete, check_parts, check_totals, preflight,
                        preflight_all)
from . import verdicts
from .static import FRAMES, check_blocks, check_frames
from .vcpu import (ICOUNT, check_events, check_exec, check_mem, check_user_pcs_recorded,
                   check_user_returns)
from ..errors import TraceError
from ..execstream import exec_chunks
from ..reader import Trace
from .findings import Location, Report
from ..schema import TABLES


def _summary(trace: Trace, totals: dict[int, int | None]) -> list[str]:
    lines = [f"trace {trace.path}: vCPUs {trace.all_vcpus()}"]
    counts = []
    for name, spec in TABLES.items():
        n = trace.num_rows(name)
        if spec.per_vcpu and n:
            per = ", ".join(f"v{v} {trace.num_rows(name, v)}" for v in trace.all_vcpus()
                            if trace.num_rows(name, v))
            counts.append(f"{name} {n} ({per})")
        else:
            counts.append(f"{name} {n}")
    lines.append("rows: " + "; ".join(counts))
    lines.append("instructions: " + ", ".join(
        f"v{v} {'?' if t is None else t}" for v, t in totals.items()))
    return lines


def _locate_first_executions(trace: Trace, report: Report, vcpus: list[int]) -> None:
    """Give static violations the place where their block first ran (lowest vCPU first)."""
    wanted = report.blocks_to_locate()
    where: dict[int, tuple[int, int, int | None]] = {}
    for v in vcpus:
        if not wanted - where.keys():
            break
        counted = True  # icounts are known while every earlier row was usable
        for c in exec_chunks(trace, v, strict=False):
            missing = np.array(sorted(wanted - where.keys()), dtype=np.uint32)
            if not len(missing):
                break
            hits = np.flatnonzero(np.isin(c.blocks, missing))
            if len(hits):
                icounts = c.row_icount()
                bad_before = np.cumsum(~c.usable) - ~c.usable
                for i in hits:
                    b = int(c.blocks[i])
                    if b not in where:
                        known = counted and bad_before[i] == 0
                        where[b] = (v, c.start_row + int(i), int(icounts[i]) if known else None)
            counted &= bool(c.usable.all())
    report.set_first_executions(where)


def _check_plugin_counters(trace: Trace, totals: dict[int, int | None], report: Report) -> None:
    """``plugin.json``: per-vCPU instruction totals (exact once it is final) and counters."""
    info = trace.plugin_info
    if info is None:
        report.note(ICOUNT, "no plugin.json")
        return
    if info.get("final") is False:
        report.note(ICOUNT, "plugin.json is not final (QEMU did not exit cleanly?): "
                            "its counters are not compared")
    check_totals(trace, totals, report)


def check_trace(trace: Trace, limit: int = 20) -> Report:
    """Run every check on an open trace.

    Parameters
    ----------
    trace : Trace
    limit : int
        Violations kept per check (all are counted).

    Returns
    -------
    Report
        Use ``report.ok``, ``report.violations`` and ``report.format()``.
    """
    report = Report(limit)
    check_complete(trace, report)
    check_parts(trace, report)
    idx = block_index(trace)
    check_blocks(idx, report)
    check_frames(idx, report, trace.plugin_info)
    vcpus = trace.all_vcpus()
    totals: dict[int, int | None] = {}
    syscalls: dict[int, pa.Table] = {}
    markers: dict[int, pa.Table] = {}
    streams = {}
    user_pcs = check_user_pcs_recorded(trace.plugin_info, report)
    for v in vcpus:
        streams[v] = vs = check_exec(trace, idx, v, report)
        check_events(vs, idx, report)
        if user_pcs:
            check_user_returns(vs, idx, report)
        check_mem(trace, vs, report)
        totals[v] = vs.total
        syscalls[v], markers[v] = vs.events["syscalls"], vs.events["markers"]
    _check_plugin_counters(trace, totals, report)
    check_health(trace, totals, {v: streams[v].unknown_frames for v in vcpus}, report)
    check_timer(trace, totals, report)
    check_syscalls(syscalls, report)
    check_markers(markers, trace.roi, report,
                  int((trace.plugin_info or {}).get("roi_insns_ends", 0) or 0))
    check_wakeups(streams, idx, trace.plugin_info, report)
    check_devices(trace, report)
    _locate_first_executions(trace, report, vcpus)
    report.summary = _summary(trace, totals)
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``pysched check``."""
    parser.add_argument("trace", metavar="DIR", type=path_text,
                        help="trace directory written by the plugin")
    parser.add_argument("--limit", type=int_at_least(0), default=20, metavar="N",
                        help="violations shown per check (default: %(default)s)")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Check ``args.trace`` and print the report; return the exit status (0 ok, 1 violations)."""
    out = out or sys.stdout
    try:
        trace = Trace.open(args.trace)
    except TraceError as exc:
        print(f"error: {exc}", file=out)
        return 1
    try:
        report = check_trace(trace, limit=args.limit)
    except TraceError as exc:  # a part that cannot be read (damaged file, bad checksum)
        print(f"error: {exc}", file=out)
        print("FAILED", file=out)
        return 1
    print(report.format(), file=out)
    if report.ok:
        verdicts.remember(trace)  # the commands after it need not check this trace again
    return 0 if report.ok else 1
