"""Running the same geometry and stream through pycachesim (an independent simulator, PyPI
``pycachesim``, test extra) and reading its counts in our terms.

pycachesim's semantics, from its ``backend.c`` (0.3.1), and the configuration that makes it
model exactly what our kernels model:

* Levels are non-inclusive, non-exclusive: a load miss is forwarded to ``load_from`` and the
  line filled into every level on the way back; a clean eviction informs nobody. Our default
  (``inclusive=False``) is the same.
* LRU keeps each set in recency order and FIFO in fill order, invalid ways last: the same
  orders our policies keep (random replacement uses C ``rand()`` and cannot be compared).
* A *store* hit marks the line dirty but does not update LRU order, and a store miss with
  write-allocate is counted as a load miss. Our store is a use of the line like a load. So each
  of our stores is given to pycachesim as a load followed by a store of the same address: the
  load does the lookup, the recency update and the fill; the store then always hits and only
  sets the dirty bit.
* A dirty eviction is a ``store`` into ``store_to``. With ``write_allocate=False`` (which we set
  on L2 and L3) a store that misses there injects the line dirty without fetching it, and a
  store that hits only sets the dirty bit without changing the order: exactly our write-back
  rule. L1i and L1d both load from and store to the core's L2.

Counts (``LOAD``, ``HIT``, ``MISS``, ``STORE``, ``EVICT`` per level) then map to ours as
:func:`our_counts` computes: ``HIT``/``MISS``/``LOAD`` are demand accesses (a store counts once,
as its load), ``STORE`` at L2/L3 is write-backs arriving, ``EVICT`` dirty evictions. pycachesim
simulates one core.
"""
from __future__ import annotations

import numpy as np

from ..codes import EV_WB_L1D, EV_WB_L2, EV_WB_L3, IFETCH, LOAD, STORE
from ..stats import CacheStats
from .config import CacheConfig, HierarchyConfig

_POLICY = {"lru": "LRU", "fifo": "FIFO"}


def _pc_cache(name: str, cfg: CacheConfig, **kw):
    from cachesim import Cache as PCache
    if cfg.policy not in _POLICY:
        raise ValueError(f"pycachesim cannot reproduce policy {cfg.policy!r} "
                         f"(only {', '.join(_POLICY)})")
    return PCache(name, cfg.sets, cfg.ways, cfg.line, _POLICY[cfg.policy], **kw)


def _runs(kind: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, stop, is_fetch) of maximal runs of fetches / data accesses."""
    isf = kind == IFETCH
    if len(isf) == 0:
        return []
    cut = np.flatnonzero(isf[1:] != isf[:-1]) + 1
    starts = np.r_[0, cut]
    stops = np.r_[cut, len(isf)]
    return [(int(a), int(b), bool(isf[a])) for a, b in zip(starts, stops)]


def _data_items(addr: list[int], kind: np.ndarray) -> list[tuple]:
    """pycachesim ``loadstore`` items: a load is ``([a], None)``, a store ``([a], [a])``."""
    return [([a], [a]) if k == STORE else ([a], None) for a, k in zip(addr, kind.tolist())]


class PycachesimHierarchy:
    """pycachesim configured as one core of a :class:`HierarchyConfig` (see module doc).

    The stream is fed in maximal runs of instruction fetches (one ``iterload`` call on the L1i
    with the whole run) and of data accesses (one ``loadstore`` call on the L1d).
    """

    def __init__(self, config: HierarchyConfig) -> None:
        if config.inclusive or config.coherence:
            raise ValueError("pycachesim models a non-inclusive hierarchy without coherence")
        self.l3 = _pc_cache("L3", config.l3, write_back=True, write_allocate=False)
        self.l2 = _pc_cache("L2", config.l2, write_back=True, write_allocate=False,
                            load_from=self.l3, store_to=self.l3)
        self.l1i = _pc_cache("L1I", config.l1i, load_from=self.l2, store_to=self.l2)
        self.l1d = _pc_cache("L1D", config.l1d, load_from=self.l2, store_to=self.l2)

    def prepare(self, addr: np.ndarray, kind: np.ndarray) -> list:
        """The calls to make, built ahead so that timing covers only simulation."""
        addr_l = np.asarray(addr, dtype=np.int64).tolist()
        calls = []
        for a, b, fetch in _runs(np.asarray(kind)):
            if fetch:
                calls.append((self.l1i.backend.iterload, addr_l[a:b]))
            else:
                calls.append((self.l1d.backend.loadstore, _data_items(addr_l[a:b], kind[a:b])))
        return calls

    @staticmethod
    def execute(calls: list) -> None:
        for fn, arg in calls:
            fn(arg)

    def run(self, addr: np.ndarray, kind: np.ndarray) -> None:
        self.execute(self.prepare(addr, kind))

    def counts(self) -> dict[str, dict[str, int]]:
        """``{level: {LOAD, HIT, MISS, STORE, EVICT}}`` as pycachesim counted them."""
        out = {}
        for name, c in (("L1I", self.l1i), ("L1D", self.l1d), ("L2", self.l2), ("L3", self.l3)):
            b = c.backend
            out[name] = {"LOAD": b.LOAD_count, "HIT": b.HIT_count, "MISS": b.MISS_count,
                         "STORE": b.STORE_count, "EVICT": b.EVICT_count}
        return out


def our_counts(stats: CacheStats, core: int = 0) -> dict[str, dict[str, int]]:
    """Our counters of ``core`` in pycachesim's terms (see the module doc)."""
    s = stats.served[core].sum(axis=0)      # (kind, level)
    ev = stats.events[core]
    fetch = s[IFETCH]
    data = s[LOAD] + s[STORE]
    both = fetch + data
    stores = int(s[STORE].sum())

    def lvl(h: np.ndarray, level: int, store: int, evict: int) -> dict[str, int]:
        return {"LOAD": int(h[level:].sum()), "HIT": int(h[level]),
                "MISS": int(h[level + 1:].sum()), "STORE": store, "EVICT": evict}

    return {"L1I": lvl(fetch, 0, 0, 0),
            "L1D": lvl(data, 0, stores, int(ev[EV_WB_L1D])),
            "L2": lvl(both, 1, int(ev[EV_WB_L1D]), int(ev[EV_WB_L2])),
            "L3": lvl(both, 2, int(ev[EV_WB_L2]), int(ev[EV_WB_L3]))}


class PycachesimCache:
    """pycachesim configured as one :class:`CacheConfig` (write-back, write-allocate)."""

    def __init__(self, config: CacheConfig) -> None:
        self.cache = _pc_cache("L1", config)

    def prepare(self, addr: np.ndarray, store: np.ndarray | None = None):
        addr_l = np.asarray(addr, dtype=np.int64).tolist()
        if store is None or not np.any(store):
            return [(self.cache.backend.iterload, addr_l)]
        kind = np.where(np.asarray(store) != 0, STORE, LOAD)
        return [(self.cache.backend.loadstore, _data_items(addr_l, kind))]

    execute = staticmethod(PycachesimHierarchy.execute)

    def run(self, addr: np.ndarray, store: np.ndarray | None = None) -> None:
        self.execute(self.prepare(addr, store))

    def counts(self) -> dict[str, int]:
        b = self.cache.backend
        return {"LOAD": b.LOAD_count, "HIT": b.HIT_count, "MISS": b.MISS_count,
                "STORE": b.STORE_count, "EVICT": b.EVICT_count}
