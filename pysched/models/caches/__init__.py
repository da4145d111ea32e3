"""Cache models: set-associative caches and a per-core L1i/L1d/L2 + shared L3 hierarchy.

>>> from pysched.models.caches import Hierarchy, HierarchyConfig
>>> h = Hierarchy(HierarchyConfig(cores=2))          # Table 2 of seed 000
>>> served = h.run(0, addr, kind, cls)                # doctest: +SKIP
"""
from __future__ import annotations

from .cache import Cache
from .config import POLICIES, TABLE2, CacheConfig, HierarchyConfig
from .hierarchy import Hierarchy
from .streams import AccessStream, access_stream, data_accesses, fetch_lines, merge_accesses

__all__ = ["POLICIES", "TABLE2", "AccessStream", "Cache", "CacheConfig", "Hierarchy",
           "HierarchyConfig", "access_stream", "data_accesses", "fetch_lines", "merge_accesses"]
