"""Check ``timer``: the local APIC timer's interrupts per G instructions per vCPU, against what
the guest's clock allows.

A running vCPU takes the local timer interrupt (vector 0xec, 236: ``LOCAL_TIMER_VECTOR``) HZ
times a guest second for the scheduler tick, and more for high-resolution timers. An idle vCPU
takes it for the timers that end its idleness (a sleep's end, a tick the idle loop kept), however
few instructions it retires: those interrupts come in the kernel's idle functions (saved PC in
``.cpuidle.text``, ``__cpuidle_text_start`` to ``__cpuidle_text_end`` in the trace's
``System.map``) and are not the clock's to answer for, so the rate judged counts only the others
(all of them when the trace has no such map). On a guest
clock driven by instructions (``manifest.json``'s ``guest_clock``, ``pysched trace --clock
insns``) a vCPU retires at least ``insn_rate_per_vcpu`` instructions a guest second while it runs
(exactly that with every vCPU busy; more while others idle), so its ticks come to at most
``HZ * 1e9 / insn_rate_per_vcpu`` per G instructions: 500 with HZ 250 at 500 M instructions a
second. On the host's clock a guest second holds what the host emulates in one, so the rate
follows the host's speed and load: 1,227-6,804 per G outside the idle loop (1,519-7,142 in all)
in the eight study traces of ``data/``.

The check reports the rate of each vCPU and of the trace (its interrupts over its instructions),
with and without those that came while idle. It fails a trace whose manifest records the instruction clock with both ``hz`` and the rate when
the trace's rate is over :data:`MAX_FACTOR` times that bound. A trace recorded on the host's clock
(no ``guest_clock``, or ``source: host``) or whose clock lacks ``hz`` gets an info line only: its
rate is not the clock's to answer for, and failing it would refuse every trace recorded before
``--clock`` in every command that reads one (they run this check first).
"""
from __future__ import annotations

import lzma
import zlib
from typing import Any

import numpy as np

from ..errors import TraceError
from ..reader import Trace
from ..symbol_files import open_text, system_map_in
from .findings import Location, Report

TIMER = "timer"

#: x86 Linux's LOCAL_TIMER_VECTOR: the local APIC timer.
LOCAL_TIMER_VECTOR = 0xEC

#: A trace on the instruction clock fails above this many times the rate HZ and the
#: instruction rate give.
MAX_FACTOR = 4.0


#: The symbols around the kernel's idle functions (``__cpuidle`` puts them in ``.cpuidle.text``).
IDLE_TEXT = ("__cpuidle_text_start", "__cpuidle_text_end")


def idle_text(trace: Trace) -> tuple[int, int] | None:
    """The running kernel's ``.cpuidle.text`` from the trace's ``System.map`` (plain, gzip or
    xz: the traced boot's addresses); None without one or the symbols.

    Raises
    ------
    TraceError
        When the map cannot be read (a damaged compressed file, an address that is not hex).
    """
    found: dict[str, int] = {}
    path = system_map_in(trace.path)
    if path is not None:
        try:
            with open_text(path, errors="replace") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 3 and fields[2] in IDLE_TEXT:
                        found[fields[2]] = int(fields[0], 16)
        except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
            raise TraceError(f"{path}: cannot read symbol map ({exc})") from exc
    if len(found) < 2 or found[IDLE_TEXT[0]] >= found[IDLE_TEXT[1]]:
        return None
    return found[IDLE_TEXT[0]], found[IDLE_TEXT[1]]


def timer_interrupts(trace: Trace, idle: tuple[int, int] | None = None
                     ) -> tuple[dict[int, int], dict[int, int]]:
    """Entries of the local timer interrupt on each vCPU: all of them, and those whose saved PC
    is in ``idle`` (a kernel address range; none without it)."""
    counts, in_idle = {}, {}
    for v in trace.all_vcpus():
        n = m = 0
        if trace.num_rows("interrupts", v):
            t = trace.table("interrupts", v)
            timer = ((t.column("vector").to_numpy() == LOCAL_TIMER_VECTOR)
                     & (t.column("kind").to_numpy() == 0))
            n = int(np.count_nonzero(timer))
            if idle is not None:
                pc = t.column("pc").to_numpy()
                kernel = t.column("user").to_numpy() == 0
                m = int(np.count_nonzero(timer & kernel & (pc >= np.uint64(idle[0]))
                                         & (pc < np.uint64(idle[1]))))
        counts[v], in_idle[v] = n, m
    return counts, in_idle


def expected_rate(clock: dict[str, Any] | None) -> float | None:
    """The most local timer interrupts per G instructions per vCPU a guest on ``clock`` (the
    manifest's ``guest_clock``) takes from its tick; None when the clock is the host's or lacks
    HZ or the rate."""
    if not isinstance(clock, dict) or clock.get("source") != "insns":
        return None
    hz, rate = clock.get("hz"), clock.get("insn_rate_per_vcpu")
    if not hz or not rate:
        return None
    return float(hz) * 1e9 / float(rate)


def check_timer(trace: Trace, totals: dict[int, int | None], report: Report) -> None:
    """Run check ``timer`` (module docstring).

    Parameters
    ----------
    trace : Trace
    totals : dict of int to int or None
        Instructions each vCPU's stream retires (None where it has an unusable block).
    report : Report
    """
    report.start(TIMER)
    known = {v: n for v, n in totals.items() if n}
    if not known:
        return
    try:
        idle = idle_text(trace)
    except TraceError as exc:
        report.add(TIMER, Location(system_map_in(trace.path).name), str(exc))
        return
    ticks, in_idle = timer_interrupts(trace, idle)
    busy = {v: ticks.get(v, 0) - in_idle.get(v, 0) for v in known}
    per = ", ".join(f"v{v} {busy[v] / n * 1e9:,.0f}" for v, n in known.items())
    rate = sum(busy.values()) / sum(known.values()) * 1e9
    if idle is None:
        head = (f"{rate:,.0f} local timer interrupts (vector {LOCAL_TIMER_VECTOR}) per G "
                f"instructions per vCPU ({per}; the trace has no System.map with "
                f"{IDLE_TEXT[0]}, so those that came while idle are counted too)")
    else:
        everything = sum(ticks.get(v, 0) for v in known) / sum(known.values()) * 1e9
        head = (f"{rate:,.0f} local timer interrupts (vector {LOCAL_TIMER_VECTOR}) per G "
                f"instructions per vCPU outside the idle loop ({per}; {everything:,.0f} with "
                f"the {sum(in_idle.get(v, 0) for v in known):,} that came while idle)")
    clock = (trace.manifest or {}).get("guest_clock")
    bound = expected_rate(clock)
    if bound is None:
        why = ("the guest clock was the host's, so the rate follows the host's speed"
               if not isinstance(clock, dict) or clock.get("source") != "insns"
               else "the manifest's guest_clock lacks hz or the instruction rate")
        report.note(TIMER, f"{head}; not judged: {why} (`pysched trace --clock insns` ties it "
                           "to instructions)")
        return
    limit = MAX_FACTOR * bound
    rate_m = float(clock["insn_rate_per_vcpu"]) / 1e6
    if rate > limit:
        report.add(TIMER, Location("interrupts"),
                   f"{head}: over {MAX_FACTOR:g}x the {bound:,.0f} that HZ {clock['hz']} and "
                   f"{rate_m:g} M instructions a second per vCPU give; the guest's timer fired "
                   "more often per instruction than its clock allows; probable cause: QEMU ran "
                   "without the manifest's -icount, or the kernel's HZ is not the manifest's, or "
                   "the workload arms high-resolution timers that often; trace it again with "
                   "`pysched trace --clock insns` (the default) on the guest kernel the "
                   "manifest names")
    else:
        report.note(TIMER, f"{head}; at most {bound:,.0f} expected from HZ {clock['hz']} and "
                           f"{rate_m:g} M instructions a second per vCPU (fails above "
                           f"{limit:,.0f})")


__all__ = ["IDLE_TEXT", "LOCAL_TIMER_VECTOR", "MAX_FACTOR", "TIMER", "check_timer",
           "expected_rate", "idle_text", "timer_interrupts"]
