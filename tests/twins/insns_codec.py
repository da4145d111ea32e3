"""Twin of :mod:`pysched.trace.insns_codec`: the gap encoding one row at a time, Python integers
modulo 2**64."""
from __future__ import annotations

M64 = (1 << 64) - 1


def slow_encode(block, vaddr, paddr) -> list[int]:
    """Each row's ``pgap``: ``paddr - vaddr`` on a block's first row, else its change from the
    row before."""
    out = []
    prev_block, prev_off = None, 0
    for b, v, p in zip(block, vaddr, paddr):
        off = (int(p) - int(v)) & M64
        out.append(off if b != prev_block else (off - prev_off) & M64)
        prev_block, prev_off = b, off
    return out


def slow_decode(block, size, pgap, vaddr_of: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """``(block, idx, vaddr, paddr)`` of each row: a new block starts at its ``blocks`` vaddr,
    each row after it at the end of the one before."""
    out = []
    prev_block, idx, va, off, prev_size = None, 0, 0, 0, 0
    for b, s, g in zip(block, size, pgap):
        if b != prev_block:
            idx, va, off = 0, vaddr_of[int(b)], int(g)
        else:
            idx, va, off = idx + 1, (va + prev_size) & M64, (off + int(g)) & M64
        out.append((int(b), idx, va, (va + off) & M64))
        prev_block, prev_size = b, int(s)
    return out
