"""The successor encoding of ``exec`` parts: each block predicted from the block that ran
before it.

A vCPU's exec stream is one block id per executed block, and most blocks are followed by
the block that followed them the time before (the body of a loop, a call into the same
function, the fall-through of a branch that went the same way). The plugin writes an exec
part as rows of two columns:

- ``block`` (uint32): a block that the prediction missed (or the part's first block);
- ``run`` (uint32): how many blocks after it the prediction got right, each the block that
  followed the previous one the last time it ran in this part,

with key ``pysched.encoding`` = :data:`EXEC_SUCCESSOR` and the decoded rows in
``pysched.exec_rows`` (so that row counts, prefixes and ``exec_row`` references need no
decoding). Every part decodes on its own: the successor table starts empty in each. The
reader decodes a part back to the ``block`` column, row for row; ``exec_row`` in the event
tables counts decoded rows.

On shipped traces (iscp, netserver-10b, apache-short, find, dss) the encoding keeps 5-11 % of
the rows, and zstd at level 1 makes a part 2-5 times smaller than the plain ``block`` column
(byte stream split) it replaces.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from .mem_codec import META_ENCODING

#: Value of the part metadata key ``pysched.encoding`` for successor-encoded ``exec`` parts.
EXEC_SUCCESSOR = "exec-successor/1"
#: Part metadata key holding the number of decoded rows.
META_ROWS = "pysched.exec_rows"
#: Columns of an encoded part.
ENCODED_SCHEMA = pa.schema([("block", pa.uint32()), ("run", pa.uint32())])
#: A successor table entry with no block yet (no block has this id: the plugin's ids stay
#: below it).
NONE = np.uint32(0xFFFFFFFF)
#: Largest block id a part may hold (the decoder's table has one entry per id up to it).
MAX_BLOCK_ID = (1 << 30) - 1


@numba.njit(cache=True, nogil=True)
def _encode(blocks: np.ndarray, out_block: np.ndarray, out_run: np.ndarray,
            nids: int) -> int:
    """Encode ``blocks`` into ``out_block``/``out_run`` (each as long as ``blocks``); the
    number of encoded rows."""
    succ = np.full(nids, np.uint32(0xFFFFFFFF), dtype=np.uint32)
    m = 0
    prev = 0
    for i in range(len(blocks)):
        x = blocks[i]
        if m > 0 and succ[prev] == x:
            out_run[m - 1] += 1
        else:
            if m > 0:
                succ[prev] = x
            out_block[m] = x
            out_run[m] = 0
            m += 1
        prev = x
    return m


@numba.njit(cache=True, nogil=True)
def _decode(block: np.ndarray, run: np.ndarray, out: np.ndarray, nids: int) -> int:
    """Decode into ``out`` (``len(block) + sum(run)`` long); -1, or the encoded row whose run
    asks for a prediction the table does not have."""
    succ = np.full(nids, np.uint32(0xFFFFFFFF), dtype=np.uint32)
    pos = 0
    prev = 0
    for k in range(len(block)):
        x = block[k]
        if k > 0:
            succ[prev] = x
        out[pos] = x
        pos += 1
        prev = x
        for _ in range(run[k]):
            x = succ[prev]
            if x == np.uint32(0xFFFFFFFF):
                return k
            out[pos] = x
            pos += 1
            prev = x
    return -1


def encode_exec(blocks: np.ndarray) -> pa.Table:
    """Encode one part's block ids (see the module).

    Parameters
    ----------
    blocks : numpy.ndarray of uint32
        The part's exec rows.

    Returns
    -------
    pyarrow.Table
        Columns ``block`` and ``run`` (:data:`ENCODED_SCHEMA`), with the encoding and the
        row count (:data:`META_ROWS`) in its schema metadata.

    Raises
    ------
    ValueError
        When a block id is above :data:`MAX_BLOCK_ID`.
    """
    blocks = np.ascontiguousarray(blocks, dtype=np.uint32)
    top = int(blocks.max()) if len(blocks) else 0
    if top > MAX_BLOCK_ID:
        raise ValueError(f"block id {top} is above {MAX_BLOCK_ID}: not an exec stream")
    out_block = np.empty(len(blocks), dtype=np.uint32)
    out_run = np.empty(len(blocks), dtype=np.uint32)
    m = _encode(blocks, out_block, out_run, top + 1)
    meta = {META_ENCODING.encode(): EXEC_SUCCESSOR.encode(),
            META_ROWS.encode(): str(len(blocks)).encode()}
    return pa.table({"block": out_block[:m], "run": out_run[:m]},
                    schema=ENCODED_SCHEMA.with_metadata(meta))


def decode_exec(block: np.ndarray, run: np.ndarray, rows: int) -> np.ndarray:
    """The block ids an encoded part stands for.

    Parameters
    ----------
    block, run : numpy.ndarray of uint32
        The part's columns.
    rows : int
        Its decoded row count (metadata :data:`META_ROWS`).

    Returns
    -------
    numpy.ndarray of uint32

    Raises
    ------
    ValueError
        When the columns do not make ``rows`` rows, a block id is above
        :data:`MAX_BLOCK_ID`, or a run follows a block the part never saw followed (the
        message names the encoded row); the caller adds the file's name.
    """
    block = np.ascontiguousarray(block, dtype=np.uint32)
    run = np.ascontiguousarray(run, dtype=np.uint32)
    total = len(block) + int(run.sum(dtype=np.uint64))
    if total != rows:
        raise ValueError(f"its columns make {total} rows, its metadata {META_ROWS} says "
                         f"{rows}")
    top = int(block.max()) if len(block) else 0
    if top > MAX_BLOCK_ID:
        raise ValueError(f"block id {top} is above {MAX_BLOCK_ID}")
    out = np.empty(rows, dtype=np.uint32)
    bad = _decode(block, run, out, top + 1)
    if bad >= 0:
        raise ValueError(f"encoded row {bad} (block {int(block[bad])}, run {int(run[bad])}): "
                         "its run reaches a block whose successor the part has not recorded")
    return out


__all__ = ["ENCODED_SCHEMA", "EXEC_SUCCESSOR", "MAX_BLOCK_ID", "META_ROWS", "decode_exec",
           "encode_exec"]
