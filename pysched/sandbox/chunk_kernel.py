"""The compiled chunk: one numba call runs a chunk's accesses through a core's caches.

:func:`_chunk_levelwise` and :func:`_chunk_hierarchy` (one per kernel of
:class:`~pysched.models.caches.hierarchy.Hierarchy`) do, for instructions ``[lo, hi)`` of one
stream of :class:`~.item_streams.ItemStreams`, what the plain engine's ``accesses`` and
``start_chunk`` do with numpy: find the accesses (two binary searches over the stream's
offsets), move a copy's own data to its frames (``data_add`` on loads and stores, only the
private ones when ``use_priv``), run them through the hierarchy, sum the stall cycles
(:func:`stall_sum`, the plain engine's order), count memory accesses (LLC misses) and set the
Page-heatmap bits of the fetched frames (seed 000, section 3.2).

They also keep the chunk's statistics (the duration, the per-core, per-type, per-thread and
per-item sums) exactly as the plain engine's ``start_chunk`` does, in the same order of
floating-point operations. Kernels take arrays and scalars only; the engine
(:mod:`.compiled`) validates once, packs the arguments and calls the machine code for their
types (:func:`entry_point`). The plain engine (:class:`~.engine.Engine`) is their twin in
the tests.
"""
from __future__ import annotations

import numba
import numpy as np

from pysched.heatmaps.hashing import SHIFTS
from pysched.models.caches.kernels import _run_hierarchy
from pysched.models.caches.levelwise import _run_levelwise
from pysched.models.codes import NLEVELS

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
    call, about half of a call's cost for the chunk kernels' fifty-odd arguments; the
    arguments are still converted to the machine types (a Python int or a numpy integer where
    the kernel takes an int64, for instance), so a caller passes values of the types ``args``
    had.
    """
    return kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))


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
    their count and first position."""
    a = p0 + np.searchsorted(s_off[p0:p1], lo)
    b = p0 + np.searchsorted(s_off[p0:p1], hi)
    n = b - a
    add = np.uint64(data_add)
    sh = np.uint64(lshift)
    for j in range(n):
        k = s_kind[a + j]
        ad = np.uint64(s_line[a + j]) << sh
        if k != 0 and (not use_priv or s_priv[a + j]):
            ad += add
        buf_addr[j] = ad
        buf_kind[j] = k
        buf_cls[j] = cls_id
    return n, a


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
def _after(n, buf_addr, buf_kind, buf_served, counts, heat, core_f, s_insns, task_f, task_i,
           s_type_insns, s_type_cycles, item_cycles, stall2d, core, lo, hi, cls_id, heat_row,
           heat_bits, book, extra, tg, g, now):
    """After the hierarchy served the ``n`` accesses: ``(duration, stall cycles)``, the
    statistics kept when ``book``."""
    stall, llc = 0.0, 0
    if n > 0:
        stall, llc = _account(n, buf_addr, buf_kind, buf_served, stall2d[core], counts, heat,
                              heat_row, heat_bits)
    if not book:
        return 0.0, stall
    return _book(core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles,
                 core, hi - lo, stall, llc, cls_id, extra, tg, g, now), stall


@numba.njit(cache=True)
def _chunk_levelwise(tags, dirty, stamp, rank, clk, off, roff, geo, cores, hshift, served, events,
                     l2_line, l2_org, l3_line, l3_org, hist, mode,
                     s_off, s_line, s_kind, s_priv, lshift,
                     buf_addr, buf_kind, buf_cls, buf_served, counts, heat,
                     core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles,
                     stall2d, core, p0, p1, lo, hi, cls_id, data_add, use_priv, heat_row,
                     heat_bits, book, extra, tg, g, now):
    """One chunk through a level-at-a-time hierarchy (:func:`_run_levelwise`): ``(duration,
    stall cycles)``; statistics kept only when ``book`` (a piece of the switch path is not
    a chunk)."""
    n, a = _gather(s_off, s_line, s_kind, s_priv, lshift, p0, p1, lo, hi, cls_id, data_add,
                   use_priv, buf_addr, buf_kind, buf_cls)
    if n > 0:
        _run_levelwise(tags, dirty, stamp, rank, clk, off, roff, geo, cores, hshift, core,
                       buf_addr[:n], buf_kind[:n], buf_cls[:n], buf_served[:n], served, events,
                       l2_line, l2_org, l3_line, l3_org, hist, mode)
    return _after(n, buf_addr, buf_kind, buf_served, counts, heat, core_f, s_insns, task_f,
                  task_i, s_type_insns, s_type_cycles, item_cycles, stall2d, core, lo, hi,
                  cls_id, heat_row, heat_bits, book, extra, tg, g, now)


@numba.njit(cache=True)
def _chunk_hierarchy(tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng,
                     hshift, served, events,
                     s_off, s_line, s_kind, s_priv, lshift,
                     buf_addr, buf_kind, buf_cls, buf_served, counts, heat,
                     core_f, s_insns, task_f, task_i, s_type_insns, s_type_cycles, item_cycles,
                     stall2d, core, p0, p1, lo, hi, cls_id, data_add, use_priv, heat_row,
                     heat_bits, book, extra, tg, g, now):
    """One chunk through the general hierarchy kernel (:func:`_run_hierarchy`)."""
    n, a = _gather(s_off, s_line, s_kind, s_priv, lshift, p0, p1, lo, hi, cls_id, data_add,
                   use_priv, buf_addr, buf_kind, buf_cls)
    if n > 0:
        _run_hierarchy(tags, dirty, stamp, clk, off, geo, cores, inclusive, coherence, rng,
                       hshift, core, buf_addr[:n], buf_kind[:n], buf_cls[:n], buf_served[:n],
                       served, events)
    return _after(n, buf_addr, buf_kind, buf_served, counts, heat, core_f, s_insns, task_f,
                  task_i, s_type_insns, s_type_cycles, item_cycles, stall2d, core, lo, hi,
                  cls_id, heat_row, heat_bits, book, extra, tg, g, now)
