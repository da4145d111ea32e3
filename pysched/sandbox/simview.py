"""The engine as a policy sees it: :class:`Work` (what a policy may know of an item) and
:class:`SimView` (the machine, the queues, the statistics of finished work).

This is the policies' API (:mod:`pysched.policies.base`); the engine behind it is
:mod:`.engine`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pysched.models.cores.config import CoreConfig
from pysched.models.machine import MachineConfig

from .runqueue import RunQueue
from .workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine


def idle_cores(items: list[int], lo: int, hi: int) -> list[int]:
    """The cores ``lo`` <= c < ``hi`` that run nothing (``items[c] == -1``), in order, found
    by a C-level search however many of them are busy. Counted first, so that no search
    fails (a failed one raises, which cost more than the count when no core is idle); a list,
    not a generator, whose resumptions cost more than the list."""
    found = []
    c = lo - 1
    for _ in range(items[lo:hi].count(-1)):
        c = items.index(-1, c + 1, hi)
        found.append(c)
    return found


class Work:
    """What a policy may know of an item: never its length or its future.

    Attributes
    ----------
    gid : int
        Item id over all copies (``copy * len(workload) + item``).
    copy : int
    task : int
        Thread id over all copies (-1: interrupt or bottom half).
    functype : int
        superFuncType; ``type_id`` its dense id.
    category : int
        :class:`~pysched.superfunctions.functype.Category`.
    number : int
        System call number or vector (-1 otherwise).
    begins : int
        :data:`~.workload.FIRST`, ``START``, ``RETURN`` or ``RESUME`` (thread items).
    is_async : bool
        Interrupt or bottom half.
    trace_vcpu, trace_start : int
        Where it ran in the trace: for the ``as-traced`` oracle only.
    qkey : int
        Its order key in the run queue that holds it (:class:`~.runqueue.RunQueue`).
    """

    __slots__ = ("gid", "copy", "item", "task", "functype", "type_id", "category", "number",
                 "begins", "is_async", "trace_vcpu", "trace_start", "qkey")

    def __repr__(self) -> str:
        return (f"Work(gid={self.gid}, task={self.task}, type={self.functype:#x}, "
                f"category={self.category})")


class SimView:
    """The engine as a policy sees it: the machine, the queues, finished work's statistics."""

    def __init__(self, engine: Engine) -> None:
        self._e = engine

    @property
    def ncores(self) -> int:
        return self._e.ncores

    @property
    def now(self) -> float:
        return self._e.now

    @property
    def workload(self) -> Workload:
        """The workload's static description (types and their categories; item lengths are
        not to be used by policies that model an OS)."""
        return self._e.w

    @property
    def ntypes(self) -> int:
        return len(self._e.w.types)

    def queue(self, core: int) -> RunQueue:
        """The run queue of ``core``, head first (do not modify it; use :meth:`move`): a list
        of :class:`Work` that also counts its interrupts and bottom halves
        (:class:`~.runqueue.RunQueue`)."""
        return self._e.queues[core]

    def queue_len(self, core: int) -> int:
        return len(self._e.queues[core])

    def queued_threads(self) -> tuple[int, ...]:
        """Each core's queued threads (items that are neither interrupts nor bottom halves:
        ``len(queue(c)) - queue(c).irqs - queue(c).bhs``), indexed by core; a copy."""
        return tuple(self._e.threads_queued)

    def queued_cores(self) -> list[int]:
        """The cores whose queue holds an item, in order."""
        return [c for c, q in enumerate(self._e.queues) if q]

    def least_loaded(self, cores: list[int]) -> int:
        """The core of ``cores`` with the fewest items queued and running (:meth:`queue_len`
        plus one when :meth:`running`), the lowest number at a tie; -1 when ``cores`` is
        empty."""
        queues, items = self._e.queues, self._e.core_item
        best, least = -1, 0
        for c in cores:
            k = len(queues[c]) + (items[c] >= 0)
            if best < 0 or k < least or (k == least and c < best):
                best, least = c, k
        return best

    def running(self, core: int) -> Work | None:
        """The item ``core`` runs now (None: idle)."""
        g = self._e.core_item[core]
        return None if g < 0 else self._e.work(g)

    @property
    def copies(self) -> int:
        """Copies of the workload replayed together (``SandboxConfig.copies``)."""
        return self._e.K

    def home_of(self, copy: int, vcpu: int) -> int:
        """The core that copy ``copy`` of traced vCPU ``vcpu`` maps to."""
        return self._e.home(copy, vcpu)

    def home(self, work: Work) -> int:
        """The core that ``work``'s traced vCPU maps to: copy k of vCPU v on core
        ``(k * vCPUs + v) mod cores`` (the initial placement of every thread)."""
        return self._e.home(work.copy, work.trace_vcpu)

    def is_idle(self, core: int) -> bool:
        return self._e.core_item[core] < 0 and not self._e.queues[core]

    def next_idle(self, core: int) -> int:
        """The first idle core (:meth:`is_idle`) after ``core`` in cyclic order (``core + 1``,
        ..., the last, 0, ..., ``core - 1``); -1 when there is none. A search of the running
        items at C speed, so that it costs little however many cores are busy."""
        items, queues = self._e.core_item, self._e.queues
        for lo, hi in ((core + 1, len(items)), (0, core)):
            for c in idle_cores(items, lo, hi):
                if not queues[c]:
                    return c
        return -1

    def last_core(self, task: int) -> int:
        """Where thread ``task`` last ran (-1: never)."""
        return int(self._e.task_core[task])

    def task_runtime(self, task: int) -> float:
        """Seconds thread ``task`` has run so far."""
        return self._e._task_time[task]  # a float (Engine.__init__)

    def task_runtimes(self) -> memoryview:
        """:meth:`task_runtime` of every thread, indexed by thread: a read-only view that
        follows the run (a policy that reads many threads' run times at each decision keeps
        it, and indexes it instead of calling :meth:`task_runtime` for each)."""
        return self._e._task_time.toreadonly()

    def heatmaps(self) -> np.ndarray:
        """Page-heatmaps of the epoch so far: bool array (types, bits), row = type id
        (collected only when the policy sets ``heatmap_bits``; cleared after each epoch)."""
        return self._e.heat

    def move(self, work: Work, dst: int) -> None:
        """Move a queued item to the tail of ``dst``'s queue (a steal or a balance)."""
        self._e.move(work, dst)

    # --- the machine below the OS: core types, hardware moves, DVFS -----------------------------
    @property
    def machine(self) -> MachineConfig:
        """The machine: core types and the cache hierarchy (static, as an OS knows it)."""
        return self._e.cfg.machine

    def core_config(self, core: int) -> CoreConfig:
        """The type of ``core`` (big or small, its DVFS levels): static, as an OS knows it."""
        return self._e.cfg.machine.cores[core]

    def migrate_running(self, core: int, dst: int) -> bool:
        """Move the thread item running on ``core`` to ``dst`` at the end of its chunk, where
        it runs next (see the module). Returns False, doing nothing, when ``core`` runs no
        thread item (idle, or an interrupt or bottom half)."""
        return self._e.migrate_running(core, dst)

    def charge(self, core: int, insns: float) -> None:
        """Charge ``insns`` instructions of the policy's own routine (an OS scheduler's code
        that the trace does not hold, e.g. SchedTask's TMigrate) to ``core``, at its base CPI:
        its next chunk takes that much longer (``policy_cycles`` in the results). A charge
        after the core's last chunk of a run is not paid."""
        self._e.charge(core, insns)

    def level(self, core: int) -> int:
        """The DVFS level (index into ``core_config(core).dvfs``) ``core`` runs at now."""
        return int(self._e.level[core])

    def set_level(self, core: int, level: int) -> None:
        """Run ``core`` at DVFS level ``level`` from its next chunk on."""
        self._e.set_level(core, level)

    def task_insns(self, task: int) -> int:
        """Instructions thread ``task`` has retired so far (a performance counter)."""
        return int(self._e.s_task_insns[task])

    def task_cycles(self, task: int) -> float:
        """Busy cycles thread ``task`` has run so far, costs of switches included."""
        return float(self._e.task_cycles[task])

    def task_llc_misses(self, task: int) -> int:
        """Accesses of thread ``task`` so far that missed the shared last-level cache (served
        by memory): the per-thread shared-cache miss counter of seed 003 (section 4)."""
        return int(self._e.task_llc_misses[task])
