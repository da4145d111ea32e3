"""pycachesim (PyPI, test extra) on the same address stream and geometry gives identical hit,
miss, write-back and eviction counts per level; see pysched/models/caches/reference.py for its
semantics and the configuration that makes the comparison exact."""
from __future__ import annotations

import numpy as np
import pytest

from pysched.models.caches import Cache, CacheConfig, Hierarchy, HierarchyConfig
from pysched.models.codes import STORE
from test_models_caches import LINE, WAYS, local_stream, small_hier

cachesim = pytest.importorskip("cachesim", reason="pycachesim (test extra) not installed")
from pysched.models.caches.reference import (  # noqa: E402
    PycachesimCache,
    PycachesimHierarchy,
    our_counts,
)


@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("ways", [(2, 4), (4, 4)] + [(w, w) for w in WAYS if w != 4])
def test_pycachesim_hierarchy_identical_per_level(policy, ways):
    rng = np.random.default_rng(5)
    cfg = small_hier(policy, l1_ways=ways[0], lower_ways=ways[1])
    addr, kind = local_stream(rng, 20000, lines=max(400, 40 * ways[1]))
    h = Hierarchy(cfg)
    h.run(0, addr, kind)
    ref = PycachesimHierarchy(cfg)
    ref.run(addr, kind)
    ours, theirs = our_counts(h.stats), ref.counts()
    assert ours == theirs
    assert ours["L2"]["EVICT"] > 0 and ours["L3"]["EVICT"] > 0


def test_pycachesim_table2_on_a_large_footprint():
    rng = np.random.default_rng(6)
    cfg = HierarchyConfig()
    # a footprint of 16 MB: beyond the L3, with locality
    n = 60000
    addr = (rng.integers(0, 1 << 18, n) * LINE).astype(np.uint64)
    addr[::3] = (np.arange(len(addr[::3])) % 4096 * LINE).astype(np.uint64)
    kind = rng.integers(0, 3, n).astype(np.uint8)
    h = Hierarchy(cfg)
    h.run(0, addr, kind)
    ref = PycachesimHierarchy(cfg)
    ref.run(addr, kind)
    assert our_counts(h.stats) == ref.counts()


@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("ways", WAYS)
def test_pycachesim_single_cache(policy, ways):
    rng = np.random.default_rng(8)
    addr, kind = local_stream(rng, 20000, lines=2000)
    store = (kind == STORE).astype(np.uint8)
    cfg = CacheConfig(32 * ways * LINE, ways, LINE, 3, policy)
    c = Cache(cfg)
    c.run(addr, store)
    ref = PycachesimCache(cfg)
    ref.run(addr, store)
    r = ref.counts()
    assert (c.stats.hits(), c.stats.misses(), c.stats.writebacks) == (r["HIT"], r["MISS"],
                                                                        r["EVICT"])
