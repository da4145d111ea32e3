"""numba kernels of the cache models (nopython; arrays and scalars only).

Cache state is two flat arrays over every way of every cache instance: ``tags`` (int64 line
number, -1 when invalid) and ``dirty`` (uint8). A cache instance starts at ``off[inst]``; set
``s`` of it at ``off[inst] + s * ways``. Within a set the ways are kept in the replacement
policy's order (see :mod:`.policies.lru`), invalid ways last. The public classes :class:`~pysched.models.caches.cache.Cache` and
:class:`~pysched.models.caches.hierarchy.Hierarchy` validate all arguments; these kernels do
not check bounds.

Write policy: write-back, write-allocate. A store that misses fetches the line like a load
and marks it dirty. A dirty line evicted from a level is written to the next level: there a hit
marks the line dirty without changing its replacement state (a write-back is not a use, as in
ChampSim's LRU), a miss allocates the line dirty without fetching it (the whole line is
written). Memory absorbs write-backs from the last level.
"""
from __future__ import annotations

import numba
import numpy as np

from . import policies
from ..codes import (EV_BACKINV, EV_COH_INV, EV_COH_WB, EV_WB_L1D, EV_WB_L2, EV_WB_L3,
                     EV_WBMISS_L2, EV_WBMISS_L3, IFETCH, STORE)

# Rows of the hierarchy geometry table ``geo[level]`` = (set mask, ways, policy).
G_MASK, G_WAYS, G_POLICY = 0, 1, 2


# --- one cache level ----------------------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _find(tags: np.ndarray, base: int, ways: int, line: int) -> int:
    """Flat index of ``line`` in the set starting at ``base``, or -1."""
    for i in range(base, base + ways):
        if tags[i] == line:
            return i
    return -1


@numba.njit(cache=True, inline="always")
def _invalidate(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int) -> int:
    """Remove ``line`` from a set, keeping invalid ways last: -1 when absent, else its dirty
    bit."""
    i = _find(tags, base, ways, line)
    if i < 0:
        return -1
    d = int(dirty[i])
    last = base + ways - 1
    for j in range(i, last):
        tags[j] = tags[j + 1]
        dirty[j] = dirty[j + 1]
    tags[last] = -1
    dirty[last] = 0
    return d


@numba.njit(cache=True, inline="always")
def _put_dirty(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, policy: int, line: int,
               rng: np.ndarray) -> tuple[int, int, int]:
    """A dirty line written back from the level above arrives at the set at ``base``.

    A hit only sets the dirty bit (a write-back is not a use): ``(1, -1, 0)``. A miss allocates
    the line dirty without fetching it: ``(0, victim, victim_dirty)``.
    """
    i = _find(tags, base, ways, line)
    if i >= 0:
        dirty[i] = 1
        return 1, -1, 0
    v, vd = policies.fill(policy, tags, dirty, base, ways, line, 1, rng)
    return 0, v, vd


@numba.njit(cache=True, inline="always")
def _access_past_front(tags: np.ndarray, dirty: np.ndarray, rng: np.ndarray, base: int,
                       ways: int, policy: int, line: int,
                       st: int) -> tuple[int, int, int, int]:
    """A demand access to a set whose front way does not hold ``line``: look it up, then
    apply the policy's hit or fill. Returns ``(hit, old_dirty, victim, victim_dirty)`` as
    :func:`.policies.lru.access4`, which serves 4-way LRU sets (Table 2's L1s)."""
    if policy == policies.LRU and ways == 4:
        return policies.lru.access4(tags, dirty, base, line, st)
    i = _find(tags, base + 1, ways - 1, line)
    if i >= 0:
        old = int(dirty[i])
        if st:
            dirty[i] = 1
        policies.on_hit(policy, tags, dirty, base, i)
        return 1, old, -1, 0
    v, vd = policies.fill(policy, tags, dirty, base, ways, line, st, rng)
    return 0, 0, v, vd


# --- a single cache over a stream ---------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _run_cache(tags: np.ndarray, dirty: np.ndarray, rng: np.ndarray, mask: int, ways: int,
               shift: int, policy: int, addr: np.ndarray, store: np.ndarray, cls: np.ndarray,
               hit_out: np.ndarray, counts: np.ndarray, events: np.ndarray) -> None:
    """One set-associative write-back, write-allocate cache over ``addr``.

    ``hit_out[n]`` gets 1 for a hit; ``counts[cls, store, hit]`` and ``events[0]`` (dirty
    evictions) are incremented.
    """
    writebacks = 0
    for n in range(addr.shape[0]):
        line = np.int64(addr[n] >> np.uint64(shift))
        base = (line & mask) * ways
        st = store[n]
        # This front-way test is spelled out again in _run_hierarchy on purpose: one inlined
        # helper for both (returning the dirty bit or -1) made both kernels 5-7x slower.
        if tags[base] == line:
            # Hit in the first way: no policy moves anything. With LRU this is the most
            # recently used line, the common case; keeping it free of loops keeps it fast.
            if st:
                dirty[base] = 1
            hit = 1
        else:
            hit, _, v, vd = _access_past_front(tags, dirty, rng, base, ways, policy, line, st)
            writebacks += (v >= 0) & (vd != 0)
        hit_out[n] = hit
        counts[cls[n], st, hit] += 1
    events[0] += writebacks


# --- the hierarchy ------------------------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _base(off: np.ndarray, geo: np.ndarray, cores: int, level: int, core: int,
          line: int) -> int:
    inst = level * cores + core if level < 3 else 3 * cores
    return off[inst] + (line & geo[level, G_MASK]) * geo[level, G_WAYS]


@numba.njit(cache=True)
def _drop_private(tags, dirty, off, geo, cores, core, levels, line) -> tuple[int, int]:
    """Invalidate ``line`` in the first ``levels`` private levels of ``core`` (0 L1i, 1 L1d,
    2 L2): return how many copies were removed and how many of them were dirty."""
    found = 0
    dirty_copies = 0
    for p in range(levels):
        r = _invalidate(tags, dirty, _base(off, geo, cores, p, core, line), geo[p, G_WAYS],
                        line)
        if r >= 0:
            found += 1
            dirty_copies += r
    return found, dirty_copies


@numba.njit(cache=True)
def _l3_evicted(tags, dirty, off, geo, cores, inclusive, c, victim, victim_dirty, events):
    """Consequences of the L3 evicting ``victim``: back-invalidation and the memory write."""
    if victim < 0:
        return
    d = victim_dirty
    if inclusive:
        for o in range(cores):
            found, dc = _drop_private(tags, dirty, off, geo, cores, o, 3, victim)
            events[c, EV_BACKINV] += found
            d |= dc
    if d:
        events[c, EV_WB_L3] += 1


@numba.njit(cache=True, inline="always")
def _l3_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, line, events):
    """A dirty ``line`` arrives at the L3."""
    hit, v, vd = _put_dirty(tags, dirty, _base(off, geo, cores, 3, c, line), geo[3, G_WAYS],
                            geo[3, G_POLICY], line, rng)
    if not hit:
        events[c, EV_WBMISS_L3] += 1
        if v >= 0 and (vd or inclusive):
            _l3_evicted(tags, dirty, off, geo, cores, inclusive, c, v, vd, events)


@numba.njit(cache=True)
def _l2_evicted(tags, dirty, off, geo, cores, inclusive, rng, c, victim,
                victim_dirty, events):
    """Consequences of core ``c``'s L2 evicting ``victim``."""
    if victim < 0:
        return
    d = victim_dirty
    if inclusive:
        found, dc = _drop_private(tags, dirty, off, geo, cores, c, 2, victim)
        events[c, EV_BACKINV] += found
        d |= dc
    if d:
        events[c, EV_WB_L2] += 1
        _l3_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, victim,
                      events)


@numba.njit(cache=True, inline="always")
def _l2_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, line, events):
    """A dirty ``line`` evicted from core ``c``'s L1d arrives at its L2."""
    # Same shape as _l3_writeback, kept apart: one function for both levels would call itself
    # (L2 write-back -> L2 eviction -> L3 write-back), which numba compiles only with
    # explicit signatures.
    hit, v, vd = _put_dirty(tags, dirty, _base(off, geo, cores, 2, c, line), geo[2, G_WAYS],
                            geo[2, G_POLICY], line, rng)
    if not hit:
        events[c, EV_WBMISS_L2] += 1
        if v >= 0 and (vd or inclusive):
            _l2_evicted(tags, dirty, off, geo, cores, inclusive, rng, c, v, vd, events)


@numba.njit(cache=True)
def _clean_remote(tags, dirty, off, geo, cores, inclusive, rng, c, line, events):
    """Coherence on a private miss: other cores' dirty copies are written back to the L3
    and kept clean (M -> S)."""
    for o in range(cores):
        if o == c:
            continue
        for p in (1, 2):
            i = _find(tags, _base(off, geo, cores, p, o, line), geo[p, G_WAYS], line)
            if i >= 0 and dirty[i]:
                dirty[i] = 0
                events[c, EV_COH_WB] += 1
                _l3_writeback(tags, dirty, off, geo, cores, inclusive, rng, c,
                              line, events)


@numba.njit(cache=True)
def _invalidate_remote(tags, dirty, off, geo, cores, inclusive, rng, c, line,
                       events):
    """Coherence on a store: other cores' copies are invalidated (S -> I, M -> I with a
    write-back to the L3 per dirty copy)."""
    for o in range(cores):
        if o == c:
            continue
        found, dc = _drop_private(tags, dirty, off, geo, cores, o, 3, line)
        events[c, EV_COH_INV] += found
        events[c, EV_COH_WB] += dc
        for _ in range(dc):
            _l3_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, line, events)


@numba.njit(cache=True, inline="always")
def _below_l1(tags, dirty, off, geo, cores, inclusive, coherence, rng, c, line, st, events):
    """An L1 miss of core ``c``: look up the L2 and L3 and fill them on the way back (the L1
    itself is filled by the caller); return the level that served it."""
    b2 = _base(off, geo, cores, 2, c, line)
    w2 = geo[2, G_WAYS]
    j = _find(tags, b2, w2, line)
    if j >= 0:
        policies.on_hit(geo[2, G_POLICY], tags, dirty, b2, j)
        return 1
    b3 = _base(off, geo, cores, 3, c, line)
    w3 = geo[3, G_WAYS]
    j3 = _find(tags, b3, w3, line)
    if j3 >= 0:
        policies.on_hit(geo[3, G_POLICY], tags, dirty, b3, j3)
        s = 2
    else:
        s = 3
        v, vd = policies.fill(geo[3, G_POLICY], tags, dirty, b3, w3, line, 0, rng)
        # (calls only when there is something to do: a numba call measured ~100 ns here)
        if v >= 0 and (vd or inclusive):
            _l3_evicted(tags, dirty, off, geo, cores, inclusive, c, v, vd, events)
    if coherence and not st:
        _clean_remote(tags, dirty, off, geo, cores, inclusive, rng, c, line, events)
    v, vd = policies.fill(geo[2, G_POLICY], tags, dirty, b2, w2, line, 0, rng)
    if v >= 0 and (vd or inclusive):
        _l2_evicted(tags, dirty, off, geo, cores, inclusive, rng, c, v, vd, events)
    return s


@numba.njit(cache=True, inline="always")
def _l1d_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, victim, events):
    """Core ``c``'s L1d evicted the dirty line ``victim``: it goes to the L2."""
    events[c, EV_WB_L1D] += 1
    _l2_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, victim, events)


@numba.njit(cache=True, nogil=True)
def _run_hierarchy(tags: np.ndarray, dirty: np.ndarray, off: np.ndarray, geo: np.ndarray,
                   cores: int, inclusive: bool, coherence: bool, rng: np.ndarray, shift: int,
                   core: int, addr: np.ndarray, kind: np.ndarray, cls: np.ndarray,
                   served_out: np.ndarray, served: np.ndarray, events: np.ndarray) -> None:
    """Run core ``core``'s accesses through its L1i/L1d and L2 and the shared L3.

    ``served_out[n]`` gets the level that served access ``n`` (0 L1 .. 3 memory);
    ``served[core, cls, kind, level]`` and ``events[core, e]`` are incremented.
    """
    c = core
    # The L1 hit path is most accesses: keep its geometry in locals.
    o1 = (off[c], off[cores + c])
    m1 = (geo[0, G_MASK], geo[1, G_MASK])
    w1s = (geo[0, G_WAYS], geo[1, G_WAYS])
    pol1 = (geo[0, G_POLICY], geo[1, G_POLICY])
    # Whether an L1 may be filled before the levels below are looked up, which is faster (one
    # pass over the set, see _access_past_front). Not when an inclusive L2 may back-invalidate
    # lines of that very set meanwhile, nor under random replacement (the levels share one
    # generator, whose draws must come in the order L3, L2, L1).
    early = (not inclusive and pol1[0] != policies.RANDOM,
             not inclusive and pol1[1] != policies.RANDOM)
    for n in range(addr.shape[0]):
        line = np.int64(addr[n] >> np.uint64(shift))
        k = np.int64(kind[n])
        st = 1 if k == STORE else 0
        p1 = 0 if k == IFETCH else 1
        w1 = w1s[p1]
        b1 = o1[p1] + (line & m1[p1]) * w1
        was_dirty = 0
        if tags[b1] == line:
            # First-way hit (the MRU line under LRU): the common case, kept free of loops.
            if st:
                was_dirty = int(dirty[b1])
                dirty[b1] = 1
            s = 0
        elif early[p1]:
            hit, was_dirty, v, vd = _access_past_front(tags, dirty, rng, b1, w1, pol1[p1],
                                                       line, st)
            s = 0
            if not hit:
                s = _below_l1(tags, dirty, off, geo, cores, inclusive, coherence, rng, c, line,
                              st, events)
                # only a dirty victim goes to the L2 (most are clean)
                if v >= 0 and vd:
                    _l1d_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, v, events)
        else:
            i = _find(tags, b1 + 1, w1 - 1, line)
            if i >= 0:
                if st:
                    was_dirty = int(dirty[i])
                    dirty[i] = 1
                policies.on_hit(pol1[p1], tags, dirty, b1, i)
                s = 0
            else:
                s = _below_l1(tags, dirty, off, geo, cores, inclusive, coherence, rng, c, line,
                              st, events)
                v, vd = policies.fill(pol1[p1], tags, dirty, b1, w1, line, st, rng)
                if v >= 0 and vd:
                    _l1d_writeback(tags, dirty, off, geo, cores, inclusive, rng, c, v, events)
        if st and coherence and not was_dirty:
            _invalidate_remote(tags, dirty, off, geo, cores, inclusive, rng, c, line, events)
        served_out[n] = s
        served[c, cls[n], k, s] += 1
