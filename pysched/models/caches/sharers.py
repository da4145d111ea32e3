"""The sharers table: which cores may hold a line in their private caches (numba).

The hierarchy kernel (:mod:`.kernels`) asks which other cores hold a line at an L3 demand
miss of a non-inclusive hierarchy (the held-elsewhere count; an inclusive L3 holds every
private copy, so none is held elsewhere), at a store (coherence invalidates their copies), at
a private miss (coherence cleans their dirty copies) and when an inclusive L3 evicts a line
(back-invalidation). Looking in every core's L1i, L1d and L2 made a coherent, inclusive
replay of 32 cores twice as costly per instruction as one of 8 (find, ``linux``, 2X: 2.05x,
and 3.99x at 64 cores; with this table 1.36x and 2.06x, ``benchmarks/results/
sandbox-coherent.json``). The table, a snoop filter of the kind directory protocols keep,
names the cores to look at.

One entry per slot of a hashed, direct-mapped table (``2 * slot``: the line plus one, 0 for
none; ``2 * slot + 1``: a bit per core). While a line has an entry, its bits are a superset of
the cores whose private caches hold it:

* a core's L2 miss (its L3 demand, the only way a line enters a core's private caches: an L1
  fill after an L2 hit, or an L2 write-back allocation, holds a line that came in that way
  before) sets the core's bit in the line's entry, if it has one (:func:`_mark`);
* a core that drops a copy keeps its bit until a question finds it without the line
  (:func:`~.kernels._held_elsewhere` clears it);
* an entry is made only where the holders are known exactly: after a store invalidated every
  other copy (the storing core alone), after an L3 demand miss looked in every core (those
  that hold the line, and the missing core), at an L3 demand miss of an inclusive hierarchy
  (the missing core alone: the L3 holds every private copy), after an inclusive L3 evicted the
  line from every core (none);
* another line that hashes to the slot replaces the entry: its line is then unknown again.

A line without an entry is looked for in every core, so the answers are those of looking in
every core, always; the table only skips cores. Kept from 9 to 64 cores (a bit per core);
with more, or fewer, the table has no slot and every core is looked at.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

#: Slots per line of the private caches and as many of the L3 (rounded up to a power of two):
#: fewer slots lose more entries to lines that share them, and a line without one is looked
#: for in every core. On chase-mid at 32 cores (coherent, inclusive: machines/coherent.toml,
#: ``linux``, 2X), whose L3 misses evict lines filled long before, 2**20 slots (2 per line of
#: the hierarchy) cost 143-152 ns per instruction against 192-214 with 2**18 (1 per private
#: line) and 138-140 with 2**22.
SLOTS_PER_LINE = 2


#: The table is kept above this many cores: on 8 cores a look in every core cost about what
#: the table's lookup does (find: the same; dss-mem: 3-5 % less), on 16 the table made find
#: 1.15x faster, on 32 dss-mem 1.4x (coherent, inclusive, ``linux``, 2X).
KEPT_ABOVE = 8


def table(cores: int, private: int, l3: int) -> np.ndarray:
    """An empty table for ``cores`` cores whose private caches hold ``private`` lines in all
    and an L3 of ``l3`` lines (counted up to ``private``: a large L3, e.g. 1 GiB, would
    otherwise size a table larger than its tags); one empty slot (none kept) for
    :data:`KEPT_ABOVE` cores or fewer, and above 64."""
    if not KEPT_ABOVE < cores <= 64:
        return np.zeros(2, np.uint64)
    lines = private + min(l3, private)
    slots = 1 << max(int(SLOTS_PER_LINE * lines - 1).bit_length(), 4)
    return np.zeros(2 * slots, np.uint64)


@numba.njit(cache=True, inline="always")
def _bit(core: int) -> np.uint64:
    return np.uint64(1) << np.uint64(core & 63)


@numba.njit(cache=True, inline="always")
def _slot(tab: np.ndarray, line: int) -> np.uint64:
    """Twice the slot of ``line``: a multiplicative hash, its top bits (0 for a one-slot
    table, whose shift would be 64)."""
    u = np.uint64
    slots = u(tab.shape[0] >> 1)
    if slots == u(1):
        return u(0)
    return ((u(line) * u(0x9E3779B97F4A7C15)) >> (u(64) - u(trailing_zeros(slots)))) << u(1)


@numba.njit(cache=True, inline="always")
def _every(cores: int) -> np.uint64:
    """Every core's bit (all 64 with more cores: :func:`_next_core` then visits them all)."""
    if cores >= 64:
        return ~np.uint64(0)
    return (np.uint64(1) << np.uint64(cores)) - np.uint64(1)


@numba.njit(cache=True, inline="always")
def _lookup(tab: np.ndarray, cores: int, line: int):
    """``(index of the line's slot in tab (twice the slot), the cores that may hold line,
    whether it has an entry)``."""
    s = _slot(tab, line)
    if tab[s] == np.uint64(line) + np.uint64(1):
        return s, tab[s + np.uint64(1)], True
    return s, _every(cores), False


@numba.njit(cache=True, inline="always")
def _store(tab: np.ndarray, s: np.uint64, line: int, word: np.uint64) -> None:
    """Give ``line`` the entry at ``s`` (an index from :func:`_slot`): the cores of ``word``,
    which hold it or are filling it, and no other (nothing in a one-slot table)."""
    if tab.shape[0] > 2:
        tab[s] = np.uint64(line) + np.uint64(1)
        tab[s + np.uint64(1)] = word


@numba.njit(cache=True, inline="always")
def _clear(tab: np.ndarray, s: np.uint64, line: int, core: int) -> None:
    """Core ``core`` holds no copy of ``line``: its bit leaves the entry at ``s``, if that
    is still the line's."""
    if tab[s] == np.uint64(line) + np.uint64(1):
        tab[s + np.uint64(1)] &= ~_bit(core)


@numba.njit(cache=True, inline="always")
def _mark(tab: np.ndarray, core: int, line: int) -> None:
    """Core ``core`` asks the L3 for ``line``: its bit in the line's entry, if any."""
    s = _slot(tab, line)
    if tab[s] == np.uint64(line) + np.uint64(1):
        tab[s + np.uint64(1)] |= _bit(core)


@numba.njit(cache=True, inline="always")
def _next_core(word: np.uint64, o: int, cores: int) -> int:
    """The smallest core above ``o`` whose bit (``core % 64``) is in ``word``; ``cores`` when
    none is. Cores come in ascending order, as a loop over every core visits them."""
    o += 1
    while o < cores:
        rest = word >> np.uint64(o & 63)
        if rest == np.uint64(0):
            if cores <= 64:
                return cores
            o = (o | 63) + 1                # the next 64 cores start at bit 0 again
            continue
        return min(o + np.int64(trailing_zeros(rest)), cores)
    return cores
