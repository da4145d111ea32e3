"""Cache and core models that the scheduler sandbox replays SuperFunctions on.

* :mod:`pysched.models.caches`: set-associative caches (LRU, FIFO, random), a per-core L1i/L1d/L2
  plus shared L3 hierarchy (numba kernels), access streams from traces.
* :mod:`pysched.models.cores`: cycles from cache counts, big/small cores, DVFS and energy.
* :mod:`pysched.models.stats`: statistic records that subtract to per-epoch deltas.
* :mod:`pysched.models.machine`: a whole machine's configuration, loadable from TOML/JSON.
* :mod:`pysched.models.cache_fair`: seed 003's fair miss rate and fair IPC of a thread
  beside co-runners sharing the last-level cache.
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .caches import Cache, CacheConfig, Hierarchy, HierarchyConfig, access_stream
from .configio import ConfigError, from_dict, load_config
from .cores import CoreConfig, big_core, small_core
from .machine import MachineConfig
from .stats import CacheStats, Record, SingleCacheStats

__all__ = ["Cache", "CacheConfig", "CacheStats", "ConfigError", "CoreConfig", "Hierarchy",
           "HierarchyConfig", "MachineConfig", "Record", "SingleCacheStats", "access_stream",
           "big_core", "from_dict", "load_config", "small_core"]
