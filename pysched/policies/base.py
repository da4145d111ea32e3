"""The one interface every scheduling policy implements (a ``sched_class`` of the sandbox).

The engine (:mod:`pysched.sandbox.engine`) owns time, the cores, their run queues and the
cache models; it calls a policy's hooks at the moments an OS scheduler would run, and the
policy answers with a core (where to queue work) or by moving queued work. A policy sees only
what an OS could know then: an item's superFuncType, category, thread, system call number or
vector, where the thread last ran, the queues and the statistics of finished work, never how
long an item will run or what it will do next.

Hooks (all optional):

=====================  ==============================================================
``attach(sim)``        once, before time 0: read the machine (``sim.ncores`` ...)
``place``              default of the next three: where does a thread item go?
``thread_ready``       a thread becomes runnable (first item, or woken): queue where?
``sf_start``           a thread starts a new SuperFunction (system call, ...): where?
``sf_end``             a thread returns to the SuperFunction that called it: where?
``resume``             a thread continues the same SuperFunction after preemption: where?
``route_interrupt``    an interrupt or bottom half arrives: which core handles it?
``pick_next``          a core is free: which queued item runs next (default: the head)?
``steal``              a core has nothing queued: move work to it from other queues
``time_slice``         seconds a thread item may run before the core looks at its queue
``wakeup_preempt``     a queued thread preempts the running one before its slice ends?
``item_done``          an item finished (its cycles: the stats a kernel could collect)
``epoch_end``          an epoch of simulated time ended, with its statistics
``decisions``          after the run: what the policy decided, as rows (optional)
``notes``              after the run: what the results cannot show, e.g. that the
                       policy had nothing to act on and scheduled as its base (optional)
``tick``               every ``tick_s`` seconds, when the policy sets ``tick_s``: the
                       hardware below the OS (seed 001's hardware quantum) may move
                       running threads (``sim.migrate_running``) or change a core's
                       DVFS level (``sim.set_level``); returns the delay to the next tick
=====================  ==============================================================

Every placement hook returns a core index; returning the core the thread is on continues it
there without a context switch when nothing else is due (a system call runs where its thread
runs).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pysched.superfunctions.functype import Category
from pysched.trace.schema import DEVICE_VECTORS

_INTERRUPT = int(Category.INTERRUPT)

#: CFS's default tunables (``kernel/sched/fair.c``): sched_latency and min_granularity at one
#: CPU, scaled by ``1 + log2(min(cpus, 8))`` (``SCHED_TUNABLESCALING_LOG``).
LATENCY_S = 0.006
MIN_GRANULARITY_S = 0.00075
#: That scale per core count (cfs_slice asks it at every scheduling point).
_SCALE: dict[int, float] = {}

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.simview import SimView, Work
    from pysched.sandbox.metrics import SandboxStats


class Policy:
    """Base class: every hook has the do-nothing-special behaviour of a single run queue per
    core with work staying where it is. Subclasses set :attr:`name` and :attr:`summary`."""

    #: Registry name (``pysched evaluate --policies NAME``).
    name: str = ""
    #: One line for ``pysched evaluate --list``.
    summary: str = ""
    #: Where the rules come from (paper and section), shown in the evaluation summary.
    source: str = ""
    #: Cores this policy gets per core of the others (SelectiveOffload's 2x, Table 3).
    core_factor: int = 1
    #: Seconds between calls of :meth:`tick` (None: never called).
    tick_s: float | None = None
    #: Whether every SuperFunction boundary is a scheduling point (the queue's pick decides
    #: who runs next even when the thread stays on its core). False: the thread continues
    #: unless it must yield (Linux, see :mod:`pysched.sandbox.engine`).
    pick_at_boundaries: bool = False
    #: The model's settings the policy's paper states (ablation factor -> setting, see
    #: :mod:`pysched.studies.ablation`): the ``paper`` configuration of ``pysched ablate``.
    paper_model: dict[str, str] = {}
    #: Bits of the Page-heatmaps the engine collects per superFuncType each epoch (section
    #: 3.2; ``sim.heatmaps()``); 0: none collected.
    heatmap_bits: int = 0
    #: Whether a hardware interrupt or bottom half queued on a core interrupts the thread item
    #: running there at the end of its chunk (:mod:`pysched.sandbox.engine`, Interrupts first).
    preempt_for_interrupts: bool = True
    #: Whether a queued bottom half preempts too (False: only hardware interrupts do, for a
    #: policy that queues bottom halves as work of their own).
    preempt_for_bottom_halves: bool = True

    def __init__(self, **params) -> None:
        if params:
            raise TypeError(f"policy {self.name!r} takes no parameters, got "
                            f"{', '.join(sorted(params))}")
        self.sim: SimView | None = None

    def attach(self, sim: SimView) -> None:
        """Called once before the run; keep ``sim`` to look at the machine later."""
        self.sim = sim

    def place(self, work: Work, core: int) -> int:
        """Where a thread item goes, by default for :meth:`thread_ready`, :meth:`sf_start`
        and :meth:`sf_end` alike (``core``: where its thread is or last was). Default: there."""
        return core

    def thread_ready(self, work: Work, last_core: int) -> int:
        """A thread item became runnable (its thread's first item, or a woken one).

        ``last_core`` is where the thread last ran (its traced vCPU's core if never).
        """
        return self.place(work, last_core)

    def sf_start(self, work: Work, core: int) -> int:
        """The thread running on ``core`` starts a new SuperFunction (``work``)."""
        return self.place(work, core)

    def sf_end(self, work: Work, core: int) -> int:
        """The thread on ``core`` returns to an earlier SuperFunction (``work``)."""
        return self.place(work, core)

    def resume(self, work: Work, core: int) -> int:
        """The thread on ``core`` continues the same SuperFunction (a traced switch that was a
        preemption, not a wait)."""
        return core

    def route_interrupt(self, work: Work, arrival_core: int) -> int:
        """An interrupt or bottom half arrives; ``arrival_core`` is its traced vCPU's core."""
        return arrival_core

    def pick_next(self, core: int) -> int | None:
        """Index in ``sim.queue(core)`` of the item to run next (None: the queue is empty)."""
        return 0 if self.sim.queue_len(core) else None

    def steal(self, core: int) -> None:
        """``core`` is idle with an empty queue: move work to it with ``sim.move``."""

    def time_slice(self, work: Work, core: int) -> float:
        """Seconds ``work`` may run on ``core`` before queued work gets a turn."""
        return math.inf

    def wakeup_preempt(self, work: Work, core: int) -> bool:
        """Whether a thread queued on ``core`` preempts ``work``, the thread item running
        there, before its time slice ends (asked at the end of each chunk while others wait,
        and at SuperFunction boundaries, which are no scheduling points otherwise: see
        :mod:`pysched.sandbox.engine`). Default: never."""
        return False

    def item_done(self, work: Work, core: int, cycles: float, insns: int = 0) -> None:
        """``work`` finished on ``core`` after ``cycles`` busy cycles and ``insns``
        instructions (what performance counters would tell the kernel afterwards)."""

    def epoch_end(self, epoch: int, stats: SandboxStats) -> None:
        """Epoch ``epoch`` ended; ``stats`` are its deltas (see :class:`SandboxStats`)."""

    def decisions(self) -> list[dict]:
        """What the policy decided during the run, as flat rows with an ``epoch`` column (e.g.
        SchedTask's allocation table after every epoch); :func:`pysched.evaluation.evaluate`
        collects them. Default: none."""
        return []

    def notes(self) -> list[str]:
        """What a reader of the run's results must know that its figures do not show, asked
        after the run: e.g. that the policy found nothing to act on and so scheduled as its
        base did (the run row's ``policy_note``, the evaluation summary's "Policy notes").
        Default: none."""
        return []

    def tick(self) -> float | None:
        """Called every :attr:`tick_s` seconds when that is set; returns the seconds to the
        next call (None: :attr:`tick_s`)."""
        return None

    # --- helpers shared by policies ------------------------------------------------------------
    @staticmethod
    def routable(work: Work) -> bool:
        """Whether programming the interrupt controller can send hardware interrupt ``work`` to
        another core: a device vector (:data:`DEVICE_VECTORS`), or an unknown one (-1: the
        trace did not record the entry; treated as a device interrupt, our choice). False for
        bottom halves and per-CPU vectors, which run where they arrive."""
        return work.category == _INTERRUPT and (work.number < 0
                                                 or work.number in DEVICE_VECTORS)

    def cfs_slice(self, core: int) -> float:
        """CFS's time slice on ``core``: ``latency / nr_running``, at least the minimum
        granularity, both scaled by the core count (see :data:`LATENCY_S`)."""
        sim = self.sim
        factor = _SCALE.get(sim.ncores)
        if factor is None:
            factor = _SCALE[sim.ncores] = 1 + math.log2(min(sim.ncores, 8))
        return factor * max(LATENCY_S / (1 + sim.queue_len(core)), MIN_GRANULARITY_S)

    def min_slice(self) -> float:
        """CFS's shortest slice here: the minimum granularity, scaled as in :meth:`cfs_slice`."""
        return (1 + math.log2(min(self.sim.ncores, 8))) * MIN_GRANULARITY_S

    def interrupts_first(self, core: int, bottom_halves: bool = True) -> int | None:
        """Queue index of the first hardware interrupt, else of the first bottom half (unless
        ``bottom_halves`` is False), else the head (None: empty).

        Hardware interrupts come before bottom halves queued earlier: Linux takes a pending
        interrupt as soon as interrupts are enabled, and runs softirqs only on the way out of
        the handler (``irq_exit``); a bottom half the engine paused for an interrupt waits at
        the head of the queue and so resumes right after it.
        """
        q = self.sim.queue(core)
        if not q:
            return None
        idx = q.first_async(bottom_halves)
        return 0 if idx is None else idx
