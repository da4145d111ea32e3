"""Page-heatmap Bloom filters as bit arrays, and their overlap (popcount of the AND)."""
from __future__ import annotations

import numba
import numpy as np

from .hashing import DEFAULT_BITS, SHIFTS


@numba.njit(cache=True, nogil=True)
def _bloom_insert(group: np.ndarray, pfn: np.ndarray, ngroups: int, nbits: int) -> np.ndarray:
    """Set bit ``hash(pfn[i]) % nbits`` of filter ``group[i]`` for every ``i``.

    No checks: :func:`bloom_filters` validates. Returns ``(ngroups, ceil(nbits / 64))`` uint64
    words, bit ``b`` in word ``b // 64`` at position ``b % 64``.
    """
    words = (nbits + 63) // 64
    out = np.zeros((ngroups, words), dtype=np.uint64)
    for i in range(pfn.shape[0]):
        pf = pfn[i]
        h = pf
        h += pf >> np.uint64(9)
        h += pf >> np.uint64(18)
        h += pf >> np.uint64(27)
        h += pf >> np.uint64(36)
        h += pf >> np.uint64(45)
        b = np.int64(h % np.uint64(nbits))
        out[group[i], b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out


def bloom_filters(group: np.ndarray, pfn: np.ndarray, ngroups: int,
                  nbits: int = DEFAULT_BITS) -> np.ndarray:
    """Page-heatmaps of ``ngroups`` groups from (group, frame) pairs.

    Parameters
    ----------
    group : array of int
        Filter index of each pair, in ``[0, ngroups)``.
    pfn : array of int
        Frame number of each pair.
    ngroups : int
    nbits : int
        Page-heatmap size in bits.

    Returns
    -------
    numpy.ndarray of uint64, shape ``(ngroups, ceil(nbits / 64))``

    Raises
    ------
    ValueError
        On arrays of different lengths, a group out of range or a non-positive size.
    """
    group = np.ascontiguousarray(group, dtype=np.int64)
    pfn = np.ascontiguousarray(pfn, dtype=np.uint64)
    if group.ndim != 1 or group.shape != pfn.shape:
        raise ValueError("group and pfn must be 1-D arrays of one length")
    if int(nbits) <= 0 or int(ngroups) < 0:
        raise ValueError(f"need nbits > 0 and ngroups >= 0, got {nbits}, {ngroups}")
    if len(group) and (group.min() < 0 or group.max() >= ngroups):
        raise ValueError(f"group ids must lie in [0, {ngroups})")
    assert SHIFTS == (0, 9, 18, 27, 36, 45)  # the kernel spells the hash out
    return _bloom_insert(group, pfn, int(ngroups), int(nbits))


@numba.njit(cache=True, nogil=True)
def _overlap(filters: np.ndarray) -> np.ndarray:
    """Popcount of the AND of every pair of rows of ``filters``."""
    n, w = filters.shape
    out = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in range(i, n):
            c = 0
            for k in range(w):
                x = filters[i, k] & filters[j, k]
                # SWAR popcount of one 64-bit word.
                x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
                x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2))
                                                           & np.uint64(0x3333333333333333))
                x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
                c += np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))
            out[i, j] = c
            out[j, i] = c
    return out


def overlap_matrix(filters: np.ndarray) -> np.ndarray:
    """Overlap of every pair of Page-heatmaps: the Hamming weight of their AND (Fig 3).

    Parameters
    ----------
    filters : numpy.ndarray of uint64, shape ``(n, words)``

    Returns
    -------
    numpy.ndarray of int64, shape ``(n, n)``; the diagonal holds each filter's weight.
    """
    f = np.ascontiguousarray(filters, dtype=np.uint64)
    if f.ndim != 2:
        raise ValueError("filters must be a 2-D array (one row per Page-heatmap)")
    return _overlap(f)


def unpack_bits(filters: np.ndarray, nbits: int) -> np.ndarray:
    """Filters as a ``(n, nbits)`` array of 0/1 (bit ``b`` in column ``b``), for pictures."""
    f = np.ascontiguousarray(filters, dtype=np.uint64)
    bits = np.unpackbits(f.view(np.uint8).reshape(len(f), -1), axis=1, bitorder="little")
    return bits[:, :nbits]
