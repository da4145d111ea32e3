"""``schedtask``: SchedTask (seed 000), TAlloc and TMigrate as sections 3.2, 5.2, 5.3 and
Algorithm 1 specify.

* **Stats table** (5.2, Algorithm 1 ``stopStatsCollection``): per superFuncType, its execution
  time (busy cycles) and number of finished SuperFunctions in the last epoch, and its
  Page-heatmap (``heatmap_bits``, 512 by default; the engine sets bit ``hash(pfn) mod bits``
  for every code frame a SuperFunction of the type fetched from, section 3.2).
* **TAlloc** (5.2), at every epoch boundary: cores are allocated to superFuncTypes in direct
  proportion to their execution fraction in the last epoch, but only when the cosine
  similarity of the last two epochs' execution fractions is below ``threshold`` (0.98); then
  each interrupt type is routed to its cores. The overlap table is rebuilt every epoch: for
  each type, the other types by decreasing Page-heatmap overlap (popcount of the AND),
  application and OS types never compared.
* **TMigrate** (5.3, Algorithm 1 ``startSuperFunction``): a starting SuperFunction goes to the
  allocated core of its type with the least waiting time (the sum of the average execution
  times of the SuperFunctions in its runnable queue), or stays on the local core when its type
  has no entry. Returning to the parent SuperFunction is placed the same way by the parent's
  type (the parent's allocation), a woken thread by the type it resumes, a preempted one stays.
* **Every SuperFunction boundary is a scheduling point** (Algorithm 1 ``startSuperFunction``,
  lines 17-21: a starting SuperFunction is appended to the runnable queue of the chosen core,
  the local one included; ``stopSuperFunction`` and ``executeNextRunnableTask`` then run the
  head of the local queue): ``pick_at_boundaries``, unlike the thread-based policies; the head
  runs next, first come first served. A hardware interrupt is no queued SuperFunction: the
  routed core takes it at once (5.2 programs the interrupt controller to route it; a handler
  preempts whatever runs), so it runs first and preempts a running thread item at the end of
  its chunk (the engine's rule); bottom halves are SuperFunctions placed by TMigrate and wait
  their turn in the queue (``preempt_for_bottom_halves = False``).
* **Interrupts** (5.2): to the allocated cores of their type (least waiting time); types absent
  from the stats table go to core 0; before the first TAlloc, where they arrive (see below).
  5.2 does this by programming the interrupt controller,
  which can steer only device interrupts (:data:`~.base.DEVICE_VECTORS`, and, our choice,
  interrupts whose vector the trace lost); per-CPU vectors (the local APIC timer, IPIs,
  exceptions) stay on the core where they arrive, as under ``linux`` (approximation: the
  core of their traced vCPU, :meth:`~.base.Policy.route_interrupt`). A hardware interrupt
  preempts a running bottom half (section 3; the engine's rule). Bottom halves are
  SuperFunctions placed by TMigrate.
* **Stealing** (5.3, Algorithm 1 ``stealWorkOfOtherCores``): an idle core first steals one
  SuperFunction of a type mapped to it, from the core with the maximum waiting time; failing
  that, it walks the combined overlap list of its types in decreasing overlap and, at the first
  type found queued on another core, steals half of those SuperFunctions. The list holds every
  type of the same side (application or OS, 5.2) that ran in the last epoch, those with no
  common Page-heatmap bit last: our reading of 5.2-5.3, which rank types by overlap but drop
  none (before 2026-11-26 the sandbox dropped zero-overlap types, which left cores idle beside
  queued work of their own side). ``stealing`` selects
  ``none``, ``same`` (first level only) or ``similar`` (both: the paper's default; Fig 9).
* **Stealing across the application/OS split** (``steal``): 5.2 computes no overlap between
  application and OS types, so the literal Algorithm 1 never steals across the split
  (``steal=same``, the default); ``steal=any`` appends the other side's types to the
  level-2 list after every type of the own side (by their overlap), which is one reading of
  the paper's near-0 % idle time at 2X (6.1, Fig 8b). Both readings are reported beside the
  paper (``pysched ablate --factor schedtask:steal=same,any``).
* **TMigrate and TAlloc cost** (6.1 (1)): "the TMigrate function is called at the start and
  the end of each SuperFunction ... it contributes ... around 3.2% to the system's
  execution", TAlloc "< 0.01%". The trace holds neither, so the policy charges them with
  ``sim.charge``: ``tmigrate / (1 - tmigrate)`` of the workload's instructions spread over
  its items, two calls per item, charged on the core where the item ended (TMigrate runs on
  the local core at the boundary, and decides there where the next SuperFunction goes); and
  ``talloc`` of each epoch's instructions on core 0 at the epoch's end. Approximations: every
  call costs the same instructions at the core's base CPI (no cache misses of its own); the
  Linux scheduler code that stays in the items (wake-ups, run-queue bookkeeping,
  :mod:`pysched.sandbox.switch_cost`) is not taken out, so SchedTask pays both it and TMigrate
  (the paper's 3.2 % is "roughly the same amount of time that the baseline Linux system spends
  executing its scheduler").

Our choices where the paper is silent: before the first TAlloc (the first epoch) there is no
allocation table and every SuperFunction runs locally, interrupts too, an idle core then
stealing any queued work (the paper's table exists from system initialisation; before
2026-11-26 the sandbox sent every device interrupt of that first epoch to core 0, as types
absent from a table, which queued 32 copies' interrupts there at 32 cores); application
SuperFunctions keep CFS-like time slices within a core (the ``linux`` policy's), OS
SuperFunctions run to completion; the allocation gives each type the consecutive cores from
``round(cores * cumulative fraction before it)`` to ``round(cores * cumulative fraction after
it)`` in decreasing order of fraction (at least one): types smaller than a core share one with
their neighbours.
"""
from __future__ import annotations

import math

import numpy as np

from pysched.superfunctions.functype import Category

from .base import Policy

_INTERRUPT = int(Category.INTERRUPT)

STEALING = ("none", "same", "similar")
#: ``steal``: stay on the own side of the application/OS split, or steal from either.
STEAL_SIDES = ("same", "any")
#: Section 6.1 (1): TMigrate's share of the system's execution, and TAlloc's bound.
TMIGRATE_SHARE = 0.032
TALLOC_SHARE = 0.0001


class SchedTask(Policy):
    name = "schedtask"
    summary = ("SchedTask: TAlloc cores by superFuncType, TMigrate to the least-waiting core, "
               "IRQ routing, same-then-similar stealing")
    source = "seed 000 (SchedTask), sections 3.2, 5.2, 5.3, Algorithm 1"
    # Algorithm 1: a starting SuperFunction joins the back of a runnable queue, even locally
    pick_at_boundaries = True
    # bottom halves are queued SuperFunctions; hardware interrupts preempt (see the module)
    preempt_for_bottom_halves = False
    #: What the paper states of the machine: costs are executed instructions and cache misses
    #: (6.1: Tejas on traces of a kernel that ran TMigrate), a move is a lock-free append
    #: (5.3), an idle core is sent an IPI when work is queued for it (Algorithm 1 line 23),
    #: and the OS data of handler instances is shared (6.1, "Data locality").
    paper_model = {"switch_cost": "traced", "move_cost": "0", "idle_retry": "on",
                   "kernel_data": "shared"}

    def __init__(self, heatmap_bits: int = 512, threshold: float = 0.98,
                 stealing: str = "similar", steal: str = "same",
                 tmigrate: float = TMIGRATE_SHARE, talloc: float = TALLOC_SHARE) -> None:
        super().__init__()
        if steal not in STEAL_SIDES:
            raise ValueError(f"schedtask: steal must be one of {', '.join(STEAL_SIDES)}, got "
                             f"{steal!r}")
        for name, v in (("tmigrate", tmigrate), ("talloc", talloc)):
            if not isinstance(v, (int, float)) or not 0.0 <= float(v) < 1.0:
                raise ValueError(f"schedtask: {name} is a share of execution in [0, 1), got "
                                 f"{v!r}")
        self.steal_side = steal
        self.tmigrate = float(tmigrate)
        self.talloc_share = float(talloc)
        heatmap_bits = int(heatmap_bits)
        if heatmap_bits <= 0:
            raise ValueError(f"schedtask: heatmap_bits must be positive, got {heatmap_bits}")
        threshold = float(threshold)
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"schedtask: threshold is a cosine similarity in [-1, 1], got "
                             f"{threshold}")
        if stealing not in STEALING:
            raise ValueError(f"schedtask: stealing must be one of {', '.join(STEALING)}, got "
                             f"{stealing!r}")
        self.heatmap_bits = heatmap_bits
        self.threshold = threshold
        self.stealing = stealing

    def attach(self, sim) -> None:
        super().attach(sim)
        w = sim.workload
        n = len(w.types)
        self.is_app = w.type_category == int(Category.APPLICATION)
        self.alloc: dict[int, list[int]] = {}           # type id -> its cores
        self.core_types: list[set[int]] = [set() for _ in range(sim.ncores)]
        self.set_averages(np.zeros(n))
        self.prev_frac: np.ndarray | None = None
        self.overlap: dict[int, list[tuple[int, int]]] = {}
        self._ranks: dict[int, dict[int, int]] = {}      # core -> Level 2's order (steal)
        self.reallocations = 0
        #: (epoch, allocation table in force after it) for every epoch: what TAlloc decided.
        self.history: list[tuple[int, dict[int, list[int]]]] = []
        #: (epoch, cosine similarity to the previous epoch's fractions or NaN, reallocated).
        self.talloc: list[tuple[int, float, bool]] = []
        # TMigrate's instructions per item (two calls), from section 6.1's share (module)
        self.tmigrate_insns = (self.tmigrate / (1.0 - self.tmigrate)
                               * float(w.total_insns) / max(len(w), 1))

    def set_averages(self, avg: np.ndarray) -> None:
        """The average cycles per SuperFunction of each type (:attr:`avg`), which TMigrate's
        waiting times sum (5.3); TAlloc sets them at every epoch's end."""
        self.avg = np.asarray(avg, dtype=np.float64)
        self._avg = self.avg.tolist()                    # the same, read item by item
        self._waits: dict[int, tuple[int, float]] = {}   # core -> (queue version, _wait)

    def item_done(self, work, core: int, cycles: float, insns: int = 0) -> None:
        if self.tmigrate_insns > 0:
            self.sim.charge(core, self.tmigrate_insns)

    # --- TAlloc -------------------------------------------------------------------------------
    def epoch_end(self, epoch: int, stats) -> None:
        if self.talloc_share > 0:  # TAlloc runs on core 0 (5.2)
            self.sim.charge(0, self.talloc_share / (1.0 - self.talloc_share)
                            * float(np.sum(stats.instructions)))
        cyc = np.asarray(stats.type_cycles, dtype=np.float64)
        items = np.asarray(stats.type_items)
        done = items > 0
        avg = self.avg.copy()
        avg[done] = cyc[done] / items[done]
        self.set_averages(avg)
        total = cyc.sum()
        sim, realloc = float("nan"), False
        if total > 0:
            frac = cyc / total
            if self.prev_frac is not None:
                sim = _cosine(frac, self.prev_frac)
            if self.prev_frac is None or sim < self.threshold:
                self._allocate(frac)
                realloc = True
            self.prev_frac = frac
            self._overlaps(self.sim.heatmaps())
        self.history.append((epoch, {t: list(c) for t, c in self.alloc.items()}))
        self.talloc.append((epoch, sim, realloc))

    def decisions(self) -> list[dict]:
        """The allocation table after every epoch (5.2), one row per (epoch, superFuncType):
        ``type_id``, ``functype``, ``label``, ``category``, ``cores`` (how many), ``first_core``
        and ``last_core`` (its consecutive cores), ``similarity`` (cosine of this epoch's
        execution fractions with the previous epoch's) and ``reallocated`` (whether TAlloc
        re-allocated after this epoch: similarity below ``threshold``, or the first epoch)."""
        from pysched.superfunctions.functype import describe
        w = self.sim.workload
        rows = []
        for (epoch, table), (_, sim, realloc) in zip(self.history, self.talloc):
            for t, cores in sorted(table.items(), key=lambda x: x[1][0]):
                rows.append({"epoch": epoch, "type_id": t, "functype": int(w.types[t]),
                             "label": describe(int(w.types[t]), int(w.type_category[t])),
                             "category": Category(int(w.type_category[t])).label,
                             "cores": len(cores), "first_core": cores[0],
                             "last_core": cores[-1], "similarity": sim,
                             "reallocated": realloc})
        return rows

    def _allocate(self, frac: np.ndarray) -> None:
        """Cores in proportion to the execution fraction (5.2)."""
        ncores = self.sim.ncores
        self._ranks = {}
        self.alloc = {}
        self.core_types = [set() for _ in range(ncores)]
        cum = 0.0
        for t in np.argsort(-frac, kind="stable").tolist():
            f = float(frac[t])
            if f <= 0:
                break
            lo = min(int(round(cum * ncores)), ncores - 1)
            cum += f
            hi = max(lo + 1, min(int(round(cum * ncores)), ncores))
            cores = list(range(lo, hi))
            self.alloc[t] = cores
            for c in cores:
                self.core_types[c].add(t)
        self.reallocations += 1

    def _overlaps(self, heat: np.ndarray) -> None:
        """The overlap table (5.2): per type, others by decreasing common Page-heatmap bits."""
        used = np.flatnonzero(heat.any(axis=1))
        self._ranks = {}
        self.overlap = {}
        if len(used) == 0:
            return
        h = heat[used].astype(np.int64)
        common = h @ h.T
        app = self.is_app[used]
        for k, t in enumerate(used.tolist()):
            same_side = app == app[k]
            order = np.argsort(-common[k], kind="stable")
            # every type of the same side, a zero overlap too (last): 5.2's table lists the
            # types "in the decreasing order of the Page overlap values", and 5.3's walk stops
            # only at a type found queued (0 is a value; nothing in 5.2-5.3 drops it)
            self.overlap[t] = [(int(used[j]), int(common[k, j])) for j in order.tolist()
                               if j != k and (same_side[j] or self.steal_side == "any")]

    # --- TMigrate -----------------------------------------------------------------------------
    def _wait(self, core: int) -> float:
        """Waiting time of a core (5.3): average execution times of its queued work, summed
        in queue order (kept until the queue or the averages change)."""
        q = self.sim.queue(core)
        hit = self._waits.get(core)
        if hit is not None and hit[0] == q.version:
            return hit[1]
        avg = self._avg
        w = float(sum(avg[wk.type_id] for wk in q))
        self._waits[core] = (q.version, w)
        return w

    def place(self, work, local: int) -> int:
        cores = self.alloc.get(work.type_id)
        if not cores:
            return local
        if len(cores) == 1:
            return cores[0]
        return min(cores, key=self._wait)

    def route_interrupt(self, work, arrival_core: int) -> int:
        if work.category == _INTERRUPT and not self.routable(work):
            # 5.2 programs the interrupt controller, which steers device interrupts only: a
            # per-CPU vector (local timer, IPI, exception) runs where it arrives
            return arrival_core
        if not self.alloc:
            # before the first TAlloc every SuperFunction runs locally (module docstring)
            return arrival_core
        if work.type_id in self.alloc:
            return self.place(work, arrival_core)
        # 5.2: an interrupt type absent from the stats table goes to core 0
        return 0 if work.category == _INTERRUPT else arrival_core

    def time_slice(self, work, core: int) -> float:
        return self.cfs_slice(core) if self.is_app[work.type_id] else math.inf

    def pick_next(self, core: int) -> int | None:
        """The first hardware interrupt queued, else the head (Algorithm 1
        ``executeNextRunnableTask``)."""
        return self.interrupts_first(core, bottom_halves=False)

    # --- stealing (Algorithm 1) ---------------------------------------------------------------
    def steal(self, core: int) -> None:
        if self.stealing == "none":
            return
        sim = self.sim
        queued = [c for c in sim.queued_cores() if c != core]
        if not queued:
            return
        if not self.alloc:  # before the first TAlloc: any queued work (our choice)
            victim = self._most_waiting(queued)
            q = sim.queue(victim)
            if len(q) > 1 or sim.running(victim) is not None:
                sim.move(q[-1], core)
            return
        mine = self.core_types[core]
        # Level 1: same work only, from the core with the maximum waiting time that queues
        # some (the cores' per-type counts say which do without a look through their queues)
        holding = [c for c in queued if not mine.isdisjoint(sim.queue(c).type_count)]
        if holding:
            for wk in sim.queue(self._most_waiting(holding)):
                if wk.type_id in mine:
                    sim.move(wk, core)
                    return
        if self.stealing != "similar":
            return
        # Level 2: similar work, by decreasing overlap with the local core's types: the
        # best-ranked type queued anywhere, from the core with the maximum waiting time that
        # queues it
        rank = self._similar_rank(core)
        best = None
        for c in queued:
            for t in sim.queue(c).type_count:
                r = rank.get(t)
                if r is not None and (best is None or r < rank[best]):
                    best = t
        if best is None:
            return
        victim = self._most_waiting([c for c in queued if best in sim.queue(c).type_count])
        found = [wk for wk in sim.queue(victim) if wk.type_id == best]
        for wk in found[:(len(found) + 1) // 2]:
            sim.move(wk, core)

    def _most_waiting(self, cores: list[int]) -> int:
        """The core of ``cores`` with the maximum waiting time (5.3; the first of them on a
        tie)."""
        return max(cores, key=self._wait) if len(cores) > 1 else cores[0]

    def _similar_rank(self, core: int) -> dict[int, int]:
        """Level 2's order of the types ``core`` may steal (type -> position): own side of the
        application/OS split first (steal=any lists the other side too), then by decreasing
        overlap with the core's types. It changes only with the tables, so it is kept until
        :meth:`_allocate` or :meth:`_overlaps` changes them."""
        rank = self._ranks.get(core)
        if rank is not None:
            return rank
        mine = self.core_types[core]
        ranked: dict[int, tuple[bool, int]] = {}
        for t in mine:
            for o, ov in self.overlap.get(t, ()):
                r = (bool(self.is_app[o] == self.is_app[t]), ov)
                if o not in mine and (o not in ranked or r >= ranked[o]):
                    ranked[o] = r
        order = sorted(ranked.items(), key=lambda x: (not x[1][0], -x[1][1]))
        rank = self._ranks[core] = {o: k for k, (o, _) in enumerate(order)}
        return rank


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0
