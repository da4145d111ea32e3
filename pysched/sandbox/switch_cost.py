"""What a context switch and an OS move of a thread between cores cost in the sandbox.

Two models (:data:`SWITCH_COSTS`), chosen with ``pysched evaluate --switch-cost``:

* ``flat`` (default, the sandbox's model until now): every context switch costs 1,000 cycles
  and every move of a thread to another core 1,000 more. Source: seed 001 section 4.2, "A
  context switch incurs a fixed cost for storing and restoring the architecture state (at
  most a few kilobytes) [12] for which we presume a fixed 1,000 cycle penalty" -- a penalty
  presumed for HRRS's *hardware* swap (x86 hardware task switching, seed 001 section 3), not a
  measurement of an OS switch, and charged twice here for an OS move (switch + migration).
* ``traced``: the traced kernel's own context-switch path. The segmentation leaves the
  instructions of :data:`~pysched.superfunctions.symbols.SCHEDULER_FUNCTIONS` (``schedule``,
  ``__schedule``, ``pick_next_task*``, ``put_prev_task*``, ``__switch_to``,
  ``finish_task_switch``...) out of every SuperFunction, so the sandbox's items do not
  replay them; this model charges each switch what the trace executed there per context
  switch (:class:`TracedSwitch`), turned into cycles at the core's base CPI. An OS move costs
  nothing beyond the destination's switch: SchedTask's TMigrate moves a SuperFunction "by
  appending it to the core's runnable queue ... lock-free" (SchedTask section 5.3), and the
  thread is then switched in there like any other (the work Linux does to move a thread,
  ``set_task_cpu`` and a remote enqueue, stays in the items where the trace ran it). The
  cold caches the thread finds are modelled by the caches, in both models.

Approximations of ``traced`` (written here, where they are made):

* One figure per trace: the mean over its switches. The path's length varies with the
  classes and whether the address space changes; its mean is what the trace's mix paid.
* Cycles = instructions x the core's base CPI: the switch path's cache misses are not
  charged (its code is hot: it runs on every switch on every core).
* The rest of Linux's scheduler (run-queue bookkeeping, wake-ups, the tick; about 2-5 times
  the switch path, :mod:`pysched.characterisation.scheduler`) is not a switch cost: it stays
  in the items for every policy, as the trace ran it. SchedTask section 6.1 (1) charges
  TMigrate "around 3.2 %", "roughly the same amount of time that the baseline Linux system
  spends executing its scheduler", so keeping Linux's scheduler work in SchedTask's replay
  stands for TMigrate's.
* Hardware moves of a running thread (:meth:`~.engine.SimView.migrate_running`, seed 001's
  HRRS) keep the core's ``migration_cycles`` in both models: that is the cost seed 001 gives.
"""
from __future__ import annotations

from dataclasses import dataclass

from pysched.models.cores.config import CoreConfig

from .engine import SandboxConfig

#: The switch-cost models (``pysched evaluate --switch-cost``).
FLAT, TRACED = "flat", "traced"
SWITCH_COSTS = (FLAT, TRACED)


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
    """

    switches: int
    switch_path: int

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
    return TracedSwitch(context_switches(trace), int(seg.instances["sched_insns"].sum()))


def sandbox_costs(model: str, core: CoreConfig, traced: TracedSwitch | None = None
                  ) -> dict[str, int | None]:
    """The :class:`~.engine.SandboxConfig` fields ``switch_cycles`` and
    ``os_migration_cycles`` of ``model`` on cores of type ``core``.

    ``flat``: 1,000 cycles per switch and the core's ``migration_cycles`` per OS move.
    ``traced``: ``round(traced.per_switch * core.base_cpi)`` per switch, nothing more per move.

    Raises
    ------
    ValueError
        On an unknown model, or ``traced`` without ``traced``.
    """
    if model == FLAT:  # SandboxConfig's defaults
        return {"switch_cycles": SandboxConfig.switch_cycles, "os_migration_cycles": None}
    if model == TRACED:
        if traced is None:
            raise ValueError("switch cost 'traced' needs the trace's TracedSwitch")
        return {"switch_cycles": int(round(traced.per_switch * core.base_cpi)),
                "os_migration_cycles": 0}
    raise ValueError(f"switch cost must be one of {', '.join(SWITCH_COSTS)}, got {model!r}")
