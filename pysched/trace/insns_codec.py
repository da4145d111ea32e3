"""The gap encoding of ``insns`` parts: instruction addresses derived from their block's.

Within a translation block the instructions follow one another, so an instruction's virtual
address is its block's (``blocks.vaddr``) plus the sizes before it, and its position
(``idx``) is its row's place among its block's rows. Its guest-physical address differs from
the virtual one by the same amount as the instruction before it unless the block crossed into
a virtual page that maps elsewhere. The encoding (``insns-gap/1``) keeps, per instruction,

* ``block``, ``size`` and ``flags`` as in the plain table, a block's rows consecutive and in
  ``idx`` order within one part;
* ``pgap``: ``(paddr - vaddr)`` of its block's first instruction there, and for the others
  the change of ``(paddr - vaddr)`` from the instruction before (0 unless a page boundary
  moved it). Arithmetic is modulo 2**64, so an unknown frame (``paddr`` 2**64-1) is carried
  exactly like any other.

Decoding needs the ``blocks`` table (a block's ``vaddr``); it gives the plain table's six
columns. The plugin writes ``insns`` parts this way (on the shipped traces 4.5-6.8 times
smaller than the plain columns at the same zstd level: qemu-plugin/README.md);
``pysched trace --compact`` re-writes plain ones (older plugins') in it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa

#: ``pysched.encoding`` of an ``insns`` part in this encoding.
INSNS_GAP = "insns-gap/1"
#: The columns of an encoded part.
ENCODED_SCHEMA = pa.schema([("block", pa.uint32()), ("size", pa.uint8()), ("flags", pa.uint8()),
                            ("pgap", pa.uint64())])

_u64 = np.uint64
#: ``vaddr`` and ``paddr`` of the rows of a block the ``blocks`` table lacks.
UNKNOWN = _u64(2**64 - 1)


def _segments(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's segment (a run of rows of one block) and each segment's first row."""
    n = len(block)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = block[1:] != block[:-1]
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1
    return seg, starts


def _exclusive_in_segment(values: np.ndarray, seg: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """For each row, the sum (uint64, modulo 2**64) of its segment's values before it."""
    total = np.cumsum(values, dtype=_u64)
    before = total - values
    return before - before[starts][seg]


#: ``block_vaddr(ids) -> (vaddr, found)``: see :func:`decode_insns`.
BlockVaddr = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


def decode_insns(encoded: pa.Table, block_vaddr: BlockVaddr) -> pa.Table:
    """The plain ``insns`` columns of an encoded part.

    Parameters
    ----------
    encoded : pyarrow.Table
        The part's ``block``, ``size``, ``flags`` and ``pgap`` columns.
    block_vaddr : callable
        ``block_vaddr(ids) -> (vaddr, found)``: each block id's ``blocks.vaddr`` (uint64) and
        whether the ``blocks`` table has it.

    Returns
    -------
    pyarrow.Table
        ``block``, ``idx``, ``vaddr``, ``paddr``, ``size``, ``flags``.

        A block that ``blocks`` lacks (a damaged trace, which ``pysched check`` rejects:
        instructions of a block not in the blocks table) has no address to start from: its
        rows get ``vaddr`` and ``paddr`` 2**64-1.

    Raises
    ------
    ValueError
        When a block has more consecutive rows than ``idx`` can number (naming it).
    """
    block = encoded.column("block").to_numpy()
    size = encoded.column("size").to_numpy()
    pgap = encoded.column("pgap").to_numpy().astype(_u64, copy=False)
    seg, starts = _segments(block)
    pos = np.arange(len(block), dtype=np.int64) - starts[seg]
    too_long = pos > np.iinfo(np.uint16).max
    if too_long.any():
        row = int(np.argmax(too_long))
        raise ValueError(f"block {int(block[row])} has more than 65,536 consecutive rows "
                         f"(row {row} is its 65,537th)")
    base, found = block_vaddr(block[starts])
    vaddr = np.asarray(base, dtype=_u64)[seg] + _exclusive_in_segment(size.astype(_u64), seg,
                                                                    starts)
    # the row's own gap is in (paddr - vaddr): the inclusive sum
    paddr = vaddr + _exclusive_in_segment(pgap, seg, starts) + pgap
    orphan = ~np.asarray(found, dtype=bool)[seg]
    vaddr[orphan] = paddr[orphan] = UNKNOWN
    return pa.table({
        "block": pa.array(block, pa.uint32()),
        "idx": pa.array(pos.astype(np.uint16), pa.uint16()),
        "vaddr": pa.array(vaddr, pa.uint64()),
        "paddr": pa.array(paddr, pa.uint64()),
        "size": encoded.column("size"),
        "flags": encoded.column("flags"),
    })


def encode_insns(plain: pa.Table) -> pa.Table:
    """The encoded columns of a plain ``insns`` part (its rows in the plugin's order: a block's
    rows consecutive, ``idx`` 0, 1, ...).

    The encoding keeps only what :func:`decode_insns` cannot derive; a part that breaks its
    assumptions (rows of a block apart or out of order, an instruction not at the end of the
    one before) does not decode to itself, which the caller checks (``pysched trace
    --compact`` does, and leaves such a part as it is).
    """
    block = plain.column("block").to_numpy()
    vaddr = plain.column("vaddr").to_numpy().astype(_u64, copy=False)
    paddr = plain.column("paddr").to_numpy().astype(_u64, copy=False)
    offset = paddr - vaddr
    pgap = offset.copy()
    if len(block) > 1:
        same = block[1:] == block[:-1]
        pgap[1:][same] = offset[1:][same] - offset[:-1][same]
    return pa.table({"block": plain.column("block"), "size": plain.column("size"),
                     "flags": plain.column("flags"), "pgap": pa.array(pgap, pa.uint64())})


__all__ = ["ENCODED_SCHEMA", "INSNS_GAP", "decode_insns", "encode_insns"]
