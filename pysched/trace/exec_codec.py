"""The successor encodings of ``exec`` parts: each block predicted from the blocks that ran
after the block before it.

A vCPU's exec stream is one block id per executed block, and most blocks are followed by
the block that followed them the time before (the body of a loop, a call into the same
function, the fall-through of a branch that went the same way); a block that is not is most
often one that followed it earlier (the other way of a branch, a return to another caller).
The plugin writes an exec part as rows of two columns, in the encoding ``exec-successor/2``
(:data:`EXEC_SUCCESSOR`):

- ``code`` (uint32): the block that starts the row, given for the block ``p`` that ran
  before it. Every block has a list of the last :data:`SUCCESSORS` distinct blocks that
  followed it in this part, most recent first. Code ``r`` in ``1 .. SUCCESSORS - 1``: the
  ``r``-th of ``p``'s list; code ``SUCCESSORS + z``: the block ``p + d``, ``z`` the zigzag
  form of the signed difference ``d`` (``2d`` when ``d >= 0``, else ``-2d - 1``; ids made
  close together are close, and a block first seen is often a new id). The block moves to the
  front of ``p``'s list. The part's first row has no ``p``: it is coded against block 0, and
  its block is learnt as no one's successor.
- ``run`` (uint32): how many blocks after it each followed the previous one the last time
  that one ran (the front of its list).

Key ``pysched.encoding`` holds the encoding and ``pysched.exec_rows`` the decoded rows (so
that row counts, prefixes and ``exec_row`` references need no decoding). Every part decodes
on its own: the lists start empty in each. The reader decodes a part back to the ``block``
column, row for row; ``exec_row`` in the event tables counts decoded rows.

Traces written before it hold ``exec-successor/1`` (:data:`EXEC_SUCCESSOR_V1`; one successor
per block, columns ``block``, the block id itself, and ``run``), which the reader decodes too.
Both have the same rows (a row starts where the front of the list, the last successor,
missed); measured on the 17 shipped traces (``benchmarks/exec_encoding.py``), ``/2`` parts
are 1.13-1.54 times smaller than ``/1`` at zstd 1.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from .mem_codec import META_ENCODING

#: Value of the part metadata key ``pysched.encoding`` for the encoding the plugin writes.
EXEC_SUCCESSOR = "exec-successor/2"
#: The encoding of exec parts written before it (read, never written).
EXEC_SUCCESSOR_V1 = "exec-successor/1"
#: Part metadata key holding the number of decoded rows.
META_ROWS = "pysched.exec_rows"
#: Columns of an encoded part, per encoding.
ENCODED_SCHEMAS: dict[str, pa.Schema] = {
    EXEC_SUCCESSOR: pa.schema([("code", pa.uint32()), ("run", pa.uint32())]),
    EXEC_SUCCESSOR_V1: pa.schema([("block", pa.uint32()), ("run", pa.uint32())]),
}
#: Length of each block's successor list (codes below it are ranks in the list).
SUCCESSORS = 4
#: An empty place in a successor list (no block has this id: the plugin's ids stay below it).
NONE = np.uint32(0xFFFFFFFF)
#: Largest block id a part may hold.
MAX_BLOCK_ID = (1 << 30) - 1


@numba.njit(cache=True, nogil=True)
def _encode(blocks: np.ndarray, out_code: np.ndarray, out_run: np.ndarray, nids: int) -> int:
    """Encode ``blocks`` into ``out_code``/``out_run`` (each as long as ``blocks``) in
    ``exec-successor/2``; the number of encoded rows."""
    k = 4  # SUCCESSORS
    succ = np.full((nids, k), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    m = 0
    prev = 0
    for i in range(len(blocks)):
        x = blocks[i]
        if i > 0 and succ[prev, 0] == x:
            out_run[m - 1] += 1
            prev = x
            continue
        rank = 0
        if i > 0:
            for j in range(1, k):
                if succ[prev, j] == x:
                    rank = j
                    break
            last = rank if rank > 0 else k - 1
            for j in range(last, 0, -1):  # x to the front, the ones before it one back
                succ[prev, j] = succ[prev, j - 1]
            succ[prev, 0] = x
        if rank > 0:
            out_code[m] = rank
        else:
            d = np.int64(x) - np.int64(prev)
            out_code[m] = k + (2 * d if d >= 0 else -2 * d - 1)
        out_run[m] = 0
        m += 1
        prev = x
    return m


@numba.njit(cache=True, nogil=True)
def _encode_v1(blocks: np.ndarray, out_block: np.ndarray, out_run: np.ndarray,
               nids: int) -> int:
    """Encode ``blocks`` into ``out_block``/``out_run`` (each as long as ``blocks``) in
    ``exec-successor/1``; the number of encoded rows."""
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
def _decode(code: np.ndarray, run: np.ndarray, out: np.ndarray, max_id: int) -> int:
    """Decode ``exec-successor/2`` into ``out`` (``len(code) + sum(run)`` long); -1, or the
    encoded row that asks for a block the part cannot give (an empty place in a list, a code
    of 0, an id below 0 or above ``max_id``)."""
    k = 4  # SUCCESSORS
    cap = 1 << 12
    succ = np.full((cap, k), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    pos = 0
    prev = 0
    for r in range(len(code)):
        c = np.int64(code[r])
        if c < k:
            if r == 0 or c == 0:
                return r
            x = np.int64(succ[prev, c])
            if x == 0xFFFFFFFF:
                return r
            last = c
        else:
            z = c - k
            x = np.int64(prev) + ((z >> 1) ^ -(z & 1))
            if x < 0 or x > max_id:
                return r
            last = k - 1
        if x >= cap:  # grow the lists to hold x's
            grown = np.full((max(2 * cap, x + 1), k), np.uint32(0xFFFFFFFF), dtype=np.uint32)
            grown[:cap] = succ
            succ = grown
            cap = len(succ)
        if r > 0:
            for j in range(last, 0, -1):
                succ[prev, j] = succ[prev, j - 1]
            succ[prev, 0] = x
        out[pos] = x
        pos += 1
        prev = x
        for _ in range(run[r]):
            x = np.int64(succ[prev, 0])
            if x == 0xFFFFFFFF:
                return r
            out[pos] = x
            pos += 1
            prev = x
    return -1


@numba.njit(cache=True, nogil=True)
def _decode_v1(block: np.ndarray, run: np.ndarray, out: np.ndarray, nids: int) -> int:
    """Decode ``exec-successor/1`` into ``out`` (``len(block) + sum(run)`` long); -1, or the
    encoded row whose run asks for a prediction the table does not have."""
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


def _schema(encoding: str) -> pa.Schema:
    """The encoded columns of ``encoding``; ValueError naming the known ones otherwise."""
    if encoding not in ENCODED_SCHEMAS:
        raise ValueError(f"unknown exec encoding {encoding!r} (known: "
                         f"{', '.join(sorted(ENCODED_SCHEMAS))})")
    return ENCODED_SCHEMAS[encoding]


def encode_exec(blocks: np.ndarray, encoding: str = EXEC_SUCCESSOR) -> pa.Table:
    """Encode one part's block ids (see the module).

    Parameters
    ----------
    blocks : numpy.ndarray of uint32
        The part's exec rows.
    encoding : str
        A key of :data:`ENCODED_SCHEMAS`: the plugin's (default), or ``exec-successor/1`` to
        compare with traces of older plugins.

    Returns
    -------
    pyarrow.Table
        The columns of ``ENCODED_SCHEMAS[encoding]``, with the encoding and the row count
        (:data:`META_ROWS`) in its schema metadata.

    Raises
    ------
    ValueError
        When the encoding is unknown or a block id is above :data:`MAX_BLOCK_ID`.
    """
    schema = _schema(encoding)
    blocks = np.ascontiguousarray(blocks, dtype=np.uint32)
    top = int(blocks.max()) if len(blocks) else 0
    if top > MAX_BLOCK_ID:
        raise ValueError(f"block id {top} is above {MAX_BLOCK_ID}: not an exec stream")
    out_first = np.empty(len(blocks), dtype=np.uint32)
    out_run = np.empty(len(blocks), dtype=np.uint32)
    encode = _encode if encoding == EXEC_SUCCESSOR else _encode_v1
    m = encode(blocks, out_first, out_run, top + 1)
    meta = {META_ENCODING.encode(): encoding.encode(),
            META_ROWS.encode(): str(len(blocks)).encode()}
    return pa.table({schema.names[0]: out_first[:m], "run": out_run[:m]},
                    schema=schema.with_metadata(meta))


def decode_exec(encoded: pa.Table, rows: int, encoding: str = EXEC_SUCCESSOR) -> np.ndarray:
    """The block ids an encoded part stands for.

    Parameters
    ----------
    encoded : pyarrow.Table
        The part's columns (``ENCODED_SCHEMAS[encoding]``).
    rows : int
        Its decoded row count (metadata :data:`META_ROWS`).
    encoding : str
        A key of :data:`ENCODED_SCHEMAS`.

    Returns
    -------
    numpy.ndarray of uint32

    Raises
    ------
    ValueError
        When the encoding is unknown, the columns do not make ``rows`` rows, or a row asks
        for a block the part cannot give (an id above :data:`MAX_BLOCK_ID` or below 0, a
        successor the part never recorded; the message names the encoded row); the caller
        adds the file's name.
    """
    first_name, run_name = _schema(encoding).names
    first = np.ascontiguousarray(encoded.column(first_name).to_numpy(), dtype=np.uint32)
    run = np.ascontiguousarray(encoded.column(run_name).to_numpy(), dtype=np.uint32)
    total = len(first) + int(run.sum(dtype=np.uint64))
    if total != rows:
        raise ValueError(f"its columns make {total} rows, its metadata {META_ROWS} says "
                         f"{rows}")
    out = np.empty(rows, dtype=np.uint32)
    if encoding == EXEC_SUCCESSOR_V1:
        top = int(first.max()) if len(first) else 0
        if top > MAX_BLOCK_ID:
            raise ValueError(f"block id {top} is above {MAX_BLOCK_ID}")
        bad = _decode_v1(first, run, out, top + 1)
    else:
        bad = _decode(first, run, out, MAX_BLOCK_ID)
    if bad >= 0:
        raise ValueError(f"encoded row {bad} ({first_name} {int(first[bad])}, run "
                         f"{int(run[bad])}) asks for a block the part cannot give: a successor "
                         f"it has not recorded, or an id below 0 or above {MAX_BLOCK_ID}")
    return out


__all__ = ["ENCODED_SCHEMAS", "EXEC_SUCCESSOR", "EXEC_SUCCESSOR_V1", "MAX_BLOCK_ID",
           "META_ROWS", "SUCCESSORS", "decode_exec", "encode_exec"]
