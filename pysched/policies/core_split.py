"""Shared machinery of the core-specialisation baselines of SchedTask's Table 3
(SelectiveOffload, FlexSC, DisAggregateOS) and of seed 002's dedicated cores (profile-dvfs):
the cores are split into application cores and OS cores; application SuperFunctions run on
application cores, the OS work a policy offloads runs on OS cores, each placed on the least
loaded core of its set (queue length, then index). The OS cores serve all OS work, or, where
a policy dedicates them by kind (DisAggregateOS, seed 002), each kind of OS work its own
(:func:`.subsystems.kind_cores`), interrupts included. Within a core: interrupts first, then
first come first served, with CFS-like time slices for application code (as the ``linux``
policy). No stealing across the split.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pysched.superfunctions.functype import Category

from .base import Policy
from .subsystems import kind_cores, work_kind

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.engine import SimView, Work

#: The categories of application SuperFunctions.
_APP = (int(Category.APPLICATION), int(Category.UNKNOWN))


class CoreSplit(Policy):
    """Base class: subclasses say what is offloaded (:meth:`offload`) and whether the OS cores
    are dedicated by kind (:attr:`by_kind`), and may resize the split (:meth:`split`)."""

    #: Whether each kind of OS work (:func:`.subsystems.work_kind`) has OS cores of its own,
    #: interrupts going to theirs (DisAggregateOS); else every OS core serves all OS work.
    by_kind: bool = False

    def attach(self, sim: SimView) -> None:
        super().attach(sim)
        self.split(max(1, sim.ncores // 2))

    def split(self, n_os: int) -> None:
        """The last ``n_os`` cores are OS cores (at least one core of each kind remains)."""
        n = self.sim.ncores
        n_os = min(max(n_os, 1), n - 1) if n > 1 else 0
        self.app_cores = list(range(n - n_os)) if n > 1 else [0]
        self.os_cores_all = list(range(n - n_os, n)) if n > 1 else [0]
        if self.by_kind:
            self._kind_cores = kind_cores(self.os_cores_all)

    def os_cores(self, work: Work) -> list[int]:
        """OS cores that may run ``work``: its kind's (:attr:`by_kind`), else all of them."""
        if self.by_kind:
            return self._kind_cores[work_kind(work)]
        return self.os_cores_all

    def offload(self, work: Work) -> bool:
        """Whether an OS SuperFunction goes to the OS cores."""
        return True

    def _least(self, cores: list[int]) -> int:
        return self.sim.least_loaded(cores)

    def _app_core(self, last: int) -> int:
        if last in self.app_cores:
            return last
        return self._least(self.app_cores)

    def _is_app(self, work: Work) -> bool:
        return work.category in _APP

    def place(self, work: Work, core: int) -> int:
        if self._is_app(work):
            return self._app_core(self.sim.last_core(work.task) if work.task >= 0 else core)
        if self.offload(work):
            return self._least(self.os_cores(work))
        return self._app_core(self.sim.last_core(work.task) if work.task >= 0 else core)

    def route_interrupt(self, work: Work, arrival_core: int) -> int:
        # cores dedicated by kind include the interrupts' own; else they stay where they arrive
        if self.by_kind:
            return self._least(self.os_cores(work))
        return arrival_core

    def pick_next(self, core: int) -> int | None:
        return self.interrupts_first(core)

    def time_slice(self, work: Work, core: int) -> float:
        return self.cfs_slice(core) if self._is_app(work) else math.inf
