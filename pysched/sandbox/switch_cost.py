"""What a context switch and an OS move of a thread between cores cost in the sandbox.

Three models (:data:`SWITCH_COSTS`), chosen with ``pysched evaluate --switch-cost``:

* ``traced`` (default): the traced kernel's own context-switch path, run. The segmentation
  leaves the instructions of :data:`~pysched.superfunctions.symbols.SCHEDULER_FUNCTIONS`
  (``schedule``, ``__schedule``, ``pick_next_task*``, ``put_prev_task*``, ``__switch_to``,
  ``finish_task_switch``...) out of every SuperFunction, so the sandbox's items do not replay
  them. Each simulated switch replays the next :attr:`TracedSwitch.per_switch` instructions
  of that code (the trace's mean per context switch), taken in trace order and cyclically,
  through the core's caches with their traced fetch lines (and data accesses when the trace
  has them): ``instructions * base CPI + stall cycles``, as SchedTask's method charges
  executed instructions and cache misses (section 6.1, Tejas on traces of the kernel). An
  OS move costs nothing beyond the destination's switch: SchedTask's TMigrate moves a
  SuperFunction "by appending it to the core's runnable queue ... lock-free" (section 5.3),
  and the thread is then switched in there like any other (the work Linux does to move a
  thread, ``set_task_cpu`` and a remote enqueue, stays in the items where the trace ran it);
  the cold caches the thread finds are modelled by the caches.
* ``flat``: every context switch costs 1,000 cycles and every move of a thread to another
  core 1,000 more. Source: seed 001 section 4.2, "A context switch incurs a fixed cost for
  storing and restoring the architecture state (at most a few kilobytes) [12] for which we
  presume a fixed 1,000 cycle penalty" -- a penalty presumed for HRRS's *hardware* swap (x86
  hardware task switching, seed 001 section 3), not a measurement of an OS switch.
* ``zero``: switches and moves cost nothing but the cold caches (a bound).

Approximations of ``traced`` (written here, where they are made):

* One length per trace: the mean over its switches. The path's length varies with the
  classes and whether the address space changes; its mean is what the trace's mix paid, and
  the replayed pieces keep the variety of its fetch lines.
* The scheduler code run outside context switches (``schedule()`` that picks the same task)
  is in the mean too: the sandbox's switches pay for it.
* The rest of Linux's scheduler (run-queue bookkeeping, wake-ups, the tick; about 2-5 times
  the switch path, :mod:`pysched.characterisation.scheduler`) is not a switch cost: it stays
  in the items for every policy, as the trace ran it.
* Hardware moves of a running thread (:meth:`~.engine.SimView.migrate_running`, seed 001's
  HRRS) keep the core's ``migration_cycles`` in every model: that is the cost seed 001 gives.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pysched.models.cores.config import CoreConfig


#: The switch-cost models (``pysched evaluate --switch-cost``), the default first.
TRACED, FLAT, ZERO = "traced", "flat", "zero"
SWITCH_COSTS = (TRACED, FLAT, ZERO)


@dataclass(frozen=True)
class TracedSwitch:
    """The traced kernel's context-switch path.

    Attributes
    ----------
    switches : int
        Context switches in the trace (rows of its ``switches`` table, every vCPU).
    switch_path : int
        Instructions the trace executed in the context-switch path (the segmentation's
        ``sched_insns``, summed over every instance).
    runs : numpy.ndarray of int64, shape (n, 3)
        The path's instruction ranges ``(vcpu, start, stop)`` in trace order (per vCPU,
        adjacent scheduler pieces merged): what the sandbox replays.
    """

    switches: int
    switch_path: int
    runs: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))

    def __post_init__(self) -> None:
        for name in ("switches", "switch_path"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")

    @property
    def per_switch(self) -> float:
        """Switch-path instructions per context switch."""
        if self.switches == 0:
            raise ValueError("the trace has no context switch: its switch cost is unknown "
                             "(use the flat switch cost)")
        return self.switch_path / self.switches


def traced_switch(seg, trace) -> TracedSwitch:
    """:class:`TracedSwitch` of ``trace`` from its segmentation ``seg``.

    Raises
    ------
    pysched.trace.TraceError
        When the trace has no ``switches`` table.
    """
    from pysched.characterisation.scheduler import context_switches
    return TracedSwitch(context_switches(trace), int(seg.instances["sched_insns"].sum()),
                        switch_runs(seg.pieces))


def switch_runs(pieces) -> np.ndarray:
    """``(vcpu, start, stop)`` of the scheduler code in a segmentation's ``pieces`` (sorted
    by vCPU and start), adjacent pieces of one vCPU merged."""
    p = pieces[pieces["sched"]]
    if not len(p):
        return np.zeros((0, 3), dtype=np.int64)
    v = p["vcpu"].to_numpy(np.int64)
    a = p["start"].to_numpy(np.int64)
    b = p["stop"].to_numpy(np.int64)
    new = np.r_[True, (v[1:] != v[:-1]) | (a[1:] != b[:-1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], len(v)] - 1
    return np.stack([v[first], a[first], b[last]], axis=1)


def sandbox_costs(model: str, core: CoreConfig | None = None,
                  traced: TracedSwitch | None = None) -> dict[str, int | None]:
    """The :class:`~.engine.SandboxConfig` fields ``switch_cycles`` and
    ``os_migration_cycles`` of ``model``.

    ``traced``: ``switch_cycles`` None (the engine runs the switch path, give it ``traced``
    as ``simulate(switch_path=...)``), nothing more per move. ``flat``: 1,000 cycles per
    switch and the core's ``migration_cycles`` per OS move. ``zero``: 0 and 0. ``core`` is
    not used (the engine charges each core at its own CPI); it is kept for callers.

    Raises
    ------
    ValueError
        On an unknown model, or ``traced`` without ``traced`` (or one without switches).
    """
    if model == FLAT:  # seed 001's 1,000 cycles; the cores' migration_cycles
        return {"switch_cycles": 1000, "os_migration_cycles": None}
    if model == ZERO:
        return {"switch_cycles": 0, "os_migration_cycles": 0}
    if model == TRACED:
        if traced is None:
            raise ValueError("switch cost 'traced' needs the trace's TracedSwitch")
        traced.per_switch  # noqa: B018 -- raises on a trace without switches
        return {"switch_cycles": None, "os_migration_cycles": 0}
    raise ValueError(f"switch cost must be one of {', '.join(SWITCH_COSTS)}, got {model!r}")
