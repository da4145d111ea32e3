"""Time and energy of a core at a DVFS level: dynamic energy ``C * V**2`` per busy cycle,
static power (scaling linearly with voltage from its value at 1.0 V) over busy and idle time."""
from __future__ import annotations

from dataclasses import dataclass

from .config import CoreConfig


@dataclass(frozen=True)
class Energy:
    """Energy of one core over a stretch of time.

    Attributes
    ----------
    busy_s, idle_s : float
        Seconds busy and idle.
    dynamic_j, static_j : float
        Joules.
    """

    busy_s: float
    idle_s: float
    dynamic_j: float
    static_j: float

    @property
    def total_j(self) -> float:
        return self.dynamic_j + self.static_j


def seconds(cycles: float, core: CoreConfig, level: int | None = None) -> float:
    """Wall time of ``cycles`` at DVFS level ``level`` (default the core's)."""
    if cycles < 0:
        raise ValueError(f"cycles must not be negative, got {cycles}")
    return cycles / (core.operating_point(level).freq_ghz * 1e9)


def energy(cycles: float, core: CoreConfig, level: int | None = None,
           idle_s: float = 0.0) -> Energy:
    """Energy of ``cycles`` busy cycles plus ``idle_s`` idle seconds at one DVFS level.

    Parameters
    ----------
    cycles : float
        Busy cycles (from :func:`pysched.models.cores.timing.cycles`).
    core : CoreConfig
    level : int, optional
        DVFS level index (default ``core.level``).
    idle_s : float
        Seconds the core is on but idle (static power only).
    """
    if idle_s < 0:
        raise ValueError(f"idle_s must not be negative, got {idle_s}")
    op = core.operating_point(level)
    busy = seconds(cycles, core, level)
    dyn = cycles * core.capacitance_nf * 1e-9 * op.voltage ** 2
    static = core.static_power_w * op.voltage * (busy + idle_s)
    return Energy(busy, idle_s, dyn, static)
