"""Seed 002's experiment: OS components on dedicated cores at chosen DVFS levels, against the
same placement with every OS core fast or slow, with one component's core slow, and against
``linux`` (every core fast).

Configurations (``cores`` cores, the second half the OS's under the dedicated placement; the
kinds of OS work are dealt to the OS cores by :func:`pysched.policies.subsystems.kind_cores`):

* ``linux``: the ``linux`` policy, every core at the fastest level;
* ``all-fast``: ``disaggregate-os`` (the dedicated placement), every core at the fastest level;
* ``all-slow``: the same placement, every core at the slowest level;
* ``os-slow``: the same placement with the OS cores at the slowest level (the applications'
  cores keep the fastest, as seed 002 section 2 keeps the applications' settings);
* ``driver-slow``: only the core of interrupts and bottom halves (``irq``) slow, seed 002
  section 4.4's driver core scaled on its own (Figure 4.3a-d's X axis);
* ``stack-slow``: only the core of the network system calls (``net``) slow, section 4.4's TCP
  and IP cores scaled together (Figure 4.3's lines);
* ``profile-dvfs``: the same placement, each OS core at the lowest level meeting the target.

Approximation, written down here: Linux's network stack is not a set of servers as NEWTOS's
is. Received packets go through the driver's interrupt and the ``NET_RX`` bottom half, which
run IP and TCP's receive path; sends run IP and TCP in the sender's system call. So our
``irq`` core is seed 002's driver core plus the receive half of its TCP and IP cores, and the
``net`` core the transmit half; a kind may also share its core with another kind when there are
fewer OS cores than kinds (``driver-slow`` and ``stack-slow`` then slow those too; 8 cores give
the kinds ``irq`` and ``net`` a core each, shared with ``proc`` and ``kthread``).

Grid (:func:`grid`): each trace (``netserver`` at three request sizes and ``apache``, short
traces) replayed once (``load_unit="copies"``, 1 copy: seed 002 serves one instance of its
server) under each configuration of :data:`CONFIGS`, every core of the machine set by it.
Switch cost and model settings: ``pysched evaluate``'s defaults (``traced``); seed 002 states
no switch cost.

Measures (:func:`measure`): the completion time of the traced threads' work (the latest end of
any thread: the replay's interrupts arrive at their traced times, so the run's own length says
little), the energy of the run, and energy per instruction; the cores' frequencies, and what
``profile-dvfs`` changed (how many level changes, each OS core's last level).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from pysched.constants import LOAD_COPIES
from pysched.evaluation.runner import PreparedTrace
from pysched.models.caches.config import HierarchyConfig
from pysched.models.cores.config import big_core
from pysched.models.machine import MachineConfig
from pysched.policies.subsystems import kind_cores
from pysched.sandbox import RunResult
from pysched.sandbox.switch_cost import TRACED

from .grid import Run, run_grid

#: label -> (policy spec, levels: ``{"*": level}`` for every OS core, ``{"app": level}`` for
#: every application core, ``{kind: level}`` for the OS cores of those kinds; -1 the fastest,
#: 0 the slowest; cores not named the fastest)
CONFIGS: dict[str, tuple[str, Mapping[str, int]]] = {
    "linux": ("linux", {}), "all-fast": ("disaggregate-os", {}),
    "all-slow": ("disaggregate-os", {"*": 0, "app": 0}),
    "os-slow": ("disaggregate-os", {"*": 0}),
    "driver-slow": ("disaggregate-os", {"irq": 0}),
    "stack-slow": ("disaggregate-os", {"net": 0}),
    "profile-dvfs": ("profile-dvfs", {})}

#: Seed 002's findings on lighttpd (section 4.4, Figure 4.3), for the tables.
PAPER = {
    "10b": "the driver core's speed matters little: at 200 MHz it delivers what it does at "
           "1600 MHz",
    "100kb": "the request rate scales almost linearly with the TCP and IP cores' speed; the "
             "driver core's speed has no impact",
    "1mb": "fast TCP and IP cores can even be slower (their sleep and wake-up latency) when the "
           "driver core is above 400 MHz",
}


def split_machine(cores: int, os_level: int = -1,
                  kind_levels: Mapping[str, int] | None = None,
                  app_level: int = -1) -> MachineConfig:
    """``cores`` big cores (Table 2's caches), the first half (the applications') at
    ``app_level``, the second half (the OS's) at ``os_level``; ``kind_levels`` sets the level
    of the OS cores hosting those kinds (see the module)."""
    n_os = max(1, cores // 2) if cores > 1 else 0
    os_cores = list(range(cores - n_os, cores))
    level = {c: app_level for c in range(cores - n_os)}
    level.update({c: os_level for c in os_cores})
    if kind_levels:
        if not os_cores:
            raise ValueError("a one-core machine has no OS cores to set")
        where = kind_cores(os_cores)
        for kind, lv in kind_levels.items():
            if kind not in where:
                raise ValueError(f"unknown kind of OS work {kind!r} (known: "
                                 f"{', '.join(where)})")
            for c in where[kind]:
                level[c] = lv
    kinds = tuple(big_core(level=level.get(c, -1)) for c in range(cores))
    return MachineConfig(HierarchyConfig(cores=cores), kinds)


def _machine(cores: int, levels: Mapping[str, int]) -> MachineConfig:
    kinds = {k: v for k, v in levels.items() if k not in ("*", "app")}
    return split_machine(cores, levels.get("*", -1), kinds, levels.get("app", -1))


def measure(res: RunResult, policy, trace: PreparedTrace) -> dict:
    """The study's columns of a run (see the module)."""
    m, t = res.config.machine, res.total
    cores = len(m.cores)
    n_app = cores - max(1, cores // 2)
    changes = getattr(policy, "changes", [])  # profile-dvfs's (epoch, core, level) changes
    ghz = (lambda cs: " ".join(f"{c.operating_point().freq_ghz:g}" for c in cs))
    return {"completion_ms": 1e3 * float(np.nanmax(res.task_end_s)),
            "energy_mj": 1e3 * float(t.energy_j.sum()),
            "nj_per_insn": 1e9 * float(t.energy_j.sum() / t.instructions.sum()),
            "app_ghz": ghz(m.cores[:n_app]), "os_ghz": ghz(m.cores[n_app:]),
            "level_changes": len(changes),
            "final_os_levels": " ".join(str(lv) for lv in _final_levels(changes, m, cores))
            if changes else ""}


#: The study's columns of a run (:func:`run_configs`), before the comparisons.
COLUMNS = ("completion_ms", "energy_mj", "nj_per_insn", "app_ghz", "os_ghz", "level_changes",
           "final_os_levels", "switch_cost")


def grid(cores: int = 8, configs: dict | None = None, switch_cost: str = TRACED) -> list[Run]:
    """The study's runs of one trace: each configuration (default :data:`CONFIGS`) on its
    ``cores``-core machine, one copy."""
    return [Run((("config", label),), "trace", spec, cores, 1, LOAD_COPIES,
                _machine(cores, levels), switch_cost)
            for label, (spec, levels) in (configs or CONFIGS).items()]


def run_configs(trace: PreparedTrace, cores: int = 8, configs: dict | None = None,
                switch_cost: str = TRACED) -> pd.DataFrame:
    """One row per configuration (see the module): :data:`COLUMNS`, then the completion time
    and energy against ``linux`` and against ``all-fast``."""
    rows = run_grid(grid(cores, configs, switch_cost), {"trace": trace}, measure)
    out = rows.set_index("config")[list(COLUMNS)].copy()
    base = out.loc["linux"] if "linux" in out.index else out.iloc[0]
    out["slowdown_vs_linux"] = out["completion_ms"] / base["completion_ms"] - 1
    out["energy_vs_linux"] = out["energy_mj"] / base["energy_mj"] - 1
    if "all-fast" in out.index:
        fast = out.loc["all-fast"]
        out["slowdown_vs_all_fast"] = out["completion_ms"] / fast["completion_ms"] - 1
        out["energy_vs_all_fast"] = out["energy_mj"] / fast["energy_mj"] - 1
    return out


def _final_levels(changes, m: MachineConfig, cores: int) -> list[int]:
    """Each OS core's level at the end of a ``profile-dvfs`` run (its last change)."""
    n_os = max(1, cores // 2)
    level = {c: m.cores[c].level % len(m.cores[c].dvfs) for c in range(cores - n_os, cores)}
    for _, c, lv in changes:
        level[c] = lv
    return [level[c] for c in sorted(level)]


def compare(traces: Mapping[str, PreparedTrace], cores: int = 8,
            switch_cost: str = TRACED) -> pd.DataFrame:
    """:func:`run_configs` on each trace: one row per (trace, configuration)."""
    return pd.concat({name: run_configs(tr, cores, switch_cost=switch_cost)
                      for name, tr in traces.items()}, names=["trace", "config"])


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per trace: the completion time and energy of each configuration against ``all-fast``
    (the same placement, every core fast), the measures seed 002's findings are about."""
    rows = []
    for name, t in table.groupby(level="trace", sort=False):
        t = t.droplevel("trace")
        row = {"trace": name}
        for cfg in t.index:
            if cfg == "all-fast":
                continue
            row[f"{cfg} time"] = t.loc[cfg, "slowdown_vs_all_fast"]
            row[f"{cfg} energy"] = t.loc[cfg, "energy_vs_all_fast"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("trace")


__all__ = ["COLUMNS", "CONFIGS", "PAPER", "compare", "grid", "measure", "run_configs",
           "split_machine", "summary"]
