"""numba kernels of the cache models (nopython; arrays and scalars only).

Cache state is three flat arrays over every way of every cache instance: ``tags`` (int64 line
number, -1 when invalid), ``dirty`` (uint8) and ``stamp`` (int64, the replacement state of LRU
and FIFO, see :mod:`.policies.lru`), plus ``clk``, a one-element int64 clock that stamps come
from. A cache instance starts at ``off[inst]``; set ``s`` of it at ``off[inst] + s * ways``.
LRU and FIFO leave ways where they were filled and order them by stamp (the single cache of 2
to 16 ways, and the L1s run level at a time, by rank instead, see :mod:`.ranks`; a
direct-mapped cache there keeps no order); random replacement keeps each set in fill order
(see :mod:`.policies.random_policy`). A set's tags are matched
and its smallest stamp found with vector operations (:mod:`.simd`): ``tags`` and ``stamp`` hold
:data:`.simd.PAD` spare elements after the last set. The public classes
:class:`~pysched.models.caches.cache.Cache` and :class:`~pysched.models.caches.hierarchy.Hierarchy`
validate all arguments; these kernels do not check bounds.

Write policy: write-back, write-allocate. A store that misses fetches the line like a load
and marks it dirty. A dirty line evicted from a level is written to the next level: there a hit
marks the line dirty without changing its replacement state (a write-back is not a use, as in
ChampSim's LRU), a miss allocates the line dirty without fetching it (the whole line is
written). Memory absorbs write-backs from the last level.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from . import policies, ranks, simd
from .sharers import _bit, _clear, _lookup, _mark, _next_core, _slot, _store
from ..codes import (EV_BACKINV, EV_COH_INV, EV_COH_WB, EV_L3_HELD, EV_WB_L1D, EV_WB_L2,
                     EV_WB_L3, EV_WBMISS_L2, EV_WBMISS_L3, IFETCH, NKINDS, NLEVELS, STORE)

# Kernels that are called (not inlined) are compiled with _nrt=False: they allocate nothing, and
# with numba's reference counting on, every inlined helper taking arrays cost an atomic
# increment and decrement per array and call, which was most of the hierarchy's time.

# Rows of the hierarchy geometry table ``geo[level]`` = (set mask, ways, policy).
G_MASK, G_WAYS, G_POLICY = 0, 1, 2

_M2, _M4, _M8, _M16 = simd.MATCH


# --- one cache level ----------------------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _find(tags: np.ndarray, base: int, ways: int, line: int) -> int:
    """Flat index of ``line`` in the set starting at ``base``, or -1 (a hit may be in any way:
    stamps, not positions, hold the order)."""
    return simd.find(tags, base, ways, line)


@numba.njit(cache=True, inline="always")
def _tick(clk: np.ndarray) -> int:
    """Advance the clock and return it: every stamp is unique, so no two ways tie."""
    t = clk[0] + 1
    clk[0] = t
    return t


@numba.njit(cache=True, inline="always")
def _invalidate(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int,
                policy: int, line: int) -> int:
    """Remove ``line`` from a set: -1 when absent, else its dirty bit."""
    i = _find(tags, base, ways, line)
    if i < 0:
        return -1
    d = int(dirty[i])
    policies.remove(policy, tags, dirty, stamp, base, ways, i)
    return d


@numba.njit(cache=True, inline="always")
def _put_dirty(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, clk: np.ndarray,
               base: int, ways: int, policy: int, line: int,
               rng: np.ndarray) -> tuple[int, int, int]:
    """A dirty line written back from the level above arrives at the set at ``base``.

    A hit only sets the dirty bit (a write-back is not a use): ``(1, -1, 0)``. A miss allocates
    the line dirty without fetching it: ``(0, victim, victim_dirty)``.
    """
    i = _find(tags, base, ways, line)
    if i >= 0:
        dirty[i] = 1
        return 1, -1, 0
    v, vd = policies.fill(policy, tags, dirty, stamp, base, ways, line, 1, _tick(clk), rng)
    return 0, v, vd


# --- counting -----------------------------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _one_key(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every ``(a[n], b[n])`` is the same (a loop the compiler vectorises)."""
    if a.shape[0] == 0:
        return True
    a0, b0 = a[0], b[0]
    differ = 0
    for n in range(a.shape[0]):
        differ |= (a[n] ^ a0) | (b[n] ^ b0)
    return differ == 0


@numba.njit(cache=True, inline="always")
def _count_pairs(a: np.ndarray, b: np.ndarray, nb: int, hist: np.ndarray, out: np.ndarray,
                 off: int, stride: int) -> bool:
    """``out[off + (a[n] * nb + b[n]) * stride] += 1`` for every ``n``; whether every ``n``
    had the same ``(a[n], b[n])``.

    The kernels count every access as a hit here and move a miss's count when it happens.
    Counting each hit in the access loop made every access wait for the previous increment of
    the same counter. A stream of one key (one class, one kind: a fetch stream, a sandbox
    chunk's class) is counted at once after a vectorised check; others go through four
    interleaved histograms (``hist``: ``4 * k`` zeros, for keys below ``k``; left zero) that
    keep consecutive increments apart.
    """
    u = np.uint64
    n_all = a.shape[0]
    if _one_key(a, b):
        if n_all:
            out[u(off) + (u(a[0]) * u(nb) + u(b[0])) * u(stride)] += n_all
        return True
    k = u(hist.shape[0] // 4)
    for n in range(n_all):
        hist[u(n & 3) * k + u(a[n]) * u(nb) + u(b[n])] += 1
    for j in range(hist.shape[0]):
        if hist[j]:
            out[u(off) + (u(j) % k) * u(stride)] += hist[j]
            hist[j] = 0
    return False


@numba.njit(cache=True, inline="always")
def _count_single(cls: np.ndarray, store: np.ndarray, hit: np.ndarray, misses: int,
                  hist: np.ndarray, counts: np.ndarray) -> None:
    """``counts[(cls[n] * 2 + store[n]) * 2 + hit[n]] += 1`` for every ``n``, after the loop.

    The single cache's loops count nothing but ``misses``: a stream of one class and store bit
    is counted from it at once; others go through four interleaved histograms (``hist``: ``4 *
    classes * 4`` zeros; left zero). Counting in the loop made every access wait for the
    previous increment of the same counter, and two copies of the loop (one counting, one
    not) measured 2.3x slower than the one copy (direct-mapped, fetch lines of netserver-10b;
    the cause was not found).
    """
    u = np.uint64
    n_all = cls.shape[0]
    if n_all == 0:
        return
    if _one_key(cls, store):
        key = (u(cls[0]) * u(2) + u(store[0])) * u(2)
        counts[key] += misses
        counts[key + u(1)] += n_all - misses
        return
    k = u(hist.shape[0] // 4)
    for n in range(n_all):
        hist[u(n & 3) * k + (u(cls[n]) * u(2) + u(store[n])) * u(2) + u(hit[n])] += 1
    for j in range(hist.shape[0]):
        if hist[j]:
            counts[u(j) % k] += hist[j]
            hist[j] = 0


# --- a single cache over a stream ---------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _direct_mapped(tags: np.ndarray, dirty: np.ndarray, mask: int, shift: int,
                   addr: np.ndarray, store: np.ndarray, hit_out: np.ndarray) -> tuple[int, int]:
    """:func:`_run_cache` for one way and LRU or FIFO (the random policy draws from its
    generator even with one way, so it keeps the general loop): ``(dirty evictions, misses)``.

    The way is always the line's, so a hit and a miss do the same writes and no branch is
    needed: a branch on hit or miss mispredicts at every change, which cost more than the whole
    access on streams that miss often (fetch lines of apache: 35 % misses). One way has no
    order to keep, so LRU and FIFO are the same and no stamp is written: the stamp that FIFO
    keeps on a hit had to be read back, which made the loop 1.7-3.4x slower (fetch lines of
    netserver-10b, 128-byte lines). The caller counts (:func:`_count_single`).
    """
    writebacks = 0
    misses = 0
    for n in range(addr.shape[0]):
        line = np.int64(addr[n] >> np.uint64(shift))
        i = line & mask
        st = store[n]
        old, od = tags[i], dirty[i]
        hit = np.int64(old == line)
        tags[i] = line
        dirty[i] = st | (od & np.uint8(hit))
        # an invalid way is never dirty
        writebacks += (1 - hit) & np.int64(od)
        hit_out[n] = hit
        misses += 1 - hit
    return writebacks, misses


@numba.njit(cache=True, inline="always")
def _set_assoc(match, tags: np.ndarray, dirty: np.ndarray, rank: np.ndarray, mask: int,
               ways: int, shift: int, lru: bool, addr: np.ndarray, store: np.ndarray,
               hit_out: np.ndarray) -> tuple[int, int]:
    """:func:`_run_cache` for 2 to 16 ways and LRU or FIFO, the order of each set kept as
    ranks (:mod:`.ranks`): returns ``(dirty evictions, misses)``.

    ``match`` is one lane count's :data:`.simd.MATCH`, so each lane count gets its own loop
    with no per-access branch on the geometry. Indices are unsigned (numba adds a wrap-around
    select to every signed index): measured 5-30 % faster than the general loop on the fetch
    lines of apache-short and chase-large (1 M accesses, 2-16 ways). The caller counts
    (:func:`_count_single`).
    """
    u = np.uint64
    writebacks = u(0)
    misses = 0
    wmask = (u(1) << u(ways)) - u(1)
    top = ways - 1
    for n in range(addr.shape[0]):
        a = addr[n] >> u(shift)
        line = np.int64(a)
        s = a & u(mask)
        base = s * u(ways)
        r = s * u(ranks.STRIDE)
        st = store[n]
        m = match(tags, base, line) & wmask
        if m != u(0):
            w = u(trailing_zeros(m))
            dirty[base + w] |= st
            if lru:
                ranks.touch(rank, r, w)
            hit = u(1)
        else:
            w = ranks.victim(rank, r, top)
            i = base + w
            writebacks += u(dirty[i])      # an invalid way is never dirty
            tags[i] = line
            dirty[i] = st
            ranks.touch(rank, r, w)
            hit = u(0)
            misses += 1
        hit_out[n] = np.uint8(hit)
    return np.int64(writebacks), misses


@numba.njit(cache=True, inline="always")
def _two_way_access(addr: np.ndarray, store: np.ndarray, n: int, shift: int, mask: int):
    """Access ``n`` of a 2-way cache: ``(line, its set's first way, its set's ranks, store)``."""
    u = np.uint64
    a = addr[n] >> u(shift)
    s = a & u(mask)
    return np.int64(a), s * u(2), s * u(ranks.STRIDE), store[n]


@numba.njit(cache=True, inline="always")
def _two_way_lru(tags: np.ndarray, dirty: np.ndarray, rank: np.ndarray, mask: int, shift: int,
                 addr: np.ndarray, store: np.ndarray, hit_out: np.ndarray, lo: int,
                 hi: int) -> tuple[int, int]:
    """Accesses ``lo..hi`` of :func:`_set_assoc` for 2 ways and LRU, in scalar code without a
    branch on hit or miss: ``(dirty evictions, misses)``.

    The ranks are those of :mod:`.ranks` (way 1 ranked 1 is the victim), written whole: the way
    used gets 0 and the other 1, whether it hit or was filled, so no rank is read back except
    the victim's. Measured 1.1-1.8x faster than :func:`_set_assoc` on the fetch lines of
    apache, netserver-10b and oltp (64- and 128-byte lines). FIFO keeps its ranks on a hit,
    which makes each access read the last one's store; there this loop was not faster.
    """
    u = np.uint64
    writebacks = 0
    misses = 0
    for n in range(u(lo), u(hi)):     # unsigned: no wrap-around select
        line, base, r, st = _two_way_access(addr, store, n, shift, mask)
        h1 = np.int64(tags[base + u(1)] == line)
        hit = np.int64(tags[base] == line) | h1
        w = h1 if hit else np.int64(ranks.victim2(rank, r))
        i = base + u(w)
        old_dirty = np.int64(dirty[i])
        tags[i] = line
        dirty[i] = st | np.uint8(old_dirty & hit)
        writebacks += (1 - hit) & old_dirty       # an invalid way is never dirty
        ranks.touch2(rank, r, w)
        hit_out[n] = np.uint8(hit)
        misses += 1 - hit
    return writebacks, misses


@numba.njit(cache=True, inline="always")
def _two_way_lru_hits(tags: np.ndarray, dirty: np.ndarray, rank: np.ndarray, mask: int,
                      shift: int, addr: np.ndarray, store: np.ndarray, hit_out: np.ndarray,
                      lo: int, hi: int) -> tuple[int, int]:
    """:func:`_two_way_lru` with a branch on hit or miss, for streams that rarely miss: a hit
    writes only the set's ranks and its result."""
    u = np.uint64
    writebacks = 0
    misses = 0
    for n in range(u(lo), u(hi)):     # unsigned: no wrap-around select
        line, base, r, st = _two_way_access(addr, store, n, shift, mask)
        h0 = tags[base] == line
        h1 = tags[base + u(1)] == line
        if h0 | h1:
            w = u(h1)
            dirty[base + w] |= st
            ranks.touch2(rank, r, w)
            hit_out[n] = 1
        else:
            w = ranks.victim2(rank, r)
            i = base + w
            writebacks += np.int64(dirty[i])      # an invalid way is never dirty
            tags[i] = line
            dirty[i] = st
            ranks.touch2(rank, r, w)
            hit_out[n] = 0
            misses += 1
    return writebacks, misses


#: Accesses that the single cache's 2-way LRU loop takes with one choice of loop.
TWO_WAY_BLOCK = 4096
#: The next block of a 2-way LRU cache runs without a branch on hit or miss
#: (:func:`_two_way_lru`) when more than this fraction of the last block missed, else with one
#: (:func:`_two_way_lru_hits`): the branch made barrier's fetch lines (0.5 % misses, 32- and
#: 64-byte lines) 1.3x faster, and cost nothing on iscp and oscp (2-3 %) at 2 %.
TWO_WAY_BRANCHLESS_ABOVE = 0.02


@numba.njit(cache=True, inline="always")
def _two_way_lru_blocks(tags: np.ndarray, dirty: np.ndarray, rank: np.ndarray, mask: int,
                        shift: int, addr: np.ndarray, store: np.ndarray,
                        hit_out: np.ndarray) -> tuple[int, int]:
    """2-way LRU over ``addr``, each block of :data:`TWO_WAY_BLOCK` accesses by the loop that
    suits the last block's miss rate (the first without a branch: caches start cold)."""
    writebacks = 0
    misses = 0
    branchless = True
    n_all = addr.shape[0]
    for lo in range(0, n_all, TWO_WAY_BLOCK):
        hi = min(n_all, lo + TWO_WAY_BLOCK)
        if branchless:
            w, m = _two_way_lru(tags, dirty, rank, mask, shift, addr, store, hit_out, lo, hi)
        else:
            w, m = _two_way_lru_hits(tags, dirty, rank, mask, shift, addr, store, hit_out,
                                     lo, hi)
        writebacks += w
        misses += m
        branchless = m > TWO_WAY_BRANCHLESS_ABOVE * (hi - lo)
    return writebacks, misses


@numba.njit(cache=True, inline="always")
def _set_assoc_lanes(tags, dirty, rank, mask, ways, shift, lru, addr, store,
                     hit_out) -> tuple[int, int]:
    """:func:`_set_assoc` with the set compare of the smallest vector that holds ``ways``
    (2-way LRU by :func:`_two_way_lru_blocks`)."""
    if ways == 2 and lru:
        return _two_way_lru_blocks(tags, dirty, rank, mask, shift, addr, store, hit_out)
    if ways <= 2:
        return _set_assoc(_M2, tags, dirty, rank, mask, ways, shift, lru, addr, store, hit_out)
    if ways <= 4:
        return _set_assoc(_M4, tags, dirty, rank, mask, ways, shift, lru, addr, store, hit_out)
    if ways <= 8:
        return _set_assoc(_M8, tags, dirty, rank, mask, ways, shift, lru, addr, store, hit_out)
    return _set_assoc(_M16, tags, dirty, rank, mask, ways, shift, lru, addr, store, hit_out)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _run_cache(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, rank: np.ndarray,
               clk: np.ndarray, rng: np.ndarray, mask: int, ways: int, shift: int, policy: int,
               addr: np.ndarray, store: np.ndarray, cls: np.ndarray, hit_out: np.ndarray,
               counts: np.ndarray, events: np.ndarray, hist: np.ndarray) -> None:
    """One set-associative write-back, write-allocate cache over ``addr``.

    ``hit_out[n]`` gets 1 for a hit; ``counts`` (flat, ``(cls * 2 + store) * 2 + hit``) and
    ``events[0]`` (dirty evictions) are incremented. ``hist`` is scratch for
    :func:`_count_single` (``4 * classes * 4`` zeros). 2 to 16 ways of LRU or FIFO keep their
    order in ``rank`` (:mod:`.ranks`), any other geometry and policy in ``stamp``.
    """
    if ways == 1 and policy != policies.RANDOM:
        writebacks, misses = _direct_mapped(tags, dirty, mask, shift, addr, store, hit_out)
        events[0] += writebacks
        _count_single(cls, store, hit_out, misses, hist, counts)
        return
    if 2 <= ways <= simd.LANES and policy != policies.RANDOM:
        writebacks, misses = _set_assoc_lanes(tags, dirty, rank, mask, ways, shift,
                                              policy == policies.LRU, addr, store, hit_out)
        events[0] += writebacks
        _count_single(cls, store, hit_out, misses, hist, counts)
        return
    # any other geometry or policy: stamps; the clock lives in a register here (nothing else
    # stamps this cache meanwhile); counted after the loop, as in the loops above
    writebacks = 0
    misses = 0
    now = clk[0]
    for n in range(addr.shape[0]):
        line = np.int64(addr[n] >> np.uint64(shift))
        base = (line & mask) * ways
        st = store[n]
        now += 1
        i = _find(tags, base, ways, line)
        if i >= 0:
            dirty[i] |= st
            policies.on_hit(policy, stamp, i, now)
            hit = 1
        else:
            v, vd = policies.fill(policy, tags, dirty, stamp, base, ways, line, st, now, rng)
            writebacks += (v >= 0) & (vd != 0)
            hit = 0
            misses += 1
        hit_out[n] = hit
    clk[0] = now
    events[0] += writebacks
    _count_single(cls, store, hit_out, misses, hist, counts)


# --- the hierarchy ------------------------------------------------------------------------

@numba.njit(cache=True, inline="always")
def _base(off: np.ndarray, geo: np.ndarray, cores: int, level: int, core: int,
          line: int) -> int:
    inst = level * cores + core if level < 3 else 3 * cores
    return off[inst] + (line & geo[level, G_MASK]) * geo[level, G_WAYS]


@numba.njit(cache=True, _nrt=False)
def _drop_private(tags, dirty, stamp, clk, off, geo, cores, core, levels,
                  line) -> tuple[int, int]:
    """Invalidate ``line`` in the first ``levels`` private levels of ``core`` (0 L1i, 1 L1d,
    2 L2): return how many copies were removed and how many of them were dirty."""
    found = 0
    dirty_copies = 0
    for p in range(levels):
        r = _invalidate(tags, dirty, stamp, _base(off, geo, cores, p, core, line),
                        geo[p, G_WAYS], geo[p, G_POLICY], line)
        if r >= 0:
            found += 1
            dirty_copies += r
    return found, dirty_copies


@numba.njit(cache=True, _nrt=False)
def _held_elsewhere(tags, off, geo, cores, c, line, sharers) -> bool:
    """Whether a core other than ``c`` holds ``line`` in its L1i, L1d or L2: counted at a
    demand miss of the L3 (``EV_L3_HELD``), which memory serves. A non-inclusive L3 drops
    lines that stay hot in a private cache (an L2 hit does not refresh the L3's order), so
    such misses are not capacity misses of the work in flight.

    Only the cores the sharers table names are looked in (:mod:`.sharers`), up to the first
    holder; the bit of a core looked in without a copy is cleared; a line without an entry,
    looked for in every core, gets one (the holders found and ``c``, whose L2 the miss
    fills)."""
    s, word, known = _lookup(sharers, cores, line)
    # without a table (one slot) nothing is learnt: the first holder answers
    learn = not known and sharers.shape[0] > 2
    found = np.uint64(0)
    o = _next_core(word, -1, cores)
    while o < cores:
        if o != c:
            held = False
            for p in range(3):
                if _find(tags, _base(off, geo, cores, p, o, line), geo[p, G_WAYS], line) >= 0:
                    held = True
                    break
            if held:
                if not learn:
                    return True
                found |= _bit(o)
            elif known:
                _clear(sharers, s, line, o)
        o = _next_core(word, o, cores)
    if learn:
        _store(sharers, s, line, found | _bit(c))
    return found != np.uint64(0)


@numba.njit(cache=True, _nrt=False)
def _l3_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, c, victim, victim_dirty,
                events, sharers):
    """Consequences of the L3 evicting ``victim``: back-invalidation (in the cores that may
    hold it, :mod:`.sharers`) and the memory write."""
    if victim < 0:
        return
    d = victim_dirty
    if inclusive:
        s, word, _ = _lookup(sharers, cores, victim)
        o = _next_core(word, -1, cores)
        while o < cores:
            found, dc = _drop_private(tags, dirty, stamp, clk, off, geo, cores, o, 3, victim)
            events[c, EV_BACKINV] += found
            d |= dc
            o = _next_core(word, o, cores)
        _store(sharers, s, victim, np.uint64(0))      # no private cache holds it now
    if d:
        events[c, EV_WB_L3] += 1


@numba.njit(cache=True, inline="always")
def _l3_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, line, events,
                  sharers):
    """A dirty ``line`` arrives at the L3."""
    hit, v, vd = _put_dirty(tags, dirty, stamp, clk, _base(off, geo, cores, 3, c, line),
                            geo[3, G_WAYS], geo[3, G_POLICY], line, rng)
    if not hit:
        events[c, EV_WBMISS_L3] += 1
        if v >= 0 and (vd or inclusive):
            _l3_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, c, v, vd, events,
                        sharers)


@numba.njit(cache=True, _nrt=False)
def _l2_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, victim,
                victim_dirty, events, sharers):
    """Consequences of core ``c``'s L2 evicting ``victim``."""
    if victim < 0:
        return
    d = victim_dirty
    if inclusive:
        found, dc = _drop_private(tags, dirty, stamp, clk, off, geo, cores, c, 2, victim)
        events[c, EV_BACKINV] += found
        d |= dc
    if d:
        events[c, EV_WB_L2] += 1
        _l3_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, victim,
                      events, sharers)


@numba.njit(cache=True, inline="always")
def _l2_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, line, events,
                  sharers):
    """A dirty ``line`` evicted from core ``c``'s L1d arrives at its L2."""
    # Same shape as _l3_writeback, kept apart: one function for both levels would call itself
    # (L2 write-back -> L2 eviction -> L3 write-back), which numba compiles only with
    # explicit signatures.
    hit, v, vd = _put_dirty(tags, dirty, stamp, clk, _base(off, geo, cores, 2, c, line),
                            geo[2, G_WAYS], geo[2, G_POLICY], line, rng)
    if not hit:
        events[c, EV_WBMISS_L2] += 1
        if v >= 0 and (vd or inclusive):
            _l2_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, v, vd,
                        events, sharers)


@numba.njit(cache=True, _nrt=False)
def _clean_remote(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, line, events,
                  sharers):
    """Coherence on a private miss: other cores' dirty copies (of the cores that may hold
    ``line``, :mod:`.sharers`) are written back to the L3 and kept clean (M -> S)."""
    _, word, _ = _lookup(sharers, cores, line)
    o = _next_core(word, -1, cores)
    while o < cores:
        if o != c:
            for p in (1, 2):
                i = _find(tags, _base(off, geo, cores, p, o, line), geo[p, G_WAYS], line)
                if i >= 0 and dirty[i]:
                    dirty[i] = 0
                    events[c, EV_COH_WB] += 1
                    _l3_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c,
                                  line, events, sharers)
        o = _next_core(word, o, cores)


@numba.njit(cache=True, _nrt=False)
def _invalidate_remote(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, line,
                       events, sharers):
    """Coherence on a store: other cores' copies (in the cores that may hold ``line``,
    :mod:`.sharers`) are invalidated (S -> I, M -> I with a write-back to the L3 per dirty
    copy)."""
    s, word, _ = _lookup(sharers, cores, line)
    o = _next_core(word, -1, cores)
    while o < cores:
        if o != c:
            found, dc = _drop_private(tags, dirty, stamp, clk, off, geo, cores, o, 3, line)
            events[c, EV_COH_INV] += found
            events[c, EV_COH_WB] += dc
            for _ in range(dc):
                _l3_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c,
                              line, events, sharers)
        o = _next_core(word, o, cores)
    _store(sharers, s, line, _bit(c))       # the storing core's copy is the only one


@numba.njit(cache=True, inline="always")
def _below_l1(tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng, c, line, st,
              events, sharers):
    """An L1 miss of core ``c``: look up the L2 and L3 and fill them on the way back (the L1
    itself is filled by the caller); return the level that served it. An L2 miss is a demand
    of the L3, which the sharers table records (:mod:`.sharers`)."""
    b2 = _base(off, geo, cores, 2, c, line)
    w2 = geo[2, G_WAYS]
    j = _find(tags, b2, w2, line)
    if j >= 0:
        policies.on_hit(geo[2, G_POLICY], stamp, j, _tick(clk))
        return 1
    _mark(sharers, c, line)
    b3 = _base(off, geo, cores, 3, c, line)
    w3 = geo[3, G_WAYS]
    j3 = _find(tags, b3, w3, line)
    if j3 >= 0:
        policies.on_hit(geo[3, G_POLICY], stamp, j3, _tick(clk))
        s = 2
    else:
        s = 3
        if inclusive:
            # the L3 holds every line a private cache holds: none holds this one (and the
            # twin, which looks in every core, counts none either)
            _store(sharers, _slot(sharers, line), line, _bit(c))
        elif _held_elsewhere(tags, off, geo, cores, c, line, sharers):
            events[c, EV_L3_HELD] += 1
        v, vd = policies.fill(geo[3, G_POLICY], tags, dirty, stamp, b3, w3, line, 0,
                               _tick(clk), rng)
        # (calls only when there is something to do: a numba call measured ~100 ns here)
        if v >= 0 and (vd or inclusive):
            _l3_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, c, v, vd, events,
                        sharers)
    if coherence and not st:
        _clean_remote(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, line,
                      events, sharers)
    v, vd = policies.fill(geo[2, G_POLICY], tags, dirty, stamp, b2, w2, line, 0, _tick(clk),
                           rng)
    if v >= 0 and (vd or inclusive):
        _l2_evicted(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, v, vd, events,
                    sharers)
    return s


@numba.njit(cache=True, inline="always")
def _l1d_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, victim, events,
                   sharers):
    """Core ``c``'s L1d evicted the dirty line ``victim``: it goes to the L2."""
    events[c, EV_WB_L1D] += 1
    _l2_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, victim, events,
                  sharers)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _run_hierarchy(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, clk: np.ndarray,
                   off: np.ndarray, geo: np.ndarray,
                   cores: int, inclusive: bool, coherence: bool, rng: np.ndarray, shift: int,
                   core: int, addr: np.ndarray, kind: np.ndarray, cls: np.ndarray,
                   served_out: np.ndarray, served: np.ndarray, events: np.ndarray,
                   sharers: np.ndarray) -> None:
    """Run core ``core``'s accesses through its L1i/L1d and L2 and the shared L3.

    ``served_out[n]`` gets the level that served access ``n`` (0 L1 .. 3 memory);
    ``served`` (flat: ``((core * classes + cls) * NKINDS + kind) * NLEVELS + level``) and
    ``events[core, e]`` are incremented. ``sharers`` is the sharers table (:mod:`.sharers`):
    the questions about other cores' copies of a line look only at the cores it names.
    """
    c = core
    # The L1 path is most accesses: keep its geometry in locals, chosen per access by selects
    # (fetches and data accesses interleave unpredictably in a mixed stream)
    oi, od1 = off[c], off[cores + c]
    mi, md = geo[0, G_MASK], geo[1, G_MASK]
    wi, wd = geo[0, G_WAYS], geo[1, G_WAYS]
    pi, pd = geo[0, G_POLICY], geo[1, G_POLICY]
    # The clock lives in a register on L1 hits and goes back to clk[0] around the calls that
    # stamp lower levels: stamps stay unique and in event order.
    now = clk[0]
    # a flat counter index (unsigned: numba wraps signed indices), this core's block first
    row = np.uint64(c) * np.uint64(served.shape[0] // (cores * NKINDS * NLEVELS))
    for n in range(addr.shape[0]):
        line = np.int64(addr[n] >> np.uint64(shift))
        k = np.int64(kind[n])
        st = np.uint8(k == STORE)
        fetch = k == IFETCH
        w1 = wi if fetch else wd
        b1 = (oi if fetch else od1) + (line & (mi if fetch else md)) * w1
        pol1 = pi if fetch else pd
        was_dirty = 0
        i = _find(tags, b1, w1, line)
        if i >= 0:
            # no branch on a store: loads and stores interleave unpredictably
            d = dirty[i]
            was_dirty = int(d & st)
            dirty[i] = d | st
            now += 1
            policies.on_hit(pol1, stamp, i, now)
            s = 0
        else:
            clk[0] = now
            s = _below_l1(tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng,
                          c, line, st, events, sharers)
            # filled after the levels below, as an inclusive L2 may back-invalidate this set
            v, vd = policies.fill(pol1, tags, dirty, stamp, b1, w1, line, st, _tick(clk), rng)
            # only a dirty victim goes to the L2 (most are clean)
            if v >= 0 and vd:
                _l1d_writeback(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c, v,
                               events, sharers)
            now = clk[0]
        if st and coherence and not was_dirty:
            clk[0] = now
            _invalidate_remote(tags, dirty, stamp, clk, off, geo, cores, inclusive, rng, c,
                               line, events, sharers)
            now = clk[0]
        served_out[n] = s
        served[((row + np.uint64(cls[n])) * np.uint64(NKINDS) + np.uint64(k))
               * np.uint64(NLEVELS) + np.uint64(s)] += 1
    clk[0] = now
