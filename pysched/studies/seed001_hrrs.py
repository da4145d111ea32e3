"""Seed 001's experiment: a barrier-synchronised program on one big and three small cores under
``linux``, ``fairness`` and ``hrrs`` (hardware quantum 1 ms, and 4 ms for the software
implementation), measured as the program's completion time.

Grid (:func:`grid`): the program's trace (``data/barrier``: 4 threads on 4 vCPUs) replayed
once (``load_unit="copies"``, 1 copy: seed 001 runs one instance of each benchmark with a
thread per core; on 4 cores of a 4-vCPU trace that is also the paper's load 1X) on seed 001's
machine (:func:`acmp_machine`, also ``machines/seed001-acmp.toml``) under each of
:data:`POLICIES`; :func:`quantum_sweep` runs ``hrrs`` at other quanta beside ``linux``.

Switch cost: the paper's, not the default. Seed 001 states one (section 4.2: "we presume a
fixed 1,000 cycle penalty" for a context switch), which ``hrrs`` declares as its
:attr:`~pysched.policies.base.Policy.paper_model` (``flat``: 1,000 cycles per context switch,
and the cores' ``migration_cycles``, 1,000, per OS move); every run of the study, the
baselines' too, uses it. A hardware swap costs the cores' ``migration_cycles`` under every
switch-cost model. The model's other settings are
``pysched evaluate``'s defaults (the paper states none of them). ``switch_cost="traced"`` runs
the study at the defaults; ``pysched ablate data/barrier --policy hrrs --machine
machines/seed001-acmp.toml --load 1`` sets the two beside each other, factor by factor.

Measure (:func:`measure`; seed 001 section 4.2: "total execution time"): the simulated time at
which the last of the program's threads finishes its traced work. The program's threads are
those with application code (at least ``share`` of all application instructions): the replayed
run also holds interrupts released at their traced times, which would otherwise stretch every
run to the trace's length whatever the policy. Beside it, the big core's share of the
instructions, what the hardware level did (swaps, pulls onto an idle big core, deferrals
for kernel mode, quanta without a partner), and the barrier interval of the run
(:class:`Measure`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from pysched.constants import LOAD_COPIES
from pysched.evaluation.runner import PreparedTrace
from pysched.models.caches.config import CacheConfig, HierarchyConfig
from pysched.models.cores.config import big_core, small_core
from pysched.models.machine import MachineConfig
from pysched.policies import REGISTRY
from pysched.sandbox import RunResult

from .grid import Run, app_instructions, run_grid

#: Seed 001's headline figures (abstract, section 4.2, Fig 5): HRRS's speed-up of the total
#: execution time over Linux and over Fairness, and of its 1 ms hardware quantum over the 4 ms
#: software one.
PAPER = {"hrrs_vs_linux": 0.377, "hrrs_vs_fairness": 0.165, "hw_1ms_vs_sw_4ms": 0.0698}

#: The policies of the comparison: name in the table -> registry spec.
POLICIES = {"linux": "linux", "fairness": "fairness", "hrrs": "hrrs",
            "hrrs-4ms": "hrrs:quantum_ms=4"}

#: The switch cost seed 001 states (section 4.2), as ``hrrs`` declares it.
SWITCH_COST = REGISTRY["hrrs"].paper_model["switch_cost"]

#: The study's columns of a run (:func:`run_policies`), after the policy's name.
COLUMNS = ("spec", "completion_ms", "instructions", "big_core_insn_share", "migrations",
           "swaps", "pulls", "deferrals", "no_partner", "forced_releases", "barrier_releases",
           "barrier_interval_ms", "switch_cost")


def acmp_machine(big: int = 1, small: int = 3, l3_mib: int = 4) -> MachineConfig:
    """Seed 001's machine (section 4.1): ``big`` out-of-order and ``small`` in-order cores at
    the same frequency (2.6 GHz) with private 32 KiB L1s and 256 KiB L2s and a shared
    ``l3_mib`` MiB L3 (4 MiB in the paper; 8 ways and 18 cycles: Table 2 of seed 000's L3)."""
    hier = HierarchyConfig(cores=big + small, l3=CacheConfig(l3_mib << 20, 8, 64, 18))
    return MachineConfig(hier, tuple(big_core() for _ in range(big))
                         + tuple(small_core() for _ in range(small)))


def program_threads(workload, share: float = 0.01) -> np.ndarray:
    """Threads (dense ids) with at least ``share`` of the application instructions."""
    app = app_instructions(workload)
    return np.flatnonzero(app >= share * app.sum())


def completion_s(task_end_s: np.ndarray, threads: np.ndarray, ntasks: int, copies: int = 1
                 ) -> float:
    """The latest end of ``threads`` over all ``copies``."""
    ids = (np.arange(copies)[:, None] * ntasks + threads[None, :]).ravel()
    return float(np.nanmax(task_end_s[ids]))


def measure(res: RunResult, policy, trace: PreparedTrace) -> dict:
    """The study's columns of a run (see the module): ``completion_ms``,
    ``big_core_insn_share`` and the hardware level's counters (0 under ``linux``)."""
    insns = res.total.instructions
    hw = getattr(policy, "hw", None)  # the hardware level of hrrs and fairness (None: linux)
    return {"completion_ms": 1e3 * completion_s(res.task_end_s, program_threads(trace.workload),
                                                trace.workload.ntasks, res.config.copies),
            "big_core_insn_share": float(insns[0] / insns.sum()),
            **{k: getattr(hw, k, 0) for k in ("swaps", "pulls", "deferrals", "no_partner")}}


def grid(policies: dict[str, str] | None = None, machine: MachineConfig | None = None,
         copies: int = 1, switch_cost: str = SWITCH_COST) -> list[Run]:
    """The study's runs: each of ``policies`` (default :data:`POLICIES`) on ``machine``
    (default :func:`acmp_machine`), ``copies`` copies of the program (see the module)."""
    m = machine or acmp_machine()
    return [Run((("label", label),), "program", spec, len(m.cores), copies, LOAD_COPIES, m,
                switch_cost) for label, spec in (policies or POLICIES).items()]


def run_policies(trace: PreparedTrace, policies: dict[str, str] | None = None,
                 machine: MachineConfig | None = None, copies: int = 1,
                 switch_cost: str = SWITCH_COST) -> pd.DataFrame:
    """One row per policy (:func:`grid`), indexed by its name in the table: its spec and
    :data:`COLUMNS`. The speed-up of one policy over another is ``other / this - 1`` of
    ``completion_ms``."""
    rows = run_grid(grid(policies, machine, copies, switch_cost), {"program": trace}, Measure())
    return (rows.rename(columns={"policy": "spec"}).rename(columns={"label": "policy"})
            .set_index("policy")[list(COLUMNS)])


def speedups(runs: pd.DataFrame) -> pd.DataFrame:
    """Ours beside the paper's: HRRS over Linux, over Fairness, 1 ms over 4 ms."""
    t = runs["completion_ms"]
    ours = {"hrrs_vs_linux": t["linux"] / t["hrrs"] - 1,
            "hrrs_vs_fairness": t["fairness"] / t["hrrs"] - 1,
            "hw_1ms_vs_sw_4ms": t["hrrs-4ms"] / t["hrrs"] - 1}
    return pd.DataFrame({"ours": ours, "paper": PAPER})


#: Wake-ups of program threads closer than this (simulated seconds) are one barrier release.
RELEASE_GAP_S = 50e-6


def barrier_woken(workload) -> set[int]:
    """Items of program threads (:func:`program_threads`) that a traced wake-up from another
    program thread released: the threads' starts after a barrier (the futex wake of the last
    thread to arrive)."""
    w = workload
    prog = set(program_threads(w).tolist())
    return {i for i in np.flatnonzero(w.dep_item >= 0).tolist()
            if int(w.task[i]) in prog and int(w.task[w.dep_item[i]]) in prog
            and w.task[w.dep_item[i]] != w.task[i]}


def release_times(ready_s: Sequence[float]) -> np.ndarray:
    """Barrier releases: the times ``ready_s`` at which woken program threads became ready,
    those within :data:`RELEASE_GAP_S` of the previous one counted with it."""
    t = np.sort(np.asarray(ready_s, dtype=np.float64))
    if not len(t):
        return t
    return t[np.concatenate([[True], np.diff(t) > RELEASE_GAP_S])]


class _Releases:
    """Mixin: the simulated time at which each barrier-woken item became ready, whichever
    hook the engine places it with."""

    barrier_items: frozenset = frozenset()

    def attach(self, sim) -> None:
        super().attach(sim)
        self.ready_s: dict[int, float] = {}

    def _seen(self, work) -> None:
        if work.item in self.barrier_items and work.gid not in self.ready_s:
            self.ready_s[work.gid] = self.sim.now


def _recording(hook: str):
    """``hook`` of the policy, noting the item first."""
    def wrapped(self, work, core: int) -> int:
        self._seen(work)
        return getattr(super(_Releases, self), hook)(work, core)
    wrapped.__name__ = hook
    return wrapped


# every hook that places a ready thread item
for _hook in ("thread_ready", "sf_start", "sf_end", "resume"):
    setattr(_Releases, _hook, _recording(_hook))


class Measure:
    """The study's measure of a run (:func:`measure`), and the barrier interval: :meth:`watch`
    records when barrier-woken items became ready (:class:`_Releases`), and
    ``barrier_interval_ms`` is the median interval between the releases of the run
    (:func:`release_times`; NaN with fewer than two). Whether HRRS's 1 ms hardware quantum
    gives every small-core thread big-core time between two barriers depends on it (seed 001,
    section 4.2)."""

    def watch(self, policy, trace: PreparedTrace) -> None:
        cls = type(policy)
        policy.__class__ = type(f"Watched{cls.__name__}", (_Releases, cls), {})
        policy.barrier_items = frozenset(barrier_woken(trace.workload))

    def __call__(self, res: RunResult, policy, trace: PreparedTrace) -> dict:
        gaps = np.diff(release_times(list(policy.ready_s.values())))
        return {**measure(res, policy, trace),
                "barrier_releases": len(gaps) + 1 if len(policy.ready_s) else 0,
                "barrier_interval_ms": 1e3 * float(np.median(gaps)) if len(gaps)
                else float("nan")}


def quantum_sweep(trace: PreparedTrace, quanta_ms: Sequence[float],
                  machine: MachineConfig | None = None, switch_cost: str = SWITCH_COST
                  ) -> pd.DataFrame:
    """HRRS at several hardware quanta, with its speed-up over ``linux``."""
    specs = {"linux": "linux", **{f"hrrs-{q:g}ms": f"hrrs:quantum_ms={q:g}" for q in quanta_ms}}
    runs = run_policies(trace, specs, machine, switch_cost=switch_cost)
    base = runs.loc["linux", "completion_ms"]
    out = runs.drop(index="linux")[["completion_ms", "swaps", "migrations"]].copy()
    out.insert(0, "quantum_ms", list(quanta_ms))
    out["speedup_vs_linux"] = base / out["completion_ms"] - 1
    return out


__all__ = ["COLUMNS", "Measure", "PAPER", "POLICIES", "RELEASE_GAP_S", "SWITCH_COST",
           "acmp_machine", "barrier_woken", "completion_s", "release_times",
           "grid", "measure", "program_threads", "quantum_sweep", "run_policies", "speedups"]
