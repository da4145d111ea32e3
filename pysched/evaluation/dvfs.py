"""Seed 002's experiment: OS components on dedicated cores at chosen DVFS levels, against the
same placement with every OS core fast or slow, and against ``linux`` (every core fast).

Configurations (``cores`` cores, the second half the OS's under the dedicated placement):

* ``linux``: the ``linux`` policy, every core at the fastest level;
* ``all-fast``: ``disaggregate-os`` (the dedicated placement), every core at the fastest level;
* ``all-slow``: the same placement with the OS cores at the slowest level (the applications'
  cores keep the fastest, as seed 002 section 2 keeps the applications' settings);
* ``profile-dvfs``: the same placement, each OS core at the lowest level meeting the target.

Measures: the completion time of the traced threads' work (the latest end of any thread: the
replay's interrupts arrive at their traced times, so the run's own length says little), the
energy of the run, and energy per instruction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pysched.models.caches.config import HierarchyConfig
from pysched.models.cores.config import big_core
from pysched.models.machine import MachineConfig
from pysched.policies import get_policy
from pysched.sandbox import SandboxConfig, simulate

from .runner import PreparedTrace

#: label -> (policy spec, level of the OS cores: -1 the fastest, 0 the slowest)
CONFIGS = {"linux": ("linux", -1), "all-fast": ("disaggregate-os", -1),
           "all-slow": ("disaggregate-os", 0), "profile-dvfs": ("profile-dvfs", -1)}


def split_machine(cores: int, os_level: int = -1) -> MachineConfig:
    """``cores`` big cores (Table 2's caches), the second half (the OS's) at ``os_level``."""
    n_os = max(1, cores // 2) if cores > 1 else 0
    kinds = tuple(big_core(level=os_level if c >= cores - n_os else -1) for c in range(cores))
    return MachineConfig(HierarchyConfig(cores=cores), kinds)


def run_configs(trace: PreparedTrace, cores: int = 4, configs: dict | None = None
                ) -> pd.DataFrame:
    """One row per configuration (see the module)."""
    rows = []
    for label, (spec, level) in (configs or CONFIGS).items():
        pol = get_policy(spec)
        res = simulate(trace.workload, trace.footprint, pol,
                       SandboxConfig(split_machine(cores, level)), trace.events)
        t = res.total
        done = float(np.nanmax(res.task_end_s))
        rows.append({"config": label, "completion_ms": 1e3 * done,
                     "energy_mj": 1e3 * float(t.energy_j.sum()),
                     "nj_per_insn": 1e9 * float(t.energy_j.sum() / t.instructions.sum()),
                     "events": int(t.events), "elapsed_ms": 1e3 * t.elapsed_s,
                     "os_core_levels": getattr(pol, "changes", None) and sorted(
                         {lv for *_, lv in pol.changes}),
                     "level_changes": len(getattr(pol, "changes", []))})
    out = pd.DataFrame(rows).set_index("config")
    base = out.loc["linux"]
    out["slowdown_vs_linux"] = out["completion_ms"] / base["completion_ms"] - 1
    out["energy_vs_linux"] = out["energy_mj"] / base["energy_mj"] - 1
    return out


__all__ = ["CONFIGS", "run_configs", "split_machine"]
