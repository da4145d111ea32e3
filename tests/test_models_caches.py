"""Cache kernels against slow twins, analytic cases, pycachesim, and bad input."""
from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twins.caches import (SlowHierarchy, slow_find, slow_oldest, slow_single, slow_touch,
                          slow_victim)
from pysched.models import ConfigError
from pysched.models.caches import Cache, CacheConfig, Hierarchy, HierarchyConfig, ranks, simd
from pysched.models.codes import EVENT_NAMES, IFETCH, LOAD, STORE
from pysched.models.stats import CacheStats

LINE = 64


#: Associativities the kernels treat differently: one way (direct-mapped loop), a vector of
#: 2, 4, 8 or 16 lanes holding the set exactly or with lanes left over (3, 5, 12), more than 16
#: ways (16 at a time).
WAYS = [1, 2, 3, 4, 5, 8, 12, 16, 20, 32]


def small_hier(policy="lru", cores=1, inclusive=False, coherence=False, seed=1, l1_ways=2,
               lower_ways=4):
    """2 sets per L1 of ``l1_ways``; 4 sets per L2 and 8 in the L3 of ``lower_ways``."""
    l1 = 2 * l1_ways * LINE
    return HierarchyConfig(l1i=CacheConfig(l1, l1_ways, LINE, 3, policy),
                           l1d=CacheConfig(l1, l1_ways, LINE, 3, policy),
                           l2=CacheConfig(4 * lower_ways * LINE, lower_ways, LINE, 8, policy),
                           l3=CacheConfig(8 * lower_ways * LINE, lower_ways, LINE, 18, policy),
                           cores=cores, inclusive=inclusive, coherence=coherence, seed=seed)


def local_stream(rng, n, lines=96, kinds=True):
    """Addresses with locality over ``lines`` lines, random kinds."""
    walk = np.cumsum(rng.integers(-3, 4, n)) % lines
    jump = rng.random(n) < 0.1
    walk[jump] = rng.integers(0, lines, jump.sum())
    addr = (walk * LINE + rng.integers(0, LINE, n)).astype(np.uint64)
    kind = rng.integers(0, 3, n).astype(np.uint8) if kinds else np.full(n, LOAD, np.uint8)
    return addr, kind


# --- whole-set vector operations vs twin --------------------------------------------------

@pytest.mark.parametrize("ways", list(range(1, 18)) + [20, 31, 32, 40])
def test_set_operations_match_twin(ways):
    rng = np.random.default_rng(ways)
    sets = 5
    n = sets * ways
    for _ in range(20):
        # few distinct values: lines repeat across sets, stamps tie (the first smallest wins)
        tags = np.full(n + simd.PAD, -1, np.int64)
        tags[:n] = rng.integers(-1, 6, n)
        stamp = np.full(n + simd.PAD, -1, np.int64)
        stamp[:n] = rng.integers(-1, 4 * ways, n)
        # the spare elements must not be seen: fill them with what would match or win
        tags[n:] = 3
        stamp[n:] = -9
        for s in range(sets):
            base = s * ways
            # a line is in a set at most once in a cache: keep the first copy of each
            seen = set()
            for i in range(base, base + ways):
                if tags[i] in seen:
                    tags[i] = -1
                seen.add(int(tags[i]))
            for line in range(6):
                assert simd.find(tags, base, ways, line) == slow_find(tags, base, ways, line)
            assert simd.oldest(stamp, base, ways) == slow_oldest(stamp, base, ways)


@numba.njit
def _rank_ops(rank, sets, ways_, ops):
    """Apply ``ops`` (set, way or -1 for the victim) to ``rank``; the ways touched."""
    out = np.empty(len(ops), np.int64)
    for k in range(len(ops)):
        base = ops[k, 0] * ranks.STRIDE
        w = ops[k, 1]
        if w < 0:
            w = np.int64(ranks.victim(rank, base, ways_ - 1))
        ranks.touch(rank, base, w)
        out[k] = w
    return out


@pytest.mark.parametrize("ways", list(range(1, 17)))
def test_rank_operations_match_twin(ways):
    rng = np.random.default_rng(ways)
    sets = 3
    rank = ranks.initial(sets, ways)
    twin = rank.copy()
    # victims first (empty sets fill way 0 first, as stamps do), then uses of any way
    ops = np.stack([rng.integers(0, sets, 400), rng.integers(-1, ways, 400)], axis=1)
    ops[:3 * ways, 1] = -1
    got = _rank_ops(rank, sets, ways, ops)
    for k, (s, w) in enumerate(ops):
        base = int(s) * ranks.STRIDE
        if w < 0:
            w = slow_victim(twin, base, ways)
        slow_touch(twin, base, int(w))
        assert got[k] == w
    assert rank.tolist() == twin.tolist()
    # a permutation of 0..ways-1 per set, the spare lanes untouched
    per_set = rank.reshape(sets, ranks.STRIDE)
    assert (np.sort(per_set[:, :ways], axis=1) == np.arange(ways)).all()
    assert (per_set[:, ways:] == ranks.SPARE).all()
    # the first fills of a set go to ways 0, 1, 2, ... in order
    fresh = ranks.initial(1, ways)
    order = _rank_ops(fresh, 1, ways, np.array([[0, -1]] * ways))
    assert order.tolist() == list(range(ways))


# --- single cache vs twin -----------------------------------------------------------------

@pytest.mark.parametrize("policy", ["lru", "fifo", "random"])
def test_single_cache_hand_made(policy):
    # 2 sets x 2 ways of 64 B; lines 0, 2, 4 map to set 0
    cfg = CacheConfig(256, 2, LINE, 1, policy)
    addr = np.array([0, 128, 0, 256, 128, 0, 64, 64], dtype=np.uint64) 
    store = np.array([1, 0, 0, 0, 0, 0, 1, 0], dtype=np.uint8)
    c = Cache(cfg)
    hits = c.run(addr, store)
    want, wb, _ = slow_single(addr, store, 2, 2, LINE, policy)
    assert hits.tolist() == want
    assert c.stats.writebacks == wb
    if policy == "lru":
        # 0 m, 128 m, 0 h, 256 m (evicts 128), 128 m (evicts 0 dirty), 0 m, 64 m, 64 h
        assert want == [0, 0, 1, 0, 0, 0, 0, 1]
        assert wb == 1
    if policy == "fifo":
        # 256 evicts 0 (first in, dirty), 128 hits, 0 misses (evicts 128)
        assert want == [0, 0, 1, 0, 1, 0, 0, 1]
        assert wb == 1


@pytest.mark.parametrize("policy", ["lru", "fifo", "random"])
@pytest.mark.parametrize("geometry", [(256, 2), (512, 1), (512, 8), (4096, 4)]
                         + [(4 * w * LINE, w) for w in WAYS])
def test_single_cache_random_streams(policy, geometry):
    rng = np.random.default_rng(7)
    size, ways = geometry
    # more lines than the cache holds, so that every way is filled and evicted
    addr, kind = local_stream(rng, 4000, lines=max(200, 3 * size // LINE))
    store = (kind == STORE).astype(np.uint8)
    cls = rng.integers(0, 3, len(addr))
    # the second call has one class and store bit (its misses counted at the end)
    store[1500:] = 0
    cls[1500:] = 1
    c = Cache(CacheConfig(size, ways, LINE, 1, policy), classes=3, seed=5)
    # two calls: state persists across runs
    h1 = c.run(addr[:1500], store[:1500], cls[:1500])
    h2 = c.run(addr[1500:], store[1500:], cls[1500:])
    want, wb, twin = slow_single(addr, store, size // (ways * LINE), ways, LINE, policy, seed=5)
    assert np.concatenate([h1, h2]).tolist() == want
    s = c.stats
    assert s.writebacks == wb
    assert s.hits() == sum(want) and s.accesses() == len(addr)
    for q in range(3):
        sel = cls == q
        assert s.hits(q) == int(np.asarray(want)[sel].sum())
    assert sorted(c.tags[c.tags >= 0].tolist()) == twin.lines()
    if c._ranked:
        # each way's rank is its line's place in the twin's order of the set (0 most recent)
        sets = size // (ways * LINE)
        for q in range(sets):
            order = [e[0] for e in twin.data[q]]
            tags = c.tags[q * ways:(q + 1) * ways].tolist()
            got = c._rank[q * ranks.STRIDE:q * ranks.STRIDE + ways].tolist()
            assert [got[w] for w in range(ways) if tags[w] >= 0] == \
                [order.index(t) for t in tags if t >= 0]
            assert sorted(got) == list(range(ways))


def test_two_way_lru_switches_loops_with_the_miss_rate():
    # 2-way LRU takes each block by the loop that suits the last block's miss rate: phases
    # that fit in the cache (hits, loop with a branch) and that thrash it (branch-free) in turn
    from pysched.models.caches.kernels import TWO_WAY_BLOCK, TWO_WAY_BRANCHLESS_ABOVE
    rng = np.random.default_rng(11)
    sets, b = 8, TWO_WAY_BLOCK
    hot = rng.integers(0, 2 * sets, 3 * b)                  # 16 lines: fits, after cold misses
    cold = rng.integers(0, 40 * sets, 2 * b)                # thrashes
    lines = np.concatenate([hot[:b], cold[:b], hot[b:], cold[b:], hot[:b // 2]])
    addr = (lines * LINE).astype(np.uint64)
    store = (rng.random(len(addr)) < 0.3).astype(np.uint8)
    c = Cache(CacheConfig(sets * 2 * LINE, 2, LINE, 1, "lru"))
    hits = c.run(addr, store)
    want, wb, _ = slow_single(addr, store, sets, 2, LINE, "lru")
    assert hits.tolist() == want
    assert c.stats.writebacks == wb
    # the phases did reach both loops
    miss = 1 - np.asarray(want)
    rates = [miss[lo:lo + b].mean() for lo in range(0, len(addr) - b, b)]
    assert min(rates) <= TWO_WAY_BRANCHLESS_ABOVE < max(rates)


@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=200),
       st.sampled_from(["lru", "fifo", "random"]), st.sampled_from(WAYS))
@settings(max_examples=100, deadline=None)
def test_single_cache_hypothesis(ops, policy, ways):
    addr = np.array([a * 32 for a, _ in ops], dtype=np.uint64)
    store = np.array([s for _, s in ops], dtype=np.uint8)
    c = Cache(CacheConfig(2 * ways * LINE, ways, LINE, 1, policy))
    hits = c.run(addr, store)
    want, wb, _ = slow_single(addr, store, 2, ways, LINE, policy)
    assert hits.tolist() == want
    assert c.stats.writebacks == wb


# --- hierarchy vs twin --------------------------------------------------------------------

def compare_hierarchy(cfg, streams, classes=2):
    """streams: list of (core, addr, kind, cls) run in order on both models."""
    h = Hierarchy(cfg, classes=classes)
    twin = SlowHierarchy(cfg, classes)
    for core, addr, kind, cls in streams:
        got = h.run(core, addr, kind, cls)
        want = twin.run(core, addr, kind, cls)
        assert got.tolist() == want
    assert h.stats.served.tolist() == twin.served
    assert h.stats.events.tolist() == twin.events
    for c in range(cfg.cores):
        for name, i in (("l1i", 0), ("l1d", 1), ("l2", 2)):
            assert h.lines(name, c).tolist() == twin.priv[c][i].lines(), (name, c)
    assert h.lines("l3").tolist() == twin.l3.lines()
    return h


def test_hierarchy_hand_made():
    cfg = small_hier()
    # fetch line 0 (memory), load line 0 (L1d miss, L2 hit), store line 1 (memory), load line 0
    addr = np.array([0, 8, 64, 0], dtype=np.uint64)
    kind = np.array([IFETCH, LOAD, STORE, LOAD], dtype=np.uint8)
    h = compare_hierarchy(cfg, [(0, addr, kind, np.zeros(4, np.uint8))])
    assert h.stats.served[0, 0].tolist() == [[0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1]]


@pytest.mark.parametrize("coherence", [False, True])  # the two kernels (levelwise without)
@pytest.mark.parametrize("inclusive", [False, True])
def test_l3_miss_of_a_line_another_core_holds(coherence, inclusive):
    """Core 1 fills the L3 set of line 0 while core 0's L1d and L2 keep it; core 1's own load
    of line 0 then misses the L3 with the line held elsewhere, unless the L3 is inclusive
    (its eviction took core 0's copies)."""
    cfg = small_hier("lru", cores=2, inclusive=inclusive, coherence=coherence)
    sets, ways = cfg.l3.sets, cfg.l3.ways
    core1 = [k * sets for k in range(1, ways + 1)] + [0]  # line 0's L3 set, then line 0
    h = compare_hierarchy(cfg, [(c, np.array([x * LINE for x in lines], np.uint64),
                                 np.full(len(lines), LOAD, np.uint8),
                                 np.zeros(len(lines), np.uint8))
                                for c, lines in ((0, [0]), (1, core1))])
    held = h.stats.events[:, EVENT_NAMES.index("l3_misses_held_elsewhere")].tolist()
    assert held == ([0, 0] if inclusive else [0, 1])
    assert h.stats.served[1, 0, LOAD, 3] == ways + 1  # every load of core 1 from memory


@pytest.mark.parametrize("policy", ["lru", "fifo", "random"])
@pytest.mark.parametrize("inclusive", [False, True])
@pytest.mark.parametrize("coherence", [False, True])
@pytest.mark.parametrize("ways", [(2, 4), (4, 4)] + [(w, w) for w in WAYS if w != 4])
def test_hierarchy_random_streams(policy, inclusive, coherence, ways):
    rng = np.random.default_rng(11)
    l1_ways, lower_ways = ways
    cfg = small_hier(policy, cores=2, inclusive=inclusive, coherence=coherence, seed=3,
                     l1_ways=l1_ways, lower_ways=lower_ways)
    streams = []
    for epoch in range(6):
        core = epoch % 2
        # 5 times the lines the L3 holds (8 sets): evictions at every level, yet lines shared
        addr, kind = local_stream(rng, 1500, lines=40 * lower_ways)
        cls = rng.integers(0, 3, len(addr)).astype(np.uint8)
        streams.append((core, addr, kind, cls))
    h = compare_hierarchy(cfg, streams, classes=3)
    ev = h.stats.events.sum(axis=0)
    # the streams are built to exercise every path of the configuration
    assert ev[EVENT_NAMES.index("wb_l1d")] > 0 and ev[EVENT_NAMES.index("wb_l2")] > 0
    if inclusive:
        assert ev[EVENT_NAMES.index("back_invalidations")] > 0
    if not inclusive:
        assert ev[EVENT_NAMES.index("l3_misses_held_elsewhere")] > 0
    if coherence:
        assert ev[EVENT_NAMES.index("coherence_invalidations")] > 0
        assert ev[EVENT_NAMES.index("coherence_writebacks")] > 0
    else:
        assert ev[EVENT_NAMES.index("coherence_invalidations")] == 0


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 2)),
                max_size=150),
       st.booleans(), st.booleans(), st.sampled_from(WAYS), st.sampled_from(WAYS),
       st.sampled_from(["lru", "fifo", "random"]))
@settings(max_examples=100, deadline=None)
def test_hierarchy_hypothesis(ops, inclusive, coherence, l1_ways, lower_ways, policy):
    cfg = small_hier(policy, cores=2, inclusive=inclusive, coherence=coherence, l1_ways=l1_ways,
                     lower_ways=lower_ways)
    h = Hierarchy(cfg)
    twin = SlowHierarchy(cfg, 2)
    for core, line, kind in ops:
        a = np.array([line * LINE], dtype=np.uint64)
        k = np.array([kind], dtype=np.uint8)
        assert h.run(core, a, k).tolist() == twin.run(core, a, k, [0])
    assert h.stats.events.tolist() == twin.events


@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("l1_ways", [1, 2, 3, 4, 5, 8, 12, 16])
@pytest.mark.parametrize("lower_ways", [1, 4, 20])
def test_levelwise_matches_access_by_access(policy, l1_ways, lower_ways):
    """The level-at-a-time kernel leaves every array as the access-at-a-time kernel does
    (stamps in the same order within each set), over streams longer than its block."""
    from pysched.models.caches.levelwise import BLOCK
    rng = np.random.default_rng(l1_ways * 100 + lower_ways)
    cfg = small_hier(policy, cores=2, l1_ways=l1_ways, lower_ways=lower_ways)
    fast, slow = Hierarchy(cfg, classes=3), Hierarchy(cfg, classes=3)
    assert fast._levelwise
    slow._levelwise = False
    for epoch in range(6):
        # more lines than the L3 holds: misses and dirty evictions at every level; epochs 2
        # and 3 fetch only (the kernel's loop for fetch streams); epochs 3 and 4 have one class
        # and kind (counted at the end of the run)
        addr, kind = local_stream(rng, BLOCK + 2500, lines=40 * lower_ways)
        cls = rng.integers(0, 3, len(addr)).astype(np.uint8)
        if epoch in (2, 3):
            kind[:] = IFETCH
        if epoch == 4:
            kind[:] = STORE
        if epoch in (3, 4):
            cls[:] = epoch - 2
        assert fast.run(epoch % 2, addr, kind, cls).tolist() == \
            slow.run(epoch % 2, addr, kind, cls).tolist()
        assert fast.stats.served.tolist() == slow.stats.served.tolist()
        assert fast.tags.tolist() == slow.tags.tolist()        # the same ways filled
        # cold starts: one core's caches, then all
        if epoch in (1, 4):
            for h in (fast, slow):
                h.flush(1 if epoch == 1 else None)
    assert fast.stats.served.tolist() == slow.stats.served.tolist()
    assert fast.stats.events.tolist() == slow.stats.events.tolist()
    # dirty evictions from the L1d, L2 and L3 all happened
    assert (fast.stats.events[:, :3].sum(axis=0) > 0).all()
    assert fast.tags.tolist() == slow.tags.tolist()
    assert fast.dirty.tolist() == slow.dirty.tolist()
    # the order of every set, oldest way first: from stamps, or the level-at-a-time L1s' ranks
    # (highest first)
    def order(h, p, c):
        ways = cfg.levels[p].ways
        if h._levelwise and p < 2:
            lo = h._roff[p * cfg.cores + c]
            r = h._rank[lo:lo + cfg.levels[p].sets * ranks.STRIDE].reshape(-1, ranks.STRIDE)
            return np.argsort(-r[:, :ways].astype(int), axis=1, kind="stable").tolist()
        return np.argsort(h._stamp[h._slice(p, c)].reshape(-1, ways), axis=1,
                          kind="stable").tolist()
    for p in range(4):
        for c in range(cfg.cores if p < 3 else 1):
            assert order(fast, p, c) == order(slow, p, c)


@pytest.mark.parametrize("l1_ways, lower_ways", [(1, 4), (2, 4), (4, 4), (8, 20)])
def test_held_elsewhere_from_the_mirror_with_many_cores(l1_ways, lower_ways):
    """The level-at-a-time kernel reads whether another core holds an L3 miss's line from its
    fingerprint mirror; the access-at-a-time kernel looks in each core's caches. Five cores
    in random order, with flushes of one core and of all: the same counts, and the mirror
    holds every private way's fingerprint (0 where the way is empty)."""
    from pysched.models.caches.levelwise import _print
    rng = np.random.default_rng(l1_ways * 10 + lower_ways)
    cores = 5
    cfg = small_hier("lru", cores=cores, l1_ways=l1_ways, lower_ways=lower_ways)
    fast, slow = Hierarchy(cfg), Hierarchy(cfg)
    assert fast._levelwise
    slow._levelwise = False
    for epoch in range(12):
        core = int(rng.integers(0, cores))
        addr, kind = local_stream(rng, 3000, lines=40 * lower_ways)
        assert fast.run(core, addr, kind).tolist() == slow.run(core, addr, kind).tolist()
        if epoch in (5, 9):
            for h in (fast, slow):
                h.flush(2 if epoch == 5 else None)
    held = EVENT_NAMES.index("l3_misses_held_elsewhere")
    assert fast.stats.events.tolist() == slow.stats.events.tolist()
    assert fast.stats.events[:, held].sum() > 0
    for p in range(3):
        lv = cfg.levels[p]
        lo = fast._fo[p]
        mirror = fast._fpr[lo:lo + lv.sets * cores * lv.ways].reshape(lv.sets, cores, lv.ways)
        for c in range(cores):
            tags = fast.tags[fast._slice(p, c)].reshape(lv.sets, lv.ways)
            want = [[_print(int(t)) if t >= 0 else 0 for t in row] for row in tags]
            assert mirror[:, c].tolist() == want


@pytest.mark.parametrize("cores, pool", [(12, (0, 1, 2, 3, 4, 5)), (70, (0, 3, 64, 67, 69))])
def test_held_elsewhere_through_the_touch_filter(cores, pool):
    """The filter in front of the mirror (levelwise._held_among) skips cores, never answers:
    each core of ``pool`` runs its own region's lines and a few of a shared region, so that
    words hold no other core, a few (compared core by core) or many (the mirror's rows); with
    70 cores, cores 0 and 64 (3 and 67) share a bit. The counts equal the access-at-a-time
    kernel's, and every line a core's private caches hold has the core's bit in its word."""
    from pysched.models.caches.levelwise import FILTER_ABOVE, REGION_SHIFT, _region
    assert cores > FILTER_ABOVE       # the filter is kept
    rng = np.random.default_rng(cores)
    cfg = small_hier("lru", cores=cores, l1_ways=2, lower_ways=4)
    fast, slow = Hierarchy(cfg), Hierarchy(cfg)
    assert fast._levelwise
    slow._levelwise = False
    for epoch in range(16):
        core = pool[int(rng.integers(0, len(pool)))]
        addr, kind = local_stream(rng, 2000, lines=48)
        own = rng.random(addr.size) < 0.8
        # the own region of core % 8: regions of different cores may share words (the hash)
        addr[own] += np.uint64(((core % 8) + 1) << REGION_SHIFT) * np.uint64(LINE)
        assert fast.run(core, addr, kind).tolist() == slow.run(core, addr, kind).tolist()
        if epoch == 11:
            for h in (fast, slow):
                h.flush(pool[1])
    held = EVENT_NAMES.index("l3_misses_held_elsewhere")
    assert fast.stats.events.tolist() == slow.stats.events.tolist()
    assert fast.stats.events[:, held].sum() > 0
    for c in range(cores):
        for p in range(3):
            for t in fast.tags[fast._slice(p, c)]:
                if t >= 0:
                    assert int(fast._touch[_region(int(t))]) >> (c % 64) & 1


def sharers_cover_holders(h):
    """Every line a core's private caches hold that has an entry in the sharers table has the
    core's bit in it; returns how many entries the table holds."""
    from pysched.models.caches.sharers import _slot
    tab = h._sharers
    for c in range(h.cores):
        for name in ("l1i", "l1d", "l2"):
            for t in h.lines(name, c).tolist():
                s = int(_slot(tab, t))
                if int(tab[s]) == t + 1:
                    assert int(tab[s + 1]) >> (c % 64) & 1, (name, c, t)
    return int((tab[0::2] != 0).sum())


@pytest.mark.parametrize("cores, pool", [(12, (0, 1, 2, 3, 4, 5, 11)), (64, (0, 5, 33, 63)),
                                         (70, (0, 3, 64, 67, 69))])
@pytest.mark.parametrize("inclusive, coherence, policy", [
    (True, False, "lru"), (False, True, "lru"), (True, True, "lru"),
    (False, False, "random")])     # random replacement: the same kernel, held elsewhere only
def test_sharers_table_against_the_twin(cores, pool, inclusive, coherence, policy):
    """The access-at-a-time kernel looks for other cores' copies of a line (held elsewhere,
    coherence, back-invalidation) only in the cores the sharers table names; the twin looks in
    every core. Each core of ``pool`` runs lines of its own and of a shared range, loads and
    stores: the same results, and the table covers every private copy it has an entry for
    (with 70 cores it keeps none: every core is looked in)."""
    rng = np.random.default_rng(cores)
    cfg = small_hier(policy, cores=cores, inclusive=inclusive, coherence=coherence)
    streams = []
    for _ in range(14):
        core = pool[int(rng.integers(0, len(pool)))]
        addr, kind = local_stream(rng, 900, lines=48)
        own = rng.random(addr.size) < 0.6
        addr[own] += np.uint64((core + 1) * 64 * LINE)
        streams.append((core, addr, kind, np.zeros(addr.size, np.uint8)))
    h = compare_hierarchy(cfg, streams)
    assert not h._levelwise
    ev = h.stats.events.sum(axis=0)
    if inclusive:
        assert ev[EVENT_NAMES.index("back_invalidations")] > 0
    else:
        assert ev[EVENT_NAMES.index("l3_misses_held_elsewhere")] > 0
    if coherence:
        assert ev[EVENT_NAMES.index("coherence_invalidations")] > 0
        assert ev[EVENT_NAMES.index("coherence_writebacks")] > 0
    assert (sharers_cover_holders(h) > 0) is (cores <= 64)


@pytest.mark.parametrize("inclusive", [False, True])
def test_sharers_table_through_flushes(inclusive):
    """A flush of one core leaves bits of copies it no longer holds (cleared when a question
    finds them stale), a flush of all empties the table: a hierarchy with the table and one
    without (every core looked in) give the same results throughout."""
    rng = np.random.default_rng(5)
    cores = 9
    cfg = small_hier("lru", cores=cores, inclusive=inclusive, coherence=True)
    fast, slow = Hierarchy(cfg), Hierarchy(cfg)
    slow._sharers = np.zeros(2, np.uint64)
    slow._pack()
    for epoch in range(20):
        core = int(rng.integers(0, cores))
        addr, kind = local_stream(rng, 700, lines=64)
        own = rng.random(addr.size) < 0.5
        addr[own] += np.uint64((core % 3 + 1) * 64 * LINE)
        assert fast.run(core, addr, kind).tolist() == slow.run(core, addr, kind).tolist()
        assert sharers_cover_holders(fast) > 0
        if epoch in (6, 9, 13):
            for h in (fast, slow):
                h.flush(core if epoch != 9 else None)
            if epoch == 9:
                assert sharers_cover_holders(fast) == 0
    assert fast.stats.events.tolist() == slow.stats.events.tolist()
    assert fast.stats.served.tolist() == slow.stats.served.tolist()
    assert fast.tags.tolist() == slow.tags.tolist()
    assert fast.dirty.tolist() == slow.dirty.tolist()


def test_a_stale_bit_is_cleared_when_a_look_finds_no_copy():
    """Core 1 misses line 10 in the L3: the look in every core makes its entry (core 1 alone).
    Core 1's caches are flushed (its bit stays), the L3 evicts the line, and core 0's miss of
    it looks in core 1, finds no copy and clears the bit: core 0 alone."""
    from pysched.models.caches.sharers import _slot
    h = Hierarchy(small_hier("lru", cores=9, coherence=True))
    tab = h._sharers

    def entry(line):
        s = int(_slot(tab, line))
        return int(tab[s + 1]) if int(tab[s]) == line + 1 else None

    def load(core, *lines):
        h.run(core, np.array([x * LINE for x in lines], np.uint64),
              np.full(len(lines), LOAD, np.uint8))

    # lines of line 10's L3 set (8 sets) whose entries do not share its slot
    fill = [x for x in range(18, 400, 8) if int(_slot(tab, x)) != int(_slot(tab, 10))][:4]
    load(1, 10)
    assert entry(10) == 1 << 1
    h.flush(1)
    load(0, *fill)
    assert 10 not in h.lines("l3").tolist() and entry(10) == 1 << 1
    load(0, 10)
    assert entry(10) == 1 << 0
    assert h.stats.event("l3_misses_held_elsewhere") == 0


def test_the_sharers_table_is_kept_from_9_to_64_cores_and_sized_by_the_private_caches():
    """A 1 GiB L3 (16 M lines) sizes the table as an L3 no larger than the private caches
    would: not larger than the L3's own tags."""
    from pysched.models.caches import sharers
    private = 32 * 5120
    big = sharers.table(32, private, 1 << 24)
    assert big.size == sharers.table(32, private, private).size == 2 * (1 << 20)
    assert [sharers.table(c, 100, 100).size for c in (1, 8, 9, 64, 65)] == [2, 2, 1024, 1024, 2]


def test_next_core_matches_a_scan():
    """sharers._next_core against a loop over every core, words of few and many bits, core
    counts around 64 and above."""
    from pysched.models.caches.sharers import _next_core
    rng = np.random.default_rng(9)
    for cores in (1, 2, 7, 63, 64, 65, 128, 130, 200):
        for _ in range(20):
            bits = rng.random(64) < rng.choice([0.02, 0.2, 0.9])
            word = sum(1 << int(b) for b in np.flatnonzero(bits))
            for o in range(-1, cores):
                want = next((x for x in range(o + 1, cores) if word >> (x % 64) & 1), cores)
                assert _next_core(np.uint64(word), o, cores) == want, (cores, word, o)


@pytest.mark.parametrize("change, levelwise", [
    ({}, True), ({"inclusive": True}, False), ({"coherence": True}, False),
    ({"l3": CacheConfig(8 * 4 * LINE, 4, LINE, 18, "random")}, False),
    ({"l1d": CacheConfig(2 * 20 * LINE, 20, LINE, 3)}, False)])
def test_levelwise_only_where_levels_are_independent(change, levelwise):
    from dataclasses import replace
    assert Hierarchy(replace(small_hier(), **change))._levelwise is levelwise


def test_inclusion_holds():
    rng = np.random.default_rng(2)
    cfg = small_hier(cores=2, inclusive=True, coherence=True)
    h = Hierarchy(cfg)
    for epoch in range(8):
        addr, kind = local_stream(rng, 800, lines=300)
        h.run(epoch % 2, addr, kind)
        l3 = set(h.lines("l3").tolist())
        for c in range(2):
            l2 = set(h.lines("l2", c).tolist())
            assert set(h.lines("l1i", c).tolist()) <= l2
            assert set(h.lines("l1d", c).tolist()) <= l2
            assert l2 <= l3


def test_coherence_invalidates_other_core():
    cfg = small_hier(cores=2, coherence=True)
    h = Hierarchy(cfg)
    a = np.array([640], dtype=np.uint64)
    h.run(1, a, np.array([LOAD], np.uint8))
    assert h.lines("l1d", 1).tolist() == [10]
    h.run(0, a, np.array([STORE], np.uint8))
    assert h.lines("l1d", 1).tolist() == [] and h.lines("l2", 1).tolist() == []
    # core 1 reads it again: a private miss that cleans core 0's dirty copy (to the L3)
    assert h.run(1, a, np.array([LOAD], np.uint8)).tolist() == [2]
    assert h.stats.event("coherence_writebacks") == 1
    assert h.stats.event("coherence_invalidations") == 2  # core 1's L1d and L2


def test_state_persists_and_migration_finds_caches_as_they_are():
    cfg = small_hier(cores=2)
    h = Hierarchy(cfg)
    addr = np.arange(4, dtype=np.uint64) * LINE
    kind = np.full(4, LOAD, np.uint8)
    assert h.run(0, addr, kind).tolist() == [3, 3, 3, 3]
    assert h.run(0, addr, kind).tolist() == [0, 0, 0, 0]     # warm on core 0
    assert h.run(1, addr, kind).tolist() == [2, 2, 2, 2]     # core 1: cold privates, L3 hits
    h.flush(1)
    assert h.run(1, addr, kind).tolist() == [2, 2, 2, 2]
    h.flush()
    assert h.run(0, addr, kind).tolist() == [3, 3, 3, 3]


# --- analytic cases -----------------------------------------------------------------------

def test_loop_that_fits_has_compulsory_misses_only():
    cfg = CacheConfig(32 * 1024, 4, LINE, 3)
    lines = 32 * 1024 // LINE
    addr = np.tile(np.arange(lines, dtype=np.uint64) * LINE, 10)
    c = Cache(cfg)
    c.run(addr)
    assert c.stats.misses() == lines
    assert c.stats.hits() == 9 * lines


def test_one_line_more_than_a_set_always_misses():
    cfg = CacheConfig(32 * 1024, 4, LINE, 3)
    stride = cfg.sets * LINE                      # every address maps to set 0
    addr = np.tile(np.arange(cfg.ways + 1, dtype=np.uint64) * stride, 50)
    for policy in ("lru", "fifo"):
        c = Cache(CacheConfig(32 * 1024, 4, LINE, 3, policy))
        assert c.run(addr).sum() == 0
    h = Hierarchy(HierarchyConfig())
    # an L2/L3 set absorbs the 5 lines: after the first round every load is served by L2
    served = h.run(0, addr, np.full(len(addr), LOAD, np.uint8))
    assert (served[5:] == 1).all()


def test_copies_count_into_their_own_statistics():
    import copy
    import pickle
    rng = np.random.default_rng(3)
    addr, kind = local_stream(rng, 3000)
    h = Hierarchy(small_hier())
    h.run(0, addr[:1000], kind[:1000])
    for other in (copy.deepcopy(h), pickle.loads(pickle.dumps(h))):
        got = other.run(0, addr[1000:], kind[1000:])
        assert other.stats.served.sum() == len(addr) and h.stats.served.sum() == 1000
        # the copy went on from the same contents
        ref = copy.deepcopy(h)
        assert ref.run(0, addr[1000:], kind[1000:]).tolist() == got.tolist()
    c = Cache(CacheConfig(1024, 2, LINE))
    c.run(addr[:1000])
    for other in (copy.deepcopy(c), pickle.loads(pickle.dumps(c))):
        other.run(addr[1000:])
        assert other.stats.accesses() == len(addr) and c.stats.accesses() == 1000


def test_table2_defaults():
    cfg = HierarchyConfig()
    assert (cfg.l1i.size, cfg.l1i.ways, cfg.l1i.latency) == (32768, 4, 3)
    assert (cfg.l1d.size, cfg.l1d.ways, cfg.l1d.latency) == (32768, 4, 3)
    assert (cfg.l2.size, cfg.l2.ways, cfg.l2.latency) == (262144, 4, 8)
    assert (cfg.l3.size, cfg.l3.ways, cfg.l3.latency) == (8 << 20, 8, 18)
    assert cfg.memory_latency == 200


# --- statistics records -------------------------------------------------------------------

def test_stats_subtract_to_epoch_deltas():
    rng = np.random.default_rng(3)
    cfg = small_hier(cores=2)
    h = Hierarchy(cfg, classes=3)
    epochs = [(e % 2, *local_stream(rng, 500, lines=120), rng.integers(0, 3, 500))
              for e in range(4)]
    snaps = [h.stats]
    for core, addr, kind, cls in epochs:
        h.run(core, addr, kind, cls)
        snaps.append(h.stats)
    total = CacheStats.zeros(2, 3)
    for e, (core, addr, kind, cls) in enumerate(epochs):
        delta = snaps[e + 1] - snaps[e]
        assert delta.served.sum() == len(addr)
        assert delta.served[1 - core].sum() == 0
        for k in range(3):
            assert delta.served[core, :, k].sum() == (kind == k).sum()
        total = total + delta
    assert total == snaps[-1]
    grouped = snaps[-1].group_classes([[0], [1, 2]])
    assert grouped.served.shape[1] == 2
    assert grouped.served.sum() == snaps[-1].served.sum()
    s = snaps[-1]
    assert s.hits(0, (IFETCH,)) + s.misses(0, (IFETCH,)) == s.accesses(0, (IFETCH,))
    assert 0 <= s.icache_hit_rate(cls=[1, 2]) <= 1


# --- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,word", [
    ({"size": 3000}, "size"),
    ({"line": 48}, "line"),
    ({"size": 3 * 4 * 64 * 16}, "power of two"),
    ({"ways": 0}, "ways"),
    ({"latency": -1}, "latency"),
    ({"policy": "plru"}, "policy"),
    ({"size": -64}, "size"),
])
def test_bad_geometry_names_the_parameter(kwargs, word):
    with pytest.raises(ConfigError, match=word):
        CacheConfig(**kwargs)


def test_bad_hierarchy_names_the_parameter():
    with pytest.raises(ConfigError, match="memory_latency"):
        HierarchyConfig(memory_latency=-5)
    with pytest.raises(ConfigError, match="l2.line"):
        HierarchyConfig(l2=CacheConfig(262144, 4, 128, 8))
    with pytest.raises(ConfigError, match="cores"):
        HierarchyConfig(cores=0)


def test_bad_run_arguments():
    h = Hierarchy(small_hier(cores=2), classes=2)
    a = np.zeros(3, dtype=np.uint64)
    with pytest.raises(ValueError, match="core"):
        h.run(2, a, np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="kind"):
        h.run(0, a, np.array([0, 1, 3]))
    with pytest.raises(ValueError, match="kind has 2"):
        h.run(0, a, np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="cls"):
        h.run(0, a, np.zeros(3, np.uint8), np.array([0, 2, 0]))
    with pytest.raises(ValueError, match="addr"):
        h.run(0, np.array([-1, 0, 0]), np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="kind is required"):
        h.run(0, a, None)
    with pytest.raises(TypeError, match="addr"):
        Cache(CacheConfig()).run(np.array([0.5]))
