"""Seed 003's experiment (section 5.1): a principal thread in the cache-fair class beside
different co-runners, its completion time under the default scheduler and under cache-fair,
and what the best-effort co-runner loses.

The setting, scaled to our traces:

* **Machine**: two cores sharing the last-level cache (the paper's dual-core CMP with a shared
  L2, Table 1), our Table 2 cores and private caches with a 4 MiB shared L3 (seed 001's machine,
  :func:`.asymmetric.acmp_machine`, has the same), so that the principal's 2 MiB fits in a fair
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

from pysched.models.cache_fair import fair_miss_rate, fit_miss_rate
from pysched.models.caches.config import CacheConfig, HierarchyConfig
from pysched.models.cores.config import big_core
from pysched.models.cores.timing import stall_table
from pysched.models.machine import MachineConfig
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig, simulate
from pysched.sandbox.combine import combine
from pysched.superfunctions.functype import Category

from .runner import PreparedTrace

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
    w = workload
    app = np.zeros(w.ntasks)
    is_app = (w.category == int(Category.APPLICATION)) & (w.task >= 0)
    np.add.at(app, w.task[is_app], w.insns[is_app])
    return int(np.argmax(app))


def _combined(traces: Mapping[str, PreparedTrace], names: Sequence[str]):
    """The workload of ``names``' parts side by side, and each part's first thread id."""
    parts = [(traces[n].workload, traces[n].footprint) for n in names]
    first = np.cumsum([0] + [w.ntasks for w, _ in parts])[:-1]
    w, fp = combine(parts, name="+".join(names))
    return w, fp, [int(f) for f in first]


def _spec(fair: int, best_effort: int, fair_rate: float | None = None, **over) -> str:
    s = (f"cache-fair:fair={fair}:best_effort={best_effort}:"
         + ":".join(f"{k}={v}" for k, v in {**SCALED, **over}.items()))
    return s if fair_rate is None else f"{s}:fair_rate={fair_rate!r}"


def estimate_fair_rate(traces: Mapping[str, PreparedTrace],
                       schedules: Sequence[Sequence[str]] = ESTIMATE,
                       machine: MachineConfig | None = None) -> dict:
    """The principal's fair miss rate (misses per cycle): cache-fair's sampling phase (section
    4: a sample per run of at least ``min_run_insns`` instructions, the principal's and its
    co-runners' misses per cycle) over runs of the principal with each of ``schedules``'
    co-runners, pooled, then equations 1-2 (:func:`~pysched.models.cache_fair.fit_miss_rate`,
    :func:`~pysched.models.cache_fair.fair_miss_rate`) with the machine's other cores as
    the ``n`` co-runners. Returns the estimate, ``a``, ``b`` and the samples with the schedule
    each came from."""
    m = machine or cmp_machine()
    p = main_thread(traces[PRINCIPAL].workload)
    own, co, where = [], [], []
    for names in schedules:
        w, fp, first = _combined(traces, (PRINCIPAL, *names))
        be = first[1] + main_thread(traces[names[0]].workload)
        # more samples than the run can give: the sampling phase never ends, every run counts
        pol = get_policy(_spec(p, be, samples=1 << 30))
        simulate(w, fp, pol, SandboxConfig(m))
        th = pol.threads[p]
        own += th.samples_own
        co += th.samples_co
        where += ["+".join(names)] * len(th.samples_own)
    a, b = fit_miss_rate(np.array(own), np.array(co))
    return {"fair_rate": fair_miss_rate(a, b, len(m.cores) - 1), "a": a, "b": b,
            "samples": pd.DataFrame({"schedule": where, "own": own, "co_runners": co})}


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


def _probed(spec: str, principal: int, be: int, tick_s: float):
    pol = get_policy(spec)
    cls = type(f"Probed{type(pol).__name__}", (_Probe, type(pol)), {})
    pol.__class__ = cls
    pol.probe_principal, pol.probe_be = principal, be
    pol.tick_s = tick_s
    return pol


def run_schedules(traces: Mapping[str, PreparedTrace], fair_rate: float,
                  schedules: Mapping[str, Sequence[str]] | None = None,
                  machine: MachineConfig | None = None) -> pd.DataFrame:
    """One row per (schedule, scheduler): the principal's completion time, IPC and shared-cache
    misses per cycle, the best-effort thread's CPU time up to then, cache-fair's adjustments
    of the principal (how many, their sum and the largest, in ms of CPU time), and whether
    every co-runner outlived the principal."""
    m = machine or cmp_machine()
    tick = SCALED["sample_us"] / 1e6
    rows = []
    for name, co in (schedules or SCHEDULES).items():
        w, fp, first = _combined(traces, (PRINCIPAL, *co))
        p = main_thread(traces[PRINCIPAL].workload)
        be = first[1] + main_thread(traces[co[0]].workload)
        others = [first[k] + main_thread(traces[c].workload) for k, c in enumerate(co, 1)]
        for sched, spec in (("default", "linux"), ("cache-fair", _spec(p, be, fair_rate))):
            pol = _probed(spec, p, be, tick)
            res = simulate(w, fp, pol, SandboxConfig(m))
            t = res.task_end_s
            adj = [x for x in getattr(pol, "adjustments", []) if x[1] == p]
            rows.append({
                "schedule": name, "scheduler": sched,
                "principal_ms": 1e3 * float(t[p]),
                "principal_ipc": pol.sim.task_insns(p) / pol.sim.task_cycles(p),
                "principal_misses_per_kcycle": 1e3 * pol.sim.task_llc_misses(p)
                / pol.sim.task_cycles(p),
                "best_effort_cpu_ms": 1e3 * pol.be_runtime,
                "adjustments": len(adj),
                "credit_ms": 1e3 * sum(x[3] for x in adj),
                "largest_adjustment_ms": 1e3 * max((x[3] for x in adj), default=0.0),
                "co_runners_outlive": bool(np.nanmin(t[others]) > t[p]),
            })
    out = pd.DataFrame(rows).set_index(["schedule", "scheduler"])
    return out


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


__all__ = ["stall_table", "ESTIMATE", "PAPER", "PRINCIPAL", "SCALED", "SCHEDULES", "best_effort_loss",
           "cmp_machine", "estimate_fair_rate", "main_thread", "run_schedules", "variability"]
