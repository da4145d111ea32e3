"""A vCPU's exec stream resolved against the block index, one part file at a time.

Long recordings have billions of exec rows; walking them part by part keeps memory at a few
arrays of one part's rows (``rows=`` of the plugin, 4 Mi by default).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .blockindex import BlockIndex, block_index
from .errors import TraceError
from .reader import Trace
from .schema import KIND_ENTRY


@dataclass(frozen=True)
class ExecChunk:
    """Consecutive exec rows of one vCPU (one part file).

    Attributes
    ----------
    start_row : int
        Exec row of the first element.
    start_icount : int
        Instruction counter at ``start_row`` (valid only if every earlier row was usable).
    blocks : numpy.ndarray of uint32
        Block ids.
    pos : numpy.ndarray of int64
        Positions in the :class:`BlockIndex`, -1 for a block not in ``blocks``.
    usable : numpy.ndarray of bool
        The block is in ``blocks`` and its ``insns`` rows are well formed.
    sizes : numpy.ndarray of int64
        Retired instructions per row (0 where not usable).
    """

    start_row: int
    start_icount: int
    blocks: np.ndarray
    pos: np.ndarray
    usable: np.ndarray
    sizes: np.ndarray

    @property
    def stop_row(self) -> int:
        return self.start_row + len(self.blocks)

    def row_icount(self) -> np.ndarray:
        """Instruction counter at the start of each row of the chunk (int64)."""
        out = np.empty(len(self.sizes), dtype=np.int64)
        if len(out):
            out[0] = self.start_icount
            np.cumsum(self.sizes[:-1], out=out[1:])
            out[1:] += self.start_icount
        return out


def truncations(trace: Trace, vcpu: int) -> tuple[np.ndarray, np.ndarray]:
    """Exec rows cut short by a synchronous exception and what they retired.

    Returns
    -------
    rows, retired : numpy.ndarray of int64
        For each interrupt entry with ``exec_row`` r > 0: row ``r - 1`` and ``block_retired``,
        sorted by row. Applying ``min(size, retired)`` is a no-op for full blocks.
    """
    t = trace.table("interrupts", vcpu)
    kind = t.column("kind").to_numpy()
    r = t.column("exec_row").to_numpy()
    sel = (kind == KIND_ENTRY) & (r > 0) & (r < 2**62)
    rows = r[sel].astype(np.int64) - 1
    retired = t.column("block_retired").to_numpy()[sel].astype(np.int64)
    order = np.argsort(rows, kind="stable")
    return rows[order], retired[order]


def _unusable_message(trace: Trace, vcpu: int, idx: BlockIndex, row: int, block: int,
                      p: int) -> str:
    if p < 0:
        why = "is not in the blocks table"
    elif idx.count[p] == 0 and idx.ninsn[p] > 0:
        why = "has no rows in the insns table"
    else:
        why = (f"has {idx.count[p]} insns rows that are not idx 0..ninsn-1 "
               f"(ninsn {idx.ninsn[p]}) or a duplicated id")
    return f"{trace.path}: vCPU {vcpu} exec row {row}: block {block} {why}"


def exec_chunks(trace: Trace, vcpu: int, strict: bool = True) -> Iterator[ExecChunk]:
    """Walk ``vcpu``'s exec stream part by part.

    Parameters
    ----------
    trace : Trace
    vcpu : int
    strict : bool
        Raise :class:`TraceError` (naming the vCPU, exec row and block id) at the first row
        whose block is missing or malformed; otherwise mark it in ``usable`` and go on.

    Yields
    ------
    ExecChunk
    """
    idx = block_index(trace)
    trows, tretired = truncations(trace, vcpu)
    row0 = icount0 = 0
    for part in trace.parts("exec", vcpu):
        blocks = trace.read_part(part).column("block").to_numpy()
        pos = idx.lookup(blocks)
        usable = pos >= 0
        usable[usable] = idx.well_formed[pos[usable]]
        if strict and not usable.all():
            i = int(np.flatnonzero(~usable)[0])
            raise TraceError(_unusable_message(trace, vcpu, idx, row0 + i, int(blocks[i]),
                                               int(pos[i])))
        sizes = np.where(usable, idx.ninsn[np.maximum(pos, 0)] if len(idx.ids) else 0, 0)
        lo, hi = np.searchsorted(trows, [row0, row0 + len(blocks)])
        np.minimum.at(sizes, trows[lo:hi] - row0, tretired[lo:hi])
        yield ExecChunk(row0, icount0, blocks, pos, usable, sizes)
        row0 += len(blocks)
        icount0 += int(sizes.sum())
