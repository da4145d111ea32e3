"""Where each policy's busy cycles go, per instruction, beside the baseline's: the measured
split behind "instructions per busy core-second" (:func:`.comparison.with_changes`).

A core's busy time is its cycles over its frequency, and its cycles are the sum of base
cycles (instructions times the base CPI), stall cycles of instruction fetches and of data
accesses (what each cache level served times the core's stall per access there,
:func:`pysched.models.cores.timing.stall_table`), the context-switch path, OS moves between
cores and the policy's own routines (:class:`pysched.sandbox.metrics.SandboxStats`). At one
frequency, a policy's change of instructions per busy core-second is the baseline's cycles per
instruction over its own, less one; the table gives each cause's share of the difference. A
second table splits the data stall by the level that served the access (:data:`DATA_LEVELS`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pysched.evaluation.report import geomean_change
from pysched.evaluation.runner import RUN_KEYS

#: The run columns whose sum is the busy cycles, and how the table names them.
CAUSES: dict[str, str] = {
    "base_cycles": "base",
    "ifetch_stall_cycles": "fetch stall",
    "data_stall_cycles": "data stall",
    "switch_cycles": "switches",
    "migration_cycles": "OS moves",
    "policy_cycles": "policy routines",
}

#: The run columns that split the data stall by the level that served the access: an L1d
#: miss the L2 served, a private-cache miss the shared L3 served, a last-level miss.
DATA_LEVELS: dict[str, str] = {
    "data_stall_l2_cycles": "L2",
    "data_stall_l3_cycles": "L3",
    "data_stall_memory_cycles": "memory",
}


def per_instruction(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's cycles per instruction by cause (:data:`CAUSES`), and their sum ``total``
    (the run's ``cycles`` per instruction); NaN where a run has no instructions."""
    ins = runs["instructions"].astype(float).where(runs["instructions"] > 0)
    out = pd.DataFrame({name: runs[col] / ins for col, name in CAUSES.items()},
                       index=runs.index)
    out["total"] = runs["cycles"] / ins
    return out


#: Each cause's column of :func:`per_instruction`, then the total.
_NAMES = [*CAUSES.values(), "total"]
#: What makes two runs comparable: the same trace and setting.
_KEYS = [k for k in RUN_KEYS if k != "policy"]


def _of(x: pd.DataFrame, policy: str) -> pd.DataFrame:
    """:func:`per_instruction` of ``policy``'s runs in ``x``, indexed by trace and setting."""
    own = x[x["policy"] == policy]
    return per_instruction(own).set_index(pd.MultiIndex.from_frame(own[_KEYS]))[_NAMES]


def mean_differences(x: pd.DataFrame, policy: str, baseline: str = "linux") -> pd.Series:
    """``policy``'s cycles per instruction by cause (and ``total``) less ``baseline``'s on the
    same workload and setting, means over the runs of ``x``; empty without the split."""
    if any(c not in x for c in CAUSES):
        return pd.Series(dtype=float)
    own = _of(x, policy)
    return (own - _of(x, baseline).reindex(own.index)).mean()


def _levels_of(x: pd.DataFrame, policy: str) -> pd.DataFrame:
    """``policy``'s data stall cycles per instruction by serving level (:data:`DATA_LEVELS`),
    indexed by trace and setting."""
    own = x[x["policy"] == policy]
    ins = own["instructions"].astype(float).where(own["instructions"] > 0)
    out = pd.DataFrame({name: own[col] / ins for col, name in DATA_LEVELS.items()})
    return out.set_index(pd.MultiIndex.from_frame(own[_KEYS]))


def level_differences(x: pd.DataFrame, policy: str, baseline: str = "linux") -> pd.Series:
    """``policy``'s data stall cycles per instruction by serving level less ``baseline``'s
    on the same workload and setting, means over the runs of ``x``; empty without the
    split."""
    if any(c not in x for c in DATA_LEVELS):
        return pd.Series(dtype=float)
    own = _levels_of(x, policy)
    return (own - _levels_of(x, baseline).reindex(own.index)).mean()


def _largest_first(d: pd.Series, least: float) -> pd.Series:
    return d[d.abs() >= least].sort_values(key=abs, ascending=False)


def reason_text(d: pd.Series, levels: pd.Series | None = None, least: float = 5e-4) -> str:
    """The causes of :func:`mean_differences` as one line, largest change first (changes
    under ``least`` cycles per instruction left out); the data stall's change followed by its
    split by serving level in brackets (``levels``, :func:`level_differences`) where given."""
    if d.empty or not np.isfinite(d["total"]):
        return ""
    parts = _largest_first(d.drop("total"), least)
    split = (_largest_first(levels, least) if levels is not None and not levels.empty
             else pd.Series(dtype=float))

    def one(k: str, v: float) -> str:
        if k != CAUSES["data_stall_cycles"] or not len(split):
            return f"{k} {v:+.3f}"
        return f"{k} {v:+.3f} [" + ", ".join(f"{n} {w:+.3f}" for n, w in split.items()) + "]"
    return (f"cycles per instruction {d['total']:+.3f}"
            + (" (" + ", ".join(one(k, v) for k, v in parts.items()) + ")"
               if len(parts) else ""))


def split_lines(r: pd.DataFrame, cores: int, policies: list[str],
                baseline: str = "linux") -> list[str]:
    """A table of cycles per instruction by cause at 2X on ``cores``: the baseline's, then
    each policy's difference from it, means over the workloads; empty when the runs do not
    have the split (runs stored before it was measured)."""
    if any(c not in r for c in CAUSES):
        return []
    x = r[(r["cores"] == cores) & (r["load"] == 2)]
    if baseline not in set(x["policy"]) or not policies:
        return []
    base = _of(x, baseline)
    head = ["policy", *_NAMES, "instructions per busy core-second"]
    lines = [f"### Where the busy cycles go, {cores} cores, 2X (cycles per instruction)", "",
             "Measured in each run (the cores' stall tables times what each cache level "
             f"served; the switch path, OS moves and routines as charged): {baseline}'s, then "
             f"each policy's difference from {baseline} on the same workload, means over the "
             "workloads. A positive difference is cycles the policy spends that "
             f"{baseline} does not; at one frequency the last column is {baseline}'s total "
             "over the policy's, less one.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| " + " | ".join([baseline, *[f"{v:.3f}" for v in base.mean()], ""])
                 + " |")
    for p in policies:
        own = _of(x, p)
        gain = geomean_change(base["total"].reindex(own.index) / own["total"] - 1.0)
        lines.append("| " + " | ".join([p, *[f"{v:+.3f}" for v in
                                             mean_differences(x, p, baseline)],
                                        f"{100 * gain:+.1f} %"]) + " |")
    return lines + [""] + level_lines(x, policies, baseline)


def level_lines(x: pd.DataFrame, policies: list[str], baseline: str = "linux") -> list[str]:
    """The data stall of :func:`split_lines` by the level that served the access: the
    baseline's cycles per instruction, then each policy's difference; empty when the runs do
    not have the split."""
    if any(c not in x for c in DATA_LEVELS):
        return []
    base = _levels_of(x, baseline).mean()
    head = ["policy", *DATA_LEVELS.values(), "data stall"]
    lines = ["Data stall by the level that served the access (cycles per instruction): the "
             "L2 serves an L1d miss, the shared L3 a miss of the core's private caches (a "
             "thread's data left in another core's L1d and L2 is served from here or "
             "memory), memory a miss of the L3.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| " + " | ".join([baseline, *[f"{v:.3f}" for v in base],
                                     f"{base.sum():.3f}"]) + " |")
    for p in policies:
        d = level_differences(x, p, baseline)
        lines.append("| " + " | ".join([p, *[f"{v:+.3f}" for v in d], f"{d.sum():+.3f}"])
                     + " |")
    return lines + [""]


__all__ = ["CAUSES", "DATA_LEVELS", "level_differences", "level_lines", "mean_differences",
           "per_instruction", "reason_text", "split_lines"]
