"""The machine-wide instruction clock of a trace: every vCPU's instructions on one timeline.

A vCPU's ``icount`` counts only its own instructions, and an idle vCPU retires none (it waits
in ``hlt``), so "instruction ``i`` of each vCPU" is not one moment of the machine. The events
of every per-vCPU table carry both the vCPU's ``icount`` and ``time_ns``, the host's monotonic
time (``qemu-plugin/README.md``: an approximate global order across vCPUs). Those pairs place
each vCPU's instructions on the host's timeline, and the **machine-wide instruction count**
``M(t)`` is the sum over vCPUs of the instructions each had retired at host time ``t``. The
clock maps a trace position (vCPU, icount) to ``M`` and back.

**Epochs** (SchedTask section 4.4: 3 ms) are intervals of ``M``: epoch ``k`` is the machine's
instructions ``[k * E, (k + 1) * E)`` with ``E = epoch_len * nvcpus``, ``epoch_len`` being one
vCPU's instructions in 3 ms at :data:`~pysched.constants.CLOCK_HZ` and
:data:`~pysched.constants.IPC` (:data:`~pysched.constants.DEFAULT_EPOCH`). An idle vCPU adds
nothing to ``M`` and so neither ends an epoch nor holds one open. The clock in seconds,
:meth:`TraceClock.seconds`, is ``M / (nvcpus * CLOCK_HZ * IPC)`` ("machine time"): an epoch is
3 ms of it, and it is the sandbox's simulated time when the sandbox runs the trace's work at
the nominal clock and IPC on as many cores as the trace has vCPUs, all busy.

Approximations, made here:

* Between two consecutive events of a vCPU its instructions are spread evenly over the host
  time between them (linear interpolation); host time is QEMU's emulation speed, so this
  assumes a vCPU retires instructions at a steady rate between events, which events of every
  system call, interrupt and context switch keep short on a busy vCPU. The few instructions an
  idle vCPU runs between two distant events (into or out of ``hlt``) are spread over the gap
  between them, so they move by at most that gap.
* Every vCPU starts recording at the trace's first event (the ``begin`` marker; a vCPU that
  has that event at a later icount, in the nanosecond before it); a vCPU's instructions after
  its last event are placed in the nanosecond after it.
* Time when the machine retired nothing (every vCPU idle) is not on the clock: machine time
  counts work. With idle vCPUs, a 3 ms epoch of machine time is the work the whole machine
  would do in 3 ms at full load, which took the traced machine longer.
* A vCPU that stopped recording before the others (``roi_insns=N``: each vCPU stops once it
  has N instructions, ``qemu-plugin/README.md``; or the cut of an incomplete trace's prefix)
  did unrecorded work after its stream ends, so the clock is *covered* (the machine's work
  known) only up to the earliest such end: :attr:`TraceClock.covered`. A vCPU that recorded to
  the region's end was idle after its last event.

:func:`last_interrupt_s` gives a moment on the other clock, a vCPU's own (its ``icount`` over
``CLOCK_HZ * IPC``), which is the sandbox's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pysched.constants import CLOCK_HZ, IPC

from .errors import TraceError
from .execstream import exec_chunks
from .reader import Trace, open_trace
from .schema import EVENT_TABLES


@dataclass(frozen=True)
class TraceClock:
    """Machine-wide instruction clock of a trace (see the module docstring).

    Attributes
    ----------
    vcpus : list of int
        The vCPUs, in order.
    vcpu_insns : dict of int to int
        Instructions of each vCPU's stream.
    machine : numpy.ndarray of float64
        ``M`` at each knot of the common timeline (non-decreasing, starting at 0).
    icount : numpy.ndarray of float64, shape (nvcpus, knots)
        Each vCPU's instructions at each knot (row ``j`` is ``vcpus[j]``).
    covered : int
        Machine-wide instructions up to the earliest end of a vCPU that stopped recording
        before the region ended (all of them when none did).
    """

    vcpus: list[int]
    vcpu_insns: dict[int, int]
    machine: np.ndarray
    icount: np.ndarray
    covered: int

    @property
    def total(self) -> int:
        """All the trace's instructions."""
        return int(sum(self.vcpu_insns.values()))

    def epoch_insns(self, epoch_len: int) -> int:
        """Machine-wide instructions of an epoch of ``epoch_len`` instructions per vCPU."""
        return int(epoch_len) * max(len(self.vcpus), 1)

    def machine_insns(self, vcpu: int, icount) -> np.ndarray:
        """``M`` when ``vcpu`` was at instruction ``icount`` (array-like): the first moment
        it had retired that many."""
        j = self.vcpus.index(vcpu)
        ic = np.asarray(icount, dtype=np.float64)
        # Knots where this vCPU did not advance would make the inverse ambiguous: keep the
        # first knot of each of its counts (the moment it reached it).
        row = self.icount[j]
        first = np.concatenate([[True], np.diff(row) > 0])
        return np.interp(ic, row[first], self.machine[first])

    def seconds(self, vcpu: int, icount) -> np.ndarray:
        """Machine time in seconds of (``vcpu``, ``icount``): ``M / (nvcpus * CLOCK_HZ *
        IPC)``."""
        return self.machine_insns(vcpu, icount) / (max(len(self.vcpus), 1) * CLOCK_HZ * IPC)

    def vcpu_icount(self, vcpu: int, machine) -> np.ndarray:
        """Instructions ``vcpu`` had retired when the machine had retired ``machine``
        (array-like); rounded to the nearest instruction."""
        j = self.vcpus.index(vcpu)
        m = np.asarray(machine, dtype=np.float64)
        keep = np.concatenate([[True], np.diff(self.machine) > 0])
        return np.rint(np.interp(m, self.machine[keep], self.icount[j][keep])).astype(np.int64)

    def epoch_bounds(self, epoch_len: int) -> dict[int, np.ndarray]:
        """Per vCPU, the icount at which each epoch after the first begins.

        Epoch ``k >= 1`` begins on a vCPU at :meth:`vcpu_icount` of ``k * E`` (``E`` =
        :meth:`epoch_insns`), for every ``k * E`` below :attr:`total`; an instruction ``i``
        of the vCPU is in epoch ``searchsorted(bounds, i, side="right")``. A vCPU idle
        through an epoch has two equal bounds (an empty epoch on it).
        """
        if int(epoch_len) <= 0:
            raise ValueError(f"epoch_len must be a positive number of instructions, got "
                             f"{epoch_len}")
        e = self.epoch_insns(epoch_len)
        ks = np.arange(1, -(-self.total // e), dtype=np.int64) * e
        return {v: self.vcpu_icount(v, ks) for v in self.vcpus}

    def complete_epochs(self, epoch_len: int) -> int:
        """Epochs that end before :attr:`covered`: those whose work the trace holds whole."""
        return int(self.covered // self.epoch_insns(epoch_len))


def _stream_length(trace: Trace, vcpu: int) -> int:
    if trace.prefix is not None:
        return int(trace.prefix.get(vcpu, (0, 0))[1])
    # A final plugin.json holds each vCPU's total, which the checker's preflight (run by check,
    # analyse and evaluate) verifies against the exec stream: reading the stream again here
    # cost seconds per trace.
    info = trace.plugin_info or {}
    totals = info.get("icount") if info.get("final") else None
    if isinstance(totals, list) and 0 <= vcpu < len(totals) and isinstance(totals[vcpu], int):
        return totals[vcpu]
    return int(sum(int(c.sizes.sum()) for c in exec_chunks(trace, vcpu, strict=False)))


def _stopped_early(trace: Trace, vcpu_insns: dict[int, int]) -> set[int]:
    """vCPUs whose recording ended before the region's end (see the module docstring)."""
    if trace.prefix is not None:
        return set(vcpu_insns)
    info = trace.plugin_info or {}
    opts = info.get("options") if isinstance(info.get("options"), dict) else {}
    n = opts.get("roi_insns", 0)
    if isinstance(n, int) and n > 0 and info.get("roi_insns_ends", 0):
        return {v for v, k in vcpu_insns.items() if k >= n}
    return set()


def _knots(trace: Trace, vcpu: int) -> tuple[np.ndarray, np.ndarray]:
    """(icount, time_ns) of every event of ``vcpu``, sorted by icount."""
    ic, tm = [], []
    for name in EVENT_TABLES:
        if trace.parts(name, vcpu):
            t = trace.table(name, vcpu)
            ic.append(t.column("icount").to_numpy().astype(np.int64))
            tm.append(t.column("time_ns").to_numpy().astype(np.int64))
    if not ic:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ic, tm = np.concatenate(ic), np.concatenate(tm)
    order = np.lexsort((tm, ic))
    return ic[order], tm[order]


def trace_clock(trace: Trace, vcpu_insns: dict[int, int] | None = None) -> TraceClock:
    """The :class:`TraceClock` of a trace.

    Parameters
    ----------
    trace : Trace
    vcpu_insns : dict of int to int, optional
        Instructions of each vCPU's stream, when already known (default: counted from the
        ``exec`` streams).

    Raises
    ------
    TraceError
        When a vCPU's events go back in host time as its icount grows (``time_ns`` must order
        one vCPU's events as its icount does).
    """
    vcpus = list(trace.vcpus)
    if vcpu_insns is None:
        vcpu_insns = {v: _stream_length(trace, v) for v in vcpus}
    knots = {v: _knots(trace, v) for v in vcpus}
    for v, (ic, tm) in knots.items():
        if len(tm) and (np.diff(tm) < 0).any():
            k = int(np.flatnonzero(np.diff(tm) < 0)[0])
            raise TraceError(f"{trace.path}: vCPU {v}: an event at icount {int(ic[k + 1])} has "
                             f"time_ns {int(tm[k + 1])}, before the one at icount {int(ic[k])} "
                             f"({int(tm[k])})")
    times = [tm for _, tm in knots.values() if len(tm)]
    if times:
        t0 = min(int(t[0]) for t in times)
        t_end = max(int(t[-1]) for t in times) + 1
    else:  # no events at all: every vCPU's work spread over one common interval
        t0, t_end = 0, 1
    t_end = max(t_end, t0 + 1)
    stopped = _stopped_early(trace, vcpu_insns)
    rows, ends = [], []
    for v in vcpus:
        ic, tm = knots[v]
        n = int(vcpu_insns.get(v, 0))
        keep = ic <= n
        ic, tm = ic[keep], tm[keep]
        last = int(tm[-1]) + 1 if len(tm) else (t0 if v in stopped else t_end)
        # A vCPU whose first event is the trace's first but not at its icount 0 ran the
        # instructions before it in the nanosecond before.
        start = t0 - 1 if len(tm) and tm[0] == t0 and ic[0] > 0 else t0
        ic = np.concatenate([[0], ic, [n]])
        tm = np.concatenate([[start], tm, [last]])
        if v in stopped:
            ends.append(last)
        else:
            ic = np.append(ic, n)
            tm = np.append(tm, t_end)
        rows.append((ic, tm))
    grid = np.unique(np.concatenate([tm for _, tm in rows]))
    icount = np.zeros((len(vcpus), len(grid)), dtype=np.float64)
    for j, (ic, tm) in enumerate(rows):
        # Several events at one host time: the count after the last of them.
        last_at = np.concatenate([tm[1:] != tm[:-1], [True]])
        icount[j] = np.interp(grid, tm[last_at], ic[last_at])
    machine = icount.sum(axis=0)
    t_cover = min(ends) if ends else grid[-1]
    covered = int(np.interp(t_cover, grid, machine)) if len(grid) else 0
    return TraceClock(vcpus, {v: int(vcpu_insns.get(v, 0)) for v in vcpus}, machine, icount,
                      covered)


def last_interrupt_s(trace: Trace | str | Path) -> float:
    """When the trace's last interrupt arrives, in seconds of the sandbox's trace clock.

    That clock is a vCPU's own instruction count over ``CLOCK_HZ * IPC``
    (:mod:`pysched.sandbox.workload`), not the machine time of :class:`TraceClock`. A replay
    cannot end before this moment: the sandbox delivers interrupts at their traced times.

    Parameters
    ----------
    trace : Trace, str or Path
        The trace, or its directory.

    Returns
    -------
    float
        The largest ``icount`` of the ``interrupts`` table over ``CLOCK_HZ * IPC``; 0 when
        the trace has no interrupts.
    """
    tr = open_trace(trace) if not hasattr(trace, "num_rows") else trace
    if not tr.num_rows("interrupts"):
        return 0.0
    return float(tr.table("interrupts").column("icount").to_numpy().max()) / (CLOCK_HZ * IPC)
