"""The static tables as arrays: per block, where its instructions are in ``insns``."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .reader import Trace


@dataclass(frozen=True)
class BlockIndex:
    """``blocks`` and ``insns`` arranged for lookups by block id.

    Blocks are taken from the ``blocks`` table (sorted by id); instructions from ``insns``
    sorted by ``(block, idx)``, so a block's instructions are the slice
    ``start[i]:start[i] + count[i]`` of the ``insn_*`` arrays.

    Attributes
    ----------
    ids : numpy.ndarray of uint32
        Block ids of ``blocks``, sorted (a duplicated id appears more than once).
    blocks_row : numpy.ndarray of int64
        Row of each entry of ``ids`` in the ``blocks`` table.
    vaddr, ninsn, nbytes : numpy.ndarray
        The ``blocks`` columns in ``ids`` order (``ninsn``, ``nbytes`` as int64).
    start, count : numpy.ndarray of int64
        Offset of the block's first instruction in the sorted ``insn_*`` arrays, and how many
        ``insns`` rows it has.
    well_formed : numpy.ndarray of bool
        The block's ``insns`` rows are exactly ``idx`` 0..ninsn-1 and its id is not duplicated.
    insn_block, insn_idx, insn_vaddr, insn_paddr, insn_size, insn_flags : numpy.ndarray
        ``insns`` columns sorted by ``(block, idx)``.
    insn_row : numpy.ndarray of int64
        Row of each sorted instruction in the ``insns`` table, for error messages.
    """

    ids: np.ndarray
    blocks_row: np.ndarray
    vaddr: np.ndarray
    ninsn: np.ndarray
    nbytes: np.ndarray
    start: np.ndarray
    count: np.ndarray
    well_formed: np.ndarray
    insn_block: np.ndarray
    insn_idx: np.ndarray
    insn_vaddr: np.ndarray
    insn_paddr: np.ndarray
    insn_size: np.ndarray
    insn_flags: np.ndarray
    insn_row: np.ndarray

    def lookup(self, block_ids: np.ndarray) -> np.ndarray:
        """Positions in ``ids`` of ``block_ids`` (int64), -1 where a block is not in ``blocks``."""
        block_ids = np.asarray(block_ids, dtype=np.uint32)
        dense = self._dense()
        if dense is not None:
            pos = np.full(len(block_ids), -1, dtype=np.int64)
            small = block_ids < len(dense)
            pos[small] = dense[block_ids[small]]
            return pos
        pos = np.searchsorted(self.ids, block_ids, side="left").astype(np.int64)
        inside = pos < len(self.ids)
        found = np.zeros(len(pos), dtype=bool)
        found[inside] = self.ids[pos[inside]] == block_ids[inside]
        pos[~found] = -1
        return pos

    def _dense(self) -> np.ndarray | None:
        """Id -> position table when ids are dense enough (the plugin numbers blocks from 0);
        a gather is far faster than a binary search over millions of exec rows."""
        if "_dense_table" not in self.__dict__:
            table = None
            top = int(self.ids[-1]) + 1 if len(self.ids) else 0
            if top <= 4 * len(self.ids) + 4096:
                table = np.full(top, -1, dtype=np.int64)
                # A duplicated id maps to its first position, as with searchsorted.
                first = np.flatnonzero(np.diff(self.ids.astype(np.int64), prepend=-1) != 0)
                table[self.ids[first]] = first
            object.__setattr__(self, "_dense_table", table)
        return self.__dict__["_dense_table"]


def _build(trace: Trace) -> BlockIndex:
    b = trace.table("blocks")
    bid = b.column("block").to_numpy()
    order = np.argsort(bid, kind="stable")
    ids = bid[order]
    dup = np.zeros(len(ids), dtype=bool)
    if len(ids) > 1:
        same = ids[1:] == ids[:-1]
        dup[1:] |= same
        dup[:-1] |= same

    i = trace.table("insns")
    iblock = i.column("block").to_numpy()
    iidx = i.column("idx").to_numpy()
    iorder = np.lexsort((iidx, iblock))
    sblock = iblock[iorder]
    sidx = iidx[iorder]

    start = np.searchsorted(sblock, ids, side="left").astype(np.int64)
    count = np.searchsorted(sblock, ids, side="right").astype(np.int64) - start
    ninsn = b.column("ninsn").to_numpy()[order].astype(np.int64)

    # An instruction is in place when its idx equals its position within its block's rows.
    group_start = np.searchsorted(sblock, sblock, side="left")
    misplaced = sidx.astype(np.int64) != np.arange(len(sblock), dtype=np.int64) - group_start
    cum = np.concatenate([[0], np.cumsum(misplaced, dtype=np.int64)])
    nmisplaced = cum[start + count] - cum[start]
    well_formed = (count == ninsn) & (nmisplaced == 0) & ~dup

    return BlockIndex(
        ids=ids,
        blocks_row=order.astype(np.int64),
        vaddr=b.column("vaddr").to_numpy()[order],
        ninsn=ninsn,
        nbytes=b.column("nbytes").to_numpy()[order].astype(np.int64),
        start=start,
        count=count,
        well_formed=well_formed,
        insn_block=sblock,
        insn_idx=sidx,
        insn_vaddr=i.column("vaddr").to_numpy()[iorder],
        insn_paddr=i.column("paddr").to_numpy()[iorder],
        insn_size=i.column("size").to_numpy()[iorder],
        insn_flags=i.column("flags").to_numpy()[iorder],
        insn_row=iorder.astype(np.int64),
    )


def block_index(trace: Trace) -> BlockIndex:
    """The :class:`BlockIndex` of ``trace`` (built once, then cached on the trace)."""
    idx = trace._cache.get("block_index")
    if idx is None:
        idx = trace._cache["block_index"] = _build(trace)
    return idx
