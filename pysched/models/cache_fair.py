"""Seed 003's model of a thread's performance under a fair share of the shared cache (Fedorova,
Seltzer, Smith: "Improving performance isolation on chip multiprocessors via an operating
system scheduler"): the fair miss rate by regression and the fair IPC it gives, and the CPU
time that makes up the difference. The ``cache-fair`` policy
(:mod:`pysched.policies.cache_fair`) applies it online, the seed 003 experiment
(:mod:`pysched.studies.seed003_cache_fair`) to the samples of several runs.

* **Fair miss rate** (section 3.1, equations 1-2): a thread's shared-cache miss rate (misses
  per cycle) is linear in the sum of its co-runners' miss rates,
  ``MissRate(A) = a * sum(MissRate(C_i)) + b``, and with ``n`` co-runners all at the fair miss
  rate, ``FairMissRate(A) = b / (1 - a * n)``.
* **Fair IPC** (section 3, via its references [14]/[30]): a CPI that grows by ``L`` cycles
  per miss, ``CPI = CPI0 + L * misses / instruction``, gives
  ``IPC_fair = IPC * (1 - m_fair * L) / (1 - m * L)`` for miss rates ``m`` in misses per cycle.
* **Compensation** (section 4, scheduling phase): the instructions a thread would have
  executed at its fair IPC in the cycles it ran, less those it executed, divided by its IPC,
  is the CPU time its next time slice is lengthened by (shortened when negative).
"""
from __future__ import annotations

import math

import numpy as np


def fit_miss_rate(own: np.ndarray, corunners_sum: np.ndarray) -> tuple[float, float]:
    """Least-squares ``a`` and ``b`` of ``own = a * corunners_sum + b`` (equation 1).

    Parameters
    ----------
    own : array of float
        The thread's miss rate (misses per cycle) in each sample.
    corunners_sum : array of float
        The sum of its co-runners' miss rates in the same samples.

    Returns
    -------
    a, b : float

    Raises
    ------
    ValueError
        With fewer than two samples or co-runner sums that do not vary.
    """
    x = np.asarray(corunners_sum, dtype=np.float64)
    y = np.asarray(own, dtype=np.float64)
    if len(x) < 2 or len(x) != len(y):
        raise ValueError(f"need at least two paired samples, got {len(x)} and {len(y)}")
    if np.ptp(x) == 0:
        raise ValueError("the co-runners' miss rates do not vary: no regression")
    a, b = np.polyfit(x, y, 1)
    return float(a), float(b)


def fair_miss_rate(a: float, b: float, n: int) -> float:
    """``b / (1 - a * n)`` (equation 2) for ``n`` co-runners; NaN where the model has no
    positive fair point."""
    den = 1.0 - a * n
    if den <= 0:
        return math.nan
    m = b / den
    return m if m >= 0 else math.nan


def fair_ipc(ipc: float, miss_rate: float, fair_rate: float, penalty: float) -> float:
    """The IPC at miss rate ``fair_rate`` of a thread measured at ``ipc`` and ``miss_rate``
    (misses per cycle), each miss costing ``penalty`` cycles (see the module)."""
    return ipc * (1.0 - fair_rate * penalty) / (1.0 - miss_rate * penalty)


def compensation_s(insns: int, cycles: float, misses: int, fair_rate: float, penalty: float,
                   freq_hz: float) -> float:
    """Seconds of CPU time that bring a thread to its fair IPC (section 4; see the module).

    Parameters
    ----------
    insns, cycles, misses
        What the thread executed in an interval: instructions, cycles (> 0) and shared-cache
        misses.
    fair_rate : float
        Its fair miss rate (misses per cycle).
    penalty : float
        Cycles a miss costs.
    freq_hz : float
        Its core's frequency.

    Returns
    -------
    float
        Positive: it ran below its fair IPC by that much CPU time; negative: above. NaN where a
        miss rate times ``penalty`` reaches 1 (the model has no IPC there).
    """
    ipc, rate = insns / cycles, misses / cycles
    if rate * penalty >= 1 or fair_rate * penalty >= 1:
        return math.nan
    fair_insns = fair_ipc(ipc, rate, fair_rate, penalty) * cycles
    return (fair_insns - insns) / (ipc * freq_hz)


__all__ = ["compensation_s", "fair_ipc", "fair_miss_rate", "fit_miss_rate"]
