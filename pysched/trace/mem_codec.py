"""The compact encoding of ``mem`` parts: each access's address as a delta from the last
address the same instruction operand touched.

The plugin writes ``mem`` as ``(icount, paddr, size, store)``. Data addresses are hard for a
general compressor (about 0.6 byte an access after zstd), but most of them repeat or stride
from what the same instruction touched the time before: a stack slot, the next element of an
array. ``pysched trace --compact`` re-writes every ``mem`` part as

- ``gap`` (uint32): ``icount`` minus the previous row's (the first row's ``icount`` is in the
  part's metadata, ``pysched.mem_first_icount``);
- ``kind`` (uint8): ``size | store << 7``;
- ``pdelta`` (uint64): ``paddr`` minus its prediction, zigzag-coded. The prediction is the
  last ``paddr`` of the same *site* (the instruction's virtual address and the access's rank
  among that instruction's accesses, capped at 7) earlier in the part, or the previous row's
  ``paddr`` for a site not seen yet;

with key ``pysched.encoding`` = :data:`MEM_SITE_DELTA` and the part's first and last
``icount`` in the metadata (so that :meth:`pysched.trace.reader.Trace.window` still skips
parts). On ``dss-mem`` this is 0.31 byte an access against 0.80 for the plugin's own encoding.
Every part decodes on its own (the site table starts empty in each), and the reader decodes
it back to the plugin's four columns, bit for bit; decoding needs the vCPU's ``exec`` stream
and blocks for the instructions' addresses.

The site table is a fixed open-addressing table of :data:`SITE_SLOTS` slots that stops taking
new sites when half full; encoder and decoder follow the same rule, so a part with more
distinct sites than that only predicts less well.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from .reader import Trace

#: Value of the part metadata key ``pysched.encoding`` for site-delta ``mem`` parts.
MEM_SITE_DELTA = "mem-site-delta/1"
META_ENCODING = "pysched.encoding"
META_FIRST_ICOUNT = "pysched.mem_first_icount"
META_LAST_ICOUNT = "pysched.mem_last_icount"

#: Columns of an encoded part.
ENCODED_SCHEMA = pa.schema([("gap", pa.uint32()), ("kind", pa.uint8()),
                            ("pdelta", pa.uint64())])

#: Slots of the per-part site table (16 bytes each); new sites stop being added at half.
SITE_SLOTS = 1 << 20

@numba.njit(cache=True, nogil=True)
def _site_codec(icount: np.ndarray, pc: np.ndarray, values: np.ndarray,
                decode: bool, bits: int) -> np.ndarray:
    """Turn addresses into deltas from their site's last address (``decode`` False) or back.

    ``values`` are addresses when encoding and deltas when decoding; the result is the other.
    Arithmetic wraps modulo 2**64 both ways.
    """
    n = len(icount)
    slots = 1 << bits
    out = np.empty(n, dtype=np.uint64)
    keys = np.zeros(slots, dtype=np.uint64)
    last = np.zeros(slots, dtype=np.uint64)
    used = np.zeros(slots, dtype=np.bool_)
    mask = np.uint64(slots - 1)
    shift = np.uint64(64 - bits)
    filled = 0
    prev = np.uint64(0)
    rank = 0
    for i in range(n):
        rank = rank + 1 if i > 0 and icount[i] == icount[i - 1] else 0
        key = pc[i] * np.uint64(8) + np.uint64(min(rank, 7))
        slot = (key * np.uint64(0x9E3779B97F4A7C15)) >> shift
        while used[slot] and keys[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        pred = last[slot] if used[slot] else prev
        if decode:
            addr = pred + values[i]
            out[i] = addr
        else:
            addr = values[i]
            out[i] = addr - pred
        if used[slot]:
            last[slot] = addr
        elif 2 * filled < slots:
            used[slot] = True
            keys[slot] = key
            last[slot] = addr
            filled += 1
        prev = addr
    return out


def _bits(slots: int) -> int:
    bits = int(slots).bit_length() - 1
    if slots < 2 or 1 << bits != slots:
        raise ValueError(f"slots must be a power of two >= 2 (got {slots})")
    return bits


def _zigzag(d: np.ndarray) -> np.ndarray:
    s = d.view(np.int64)
    return ((s << np.int64(1)) ^ (s >> np.int64(63))).view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return (z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))


def instruction_pcs(trace: Trace, vcpu: int, icount: np.ndarray) -> np.ndarray:
    """Virtual address of the instructions ``icount`` of ``vcpu`` (0 past the stream's end).

    The vCPU's exec rows and their starting counters are built once per :class:`Trace`.
    """
    from .blockindex import block_index
    from .expand import _cumulative, _gather
    cache = trace._cache.setdefault("mem_codec_rows", {})
    if vcpu not in cache:
        pos, sizes, first = _gather(trace, vcpu)
        cache[vcpu] = (pos, _cumulative(sizes, first))
    pos, row_start = cache[vcpu]
    idx = block_index(trace)
    ic = np.asarray(icount, dtype=np.int64)
    inside = (ic >= row_start[0]) & (ic < row_start[-1])
    row = np.searchsorted(row_start, ic[inside], side="right") - 1
    out = np.zeros(len(ic), dtype=np.uint64)
    out[inside] = idx.insn_vaddr[idx.start[pos[row]] + (ic[inside] - row_start[row])]
    return out


def encode_mem(table: pa.Table, pc: np.ndarray, slots: int = SITE_SLOTS) -> pa.Table:
    """Encode a ``mem`` part's rows (the plugin's schema) given each row's instruction address.

    Parameters
    ----------
    table : pyarrow.Table
        Columns ``icount``, ``paddr``, ``size``, ``store``, rows in ``icount`` order.
    pc : numpy.ndarray of uint64
        Virtual address of each row's instruction (:func:`instruction_pcs`).
    slots : int
        Site table size, a power of two (the decoder must use the same).

    Returns
    -------
    pyarrow.Table
        ``gap``, ``kind``, ``pdelta`` with the encoding's metadata (the first and last icount).

    Raises
    ------
    ValueError
        When rows are out of ``icount`` order, a gap exceeds 2**32 - 1, or a size 128 bytes
        or more.
    """
    icount = table.column("icount").to_numpy().astype(np.uint64)
    paddr = table.column("paddr").to_numpy().astype(np.uint64)
    size = table.column("size").to_numpy().astype(np.uint8)
    store = table.column("store").to_numpy().astype(np.uint8)
    gaps = np.diff(icount.astype(np.int64), prepend=np.int64(icount[0]) if len(icount) else 0)
    if len(gaps) and gaps.min() < 0:
        raise ValueError("mem rows are not in icount order")
    if len(gaps) and gaps.max() > np.iinfo(np.uint32).max:
        raise ValueError(f"a gap of {int(gaps.max())} instructions between data accesses "
                         "does not fit the encoding's uint32")
    if len(size) and size.max() >= 128:
        raise ValueError(f"an access of {int(size.max())} bytes does not fit the encoding")
    delta = _site_codec(icount, np.asarray(pc, dtype=np.uint64), paddr, False, _bits(slots))
    out = pa.table({"gap": pa.array(gaps.astype(np.uint32)),
                    "kind": pa.array(size | ((store != 0).astype(np.uint8) << np.uint8(7))),
                    "pdelta": pa.array(_zigzag(delta))}, schema=ENCODED_SCHEMA)
    meta = dict(table.schema.metadata or {})
    meta.update({META_ENCODING.encode(): MEM_SITE_DELTA.encode(),
                 META_FIRST_ICOUNT.encode(): str(int(icount[0]) if len(icount) else 0).encode(),
                 META_LAST_ICOUNT.encode(): str(int(icount[-1]) if len(icount) else -1).encode()})
    return out.replace_schema_metadata(meta)


def decoded_icount(encoded: pa.Table, first_icount: int) -> np.ndarray:
    """The ``icount`` column of an encoded part."""
    gaps = encoded.column("gap").to_numpy().astype(np.uint64)
    ic = np.cumsum(gaps, dtype=np.uint64)
    if len(ic):
        ic += np.uint64(first_icount)
    return ic


def decode_mem(encoded: pa.Table, first_icount: int, pc: np.ndarray,
               slots: int = SITE_SLOTS) -> pa.Table:
    """The plugin's ``mem`` columns of an encoded part (the inverse of :func:`encode_mem`).

    ``pc`` is the instruction address of each row, for the rows' :func:`decoded_icount`.
    """
    icount = decoded_icount(encoded, first_icount)
    kind = encoded.column("kind").to_numpy().astype(np.uint8)
    delta = _unzigzag(encoded.column("pdelta").to_numpy().astype(np.uint64))
    paddr = _site_codec(icount, np.asarray(pc, dtype=np.uint64), delta, True, _bits(slots))
    return pa.table({"icount": icount, "paddr": paddr,
                     "size": kind & np.uint8(0x7F), "store": kind >> np.uint8(7)})


__all__ = ["ENCODED_SCHEMA", "MEM_SITE_DELTA", "SITE_SLOTS", "decode_mem", "decoded_icount",
           "encode_mem", "instruction_pcs"]
