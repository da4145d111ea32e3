"""The hierarchy one level at a time (numba, nopython; arrays and scalars only).

:func:`~.kernels._run_hierarchy` takes each access down the levels it misses in before the
next access. When no level reaches into another, the same results come from running a block of
accesses through the L1s, then the L1s' misses and dirty evictions through the L2, then the
L2's through the L3: the L1 loop (most of the work) then does nothing but L1 lookups, and the
lower levels see only their own events. :class:`~.hierarchy.Hierarchy` uses this path when

* the hierarchy is non-inclusive (no eviction invalidates a line in another level),
* coherence is off (no access reaches another core's caches), and
* no level uses random replacement (its generator is shared by all levels, so the order of
  the draws would change),

and the L1s have at most 16 ways (one vector per set). Why it gives the same results: each
level's state depends only on the sequence of events that reach it, and that sequence is the
same in both orders. An L1 miss of access ``n`` sends the L2 a demand for its line, then the
L1's dirty victim if there is one (the L1 is filled after the lower levels return, and they
cannot touch it); an L2 demand miss sends the L3 a demand, then the L2's dirty victim; a
write-back that misses in the L2 allocates and may send a dirty victim on. Within a level,
events keep their order, so the stamps (one clock, see :mod:`.policies.lru`) keep their order
within every set; their values differ from the one-access-at-a-time kernel's, and only their
order is ever used. The L1s keep the same order as ranks instead (:mod:`.ranks`: the victim
without a reduction over stamps), direct-mapped L1s none (one way has no order).
An L3 demand miss counts whether another core's L1i, L1d or L2 holds the line (the
statistic of :func:`~.kernels._held_elsewhere`). Here that comes from a mirror of the private
caches' fingerprints, each set's ways of every core side by side, which the L1 and L2 fills
keep (:func:`_held_mirror`): a contiguous compare instead of a set lookup in each other core's
three caches, whose cost grew with the cores (90 % of the replay of a pointer chase at 32
cores, measured by leaving the check out). In front of the mirror, above 8 cores, a filter of
the cores that asked the L3 for a line of each 1 MiB region (:func:`_held_among`) answers most
checks with one word: a copy's own data is seldom in another core's caches.

``tests/test_models_caches.py`` compares both kernels, stamps against ranks, and the slow
twin.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from . import policies, ranks, simd
from ..codes import (EV_L3_HELD, EV_WB_L1D, EV_WB_L2, EV_WB_L3, EV_WBMISS_L2, EV_WBMISS_L3,
                     IFETCH, NKINDS, NLEVELS, STORE)
from .kernels import G_MASK, G_POLICY, G_WAYS, _count_pairs

#: Events ahead whose set the last level's loop prefetches: its queue is known in advance, so
#: the host's cache misses on a large L3's arrays overlap instead of following one another.
#: The L2's loop does not: its arrays (256 KB of 64-byte lines: 70 KB) stay in the host's
#: caches, and prefetching them measured 1-14 % slower (fetch lines of apache, chase-mid, find,
#: netserver-10b; 1, 2 and 8 ways).
AHEAD = 8

#: A direct-mapped L1 takes the next block without a branch on hit or miss (:func:`_l1_direct`)
#: when more than this fraction of the last block's accesses missed (events queued): with a
#: branch, 1-way fetch lines ran 1.6x faster on barrier (0.6 % misses) and 1.1-1.3x slower on
#: apache, oltp and netserver-10b (27-43 %).
BRANCHLESS_ABOVE = 0.05

#: Accesses per block: the events of one block wait in scratch arrays of 2 (L2) and 4 (L3)
#: times this many lines before the next level takes them.
BLOCK = 4096

#: The regions of :func:`_region`: 2**REGION_SHIFT lines (1 MiB of 64-byte lines), hashed into
#: 2**TOUCH_BITS words (512 KiB) of the cores that asked the last level for a line of them.
#: Regions of 64 KiB filled the words on chase-large at 32 cores (64 copies of 64 MiB: linux
#: 0.90-0.97x of the rows alone); 1 MiB ones made it 1.6x faster (selective-offload 2.4x).
REGION_SHIFT = 14
TOUCH_BITS = 16
#: At most this many cores in a region's word: their ways are compared one core at a time;
#: more, the whole mirror row (:func:`_held_mirror`).
FEW_CORES = 4
#: The filter is kept above this many cores only: below, a mirror row is a vector or two per
#: level, cheaper than the filter's word at every L3 demand (kept at 8 cores, apache measured
#: 5-11 % slower; at 16 cores it costs apache 2-5 % and makes the chases 1.3x faster).
FILTER_ABOVE = 8

_M2, _M4, _M8, _M16 = simd.MATCH
_F2, _F4, _F8, _F16 = simd.FIND
_O2, _O4, _O8, _O16 = simd.OLDEST


# Direct-mapped L1s on streams that rarely miss: a scalar compare (a vector of two lanes
# measured slower, 1-way fetch lines of oltp and iscp)
@numba.njit(cache=True, inline="always")
def _match1(tags: np.ndarray, base: int, line: int) -> np.uint64:
    return np.uint64(tags[base] == line)


# Two 2-way L1s in scalar code: two compares, and ranks written as two bytes, measured 5-18 %
# faster than the vector operations (2-way fetch lines of apache, chase-mid, netserver-10b, oltp)
@numba.njit(cache=True, inline="always")
def _match2(tags: np.ndarray, base: int, line: int) -> np.uint64:
    u = np.uint64
    return u(tags[base] == line) | (u(tags[base + u(1)] == line) << u(1))


@numba.njit(cache=True, inline="always")
def _print(line: int) -> np.uint16:
    """A line's fingerprint in the private caches' mirror (:func:`_held_mirror`): 16 bits of
    a multiplicative hash, never 0 (an empty way)."""
    u = np.uint64
    return np.uint16((u(line) * u(0x9E3779B97F4A7C15)) >> u(48)) | np.uint16(1)


@numba.njit(cache=True, inline="always")
def _held_mirror(fpr: np.ndarray, fo: np.ndarray, tags: np.ndarray, off: np.ndarray,
                 geo: np.ndarray, cores: int, c: int, line: int) -> bool:
    """:func:`~.kernels._held_elsewhere` from the mirror: whether a core other than ``c``
    holds ``line`` in its L1i, L1d or L2.

    The mirror keeps each way's fingerprint (:func:`_print`) with the same set of every core
    side by side (level ``p``'s set ``s`` of core ``o`` at ``fo[p] + (s * cores + o) *
    ways``), so the other cores' ways are one contiguous compare per level instead of a set
    lookup in each of their caches (which made the check most of an L3 miss's cost at 32
    cores); a matching fingerprint is confirmed on the tags, so the answer is exact."""
    u = np.uint64
    f = _print(line)
    for p in range(3):
        ways = geo[p, G_WAYS]
        s = line & geo[p, G_MASK]
        row = fo[p] + s * cores * ways
        n = cores * ways
        mine = c * ways
        hit = u(0)
        for k in range(0, n, simd.PRINT_LANES):
            # the lanes of this row (the last vector runs past it) but this core's
            keep = _lanes(0, n - k) & ~_lanes(mine - k, mine + ways - k)
            hit |= simd.match_prints(fpr, row + k, f) & keep
        if hit != u(0):
            for o in range(cores):
                if o == c:
                    continue
                for w in range(ways):
                    if fpr[row + o * ways + w] == f and \
                            tags[off[p * cores + o] + s * ways + w] == line:
                        return True
    return False


@numba.njit(cache=True, inline="always")
def _region(line: int) -> np.uint64:
    """The word of the touch filter (:func:`_held_among`) for ``line``'s region: a
    multiplicative hash of its number, so that copies whose frames lie a power of two apart
    do not share words."""
    u = np.uint64
    return (u(line) >> u(REGION_SHIFT)) * u(0x9E3779B97F4A7C15) >> u(64 - TOUCH_BITS)


@numba.njit(cache=True, inline="always")
def _held_by(fpr: np.ndarray, fo: np.ndarray, tags: np.ndarray, off: np.ndarray,
             geo: np.ndarray, cores: int, o: int, line: int, f: np.uint16) -> bool:
    """Whether core ``o`` holds ``line`` (fingerprint ``f``) in its L1i, L1d or L2: its ways
    in the mirror (:func:`_held_mirror`), confirmed on the tags."""
    for p in range(3):
        ways = geo[p, G_WAYS]
        s = line & geo[p, G_MASK]
        row = fo[p] + (s * cores + o) * ways
        t = off[p * cores + o] + s * ways
        for w in range(ways):
            if fpr[row + w] == f and tags[t + w] == line:
                return True
    return False


@numba.njit(cache=True, inline="always")
def _held_among(fpr: np.ndarray, fo: np.ndarray, tags: np.ndarray, off: np.ndarray,
                geo: np.ndarray, cores: int, c: int, line: int, others: np.uint64) -> bool:
    """:func:`_held_mirror` given the touch filter's word for ``line``'s region without core
    ``c``'s bit (``others``).

    A line enters a core's private caches only through a demand of the last level (an L2 miss:
    an L1 fill is an L2 demand, and an L2 hit or write-back allocation holds a line that came
    in the same way before), so every core that holds ``line`` has its bit, ``1 << (core %
    64)``, in the word of its region (:func:`_region`), which :func:`_lower` sets at every last
    level demand (above :data:`FILTER_ABOVE` cores; below, ``others`` is every bit but the
    core's, which sends each check to the rows) and nothing clears but a flush of every cache.
    No bit: no other core holds the line (the common answer, one word read instead of three
    mirror rows); a few bits: only those cores' ways are compared; more (shared lines, or
    regions that share a word), the rows. The answer is exact either way; the filter only
    skips work."""
    if others == np.uint64(0):
        return False
    x = others
    for _ in range(FEW_CORES):
        x &= x - np.uint64(1)
    if x != np.uint64(0):
        return _held_mirror(fpr, fo, tags, off, geo, cores, c, line)
    f = _print(line)
    while others != np.uint64(0):
        b = trailing_zeros(others)
        others &= others - np.uint64(1)
        for o in range(b, cores, 64):       # the cores that share bit b
            if o != c and _held_by(fpr, fo, tags, off, geo, cores, o, line, f):
                return True
    return False


@numba.njit(cache=True, inline="always")
def _lanes(a: int, b: int) -> np.uint64:
    """Bit mask of the lanes ``[a, b)`` clipped to ``[0, PRINT_LANES)``."""
    u = np.uint64
    a = min(max(a, 0), simd.PRINT_LANES)
    b = min(max(b, 0), simd.PRINT_LANES)
    return ((u(1) << u(b)) - u(1)) & ~((u(1) << u(a)) - u(1))


@numba.njit(cache=True, inline="always")
def _victim(pair: bool, rank: np.ndarray, r: int, top: int) -> np.uint64:
    """:func:`.ranks.victim`, or :func:`.ranks.victim2` with ``pair`` (2 ways)."""
    if pair:
        return ranks.victim2(rank, r)
    return ranks.victim(rank, r, top)


@numba.njit(cache=True, inline="always")
def _touch(pair: bool, rank: np.ndarray, r: int, way: int) -> None:
    """:func:`.ranks.touch`, or :func:`.ranks.touch2` with ``pair`` (2 ways)."""
    if pair:
        ranks.touch2(rank, r, way)
    else:
        ranks.touch(rank, r, way)


@numba.njit(cache=True, inline="always")
def _count(served: np.ndarray, row: np.uint64, cls: np.ndarray, kind: np.ndarray, n: int,
           level: int, by: int) -> None:
    """Add ``by`` to the count of access ``n`` served by ``level`` (flat, see
    :func:`_run_levelwise`)."""
    u = np.uint64
    served[((row + u(cls[n])) * u(NKINDS) + u(kind[n])) * u(NLEVELS) + u(level)] += by


@numba.njit(cache=True, inline="always")
def _decode(fetch_only, addr, kind, n, shift):
    """Access ``n``: ``(address >> shift, its line, whether a fetch, whether a store)``.
    ``fetch_only`` is a constant at each call (see :func:`_l1_block`): no ``kind`` is read."""
    a = addr[n] >> np.uint64(shift)
    if fetch_only:
        return a, np.int64(a), True, np.uint8(0)
    k = kind[n]
    return a, np.int64(a), k == IFETCH, np.uint8(k == STORE)


@numba.njit(cache=True, inline="always")
def _l1_block(match, ordered, pair, fetch_only, tags, dirty, rank, oi, od, ri, rd, mi, md, wi, wd,
              lru_i, lru_d, shift, addr, kind, lo, hi, served_out, ev_line, ev_org, fpr, fi, fd,
              fsi, fsd):
    """Accesses ``lo..hi`` through the L1i (fetches) and L1d (loads, stores).

    ``fetch_only`` is a constant at each call: True compiles a loop for a stream of
    instruction fetches only (most traces have no data accesses), without the per-access
    choice of cache (5-27 % faster on the fetch lines of barrier and iscp). The L1s keep
    their order as ranks (:mod:`.ranks`, sets at ``ri``/``rd``); ``ordered`` False (a constant:
    direct-mapped L1s) keeps none; ``pair`` (a constant: two 2-way L1s) matches and ranks in
    scalar code (:func:`_match2`, :func:`_touch`).

    A hit is served here (:func:`~.kernels._count_pairs` counted it, :func:`_l1_lanes` marked
    it). A miss fills the L1 (and its way's fingerprint in the mirror, at ``fi``/``fd`` plus
    ``fsi``/``fsd`` per set: :func:`_held_mirror`) and queues, for the L2, a demand
    (``ev_org`` = the access) and then the dirty victim if any (``ev_org`` = -1); the L2 moves
    the miss's count. Returns ``(queued events, dirty evictions)``.
    """
    u = np.uint64
    mski = (u(1) << u(wi)) - u(1)
    mskd = (u(1) << u(wd)) - u(1)
    e = 0
    writebacks = 0
    # an unsigned index: numba adds a wrap-around select to every signed one
    for n in range(u(lo), u(hi)):
        a, line, fetch, st = _decode(fetch_only, addr, kind, n, shift)
        # fetches and data accesses interleave unpredictably: selects, not branches
        w = wi if fetch else wd
        s = a & (mi if fetch else md)
        base = (oi if fetch else od) + s * u(w)
        r = (ri if fetch else rd) + s * u(ranks.STRIDE)
        m = match(tags, base, line) & (mski if fetch else mskd)
        if m != u(0):
            way = u(trailing_zeros(m))
            dirty[base + way] |= st
            if ordered and (lru_i if fetch else lru_d):
                _touch(pair, rank, r, way)
        else:
            way = _victim(pair, rank, r, w - 1) if ordered else u(0)
            i = base + way
            victim = tags[i]
            victim_dirty = dirty[i]
            tags[i] = line
            dirty[i] = st
            fpr[(fi if fetch else fd) + s * (fsi if fetch else fsd) + way] = _print(line)
            if ordered:
                _touch(pair, rank, r, way)
            ev_line[e] = line
            ev_org[e] = n
            e += 1
            # an invalid way is never dirty; only the L1d has dirty lines
            if victim_dirty:
                writebacks += 1
                ev_line[e] = victim
                ev_org[e] = -1
                e += 1
    return e, writebacks


@numba.njit(cache=True, inline="always")
def _l1_direct(fetch_only, tags, dirty, oi, od, mi, md, shift, addr, kind, lo, hi, served_out,
               ev_line, ev_org, fpr, fi, fd, fsi, fsd):
    """:func:`_l1_block` for direct-mapped L1s, without a branch on hit or miss (as
    :func:`~.kernels._direct_mapped`): every access writes its way and a queue slot that only
    a miss keeps. A branch mispredicts at every change, which cost more than the access. One
    way has no order to keep: no stamp is written (reading FIFO's back made the single cache's
    loop 1.7-3.4x slower, see :func:`~.kernels._direct_mapped`)."""
    e = 0
    writebacks = 0
    for n in range(np.uint64(lo), np.uint64(hi)):
        a, line, fetch, st = _decode(fetch_only, addr, kind, n, shift)
        s = a & (mi if fetch else md)
        i = (oi if fetch else od) + s
        old = tags[i]
        hit = np.int64(old == line)
        old_dirty = np.int64(dirty[i])
        tags[i] = line
        fpr[(fi if fetch else fd) + s * (fsi if fetch else fsd)] = _print(line)
        dirty[i] = st | np.uint8(old_dirty & hit)
        ev_line[e] = line
        ev_org[e] = n
        e += 1 - hit
        # an invalid way is never dirty
        victim = (1 - hit) & old_dirty
        ev_line[e] = old
        ev_org[e] = -1
        e += victim
        writebacks += victim
    return e, writebacks


@numba.njit(cache=True, inline="always")
def _l1_lanes(fetch_only, lanes, branchless, tags, dirty, rank, oi, od, ri, rd, mi, md, wi, wd,
              lru_i, lru_d, shift, addr, kind, lo, hi, served_out, ev_line, ev_org, fpr, fi, fd,
              fsi, fsd):
    """:func:`_l1_block` with the set operations of ``lanes`` ways; direct-mapped L1s by
    :func:`_l1_direct` when ``branchless``, else by a scalar compare. (A branch-free loop for
    2-way LRU L1s, as the single cache's, measured 4-16 % slower here: every access writes a
    queue slot too.)

    Every access of the block is first marked served by the L1: the lower levels mark the
    misses they serve, and the loops store nothing on a hit (with unsigned loop indices and
    :func:`.ranks.touch` reading the way's rank as a byte, 7-43 % faster on the fetch lines of
    barrier and iscp, 4 and 8 ways).
    """
    for n in range(lo, hi):
        served_out[n] = 0
    if lanes == 1:
        if branchless:
            return _l1_direct(fetch_only, tags, dirty, oi, od, mi, md, shift, addr, kind, lo, hi,
                              served_out, ev_line, ev_org, fpr, fi, fd, fsi, fsd)
        return _l1_block(_match1, False, False, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                         mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                         ev_line, ev_org, fpr, fi, fd, fsi, fsd)
    if lanes <= 2 and wi == 2 and wd == 2:
        return _l1_block(_match2, True, True, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                         mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                         ev_line, ev_org, fpr, fi, fd, fsi, fsd)
    if lanes <= 2:
        return _l1_block(_M2, True, False, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                         mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                         ev_line, ev_org, fpr, fi, fd, fsi, fsd)
    if lanes <= 4:
        return _l1_block(_M4, True, False, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                         mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                         ev_line, ev_org, fpr, fi, fd, fsi, fsd)
    if lanes <= 8:
        return _l1_block(_M8, True, False, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                         mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                         ev_line, ev_org, fpr, fi, fd, fsi, fsd)
    return _l1_block(_M16, True, False, fetch_only, tags, dirty, rank, oi, od, ri, rd,
                     mi, md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                     ev_line, ev_org, fpr, fi, fd, fsi, fsd)


@numba.njit(cache=True, inline="always")
def _lower(find, oldest, ordered, args):
    """The events queued for one lower level (``level`` 1 the L2, 2 the L3), in order.

    ``find`` and ``oldest`` are a lane count's :data:`.simd.FIND` and :data:`.simd.OLDEST` (or
    :func:`.simd.find` and :func:`.simd.oldest` for any ways), constants at each call: a loop
    per lane count measured 5-20 % faster per event than one with a branch on the ways
    (:func:`_lower_lanes`). The level is LRU (``lru``) or FIFO. A direct-mapped level
    (``ordered`` False, a constant) has no order to keep: it writes no stamps, and the last
    level prefetches its dirty bits instead (3-37 % faster on 1-way fetch lines of apache,
    chase-mid, chase-small and oltp, most on the short chase streams, whose L2 and L3 are cold).

    A demand hit is served here; a demand miss fills the level and is served by memory at the
    last level, else queued for the next one (then the dirty victim). A write-back hit only
    sets the dirty bit; a write-back miss allocates the line dirty (the rules of
    :mod:`.kernels`). Returns ``(clock, queued events, dirty evictions, write-back misses,
    demands, demand hits, last-level demand misses another core's private cache held)``: the
    other cores' caches are as they were when the run began, as in :mod:`.kernels`, since a
    run is one core's.

    With ``each``, every demand moves its access's count to the level that serves it here (see
    :func:`_run_levelwise`); without, the caller moves them all at once from the returned
    figures (one class and kind: every access has the same counters, and updating the same
    counter at every event made each event wait for the previous one).
    """
    (tags, dirty, stamp, now, base0, mask, ways, lru, level, last, n_in, in_line, in_org,
     out_line, out_org, kind, cls, served_out, served, row, each, off, geo, cores, core, fpr,
     fo, touch) = args
    e = 0
    held = 0
    writebacks = 0
    wb_misses = 0
    demands = 0
    hits = 0
    first = level == 1
    u = np.uint64
    own = u(1) << u(core & 63)
    # core c's bit in a word says nothing of the others that share it (more than 64 cores)
    mine = own if cores <= 64 else u(0)
    filtered = last and cores > FILTER_ABOVE
    seen = ~u(0)
    for j in range(n_in):
        if last and j + AHEAD < n_in:       # (last is a constant at each call)
            ahead = base0 + (in_line[j + AHEAD] & mask) * ways
            simd.prefetch(tags, ahead)
            if ordered:
                simd.prefetch(stamp, ahead)
            else:
                simd.prefetch(dirty, ahead)
        line = in_line[j]
        n = in_org[j]
        demands += n >= 0
        if filtered and n >= 0:
            # the touch filter (_held_among): this core asked for a line of this region
            t = _region(line)
            seen = touch[t]
            if seen & own == u(0):
                touch[t] = seen | own
        if each and first and n >= 0:
            # an L1 miss: counted as an L1 hit so far (_count_pairs)
            _count(served, row, cls, kind, n, 0, -1)
        base = base0 + (line & mask) * ways
        i = find(tags, base, ways, line)
        if i >= 0:
            if n >= 0:
                now += 1
                if lru and ordered:
                    stamp[i] = now
                served_out[n] = level
                hits += 1
                if each:
                    _count(served, row, cls, kind, n, level, 1)
            else:
                dirty[i] = 1
            continue
        if n >= 0:
            if last:
                served_out[n] = level + 1
                if _held_among(fpr, fo, tags, off, geo, cores, core, line, seen & ~mine):
                    held += 1
                if each:
                    _count(served, row, cls, kind, n, level + 1, 1)
            else:
                out_line[e] = line
                out_org[e] = n
                e += 1
        else:
            wb_misses += 1
        now += 1
        # the way with the smallest stamp: an invalid one, else the LRU / first-filled
        i = oldest(stamp, base, ways)
        v, vd = tags[i], dirty[i]
        tags[i] = line
        dirty[i] = n < 0
        if first:                   # the L2's mirror (see _held_mirror)
            fpr[fo[2] + ((line & mask) * cores + core) * ways + (i - base)] = _print(line)
        if ordered:
            stamp[i] = now
        if vd:                      # an invalid way is never dirty
            writebacks += 1
            if not last:
                out_line[e] = v
                out_org[e] = -1
                e += 1
    return now, e, writebacks, wb_misses, demands, hits, held


@numba.njit(cache=True, inline="always")
def _find1(tags: np.ndarray, base: int, ways: int, line: int) -> int:
    return base if tags[base] == line else -1


@numba.njit(cache=True, inline="always")
def _oldest1(stamp: np.ndarray, base: int, ways: int) -> int:
    return base


@numba.njit(cache=True, inline="always")
def _lower_lanes(tags, dirty, stamp, now, base0, mask, ways, lru, level, last, n_in, in_line,
                 in_org, out_line, out_org, kind, cls, served_out, served, row, each, off, geo,
                 cores, core, fpr, fo, touch):
    """:func:`_lower` with the set operations of the smallest vector that holds ``ways`` (any
    ways above 16)."""
    # the arguments as one tuple: numba inlines no call with *args
    args = (tags, dirty, stamp, now, base0, mask, ways, lru, level, last, n_in, in_line, in_org,
            out_line, out_org, kind, cls, served_out, served, row, each, off, geo, cores, core,
            fpr, fo, touch)
    if ways == 1:
        return _lower(_find1, _oldest1, False, args)
    if ways <= 2:
        return _lower(_F2, _O2, True, args)
    if ways <= 4:
        return _lower(_F4, _O4, True, args)
    if ways <= 8:
        return _lower(_F8, _O8, True, args)
    if ways <= simd.LANES:
        return _lower(_F16, _O16, True, args)
    return _lower(simd.find, simd.oldest, True, args)


@numba.njit(cache=True, inline="always")
def _row(served: np.ndarray, cores: int, core: int) -> np.uint64:
    """Core ``core``'s first class in ``served`` (flat, see :func:`_run_levelwise`)."""
    return np.uint64(core) * np.uint64(served.shape[0] // (cores * NKINDS * NLEVELS))


@numba.njit(cache=True, nogil=True, _nrt=False)
def _run_levelwise(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, rank: np.ndarray,
                   clk: np.ndarray, off: np.ndarray, roff: np.ndarray, geo: np.ndarray,
                   cores: int, shift: int, core: int, addr: np.ndarray,
                   kind: np.ndarray, cls: np.ndarray, served_out: np.ndarray,
                   served: np.ndarray, events: np.ndarray, l2_line: np.ndarray,
                   l2_org: np.ndarray, l3_line: np.ndarray, l3_org: np.ndarray,
                   hist: np.ndarray, mode: np.ndarray, fpr: np.ndarray,
                   fo: np.ndarray, touch: np.ndarray) -> None:
    """:func:`~.kernels._run_hierarchy` for a non-inclusive, non-coherent hierarchy of LRU and
    FIFO levels with L1s of at most 16 ways, a block of accesses one level at a time.

    The L1s keep their order as ranks (:mod:`.ranks`): the L1i of core ``c`` at
    ``rank[roff[c]]``, its L1d at ``rank[roff[cores + c]]``; the L2 and L3 as stamps.
    ``served`` is flat, ``((core * classes + cls) * NKINDS + kind) * NLEVELS + level``; the
    scratch arrays hold ``2 * block`` (``l2_*``) and ``4 * block`` (``l3_*``) events, and
    ``hist`` is ``4 * classes * NKINDS`` zeros. ``mode[0]`` carries, from one run to the next,
    whether direct-mapped L1s take the next block branch-free. ``fpr`` is the mirror of the
    private caches' fingerprints, level ``p`` from ``fo[p]`` (:func:`_held_mirror`), which
    the L1 and L2 fills keep; ``touch`` the ``2**TOUCH_BITS`` words of the filter in front of
    it (:func:`_held_among`), which the L3's demands keep.

    Every access is first counted as an L1 hit (:func:`~.kernels._count_pairs`), then
    :func:`_levelwise` runs them.
    """
    kinds = 0
    for n in range(kind.shape[0]):
        kinds |= kind[n]
    one_key = _count_pairs(cls, kind, NKINDS, hist, served,
                           _row(served, cores, core) * np.uint64(NKINDS * NLEVELS), NLEVELS)
    _levelwise(tags, dirty, stamp, rank, clk, off, roff, geo, cores, shift, core, addr, kind,
               cls, served_out, served, events, l2_line, l2_org, l3_line, l3_org, mode, fpr, fo,
               touch, kinds == IFETCH, one_key)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _levelwise(tags, dirty, stamp, rank, clk, off, roff, geo, cores, shift, core, addr, kind, cls,
               served_out, served, events, l2_line, l2_org, l3_line, l3_org, mode, fpr, fo, touch,
               fetch_only, one_key):
    """:func:`_run_levelwise` after its counting: every access is already counted in
    ``served`` as an L1 hit of its class and kind, ``fetch_only`` says whether every access is
    a fetch, ``one_key`` whether every access has the same class and kind. A caller that
    knows these from building the accesses (the sandbox's chunk kernel) enters here and saves
    two passes over them."""
    c = core
    u = np.uint64
    row = _row(served, cores, c)
    oi, od = u(off[c]), u(off[cores + c])
    ri, rd = u(roff[c]), u(roff[cores + c])
    mi, md = u(geo[0, G_MASK]), u(geo[1, G_MASK])
    wi, wd = geo[0, G_WAYS], geo[1, G_WAYS]
    lru_i = geo[0, G_POLICY] == policies.LRU
    lru_d = geo[1, G_POLICY] == policies.LRU
    lru_2 = geo[2, G_POLICY] == policies.LRU
    lru_3 = geo[3, G_POLICY] == policies.LRU
    b2, b3 = off[2 * cores + c], off[3 * cores]
    # this core's ways in the mirror's set 0 of its L1i and L1d, and the step per set
    fi, fd = u(fo[0] + c * wi), u(fo[1] + c * wd)
    fsi, fsd = u(cores * wi), u(cores * wd)
    block = l2_line.shape[0] // 2
    lanes = max(wi, wd)
    # a miss moves its access's count to the level that serves it, at once at the end when
    # every access has the same class and kind
    each = not one_key
    now = clk[0]
    wb1 = wb2 = wb3 = miss2 = miss3 = held3 = 0
    d2 = h2 = d3 = h3 = 0
    # the first block goes as the last run's last block did; a new hierarchy's first block, from
    # cold caches, mostly misses: branch-free (measured 4-27 % faster on the short chase streams,
    # the same on barrier and iscp, whose later blocks rarely miss)
    branchless = mode[0] != 0
    for lo in range(0, addr.shape[0], block):
        hi = min(addr.shape[0], lo + block)
        # one copy of the L1 loop per vector width, as in kernels._set_assoc, and per kind
        if fetch_only:
            n2, w = _l1_lanes(True, lanes, branchless, tags, dirty, rank, oi, od, ri, rd, mi,
                              md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                              l2_line, l2_org, fpr, fi, fd, fsi, fsd)
        else:
            n2, w = _l1_lanes(False, lanes, branchless, tags, dirty, rank, oi, od, ri, rd, mi,
                              md, wi, wd, lru_i, lru_d, shift, addr, kind, lo, hi, served_out,
                              l2_line, l2_org, fpr, fi, fd, fsi, fsd)
        branchless = n2 > BRANCHLESS_ABOVE * (hi - lo)
        wb1 += w
        now, n3, w, m, d, h, _ = _lower_lanes(tags, dirty, stamp, now, b2, geo[2, G_MASK],
                                              geo[2, G_WAYS], lru_2, 1, False, n2, l2_line,
                                              l2_org, l3_line, l3_org, kind, cls, served_out,
                                              served, row, each, off, geo, cores, c, fpr, fo,
                                              touch)
        wb2 += w
        miss2 += m
        d2 += d
        h2 += h
        now, _, w, m, d, h, held = _lower_lanes(tags, dirty, stamp, now, b3, geo[3, G_MASK],
                                                geo[3, G_WAYS], lru_3, 2, True, n3, l3_line,
                                                l3_org, l3_line, l3_org, kind, cls, served_out,
                                                served, row, each, off, geo, cores, c, fpr, fo,
                                                touch)
        held3 += held
        wb3 += w
        miss3 += m
        d3 += d
        h3 += h
    clk[0] = now
    mode[0] = branchless
    if one_key and addr.shape[0]:
        # L1 misses go down from the L1 count to where they were served
        _count(served, row, cls, kind, 0, 0, -d2)
        _count(served, row, cls, kind, 0, 1, h2)
        _count(served, row, cls, kind, 0, 2, h3)
        _count(served, row, cls, kind, 0, 3, d3 - h3)
    events[c, EV_WB_L1D] += wb1
    events[c, EV_WB_L2] += wb2
    events[c, EV_WB_L3] += wb3
    events[c, EV_WBMISS_L2] += miss2
    events[c, EV_WBMISS_L3] += miss3
    events[c, EV_L3_HELD] += held3
