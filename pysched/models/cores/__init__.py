"""Core models: timing from cache counts (big out-of-order and small in-order cores), DVFS and
energy."""
from __future__ import annotations

from .config import DEFAULT_DVFS, CoreConfig, DvfsLevel, big_core, small_core
from .energy import Energy, energy, seconds
from .timing import CoreStats, core_stats, cycles, stall_table

__all__ = ["DEFAULT_DVFS", "CoreConfig", "CoreStats", "DvfsLevel", "Energy", "big_core",
           "core_stats", "cycles", "energy", "seconds", "small_core", "stall_table"]
