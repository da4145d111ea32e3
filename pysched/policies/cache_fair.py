"""``cache-fair``: the cache-fair scheduler of seed 003 (Fedorova, Seltzer, Smith: "Improving
performance isolation on chip multiprocessors via an operating system scheduler").

A thread in the *cache-fair* class gets CPU time in proportion to how far its IPC falls short
of (or exceeds) its *fair IPC*, the IPC it would have under an equal share of the shared cache;
the difference is taken from (or given to) threads of the *best-effort* class (section 2). The
OS below is CFS as in ``linux`` (:mod:`.cfs`: queues, picks and balancing); only the time
slices change.

The rules, with the section each comes from (the model's maths, with its equations, is
:mod:`pysched.models.cache_fair`):

* **Fair miss rate** (3.1, equations 1-2): a thread's shared-cache miss rate (misses per
  cycle) is regressed linearly on the sum of its co-runners' miss rates over at least
  ``samples`` (10) samples; the fair miss rate follows with the other cores as the ``n``
  co-runners.
* **Sampling phase** (4): a *run* is a stretch during which the same threads run together on
  the cores; it ends when any of them leaves its core. At its end the thread's and its
  co-runners' miss rates are one sample, kept only if the thread executed at least
  ``min_run_insns`` (10 M) instructions in it (cold-start effects). The sampling phase is
  repeated after every ``resample_insns`` (1 G) instructions.
* **Fair IPC** given the fair miss rate (3, via [14]/[30]): each miss costs ``L`` cycles, the
  machine's stall of a load served by memory on the thread's core
  (:func:`~pysched.models.cores.timing.stall_table`).
* **Scheduling phase** (4): every ``interval_insns`` (50 M) instructions of a cache-fair thread,
  the instructions it would have executed at its fair IPC in the cycles it ran, minus those it
  executed, divided by its IPC, is the time its *next* time slice is lengthened (shortened when
  negative); the same time is taken from (given to) the next best-effort thread, round-robin
  over them to spread the penalty (section 2, "spreads compensatory adjustments").

* **The adjustment is CPU time** (section 2, Figure 1: the thread's box is widened, and the
  best-effort thread's narrowed, so that its work per CPU share is its fair one). The paper's
  base scheduler (Solaris's time-sharing class) gives each thread its slice in turn, so a
  longer slice is more CPU time. Our base is CFS-like: the least-``vruntime`` pick (and its
  wake-up preemption) would take a longer slice back at the next picks. So every adjustment is
  also credited to the thread's ``vruntime`` as the pick and the preemption see it
  (``vruntime - credit``, ``sort_key``; the best-effort thread is debited the same), which
  makes it a change of CPU share on this base as a longer slice is on the paper's. Without the
  credit, cache-fair on the CFS-like base changed no completion time of seed 003's schedules
  (``notebooks/06-cache-fair.ipynb``).

Approximations, written down here: the counters are read every ``sample_us`` (100 us) of
simulated time, so runs are seen at that resolution; a time-slice adjustment lasts one slice,
measured as the thread's run time growing by the base slice plus the adjustment; a slice never
shrinks below CFS's minimum granularity; when a regression gives ``1 - a * n <= 0`` or a
negative fair miss rate the thread stays in its sampling phase (the model has no fair point).
``fair_rate`` (misses per cycle) skips the sampling phase for every cache-fair thread, as
section 5.1 does when a schedule has too few different co-runners for the regression ("we
estimate all principal benchmarks' fair miss rates in a separate experiment"); the thread's
scheduling phase still begins only once it has retired ``samples * min_run_insns``
instructions, the least its sampling phase would have taken (section 4: "the sampling phase
ends once the cache-fair thread has completed at least 100 million instructions in valid
runs"), so that, as in the paper, no time slice is adjusted during its cold start.
Thread classes are given as dense thread ids of the workload (``fair``, ``best_effort``:
``id+id+...``), applying to every copy; other threads are scheduled as by ``linux``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pysched.models.cache_fair import compensation_s, fair_miss_rate, fit_miss_rate
from pysched.models.cores.timing import stall_table

from .cfs import CfsPolicy


def _ids(spec) -> frozenset[int]:
    if spec is None or spec == "":
        return frozenset()
    if isinstance(spec, (int, np.integer)):
        return frozenset({int(spec)})
    if isinstance(spec, str):
        return frozenset(int(x) for x in spec.replace(",", "+").split("+") if x.strip())
    return frozenset(int(x) for x in spec)


@dataclass
class _Thread:
    """What the scheduler keeps about one cache-fair thread."""

    samples_own: list = field(default_factory=list)
    samples_co: list = field(default_factory=list)
    fair_rate: float = math.nan
    sampled_at: int = 0         # instructions when its sampling phase ended
    mark: tuple | None = (0, 0.0, 0)  # counters at the start of the current interval (None:
    #                                    the scheduling phase has not begun)


class CacheFair(CfsPolicy):
    """CFS whose pick, wake-up preemption and time slices give cache-fair threads the CPU time
    their fair IPC asks for, from best-effort threads.

    Parameters
    ----------
    fair, best_effort : int, str or sequence of int, optional
        Dense thread ids of the workload in each class (``id+id+...``), for every copy.
    samples : int
        Samples a regression needs (at least 2).
    min_run_insns : int
        Instructions a run must give the thread for its sample to count.
    interval_insns : int
        Instructions of a cache-fair thread between slice adjustments.
    resample_insns : int
        Instructions after which the sampling phase begins again.
    sample_us : float
        Microseconds between reads of the counters.
    fair_rate : float, optional
        The fair miss rate (misses per cycle) of every cache-fair thread, given instead of
        sampled.
    """

    name = "cache-fair"
    summary = ("cache-fair (seed 003): fair miss rate by regression, time slices of cache-fair "
               "threads adjusted toward their fair IPC, taken from best-effort threads")
    source = "seed 003 (cache-fair), sections 2, 3.1, 4"

    def __init__(self, fair=None, best_effort=None, samples: int = 10,
                 min_run_insns: int = 10_000_000, interval_insns: int = 50_000_000,
                 resample_insns: int = 1_000_000_000, sample_us: float = 100.0,
                 fair_rate: float | None = None) -> None:
        super().__init__()
        self.cfs.key = self.sort_key  # the pick forgives the credited CPU time
        self.fair_ids, self.be_ids = _ids(fair), _ids(best_effort)
        if self.fair_ids & self.be_ids:
            raise ValueError(f"cache-fair: threads {sorted(self.fair_ids & self.be_ids)} are "
                             "in both classes")
        for key, val in (("samples", samples), ("min_run_insns", min_run_insns),
                         ("interval_insns", interval_insns),
                         ("resample_insns", resample_insns)):
            if not isinstance(val, int) or val < 1 or (key == "samples" and val < 2):
                raise ValueError(f"cache-fair: {key} must be a positive integer"
                                 f"{' of at least 2' if key == 'samples' else ''}, got {val!r}")
        if not (float(sample_us) > 0 and math.isfinite(float(sample_us))):
            raise ValueError(f"cache-fair: sample_us must be a positive number, got "
                             f"{sample_us!r}")
        if fair_rate is not None and not (float(fair_rate) >= 0 and math.isfinite(fair_rate)):
            raise ValueError(f"cache-fair: fair_rate must be a non-negative number of misses "
                             f"per cycle, got {fair_rate!r}")
        self.given_rate = None if fair_rate is None else float(fair_rate)
        self.nsamples, self.min_run = samples, min_run_insns
        self.interval, self.resample = interval_insns, resample_insns
        self.tick_s = float(sample_us) / 1e6
        self.threads: dict[int, _Thread] = {}
        self.extra: dict[int, float] = {}       # slice adjustment (s) of a thread's next slice
        self.credit: dict[int, float] = {}      # all adjustments (s): runtime the pick forgives
        self.extra_until: dict[int, float] = {}  # ... in force until its run time reaches this
        self.next_be = 0
        self.run_set: tuple = ()
        self.run_start: dict[int, tuple] = {}
        #: What happened: (time, thread, fair miss rate, a, b) per estimate, and
        #: (time, fair thread, best-effort thread, seconds) per adjustment.
        self.estimates: list[tuple] = []
        self.adjustments: list[tuple] = []

    def attach(self, sim) -> None:
        super().attach(sim)
        nt = sim.workload.ntasks
        self.ntasks_all = nt * sim.copies
        self.fair_all = [t for t in range(self.ntasks_all) if t % nt in self.fair_ids]
        self.be_all = [t for t in range(self.ntasks_all) if t % nt in self.be_ids]
        self.threads = {t: _Thread() for t in self.fair_all}
        if self.given_rate is not None:
            for th in self.threads.values():
                th.fair_rate = self.given_rate
                th.mark = None  # set when the thread has run what sampling would have taken
        m = sim.machine
        self.penalty = [float(stall_table(m.hierarchy, c)[1, 3]) for c in m.cores]

    def notes(self) -> list[str]:
        if not self.fair_all:
            return ["no thread is in the cache-fair class (parameter `fair`, dense thread ids "
                    "of the workload), so no time slice was adjusted; it scheduled as `linux`"]
        if not self.adjustments:
            rated = sum(not math.isnan(th.fair_rate) for th in self.threads.values())
            how = ("given by `fair_rate`" if self.given_rate is not None else
                   f"a sampling phase needs {self.nsamples} runs of at least "
                   f"{self.min_run:,} instructions each")
            return [f"no time slice was adjusted in the run: {rated} of {len(self.fair_all)} "
                    f"cache-fair threads had a fair miss rate ({how}; then one adjustment "
                    f"every {self.interval:,} instructions); it scheduled as `linux`"]
        return []

    # --- counters -------------------------------------------------------------------------------
    def _counters(self, t: int) -> tuple[int, float, int]:
        s = self.sim
        return s.task_insns(t), s.task_cycles(t), s.task_llc_misses(t)

    def _running(self) -> tuple:
        out = []
        for c in range(self.sim.ncores):
            wk = self.sim.running(c)
            if wk is not None and not wk.is_async:
                out.append((c, wk.task))
        return tuple(out)

    def tick(self) -> float | None:
        now_set = self._running()
        if now_set != self.run_set:
            self._end_run()
            self.run_set = now_set
            self.run_start = {t: self._counters(t) for _, t in now_set}
        for t in self.fair_all:
            self._schedule(t)
        return None

    def _end_run(self) -> None:
        """Section 4: a run ended; record a sample for each cache-fair thread in it that ran
        at least ``min_run_insns`` instructions."""
        rates = {}
        for _, t in self.run_set:
            i0, c0, m0 = self.run_start[t]
            i1, c1, m1 = self._counters(t)
            rates[t] = (i1 - i0, (m1 - m0) / (c1 - c0) if c1 > c0 else 0.0)
        for _, t in self.run_set:
            th = self.threads.get(t)
            if th is None or not math.isnan(th.fair_rate) or rates[t][0] < self.min_run:
                continue
            th.samples_own.append(rates[t][1])
            th.samples_co.append(sum(r for u, (_, r) in rates.items() if u != t))
            if len(th.samples_own) >= self.nsamples:
                self._estimate(t, th)

    def _estimate(self, t: int, th: _Thread) -> None:
        try:
            a, b = fit_miss_rate(th.samples_own, th.samples_co)
        except ValueError:
            return  # co-runners all alike: keep sampling (section 3.2's limitation)
        rate = fair_miss_rate(a, b, self.sim.ncores - 1)
        if math.isnan(rate):
            return
        th.fair_rate = rate
        th.sampled_at = self.sim.task_insns(t)
        th.mark = self._counters(t)
        self.estimates.append((self.sim.now, t, rate, a, b))

    # --- scheduling phase -----------------------------------------------------------------------
    def _schedule(self, t: int) -> None:
        th = self.threads[t]
        if math.isnan(th.fair_rate):
            return
        i1, c1, m1 = self._counters(t)
        if th.mark is None:
            if i1 >= self.nsamples * self.min_run:
                th.mark = (i1, c1, m1)
            return
        i0, c0, m0 = th.mark
        if i1 - i0 < self.interval or c1 <= c0:
            return
        th.mark = (i1, c1, m1)
        core = max(self.sim.last_core(t), 0)
        freq = self.sim.core_config(core).operating_point(self.sim.level(core)).freq_ghz * 1e9
        seconds = compensation_s(i1 - i0, c1 - c0, m1 - m0, th.fair_rate, self.penalty[core],
                                 freq)
        if math.isnan(seconds):
            return  # a miss rate at which the model has no IPC
        self._adjust(t, seconds)
        if self.be_all:
            be = self.be_all[self.next_be % len(self.be_all)]
            self.next_be += 1
            self._adjust(be, -seconds)
            self.adjustments.append((self.sim.now, t, be, seconds))
        else:
            self.adjustments.append((self.sim.now, t, -1, seconds))
        if self.given_rate is None and i1 - th.sampled_at >= self.resample:
            # section 4: sample again every 1 G instructions
            self.threads[t] = _Thread()

    def _adjust(self, t: int, seconds: float) -> None:
        self.extra[t] = self.extra.get(t, 0.0) + seconds
        self.credit[t] = self.credit.get(t, 0.0) + seconds
        core = max(self.sim.last_core(t), 0)
        self.extra_until[t] = self.sim.task_runtime(t) + self.cfs_slice(core) \
            + max(self.extra[t], 0.0)

    def sort_key(self, task: int) -> float:
        """CFS's ``vruntime`` less the thread's credit: what its pick (interrupts first,
        then the least key) and wake-up preemption compare (see the module)."""
        return self.cfs.vruntime(task) - self.credit.get(task, 0.0)

    def time_slice(self, work, core: int) -> float:
        base = self.cfs_slice(core)
        t = work.task
        x = self.extra.get(t)
        if x is None:
            return base
        if self.sim.task_runtime(t) >= self.extra_until[t]:
            del self.extra[t]  # the adjusted slice has been used
            return base
        return max(base + x, self.min_slice())
