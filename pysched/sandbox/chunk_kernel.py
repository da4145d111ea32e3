"""The compiled chunk: one numba call runs a chunk's accesses through a core's caches.

:func:`_chunk_levelwise` and :func:`_chunk_hierarchy` (one per kernel of
:class:`~pysched.models.caches.hierarchy.Hierarchy`) do, for instructions ``[lo, hi)`` of one
stream of :class:`~.item_streams.ItemStreams`, what the plain engine's ``accesses`` and
``start_chunk`` do with numpy: find the accesses (two binary searches over the stream's
offsets), move a copy's own data to its frames (``data_add`` on loads and stores, only the
private ones when ``use_priv``), run them through the hierarchy, sum the stall cycles
(:func:`stall_sum`, the plain engine's order), count memory accesses (LLC misses) and set the
Page-heatmap bits of the fetched frames (seed 000, section 3.2). A chunk that starts with a
context switch on the traced switch path runs the path's next instructions first in the same
call (the plain engine's ``_switch_cycles``): the caches see the switch's accesses, then the
chunk's, as in the plain engine, and the switch's stall is summed piece by piece as there.

They also keep the chunk's statistics (the duration, the per-core, per-type, per-thread and
per-item sums) exactly as the plain engine's ``start_chunk`` does, in the same order of
floating-point operations. The kernels take one :class:`ChunkArgs` (the arrays, packed once
by :func:`chunk_args`) and scalars; the engine (:mod:`.compiled`) validates once, packs the
arguments and calls the machine code for their types (:func:`entry_point`). The plain engine
(:class:`~.engine.Engine`) is their twin in the tests.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.experimental import structref
from numba.extending import overload

from pysched.heatmaps.hashing import SHIFTS
from pysched.models.caches.kernels import _run_hierarchy
from pysched.models.caches.levelwise import _levelwise, _row
from pysched.models.codes import IFETCH, NKINDS, NLEVELS, STORE

#: Rows of a stall table (kinds) times its columns (levels).
_CELLS = 3 * NLEVELS
#: The engine's per-core floats (``Engine.core_f``), one row each: base CPI, frequency (Hz)
#: and C * V**2 of the operating point; cycles a policy charged, waiting and paid; base,
#: stall, busy (seconds) and dynamic energy sums; frequency and C * V**2 of the running
#: chunk, and when it ends.
CORE_ROWS = ("cpi", "freq", "cap_v2", "core_charge", "s_charged", "s_base", "s_stall",
             "s_busy", "s_dyn", "core_freq", "core_chunk_cv2", "core_until")
(_CPI, _FREQ, _CV2, _CHARGE, _CHARGED, _BASE, _STALL, _BUSY, _DYN, _CFREQ, _CCV2,
 _UNTIL) = range(len(CORE_ROWS))
_PAGE_SHIFT = 12


def entry_point(kernel, args: tuple):
    """The machine code of numba dispatcher ``kernel`` for the types of ``args`` (loaded from
    numba's cache or compiled now), as a function that takes arguments of those types.

    Calling it skips the dispatcher's search for an overload by the arguments' types on every
    call, about half of a call's cost for a kernel of many arguments; the arguments are still
    converted to the machine types (a Python int or a numpy integer where the kernel takes an
    int64, for instance), so a caller passes values of the types ``args`` had.
    """
    return kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))


@structref.register
class _ChunkArgsType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class ChunkArgs(structref.StructRefProxy):
    """Everything a chunk kernel reads and writes but its scalars, as one object (numba
    converts one argument at a call instead of thirty-odd arrays, about 1.6 us a call): made by
    :func:`chunk_args`; its fields are tuples, see there."""


structref.define_boxing(_ChunkArgsType, ChunkArgs)
_ARG_FIELDS = ("hier", "streams", "bufs", "state")


def _new_args(hier, streams, bufs, state):
    raise NotImplementedError("compiled code only (chunk_args)")


@overload(_new_args)
def _ol_new_args(hier, streams, bufs, state):
    typ = _ChunkArgsType(list(zip(_ARG_FIELDS, (hier, streams, bufs, state))))

    def impl(hier, streams, bufs, state):
        a = structref.new(typ)
        a.hier = hier
        a.streams = streams
        a.bufs = bufs
        a.state = state
        return a
    return impl


@numba.njit(cache=True)
def chunk_args(head, tail, stream, switch, bufs, stats, flags):
    """The :class:`ChunkArgs` of an engine (a constructor in compiled code, cached): fields
    ``hier = (head, tail)``, ``streams = (stream, switch)``, ``bufs`` and ``state = (stats,
    flags)``.

    Parameters
    ----------
    head, tail : tuple
        The hierarchy kernel's arguments before and after a run's accesses
        (:meth:`~pysched.models.caches.hierarchy.Hierarchy._pack`).
    stream : tuple
        The item streams: ``(off, line, kind, private, shift)``.
    switch : tuple
        The traced switch path's stream: ``(off, line, kind, private, shift, instructions in
        one pass)`` (any stream when the switch cost is a constant).
    bufs : tuple
        Scratch: addresses, kinds, classes and levels served (one per access of the longest
        chunk and switch together), 3 x NLEVELS counts, and the ends of the switch's pieces.
    stats : tuple
        The engine's statistics the kernel keeps: heat, core_f, s_insns, task_f, task_i,
        s_type_insns, s_type_cycles, item_cycles, stall2d.
    flags : tuple
        ``(heat_bits, use_priv, sched_class)``.
    """
    return _new_args((head, tail), (stream, switch), bufs, (stats, flags))


@numba.njit(cache=True, inline="always")
def _stall_sum(counts: np.ndarray, table: np.ndarray) -> float:
    s = 0.0
    for k in range(_CELLS):
        s += counts[k] * table[k]
    return s


def stall_sum(counts: np.ndarray, table: np.ndarray) -> float:
    """Stall cycles of ``counts`` accesses per (kind, level) cell (flat, kind-major) at
    ``table``'s cycles per cell (flat :func:`~pysched.models.cores.timing.stall_table`),
    summed cell by cell in order: the plain engine and the kernels add in the same order, so
    their results are equal to the last bit."""
    s = 0.0
    for k in range(_CELLS):
        s += float(counts[k]) * float(table[k])
    return s


@numba.njit(cache=True, inline="always")
def _page_bit(pf: np.uint64, nbits: int) -> int:
    h = np.uint64(0)
    for s in SHIFTS:
        h += pf >> np.uint64(s)
    return int(h % np.uint64(nbits))


@numba.njit(cache=True, inline="always")
def _gather(s_off, s_line, s_kind, s_priv, lshift, p0, p1, lo, hi, cls_id, data_add, use_priv,
            buf_addr, buf_kind, buf_cls):
    """Accesses of offsets ``[lo, hi)`` of the stream at ``[p0, p1)`` into the buffers:
    ``(count, fetches, stores)``."""
    a = p0 + np.searchsorted(s_off[p0:p1], lo)
    b = p0 + np.searchsorted(s_off[p0:p1], hi)
    n = b - a
    add = np.uint64(data_add)
    sh = np.uint64(lshift)
    fetches = stores = 0
    for j in range(n):
        k = s_kind[a + j]
        ad = np.uint64(s_line[a + j]) << sh
        if k != 0 and (not use_priv or s_priv[a + j]):
            ad += add
        buf_addr[j] = ad
        buf_kind[j] = k
        buf_cls[j] = cls_id
        fetches += k == IFETCH
        stores += k == STORE
    return n, fetches, stores


@numba.njit(cache=True, inline="always")
def _account(n, buf_addr, buf_kind, buf_served, stall_flat, counts, heat, heat_row, heat_bits):
    """Stall cycles and memory accesses of the ``n`` accesses served; heat bits set."""
    counts[:] = 0
    llc = 0
    last_pf = np.uint64(0xFFFFFFFFFFFFFFFF)
    for j in range(n):
        lv = buf_served[j]
        counts[buf_kind[j] * NLEVELS + lv] += 1
        if lv == NLEVELS - 1:
            llc += 1
        if heat_bits > 0 and buf_kind[j] == 0:
            pf = buf_addr[j] >> np.uint64(_PAGE_SHIFT)
            if pf != last_pf:
                heat[heat_row, _page_bit(pf, heat_bits)] = True
                last_pf = pf
    return _stall_sum(counts, stall_flat), llc


@numba.njit(cache=True, inline="always")
def _book(core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles, c, n,
          stall, llc, ty, extra, tg, g, now):
    """The chunk's statistics, as the plain engine's ``start_chunk`` keeps them: its
    duration."""
    base = n * core_f[_CPI, c]
    cycles = base + stall + extra
    # the policy's own routine runs first and is no item's, type's or thread's (engine)
    charged = core_f[_CHARGE, c]
    if charged != 0.0:
        core_f[_CHARGED, c] += charged
        core_f[_CHARGE, c] = 0.0
    freq = core_f[_FREQ, c]
    dur = (cycles + charged) / freq
    s_insns[c] += n
    core_f[_BASE, c] += base
    core_f[_STALL, c] += stall
    core_f[_BUSY, c] += dur
    core_f[_DYN, c] += (cycles + charged) * core_f[_CV2, c]
    s_type_insns[ty] += n
    s_type_cycles[ty] += cycles
    if tg >= 0:
        task_i[0, tg] += n
        task_f[0, tg] += cycles / freq
        task_f[1, tg] += cycles
        task_i[1, tg] += llc
    item_cycles[g] += cycles
    core_f[_CFREQ, c] = freq
    core_f[_CCV2, c] = core_f[_CV2, c]
    core_f[_UNTIL, c] = now + dur
    return dur


@numba.njit(cache=True, inline="always")
def _gather_all(a, p0, p1, lo, hi, ty, data_add, sw_lo, sw_n):
    """Into the buffers, in the order the caches see them: the traced switch path's
    instructions ``[sw_lo, sw_lo + sw_n)`` of its cyclic stream (each pass over its end a
    piece, whose end goes to ``cuts``), then the chunk's accesses. Returns the number of
    pieces and of accesses, and the switch's and the chunk's accesses of each kind (tuples
    indexed by kind)."""
    buf_addr, buf_kind, buf_cls, _, _, cuts = a.bufs
    w_off, w_line, w_kind, w_priv, w_shift, w_total = a.streams[1]
    _, use_priv, sched_class = a.state[1]
    m, pieces = 0, 0
    sw_f = sw_s = 0
    start, left = sw_lo, sw_n
    while left > 0:
        take = min(left, w_total - start)
        k, f, s = _gather(w_off, w_line, w_kind, w_priv, w_shift, 0, len(w_off), start,
                          start + take, sched_class, 0, False, buf_addr[m:], buf_kind[m:],
                          buf_cls[m:])
        m += k
        sw_f += f
        sw_s += s
        cuts[pieces] = m
        pieces += 1
        left -= take
        start = 0
    s_off, s_line, s_kind, s_priv, s_shift = a.streams[0]
    k, f, s = _gather(s_off, s_line, s_kind, s_priv, s_shift, p0, p1, lo, hi, ty, data_add,
                      use_priv, buf_addr[m:], buf_kind[m:], buf_cls[m:])
    return pieces, m + k, (sw_f, m - sw_f - sw_s, sw_s), (f, k - f - s, s)


@numba.njit(cache=True, inline="always")
def _count_l1(served, row, sw_cls, sw, cls, ch):
    """Every access of the buffers counted in ``served`` as an L1 hit of its class and kind
    (what :func:`~pysched.models.caches.kernels._count_pairs` does access by access), from
    the switch's (class ``sw_cls``) and the chunk's (class ``cls``) accesses of each kind, as
    :func:`_gather_all` returns them. Returns ``(whether every access is a fetch, whether
    every access has the same class and kind)``."""
    u = np.uint64
    keys = 0
    data = 0
    for kd in range(NKINDS):
        x, y = sw[kd], ch[kd]
        if x:
            served[((row + u(sw_cls)) * u(NKINDS) + u(kd)) * u(NLEVELS)] += x
            keys += 1
        if y:
            served[((row + u(cls)) * u(NKINDS) + u(kd)) * u(NLEVELS)] += y
            if not (x and sw_cls == cls):
                keys += 1
        if kd != IFETCH:
            data += x + y
    return data == 0, keys == 1


@numba.njit(cache=True, inline="always")
def _settle(a, core, pieces, n, lo, hi, ty, extra, tg, g, now, sw_n):
    """After the hierarchy served the buffers: ``(duration, switch cycles)``. The switch
    costs its instructions at the base CPI plus the stall cycles of each piece, summed piece by
    piece (the plain engine's ``_switch_cycles``), and is paid by the chunk with ``extra``;
    the chunk's statistics are kept (:func:`_book`)."""
    buf_addr, buf_kind, _, buf_served, counts, cuts = a.bufs
    (heat, core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles,
     stall2d) = a.state[0]
    heat_bits = a.state[1][0]
    table = stall2d[core]
    m = 0
    sw = 0.0
    if sw_n > 0:
        stall = 0.0
        for p in range(pieces):
            e = cuts[p]
            s = 0.0
            if e > m:
                s, _ = _account(e - m, buf_addr[m:e], buf_kind[m:e], buf_served[m:e], table,
                                counts, heat, 0, 0)
            stall += s
            m = e
        sw = sw_n * core_f[_CPI, core] + stall
        extra = sw + extra
    stall, llc = 0.0, 0
    if n > m:
        stall, llc = _account(n - m, buf_addr[m:n], buf_kind[m:n], buf_served[m:n], table,
                              counts, heat, ty, heat_bits)
    return _book(core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles,
                 core, hi - lo, stall, llc, ty, extra, tg, g, now), sw


@numba.njit(cache=True)
def _chunk_levelwise(a, core, p0, p1, lo, hi, ty, data_add, extra, tg, g, now, sw_lo, sw_n):
    """One chunk of item stream ``[p0, p1)``, instructions ``[lo, hi)``, after ``sw_n``
    instructions of the switch path (none: 0), through a level-at-a-time hierarchy
    (:func:`~pysched.models.caches.levelwise._levelwise`): ``(duration, switch cycles)``."""
    pieces, n, sw, ch = _gather_all(a, p0, p1, lo, hi, ty, data_add, sw_lo, sw_n)
    if n > 0:
        tags, dirty, stamp, rank, clk, off, roff, geo, cores, hshift = a.hier[0]
        served, events, l2_line, l2_org, l3_line, l3_org, _, mode, fpr, fo, touch = a.hier[1]
        buf_addr, buf_kind, buf_cls, buf_served, _, _ = a.bufs
        # the counting _run_levelwise would do, from what the gather counted
        fetch_only, one_key = _count_l1(served, _row(served, cores, core), a.state[1][2], sw,
                                        ty, ch)
        _levelwise(tags, dirty, stamp, rank, clk, off, roff, geo, cores, hshift, core,
                   buf_addr[:n], buf_kind[:n], buf_cls[:n], buf_served[:n], served, events,
                   l2_line, l2_org, l3_line, l3_org, mode, fpr, fo, touch, fetch_only, one_key)
    return _settle(a, core, pieces, n, lo, hi, ty, extra, tg, g, now, sw_n)


@numba.njit(cache=True)
def _chunk_hierarchy(a, core, p0, p1, lo, hi, ty, data_add, extra, tg, g, now, sw_lo, sw_n):
    """:func:`_chunk_levelwise` through the general hierarchy kernel (:func:`_run_hierarchy`)."""
    pieces, n, _, _ = _gather_all(a, p0, p1, lo, hi, ty, data_add, sw_lo, sw_n)
    if n > 0:
        tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng, hshift = a.hier[0]
        served, events, sharers = a.hier[1]
        buf_addr, buf_kind, buf_cls, buf_served, _, _ = a.bufs
        _run_hierarchy(tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng,
                       hshift, core, buf_addr[:n], buf_kind[:n], buf_cls[:n], buf_served[:n],
                       served, events, sharers)
    return _settle(a, core, pieces, n, lo, hi, ty, extra, tg, g, now, sw_n)
