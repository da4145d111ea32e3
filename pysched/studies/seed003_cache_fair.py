"""Seed 003's experiment (section 5.1): a principal thread in the cache-fair class beside
different co-runners, its completion time under the default scheduler and under cache-fair,
and what the best-effort co-runner loses.

The setting, scaled to our traces:

* **Machine**: two cores sharing the last-level cache (the paper's dual-core CMP with a shared
  L2, Table 1), our Table 2 cores and private caches with a 4 MiB shared L3 (seed 001's machine,
  :func:`.seed001_hrrs.acmp_machine`, has the same), so that the principal's 2 MiB fits in a fair
  half and not beside a cache-hungry co-runner.
* **Principal**: ``chase-mid`` (our pointer chase over 2 MiB): the thread of the trace with the
  most application instructions, 1,902,777 of the trace's 2 M. The rest is interrupt handlers
  (78 K instructions), replayed at their traced times in every run, and the shell's helpers.
  (The capture before, on a busy host, had a principal of 385,069 instructions beside 1.14 M
  of interrupt handlers: recording every data access slows the guest several times over while
  its clock is the host's, so a loaded host multiplies the timer interrupts per instruction.)
* **Schedules** (section 5.1, Table 2: the principal with three identical co-runners, one of
  them best-effort, the other two not managed): ``slow``, three copies of ``chase-large``
  (64 MiB, the high-miss-rate co-runner); and co-runners that are OS-intensive, ``netserver``
  (10 B requests) and ``apache`` (each a whole traced guest, threads and interrupts, with its
  busiest application thread as the best-effort one), the low-miss-rate side. Each part comes
  from its own trace through :func:`pysched.sandbox.combine.combine`.
* **Fair miss rate** (section 5.1: "we estimate all principal benchmarks' fair miss rates in a
  separate experiment"): the cache-fair policy's own sampling (section 4: one sample per run
  of at least ``min_run_insns``) over runs of the principal beside each of ten co-runner sets
  (:data:`ESTIMATE`: the three chases, the four OS-intensive guests, three mixes), pooled,
  then equations 1-2; given to every schedule's run as ``fair_rate``. One principal makes too
  few runs for ten samples beside any single set.
* **Measures** (5.1.1, 5.1.4): the principal's completion time (the paper times 500 M
  instructions; we time the principal's whole traced work, while every co-runner is still
  running: :func:`run_schedules` reports whether they outlive it); the variability, the slow
  schedule's time over each other's, and the largest over the smallest; the best-effort
  thread's CPU time up to the principal's completion under cache-fair against the default
  (Table 3: "how much less CPU time the best-effort thread received").

Grid: :func:`estimate_grid` (cache-fair sampling beside each set of :data:`ESTIMATE`) and
:func:`schedule_grid` (each schedule of :data:`SCHEDULES` under ``linux`` and under cache-fair
with the estimated fair miss rate), each run one copy (``load_unit="copies"``) of a
co-schedule (:func:`co_schedule`) on :func:`cmp_machine`. Switch cost and model settings:
``pysched evaluate``'s defaults (``traced``; seed 003 states no switch cost). A co-schedule's
switches replay its parts' traced switch paths one after the other, at their pooled mean
length per switch. Measure: :class:`Measure` (the principal's completion, IPC and misses, the
best-effort thread's CPU time up to then, cache-fair's adjustments and samples).

Approximations, written down here: the paper's intervals were scaled to the previous
capture's principal of 385,069 instructions as they are to the paper's 500 M, and are kept for
the current one of 1.90 M (so they are about 5 times shorter than that proportion): a sampling
run counts from ``min_run_insns`` = 8,000 instructions (10 M, 1/50), the time slice is adjusted
every ``interval_insns`` = 40,000 instructions (50 M, about 1/10), and the counters are read
every 20 us (``sample_us``, 100 us by default) to see such short runs; with the fair miss rate given, the scheduling phase
still begins after ``samples * min_run_insns`` = 80,000 instructions, what the sampling phase
would have taken (:mod:`pysched.policies.cache_fair`); the default scheduler is our
``linux`` (CFS-like), not Solaris's fixed-priority one; ``chase-small`` is not a schedule of
its own: its thread's 1.91 M instructions (its 16 KiB fit in the L1d) end in under a millisecond, after
which the principal would run alone and its time would measure the CPU share, not the cache.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from pysched.constants import LOAD_COPIES
from pysched.evaluation.runner import PreparedTrace
from pysched.models.cache_fair import fair_miss_rate, fit_miss_rate
from pysched.models.caches.config import CacheConfig, HierarchyConfig
from pysched.models.cores.config import big_core
from pysched.models.cores.timing import stall_table
from pysched.models.machine import MachineConfig
from pysched.sandbox import RunResult
from pysched.sandbox.combine import combine
from pysched.sandbox.switch_cost import TRACED, TracedSwitch
from pysched.superfunctions.functype import Category

from .grid import Run, app_instructions, run_grid

#: Seed 003's figures: co-runner-dependent variability (slow schedule against fast) with the
#: default scheduler, 5 % to 28 % across the principals, and under 4 % with cache-fair
#: (section 5.1.1, Figure 4); the best-effort thread's loss of CPU time, on average under 1 %,
#: median 2.5 %, at most 27 % (section 5.1.4, Table 3).
PAPER = {"variability_default": (0.05, 0.28), "variability_cache_fair": 0.04,
         "best_effort_mean": 0.01, "best_effort_median": 0.025, "best_effort_max": 0.27}

PRINCIPAL = "chase-mid"
#: schedule -> its co-runners' traces (one part each)
SCHEDULES: dict[str, tuple[str, ...]] = {
    "slow": ("chase-large",) * 3,
    "netserver": ("netserver-10b",),
    "apache": ("apache-short",),
}
#: the separate experiment of the fair miss rate: the principal beside each of these in turn
ESTIMATE: tuple[tuple[str, ...], ...] = (
    ("chase-large",), ("chase-small",), ("chase-mid",), ("netserver-10b",),
    ("netserver-100kb",), ("netserver-1mb",), ("apache-short",),
    ("chase-large", "chase-small"), ("chase-large", "netserver-10b"),
    ("chase-small", "netserver-1mb"))
#: cache-fair's intervals scaled to the principal's length (see the module)
SCALED = {"min_run_insns": 8_000, "interval_insns": 40_000, "sample_us": 20}


def cmp_machine(l3_mib: int = 4) -> MachineConfig:
    """Two big cores sharing an ``l3_mib`` MiB, 8-way L3 (18 cycles: Table 2's)."""
    hier = HierarchyConfig(cores=2, l3=CacheConfig(l3_mib << 20, 8, 64, 18))
    return MachineConfig(hier, (big_core(), big_core()))


def main_thread(workload) -> int:
    """The thread (dense id) with the most application instructions."""
    return int(np.argmax(app_instructions(workload)))


def co_schedule(traces: Mapping[str, PreparedTrace], names: Sequence[str]) -> PreparedTrace:
    """``names``' traces side by side on one machine (:func:`~pysched.sandbox.combine.combine`)
    as one prepared trace, its roles in ``meta``: ``principal`` (the first part's main thread),
    ``best_effort`` (the second part's), ``others`` (every co-runner part's). Its switch path
    is the parts', one after the other, its last interrupt the latest of theirs; it has no
    application events."""
    parts = [traces[n] for n in names]
    w, fp = combine([(t.workload, t.footprint) for t in parts], name="+".join(names))
    first = np.cumsum([0] + [t.workload.ntasks for t in parts])[:-1]
    roles = [int(f) + main_thread(t.workload) for f, t in zip(first, parts)]
    paths = [t.meta.get("switch") for t in parts]
    switch = None
    if all(p is not None for p in paths):
        runs, v0 = [], 0
        for path, t in zip(paths, parts):  # a part's k-th vCPU is the combination's v0 + k
            index = {v: v0 + k for k, v in enumerate(t.workload.vcpus)}
            r = np.asarray(path.runs, dtype=np.int64).reshape(-1, 3)
            r = r[np.isin(r[:, 0], list(index))]  # (a copy)
            r[:, 0] = [index[v] for v in r[:, 0]]
            runs.append(r)
            v0 += len(index)
        switch = TracedSwitch(sum(p.switches for p in paths), sum(p.switch_path for p in paths),
                              np.concatenate(runs))
    app = np.flatnonzero(w.type_category == int(Category.APPLICATION))
    name = "+".join(names)
    return PreparedTrace(name, name, w, fp, None, app, w.total_insns, {
        "workload": name, "dependencies": w.dependencies, "switch": switch, "note": None,
        "last_irq_s": max(t.meta.get("last_irq_s", float("nan")) for t in parts),
        "principal": roles[0], "best_effort": roles[1] if len(roles) > 1 else -1,
        "others": roles[1:]})


def _spec(fair: int, best_effort: int, fair_rate: float | None = None, **over) -> str:
    s = (f"cache-fair:fair={fair}:best_effort={best_effort}:"
         + ":".join(f"{k}={v}" for k, v in {**SCALED, **over}.items()))
    return s if fair_rate is None else f"{s}:fair_rate={fair_rate!r}"


class _Probe:
    """Mixin: at every tick, until the principal has finished, the best-effort thread's CPU
    time (so that it is known at the principal's completion, to within a tick)."""

    probe_principal: int = -1
    probe_be: int = -1

    def attach(self, sim) -> None:
        super().attach(sim)
        self.be_runtime = 0.0
        self.principal_done = False
        w = sim.workload
        self.principal_insns = int(w.insns[w.task == self.probe_principal].sum())

    def tick(self):
        out = super().tick()
        s = self.sim
        if not self.principal_done:
            self.be_runtime = s.task_runtime(self.probe_be)
            self.principal_done = s.task_insns(self.probe_principal) >= self.principal_insns
        return out


class Measure:
    """The study's measure of a run of a :func:`co_schedule` (its roles in the trace's meta).

    :meth:`watch` probes the policy (:class:`_Probe`, every ``sample_us``) for the best-effort
    thread's CPU time up to the principal's completion; :meth:`__call__` gives
    ``principal_ms``, ``principal_ipc``, ``principal_misses_per_kcycle``,
    ``best_effort_cpu_ms``, cache-fair's adjustments of the principal (``adjustments``, their
    sum ``credit_ms`` and ``largest_adjustment_ms``, in ms of CPU time),
    ``co_runners_outlive`` (every co-runner's main thread ends after the principal) and
    cache-fair's samples of the principal (``samples_own``, ``samples_co``: misses per cycle,
    empty under another policy).
    """

    tick_s = SCALED["sample_us"] / 1e6

    def watch(self, policy, trace: PreparedTrace) -> None:
        cls = type(policy)
        policy.__class__ = type(f"Probed{cls.__name__}", (_Probe, cls), {})
        policy.probe_principal = trace.meta["principal"]
        policy.probe_be = trace.meta["best_effort"]
        policy.tick_s = self.tick_s

    def __call__(self, res: RunResult, policy, trace: PreparedTrace) -> dict:
        p, sim, t = trace.meta["principal"], policy.sim, res.task_end_s
        adj = [x for x in getattr(policy, "adjustments", []) if x[1] == p]
        th = getattr(policy, "threads", {}).get(p)
        return {"principal_ms": 1e3 * float(t[p]),
                "principal_ipc": sim.task_insns(p) / sim.task_cycles(p),
                "principal_misses_per_kcycle": 1e3 * sim.task_llc_misses(p)
                / sim.task_cycles(p),
                "best_effort_cpu_ms": 1e3 * policy.be_runtime,
                "adjustments": len(adj),
                "credit_ms": 1e3 * sum(x[3] for x in adj),
                "largest_adjustment_ms": 1e3 * max((x[3] for x in adj), default=0.0),
                "co_runners_outlive": bool(np.nanmin(t[trace.meta["others"]]) > t[p]),
                "samples_own": list(th.samples_own) if th else [],
                "samples_co": list(th.samples_co) if th else []}


def _co_schedules(traces: Mapping[str, PreparedTrace], sets: Sequence[Sequence[str]]
                  ) -> dict[str, PreparedTrace]:
    """The principal beside each of ``sets``, by name (``principal+co-runner+...``)."""
    return {t.name: t for t in (co_schedule(traces, (PRINCIPAL, *co)) for co in sets)}


def estimate_grid(traces: Mapping[str, PreparedTrace],
                  schedules: Sequence[Sequence[str]] = ESTIMATE,
                  machine: MachineConfig | None = None, switch_cost: str = TRACED
                  ) -> tuple[list[Run], dict[str, PreparedTrace]]:
    """The runs of the fair miss rate's separate experiment and their co-schedules: the
    principal beside each of ``schedules`` under cache-fair, which never leaves its sampling
    phase (more samples asked than a run can give: every run counts)."""
    m = machine or cmp_machine()
    co = _co_schedules(traces, schedules)
    return [Run((("schedule", name.partition("+")[2]),), name,
                _spec(t.meta["principal"], t.meta["best_effort"], samples=1 << 30),
                len(m.cores), 1, LOAD_COPIES, m, switch_cost) for name, t in co.items()], co


def estimate_fair_rate(traces: Mapping[str, PreparedTrace],
                       schedules: Sequence[Sequence[str]] = ESTIMATE,
                       machine: MachineConfig | None = None, switch_cost: str = TRACED
                       ) -> dict:
    """The principal's fair miss rate (misses per cycle): cache-fair's sampling phase (section
    4: a sample per run of at least ``min_run_insns`` instructions, the principal's and its
    co-runners' misses per cycle) over runs of the principal with each of ``schedules``'
    co-runners (:func:`estimate_grid`), pooled, then equations 1-2
    (:func:`~pysched.models.cache_fair.fit_miss_rate`,
    :func:`~pysched.models.cache_fair.fair_miss_rate`) with the machine's other cores as
    the ``n`` co-runners. Returns the estimate, ``a``, ``b``, the samples with the schedule
    each came from, and the runs' rows."""
    m = machine or cmp_machine()
    runs, co = estimate_grid(traces, schedules, m, switch_cost)
    rows = run_grid(runs, co, Measure())
    samples = pd.DataFrame({"schedule": np.repeat(rows["schedule"].to_numpy(),
                                                  rows["samples_own"].map(len).to_numpy()),
                            "own": [x for v in rows["samples_own"] for x in v],
                            "co_runners": [x for v in rows["samples_co"] for x in v]})
    a, b = fit_miss_rate(samples["own"].to_numpy(), samples["co_runners"].to_numpy())
    return {"fair_rate": fair_miss_rate(a, b, len(m.cores) - 1), "a": a, "b": b,
            "samples": samples, "runs": rows}


def schedule_grid(traces: Mapping[str, PreparedTrace], fair_rate: float,
                  schedules: Mapping[str, Sequence[str]] | None = None,
                  machine: MachineConfig | None = None, switch_cost: str = TRACED
                  ) -> tuple[list[Run], dict[str, PreparedTrace]]:
    """The runs of the schedules (default :data:`SCHEDULES`), each under the default scheduler
    (``linux``) and under cache-fair with ``fair_rate``, and their co-schedules."""
    m = machine or cmp_machine()
    sch = schedules or SCHEDULES
    co = _co_schedules(traces, list(sch.values()))
    runs = []
    for name, names in sch.items():
        t = co["+".join((PRINCIPAL, *names))]
        fair = _spec(t.meta["principal"], t.meta["best_effort"], fair_rate)
        runs += [Run((("schedule", name), ("scheduler", sched)), t.name, spec, len(m.cores),
                     1, LOAD_COPIES, m, switch_cost)
                 for sched, spec in (("default", "linux"), ("cache-fair", fair))]
    return runs, co


#: The study's columns of a schedule's run (:func:`run_schedules`).
COLUMNS = ("principal_ms", "principal_ipc", "principal_misses_per_kcycle", "best_effort_cpu_ms",
           "adjustments", "credit_ms", "largest_adjustment_ms", "co_runners_outlive",
           "switch_cost")


def run_schedules(traces: Mapping[str, PreparedTrace], fair_rate: float,
                  schedules: Mapping[str, Sequence[str]] | None = None,
                  machine: MachineConfig | None = None, switch_cost: str = TRACED
                  ) -> pd.DataFrame:
    """One row per (schedule, scheduler) of :func:`schedule_grid`: :data:`COLUMNS`."""
    runs, co = schedule_grid(traces, fair_rate, schedules, machine, switch_cost)
    rows = run_grid(runs, co, Measure())
    return rows.set_index(["schedule", "scheduler"])[list(COLUMNS)]


def variability(runs: pd.DataFrame) -> pd.DataFrame:
    """Per scheduler: the slow schedule's completion time over each other schedule's (the
    paper's metric, slow against fast), and the largest over the smallest."""
    t = runs["principal_ms"].unstack("scheduler")
    rows = {}
    for sched in t.columns:
        col = t[sched]
        row = {f"slow vs {s}": col["slow"] / col[s] - 1 for s in col.index if s != "slow"}
        row["max vs min"] = col.max() / col.min() - 1
        rows[sched] = row
    return pd.DataFrame(rows).T


def best_effort_loss(runs: pd.DataFrame) -> pd.DataFrame:
    """Per schedule, what the best-effort thread lost under cache-fair against the default
    (positive: a loss): ``cpu_time``, its CPU time up to the principal's completion (Table 3's
    measure, but the principal completes at different times under the two schedulers), and
    ``cpu_share``, that time over the principal's completion time (its share of the same
    stretch of work)."""
    cpu = runs["best_effort_cpu_ms"].unstack("scheduler")
    share = cpu / runs["principal_ms"].unstack("scheduler")
    return pd.DataFrame({"cpu_time": 1 - cpu["cache-fair"] / cpu["default"],
                         "cpu_share": 1 - share["cache-fair"] / share["default"]})


__all__ = ["COLUMNS", "ESTIMATE", "Measure", "PAPER", "PRINCIPAL", "SCALED", "SCHEDULES",
           "best_effort_loss", "cmp_machine", "co_schedule", "estimate_fair_rate",
           "estimate_grid", "main_thread", "run_schedules", "schedule_grid", "stall_table",
           "variability"]
